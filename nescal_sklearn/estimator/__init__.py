"""The scikit-learn estimator: ``NeSCalClassifier``, its default MLP and tabular pipeline."""

from ._backbone import LR_SCHEDULES
from ._classifier import NeSCalClassifier
from ._layers import CategoricalEmbeddings, FrontScale, ParametricActivation, PBLDEmbeddings
from ._module import MemberLinear, TabularMLP
from ._pipeline import make_tabular_pipeline, make_tabular_preprocessor
from ._scaling import RobustSmoothClipScaler

__all__ = [
    "LR_SCHEDULES",
    "CategoricalEmbeddings",
    "FrontScale",
    "MemberLinear",
    "NeSCalClassifier",
    "PBLDEmbeddings",
    "ParametricActivation",
    "RobustSmoothClipScaler",
    "TabularMLP",
    "make_tabular_pipeline",
    "make_tabular_preprocessor",
]
