"""The runner's row cap keeps every class splittable."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from nescal_bench import cap_rows, stratified_split
from nescal_bench._data import MIN_ROWS_PER_CLASS


def _imbalanced(n=5000):
    rng = np.random.default_rng(0)
    y = np.array(["big"] * (n - 12) + ["rare"] * 8 + ["tiny"] * 4)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    return X, y


def test_rare_classes_are_topped_up_to_a_splittable_count():
    X, y = _imbalanced()
    X_cap, y_cap = cap_rows(X, y, 300)
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
    X_new, y_new = cap_rows(X, y, 1000)
    np.testing.assert_array_equal(y_new, y_old)
    assert X_new.index.equals(X_old.index)


def test_make_imbalanced_follows_a_geometric_profile():
    from nescal_bench import make_imbalanced

    y = np.repeat(["a", "b", "c", "d", "e"], [400, 500, 300, 300, 50])
    kept = make_imbalanced(y, 0.01)
    counts = pd.Series(y[kept]).value_counts()
    # ranks by size: b (500), then a, c, d (ties by label), then e; n_max * 0.01**(r/4)
    expected = {"b": 500, "a": round(500 * 0.01**0.25), "c": round(500 * 0.01**0.5)}
    expected["d"] = round(500 * 0.01**0.75)
    expected["e"] = 5  # 500 * 0.01
    assert counts.to_dict() == expected
    assert np.all(np.diff(kept) > 0)  # sorted, no row twice
    np.testing.assert_array_equal(kept, make_imbalanced(y, 0.01))  # seeded


def test_make_imbalanced_keeps_small_classes_and_checks_the_ratio():
    import pytest

    from nescal_bench import make_imbalanced

    y = np.repeat([0, 1], [1000, 20])
    counts = np.bincount(y[make_imbalanced(y, 0.1)])
    np.testing.assert_array_equal(counts, [1000, 20])  # 20 < 100 already: kept whole
    with pytest.raises(ValueError, match=r"ratio must be in \(0, 1\); got 1.0"):
        make_imbalanced(y, 1.0)


def test_imbalanced_dataset_entry_loads_long_tailed_and_capped(tmp_path):
    from nescal_bench import ImbalancedSource, SklearnSource
    from nescal_bench._config import OpenMLSettings
    from nescal_bench._sources import DataContext, load_benchmark_data

    context = DataContext(None, OpenMLSettings(), 600)
    spec = ImbalancedSource(SklearnSource("digits"), 0.05)
    data = load_benchmark_data(spec, context)
    counts = np.sort(np.bincount(data.y))
    assert len(data.y) <= 600 + 10 * MIN_ROWS_PER_CLASS
    assert counts[-1] / counts[0] >= 10  # heavily imbalanced (about 1/0.05 = 20)
    assert data.name == "sklearn-digits-imbalance-0.05"
    plain = load_benchmark_data(SklearnSource("digits"), context)
    assert np.bincount(plain.y).max() / np.bincount(plain.y).min() < 1.2


def test_stratified_split_fits_the_preprocessing_on_the_training_rows_only():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "a": rng.normal(5.0, 2.0, size=200),
            "city": pd.Categorical(rng.choice(["x", "y"], size=200)),
        }
    )
    y = np.repeat([0, 1], 100)
    split = stratified_split(X, y, seed=1, fractions=(0.5, 0.25, 0.25))
    assert (len(split.y_train), len(split.y_val), len(split.y_test)) == (100, 50, 50)
    assert split.X_train.dtype == np.float32 and split.X_train.shape[1] == 3  # a + 2 one-hot
    np.testing.assert_allclose(split.X_train[:, 0].mean(), 0.0, atol=1e-5)  # scaled on train
    assert abs(split.X_test[:, 0].mean()) > 1e-4  # ... not on the test rows
    # the same split as scikit-learn's two stratified splits, row order included
    rest, test = train_test_split(np.arange(200), test_size=0.25, stratify=y, random_state=1)
    train, _ = train_test_split(rest, test_size=1 / 3, stratify=y[rest], random_state=1)
    np.testing.assert_array_equal(split.y_test, y[test])
    np.testing.assert_array_equal(split.y_train, y[train])
    expected = (X["a"].iloc[train] - X["a"].iloc[train].mean()) / X["a"].iloc[train].std(ddof=0)
    np.testing.assert_allclose(split.X_train[:, 0], expected, rtol=1e-5)
