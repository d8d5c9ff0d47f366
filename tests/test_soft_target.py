"""The neighbour soft-target penalty and NeSCalLoss(divergence="soft_target")."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nescal_sklearn.losses import NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
from nescal_sklearn.penalties import soft_target_penalty

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


def test_hand_worked_value():
    # neighbours (0.9, 0.1) and (0.7, 0.3): mean (0.8, 0.2); p = (0.5, 0.5)
    log_p = torch.log(torch.tensor([[0.5, 0.5]]))
    neighbours = torch.log(torch.tensor([[[0.9, 0.1], [0.7, 0.3]]]))
    expected = 0.8 * math.log(0.8 / 0.5) + 0.2 * math.log(0.2 / 0.5)
    assert float(soft_target_penalty(log_p, neighbours)) == pytest.approx(expected, rel=1e-6)


def test_temperature_reshapes_the_target():
    log_p = torch.log(torch.tensor([[0.8, 0.2]]))
    neighbours = torch.log(torch.tensor([[[0.8, 0.2]]]))
    assert float(soft_target_penalty(log_p, neighbours)) == pytest.approx(0.0, abs=1e-7)
    # at T=2 the target is sqrt-renormalised: (sqrt .8, sqrt .2) / sum = (2/3, 1/3)
    target = np.array([2 / 3, 1 / 3])
    expected = float(np.sum(target * np.log(target / np.array([0.8, 0.2]))))
    value = soft_target_penalty(log_p, neighbours, temperature=2.0)
    assert float(value) == pytest.approx(expected, rel=1e-5)


def test_gradient_pulls_toward_the_neighbours_and_ignores_them():
    logits = torch.zeros(1, 3, requires_grad=True)
    neighbours = torch.log(torch.tensor([[[0.7, 0.2, 0.1]]])).requires_grad_()
    soft_target_penalty(torch.log_softmax(logits, -1), neighbours).backward()
    # d KL / d logits = p - target
    np.testing.assert_allclose(
        logits.grad.numpy(), [[1 / 3 - 0.7, 1 / 3 - 0.2, 1 / 3 - 0.1]], atol=1e-6
    )
    assert neighbours.grad is None  # the cached target is a constant


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(2, 5), st.integers(0, 10_000))
def test_non_negative_and_finite_on_extreme_logits(k, n_classes, seed):
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.rand(4, n_classes, generator=gen) - 0.5) * 100
    logits.requires_grad_()
    neighbours = torch.log_softmax((torch.rand(4, k, n_classes, generator=gen) - 0.5) * 100, -1)
    value = soft_target_penalty(torch.log_softmax(logits, -1), neighbours)
    value.backward()
    assert float(value.detach()) >= -1e-6 and math.isfinite(float(value.detach()))
    assert torch.isfinite(logits.grad).all()


def test_errors():
    with pytest.raises(ValueError, match=re.escape("temperature must be > 0; got 0.0.")):
        soft_target_penalty(torch.zeros(1, 2), torch.zeros(1, 1, 2), temperature=0.0)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "log_p must have shape (B, C) and neighbour_log_probs shape (B, k, C); got (1, 2) "
            "and (1, 1, 3)."
        ),
    ):
        soft_target_penalty(torch.zeros(1, 2), torch.zeros(1, 1, 3))
    with pytest.raises(
        ValueError,
        match=re.escape("NeSCalLoss: divergence must be one of ['js', 'soft_target']; got 'kl'."),
    ):
        NeSCalLoss(divergence="kl").validate()
    with pytest.raises(
        ValueError, match=re.escape("NeSCalLoss: target_temperature must be > 0.0; got -1.0.")
    ):
        ExperimentalNeSCalLoss(target_temperature=-1.0).validate()


def test_neighbourhood_smoothing_soft_target_matches_the_function():
    from nescal_sklearn.penalties import NeighbourhoodSmoothing

    neighbors = torch.tensor([[1, 2], [0, 2], [0, 1]])
    initial = torch.log_softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), -1)
    smoothing = NeighbourhoodSmoothing(
        neighbors, initial, divergence="soft_target", target_temperature=1.5
    )
    logits = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    expected = soft_target_penalty(
        torch.log_softmax(logits, -1), initial[neighbors[[0, 2]]], temperature=1.5
    )
    got = smoothing(logits, torch.tensor([0, 2]))
    assert float(got) == pytest.approx(float(expected), rel=1e-6)
    with pytest.raises(
        ValueError, match=re.escape("divergence must be 'js' or 'soft_target'; got 'kl'.")
    ):
        NeighbourhoodSmoothing(neighbors, initial, divergence="kl")
