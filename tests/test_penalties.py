"""Tests of nescal_sklearn.penalties: JS divergence, penalty, cache, schedule, random graph."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from nescal_sklearn.graph import random_graph
from nescal_sklearn.penalties import (
    NeighbourhoodSmoothing,
    PredictionCache,
    js_divergence,
    neighbourhood_penalty,
    penalty_weight,
)

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

LOG2 = math.log(2.0)


def _log(values, dtype=torch.float64):
    return torch.log(torch.tensor(values, dtype=dtype))


# --------------------------------------------------------------------------- JS


def test_js_disjoint_supports_is_log2():
    value = js_divergence(_log([1.0, 0.0]), _log([0.0, 1.0]))
    assert value.item() == pytest.approx(LOG2)


def test_js_hand_worked_value():
    # p = (1/2, 1/2), q = (1, 0), m = (3/4, 1/4):
    # KL(p||m) = 1/2 log(2/3) + 1/2 log 2 = 0.143841..., KL(q||m) = log(4/3) = 0.287682...
    # JS = (0.143841 + 0.287682) / 2 = 0.215762...
    expected = 0.5 * (0.5 * math.log(2 / 3) + 0.5 * math.log(2) + math.log(4 / 3))
    value = js_divergence(_log([0.5, 0.5]), _log([1.0, 0.0]))
    assert value.item() == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.215762, abs=1e-6)


def test_js_matches_scipy_on_random_distributions():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), size=50)
    q = rng.dirichlet(np.full(7, 0.3), size=50)
    ours = js_divergence(torch.log(torch.from_numpy(p)), torch.log(torch.from_numpy(q))).numpy()
    # scipy returns the JS *distance* (square root), in nats by default.
    reference = jensenshannon(p, q, axis=1) ** 2
    np.testing.assert_allclose(ours, reference, rtol=1e-10, atol=1e-12)


def test_js_broadcasts_over_leading_axes():
    rng = np.random.default_rng(1)
    log_p = torch.log(torch.from_numpy(rng.dirichlet(np.ones(3), size=(4, 1))))
    log_q = torch.log(torch.from_numpy(rng.dirichlet(np.ones(3), size=(4, 5))))
    value = js_divergence(log_p, log_q)
    assert value.shape == (4, 5)
    np.testing.assert_allclose(value[2, 3], js_divergence(log_p[2, 0], log_q[2, 3]))


def test_js_rejects_scalars():
    message = "log_p and log_q must have a class axis (last dimension); got shapes () and (2,)."
    with pytest.raises(ValueError, match=re.escape(message)):
        js_divergence(torch.tensor(0.0), torch.zeros(2))


distributions = st.integers(min_value=2, max_value=6).flatmap(
    lambda c: st.tuples(
        st.lists(st.floats(0.0, 1.0), min_size=c, max_size=c).filter(lambda v: sum(v) > 1e-3),
        st.lists(st.floats(0.0, 1.0), min_size=c, max_size=c).filter(lambda v: sum(v) > 1e-3),
    )
)


def _normalised(values):
    array = np.asarray(values, dtype=np.float64)
    return array / array.sum()


@settings(max_examples=200, deadline=None)
@given(distributions)
def test_js_symmetric_bounded_and_zero_iff_equal(pair):
    p, q = (_normalised(v) for v in pair)
    log_p, log_q = torch.log(torch.from_numpy(p)), torch.log(torch.from_numpy(q))
    pq = js_divergence(log_p, log_q).item()
    qp = js_divergence(log_q, log_p).item()
    assert pq == pytest.approx(qp, abs=1e-12)
    assert 0.0 <= pq <= LOG2
    assert js_divergence(log_p, log_p).item() == pytest.approx(0.0, abs=1e-12)
    tv = 0.5 * np.abs(p - q).sum()
    # JS >= TV^2 / 2 (Pinsker, below), so JS > 0 whenever p != q.
    if tv > 1e-6:
        assert pq > 0.0


@settings(max_examples=300, deadline=None)
@given(distributions)
def test_neighbour_confidence_gap_bound(pair):
    # DESIGN.md: |max p - max q| <= TV(p, q) <= sqrt(2 JS(p, q)), JS in nats.
    p, q = (_normalised(v) for v in pair)
    js = js_divergence(torch.log(torch.from_numpy(p)), torch.log(torch.from_numpy(q))).item()
    tv = 0.5 * np.abs(p - q).sum()
    assert abs(p.max() - q.max()) <= tv + 1e-12
    assert tv <= math.sqrt(2.0 * js) + 1e-9


def test_confidence_gap_bound_on_random_pairs():
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.full(5, 0.2), size=2000)
    q = rng.dirichlet(np.full(5, 0.2), size=2000)
    js = js_divergence(torch.log(torch.from_numpy(p)), torch.log(torch.from_numpy(q))).numpy()
    tv = 0.5 * np.abs(p - q).sum(axis=1)
    assert np.all(np.abs(p.max(axis=1) - q.max(axis=1)) <= tv + 1e-12)
    assert np.all(tv <= np.sqrt(2.0 * js) + 1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_js_value_and_gradient_finite_on_extreme_logits(dtype):
    logits = torch.tensor(
        [[50.0, -50.0, 0.0], [-50.0, 50.0, -50.0], [50.0, 50.0, -50.0], [0.0, 0.0, 0.0]],
        dtype=dtype,
        requires_grad=True,
    )
    other = torch.tensor(
        [[-50.0, 50.0, 0.0], [-50.0, 50.0, -50.0], [-50.0, -50.0, 50.0], [50.0, -50.0, 0.0]],
        dtype=dtype,
        requires_grad=True,
    )
    value = js_divergence(torch.log_softmax(logits, -1), torch.log_softmax(other, -1))
    assert torch.isfinite(value).all()
    assert ((value >= 0) & (value <= LOG2)).all()
    assert value[2].item() == pytest.approx(LOG2, abs=1e-6)  # disjoint supports
    assert value[1].item() == pytest.approx(0.0, abs=1e-6)  # identical
    value.sum().backward()
    assert torch.isfinite(logits.grad).all() and torch.isfinite(other.grad).all()


def test_js_gradient_finite_with_exact_zero_probabilities():
    log_p = torch.tensor([0.0, -math.inf, -math.inf], requires_grad=True)
    log_q = torch.tensor([-math.inf, 0.0, -math.inf])
    value = js_divergence(log_p, log_q)
    value.backward()
    assert value.item() == pytest.approx(LOG2)
    assert torch.isfinite(log_p.grad).all()


def test_js_gradient_matches_finite_differences():
    logits = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    log_q = _log([0.2, 0.5, 0.3])
    assert torch.autograd.gradcheck(
        lambda z: js_divergence(torch.log_softmax(z, -1), log_q), (logits,)
    )


# ------------------------------------------------------------------- penalty


def test_pairwise_and_mean_aggregations_on_hand_case():
    log_p = _log([[0.5, 0.5]])
    neighbours = _log([[[1.0, 0.0], [0.0, 1.0]]])
    pairwise = neighbourhood_penalty(log_p, neighbours, "pairwise")
    mean = neighbourhood_penalty(log_p, neighbours, "mean")
    # Each pair is the hand-worked 0.215762...; the neighbours' mean is (1/2, 1/2) = p.
    assert pairwise.item() == pytest.approx(0.215762, abs=1e-6)
    assert mean.item() == pytest.approx(0.0, abs=1e-12)
    assert pairwise.ndim == 0 and mean.ndim == 0


def test_mean_aggregation_never_exceeds_pairwise():
    rng = np.random.default_rng(3)
    log_p = torch.log(torch.from_numpy(rng.dirichlet(np.ones(4), size=8)))
    neighbours = torch.log(torch.from_numpy(rng.dirichlet(np.ones(4), size=(8, 5))))
    mean = neighbourhood_penalty(log_p, neighbours, "mean")
    pairwise = neighbourhood_penalty(log_p, neighbours, "pairwise")
    assert mean.item() <= pairwise.item() + 1e-12
    expected = js_divergence(log_p[:, None, :], neighbours).mean()
    assert pairwise.item() == pytest.approx(expected.item())


def test_penalty_rejects_bad_aggregation():
    with pytest.raises(
        ValueError, match=re.escape("aggregation must be 'pairwise' or 'mean'; got 'max'.")
    ):
        neighbourhood_penalty(torch.zeros(2, 3), torch.zeros(2, 4, 3), "max")


def test_penalty_rejects_shape_mismatch():
    message = (
        "neighbour_log_probs must have shape (B, k, C) = (2, k, 3) to match log_p; got "
        "shape (2, 4, 5)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        neighbourhood_penalty(torch.zeros(2, 3), torch.zeros(2, 4, 5))
    with pytest.raises(
        ValueError, match=re.escape("log_p must have shape (B, C); got shape (3,).")
    ):
        neighbourhood_penalty(torch.zeros(3), torch.zeros(1, 4, 3))
    message = "neighbour_log_probs must hold at least one neighbour per row; got shape (2, 0, 3)."
    with pytest.raises(ValueError, match=re.escape(message)):
        neighbourhood_penalty(torch.zeros(2, 3), torch.zeros(2, 0, 3))


def test_penalty_of_empty_batch_is_zero():
    log_p = torch.zeros(0, 3, requires_grad=True)
    value = neighbourhood_penalty(log_p, torch.zeros(0, 2, 3))
    assert value.item() == 0.0


# --------------------------------------------------------------------- cache


def test_cache_stores_a_detached_copy():
    source = torch.log_softmax(torch.randn(5, 3, requires_grad=True), -1)
    cache = PredictionCache(source)
    assert not cache.log_probs.requires_grad
    assert cache.n_samples == 5 and cache.n_classes == 3
    before = cache.log_probs.clone()
    with torch.no_grad():
        source.zero_()
    torch.testing.assert_close(cache.log_probs, before)


def test_cache_update_and_neighbours_gather():
    cache = PredictionCache(torch.arange(12, dtype=torch.float32).reshape(4, 3))
    new = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]], requires_grad=True)
    cache.update(torch.tensor([2, 0]), new)
    expected = torch.tensor([[-4.0, -5.0, -6.0], [3, 4, 5], [-1.0, -2.0, -3.0], [9, 10, 11]])
    torch.testing.assert_close(cache.log_probs, expected)
    assert not cache.log_probs.requires_grad
    gathered = cache.neighbours(torch.tensor([[1, 2], [3, 3]]))
    assert gathered.shape == (2, 2, 3)
    torch.testing.assert_close(gathered[0, 1], expected[2])
    torch.testing.assert_close(gathered[1, 0], expected[3])
    gathered.zero_()  # a copy, not a view
    torch.testing.assert_close(cache.log_probs, expected)
    assert cache.to("cpu") is cache
    assert repr(cache) == "PredictionCache(n_samples=4, n_classes=3, device=cpu)"


def test_cache_errors():
    message = (
        "log_probs must be a tensor of shape (n_samples, n_classes); got Tensor with shape (3,)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        PredictionCache(torch.zeros(3))
    message = "log_probs must be a floating-point tensor; got dtype torch.int64."
    with pytest.raises(ValueError, match=re.escape(message)):
        PredictionCache(torch.zeros(3, 2, dtype=torch.int64))
    cache = PredictionCache(torch.zeros(4, 3))
    message = (
        "update expects indices of shape (B,) and log_probs of shape (B, 3); got (2,) and (2, 4)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        cache.update(torch.tensor([0, 1]), torch.zeros(2, 4))


# ------------------------------------------------------------------ schedule


def test_constant_schedule():
    assert penalty_weight(0, weight=0.3, start_epoch=2) == 0.0
    assert penalty_weight(1, weight=0.3, start_epoch=2) == 0.0
    assert penalty_weight(2, weight=0.3, start_epoch=2) == 0.3
    assert penalty_weight(100, weight=0.3, start_epoch=2, end_epoch=5) == 0.3


def test_cosine_schedule_start_middle_end():
    kwargs = dict(weight=2.0, schedule="cosine", start_epoch=10, end_epoch=30)
    assert penalty_weight(9, **kwargs) == 0.0
    assert penalty_weight(10, **kwargs) == pytest.approx(2.0)
    assert penalty_weight(15, **kwargs) == pytest.approx(2.0 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert penalty_weight(20, **kwargs) == pytest.approx(1.0)
    assert penalty_weight(30, **kwargs) == pytest.approx(0.0, abs=1e-12)
    assert penalty_weight(31, **kwargs) == 0.0
    values = [penalty_weight(e, **kwargs) for e in range(10, 31)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_schedule_errors():
    with pytest.raises(
        ValueError, match=re.escape("weight must be a non-negative number; got weight=-0.1.")
    ):
        penalty_weight(0, weight=-0.1)
    with pytest.raises(
        ValueError,
        match=re.escape("schedule must be 'constant' or 'cosine'; got schedule='linear'."),
    ):
        penalty_weight(0, weight=1.0, schedule="linear")
    message = (
        "end_epoch must be an integer greater than start_epoch=5 for schedule='cosine'; "
        "got end_epoch=5."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        penalty_weight(0, weight=1.0, schedule="cosine", start_epoch=5, end_epoch=5)
    message = (
        "end_epoch must be an integer greater than start_epoch=0 for schedule='cosine'; "
        "got end_epoch=None."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        penalty_weight(0, weight=1.0, schedule="cosine")


# -------------------------------------------------------------- random graph


def test_random_graph_degree_no_self_no_duplicates():
    graph = random_graph(500, 12, random_state=0)
    assert graph.shape == (500, 12) and graph.dtype == torch.int64
    assert not (graph == torch.arange(500)[:, None]).any()
    assert graph.min() >= 0 and graph.max() < 500
    ordered = graph.sort(dim=1).values
    assert not (ordered[:, 1:] == ordered[:, :-1]).any()


def test_random_graph_complete_when_k_is_n_minus_one():
    graph = random_graph(6, 5, random_state=3)
    expected = [sorted(set(range(6)) - {i}) for i in range(6)]
    assert graph.sort(dim=1).values.tolist() == expected


def test_random_graph_is_seeded_and_deterministic():
    torch.testing.assert_close(
        random_graph(100, 5, random_state=7), random_graph(100, 5, random_state=7)
    )
    assert not torch.equal(
        random_graph(100, 5, random_state=7), random_graph(100, 5, random_state=8)
    )


def test_random_graph_roughly_uniform():
    draws = torch.stack([random_graph(5, 2, random_state=seed) for seed in range(2000)])
    row0 = draws[:, 0, :]
    counts = torch.bincount(row0.flatten(), minlength=5)
    assert counts[0] == 0
    # Each of the 4 other rows is a neighbour of row 0 with probability 1/2.
    assert torch.all((counts[1:] > 900) & (counts[1:] < 1100)), counts
    first_column = torch.bincount(row0[:, 0], minlength=5)[1:]
    assert torch.all((first_column > 420) & (first_column < 580)), first_column
    in_degree = torch.bincount(random_graph(4000, 20, random_state=0).flatten(), minlength=4000)
    assert in_degree.float().mean().item() == pytest.approx(20.0)
    assert 3.5 < in_degree.float().std().item() < 5.5  # ~ Poisson(20)


def test_random_graph_is_vectorised_for_large_n():
    graph = random_graph(300_000, 10, random_state=0)
    assert graph.shape == (300_000, 10)
    assert not (graph == torch.arange(300_000)[:, None]).any()


def test_random_graph_errors():
    message = "n_neighbors=5 must be smaller than n_samples=5: a row is never its own neighbour."
    with pytest.raises(ValueError, match=re.escape(message)):
        random_graph(5, 5)
    with pytest.raises(
        ValueError, match=re.escape("n_neighbors must be at least 1; got n_neighbors=0.")
    ):
        random_graph(5, 0)
    with pytest.raises(TypeError, match=re.escape("n_neighbors must be an int; got 2.0.")):
        random_graph(5, 2.0)


# ------------------------------------------------------ NeighbourhoodSmoothing


def test_smoothing_uses_the_old_cache_then_refreshes_it():
    neighbors = torch.tensor([[1], [0]])
    initial = _log([[0.9, 0.1], [0.1, 0.9]], torch.float32)
    smoothing = NeighbourhoodSmoothing(neighbors, initial, divergence="js")
    logits = torch.zeros(2, 2, requires_grad=True)
    value = smoothing(logits, torch.tensor([0, 1]))
    uniform = _log([0.5, 0.5], torch.float32)
    expected = js_divergence(uniform, initial[1])
    assert value.item() == pytest.approx(expected.item(), rel=1e-6)
    torch.testing.assert_close(smoothing.cache.log_probs, uniform.expand(2, 2))
    assert smoothing(logits, torch.tensor([0, 1])).item() == pytest.approx(0.0, abs=1e-7)


def test_smoothing_penalty_decreases_as_predictions_move_towards_neighbours():
    torch.manual_seed(0)
    c = 4
    # Batch rows 0..9; row i's two neighbours (10 + i and 20 + i) share the distribution q_i.
    batch = torch.arange(10)
    neighbors = torch.cat(
        [torch.stack([batch + 10, batch + 20], 1), torch.zeros(20, 2, dtype=torch.int64)]
    )
    q_logits = torch.randn(10, c) * 3
    initial = torch.log_softmax(torch.cat([torch.zeros(10, c), q_logits, q_logits]), -1)
    start = torch.randn(10, c) * 3
    values = []
    for step in torch.linspace(0.0, 1.0, 6):
        smoothing = NeighbourhoodSmoothing(neighbors, initial, divergence="js")
        logits = (1 - step) * start + step * q_logits
        values.append(smoothing(logits, batch).item())
    assert all(a > b for a, b in zip(values, values[1:], strict=False)), values
    assert values[-1] == pytest.approx(0.0, abs=1e-6)

    # A gradient step on the penalty alone lowers it too.
    smoothing = NeighbourhoodSmoothing(neighbors, initial, divergence="js")
    logits = start.clone().requires_grad_(True)
    before = smoothing(logits, batch)
    before.backward()
    with torch.no_grad():
        moved = logits - 5.0 * logits.grad
    after = NeighbourhoodSmoothing(neighbors, initial, divergence="js")(moved, batch)
    assert after.item() < before.item()


def test_smoothing_accepts_numpy_graph_and_moves():
    smoothing = NeighbourhoodSmoothing(
        np.array([[1, 2], [0, 2], [0, 1]], dtype=np.int32),
        torch.full((3, 2), math.log(0.5)),
        aggregation="mean",
        divergence="js",
    )
    assert smoothing.neighbors.dtype == torch.int64
    assert smoothing.to("cpu") is smoothing
    assert repr(smoothing) == (
        "NeighbourhoodSmoothing(n_samples=3, n_neighbors=2, n_classes=2, aggregation='mean', "
        "divergence='js', adaptive=None)"
    )
    value = smoothing(torch.zeros(1, 2), torch.tensor([1]))
    assert value.item() == pytest.approx(0.0, abs=1e-7)


def test_smoothing_errors():
    initial = torch.zeros(3, 2)
    with pytest.raises(
        ValueError, match=re.escape("aggregation must be 'pairwise' or 'mean'; got 'sum'.")
    ):
        NeighbourhoodSmoothing(torch.zeros(3, 1, dtype=torch.int64), initial, aggregation="sum")
    message = "neighbors has 2 rows but initial_log_probs has 3; both must have one row per training example."
    with pytest.raises(ValueError, match=re.escape(message)):
        NeighbourhoodSmoothing(torch.zeros(2, 1, dtype=torch.int64), initial)
    message = "neighbors must index rows in [0, 3); got values in [0, 3]."
    with pytest.raises(ValueError, match=re.escape(message)):
        NeighbourhoodSmoothing(torch.tensor([[1], [3], [0]]), initial)
    message = (
        "neighbors must be an integer array of shape (n_samples, k); got dtype torch.float32 "
        "and shape (3, 1)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        NeighbourhoodSmoothing(torch.zeros(3, 1), initial)
    smoothing = NeighbourhoodSmoothing(torch.tensor([[1], [2], [0]]), initial)
    message = "logits must have shape (B, n_classes) and indices shape (B,); got (2, 2) and (3,)."
    with pytest.raises(ValueError, match=re.escape(message)):
        smoothing(torch.zeros(2, 2), torch.tensor([0, 1, 2]))


@pytest.mark.parametrize("bad", [-1, 3])
def test_smoothing_rejects_indices_outside_the_cache(bad):
    # A validation row's sentinel (-1) or any out-of-range id must never read or
    # overwrite a real cache row.
    initial = torch.log(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]))
    smoothing = NeighbourhoodSmoothing(torch.tensor([[1], [2], [0]]), initial)
    message = f"indices must be training-row positions in [0, 3); got values in [{min(bad, 0)}, {max(bad, 0)}]."
    with pytest.raises(IndexError, match=re.escape(message)):
        smoothing(torch.zeros(2, 2), torch.tensor([0, bad]))
    torch.testing.assert_close(smoothing.cache.log_probs, initial)
