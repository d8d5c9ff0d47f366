"""When NeSCal's neighbour cache is refreshed: per batch, never (frozen), or once per epoch.

``ExperimentalNeSCalLoss(cache=...)``: ``"batch"`` (the default) overwrites a batch's rows with its
detached predictions; ``"frozen"`` keeps the graph-time predictions; ``"epoch"`` refills
the whole cache from an eval-mode forward pass at the start of each penalised epoch.
The references are independent: ``log_softmax`` of the batch logits, a fresh
``NeighbourhoodSmoothing`` built on the same predictions, and ``embed_rows`` (the graph's
own eval-mode forward pass) of the network at the moment of the refresh.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler
from torch import nn

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.graph import embed_rows
from nescal_sklearn.losses import NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
from nescal_sklearn.penalties import CACHE_MODES, NeighbourhoodSmoothing, NeSCalRuntime


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

    def forward(self, X):
        return self.head(self.body(X))


def _smoothing(divergence="soft_target", aggregation="pairwise", seed=0, n=8, k=3, c=4):
    generator = torch.Generator().manual_seed(seed)
    neighbors = torch.stack([torch.randperm(n - 1, generator=generator)[:k] for _ in range(n)])
    neighbors = neighbors + (neighbors >= torch.arange(n)[:, None]).long()  # never itself
    initial = torch.log_softmax(torch.randn(n, c, generator=generator), dim=1)
    return NeighbourhoodSmoothing(
        neighbors, initial, divergence=divergence, aggregation=aggregation
    )


# -- validation ------------------------------------------------------------------------------


def test_cache_modes_and_default():
    assert CACHE_MODES == ("batch", "frozen", "epoch")
    assert NeSCalLoss().cache == "batch"
    for mode in CACHE_MODES:
        ExperimentalNeSCalLoss(cache=mode).validate()


@pytest.mark.parametrize("bad", ["never", None, "Batch"])
def test_spec_refuses_an_unknown_cache_mode(bad):
    message = f"NeSCalLoss: cache must be one of ['batch', 'frozen', 'epoch']; got {bad!r}."
    with pytest.raises(ValueError, match=re.escape(message)):
        ExperimentalNeSCalLoss(cache=bad).validate()


def test_runtime_refuses_an_unknown_cache_mode():
    message = "cache must be one of ['batch', 'frozen', 'epoch']; got 'never'."
    with pytest.raises(ValueError, match=re.escape(message)):
        NeSCalRuntime(
            _smoothing(),
            weight=1.0,
            schedule="constant",
            start_epoch=0,
            end_epoch=5,
            cache="never",
        )


def test_an_unknown_cache_mode_fails_the_fit_with_the_specs_message(iris):
    X, y = iris
    message = "NeSCalLoss: cache must be one of ['batch', 'frozen', 'epoch']; got 'weekly'."
    with pytest.raises(ValueError, match=re.escape(message)):
        NeSCalClassifier(loss=ExperimentalNeSCalLoss(cache="weekly"), max_epochs=2).fit(X, y)


@pytest.mark.parametrize(
    ("log_probs", "message"),
    [
        (
            torch.zeros(7, 4),
            "log_probs must be a tensor of shape (8, 4) (one row per cached "
            "training row); got Tensor with shape (7, 4).",
        ),
        (
            np.zeros((8, 4)),
            "log_probs must be a tensor of shape (8, 4) (one row per cached "
            "training row); got ndarray with shape None.",
        ),
        (
            torch.zeros(8, 4, dtype=torch.int64),
            "log_probs must be a floating-point tensor; got dtype torch.int64.",
        ),
    ],
)
def test_refill_cache_refuses_a_wrong_shape_or_dtype(log_probs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _smoothing().refill_cache(log_probs)


# -- the smoothing: per-batch write or none ------------------------------------------------------


@pytest.mark.parametrize(
    ("divergence", "aggregation"), [("soft_target", "pairwise"), ("js", "pairwise"), ("js", "mean")]
)
def test_update_cache_false_gives_the_same_penalty_and_leaves_the_cache(divergence, aggregation):
    writing, frozen = (_smoothing(divergence, aggregation) for _ in range(2))
    before = frozen.cache.log_probs.clone()
    rows = torch.tensor([5, 0, 3])
    logits = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)
    value = writing(logits, rows)
    same = frozen(logits, rows, update_cache=False)
    # exact: update_cache=False skips the cache write only; the same arithmetic
    torch.testing.assert_close(same, value, rtol=0, atol=0)
    (grad_writing,) = torch.autograd.grad(value, logits)
    (grad_frozen,) = torch.autograd.grad(same, logits)
    torch.testing.assert_close(grad_frozen, grad_writing, rtol=0, atol=0)
    assert torch.equal(frozen.cache.log_probs, before)
    assert torch.equal(frozen.cache.probs, before.exp())
    # the writing one took the batch's own detached log-softmax, and only those rows
    expected = before.clone()
    expected[rows] = torch.log_softmax(logits.detach(), dim=1)
    torch.testing.assert_close(writing.cache.log_probs, expected)


@pytest.mark.parametrize(
    ("divergence", "aggregation"), [("soft_target", "pairwise"), ("js", "pairwise"), ("js", "mean")]
)
def test_refill_is_a_smoothing_built_on_the_new_predictions(divergence, aggregation):
    refilled = _smoothing(divergence, aggregation, seed=0)
    fresh_log_probs = torch.log_softmax(torch.randn(8, 4, dtype=torch.float64), dim=1)
    refilled.refill_cache(fresh_log_probs)
    assert refilled.cache.log_probs.dtype == torch.float32  # the cache keeps its dtype
    built = NeighbourhoodSmoothing(
        refilled.neighbors, fresh_log_probs.float(), divergence=divergence, aggregation=aggregation
    )
    if divergence == "js" and aggregation == "pairwise":
        q = fresh_log_probs.float()
        torch.testing.assert_close(refilled.cache.neg_entropy(), (q.exp() * q).sum(dim=1))
    logits, rows = torch.randn(4, 4), torch.tensor([1, 2, 6, 7])
    torch.testing.assert_close(refilled(logits, rows), built(logits, rows))
    fresh_log_probs[0, 0] = 0.0  # a copy was stored
    assert refilled.cache.log_probs[0, 0] != 0.0


# -- the runtime: which mode writes --------------------------------------------------------------


@pytest.mark.parametrize("mode", CACHE_MODES)
def test_runtime_penalty_writes_only_in_batch_mode(mode):
    spec = ExperimentalNeSCalLoss(n_neighbors=3, warmup=0, cache=mode)
    torch.manual_seed(0)
    net, X = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(20, 3)
    runtime = spec.build_runtime(net, X, start_epoch=0, max_epochs=5, random_state=0)
    assert runtime.cache == mode and f"cache={mode!r}" in repr(runtime)
    before = runtime.smoothing.cache.log_probs.clone()
    rows = torch.tensor([2, 9, 11])
    logits = torch.randn(3, 2)
    runtime.penalty(logits, rows)
    changed = not torch.equal(runtime.smoothing.cache.log_probs, before)
    assert changed == (mode == "batch")


def test_refresh_cache_is_an_eval_mode_pass_in_chunks_and_restores_the_mode():
    torch.manual_seed(0)
    net, X = DropoutMLP(3, 3), torch.randn(50, 3)
    runtime = ExperimentalNeSCalLoss(n_neighbors=4, warmup=0, cache="epoch").build_runtime(
        net, X, start_epoch=0, max_epochs=5, random_state=0
    )
    with torch.no_grad():
        net.head.weight.mul_(3.0)  # the network moves on after graph time
    net.train()
    seconds = runtime.refresh_cache(net, X, batch_size=7)  # chunks of 7 rows
    assert net.training and seconds > 0.0
    _, expected = embed_rows(net, X)  # the graph's own eval-mode forward pass
    torch.testing.assert_close(runtime.smoothing.cache.log_probs, expected)
    torch.testing.assert_close(runtime.smoothing.cache.probs, expected.exp())


# -- inside NeSCalClassifier ---------------------------------------------------------------------


def watch(monkeypatch) -> dict:
    """Record the runtime, the cache at graph time and at each penalty call, and each refresh."""
    seen: dict = {"events": []}
    build, penalty, refresh = (
        NeSCalLoss.build_runtime,
        NeSCalRuntime.penalty,
        NeSCalRuntime.refresh_cache,
    )

    def spy_build(self, module, X, **kwargs):
        runtime = build(self, module, X, **kwargs)
        seen["runtime"], seen["X"] = runtime, X
        _, seen["graph_time"] = embed_rows(module, X)
        seen["events"].append(("build", runtime.smoothing.cache.log_probs.clone()))
        return runtime

    def spy_penalty(self, logits, indices, target=None, sample_weight=None):
        seen["events"].append(("penalty", self.smoothing.cache.log_probs.clone()))
        return penalty(self, logits, indices, target, sample_weight)

    def spy_refresh(self, module, X, **kwargs):
        seconds = refresh(self, module, X, **kwargs)
        _, reference = embed_rows(module, X)  # independent: the graph's forward pass, now
        seen["events"].append(("refresh", self.smoothing.cache.log_probs.clone(), reference))
        return seconds

    monkeypatch.setattr(NeSCalLoss, "build_runtime", spy_build)
    monkeypatch.setattr(NeSCalRuntime, "penalty", spy_penalty)
    monkeypatch.setattr(NeSCalRuntime, "refresh_cache", spy_refresh)
    return seen


def _fit(X, y, mode, max_epochs=5):
    return NeSCalClassifier(
        loss=ExperimentalNeSCalLoss(warmup=1, cache=mode),
        module=DropoutMLP,
        max_epochs=max_epochs,
        batch_size=32,
        early_stopping=False,
        random_state=0,
    ).fit(X, y)


def test_frozen_cache_never_changes_after_graph_time(iris, monkeypatch):
    X, y = iris
    seen = watch(monkeypatch)
    clf = _fit(X, y, "frozen")
    kinds = [event[0] for event in seen["events"]]
    assert kinds[0] == "build" and "refresh" not in kinds
    assert kinds.count("penalty") == 4 * int(np.ceil(150 / 32))  # epochs 2-5
    torch.testing.assert_close(seen["events"][0][1], seen["graph_time"])  # eval-mode pass
    for event in seen["events"][1:]:
        assert torch.equal(event[1], seen["events"][0][1])
    assert torch.equal(seen["runtime"].smoothing.cache.log_probs, seen["events"][0][1])
    assert "cache_seconds" not in clf.history_[-1]


def test_epoch_cache_is_a_fresh_forward_pass_at_each_epoch_start(iris, monkeypatch):
    X, y = iris
    seen = watch(monkeypatch)
    clf = _fit(X, y, "epoch")
    events = seen["events"]
    kinds = [event[0] for event in events]
    per_epoch = int(np.ceil(150 / 32))
    # graph at the start of epoch 2, then a refresh at the start of epochs 3, 4 and 5
    assert kinds == (
        ["build"] + ["penalty"] * per_epoch + (["refresh"] + ["penalty"] * per_epoch) * 3
    )
    for start in range(0, len(events), per_epoch + 1):
        head = events[start]
        if head[0] == "refresh":
            torch.testing.assert_close(head[1], head[2])  # the network at the epoch's start
        for event in events[start + 1 : start + 1 + per_epoch]:
            assert torch.equal(event[1], head[1])  # no batch writes during the epoch
    # the refreshes really changed the cache (the network trained in between)
    assert not torch.allclose(events[-per_epoch - 1][1], events[0][1])
    cache_seconds = [row.get("cache_seconds") for row in clf.history_]
    assert cache_seconds[:2] == [None, None]  # warm-up, then the graph epoch
    assert all(s is not None and s > 0.0 for s in cache_seconds[2:])
    assert clf.history_[1, "graph_seconds"] > 0.0


def test_batch_cache_changes_within_each_epoch(iris, monkeypatch):
    X, y = iris
    seen = watch(monkeypatch)
    _fit(X, y, "batch", max_epochs=3)
    states = [event[1] for event in seen["events"]]
    assert [event[0] for event in seen["events"]].count("refresh") == 0
    assert all(not torch.equal(a, b) for a, b in zip(states[1:], states[2:], strict=False))


def test_the_default_is_the_batch_refresh(iris):
    X, y = iris
    fits = [
        NeSCalClassifier(
            loss=ExperimentalNeSCalLoss(warmup=1, **params),
            max_epochs=4,
            hidden_sizes=(16,),
            early_stopping=False,
            random_state=0,
        ).fit(X, y)
        for params in ({}, {"cache": "batch"}, {"cache": "frozen"})
    ]
    default, batch, frozen = (fit.predict_proba(X) for fit in fits)
    # exact: cache='batch' is the default, so this is the same fit twice
    np.testing.assert_array_equal(default, batch)
    assert not np.array_equal(default, frozen)  # the mode matters, so the test can fail


# -- a plain PyTorch loop ------------------------------------------------------------------------


def test_plain_loop_with_the_epoch_cache():
    torch.manual_seed(0)
    X, y = torch.randn(64, 5), torch.randint(0, 3, (64,))
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    spec, max_epochs = ExperimentalNeSCalLoss(n_neighbors=4, warmup=1, cache="epoch"), 4
    runtime, refreshed = None, 0
    for epoch in range(max_epochs):
        if epoch == spec.warmup_epochs(max_epochs):
            runtime = spec.build_runtime(
                model, X, start_epoch=epoch, max_epochs=max_epochs, random_state=0
            )
        elif runtime is not None and runtime.cache == "epoch":
            runtime.refresh_cache(model, X)
            refreshed += 1
        if runtime is not None:
            runtime.set_epoch(epoch)
            model.eval()
            with torch.no_grad():
                expected = torch.log_softmax(model(X), dim=1)
            model.train()
            torch.testing.assert_close(runtime.smoothing.cache.log_probs, expected)
        for batch in torch.randperm(len(X)).split(16):
            logits = model(X[batch])
            loss = spec(logits, y[batch])
            if runtime is not None:
                loss = loss + runtime.current_weight * runtime.penalty(logits, batch, y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert refreshed == 2
