"""``TabularPreprocessor.imputed_row_``: what a missing value becomes in each output column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from nescal_sklearn import make_tabular_preprocessor


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.exponential(size=n),  # skewed: its median is not its mean
            "colour": rng.choice(["red", "green", "blue"], size=n, p=[0.2, 0.5, 0.3]),
            "size": pd.Categorical(rng.choice(["s", "m", "l"], size=n)),
        }
    )
    frame.loc[::7, "a"] = np.nan
    frame.loc[::5, "colour"] = np.nan
    return frame


def _all_missing(frame: pd.DataFrame) -> pd.DataFrame:
    """One row of ``frame``'s columns and dtypes, every value missing."""
    return (
        frame.iloc[:1]
        .astype(object)
        .where(np.zeros((1, frame.shape[1]), bool))
        .astype(frame.dtypes.to_dict())
    )


@pytest.mark.parametrize("numeric_scaling", ["standard", "robust", "quantile"])
def test_imputed_row_is_the_output_of_a_row_of_missing_values(numeric_scaling):
    frame = _frame()
    frame["empty_number"] = np.nan  # all missing in training: both imputers drop them
    frame["empty_text"] = pd.Series([np.nan] * len(frame), dtype=object)
    preprocessor = make_tabular_preprocessor(numeric_scaling=numeric_scaling).fit(frame)
    row = preprocessor.imputed_row_
    np.testing.assert_allclose(row, preprocessor.transform(_all_missing(frame))[0], rtol=1e-12)
    layout = preprocessor.column_layout_
    assert row.shape == (layout.n_features,) and row.dtype == np.float64
    assert len(layout.numeric) == 2 and len(layout.groups) == 2
    if numeric_scaling == "standard":  # the median of b, not its mean (which would be 0)
        assert abs(row[1]) > 0.05
    names = preprocessor.get_feature_names_out()
    for group, category in zip(layout.groups, ["green", None], strict=True):
        assert row[list(group)].sum() == 1.0
        if category is not None:  # the most frequent training category
            assert names[group[int(np.argmax(row[list(group)]))]] == f"colour_{category}"


@pytest.mark.parametrize("columns", [["a", "b"], ["colour", "size"]])
def test_imputed_row_of_one_kind_of_column(columns):
    frame = _frame()[columns]
    preprocessor = make_tabular_preprocessor().fit(frame)
    expected = preprocessor.transform(_all_missing(frame))[0]
    np.testing.assert_allclose(preprocessor.imputed_row_, expected, rtol=1e-12)


def test_imputed_row_needs_a_fit():
    with pytest.raises(NotFittedError):
        _ = make_tabular_preprocessor().imputed_row_
