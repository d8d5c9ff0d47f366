"""Benchmark anchors: LightGBMClassifier (early stopping on the given validation rows)
and TabMModule (TabM's members' logits for NeSCalClassifier)."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.metrics import log_loss
from sklearn.utils.estimator_checks import parametrize_with_checks

from nescal_sklearn.benchmark import ConfigError
from nescal_sklearn.benchmark._anchors import LightGBMClassifier, TabMModule
from nescal_sklearn.benchmark._data import Split
from nescal_sklearn.benchmark._fit import _fit
from nescal_sklearn.benchmark._methods import ClassifierMethod

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
    np.testing.assert_array_equal(off.predict_proba(X_val), model.predict_proba(X_val))


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
    split = Split(X, y, X_val, y_val, X_test, y_test, np.unique(y))
    model = _fit(LightGBMClassifier(random_state=0), split, threads=2)
    assert requested == [1, 3, 2]
    assert model.n_threads == 2
    assert model.best_iteration_ < model.n_iter_ < model.n_estimators


def test_lightgbm_in_a_benchmark_config():
    pytest.importorskip("lightgbm")
    method = ClassifierMethod.from_config(
        "methods[0].estimator", "nescal_sklearn.benchmark._anchors.LightGBMClassifier"
    )
    built = method.build({"num_leaves": 15}, seed=7)
    assert isinstance(built, LightGBMClassifier)
    assert (built.random_state, built.num_leaves, built.n_threads) == (7, 15, None)
    with pytest.raises(ConfigError, match="The 'learning_rate' parameter of LightGBMClassifier"):
        method.check_value("methods[0].params.learning_rate", "learning_rate", 0.0)


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


# --------------------------------------------------------------------------- TabM


def _n_params(module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize(
    ("params", "shape"),
    [
        ({}, (6, 32, 3)),
        ({"k": 4, "d_block": 16, "n_blocks": 1}, (6, 4, 3)),
        ({"k": 2, "d_block": 8, "arch_type": "tabm-mini"}, (6, 2, 3)),
        ({"k": 3, "d_block": 8, "arch_type": "tabm-packed"}, (6, 3, 3)),
        ({"k": 5, "d_block": 8, "numeric_embedding": "periodic"}, (6, 5, 3)),
    ],
)
def test_tabm_shapes_and_members(params, shape):
    pytest.importorskip("tabm")
    torch.manual_seed(0)
    module = TabMModule(4, 3, **params).eval()
    logits = module(torch.randn(6, 4))
    assert logits.shape == shape
    assert module.k == shape[1]
    # Members differ from the start (per-member scalings or weights).
    assert not torch.allclose(logits[:, 0], logits[:, 1])
    torch.testing.assert_close(module(torch.ones(6, 4)), module(torch.ones(6, 4)))


def test_tabm_binary_has_two_logits():
    pytest.importorskip("tabm")
    assert TabMModule(3, 2, k=2, d_block=4)(torch.zeros(5, 3)).shape == (5, 2, 2)


@pytest.mark.parametrize(
    ("arch_type", "expected"),
    [
        # n_features=3, k=4, two blocks of width 5, 2 classes; output layer: one
        # (5 x 2) weight and 2 biases per member = 4 * 12 = 48.
        # BatchEnsemble: shared weight, per-member r (in), s (out) and bias (out).
        ("tabm", (15 + 4 * 3 + 4 * 5 + 4 * 5) + (25 + 3 * 4 * 5) + 48),
        # One per-member scaling of the input (no bias), then a shared MLP.
        ("tabm-mini", 4 * 3 + (15 + 5) + (25 + 5) + 48),
        # k independent MLPs.
        ("tabm-packed", 4 * (15 + 5) + 4 * (25 + 5) + 48),
    ],
)
def test_tabm_parameter_count(arch_type, expected):
    pytest.importorskip("tabm")
    module = TabMModule(3, 2, k=4, n_blocks=2, d_block=5, arch_type=arch_type)
    assert _n_params(module) == expected


def test_tabm_default_depth_and_periodic_embedding():
    pytest.importorskip("tabm")
    plain = TabMModule(3, 2, k=2, d_block=4)
    embedded = TabMModule(3, 2, k=2, d_block=4, numeric_embedding="periodic")
    assert len(plain.tabm.backbone.blocks) == 3
    assert len(embedded.tabm.backbone.blocks) == 2
    # PeriodicEmbeddings(3, lite=False): 48 frequencies per column, then a per-column
    # linear map 96 -> 24 with bias; the first block then reads 3 * 24 columns.
    assert _n_params(embedded.tabm.num_module) == 3 * (48 + 96 * 24 + 24)
    assert embedded.tabm.backbone.blocks[0][0].in_features == 3 * 24


def test_tabm_backward_trains_every_member():
    pytest.importorskip("tabm")
    torch.manual_seed(0)
    module = TabMModule(4, 3, k=3, d_block=8, n_blocks=2)
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))
    logits = module(x)
    # Train loss: mean over members of each member's cross-entropy.
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.repeat_interleave(3))
    loss.backward()
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None, name
    # Every member's output weights get their own gradient.
    grad = module.tabm.output.weight.grad
    assert grad.shape[0] == 3 and all(grad[j].abs().sum() > 0 for j in range(3))


@pytest.mark.parametrize("arch_type", ["tabm", "tabm-mini", "tabm-packed"])
def test_tabm_embedding_layer_input(arch_type):
    pytest.importorskip("tabm")
    module = TabMModule(4, 3, k=3, d_block=7, n_blocks=2, arch_type=arch_type)
    layer = dict(module.named_modules())[module.embedding_layer_name]
    seen = {}
    pre = layer.register_forward_pre_hook(lambda m, args: seen.setdefault("input", args[0]))
    post = layer.register_forward_hook(lambda m, args, out: seen.setdefault("output", out))
    try:
        logits = module(torch.randn(5, 4))
    finally:
        pre.remove()
        post.remove()
    assert seen["input"].shape == (5, 3, 7)
    # It is the output layer: its output is the module's.
    assert seen["output"] is logits


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_features": 0}, "n_features must be an int >= 1; got 0."),
        ({"n_classes": 1}, "n_classes must be an int >= 2; got 1."),
        ({"k": 0}, "k must be an int >= 1; got 0."),
        ({"k": 2.0}, "k must be an int >= 1; got 2.0."),
        ({"n_blocks": 0}, "n_blocks must be an int >= 1; got 0."),
        ({"d_block": True}, "d_block must be an int >= 1; got True."),
        ({"dropout": 1.0}, "dropout must be a float in [0, 1); got 1.0."),
        (
            {"arch_type": "mlp"},
            "arch_type must be one of ['tabm', 'tabm-mini', 'tabm-packed']; got 'mlp'.",
        ),
        (
            {"numeric_embedding": "piecewise"},
            "numeric_embedding must be None or 'periodic'; got 'piecewise'.",
        ),
    ],
)
def test_tabm_bad_arguments(params, message):
    arguments = {"n_features": 3, "n_classes": 2, "k": 2, "d_block": 4, **params}
    with pytest.raises(ValueError, match=re.escape(message)):
        TabMModule(**arguments)


def test_tabm_bad_input_shape():
    pytest.importorskip("tabm")
    module = TabMModule(3, 2, k=2, d_block=4)
    with pytest.raises(
        ValueError, match=re.escape("TabMModule expects input of shape (n, 3); got (5, 4).")
    ):
        module(torch.zeros(5, 4))


def test_tabm_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tabm", None)
    with pytest.raises(ImportError, match=f"needs the tabm package.*{INSTALL}"):
        TabMModule(3, 2)
