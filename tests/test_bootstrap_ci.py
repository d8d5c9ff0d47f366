"""Tests of nescal_sklearn.metrics.bootstrap_ci and bootstrap_reliability_band."""

from __future__ import annotations

import re

import numpy as np
import pytest
import sklearn.metrics
from hypothesis import given, settings
from hypothesis import strategies as st

from nescal_sklearn.metrics import (
    BootstrapInterval,
    ReliabilityBand,
    bootstrap_ci,
    bootstrap_reliability_band,
    brier_score_loss,
    expected_calibration_error,
    local_calibration_error,
    log_loss,
    reliability_curve,
)

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


def _raises(message: str, error: type[Exception] = ValueError):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _calibrated(rng: np.random.Generator, n: int, low: float = 0.05, high: float = 0.95):
    """Binary labels drawn from probabilities uniform on [low, high]: calibrated."""
    proba = rng.uniform(low, high, size=n)
    return (rng.uniform(size=n) < proba).astype(int), proba


def _binary_log_loss(y: np.ndarray, p: np.ndarray) -> float:
    return float(-np.mean(np.log(np.where(y == 1, p, 1.0 - p))))


def _binary_brier(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean((p - y) ** 2))


def _population_log_loss(low: float, high: float) -> float:
    """E[H(p)] for p ~ U(low, high), low + high = 1, from the antiderivative of -p log p.

    By the symmetry p -> 1 - p, the two halves of the entropy integrate alike, so
    E[H] = 2 / (high - low) * [p**2 / 4 - p**2 log(p) / 2] from low to high.
    """

    def antiderivative(p: float) -> float:
        return p**2 / 4.0 - p**2 * np.log(p) / 2.0

    return 2.0 * (antiderivative(high) - antiderivative(low)) / (high - low)


# ------------------------------------------------------------------------------ coverage


def test_population_log_loss_formula_matches_a_quadrature():
    grid = np.linspace(0.05, 0.95, 200_001)
    entropy = -grid * np.log(grid) - (1 - grid) * np.log(1 - grid)
    mean_entropy = np.trapezoid(entropy, grid) / 0.9
    assert _population_log_loss(0.05, 0.95) == pytest.approx(mean_entropy, rel=1e-9)


@pytest.mark.parametrize(
    ("confidence", "lowest", "highest"), [(0.95, 0.89, 0.99), (0.5, 0.38, 0.62)]
)
def test_interval_covers_the_population_log_loss_at_the_nominal_rate(confidence, lowest, highest):
    # A calibrated model whose probabilities are symmetric about 1/2, so that fixing the
    # class counts (the stratification) removes no variance of the log-loss.
    truth = _population_log_loss(0.05, 0.95)
    rng = np.random.default_rng(12345)
    covered = []
    for repetition in range(200):
        y, p = _calibrated(rng, 200)
        interval = bootstrap_ci(
            _binary_log_loss,
            y,
            p,
            n_resamples=200,
            confidence=confidence,
            random_state=repetition,
        )
        covered.append(interval.low <= truth <= interval.high)
    assert lowest <= np.mean(covered) <= highest


def test_the_fast_metrics_of_these_tests_are_sklearns():
    y, p = _calibrated(np.random.default_rng(0), 100)
    assert _binary_log_loss(y, p) == pytest.approx(sklearn.metrics.log_loss(y, p))
    assert _binary_brier(y, p) == pytest.approx(sklearn.metrics.brier_score_loss(y, p))


# ------------------------------------------------------------ agreement with references


def _stratified_numpy_bootstrap(values: np.ndarray, y: np.ndarray, n_resamples: int, seed: int):
    """Means of ``values`` over stratified resamples, drawn with numpy's own choice."""
    rng = np.random.default_rng(seed)
    groups = [values[y == c] for c in np.unique(y)]
    out = np.empty(n_resamples)
    for b in range(n_resamples):
        out[b] = np.concatenate([rng.choice(g, size=g.size, replace=True) for g in groups]).mean()
    return out


def test_agrees_with_an_independent_bootstrap_and_the_stratified_variance_formula():
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1], [150, 250])
    p = np.clip(rng.beta(2, 2, size=400) * 0.6 + 0.4 * y, 0, 1)  # skewed, class-dependent
    per_row = (p - y) ** 2  # binary Brier score, a mean over rows
    interval = bootstrap_ci(_binary_brier, y, p, n_resamples=2000, random_state=0)
    reference = _stratified_numpy_bootstrap(per_row, y, 2000, seed=1)
    # Stratified bootstrap variance of a mean: sum_c (n_c / n)**2 * var_c / n_c, with the
    # within-class variance var_c taken with ddof=0 (the bootstrap's plug-in variance).
    n = y.size
    analytic_se = np.sqrt(
        sum((np.sum(y == c) / n) ** 2 * per_row[y == c].var() / np.sum(y == c) for c in (0, 1))
    )
    assert interval.estimate == pytest.approx(brier_score_loss(y, p))
    assert interval.standard_error == pytest.approx(analytic_se, rel=0.08)
    assert reference.std(ddof=1) == pytest.approx(analytic_se, rel=0.08)
    low, high = np.quantile(reference, [0.025, 0.975])
    assert interval.low == pytest.approx(low, abs=0.3 * analytic_se)
    assert interval.high == pytest.approx(high, abs=0.3 * analytic_se)
    assert interval.values.mean() == pytest.approx(per_row.mean(), abs=0.1 * analytic_se)


def test_result_fields_are_the_summaries_of_the_values():
    y, p = _calibrated(np.random.default_rng(1), 120)
    interval = bootstrap_ci(_binary_log_loss, y, p, n_resamples=300, confidence=0.8, random_state=4)
    assert isinstance(interval, BootstrapInterval)
    # exact: the estimate is the metric called on all rows, this same call
    assert interval.estimate == _binary_log_loss(y, p)
    assert (interval.confidence, interval.n_resamples) == (0.8, 300)
    assert interval.values.shape == (300,)
    np.testing.assert_allclose(
        [interval.low, interval.high], np.quantile(interval.values, [0.1, 0.9])
    )
    assert interval.standard_error == pytest.approx(np.std(interval.values, ddof=1))
    with pytest.raises(ValueError, match="read-only"):
        interval.values[0] = 0.0
    with pytest.raises(AttributeError):
        interval.low = 0.0


# ------------------------------------------------------------------------- determinism


def test_random_state_makes_it_deterministic():
    y, p = _calibrated(np.random.default_rng(2), 80)
    first = bootstrap_ci(log_loss, y, p, n_resamples=50, random_state=7)
    again = bootstrap_ci(log_loss, y, p, n_resamples=50, random_state=7)
    other = bootstrap_ci(log_loss, y, p, n_resamples=50, random_state=8)
    np.testing.assert_array_equal(first.values, again.values)
    assert (first.low, first.high) == (again.low, again.high)
    assert not np.array_equal(first.values, other.values)
    from_state = bootstrap_ci(log_loss, y, p, n_resamples=50, random_state=np.random.RandomState(7))
    np.testing.assert_array_equal(from_state.values, first.values)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), a=st.floats(0.05, 0.95), b=st.floats(0.05, 0.95))
def test_intervals_of_one_seed_are_nested_in_the_confidence(seed, a, b):
    y, p = _calibrated(np.random.default_rng(seed), 40)
    narrow, wide = sorted((a, b))
    inner = bootstrap_ci(
        _binary_log_loss, y, p, n_resamples=30, confidence=narrow, random_state=seed
    )
    outer = bootstrap_ci(_binary_log_loss, y, p, n_resamples=30, confidence=wide, random_state=seed)
    assert outer.low <= inner.low <= inner.high <= outer.high


# ---------------------------------------------------------------------- stratification


def test_every_resample_keeps_every_class_and_its_count():
    # Rows of class c hold probability mass mostly on column c, with the row number
    # hidden in the last digits, so the metric can tell which rows were drawn.
    counts = [50, 30, 2]
    y = np.repeat([0, 1, 2], counts)
    n = y.size
    proba = np.full((n, 3), 0.1)
    proba[np.arange(n), y] = 0.8
    row_id = np.arange(n)
    seen_rows = []

    def metric(y_b, p_b, *, sample_weight):
        assert np.array_equal(np.bincount(y_b, minlength=3), counts)  # every class, same count
        assert np.array_equal(np.argmax(p_b, axis=1), y_b)  # rows drawn within their class
        assert np.array_equal(y[sample_weight.astype(int)], y_b)  # weights travel with rows
        seen_rows.append(np.unique(sample_weight).size)
        return float(np.sum(y_b == 2))

    interval = bootstrap_ci(
        metric, y, proba, n_resamples=200, random_state=0, sample_weight=row_id.astype(float)
    )
    assert np.all(interval.values == 2.0)
    assert interval.low == interval.high == interval.estimate == 2.0
    assert min(seen_rows[1:]) < n  # resamples repeat rows (the first call is the full data)


def test_two_row_class_gets_both_of_its_rows_in_various_mixes():
    y = np.array([0] * 20 + [1, 1])
    p = np.linspace(0.1, 0.9, y.size)

    def mean_of_class_one(y_b, p_b):
        return float(np.mean(p_b[y_b == 1]))

    values = bootstrap_ci(mean_of_class_one, y, p, n_resamples=200, random_state=0).values
    # Two rows drawn with replacement: both the first, one of each, or both the second.
    assert set(np.round(values, 12)) == set(np.round([p[20], (p[20] + p[21]) / 2, p[21]], 12))


def test_sample_weight_and_features_are_resampled_with_the_rows():
    rng = np.random.default_rng(5)
    y, p = _calibrated(rng, 60)
    weights = rng.uniform(0.5, 2.0, size=60)
    features = np.column_stack([p, rng.normal(size=60)])  # column 0 repeats p

    def metric(y_b, p_b, *, sample_weight, features, n_bins):
        assert np.array_equal(features[:, 0], p_b) and n_bins == 5
        return expected_calibration_error(y_b, p_b, sample_weight=sample_weight, n_bins=n_bins)

    interval = bootstrap_ci(
        metric,
        y,
        p,
        n_resamples=20,
        random_state=0,
        sample_weight=weights,
        features=features,
        n_bins=5,
    )
    # exact: the estimate is the metric called on all rows, this same call
    assert interval.estimate == expected_calibration_error(y, p, sample_weight=weights, n_bins=5)
    local = bootstrap_ci(
        local_calibration_error, y, p, n_resamples=5, random_state=0, features=features
    )
    assert local.estimate == local_calibration_error(y, p, features)


def test_weights_change_the_resampled_values():
    y, p = _calibrated(np.random.default_rng(6), 100)
    weights = np.where(p > 0.5, 5.0, 1.0)
    plain = bootstrap_ci(expected_calibration_error, y, p, n_resamples=20, random_state=0)
    weighted = bootstrap_ci(
        expected_calibration_error, y, p, n_resamples=20, random_state=0, sample_weight=weights
    )
    assert not np.allclose(plain.values, weighted.values)


# ------------------------------------------------------------ labels, shapes, metrics


def test_labels_pass_through_for_a_class_missing_from_y_true():
    rng = np.random.default_rng(7)
    proba = rng.dirichlet([1, 1, 1], size=40)
    y = rng.integers(0, 2, size=40)  # class 2 never occurs
    interval = bootstrap_ci(
        expected_calibration_error, y, proba, n_resamples=10, random_state=0, labels=[0, 1, 2]
    )
    # exact: the estimate is the metric called on all rows, this same call
    assert interval.estimate == expected_calibration_error(y, proba, labels=[0, 1, 2])
    with pytest.raises(ValueError, match="Pass the full, ordered list of classes"):
        bootstrap_ci(expected_calibration_error, y, proba, n_resamples=10)


def test_sklearn_metrics_and_string_classes():
    rng = np.random.default_rng(8)
    proba = rng.dirichlet([2, 2, 2], size=90)
    y = np.array(["a", "b", "c"])[rng.integers(0, 3, size=90)]

    def accuracy(y_b, p_b):
        return sklearn.metrics.accuracy_score(y_b, np.array(["a", "b", "c"])[p_b.argmax(axis=1)])

    for metric in (sklearn.metrics.log_loss, accuracy):
        interval = bootstrap_ci(metric, y, proba, n_resamples=50, random_state=0)
        assert interval.estimate == pytest.approx(metric(y, proba))
        assert interval.low <= interval.high


def test_one_dimensional_binary_probabilities():
    y, p = _calibrated(np.random.default_rng(9), 70)
    interval = bootstrap_ci(brier_score_loss, list(y), list(p), n_resamples=30, random_state=0)
    # exact: the estimate is the metric called on all rows, this same call
    assert interval.estimate == brier_score_loss(y, p)
    two_columns = bootstrap_ci(
        brier_score_loss,
        y,
        np.column_stack([1 - p, p]),
        n_resamples=30,
        random_state=0,
        scale_by_half=True,
    )
    np.testing.assert_allclose(two_columns.values, interval.values)


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("value", [1, 0, -5, 2.5, True, "100", None])
def test_bad_n_resamples(value):
    with _raises(f"n_resamples must be an integer >= 2; got {value!r}."):
        bootstrap_ci(log_loss, [0, 1], [0.3, 0.6], n_resamples=value)


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, True, "0.9", None, float("nan")])
def test_bad_confidence(value):
    with _raises(f"confidence must be a number strictly between 0 and 1; got {value!r}."):
        bootstrap_ci(log_loss, [0, 1], [0.3, 0.6], confidence=value)


def test_metric_must_be_callable():
    with _raises("metric must be callable; got 'log_loss'.", TypeError):
        bootstrap_ci("log_loss", [0, 1], [0.3, 0.6])


def test_rows_must_match():
    with _raises("y_true and y_proba must have the same number of samples; got 2 and 3."):
        bootstrap_ci(log_loss, [0, 1], [0.3, 0.6, 0.5])
    with _raises("y_true must not be empty; got 0 samples."):
        bootstrap_ci(log_loss, [], [])
    with _raises(
        "sample_weight must have one entry per row (2), as it is resampled with the rows; "
        "got shape (3,)."
    ):
        bootstrap_ci(log_loss, [0, 1], [0.3, 0.6], sample_weight=[1, 1, 1])


# ------------------------------------------------------------------ reliability band


def test_band_keeps_the_bins_of_the_full_data():
    # Quantile bins: the lower half of the probabilities all miss, the upper half all
    # hit. With the bins of the full data kept, every resample gives exactly 0 and 1;
    # re-binning each resample at its own quantiles would mix the two halves.
    p = np.linspace(0.05, 0.95, 40)
    y = (p > 0.5).astype(int)
    band = bootstrap_reliability_band(
        y, p, n_bins=2, strategy="quantile", kind=1, n_resamples=100, random_state=0
    )
    assert isinstance(band, ReliabilityBand)
    np.testing.assert_array_equal(band.accuracy, np.tile([0.0, 1.0], (100, 1)))
    np.testing.assert_array_equal(band.low, [0.0, 1.0])
    np.testing.assert_array_equal(band.high, [0.0, 1.0])


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("kind", ["top_label", 0, 2])
def test_band_is_around_the_curve_of_reliability_curve(strategy, kind):
    rng = np.random.default_rng(10)
    proba = rng.dirichlet([1, 1, 1], size=600)
    y = np.array([rng.choice(3, p=row) for row in proba])
    weights = rng.uniform(0.5, 1.5, size=600)
    band = bootstrap_reliability_band(
        y,
        proba,
        n_bins=6,
        strategy=strategy,
        kind=kind,
        sample_weight=weights,
        n_resamples=100,
        random_state=0,
    )
    curve = reliability_curve(
        y, proba, n_bins=6, strategy=strategy, kind=kind, sample_weight=weights
    )
    for field in ("confidence", "accuracy", "counts", "bin_edges"):
        # exact: the band's curve is reliability_curve called with these arguments
        np.testing.assert_array_equal(getattr(band.curve, field), getattr(curve, field))
    nonempty = curve.counts > 0
    assert np.all(band.low[nonempty] <= curve.accuracy[nonempty])
    assert np.all(curve.accuracy[nonempty] <= band.high[nonempty])
    np.testing.assert_allclose(
        np.nanmean(band.accuracy[:, nonempty], axis=0), curve.accuracy[nonempty], atol=0.03
    )
    assert np.all(np.isnan(band.low[~nonempty]) & np.isnan(band.high[~nonempty]))


def test_band_errors():
    with _raises("n_resamples must be an integer >= 2; got 1."):
        bootstrap_reliability_band([0, 1], [0.3, 0.6], n_resamples=1)
    with _raises("confidence must be a number strictly between 0 and 1; got 1.0."):
        bootstrap_reliability_band([0, 1], [0.3, 0.6], confidence=1.0)
    with _raises("n_bins must be an integer >= 1; got 0."):
        bootstrap_reliability_band([0, 1], [0.3, 0.6], n_bins=0)
