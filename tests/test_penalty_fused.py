"""NeighbourhoodSmoothing's fused call against the plain autograd formulas.

The per-batch call computes the penalty and its gradient in closed form, in a few
fused passes (see ``penalties/_divergence.py``). The reference here is the public,
unfused functions (:func:`soft_target_penalty`, :func:`neighbourhood_penalty`)
differentiated by autograd in float64, on the same logits, neighbours and cache:
value, gradient and the refreshed cache must agree, including for logits spread
over ±50 (probabilities down to 1e-40) and for a batch that lists a row twice.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from nescal_sklearn.penalties import (
    NeighbourhoodSmoothing,
    neighbourhood_penalty,
    soft_target_penalty,
)

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

N_ROWS, N_CLASSES, K, BATCH = 40, 5, 4, 16

VARIANTS = [
    ("soft_target", "pairwise", 1.0),
    ("soft_target", "pairwise", 2.0),
    ("soft_target", "pairwise", 0.5),
    ("js", "pairwise", 1.0),
    ("js", "mean", 1.0),
]


def _problem(scale: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    neighbors = torch.randint(0, N_ROWS, (N_ROWS, K), generator=gen)
    initial = F.log_softmax(scale * torch.randn(N_ROWS, N_CLASSES, generator=gen), dim=-1)
    similarities = torch.rand(N_ROWS, K, generator=gen)
    indices = torch.randperm(N_ROWS, generator=gen)[:BATCH]
    logits = scale * torch.randn(BATCH, N_CLASSES, generator=gen)
    target = torch.randint(0, N_CLASSES, (BATCH,), generator=gen)
    return neighbors, initial, similarities, indices, logits, target


def _smoothing(neighbors, initial, variant, **kwargs) -> NeighbourhoodSmoothing:
    divergence, aggregation, temperature = variant
    return NeighbourhoodSmoothing(
        neighbors,
        initial,
        divergence=divergence,
        aggregation=aggregation,
        target_temperature=temperature,
        **kwargs,
    )


def _reference(neighbors, initial, similarities, indices, logits, target, variant, adaptive):
    """Value, gradient and refreshed cache from the unfused formulas, in float64."""
    divergence, aggregation, temperature = variant
    initial = initial.double()
    logits = logits.double().requires_grad_(True)
    log_p = F.log_softmax(logits, dim=-1)
    neighbour_log_probs = initial[neighbors[indices]]
    weights = None
    if adaptive == "agreement":
        mean_q = neighbour_log_probs.exp().mean(dim=1)
        weights = 1.0 - mean_q.gather(1, target.unsqueeze(1)).squeeze(1)
    elif adaptive == "density":
        per_row = similarities.double().clamp(min=0.0).mean(dim=1)
        weights = (per_row / per_row.mean())[indices]
    if divergence == "soft_target":
        value = soft_target_penalty(
            log_p, neighbour_log_probs, temperature=temperature, weights=weights
        )
    else:
        value = neighbourhood_penalty(log_p, neighbour_log_probs, aggregation, weights=weights)
    value.backward()
    cache = initial.clone()
    cache[indices] = log_p.detach()
    return value.item(), logits.grad, cache


def _fused_and_reference(variant, adaptive, scale, seed, dtype):
    """The fused call on ``dtype`` logits and cache, and the float64 reference."""
    neighbors, initial, similarities, indices, logits, target = _problem(scale, seed)
    smoothing = _smoothing(
        neighbors, initial.to(dtype), variant, adaptive=adaptive, similarities=similarities
    )
    z = logits.to(dtype, copy=True).requires_grad_(True)
    value = smoothing(z, indices, target)
    value.backward()
    reference = _reference(
        neighbors, initial, similarities, indices, logits, target, variant, adaptive
    )
    return (value.item(), z.grad.double(), smoothing.cache), reference


@pytest.mark.parametrize(
    ("variant", "adaptive", "scale"),
    list(itertools.product(VARIANTS, [None, "agreement", "density"], [1.0, 10.0, 50.0])),
)
def test_fused_call_matches_the_unfused_formulas(variant, adaptive, scale):
    (value, grad, cache), (ref_value, ref_grad, ref_cache) = _fused_and_reference(
        variant, adaptive, scale, seed=7, dtype=torch.float32
    )
    assert value == pytest.approx(ref_value, rel=1e-4, abs=1e-6)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-3, atol=1e-6)
    # The cache holds the batch's exact log-probabilities; its probability form is
    # their exponential floored at the smallest normal float32.
    torch.testing.assert_close(cache.log_probs.double(), ref_cache, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(cache.probs, cache.log_probs.exp().clamp(min=torch.finfo().tiny))


@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_call_in_float64_agrees_to_round_off(variant):
    (value, grad, _), (ref_value, ref_grad, _) = _fused_and_reference(
        variant, None, 3.0, seed=3, dtype=torch.float64
    )
    assert value == pytest.approx(ref_value, rel=1e-8, abs=1e-12)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_call_matches_autograd_finite_differences(variant):
    """The closed-form gradient is the gradient of the returned value (gradcheck)."""
    neighbors, initial, _, indices, logits, target = _problem(2.0, seed=11)

    def penalty(z):
        return _smoothing(neighbors, initial.double(), variant)(z, indices, target)

    assert torch.autograd.gradcheck(penalty, (logits.double().requires_grad_(True),))


def test_without_grad_the_call_returns_a_plain_value_and_still_refreshes_the_cache():
    neighbors, initial, _, indices, logits, target = _problem(1.0, seed=5)
    smoothing = NeighbourhoodSmoothing(neighbors, initial)
    with torch.no_grad():
        value = smoothing(logits.requires_grad_(True), indices, target)
    assert not value.requires_grad
    torch.testing.assert_close(
        smoothing.cache.log_probs[indices], F.log_softmax(logits.detach(), dim=-1)
    )


def test_an_empty_batch_gives_zero_with_a_zero_gradient():
    neighbors, initial, *_ = _problem(1.0, seed=2)
    for variant in VARIANTS:
        smoothing = _smoothing(neighbors, initial, variant)
        logits = torch.zeros(0, N_CLASSES, requires_grad=True)
        value = smoothing(logits, torch.zeros(0, dtype=torch.int64))
        value.backward()
        assert value.item() == 0.0
        assert logits.grad.shape == (0, N_CLASSES)
