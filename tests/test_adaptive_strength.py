"""Per-row strength of the NeSCal penalty: ``adaptive="agreement"`` and ``"density"``."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
from nescal_sklearn.penalties import (
    NeighbourhoodSmoothing,
    neighbourhood_penalty,
    soft_target_penalty,
)


def _kl(target, p):
    target, p = np.asarray(target), np.asarray(p)
    return float(np.sum(target * np.log(target / p)))


def test_weights_give_the_weighted_mean_of_row_values():
    log_p = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    neighbours = torch.log(torch.tensor([[[0.8, 0.2]], [[0.6, 0.4]]]))
    rows = [_kl([0.8, 0.2], [0.5, 0.5]), _kl([0.6, 0.4], [0.9, 0.1])]
    weights = torch.tensor([2.0, 0.5])
    expected = (2.0 * rows[0] + 0.5 * rows[1]) / 2
    value = soft_target_penalty(log_p, neighbours, weights=weights)
    assert float(value) == pytest.approx(expected, rel=1e-5)
    # JS: a zero weight removes the row, a unit weight keeps it
    js_both = neighbourhood_penalty(log_p, neighbours)
    js_first = neighbourhood_penalty(log_p[:1], neighbours[:1])
    js_weighted = neighbourhood_penalty(log_p, neighbours, weights=torch.tensor([2.0, 0.0]))
    assert float(js_weighted) == pytest.approx(float(js_first), rel=1e-6)
    assert float(js_both) != pytest.approx(float(js_first), rel=1e-3)


def test_weights_of_the_wrong_shape_are_refused():
    log_p = torch.log(torch.full((2, 2), 0.5))
    neighbours = torch.log(torch.full((2, 1, 2), 0.5))
    with pytest.raises(ValueError, match=re.escape("weights must have shape (2,)")):
        soft_target_penalty(log_p, neighbours, weights=torch.ones(3))


def test_agreement_weighs_rows_by_neighbour_mass_off_the_label():
    # row 0's neighbours predict (0.9, 0.1) and (0.7, 0.3): mean 0.8 on class 0
    initial = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1], [0.7, 0.3]]))
    neighbors = torch.tensor([[1, 2], [0, 2], [0, 1]])
    logits = torch.zeros(1, 2, requires_grad=True)
    rows = torch.tensor([0])
    smoothing = NeighbourhoodSmoothing(
        neighbors, initial, divergence="soft_target", adaptive="agreement"
    )
    label_0 = smoothing(logits, rows, torch.tensor([0]))
    plain = _kl([0.8, 0.2], [0.5, 0.5])
    assert float(label_0.detach()) == pytest.approx(0.2 * plain, rel=1e-5)
    smoothing = NeighbourhoodSmoothing(
        neighbors, initial, divergence="soft_target", adaptive="agreement"
    )
    label_1 = smoothing(logits, rows, torch.tensor([1]))
    assert float(label_1.detach()) == pytest.approx(0.8 * plain, rel=1e-5)
    label_1.backward()
    assert logits.grad.abs().sum() > 0


def test_agreement_needs_the_labels():
    smoothing = NeighbourhoodSmoothing(
        torch.tensor([[1], [0]]), torch.zeros(2, 3), adaptive="agreement"
    )
    with pytest.raises(ValueError, match="needs the batch's target labels"):
        smoothing(torch.zeros(1, 3), torch.tensor([0]))


def test_density_weights_are_mean_similarities_scaled_to_mean_one():
    neighbors = torch.tensor([[1, 2], [0, 2], [0, 1]])
    similarities = torch.tensor([[0.9, 0.7], [0.9, 0.1], [-0.5, -0.1]])
    smoothing = NeighbourhoodSmoothing(
        neighbors, torch.zeros(3, 2), adaptive="density", similarities=similarities
    )
    raw = np.array([0.8, 0.5, 0.0])  # the third row's mean is negative: clipped to 0
    np.testing.assert_allclose(smoothing.row_weights.numpy(), raw / raw.mean(), rtol=1e-6)
    with pytest.raises(ValueError, match="needs the graph's similarities"):
        NeighbourhoodSmoothing(neighbors, torch.zeros(3, 2), adaptive="density")
    with pytest.raises(ValueError, match=re.escape("shape of neighbors (3, 2)")):
        NeighbourhoodSmoothing(
            neighbors, torch.zeros(3, 2), adaptive="density", similarities=torch.ones(3, 1)
        )


def test_unknown_adaptive_value_is_named():
    with pytest.raises(ValueError, match="adaptive must be None, 'agreement' or 'density'"):
        NeighbourhoodSmoothing(torch.tensor([[1], [0]]), torch.zeros(2, 2), adaptive="x")
    with pytest.raises(ValueError, match=r"adaptive must be one of .*got 'x'"):
        ExperimentalNeSCalLoss(adaptive="x").validate()
    with pytest.raises(ValueError, match="needs graph='knn'; got graph='random'"):
        ExperimentalNeSCalLoss(adaptive="density", graph="random").validate()


@pytest.mark.parametrize("adaptive", ["agreement", "density"])
def test_estimator_trains_with_adaptive_strength(adaptive):
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    common = dict(max_epochs=8, early_stopping=False, random_state=0, hidden_sizes=(16,))
    plain = NeSCalClassifier(**common).set_params(loss__warmup=3, loss__weight=1.0)
    adapted = NeSCalClassifier("nescal_experimental", **common).set_params(
        loss__warmup=3, loss__weight=1.0, loss__adaptive=adaptive
    )
    p_plain = plain.fit(X, y).predict_proba(X)
    p_adapted = adapted.fit(X, y).predict_proba(X)
    assert np.isfinite(p_adapted).all()
    assert adapted.history_[-1, "train_penalty"] > 0
    # the weights change the optimisation, so the models differ
    assert not np.allclose(p_plain, p_adapted, atol=1e-6)
    assert math.isfinite(adapted.history_[-1, "train_loss"])
