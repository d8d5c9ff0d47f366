"""Behaviour of NeSCalClassifier: training phases, the sklearn contract, errors."""

from __future__ import annotations

import pickle
import re

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris, make_classification
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler
from torch import nn

from nescal_sklearn import NeSCalClassifier, PenaltyInactiveWarning, make_tabular_pipeline
from nescal_sklearn.graph import embed_rows, random_graph
from nescal_sklearn.losses import NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss

FAST = dict(hidden_sizes=(16,), max_epochs=6, batch_size=32, lr=1e-2)


def spy_on_graph_builds(monkeypatch) -> list[dict]:
    """Record every graph build: the rows it saw, its keyword arguments, its runtime."""
    seen: list[dict] = []
    original = NeSCalLoss.build_runtime

    def spy(self, module, X, **kwargs):
        runtime = original(self, module, X, **kwargs)
        embeddings, _ = embed_rows(module, X, embedding_layer=kwargs.get("embedding_layer"))
        seen.append({"X": X, "kwargs": kwargs, "runtime": runtime, "dim": embeddings.shape[1]})
        return runtime

    monkeypatch.setattr(NeSCalLoss, "build_runtime", spy)
    return seen


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


def test_fit_predict_contract(iris):
    X, y = iris
    clf = NeSCalClassifier(**FAST, random_state=0).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (150, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    # labels: predict takes the argmax of the logits; every top two are >= 0.024 apart
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(axis=1)])
    logits = clf.decision_function(X)
    np.testing.assert_allclose(
        proba, np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True), rtol=1e-6
    )
    assert clf.n_features_in_ == 4
    assert clf.score(X, y) > 0.6
    assert not clf.module_.training


def test_string_labels_and_pandas(iris):
    X, y = iris
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = NeSCalClassifier(**FAST, random_state=0).fit(frame, names)
    assert list(clf.classes_) == ["setosa", "versicolor", "virginica"]
    assert set(clf.predict(frame)) <= set(names)
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c", "d"])


@pytest.mark.determinism
def test_same_seed_gives_identical_fits(iris):
    X, y = iris
    a = NeSCalClassifier(**FAST, random_state=3).fit(X, y).predict_proba(X)
    b = NeSCalClassifier(**FAST, random_state=3).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    c = NeSCalClassifier(**FAST, random_state=4).fit(X, y).predict_proba(X)
    assert not np.array_equal(a, c)


def test_zero_weight_reproduces_cross_entropy_exactly(iris):
    """With weight 0 the penalty is computed but never enters the gradient."""
    X, y = iris
    kw = dict(FAST, early_stopping=False, random_state=0)
    ce = NeSCalClassifier(loss="ce", **kw).fit(X, y)
    zero = NeSCalClassifier(loss=NeSCalLoss(weight=0.0, warmup=2), **kw).fit(X, y)
    assert zero.graph_epoch_ == 3
    # exact: the penalty enters as 0.0 * penalty, and adding 0.0 changes no bit
    np.testing.assert_array_equal(ce.predict_proba(X), zero.predict_proba(X))
    smoothed = NeSCalClassifier(loss=NeSCalLoss(weight=1.0, warmup=2), **kw).fit(X, y)
    assert not np.array_equal(ce.predict_proba(X), smoothed.predict_proba(X))


def test_history_records_graph_and_penalty(iris):
    X, y = iris
    clf = NeSCalClassifier(
        loss=NeSCalLoss(warmup=3, n_neighbors=5, weight=1.0),
        **dict(FAST, max_epochs=8),
        random_state=0,
    ).fit(X, y)
    history = clf.history_
    assert clf.graph_epoch_ == 4
    assert [("graph_seconds" in row) for row in history] == [e == 4 for e in range(1, 9)][
        : len(history)
    ]
    penalties = history[:, "train_penalty"]
    weights = history[:, "penalty_weight"]
    assert all(p == 0.0 for p in penalties[:3]) and all(w == 0.0 for w in weights[:3])
    assert all(p > 0.0 for p in penalties[3:]) and all(w == 1.0 for w in weights[3:])
    assert all(v > 0 for v in history[:, "valid_nll"])


def test_cosine_schedule_decays_weight(iris):
    X, y = iris
    clf = NeSCalClassifier(
        loss=ExperimentalNeSCalLoss(warmup=2, schedule="cosine", weight=2.0),
        **dict(FAST, max_epochs=10, early_stopping=False),
        random_state=0,
    ).fit(X, y)
    weights = clf.history_[:, "penalty_weight"]
    assert weights[:2] == [0.0, 0.0] and weights[2] == pytest.approx(2.0)
    assert all(a > b for a, b in zip(weights[2:], weights[3:], strict=False))


def test_graph_uses_training_rows_only(iris, monkeypatch):
    X, y = iris
    seen = spy_on_graph_builds(monkeypatch)
    NeSCalClassifier(loss=NeSCalLoss(warmup=1), **FAST, validation_fraction=0.2).fit(X, y)
    assert len(seen[0]["X"]) == 150 - 30
    assert seen[0]["runtime"].smoothing.cache.n_samples == 120
    perm = np.random.default_rng(0).permutation(len(X))
    train, val = perm[:100], perm[100:]
    NeSCalClassifier(loss=NeSCalLoss(warmup=1), **FAST).fit(
        X[train], y[train], X_val=X[val], y_val=y[val]
    )
    np.testing.assert_array_equal(seen[1]["X"].numpy(), X[train])


def test_random_graph_control_uses_random_neighbours(iris, monkeypatch):
    X, y = iris
    seen = spy_on_graph_builds(monkeypatch)
    clf = NeSCalClassifier(loss=NeSCalLoss(warmup=1, graph="random"), **FAST, random_state=0)
    clf.fit(X, y)
    assert clf.graph_epoch_ == 2
    built = seen[0]
    expected = random_graph(120, 10, random_state=built["kwargs"]["random_state"])
    torch.testing.assert_close(built["runtime"].smoothing.neighbors, expected)


def test_early_stopping_counts_from_warmup_and_restores_best():
    X, y = make_classification(400, 10, n_informative=4, flip_y=0.3, random_state=0)
    clf = NeSCalClassifier(
        loss=NeSCalLoss(warmup=15),
        hidden_sizes=(128, 128),
        dropout=0.0,
        max_epochs=60,
        patience=3,
        batch_size=32,
        random_state=0,
    ).fit(X, y)
    assert clf.n_epochs_ < 60
    assert clf.n_epochs_ >= 15 + 3  # never stops before the penalty acted for `patience` epochs
    valid = clf.history_[:, "valid_nll"]
    # every epoch competes; patience counts from the first penalised epoch (16)
    assert valid[clf.best_epoch_ - 1] == min(valid)
    assert clf.n_epochs_ == max(clf.best_epoch_, 16) + 3


def test_patience_none_trains_every_epoch_and_restores_the_best_one():
    X, y = make_classification(300, 10, n_informative=4, flip_y=0.3, random_state=0)
    clf = NeSCalClassifier(
        "ce",
        hidden_sizes=(64,),
        dropout=0.0,
        max_epochs=25,
        patience=None,
        lr=1e-2,
        batch_size=32,
        random_state=0,
    ).fit(X, y)
    assert clf.n_epochs_ == 25  # no early stop, although this overfits
    valid = clf.history_[:, "valid_nll"]
    assert clf.best_epoch_ < 25 and valid[clf.best_epoch_ - 1] == min(valid)
    # An int patience on the same fit stops early, at the same best epoch.
    early = clone(clf).set_params(patience=3).fit(X, y)
    assert early.n_epochs_ == early.best_epoch_ + 3 < 25
    assert early.best_epoch_ == clf.best_epoch_


def test_auto_warmup_restores_best_cross_entropy_checkpoint():
    X, y = make_classification(300, 10, n_informative=4, flip_y=0.3, random_state=0)
    clf = NeSCalClassifier(
        loss=ExperimentalNeSCalLoss(warmup="auto", warmup_patience=3),
        hidden_sizes=(128, 128),
        dropout=0.0,
        max_epochs=80,
        patience=4,
        batch_size=32,
        random_state=0,
    ).fit(X, y)
    history = clf.history_
    restored = [row["warmup_restored_epoch"] for row in history if "warmup_restored_epoch" in row]
    assert len(restored) == 1
    valid = history[:, "valid_nll"]
    # the warm-up ends 3 epochs after the cross-entropy optimum, which it restores
    assert valid[restored[0] - 1] == min(valid[: restored[0] + 3])
    assert clf.graph_epoch_ == restored[0] + 3 + 1
    assert clf.n_epochs_ >= clf.graph_epoch_ - 1 + 4
    with pytest.warns(
        UserWarning,
        match=re.escape(
            "loss__warmup='auto' ends the warm-up where the validation NLL stops improving, "
            "but early_stopping=False holds out no validation rows; the warm-up falls back "
            "to 0.3 of max_epochs (3 epochs, warmup_). Pass an int or float warmup to "
            "silence this warning."
        ),
    ):
        fixed = clone(clf).set_params(early_stopping=False, max_epochs=10).fit(X, y)
    assert fixed.graph_epoch_ == 4 and fixed.warmup_ == 3
    assert fixed.loss_.warmup == "auto"  # the spec as given: fit records, never rewrites
    assert clf.loss.warmup == "auto"  # the parameter itself is untouched


def test_auto_warmup_that_never_ends_warns_and_returns_the_best_checkpoint(iris):
    X, y = iris
    clf = NeSCalClassifier(
        loss=ExperimentalNeSCalLoss(warmup="auto", warmup_patience=50), **dict(FAST, max_epochs=8)
    )
    message = (
        "NeSCalClassifier returned a model trained without the smoothing penalty, i.e. plain "
        "'ce' training: the warm-up never ended (warmup='auto' ends it once the validation "
        "NLL has not improved for warmup_patience=50 epochs, and max_epochs=8 ran out "
        "first), so the neighbour graph was never built. penalty_status_='no_graph'."
    )
    with pytest.warns(PenaltyInactiveWarning, match=re.escape(message)):
        clf.fit(X, y)
    assert clf.graph_epoch_ is None and clf.penalty_status_ == "no_graph"
    valid = clf.history_[:, "valid_nll"]
    assert valid[clf.best_epoch_ - 1] == min(valid)


def test_fixed_warmup_past_the_budget_is_refused(iris):
    X, y = iris
    message = (
        "loss__warmup=8 ends the warm-up at epoch 9, after the last of max_epochs=6: the "
        "neighbour graph would never be built. Pass a shorter warmup, a fraction in [0, 1), "
        "or more max_epochs."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        NeSCalClassifier(loss=NeSCalLoss(warmup=8), **FAST).fit(X, y)
    with pytest.raises(ValueError, match=re.escape("loss__warmup=6 ends the warm-up at epoch 7")):
        NeSCalClassifier(loss=NeSCalLoss(warmup=6), **FAST).fit(X, y)


def test_nested_loss_params_clone_and_grid_search(iris):
    X, y = iris
    clf = NeSCalClassifier(**FAST)
    clf.set_params(loss__n_neighbors=4, loss__weight=0.5)
    assert isinstance(clf.loss, NeSCalLoss) and clf.loss.n_neighbors == 4
    assert clf.get_params()["loss__weight"] == 0.5
    cloned = clone(clf)
    assert cloned.loss is not clf.loss and cloned.loss.n_neighbors == 4
    grid = GridSearchCV(
        NeSCalClassifier(**dict(FAST, max_epochs=3)),
        [{"loss": ["ce"]}, {"loss": [NeSCalLoss(warmup=1)], "loss__n_neighbors": [3, 5]}],
        cv=2,
        scoring="neg_log_loss",
        error_score="raise",
    ).fit(X, y)
    assert len(grid.cv_results_["params"]) == 3


def test_fit_does_not_mutate_loss_param(iris):
    X, y = iris
    loss = NeSCalLoss(warmup=1)
    before = dict(vars(loss))
    clf = NeSCalClassifier(loss=loss, **FAST).fit(X, y)
    assert clf.graph_epoch_ == 2
    assert vars(loss) == before  # the spec is never written to
    assert clf.loss is loss and clf.loss_ is not loss
    assert vars(clf.loss_) == before  # the fitted spec holds settings only


def test_fitted_model_keeps_no_graph_or_cache(iris):
    X, y = iris
    kw = dict(FAST, random_state=0)
    nescal = NeSCalClassifier(loss=NeSCalLoss(warmup=1), **kw).fit(X, y)
    ce = NeSCalClassifier(loss="ce", **kw).fit(X, y)
    assert nescal.graph_epoch_ == 2
    for value in vars(nescal).values():
        assert not (isinstance(value, torch.Tensor) and value.shape[0] == len(X))
    size_nescal = len(pickle.dumps(nescal.module_))
    assert size_nescal == len(pickle.dumps(ce.module_))


@pytest.mark.determinism
def test_pickle_and_joblib_round_trip(iris, tmp_path):
    X, y = iris
    clf = NeSCalClassifier(**FAST, random_state=0).fit(X, y)
    expected = clf.predict_proba(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(X), expected)
    joblib.dump(clf, tmp_path / "model.joblib")
    np.testing.assert_array_equal(joblib.load(tmp_path / "model.joblib").predict_proba(X), expected)


@pytest.mark.determinism
def test_predict_leaves_the_module_in_place_and_is_thread_safe(iris):
    from concurrent.futures import ThreadPoolExecutor

    X, y = iris
    clf = NeSCalClassifier(loss="ce", **FAST, random_state=0).fit(X, y)
    module, expected = clf.module_, clf.predict_proba(X)
    parameters = [p.data_ptr() for p in module.parameters()]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: clf.predict_proba(X), range(16)))
    assert all(np.array_equal(r, expected) for r in results)
    assert clf.module_ is module and [p.data_ptr() for p in module.parameters()] == parameters


@pytest.mark.determinism
def test_cuda_trained_model_loads_on_cpu(iris, monkeypatch):
    """A model whose device says CUDA unpickles and predicts on a CPU-only machine."""
    X, y = iris
    clf = NeSCalClassifier(**FAST, random_state=0).fit(X, y)
    expected = clf.predict_proba(X)
    clf.device = "cuda"  # as if trained on a GPU: the module is stored on the CPU anyway
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X), expected)
    with pytest.raises(
        ValueError, match=re.escape("device='cuda' was requested but CUDA is not available.")
    ):
        clone(clf).fit(X, y)


class TwoLayer(nn.Module):
    def __init__(self, n_features, n_classes, width=8):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_features, width), nn.ReLU())
        self.head = nn.Linear(width, n_classes)

    def forward(self, X):
        return self.head(self.body(X))


def test_custom_module_class_instance_and_embedding_layer(iris, monkeypatch):
    X, y = iris
    seen = spy_on_graph_builds(monkeypatch)
    kw = dict(max_epochs=4, loss=NeSCalLoss(warmup=1), random_state=0)
    NeSCalClassifier(module=TwoLayer, module_kwargs={"width": 6}, **kw).fit(X, y)
    assert seen[-1]["dim"] == 6
    NeSCalClassifier(module=TwoLayer, embedding_layer="body.0", **kw).fit(X, y)
    assert seen[-1]["kwargs"]["embedding_layer"] == "body.0"
    assert seen[-1]["dim"] == 4  # input of the first layer: the features
    instance = TwoLayer(4, 3, width=5)
    before = {k: v.clone() for k, v in instance.state_dict().items()}
    clf = NeSCalClassifier(module=instance, **kw).fit(X, y)
    assert seen[-1]["dim"] == 5
    assert all(torch.equal(before[k], v) for k, v in instance.state_dict().items())
    assert clf.module_ is not instance


def test_tabular_pipeline_on_mixed_dataframe():
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "z": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)),
            "colour": pd.Categorical(rng.choice(["red", "green", None], size=n)),
            "flag": rng.random(n) < 0.5,
        }
    )
    y = np.where(frame["x"] + (frame["colour"] == "red") > 0.5, "yes", "no")
    pipe = make_tabular_pipeline(NeSCalClassifier(**FAST, random_state=0)).fit(frame, y)
    assert pipe.predict_proba(frame).shape == (n, 2)
    assert pipe.score(frame, y) > 0.6


@pytest.mark.determinism
def test_mixup_trains_and_changes_the_fit(iris):
    X, y = iris
    kw = dict(FAST, early_stopping=False, random_state=0)
    plain = NeSCalClassifier(loss="ce", **kw).fit(X, y)
    mixed = NeSCalClassifier(loss="ce", mixup=0.4, **kw).fit(X, y)
    again = NeSCalClassifier(loss="ce", mixup=0.4, **kw).fit(X, y)
    assert not np.array_equal(plain.predict_proba(X), mixed.predict_proba(X))
    np.testing.assert_array_equal(mixed.predict_proba(X), again.predict_proba(X))
    NeSCalClassifier(loss=NeSCalLoss(warmup=2), mixup=0.4, **kw).fit(X, y)


@pytest.mark.parametrize(
    ("make_input", "message"),
    [
        (
            lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 5, np.nan, X), y),
            "Input X contains NaN.",
        ),
        (
            lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 5, np.inf, X), y),
            "Input X contains infinity",
        ),
        (
            lambda X, y: (X, np.zeros(len(y))),
            "NeSCalClassifier needs samples of at least 2 classes in y; got 1 class: 0.0.",
        ),
    ],
)
def test_bad_training_data(iris, make_input, message):
    X, y = make_input(*iris)
    with pytest.raises(ValueError, match=re.escape(message)):
        NeSCalClassifier(**FAST).fit(X, y)


@pytest.mark.parametrize("sizes", [(0,), (8, 0, 8), (-4,), ("a",), (2.7,), (True,)])
def test_hidden_sizes_must_be_positive_ints(iris, sizes):
    X, y = iris
    shown = list(sizes)
    message = (
        "hidden_sizes must be a sequence of ints >= 1 (the width of each hidden layer; () for "
        f"none); got {shown!r}."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        NeSCalClassifier(loss="ce", hidden_sizes=sizes, max_epochs=1).fit(X, y)


def test_too_few_rows_for_the_graph(iris):
    X, y = iris
    rows = np.r_[0:5, 50:55, 100:105]
    with pytest.raises(
        ValueError,
        match=re.escape(
            "loss__n_neighbors=12 needs at least 13 training rows; got 12 after holding out "
            "validation_fraction=0.2."
        ),
    ):
        NeSCalClassifier(**FAST).set_params(loss__n_neighbors=12).fit(X[rows], y[rows])
    with pytest.raises(
        ValueError,
        match=re.escape("loss__n_neighbors=15 needs at least 16 training rows; got 15."),
    ):
        NeSCalClassifier(**FAST, early_stopping=False).set_params(loss__n_neighbors=15).fit(
            X[rows], y[rows]
        )


def test_error_messages(iris):
    X, y = iris
    with pytest.raises(
        ValueError, match=re.escape("Unknown loss 'nope': expected a TrainingLoss object or one of")
    ):
        NeSCalClassifier(loss="nope").fit(X, y)
    with pytest.raises(ValueError, match=re.escape("NeSCalLoss: weight must be >= 0.0; got -1.0.")):
        NeSCalClassifier(**FAST).set_params(loss__weight=-1.0).fit(X, y)
    clf = NeSCalClassifier(**FAST).fit(X, y)
    with pytest.raises(
        ValueError,
        match=re.escape("X has 3 features, but NeSCalClassifier is expecting 4 features as input."),
    ):
        clf.predict(X[:, :3])
    with pytest.raises(
        ValueError,
        match=re.escape(
            "The 'max_epochs' parameter of NeSCalClassifier must be None or an int in the range [1, inf). Got 0 instead."
        ),
    ):
        NeSCalClassifier(max_epochs=0).fit(X, y)
    with pytest.raises(
        ValueError,
        match=re.escape("X_val and y_val must be passed together; got only one of them."),
    ):
        NeSCalClassifier(**FAST).fit(X, y, X_val=X)
    with pytest.raises(ValueError, match=re.escape("y_val contains labels not seen in y: [7]")):
        NeSCalClassifier(**FAST).fit(X, y, X_val=X[:2], y_val=[0, 7])


def test_small_class_cannot_be_split():
    X, y = load_breast_cancer(return_X_y=True)
    y = y.copy()
    y[:] = 0
    y[:10] = 1
    y[10] = 2
    with pytest.raises(
        ValueError,
        match=re.escape(
            "early_stopping='nll' holds out validation_fraction=0.2 of the rows stratified by "
            "class, which needs at least 2 rows of every class; class 2 has 1. "
            "Pass early_stopping=False, X_val and y_val, or more data."
        ),
    ):
        NeSCalClassifier(**FAST).fit(X, y)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "early_stopping='nll' with validation_fraction=0.05 splits the 20 rows into 19 "
            "training and 1 validation rows; each side needs at least one row of each of the "
            "2 classes."
        ),
    ):
        NeSCalClassifier(**FAST, validation_fraction=0.05).fit(X[:20], np.r_[[0] * 10, [1] * 10])


def test_time_limit_ends_training_and_keeps_the_best_epoch():
    X, y = make_classification(300, n_features=6, random_state=0)
    clf = NeSCalClassifier("ce", **{**FAST, "max_epochs": 2000}, patience=False, time_limit=0.5)
    clf.set_params(random_state=0, lr_schedule="constant").fit(X, y)
    assert clf.stopped_on_time_ and 1 <= clf.n_epochs_ < 2000
    assert clf.best_epoch_ == 1 + int(np.argmin(clf.history_[:, "valid_nll"]))
    # The same fit run for as many epochs without a time limit: the same model.
    same = NeSCalClassifier("ce", **{**FAST, "max_epochs": clf.n_epochs_}, patience=False)
    same = same.set_params(random_state=0, lr_schedule="constant").fit(X, y)
    assert not same.stopped_on_time_
    np.testing.assert_array_equal(clf.predict_proba(X), same.predict_proba(X))


def test_a_graph_search_that_outlasts_the_time_limit_is_abandoned(monkeypatch):
    """Under a time limit the graph must be built by the deadline: a search still running
    past it stops (GraphTimeout), the epoch trains unpenalised and training ends after
    it, instead of the search running on, uninterruptible, past the limit."""
    import time

    import nescal_sklearn.graph._exact as exact_module

    search = exact_module.exact_neighbours

    def slow(*args, deadline=None, **kwargs):  # a search that reaches its deadline
        time.sleep(max(0.0, deadline - time.perf_counter()) + 0.01)
        return search(*args, deadline=deadline, **kwargs)

    monkeypatch.setattr("nescal_sklearn.graph._knn.exact_neighbours", slow)
    X, y = make_classification(300, n_features=6, random_state=0)
    clf = NeSCalClassifier(**{**FAST, "max_epochs": 50}, patience=False, time_limit=1.0)
    clf.set_params(random_state=0, loss__warmup=2)
    start = time.perf_counter()
    with pytest.warns(PenaltyInactiveWarning) as caught:
        clf.fit(X, y)
    assert time.perf_counter() - start < 2.0  # the limit, 1 s, and one epoch after it
    message = (
        "time_limit=1 s ran out while the neighbour graph was searched at the start of "
        "epoch 3, so it was never built. penalty_status_='no_graph'."
    )
    assert any(str(w.message).endswith(message) for w in caught)
    assert clf.penalty_status_ == "no_graph" and clf.graph_epoch_ is None
    assert clf.stopped_on_time_ and clf.n_epochs_ == 3


def test_max_row_epochs_cuts_the_epochs_and_auto_batches_grow_with_the_rows():
    X, y = make_classification(500, n_features=6, random_state=0)
    clf = NeSCalClassifier("ce", hidden_sizes=(8,), max_row_epochs=1000, batch_size="auto")
    clf.set_params(random_state=0, patience=False).fit(X, y)
    # 400 training rows (validation_fraction 0.2): ceil(1000 / 400) = 3 epochs, batch 256
    assert clf.n_epochs_ == 3 and clf.params_["max_epochs"] == 3
    assert clf.params_["batch_size"] == 256 and clf.params_["max_row_epochs"] == 1000
    # the same fit with those settings given outright: the same model
    same = NeSCalClassifier("ce", hidden_sizes=(8,), max_epochs=3, batch_size=256)
    same.set_params(random_state=0, patience=False).fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), same.predict_proba(X))
    settings = NeSCalClassifier(batch_size="auto").check_params()
    assert [
        settings.for_rows(n, validated=True, held_out=True).batch_size
        for n in (31_999, 32_000, 107_999, 108_000)
    ] == [
        256,
        512,
        512,
        1024,
    ]
    message = (
        "loss__warmup=5 ends the warm-up at epoch 6, after the last of the 3 epochs that "
        "max_row_epochs=1000 leaves for 400 training rows: the neighbour graph would never "
        "be built. Pass a shorter warmup, a fraction in [0, 1), or a larger max_row_epochs."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        NeSCalClassifier(max_row_epochs=1000, hidden_sizes=(8,)).set_params(loss__warmup=5).fit(
            X, y
        )
