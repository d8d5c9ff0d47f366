"""NeSCal's training phases inside a fit: warm-up end, graph, cache refresh, status.

These tests watch a fit from the outside: through the public spec method that builds
the runtime (``NeSCalLoss.build_runtime``), through the runtime's own ``penalty`` and
through the net's documented attributes, never through module internals.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris, make_classification
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import Callback
from torch import nn

from nescal_sklearn import NeSCalClassifier, PenaltyInactiveWarning
from nescal_sklearn.estimator._callbacks import WarmupEnd
from nescal_sklearn.estimator._net import NeSCalNet
from nescal_sklearn.losses import CrossEntropyLoss, NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
from nescal_sklearn.penalties import NeSCalRuntime


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


class DropoutMLP(nn.Module):
    """An MLP whose dropout makes train-mode and eval-mode predictions differ."""

    def __init__(self, n_features, n_classes):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_features, 32), nn.ReLU(), nn.Dropout(0.5))
        self.head = nn.Linear(32, n_classes)
        self.inputs: list[torch.Tensor] = []

    def forward(self, X):
        if self.training:
            self.inputs.append(X.detach().clone())
        return self.head(self.body(X))


def watch_cache(monkeypatch) -> dict:
    """Record the cache at graph time and, for every penalty call, what refreshed it."""
    seen: dict = {"calls": []}
    build, penalty = NeSCalLoss.build_runtime, NeSCalRuntime.penalty

    def spy_build(self, module, X, **kwargs):
        runtime = build(self, module, X, **kwargs)
        was_training = module.training
        module.eval()
        with torch.no_grad():
            seen["eval_log_probs"] = torch.log_softmax(module(X), dim=1)
        module.train(was_training)
        seen["initial_cache"] = runtime.smoothing.cache.log_probs.clone()
        seen["module"] = module
        return runtime

    def spy_penalty(self, logits, indices, target=None, sample_weight=None):
        value = penalty(self, logits, indices, target, sample_weight=sample_weight)
        seen["calls"].append(
            {
                "indices": torch.as_tensor(indices).clone(),
                "log_p": torch.log_softmax(logits.detach(), dim=1),
                "cache_rows": self.smoothing.cache.log_probs[indices].clone(),
                "training": seen["module"].training,
                "input": seen["module"].inputs[-1],
            }
        )
        return value

    monkeypatch.setattr(NeSCalLoss, "build_runtime", spy_build)
    monkeypatch.setattr(NeSCalRuntime, "penalty", spy_penalty)
    return seen


@pytest.mark.parametrize("mixup", [0.0, 0.4])
def test_cache_is_filled_in_eval_mode_and_refreshed_with_each_batch(iris, monkeypatch, mixup):
    """The documented cache semantics: filled once from an eval-mode (dropout off) pass
    on the clean training rows; each batch then overwrites its own rows with its
    detached train-mode prediction — on the *mixed* inputs when mixup is on."""
    X, y = iris
    seen = watch_cache(monkeypatch)
    NeSCalClassifier(
        loss=NeSCalLoss(warmup=1, weight=1.0),
        module=DropoutMLP,
        max_epochs=3,
        batch_size=32,
        early_stopping=False,
        mixup=mixup,
        random_state=0,
    ).fit(X, y)
    torch.testing.assert_close(seen["initial_cache"], seen["eval_log_probs"])
    assert len(seen["calls"]) == 2 * int(np.ceil(150 / 32))  # epochs 2 and 3
    for call in seen["calls"]:
        assert call["training"]  # dropout on while the cache is refreshed
        torch.testing.assert_close(call["cache_rows"], call["log_p"])
        clean = torch.as_tensor(X)[call["indices"]]
        assert torch.equal(call["input"], clean) == (mixup == 0.0)


def test_the_training_rows_refresh_only_their_own_cache_rows(iris, monkeypatch):
    X, y = iris
    seen = watch_cache(monkeypatch)
    NeSCalClassifier(
        loss=NeSCalLoss(warmup=1),
        module=DropoutMLP,
        max_epochs=2,
        batch_size=150,
        early_stopping=False,
        random_state=0,
    ).fit(X, y)
    (call,) = seen["calls"]
    assert sorted(call["indices"].tolist()) == list(range(150))


def test_penalised_fit_reports_its_status_without_warning(iris, recwarn):
    X, y = iris
    clf = NeSCalClassifier(
        loss=NeSCalLoss(warmup=2),
        hidden_sizes=(16,),
        max_epochs=6,
        batch_size=32,
        lr=1e-2,
        early_stopping=False,
        random_state=0,
    ).fit(X, y)
    assert clf.graph_epoch_ == 3 and clf.penalty_status_ == "penalised"
    assert not [w for w in recwarn if issubclass(w.category, PenaltyInactiveWarning)]
    ce = NeSCalClassifier(loss="ce", hidden_sizes=(16,), max_epochs=2).fit(X, y)
    assert ce.penalty_status_ is None and ce.graph_epoch_ is None


def test_restoring_a_warmup_epoch_warns_and_says_so():
    """A strong penalty over random neighbours never beats the warm-up optimum: the returned
    model is the base loss's checkpoint, and fit says so instead of passing it off as
    NeSCal."""
    X, y = make_classification(300, 10, n_informative=4, flip_y=0.3, random_state=0)
    clf = NeSCalClassifier(
        loss=ExperimentalNeSCalLoss(warmup="auto", warmup_patience=3, weight=50.0, graph="random"),
        hidden_sizes=(128, 128),
        dropout=0.0,
        max_epochs=80,
        patience=4,
        batch_size=32,
        random_state=0,
    )
    with pytest.warns(PenaltyInactiveWarning) as record:
        clf.fit(X, y)
    assert clf.penalty_status_ == "warmup_checkpoint"
    assert clf.best_epoch_ < clf.graph_epoch_
    restored = [
        row["warmup_restored_epoch"] for row in clf.history_ if "warmup_restored_epoch" in row
    ]
    message = (
        "NeSCalClassifier returned a model trained without the smoothing penalty, i.e. plain "
        f"'ce' training: early stopping restored epoch {clf.best_epoch_} (the auto warm-up's "
        f"optimum, restored at epoch {restored[0]}), before the graph was built at epoch "
        f"{clf.graph_epoch_}: no penalised epoch had a lower validation NLL. "
        "penalty_status_='warmup_checkpoint'."
    )
    assert [str(w.message) for w in record] == [message]


class OptimizerLog(Callback):
    """Record AdamW's step count and first moment after every epoch (runs after WarmupEnd)."""

    def on_train_begin(self, net, **kwargs):
        self.steps, self.moments = [], []

    def on_epoch_end(self, net, **kwargs):
        state = net.optimizer_.state_dict()["state"][0]
        self.steps.append(int(state["step"]))
        self.moments.append(state["exp_avg"].clone())


class WeightLog(Callback):
    def on_train_begin(self, net, **kwargs):
        self.weights = []

    def on_epoch_begin(self, net, **kwargs):
        self.weights.append(net.module_[0].weight.detach().clone())

    def on_epoch_end(self, net, **kwargs):
        self.weights.append(net.module_[0].weight.detach().clone())


def test_auto_warmup_restores_the_weights_but_not_the_optimizer_state():
    """The best warm-up weights come back; the optimizer keeps its latest moments
    (rolling those back too was measured worse; see WarmupEnd)."""
    X, y = make_classification(300, 10, n_informative=4, flip_y=0.3, random_state=0)
    X = X.astype(np.float32)
    log, weights = OptimizerLog(), WeightLog()
    # skorch's own validation NLL: this net has no ValidationNLL callback
    warmup = WarmupEnd(None, patience=3, monitor="valid_loss")
    module = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 2))
    net = NeSCalNet(
        module=module,
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.AdamW,
        lr=1e-2,
        max_epochs=30,
        batch_size=32,
        callbacks=[("log", log), ("weights", weights), ("warmup", warmup)],
        training_loss=CrossEntropyLoss(),
        verbose=0,
    )
    net.fit({"X": X, "index": np.arange(len(X))}, y)
    assert warmup.restored_epoch_ is not None
    end = net.warmup_end_epoch_  # 0-based first epoch after the warm-up
    best = warmup.restored_epoch_ - 1
    steps_per_epoch = log.steps[0]
    # the first epoch after the warm-up starts from the best warm-up epoch's weights...
    torch.testing.assert_close(weights.weights[2 * end], weights.weights[2 * best + 1])
    assert not torch.equal(weights.weights[2 * (end - 1) + 1], weights.weights[2 * best + 1])
    # ...while the optimizer goes on counting from its latest step
    assert log.steps[end] == log.steps[end - 1] + steps_per_epoch == (end + 1) * steps_per_epoch
    assert not torch.equal(log.moments[end - 1], log.moments[best])


def test_patience_counts_from_the_end_of_warmup():
    X, y = make_classification(400, 10, n_informative=4, flip_y=0.3, random_state=0)
    clf = NeSCalClassifier(
        loss=NeSCalLoss(warmup=12, weight=50.0, graph="random"),
        hidden_sizes=(128, 128),
        dropout=0.0,
        max_epochs=60,
        patience=3,
        batch_size=32,
        random_state=0,
    )
    with pytest.warns(
        PenaltyInactiveWarning, match=re.escape("penalty_status_='warmup_checkpoint'")
    ):
        clf.fit(X, y)
    assert clf.best_epoch_ <= 12 < clf.graph_epoch_ == 13
    assert clf.n_epochs_ == 13 + 3  # epochs 13-16 penalised, none better: 3 misses after 13


def test_a_real_interrupt_propagates_and_leaves_no_fitted_model(iris):
    """Ctrl-C (SIGINT) must not end fit like early stopping: skorch swallows it, and fit
    must not return the truncated model."""
    import os
    import signal
    import threading

    from sklearn.exceptions import NotFittedError

    X, y = iris
    X = np.repeat(X, 20, axis=0)
    y = np.repeat(y, 20)
    clf = NeSCalClassifier(
        loss="ce", hidden_sizes=(256, 256), max_epochs=500, patience=500, random_state=0
    )
    clf.set_params(max_epochs=1).fit(X, y)  # torch's lazy imports happen before the timer
    clf.set_params(max_epochs=500)
    # Python's own Ctrl-C handler, even when the suite runs as a background job (started
    # by a non-interactive shell with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(
            KeyboardInterrupt, match=r"NeSCalClassifier.fit: training interrupted in epoch \d+"
        ):
            clf.fit(X, y)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    with pytest.raises(NotFittedError):
        clf.predict(X)  # the earlier 1-epoch fit is gone too: fit never half-succeeds


def test_early_stopping_is_told_apart_from_a_keyboard_interrupt(iris, monkeypatch):
    """The planned stop ends skorch's loop as skorch's own callbacks do; fit knows it was
    planned (StopAfterPatience.stopped_) and returns the restored best epoch."""
    from nescal_sklearn.estimator._callbacks import StopAfterPatience

    stops = []
    original = StopAfterPatience.on_epoch_end

    def spy(self, net, **kwargs):
        try:
            original(self, net, **kwargs)
        except KeyboardInterrupt:
            stops.append(len(net.history))
            raise

    monkeypatch.setattr(StopAfterPatience, "on_epoch_end", spy)
    X, y = make_classification(400, 10, n_informative=4, flip_y=0.3, random_state=0)
    clf = NeSCalClassifier(
        loss="ce",
        hidden_sizes=(128, 128),
        dropout=0.0,
        max_epochs=60,
        patience=3,
        batch_size=32,
        random_state=0,
    ).fit(X, y)
    assert clf.n_epochs_ < 60 and stops == [clf.n_epochs_]
    assert clf.n_epochs_ == clf.best_epoch_ + 3


def test_the_callbacks_run_in_the_order_they_depend_on(iris, monkeypatch):
    """The criterion is recorded before the warm-up and the best-epoch keeper read it,
    and the keeper updates its best epoch before StopAfterPatience counts from it."""
    from nescal_sklearn.estimator import _classifier

    seen = {}
    original = _classifier.make_net

    def spy(*args, **kwargs):
        net, callbacks = original(*args, **kwargs)
        seen["order"] = list(callbacks)
        return net, callbacks

    monkeypatch.setattr(_classifier, "make_net", spy)
    X, y = iris
    NeSCalClassifier(
        loss=NeSCalLoss(warmup=1),
        hidden_sizes=(8,),
        max_epochs=3,
        patience=2,
        lr_schedule="cosine",
        random_state=0,
    ).fit(X, y)
    assert seen["order"] == [
        "validation_nll",
        "warmup_end",
        "build_neighbourhood",
        "penalty_schedule",
        "train_penalty",
        "best_epoch",
        "stop_after_patience",
        "lr_schedule",
    ]


def test_skorch_computes_the_loss_with_the_criterion_the_fit_trains_with(iris, monkeypatch):
    """get_loss goes through skorch's own: the criterion is the base loss in training
    steps and the NLL in validation steps; the penalty recorded is what the runtime
    returns."""
    from skorch.history import History

    from nescal_sklearn.estimator._net import TrainingCriterion

    modes, returned, recorded = [], [], []
    forward, penalty, record_batch = (
        TrainingCriterion.forward,
        NeSCalRuntime.penalty,
        History.record_batch,
    )

    def spy_forward(self, y_pred, y_true):
        modes.append(self.training)
        return forward(self, y_pred, y_true)

    def spy_penalty(self, *args, **kwargs):
        value = penalty(self, *args, **kwargs)
        returned.append(float(value.detach()))
        return value

    def spy_record_batch(self, attr, value):
        if attr == "train_penalty" and value != 0.0:
            recorded.append(value)
        return record_batch(self, attr, value)

    monkeypatch.setattr(TrainingCriterion, "forward", spy_forward)
    monkeypatch.setattr(NeSCalRuntime, "penalty", spy_penalty)
    monkeypatch.setattr(History, "record_batch", spy_record_batch)
    X, y = iris
    clf = NeSCalClassifier(
        loss=NeSCalLoss(warmup=1, n_neighbors=3),
        hidden_sizes=(8,),
        max_epochs=3,
        batch_size=256,
        random_state=0,
    ).fit(X, y)
    assert True in modes and False in modes
    # one validation batch per epoch: skorch's valid_loss is the criterion's NLL
    np.testing.assert_allclose(
        clf.history_[:, "valid_loss"], clf.history_[:, "valid_nll"], rtol=1e-5
    )  # float32 against float64
    assert returned == recorded and len(returned) == 2 and all(p > 0 for p in returned)


def test_no_private_name_of_skorch_is_used_by_the_estimator():
    """The estimator extends skorch through its public names only."""
    import ast
    import pathlib

    import skorch
    import skorch.callbacks

    private = {
        name
        for owner in (skorch.NeuralNet, *vars(skorch.callbacks).values())
        if isinstance(owner, type)
        for name in dir(owner)
        if name.startswith("_") and not name.startswith("__")
    }
    root = pathlib.Path(NeSCalClassifier.__module__.replace(".", "/")).parent
    package = pathlib.Path(__file__).resolve().parents[1] / root
    used = {
        (path.name, node.attr)
        for path in package.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in private
    }
    assert not used
