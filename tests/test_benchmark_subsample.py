"""The runner's row cap keeps every class splittable."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from nescal_sklearn.benchmark import stratified_split
from nescal_sklearn.benchmark._data import MIN_ROWS_PER_CLASS, _subsample


def _imbalanced(n=5000):
    rng = np.random.default_rng(0)
    y = np.array(["big"] * (n - 12) + ["rare"] * 8 + ["tiny"] * 4)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    return X, y


def test_rare_classes_are_topped_up_to_a_splittable_count():
    X, y = _imbalanced()
    X_cap, y_cap = _subsample(X, y, 300)
    counts = pd.Series(y_cap).value_counts()
    assert counts["rare"] >= MIN_ROWS_PER_CLASS and counts["tiny"] >= MIN_ROWS_PER_CLASS
    assert len(y_cap) <= 300 + 2 * MIN_ROWS_PER_CLASS
    assert X_cap.index.is_unique  # no row taken twice
    stratified_split(X_cap, y_cap, seed=3)  # the 3-way stratified split now succeeds


def test_cap_is_the_plain_stratified_subsample_when_no_class_is_short():
    X, y = _imbalanced()
    y = np.where(np.arange(len(y)) < 500, "small", "big")  # 1000 of 5000 keeps ~100 small
    _, X_old, _, y_old = train_test_split(X, y, test_size=1000, stratify=y, random_state=0)
    assert np.sum(y_old == "small") >= MIN_ROWS_PER_CLASS
    X_new, y_new = _subsample(X, y, 1000)
    np.testing.assert_array_equal(y_new, y_old)
    assert X_new.index.equals(X_old.index)
