"""refinement_log_loss and its scorer, against an independent grid search over T."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.special import log_softmax, softmax
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import cross_val_score

from nescal_sklearn.metrics import refinement_log_loss
from nescal_sklearn.scorers import get_scorer, neg_refinement_log_loss

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


def _grid_refinement(y, proba, weights=None):
    """min over a fine log-grid of T of the NLL of softmax(log p / T): the reference."""
    logits = np.log(np.clip(proba, 1e-12, 1.0))
    weights = np.ones(len(y)) if weights is None else np.asarray(weights, float)
    best = np.inf
    for log_t in np.linspace(-6, 6, 24001):
        lp = log_softmax(logits * np.exp(-log_t), axis=1)
        best = min(best, float(-(weights * lp[np.arange(len(y)), y]).sum() / weights.sum()))
    return best


def _logits(n, k, seed, scale):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += 1.0
    return y, scale * z


@pytest.mark.parametrize(("k", "scale"), [(2, 4.0), (3, 0.3), (5, 2.0)])
def test_matches_a_grid_search_over_the_temperature(k, scale):
    y, z = _logits(200, k, seed=k, scale=scale)
    proba = softmax(z, axis=1)
    ours = refinement_log_loss(y, proba)
    assert ours == pytest.approx(_grid_refinement(y, proba), abs=1e-6)
    assert ours < log_loss(y, proba)  # a miscalibrated model: a temperature helps


def test_sample_weight_is_a_repetition():
    y, z = _logits(60, 3, seed=7, scale=3.0)
    proba = softmax(z, axis=1)
    weights = np.arange(60) % 3
    repeated = np.repeat(np.arange(60), weights)
    assert refinement_log_loss(y, proba, sample_weight=weights) == pytest.approx(
        refinement_log_loss(y[repeated], proba[repeated]), abs=1e-9
    )
    assert refinement_log_loss(y, proba, sample_weight=weights) == pytest.approx(
        _grid_refinement(y, proba, weights), abs=1e-6
    )


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 5),
    st.integers(0, 10_000),
    st.floats(0.2, 3.0),
    st.floats(0.25, 4.0),
)
def test_properties(k, seed, scale, rescale):
    # Logit gaps stay below ~25, so no probability reaches the 1e-12 clipping floor.
    assume(scale * rescale <= 3.0 and scale <= 3.0)
    y, z = _logits(40, k, seed=seed, scale=scale)
    proba = softmax(z, axis=1)
    value = refinement_log_loss(y, proba)
    # Never above the log-loss, never negative.
    assert 0.0 <= value <= log_loss(y, proba, labels=np.arange(k)) + 1e-12
    # A temperature applied beforehand changes the log-loss, not the refinement loss.
    assert refinement_log_loss(y, softmax(z * rescale, axis=1)) == pytest.approx(
        value, rel=1e-6, abs=1e-9
    )


def test_labels_and_binary_1d_input():
    y = np.array(["a", "b", "b", "a", "b"])
    p1 = np.array([0.2, 0.9, 0.6, 0.4, 0.3])
    two = np.column_stack([1 - p1, p1])
    assert refinement_log_loss(y, p1) == pytest.approx(refinement_log_loss(y, two))
    assert refinement_log_loss(y, two, labels=["a", "b"]) == pytest.approx(
        _grid_refinement(np.array([0, 1, 1, 0, 1]), two), abs=1e-6
    )


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="same number of samples"):
        refinement_log_loss([0, 1, 1], [[0.5, 0.5], [0.2, 0.8]])
    with pytest.raises(ValueError, match="labels argument"):
        refinement_log_loss([0, 1, 1], [[0.3, 0.3, 0.4]] * 3)


def test_scorer_is_minus_the_metric_and_works_in_cross_validation():
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X[::2], y[::2])
    expected = -refinement_log_loss(y[1::2], model.predict_proba(X[1::2]))
    assert neg_refinement_log_loss(model, X[1::2], y[1::2]) == pytest.approx(expected)
    by_name = get_scorer("neg_refinement_log_loss")
    assert by_name(model, X[1::2], y[1::2]) == pytest.approx(expected)
    scores = (
        cross_val_score(LogisticRegression(max_iter=1000), X, y, cv=3, scoring="neg_log_loss"),
        cross_val_score(
            LogisticRegression(max_iter=1000), X, y, cv=3, scoring=neg_refinement_log_loss
        ),
    )
    assert np.all(scores[1] >= scores[0] - 1e-9)  # refinement <= log-loss on each fold
