"""Tests of nescal_sklearn.metrics.debiased_calibration_error (Kumar, Liang and Ma, 2019)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nescal_sklearn.metrics import debiased_calibration_error, reliability_curve

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


def _raises(message: str, error: type[Exception] = ValueError):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _random_proba(rng: np.random.Generator, n: int, n_classes: int) -> np.ndarray:
    logits = 2.0 * rng.normal(size=(n, n_classes))
    proba = np.exp(logits)
    return proba / proba.sum(axis=1, keepdims=True)


def _kumar_ce_1d(probs: np.ndarray, outcomes: np.ndarray, num_bins: int) -> float:
    """Kumar et al.'s ``unbiased_l2_ce`` on their equal-mass bins, rewritten from the paper.

    The sorted probabilities are cut into chunks of ceil(n / num_bins); the bin edges are
    the midpoints between chunks, a value goes to the first edge >= it; a bin of fewer
    than two values adds 0; the result is sqrt(max(sum, 0)).
    """
    ordered = np.sort(probs)
    size = math.ceil(len(ordered) / num_bins)
    chunks = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    edges = sorted({(a[-1] + b[0]) / 2 for a, b in zip(chunks[:-1], chunks[1:], strict=True)})
    edges.append(1.0)
    which = np.searchsorted(edges, probs, side="left")
    total = 0.0
    for b in range(len(edges)):
        p, y = probs[which == b], outcomes[which == b]
        if len(p) < 2:
            continue
        bias = np.mean(y) * (1 - np.mean(y)) / (len(p) - 1)
        total += len(p) / len(probs) * ((np.mean(y) - np.mean(p)) ** 2 - bias)
    return max(total, 0.0) ** 0.5


def _plugin_squared(y, proba, **binning) -> float:
    curve = reliability_curve(y, proba, **binning)
    full = curve.counts > 0
    gaps = (curve.accuracy[full] - curve.confidence[full]) ** 2
    return float(np.sum(curve.counts[full] * gaps) / np.sum(curve.counts))


# -------------------------------------------------------------------------- hand-worked


def test_hand_worked_three_uniform_bins():
    # Probability of class 1, 3 equal-width bins (0, 1/3], (1/3, 2/3], (2/3, 1]:
    #   bin 0: p = .2, .3, both class 1 -> ybar 1, pbar .25, (1 - .25)^2 - 1 * 0 / 1 = .5625
    #   bin 1: p = .5 alone             -> fewer than 2 rows, adds 0 (its row still counts)
    #   bin 2: p = .7, .8, .9; y 0 0 1 -> ybar 1/3, pbar .8,
    #          (1/3 - .8)^2 - (1/3)(2/3) / 2 = 0.217777... - 0.111111... = 0.106666...
    # squared = (2 * .5625 + 1 * 0 + 3 * 0.106666...) / 6 = 0.2408333...
    y = [1, 1, 1, 0, 0, 1]
    p = [0.2, 0.3, 0.5, 0.7, 0.8, 0.9]
    bin_2 = (1 / 3 - 0.8) ** 2 - (1 / 3) * (2 / 3) / 2
    expected = (2 * 0.5625 + 3 * bin_2) / 6
    got = debiased_calibration_error(y, p, n_bins=3, strategy="uniform", kind=1, squared=True)
    assert got == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.2408333333)
    root = debiased_calibration_error(y, p, n_bins=3, strategy="uniform", kind=1)
    assert root == pytest.approx(math.sqrt(expected), rel=1e-12)


def test_hand_worked_clipped_at_zero():
    # Quantile bins of 4 rows: confidence .8 with 3 of 4 right, .9 with 4 of 4 right:
    # .5 * ((.75 - .8)^2 - .75 * .25 / 3) + .5 * ((1 - .9)^2 - 0) = -.03 + .005 = -.025.
    y = [1, 1, 1, 0, 1, 1, 1, 1]
    p = [0.8] * 4 + [0.9] * 4
    assert debiased_calibration_error(y, p, n_bins=2, squared=True) == pytest.approx(-0.025)
    assert debiased_calibration_error(y, p, n_bins=2) == 0.0


@pytest.mark.parametrize("seed", range(4))
def test_matches_kumar_reference_top_label_and_marginal(seed):
    # 120 rows, 6 bins: ceil(120 / 6) = 20 divides the rows, so both equal-mass binnings
    # agree (continuous probabilities, no ties).
    rng = np.random.default_rng(seed)
    proba = _random_proba(rng, 120, 3)
    y = np.array([rng.choice(3, p=(0.7 * row + 0.1)) for row in proba])  # miscalibrated
    confidence = proba.max(axis=1)
    correct = (proba.argmax(axis=1) == y).astype(float)
    assert debiased_calibration_error(y, proba, n_bins=6) == pytest.approx(
        _kumar_ce_1d(confidence, correct, 6), abs=1e-12
    )
    marginal = np.sqrt(
        np.mean([_kumar_ce_1d(proba[:, k], (y == k).astype(float), 6) ** 2 for k in range(3)])
    )
    assert debiased_calibration_error(y, proba, n_bins=6, kind="classwise") == pytest.approx(
        marginal, abs=1e-12
    )
    for k in range(3):
        assert debiased_calibration_error(y, proba, n_bins=6, kind=k) == pytest.approx(
            _kumar_ce_1d(proba[:, k], (y == k).astype(float), 6), abs=1e-12
        )


# ------------------------------------------------------------------------ simulation


def test_debiased_is_closer_to_the_true_error_than_the_plugin():
    rng = np.random.default_rng(0)
    debiased_sq, plugin_sq, debiased, plugin = [], [], [], []
    shifted_debiased, shifted_plugin = [], []
    for _ in range(100):
        p = rng.uniform(0.15, 0.95, size=500)
        y = (rng.uniform(size=500) < p).astype(int)  # calibrated: true error 0
        debiased_sq.append(debiased_calibration_error(y, p, kind=1, squared=True))
        plugin_sq.append(_plugin_squared(y, p, n_bins=15, strategy="quantile", kind=1))
        debiased.append(debiased_calibration_error(y, p, kind=1))
        plugin.append(math.sqrt(plugin_sq[-1]))
        # Over-confident by exactly 0.1 everywhere: true L2 error 0.1, squared 0.01.
        y_shift = (rng.uniform(size=500) < p - 0.1).astype(int)
        shifted_debiased.append(debiased_calibration_error(y_shift, p, kind=1, squared=True))
        shifted_plugin.append(_plugin_squared(y_shift, p, n_bins=15, strategy="quantile", kind=1))
    # The plug-in squared error of a calibrated model is about n_bins * mean(var_b) / n
    # (about 15 * 0.19 / 500 = 0.0057 here); the debiased one averages to about 0.
    assert np.mean(plugin_sq) > 0.004
    assert abs(np.mean(debiased_sq)) < 0.1 * np.mean(plugin_sq)
    assert np.mean(debiased) < 0.5 * np.mean(plugin)
    assert abs(np.mean(shifted_debiased) - 0.01) < 0.25 * abs(np.mean(shifted_plugin) - 0.01)
    assert abs(np.mean(shifted_debiased) - 0.01) < 0.002


# ------------------------------------------------------------------------ invariances


def test_row_order_class_names_and_column_order_do_not_matter():
    rng = np.random.default_rng(1)
    proba = _random_proba(rng, 90, 3)
    y = rng.integers(0, 3, size=90)
    for kind in ("top_label", "classwise"):
        base = debiased_calibration_error(y, proba, kind=kind, n_bins=5, squared=True)
        order = rng.permutation(90)
        shuffled = debiased_calibration_error(
            y[order], proba[order], kind=kind, n_bins=5, squared=True
        )
        assert shuffled == pytest.approx(base, abs=1e-12)
        columns = [2, 0, 1]
        names = np.array(["a", "b", "c"])
        renamed = debiased_calibration_error(
            names[y], proba[:, columns], labels=names[columns], kind=kind, n_bins=5, squared=True
        )
        assert renamed == pytest.approx(base, abs=1e-12)
    one_vs_rest = debiased_calibration_error(y, proba, kind=2, n_bins=5)
    named = debiased_calibration_error(
        np.array(["a", "b", "c"])[y], proba, labels=["a", "b", "c"], kind="c", n_bins=5
    )
    # exact: kind='c' is looked up to column 2, the same computation
    assert named == one_vs_rest


def test_binary_one_column_equals_two_columns():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=70)
    y = (rng.uniform(size=70) < p**1.5).astype(int)
    for kind in ("top_label", "classwise", 0, 1):
        # exact: one column p becomes the columns [1 - p, p] first, the same computation
        assert debiased_calibration_error(y, p, kind=kind) == debiased_calibration_error(
            y, np.column_stack([1 - p, p]), kind=kind
        )


def test_classwise_is_the_root_of_the_mean_clipped_per_class_squares():
    rng = np.random.default_rng(0)
    proba = _random_proba(rng, 60, 4)
    y = np.array([rng.choice(4, p=row) for row in proba])  # calibrated: errors near 0
    per_class = [debiased_calibration_error(y, proba, kind=k, squared=True) for k in range(4)]
    assert min(per_class) < 0 < max(per_class)  # so clipping matters here
    assert debiased_calibration_error(y, proba, kind="classwise") == pytest.approx(
        np.sqrt(np.mean(np.maximum(per_class, 0)))
    )
    assert debiased_calibration_error(y, proba, kind="classwise", squared=True) == pytest.approx(
        np.mean(per_class)
    )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n_bins=st.integers(1, 8),
    strategy=st.sampled_from(["uniform", "quantile"]),
    kind=st.sampled_from(["top_label", "classwise", 1]),
)
def test_zero_and_unit_weights_act_as_removed_and_kept_rows(seed, n_bins, strategy, kind):
    # Weights are relative (Kish's effective rows in the correction), so a weight of 2 is
    # not two rows; weights of 0 and 1 remove and keep rows.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    proba = _random_proba(rng, n, 3)
    y = rng.integers(0, 3, size=n)
    weights = rng.integers(0, 2, size=n)
    weights[0] = 1  # a positive total
    binning = dict(n_bins=n_bins, strategy=strategy, labels=[0, 1, 2], kind=kind, squared=True)
    weighted = debiased_calibration_error(y, proba, sample_weight=weights, **binning)
    repeated = debiased_calibration_error(
        np.repeat(y, weights), np.repeat(proba, weights, axis=0), **binning
    )
    assert weighted == pytest.approx(repeated, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n_bins=st.integers(1, 10))
def test_debiased_square_is_at_most_the_plugin_square_and_the_root_its_clip(seed, n_bins):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50))
    proba = _random_proba(rng, n, 3)
    y = rng.integers(0, 3, size=n)
    binning = dict(n_bins=n_bins, strategy="quantile", labels=[0, 1, 2])
    squared = debiased_calibration_error(y, proba, squared=True, **binning)
    assert -0.25 <= squared <= _plugin_squared(y, proba, **binning) + 1e-12
    root = debiased_calibration_error(y, proba, **binning)
    assert root == pytest.approx(math.sqrt(max(squared, 0.0)), abs=1e-12)
    assert 0.0 <= root <= 1.0


def test_unit_weights_are_no_weights():
    rng = np.random.default_rng(4)
    proba = _random_proba(rng, 50, 3)
    y = rng.integers(0, 3, size=50)
    assert debiased_calibration_error(
        y, proba, sample_weight=np.ones(50)
    ) == debiased_calibration_error(y, proba)


# ------------------------------------------------------------------------------ errors


def test_errors():
    y, p = [0, 1, 1], [0.2, 0.7, 0.9]
    with _raises("squared must be True or False; got 1."):
        debiased_calibration_error(y, p, squared=1)
    with _raises("kind must be 'top_label', 'classwise' or one of the classes [0, 1]; got 3."):
        debiased_calibration_error(y, p, kind=3)
    with _raises("n_bins must be an integer >= 1; got 0."):
        debiased_calibration_error(y, p, n_bins=0)
    with _raises("strategy must be 'uniform' or 'quantile'; got 'equal'."):
        debiased_calibration_error(y, p, strategy="equal")
    with _raises("sample_weight must have a positive sum; got 0.0."):
        debiased_calibration_error(y, p, sample_weight=[0, 0, 0])
