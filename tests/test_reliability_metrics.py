"""Metrics that answered something wrong, or nothing, without a word (review of ed7ab4a).

M055 debiased calibration error of normalised weights; M095-M097 bootstrap intervals;
M111 the reliability display's band confidence; M149 all-zero embeddings.
"""

from __future__ import annotations

import re
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nescal_sklearn.diagnostics import neighbour_confidence_gap
from nescal_sklearn.metrics import (
    bootstrap_ci,
    bootstrap_reliability_band,
    debiased_calibration_error,
    expected_calibration_error,
    log_loss,
)
from nescal_sklearn.metrics._bootstrap import MAX_RESAMPLES


def _raises(message: str, error: type[Exception] = ValueError):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _warns(message: str):
    return pytest.warns(UserWarning, match=f"^{re.escape(message)}$")


# -- debiased calibration error: relative weights ----------------------------------------


def test_normalised_weights_give_the_error_of_counts():
    # M055: confidence 0.99, right 60 % of the time; weights 1/500 gave 0.0.
    y = (np.arange(500) % 5 < 3).astype(int)
    p = np.full(500, 0.99)
    assert expected_calibration_error(y, p) == pytest.approx(0.39)
    unweighted = debiased_calibration_error(y, p, n_bins=5)
    assert unweighted == pytest.approx(0.389383, abs=1e-6)
    normalised = debiased_calibration_error(y, p, n_bins=5, sample_weight=np.full(500, 1 / 500))
    assert normalised == pytest.approx(unweighted, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([1e-9, 1e-3, 0.37, 1.0, 8.5, 1e6]),
    n_bins=st.integers(1, 8),
    strategy=st.sampled_from(["uniform", "quantile"]),
    kind=st.sampled_from(["top_label", "classwise", 1]),
)
def test_scaling_every_weight_changes_nothing(seed, scale, n_bins, strategy, kind):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    logits = 2.0 * rng.normal(size=(n, 3))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = rng.integers(0, 3, size=n)
    weights = rng.uniform(0.0, 3.0, size=n)
    binning = dict(n_bins=n_bins, strategy=strategy, labels=[0, 1, 2], kind=kind, squared=True)
    reference = debiased_calibration_error(y, proba, sample_weight=weights, **binning)
    scaled = debiased_calibration_error(y, proba, sample_weight=scale * weights, **binning)
    assert scaled == pytest.approx(reference, rel=1e-9, abs=1e-12)


def test_correction_uses_kishs_effective_rows():
    # One bin: rows right, right, wrong at confidence 0.6, weights 2, 1, 1.
    # ybar = 3/4, gap^2 = (0.75 - 0.6)^2 = 0.0225, n_eff = 4^2 / 6 = 8/3, so the
    # correction is 0.75 * 0.25 / (8/3 - 1) = 0.1125 and the squared error -0.09.
    y, p = [1, 1, 0], [0.6, 0.6, 0.6]
    weighted = debiased_calibration_error(
        y, p, n_bins=1, kind=1, squared=True, sample_weight=[2.0, 1.0, 1.0]
    )
    assert weighted == pytest.approx(-0.09, abs=1e-12)
    # A row of weight 2 is one row: not the 4 rows of [1, 1, 1, 0] (n_b - 1 = 3 there).
    repeated = debiased_calibration_error([1, 1, 1, 0], [0.6] * 4, n_bins=1, kind=1, squared=True)
    assert repeated == pytest.approx(0.0225 - 0.75 * 0.25 / 3, abs=1e-12)


def test_a_bin_with_one_weighted_row_adds_nothing():
    # The second row has weight 0: one row of positive weight, no variance estimate.
    assert (
        debiased_calibration_error(
            [1, 0], [0.7, 0.7], n_bins=1, kind=1, squared=True, sample_weight=[1.0, 0.0]
        )
        == 0.0
    )


def test_kish_correction_is_unbiased_for_unequal_weights():
    # A calibrated model (every row has probability 0.3 and frequency 0.3) with very
    # unequal weights: the mean debiased squared error over many test sets is 0 (its
    # true value), where dividing by the total weight instead would leave it positive.
    rng = np.random.default_rng(0)
    n, draws = 40, 3000
    weights = rng.lognormal(sigma=1.5, size=n)
    values = []
    for _ in range(draws):
        y = (rng.uniform(size=n) < 0.3).astype(int)
        values.append(
            debiased_calibration_error(
                y, np.full(n, 0.3), n_bins=1, kind=1, squared=True, sample_weight=weights
            )
        )
    values = np.array(values)
    assert abs(values.mean()) < 3 * values.std() / np.sqrt(draws)
    plug_in = 0.3 * 0.7 * np.sum(weights**2) / np.sum(weights) ** 2  # E[(ybar - 0.3)^2]
    assert plug_in > 10 * 3 * values.std() / np.sqrt(draws)  # the bias it removes


# -- bootstrap intervals ------------------------------------------------------------------

_P3 = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]])


def test_every_class_of_a_single_row_is_refused():
    # M097 (r6): the "95 % interval" had zero width.
    message = (
        "bootstrap_ci cannot resample: every class of y_true has a single row (classes "
        "[0, 1, 2]), and a class-stratified resample redraws each class's only row, so "
        "every resample is the data itself and the interval would have zero width. Pass "
        "more rows per class."
    )
    with _raises(message):
        bootstrap_ci(expected_calibration_error, [0, 1, 2], _P3, n_resamples=50, random_state=0)
    with _raises(message.replace("bootstrap_ci", "bootstrap_reliability_band")):
        bootstrap_reliability_band([0, 1, 2], _P3, n_resamples=50, random_state=0)


def test_classes_of_a_single_row_are_named():
    y = np.array(["a", "a", "b", "c", "c", "d"])
    proba = np.array(
        [
            [0.7, 0.1, 0.1, 0.1],
            [0.3, 0.3, 0.2, 0.2],
            [0.1, 0.6, 0.2, 0.1],
            [0.2, 0.1, 0.6, 0.1],
            [0.1, 0.2, 0.4, 0.3],
            [0.1, 0.1, 0.1, 0.7],
        ]
    )
    message = (
        "bootstrap_ci: the classes ['b', 'd'] of y_true have a single row each, which "
        "every class-stratified resample redraws, so their rows never vary and the "
        "interval is too narrow. Pass more rows of those classes."
    )
    with _warns(message):
        interval = bootstrap_ci(log_loss, y, proba, n_resamples=20, random_state=0)
    assert interval.high > interval.low
    with _warns(message.replace("bootstrap_ci", "bootstrap_reliability_band")):
        bootstrap_reliability_band(y, proba, n_resamples=20, random_state=0)


def test_two_rows_per_class_are_enough():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        interval = bootstrap_ci(
            log_loss, [0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9], n_resamples=50, random_state=0
        )
    assert interval.standard_error > 0


def test_huge_n_resamples_is_refused_at_once():
    # M096: 10**9 resamples hung and allocated 8 GB.
    message = (
        "n_resamples must be at most 100000 (MAX_RESAMPLES); got 1000000000. A "
        "percentile interval settles long before that."
    )
    start = time.perf_counter()
    with _raises(message):
        bootstrap_ci(log_loss, [0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9], n_resamples=10**9)
    with _raises(message):
        bootstrap_reliability_band([0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9], n_resamples=10**9)
    assert time.perf_counter() - start < 5.0
    assert MAX_RESAMPLES == 100_000
    with _raises(message.replace("1000000000", str(MAX_RESAMPLES + 1))):
        bootstrap_ci(log_loss, [0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9], n_resamples=MAX_RESAMPLES + 1)


@pytest.mark.parametrize("value", ["a", 1.5, -1, np.random.default_rng(0)])
def test_bad_random_state_is_named_before_any_work(value):
    # M095: numpy's message named neither random_state nor its value.
    calls = []

    def metric(y, p):
        calls.append(1)
        return 0.0

    message = (
        f"random_state must be None, an int or a numpy.random.RandomState instance; got {value!r}."
    )
    with _raises(message):
        bootstrap_ci(metric, [0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9], random_state=value)
    assert calls == []
    with _raises(message):
        bootstrap_reliability_band([0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9], random_state=value)


# -- reliability display (M111) and diagnostics (M149) -----------------------------------


@pytest.mark.parametrize("value", [0, 1.0, -0.5, "0.9"])
def test_band_confidence_is_checked_without_a_band(value):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nescal_sklearn.plotting import ReliabilityDisplay, plot_classwise_reliability

    y, proba = [0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9]
    message = f"band_confidence must be a number strictly between 0 and 1; got {value!r}."
    try:
        with _raises(message):
            ReliabilityDisplay.from_predictions(y, proba, band_confidence=value)
        with _raises(message):
            plot_classwise_reliability(y, proba, band_confidence=value)
    finally:
        plt.close("all")


def test_all_zero_embeddings_are_named():
    proba = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]] * 2)
    message = (
        "6 of the 6 rows of embeddings are all zero. A zero row is similar to no row (its "
        "cosine similarity is 0 to every row), so the kNN graph joins it to arbitrary rows "
        "and its edges say nothing about the model's neighbourhoods. Drop those rows, or "
        "pass edges."
    )
    with _warns(message):
        gap = neighbour_confidence_gap(proba=proba, embeddings=np.zeros((6, 2)), n_neighbors=2)
    assert gap.n_edges == 12
    some = np.arange(12.0).reshape(6, 2)
    some[[1, 4]] = 0.0
    with _warns(message.replace("6 of the 6", "2 of the 6")):
        neighbour_confidence_gap(proba=proba, embeddings=some, n_neighbors=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        neighbour_confidence_gap(proba=proba, embeddings=some + 1.0, n_neighbors=2)


def test_all_zero_reference_embeddings_are_named():
    proba = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]])
    message = (
        "3 of the 3 rows of reference_embeddings are all zero. A zero row is similar to no "
        "row (its cosine similarity is 0 to every row), so the kNN graph joins it to "
        "arbitrary rows and its edges say nothing about the model's neighbourhoods. Drop "
        "those rows, or pass edges."
    )
    with _warns(message):
        neighbour_confidence_gap(
            proba=proba,
            embeddings=np.eye(3),
            reference_proba=proba,
            reference_embeddings=np.zeros((3, 3)),
            n_neighbors=1,
        )
