"""The cross-fitting's stratified group folds are scikit-learn's, fold for fold."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import StratifiedGroupKFold

from nescal_sklearn.model_selection._group_folds import _FastStratifiedGroupKFold


def _folds(kind, n_splits, seed, y, groups):
    """The test parts, or the message of the error that refuses the split."""
    splitter = kind(n_splits, shuffle=seed is not None, random_state=seed)
    with warnings.catch_warnings():  # a class with fewer members than folds warns
        warnings.simplefilter("ignore", UserWarning)
        try:
            return [test.tolist() for _, test in splitter.split(np.zeros(y.size), y, groups)]
        except ValueError as error:
            return str(error)


@settings(max_examples=60, deadline=None)
@given(
    n_rows=st.integers(100, 600),
    n_classes=st.integers(2, 30),
    n_splits=st.integers(2, 10),
    distinct=st.floats(0.05, 1.0),  # groups per row: many singletons to a few large groups
    seed=st.one_of(st.none(), st.integers(0, 2**16)),
    data_seed=st.integers(0, 2**16),
)
def test_the_same_folds_as_scikit_learn(n_rows, n_classes, n_splits, distinct, seed, data_seed):
    rng = np.random.default_rng(data_seed)
    y = rng.integers(0, n_classes, n_rows)
    groups = rng.integers(0, max(n_splits, int(distinct * n_rows)), n_rows)
    expected = _folds(StratifiedGroupKFold, n_splits, seed, y, groups)
    assert _folds(_FastStratifiedGroupKFold, n_splits, seed, y, groups) == expected
