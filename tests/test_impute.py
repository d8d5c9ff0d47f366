"""The preprocessor's median imputer against scikit-learn's ``SimpleImputer``."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.impute import SimpleImputer
from sklearn.utils.estimator_checks import parametrize_with_checks

from nescal_sklearn.preprocessing._impute import _MedianImputer


@parametrize_with_checks([_MedianImputer(strategy="median")])
def test_sklearn_compatible_transformer(estimator, check):
    check(estimator)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.sampled_from([1, 2, 7, 600, 601]),  # numpy takes the median apart from 600 rows
    columns=st.integers(1, 4),
    missing=st.floats(0.0, 1.0),
    keep_empty=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_same_statistics_and_output_as_simple_imputer(rows, columns, missing, keep_empty, seed):
    rng = np.random.default_rng(seed)
    X = rng.choice([-2.5, 0.0, 1.0, 3.0, 1e300], size=(rows, columns)) + rng.normal(
        0, rng.choice([0.0, 1.0]), size=(rows, columns)
    )
    X[rng.random(X.shape) < missing] = np.nan
    X[:, 0] = np.nan if rng.random() < 0.2 else X[:, 0]  # a column with no value at all
    ours, theirs = (
        cls(strategy="median", keep_empty_features=keep_empty)
        for cls in (_MedianImputer, SimpleImputer)
    )
    with warnings.catch_warnings():  # both warn of a column with no value they drop
        warnings.simplefilter("ignore", UserWarning)
        expected = theirs.fit_transform(X)
        got = ours.fit_transform(X)
    np.testing.assert_array_equal(ours.statistics_, theirs.statistics_)
    np.testing.assert_array_equal(got, expected)


def test_other_strategies_and_markers_are_simple_imputer_s():
    X = np.array([[1.0, -1.0], [3.0, 2.0], [-1.0, 5.0], [4.0, -1.0]])
    for params in ({"strategy": "median", "missing_values": -1.0}, {"strategy": "mean"}):
        np.testing.assert_array_equal(
            _MedianImputer(**params).fit(X).statistics_, SimpleImputer(**params).fit(X).statistics_
        )
