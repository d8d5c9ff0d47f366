"""The scikit-learn estimator: ``NeSCalClassifier``, its default MLP and tabular pipeline."""

from ._classifier import NeSCalClassifier
from ._module import TabularMLP
from ._pipeline import make_tabular_pipeline, make_tabular_preprocessor

__all__ = ["NeSCalClassifier", "TabularMLP", "make_tabular_pipeline", "make_tabular_preprocessor"]
