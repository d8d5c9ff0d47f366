"""Preprocessing of tabular data: the standard preprocessor, its column layout, scalers."""

from ._layout import ColumnLayout, numeric_columns, one_hot_groups
from ._scaling import RobustSmoothClipScaler
from ._tabular import NUMERIC_SCALINGS, TabularPreprocessor, make_tabular_preprocessor

__all__ = [
    "NUMERIC_SCALINGS",
    "ColumnLayout",
    "RobustSmoothClipScaler",
    "TabularPreprocessor",
    "make_tabular_preprocessor",
    "numeric_columns",
    "one_hot_groups",
]
