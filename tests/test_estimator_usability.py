"""What a new user runs into first: threads, default k on tiny data, nested parameters, logs."""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pytest
import torch
from _thread_spy import ThreadSpy
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV
from threadpoolctl import threadpool_info

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.estimator import prediction_threads
from nescal_sklearn.exceptions import PenaltyInactiveWarning
from nescal_sklearn.losses import LabelSmoothingLoss, NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss

FAST = dict(hidden_sizes=(16,), max_epochs=3, random_state=0)


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), y


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PenaltyInactiveWarning)
        return fn()


# -- n_threads --------------------------------------------------------------------------------
@pytest.mark.parametrize("n_threads", [1, 2])
def test_n_threads_applies_during_fit_and_predict_and_is_restored(iris, n_threads):
    X, y = iris
    before = torch.get_num_threads()
    blas_before = [info["num_threads"] for info in threadpool_info()]
    ThreadSpy.seen = []
    clf = _quiet(
        lambda: NeSCalClassifier(loss="ce", module=ThreadSpy, n_threads=n_threads, **FAST).fit(X, y)
    )
    assert set(ThreadSpy.seen) == {n_threads}
    assert torch.get_num_threads() == before
    ThreadSpy.seen = []
    clf.predict_proba(X)
    clf.decision_function(X)
    assert set(ThreadSpy.seen) == {n_threads}
    assert torch.get_num_threads() == before
    assert [info["num_threads"] for info in threadpool_info()] == blas_before


def test_n_threads_none_leaves_the_process_settings_alone(iris):
    X, y = iris
    before = torch.get_num_threads()
    ThreadSpy.seen = []
    _quiet(lambda: NeSCalClassifier(loss="ce", module=ThreadSpy, n_threads=None, **FAST).fit(X, y))
    assert set(ThreadSpy.seen) == {before}


def test_n_threads_is_restored_when_fit_raises(iris):
    X, y = iris
    before = torch.get_num_threads()
    with pytest.raises(ValueError):
        NeSCalClassifier(n_threads=1, **FAST).fit(X, y, sample_weight=np.zeros(len(y)))
    assert torch.get_num_threads() == before


def test_n_threads_zero_is_refused(iris):
    X, y = iris
    with pytest.raises(ValueError, match="The 'n_threads' parameter of NeSCalClassifier"):
        NeSCalClassifier(n_threads=0, **FAST).fit(X, y)


def test_prediction_threads_sets_a_fitted_networks_prediction_threads_only(iris):
    X, y = iris
    before = torch.get_num_threads()
    clf = _quiet(
        lambda: NeSCalClassifier(loss="ce", module=ThreadSpy, n_threads=1, **FAST).fit(X, y)
    )
    alone = clf.predict_proba(X)
    ThreadSpy.seen = []
    with prediction_threads(2):
        inside = clf.predict_proba(X)
        clf.decision_function(X)
        assert ThreadSpy.seen == [2, 2]
        ThreadSpy.seen = []
        clf.fit(X, y)  # a fit keeps its own n_threads
        assert set(ThreadSpy.seen) == {1}
        with prediction_threads(None):  # back to the network's own
            ThreadSpy.seen = []
            clf.predict(X)
            assert ThreadSpy.seen == [1]
    ThreadSpy.seen = []
    clf.predict(X)
    assert ThreadSpy.seen == [1] and torch.get_num_threads() == before
    # float32 round-off of another thread count: a linear layer's sums, about 1e-7 relative
    np.testing.assert_allclose(inside, alone, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_prediction_threads_refuses_what_is_not_a_thread_count(bad):
    with pytest.raises(ValueError, match=f"n_threads must be a positive int or None, got {bad!r}"):
        with prediction_threads(bad):
            pass


# -- default k on tiny data -----------------------------------------------------------------
def test_default_k_is_clamped_with_a_warning_naming_both_values(iris):
    X, y = iris
    rows = np.r_[0:4, 50:54, 100:104]  # 12 rows: 9 training rows after the split
    with pytest.warns(UserWarning) as record:
        clf = _quiet(lambda: NeSCalClassifier(**{**FAST, "max_epochs": 4}).fit(X[rows], y[rows]))
    messages = [str(w.message) for w in record if "n_neighbors" in str(w.message)]
    assert messages == [
        "loss__n_neighbors=10 (the recipe's value for loss='nescal') needs at least 11 "
        "training rows; got 9 after holding out validation_fraction=0.2. Using 8 neighbours "
        "instead (recorded as n_neighbors_); pass loss__n_neighbors explicitly to choose."
    ]
    assert clf.n_neighbors_ == 8
    assert clf.loss_.n_neighbors == 10  # the spec as given: fit never rewrites it
    assert clf.loss == "nescal"  # the parameter itself is untouched


def test_explicit_k_that_cannot_fit_still_raises(iris):
    X, y = iris
    rows = np.r_[0:4, 50:54, 100:104]
    for clf in (
        NeSCalClassifier(loss=NeSCalLoss(n_neighbors=10), **FAST),
        NeSCalClassifier(**FAST).set_params(loss__n_neighbors=10),
    ):
        with pytest.raises(
            ValueError,
            match=re.escape("loss__n_neighbors=10 needs at least 11 training rows; got 9"),
        ):
            clf.fit(X[rows], y[rows])


# -- nested parameters ----------------------------------------------------------------------
# Every nested parameter docs/nescal.md documents, with a value other than the default: the
# supported ones of loss="nescal", and the experimental ones of loss="nescal_experimental".
DOCUMENTED_NESTED = {
    "loss__n_neighbors": 4,
    "loss__weight": 0.5,
    "loss__warmup": 1,
    "loss__graph": "random",
    "loss__divergence": "js",
}
EXPERIMENTAL_NESTED = {
    "loss__schedule": "cosine",
    "loss__warmup_patience": 2,
    "loss__aggregation": "mean",
    "loss__reduction": "pca",
    "loss__n_components": 3,
    "loss__graph_method": "exact",
    "loss__target_temperature": 2.0,
    "loss__adaptive": "agreement",
    "loss__cache": "frozen",
}
NESTED_CASES = [("nescal", NeSCalLoss, *item) for item in sorted(DOCUMENTED_NESTED.items())] + [
    ("nescal_experimental", ExperimentalNeSCalLoss, *item)
    for item in sorted(EXPERIMENTAL_NESTED.items())
]


@pytest.mark.parametrize("as_object", [False, True], ids=["by_name", "as_object"])
@pytest.mark.parametrize(("name_of_loss", "cls", "name", "value"), NESTED_CASES)
def test_documented_nested_parameter_in_set_params_and_grid_search(
    iris, as_object, name_of_loss, cls, name, value
):
    loss = cls() if as_object else name_of_loss
    X, y = iris
    clf = NeSCalClassifier(loss=loss, **FAST).set_params(**{name: value})
    assert getattr(clf.loss, name.split("__", 1)[1]) == value
    search = GridSearchCV(
        NeSCalClassifier(loss=loss, **{**FAST, "max_epochs": 4}), {name: [value]}, cv=2
    )
    _quiet(lambda: search.fit(X, y))
    assert getattr(search.best_estimator_.loss_, name.split("__", 1)[1]) == value


@pytest.mark.parametrize(
    "loss",
    [
        "nescal",
        NeSCalLoss(),
        NeSCalLoss(base_loss="label_smoothing"),
        NeSCalLoss(base_loss=LabelSmoothingLoss()),
    ],
    ids=["name", "object", "object_base_by_name", "object_base_as_object"],
)
def test_base_loss_epsilon_nested_two_levels(iris, loss):
    X, y = iris
    grid = {"loss__base_loss": ["label_smoothing"], "loss__base_loss__epsilon": [0.05, 0.2]}
    if isinstance(loss, NeSCalLoss) and loss.base_loss != "ce":
        grid.pop("loss__base_loss")
    search = GridSearchCV(NeSCalClassifier(loss=loss, **{**FAST, "max_epochs": 4}), grid, cv=2)
    _quiet(lambda: search.fit(X, y))
    epsilons = sorted(p["loss__base_loss__epsilon"] for p in search.cv_results_["params"])
    assert epsilons == [0.05, 0.2]
    assert search.best_estimator_.loss_.base().epsilon in (0.05, 0.2)
    direct = NeSCalClassifier(loss=loss).set_params(
        loss__base_loss="label_smoothing", loss__base_loss__epsilon=0.3
    )
    assert direct.loss.base().epsilon == 0.3


def test_base_loss_parameter_on_the_default_ce_base_says_what_to_do():
    with pytest.raises(
        ValueError, match=re.escape("Invalid parameter 'epsilon' for CrossEntropyLoss")
    ):
        NeSCalClassifier().set_params(loss__base_loss__epsilon=0.1)


# -- logs -----------------------------------------------------------------------------------
def test_verbose_log_is_plain_text_when_not_a_terminal(iris, capsys):
    X, y = iris
    _quiet(lambda: NeSCalClassifier(loss="ce", verbose=1, **FAST).fit(X, y))
    out = capsys.readouterr().out
    assert "valid_loss" in out and "train_loss" in out
    assert "\x1b[" not in out


def test_verbose_log_keeps_colours_on_a_terminal(iris, monkeypatch, capsys):
    X, y = iris
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    _quiet(lambda: NeSCalClassifier(loss="ce", verbose=1, **FAST).fit(X, y))
    assert "\x1b[" in capsys.readouterr().out


# -- pickle size ----------------------------------------------------------------------------
def test_history_keeps_epoch_rows_and_drops_batch_rows(iris):
    X, y = iris
    clf = _quiet(
        lambda: NeSCalClassifier(loss=NeSCalLoss(warmup=1, n_neighbors=3), **FAST).fit(X, y)
    )
    assert all("batches" not in row for row in clf.history_)
    assert len(clf.history_) == clf.n_epochs_
    assert clf.history_[:, "train_loss"] and clf.history_[-1, "train_penalty"] >= 0
    pickle.loads(pickle.dumps(clf)).predict_proba(X)
