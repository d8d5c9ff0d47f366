"""The benchmark's LightGBM anchor: LightGBMClassifier (early stopping on the given
validation rows). TabMModule, now the library's, is tested in ``test_tabm.py``."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.metrics import log_loss
from sklearn.utils.estimator_checks import parametrize_with_checks

from nescal_bench import ConfigError, LightGBMClassifier, validate_config
from nescal_bench._data import Split
from nescal_bench._fit import _fit
from nescal_bench._methods import ClassifierMethod

torch.set_num_threads(1)

INSTALL = re.escape('pip install -e ".[bench]"')
IRIS_NAMES = np.array(["setosa", "versicolor", "virginica"])


def _split(X, y, seed=0):
    """Shuffled train / validation / test thirds (stratification is not needed here)."""
    index = np.random.default_rng(seed).permutation(len(y))
    third = len(y) // 3
    parts = index[:third], index[third : 2 * third], index[2 * third :]
    return [(X[p], y[p]) for p in parts]


@pytest.fixture(scope="module")
def cancer():
    return _split(*load_breast_cancer(return_X_y=True))


@pytest.fixture(scope="module")
def iris_named():
    X, y = load_iris(return_X_y=True)
    return _split(X, IRIS_NAMES[y])


# --------------------------------------------------------------------------- LightGBM


@pytest.fixture(scope="module")
def stopped(cancer):
    pytest.importorskip("lightgbm")
    (X, y), (X_val, y_val), _ = cancer
    return LightGBMClassifier(random_state=0).fit(X, y, X_val=X_val, y_val=y_val)


def test_lightgbm_stops_early_at_the_round_of_lowest_validation_loss(cancer, stopped):
    (X, y), (X_val, y_val), (X_test, _) = cancer
    model = stopped
    assert model.n_iter_ < model.n_estimators == 1000
    assert model.n_iter_ == model.best_iteration_ + model.early_stopping_rounds
    # Independent reference: the same trees grown without early stopping (boosting
    # without subsampling is deterministic), validation log-loss of each prefix by
    # scikit-learn's log_loss.
    full = LightGBMClassifier(n_estimators=model.n_iter_, random_state=0).fit(X, y)
    assert full.best_iteration_ == full.n_iter_ == model.n_iter_
    losses = [
        log_loss(y_val, full.booster_.predict(X_val, num_iteration=i))
        for i in range(1, model.n_iter_ + 1)
    ]
    assert model.best_iteration_ == int(np.argmin(losses)) + 1
    # predict_proba is the prefix of best_iteration_ trees, not all the trees grown.
    p1 = full.booster_.predict(X_test, num_iteration=model.best_iteration_)
    np.testing.assert_allclose(model.predict_proba(X_test), np.column_stack([1 - p1, p1]))
    assert not np.allclose(full.predict_proba(X_test), model.predict_proba(X_test))


def test_lightgbm_multiclass_string_labels(iris_named):
    pytest.importorskip("lightgbm")
    (X, y), (X_val, y_val), (X_test, y_test) = iris_named
    model = LightGBMClassifier(random_state=0).fit(X, y, X_val=X_val, y_val=y_val)
    assert model.classes_.tolist() == IRIS_NAMES.tolist()
    assert model.best_iteration_ < model.n_iter_ < model.n_estimators
    proba = model.predict_proba(X_test)
    assert proba.shape == (len(X_test), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(
        proba, model.booster_.predict(X_test, num_iteration=model.best_iteration_)
    )
    predicted = model.predict(X_test)
    assert predicted.tolist() == IRIS_NAMES[np.argmax(proba, axis=1)].tolist()
    assert np.mean(predicted == y_test) > 0.85


def test_lightgbm_without_validation_trains_every_tree(cancer):
    pytest.importorskip("lightgbm")
    (X, y), (X_val, y_val), _ = cancer
    model = LightGBMClassifier(n_estimators=30).fit(X, y)
    assert model.n_iter_ == model.best_iteration_ == model.booster_.current_iteration() == 30
    off = LightGBMClassifier(n_estimators=30, early_stopping_rounds=None)
    off.fit(X, y, X_val=X_val, y_val=y_val)
    assert off.n_iter_ == off.best_iteration_ == 30
    # exact: the same rows and 30 trees; X_val is only evaluated, never trained on
    np.testing.assert_array_equal(off.predict_proba(X_val), model.predict_proba(X_val))


@pytest.mark.determinism
def test_lightgbm_subsample_draws_rows_with_the_seed(cancer):
    pytest.importorskip("lightgbm")
    (X, y), _, (X_test, _) = cancer

    def proba(**params):
        return LightGBMClassifier(n_estimators=20, **params).fit(X, y).predict_proba(X_test)

    # No subsampling: nothing random, the seed changes nothing.
    np.testing.assert_array_equal(proba(random_state=0), proba(random_state=1))
    # subsample < 1 is in effect (LightGBM needs subsample_freq > 0 for that).
    np.testing.assert_array_equal(
        proba(subsample=0.5, random_state=0), proba(subsample=0.5, random_state=0)
    )
    assert not np.allclose(
        proba(subsample=0.5, random_state=0), proba(subsample=0.5, random_state=1)
    )


def test_lightgbm_sample_weight_reaches_the_trees(cancer):
    pytest.importorskip("lightgbm")
    (X, y), _, (X_test, _) = cancer
    plain = LightGBMClassifier(n_estimators=20).fit(X, y)
    weighted = LightGBMClassifier(n_estimators=20).fit(
        X, y, sample_weight=np.where(y == 0, 10.0, 1.0)
    )
    assert (
        weighted.predict_proba(X_test)[:, 0].mean()
        > plain.predict_proba(X_test)[:, 0].mean() + 0.01
    )


def test_lightgbm_threads(cancer, monkeypatch):
    lightgbm = pytest.importorskip("lightgbm")
    (X, y), (X_val, y_val), (X_test, y_test) = cancer
    requested = []

    class Recording(lightgbm.LGBMClassifier):
        """Records the n_jobs asked for, then trains on 1 thread (2 threads on busy
        cores make OpenMP crawl)."""

        def fit(self, *args, **kwargs):
            requested.append(self.n_jobs)
            self.n_jobs = 1
            return super().fit(*args, **kwargs)

    monkeypatch.setattr(lightgbm, "LGBMClassifier", Recording)
    LightGBMClassifier(n_estimators=2).fit(X, y)
    LightGBMClassifier(n_estimators=2, n_threads=3).fit(X, y)
    # The runner sets n_threads (a THREAD_PARAMS name) to the budget and passes X_val.
    split = Split(
        X_train=X,
        y_train=y,
        X_val=X_val,
        y_val=y_val,
        X_test=X_test,
        y_test=y_test,
        classes=np.unique(y),
    )
    model = _fit(LightGBMClassifier(random_state=0), split, threads=2)
    assert requested == [1, 3, 2]
    assert model.n_threads == 2
    assert model.best_iteration_ < model.n_iter_ < model.n_estimators


def test_validation_rows_go_to_the_estimators_that_early_stop_on_them(cancer):
    """The library's rule (takes_validation_rows): HGB's early_stopping="auto" is not
    given X_val (below 10,000 rows it ignores them, so its fit is the same either way)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    class Recording(HistGradientBoostingClassifier):
        def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None):
            self.given_X_val_ = X_val is not None
            return super().fit(X, y, sample_weight, X_val=X_val, y_val=y_val)

    (X, y), (X_val, y_val), (X_test, y_test) = cancer
    split = Split(
        X_train=X,
        y_train=y,
        X_val=X_val,
        y_val=y_val,
        X_test=X_test,
        y_test=y_test,
        classes=np.unique(y),
    )
    for early_stopping, given in (("auto", False), (True, True), (False, False)):
        model = _fit(Recording(early_stopping=early_stopping, random_state=0), split)
        assert model.given_X_val_ is given
    auto = Recording(random_state=0)
    with_rows = auto.fit(X, y, X_val=X_val, y_val=y_val).predict_proba(X_test)
    np.testing.assert_array_equal(with_rows, _fit(auto, split).predict_proba(X_test))


def test_lightgbm_in_a_benchmark_config():
    pytest.importorskip("lightgbm")
    # the configs written before the lab left the library name it by its old path, and
    # record keys keep that path whichever is written
    for path in ("nescal_bench.LightGBMClassifier", "nescal_sklearn.benchmark.LightGBMClassifier"):
        method = ClassifierMethod.from_config("methods[0].estimator", path)
        assert method.ref == path  # as the configuration states it
        assert method.identity() == {"estimator": "nescal_sklearn.benchmark.LightGBMClassifier"}
    built = method.build({"num_leaves": 15}, seed=7)
    assert isinstance(built, LightGBMClassifier)
    assert (built.random_state, built.num_leaves, built.n_threads) == (7, 15, None)
    data = {
        "datasets": [{"sklearn": "iris"}],
        "confirm_seeds": [0],
        "methods": [{"estimator": path, "params": {"learning_rate": 0.0}}],
    }
    with pytest.raises(
        ConfigError,
        match=r"^methods\[0\]\.params\.learning_rate: The 'learning_rate' parameter of LightGBMClassifier",
    ):
        validate_config(data, check_files=False)


def test_lightgbm_bad_input(cancer):
    pytest.importorskip("lightgbm")
    (X, y), (X_val, y_val), _ = cancer
    with pytest.raises(
        ValueError,
        match=re.escape(
            "X_val and y_val must be given together (validation rows for early stopping); "
            "got X_val=an array and y_val=None."
        ),
    ):
        LightGBMClassifier().fit(X, y, X_val=X_val)
    with pytest.raises(
        ValueError,
        match=re.escape("y_val has labels [7] that are not in y; the classes of y are [0, 1]"),
    ):
        LightGBMClassifier().fit(X, y, X_val=X_val, y_val=np.where(y_val == 1, 7, 0))
    with pytest.raises(
        ValueError,
        match=re.escape("LightGBMClassifier needs at least 2 classes in y; got 1 class: [1]."),
    ):
        LightGBMClassifier().fit(X[y == 1], y[y == 1])
    with pytest.raises(
        ValueError, match=re.escape("Sample weights must contain at least one non-zero number.")
    ):
        LightGBMClassifier().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="The 'early_stopping_rounds' parameter"):
        LightGBMClassifier(early_stopping_rounds=0).fit(X, y)


def test_lightgbm_missing_package_says_how_to_install(cancer, monkeypatch):
    (X, y), _, _ = cancer
    monkeypatch.setitem(sys.modules, "lightgbm", None)
    model = LightGBMClassifier()  # constructible without lightgbm (config checks)
    with pytest.raises(ImportError, match=f"needs the lightgbm package.*{INSTALL}"):
        model.fit(X, y)
    with pytest.raises(ImportError, match=INSTALL):
        LightGBMClassifier.check_dependencies()


SAMPLE_WEIGHT_REASON = (
    "weights are not repeated rows for LightGBM: min_child_samples counts rows, not "
    "weights, and the bin boundaries depend on how many rows hold each value"
)


@parametrize_with_checks(
    [LightGBMClassifier(n_estimators=20), LightGBMClassifier(n_estimators=5, min_child_samples=1)],
    expected_failed_checks=lambda est: (
        {"check_sample_weight_equivalence_on_dense_data": SAMPLE_WEIGHT_REASON}
        if est.min_child_samples == 1
        else {}
    ),
)
def test_lightgbm_sklearn_checks(estimator, check):
    pytest.importorskip("lightgbm")
    check(estimator)
