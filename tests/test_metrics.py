"""Tests of nescal_sklearn.metrics: hand-worked values, cross-checks, properties, errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
import sklearn.metrics
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve

from nescal_sklearn.metrics import (
    ReliabilityCurve,
    brier_score_loss,
    classwise_calibration_error,
    classwise_reliability_curves,
    ece_from_curve,
    expected_calibration_error,
    log_loss,
    maximum_calibration_error,
    reliability_curve,
)

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

METRICS = [expected_calibration_error, maximum_calibration_error, classwise_calibration_error]

# Top-label confidences 0.8 (right), 0.6 (right), 0.6 (wrong: predicts 0), 0.8 (right).
Y_TRUE = [0, 1, 1, 2]
Y_PROBA = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]


def _raises(message: str, error: type[Exception] = ValueError):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _random_proba(rng: np.random.Generator, n: int, n_classes: int) -> np.ndarray:
    logits = 2.0 * rng.normal(size=(n, n_classes))
    proba = np.exp(logits)
    return proba / proba.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------- hand-worked


def test_hand_worked_top_label():
    # 5 bins, edges 0, .2, .4, .6, .8, 1, closed on the right:
    # bin (.4, .6]: confidences .6, .6, one right -> acc .5, conf .6, gap .1
    # bin (.6, .8]: confidences .8, .8, both right -> acc 1., conf .8, gap .2
    # ECE = 2/4 * .1 + 2/4 * .2 = .15 ; MCE = .2
    curve = reliability_curve(Y_TRUE, Y_PROBA, n_bins=5)
    np.testing.assert_allclose(curve.bin_edges, [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_array_equal(curve.counts, [0, 0, 2, 2, 0])
    np.testing.assert_allclose(curve.confidence, [np.nan, np.nan, 0.6, 0.8, np.nan])
    np.testing.assert_allclose(curve.accuracy, [np.nan, np.nan, 0.5, 1.0, np.nan])
    assert expected_calibration_error(Y_TRUE, Y_PROBA, n_bins=5) == pytest.approx(0.15)
    assert maximum_calibration_error(Y_TRUE, Y_PROBA, n_bins=5) == pytest.approx(0.2)


def test_hand_worked_classwise():
    # class 0: p = .8 .3 .6 .1, y = 1 0 0 0 -> four bins, gaps .2 .3 .6 .1 -> 1.2 / 4 = .3
    # class 1: p = .1 .6 .3 .1, y = 0 1 1 0 -> bin0 {.1, .1} gap .1 (x2), .3 gap .7,
    #          .6 gap .4 -> (.2 + .7 + .4) / 4 = .325
    # class 2: p = .1 .1 .1 .8, y = 0 0 0 1 -> bin0 gap .1 (x3), .8 gap .2 -> .5 / 4 = .125
    # classwise = (.3 + .325 + .125) / 3 = .25
    per_class = [
        expected_calibration_error(Y_TRUE, Y_PROBA, n_bins=5, kind=label) for label in (0, 1, 2)
    ]
    np.testing.assert_allclose(per_class, [0.3, 0.325, 0.125])
    assert classwise_calibration_error(Y_TRUE, Y_PROBA, n_bins=5) == pytest.approx(0.25)
    assert maximum_calibration_error(Y_TRUE, Y_PROBA, n_bins=5, kind=1) == pytest.approx(0.7)


def test_hand_worked_binary_one_dimensional():
    # p(1) = .1 .4 .7 .9, y = 0 1 1 1; 2 bins.
    # top label: confidences .9 (pred 0, right), .6 (pred 0, wrong), .7 (right), .9 (right):
    # all in (.5, 1] -> conf .775, acc .75 -> ECE = .025
    # kind=1: bin [0, .5] {.1, .4}: conf .25, acc .5; bin (.5, 1] {.7, .9}: conf .8, acc 1
    #         -> ECE = .5 * .25 + .5 * .2 = .225, MCE = .25
    y, p = [0, 1, 1, 1], [0.1, 0.4, 0.7, 0.9]
    assert expected_calibration_error(y, p, n_bins=2) == pytest.approx(0.025)
    assert expected_calibration_error(y, p, n_bins=2, kind=1) == pytest.approx(0.225)
    assert maximum_calibration_error(y, p, n_bins=2, kind=1) == pytest.approx(0.25)
    two_columns = np.column_stack([1 - np.asarray(p), p])
    for metric in METRICS:
        expected = metric(y, two_columns, n_bins=2)
        assert metric(y, p, n_bins=2) == pytest.approx(expected)
        assert metric(y, np.asarray(p)[:, None], n_bins=2) == pytest.approx(expected)


def test_bins_are_closed_on_the_right():
    curve = reliability_curve([0, 1, 1], [0.0, 0.5, 1.0], n_bins=2, kind=1)
    np.testing.assert_array_equal(curve.counts, [2, 1])  # 0.5 belongs to [0, 0.5]


def test_n_bins_one_is_the_calibration_in_the_large():
    y, p = [0, 1, 1, 1], [0.1, 0.4, 0.7, 0.9]
    # one bin: |mean(y) - mean(p)| = |.75 - .525|
    assert expected_calibration_error(y, p, n_bins=1, kind=1) == pytest.approx(0.225)


def test_returns_python_floats_and_frozen_read_only_curve():
    assert type(expected_calibration_error(Y_TRUE, Y_PROBA)) is float
    curve = reliability_curve(Y_TRUE, Y_PROBA)
    assert isinstance(curve, ReliabilityCurve)
    with pytest.raises(AttributeError):
        curve.counts = np.zeros(15)
    with pytest.raises(ValueError, match="read-only"):
        curve.counts[0] = 1.0


# --------------------------------------------------------------------------- cross-checks


def test_uniform_curve_matches_sklearn_calibration_curve():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p**1.5).astype(int)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10)
    curve = reliability_curve(y, p, n_bins=10, kind=1)
    nonempty = curve.counts > 0
    np.testing.assert_allclose(curve.accuracy[nonempty], prob_true)
    np.testing.assert_allclose(curve.confidence[nonempty], prob_pred)


@pytest.mark.parametrize("n_bins", [10, 15])
def test_matches_torchmetrics_multiclass(n_bins):
    # torchmetrics bins with [lo, hi) (and a bin of its own for exactly 1.0) and works in
    # float32; on continuous random data no confidence sits on an edge, so the two agree up
    # to float32 rounding (max abs difference measured: ~1e-7).
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.classification")
    rng = np.random.default_rng(n_bins)
    proba = _random_proba(rng, 2000, 5).astype(np.float32)
    y = rng.integers(0, 5, size=2000)
    preds, target = torch.from_numpy(proba), torch.from_numpy(y)
    for norm, metric in (("l1", expected_calibration_error), ("max", maximum_calibration_error)):
        expected = tm.MulticlassCalibrationError(num_classes=5, n_bins=n_bins, norm=norm)(
            preds, target
        ).item()
        assert metric(y, proba, n_bins=n_bins) == pytest.approx(expected, abs=1e-6)


def test_matches_torchmetrics_binary_one_vs_rest():
    # BinaryCalibrationError bins the positive-class probability against the target:
    # our kind=1; in float64 the two agree to ~1e-17.
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.classification")
    rng = np.random.default_rng(1)
    p = rng.uniform(size=2000)
    y = (rng.uniform(size=2000) < p**1.3).astype(int)
    expected = tm.BinaryCalibrationError(n_bins=15, norm="l1")(
        torch.from_numpy(p), torch.from_numpy(y)
    ).item()
    assert expected_calibration_error(y, p, kind=1) == pytest.approx(expected, abs=1e-12)


def test_log_loss_and_brier_are_sklearn_functions():
    assert log_loss is sklearn.metrics.log_loss
    assert brier_score_loss is sklearn.metrics.brier_score_loss
    # Multiclass Brier: sum over classes, mean over rows.
    onehot = np.eye(3)[Y_TRUE]
    expected = np.mean(np.sum((np.asarray(Y_PROBA) - onehot) ** 2, axis=1))
    assert brier_score_loss(Y_TRUE, Y_PROBA) == pytest.approx(expected)


# That metrics imports neither torch nor matplotlib is checked in tests/test_layers.py.


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("kind", ["top_label", 0, 2])
def test_ece_from_curve_is_the_ece(strategy, kind):
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 3, size=200)
    y_proba = _random_proba(rng, 200, 3)
    weights = rng.uniform(0.1, 2.0, size=200)
    params = {"n_bins": 7, "strategy": strategy, "sample_weight": weights}
    curve = reliability_curve(y_true, y_proba, kind=kind, **params)
    # exact: expected_calibration_error is ece_from_curve of this same reliability_curve
    assert ece_from_curve(curve) == expected_calibration_error(y_true, y_proba, kind=kind, **params)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_classwise_reliability_curves(strategy):
    rng = np.random.default_rng(4)
    y_true = np.array(["b", "a", "c"])[rng.integers(0, 3, size=150)]
    y_proba = _random_proba(rng, 150, 3)
    labels = ["c", "a", "b"]  # column order, not sorted
    curves = classwise_reliability_curves(
        y_true, y_proba, n_bins=6, strategy=strategy, labels=labels
    )
    assert list(curves) == labels
    for label, curve in curves.items():
        one = reliability_curve(
            y_true, y_proba, n_bins=6, strategy=strategy, labels=labels, kind=label
        )
        for field in ("confidence", "accuracy", "counts", "bin_edges"):
            # exact: both build each class's curve with the same binning code
            np.testing.assert_array_equal(getattr(curve, field), getattr(one, field))
    mean = float(np.mean([ece_from_curve(curve) for curve in curves.values()]))
    # exact: classwise_calibration_error is this same np.mean of ece_from_curve
    assert mean == classwise_calibration_error(
        y_true, y_proba, n_bins=6, strategy=strategy, labels=labels
    )


# --------------------------------------------------------------------------- properties


@st.composite
def _problems(draw):
    n = draw(st.integers(1, 40))
    n_classes = draw(st.integers(2, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    proba = _random_proba(rng, n, n_classes)
    y = rng.integers(0, n_classes, size=n)
    return y, proba, np.arange(n_classes)


_settings = settings(max_examples=40, deadline=None)
_strategies = st.sampled_from(["uniform", "quantile"])


@_settings
@given(problem=_problems(), n_bins=st.integers(1, 20), strategy=_strategies)
def test_errors_in_unit_interval_and_mce_at_least_ece(problem, n_bins, strategy):
    y, proba, labels = problem
    kwargs = dict(n_bins=n_bins, strategy=strategy, labels=labels)
    ece = expected_calibration_error(y, proba, **kwargs)
    mce = maximum_calibration_error(y, proba, **kwargs)
    classwise = classwise_calibration_error(y, proba, **kwargs)
    assert 0.0 <= ece <= mce + 1e-12
    assert mce <= 1.0
    assert 0.0 <= classwise <= 1.0


@_settings
@given(problem=_problems(), n_bins=st.integers(1, 20), strategy=_strategies, seed=st.integers())
def test_invariant_to_row_permutation(problem, n_bins, strategy, seed):
    y, proba, labels = problem
    order = np.random.default_rng(abs(seed)).permutation(y.shape[0])
    for metric in METRICS:
        kwargs = dict(n_bins=n_bins, strategy=strategy, labels=labels)
        assert metric(y[order], proba[order], **kwargs) == pytest.approx(
            metric(y, proba, **kwargs), abs=1e-12
        )


@_settings
@given(
    groups=st.lists(
        st.integers(1, 12).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m))),
        min_size=1,
        max_size=8,
    ),
    n_bins=st.integers(1, 20),
    strategy=_strategies,
)
def test_zero_for_perfectly_calibrated_construction(groups, n_bins, strategy):
    # Each group: m rows predicting p(1) = a / m, of which exactly a are class 1, so every
    # distinct probability occurs with the frequency it predicts (top label and per class).
    p, y = [], []
    for m, a in groups:
        p += [a / m] * m
        y += [1] * a + [0] * (m - a)
    kwargs = dict(n_bins=n_bins, strategy=strategy, labels=[0, 1])
    assert expected_calibration_error(y, p, **kwargs) == pytest.approx(0.0, abs=1e-12)
    assert classwise_calibration_error(y, p, **kwargs) == pytest.approx(0.0, abs=1e-12)
    assert maximum_calibration_error(y, p, **kwargs) == pytest.approx(0.0, abs=1e-12)


@_settings
@given(
    groups=st.lists(
        st.integers(1, 12).flatmap(lambda m: st.tuples(st.just(m), st.integers(m // 3 + 1, m))),
        min_size=1,
        max_size=8,
    ),
    n_bins=st.integers(1, 20),
)
def test_top_label_zero_for_perfectly_calibrated_multiclass(groups, n_bins):
    # Rows [c, (1 - c) / 2, (1 - c) / 2] with c = a / m > 1/3: class 0 is predicted and is
    # right for exactly a of the m rows.
    proba, y = [], []
    for m, a in groups:
        c = a / m
        proba += [[c, (1 - c) / 2, (1 - c) / 2]] * m
        y += [0] * a + [1] * (m - a)
    ece = expected_calibration_error(y, proba, n_bins=n_bins, labels=[0, 1, 2])
    assert ece == pytest.approx(0.0, abs=1e-12)


@_settings
@given(
    problem=_problems(),
    n_bins=st.integers(1, 20),
    strategy=_strategies,
    weight_seed=st.integers(0, 2**32 - 1),
)
def test_integer_sample_weight_equals_row_repetition(problem, n_bins, strategy, weight_seed):
    y, proba, labels = problem
    weights = np.random.default_rng(weight_seed).integers(0, 4, size=y.shape[0])
    weights[0] = max(weights[0], 1)
    kwargs = dict(n_bins=n_bins, strategy=strategy, labels=labels)
    weighted = reliability_curve(y, proba, sample_weight=weights, **kwargs)
    repeated = reliability_curve(np.repeat(y, weights), np.repeat(proba, weights, axis=0), **kwargs)
    for field in ("confidence", "accuracy", "counts", "bin_edges"):
        np.testing.assert_allclose(getattr(weighted, field), getattr(repeated, field))
    for metric in METRICS:
        assert metric(y, proba, sample_weight=weights, **kwargs) == pytest.approx(
            metric(np.repeat(y, weights), np.repeat(proba, weights, axis=0), **kwargs)
        )


# --------------------------------------------------------------------------- quantile bins


def test_quantile_bins_hold_equal_counts():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=100)
    y = (rng.uniform(size=100) < p).astype(int)
    curve = reliability_curve(y, p, n_bins=4, strategy="quantile", kind=1)
    np.testing.assert_array_equal(curve.counts, [25, 25, 25, 25])
    assert curve.bin_edges[0] == p.min()
    assert curve.bin_edges[-1] == p.max()
    uniform = reliability_curve(y, p, n_bins=4, kind=1)
    assert not np.array_equal(curve.bin_edges, uniform.bin_edges)


def test_quantile_bins_with_ties_leave_empty_bins():
    curve = reliability_curve([0, 1, 1, 1], [0.2, 0.2, 0.2, 0.9], n_bins=4, strategy="quantile")
    assert curve.counts.sum() == 4
    assert np.isnan(curve.confidence[curve.counts == 0]).all()


# --------------------------------------------------------------------------- labels


def test_string_labels():
    y_str = np.array(["cat", "dog", "dog", "eel"])
    for metric in METRICS:
        assert metric(y_str, Y_PROBA, n_bins=5) == pytest.approx(metric(Y_TRUE, Y_PROBA, n_bins=5))
    assert expected_calibration_error(y_str, Y_PROBA, n_bins=5, kind="dog") == pytest.approx(0.325)


def test_labels_when_y_true_lacks_a_class():
    y, proba = Y_TRUE[:3], Y_PROBA[:3]  # no class 2
    with _raises(
        "y_true contains the classes [0, 1] but y_proba has probabilities for 3 classes. "
        "Pass the full, ordered list of classes through the labels argument "
        "(e.g. labels=estimator.classes_)."
    ):
        expected_calibration_error(y, proba)
    # confidences .8 (right), .6 (right), .6 (wrong) -> all in (.4, .6] / (.6, .8]
    # ECE = 2/3 * |.5 - .6| + 1/3 * |1 - .8| = 2/15
    assert expected_calibration_error(y, proba, n_bins=5, labels=[0, 1, 2]) == pytest.approx(2 / 15)


def test_labels_give_the_column_order():
    reordered = np.asarray(Y_PROBA)[:, [2, 0, 1]]
    for metric in METRICS:
        assert metric(Y_TRUE, reordered, n_bins=5, labels=[2, 0, 1]) == pytest.approx(
            metric(Y_TRUE, Y_PROBA, n_bins=5)
        )


def test_binary_single_class_needs_labels():
    with _raises(
        "y_true contains the classes [1] but y_proba has probabilities for 2 classes. "
        "Pass the full, ordered list of classes through the labels argument "
        "(e.g. labels=estimator.classes_)."
    ):
        expected_calibration_error([1, 1], [0.9, 0.7])
    assert expected_calibration_error([1, 1], [0.9, 0.7], labels=[0, 1]) == pytest.approx(0.2)


def test_float32_rows_get_float32_tolerance():
    proba = np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]], dtype=np.float32)
    proba[0, 0] += 1e-5  # row sum 1 + 1e-5: fine in float32 (tolerance 3.5e-4)
    expected_calibration_error([2, 2], proba, labels=[0, 1, 2])


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("metric", [reliability_curve, classwise_reliability_curves, *METRICS])
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_bins": 0}, "n_bins must be an integer >= 1; got 0."),
        ({"n_bins": np.int64(0)}, "n_bins must be an integer >= 1; got 0."),
        ({"n_bins": 2.5}, "n_bins must be an integer >= 1; got 2.5."),
        ({"n_bins": np.float64(2.5)}, "n_bins must be an integer >= 1; got 2.5."),
        ({"n_bins": True}, "n_bins must be an integer >= 1; got True."),
        ({"n_bins": np.bool_(True)}, "n_bins must be an integer >= 1; got True."),
        ({"strategy": "kmeans"}, "strategy must be 'uniform' or 'quantile'; got 'kmeans'."),
        (
            {"strategy": np.str_("kmeans")},
            "strategy must be 'uniform' or 'quantile'; got 'kmeans'.",
        ),
        (
            {"sample_weight": [1.0, 2.0]},
            "sample_weight must be 1-D of length 4 (one weight per sample); got shape (2,).",
        ),
        (
            {"sample_weight": [1.0, -1.0, 1.0, 1.0]},
            "sample_weight must be finite and non-negative; got -1.0 at index 1.",
        ),
        (
            {"sample_weight": [1.0, 1.0, np.nan, 1.0]},
            "sample_weight must be finite and non-negative; got nan at index 2.",
        ),
        (
            {"sample_weight": ["a", "b", "c", "d"]},
            "sample_weight must hold numbers; got an array of dtype <U1.",
        ),
        ({"sample_weight": [0, 0, 0, 0]}, "sample_weight must have a positive sum; got 0.0."),
        (
            {"labels": [0, 1, 2, 3]},
            "labels has 4 classes [0, 1, 2, 3] but y_proba has probabilities for 3 classes.",
        ),
        ({"labels": [0, 1, 1]}, "labels must not contain duplicates; got [0, 1, 1]."),
        ({"labels": [[0, 1, 2]]}, "labels must be 1-D; got an array of shape (1, 3)."),
        (
            {"labels": [5, 6, 7]},
            (
                "y_true contains classes that are not in labels: [0, 1, 2]; "
                "expected every value of y_true to be one of labels=[5, 6, 7]."
            ),
        ),
        (
            {"labels": ["a", "b", "c"]},
            (
                "y_true contains classes that are not in labels: [0, 1, 2]; "
                "expected every value of y_true to be one of labels=['a', 'b', 'c']."
            ),
        ),
    ],
)
def test_argument_errors(metric, kwargs, message):
    with _raises(message):
        metric(Y_TRUE, Y_PROBA, **kwargs)


@pytest.mark.parametrize("metric", [reliability_curve, classwise_reliability_curves, *METRICS])
@pytest.mark.parametrize(
    ("y_true", "y_proba", "message"),
    [
        (
            [0, 1, 1],
            [0.2, 0.5],
            "y_true and y_proba must have the same number of samples; got 3 and 2.",
        ),
        ([], [], "y_true must not be empty; got 0 samples."),
        (
            [[0, 1], [1, 0]],
            [0.2, 0.5],
            "y_true must be 1-D of shape (n_samples,); got an array of shape (2, 2).",
        ),
        ([0.0, np.nan], [0.2, 0.5], "y_true must not contain NaN; got NaN at index 1."),
        ([0, 1], [0.2, np.nan], "y_proba must not contain NaN or infinity; got nan in row 1."),
        ([0, 1], [np.inf, 0.5], "y_proba must not contain NaN or infinity; got inf in row 0."),
        (
            [0, 1],
            [-0.1, 0.5],
            "y_proba must hold probabilities in [0, 1]; got values from -0.1 to 0.5.",
        ),
        (
            [0, 1],
            [0.2, 1.5],
            "y_proba must hold probabilities in [0, 1]; got values from 0.2 to 1.5.",
        ),
        (
            [0, 1],
            [[0.2, 0.7], [0.5, 0.5]],
            (
                "Each row of y_proba must sum to 1 (relative tolerance 1e-06); "
                "row 0 sums to 0.8999999999999999."
            ),
        ),
        (
            [0, 1],
            [[0.5, 0.5 + 1e-5], [0.5, 0.5]],
            (
                "Each row of y_proba must sum to 1 (relative tolerance 1e-06); "
                "row 0 sums to 1.00001."
            ),
        ),
        (
            [0, 1],
            [["a", "b"], ["c", "d"]],
            "y_proba must hold numbers; got an array of dtype <U1.",
        ),
        (
            [0, 1, 1],
            [[0.2, 0.8], [0.5, 0.5], [1.0]],
            (
                "y_proba must be an array of shape (n_samples,) or (n_samples, n_classes); "
                "its rows differ in length: row 0 has 2 values and row 2 has 1."
            ),
        ),
        (
            [0, 1],
            np.array([np.array([0.2, 0.8]), np.array([1.0])], dtype=object),
            (
                "y_proba must be an array of shape (n_samples,) or (n_samples, n_classes); "
                "its rows differ in length: row 0 has 2 values and row 1 has 1."
            ),
        ),
        (
            [[0], [1, 1]],
            [0.2, 0.5],
            (
                "y_true must be an array of shape (n_samples,); its rows differ in length: "
                "row 0 has 1 value and row 1 has 2."
            ),
        ),
        (
            np.array(["1", 1, 0], dtype=object),
            [0.2, 0.5, 0.1],
            (
                "y_true mixes label types that cannot be compared: int and str labels "
                "(e.g. 1 and '1'). Use one type for every label of y_true and labels."
            ),
        ),
        (
            [0, 1],
            np.zeros((2, 2, 2)),
            (
                "y_proba must be of shape (n_samples,), (n_samples, 1) or "
                "(n_samples, n_classes); got shape (2, 2, 2)."
            ),
        ),
        (
            [0, 1, 2],
            [0.2, 0.5, 0.1],
            (
                "y_true contains the classes [0, 1, 2] but y_proba has probabilities for 2 "
                "classes. Pass the full, ordered list of classes through the labels argument "
                "(e.g. labels=estimator.classes_)."
            ),
        ),
    ],
)
def test_input_errors(metric, y_true, y_proba, message):
    with _raises(message):
        metric(y_true, y_proba)


def test_labels_of_mixed_types():
    message = (
        "labels mixes label types that cannot be compared: int and str labels (e.g. 0 and "
        "'b'). Use one type for every label of y_true and labels."
    )
    with _raises(message):
        expected_calibration_error([0, 1], [0.2, 0.5], labels=np.array([0, "b"], dtype=object))
    # y_true mixing str and int is named first, even with valid labels.
    message = (
        "y_true mixes label types that cannot be compared: int and str labels (e.g. 1 and "
        "'1'). Use one type for every label of y_true and labels."
    )
    with _raises(message):
        expected_calibration_error(
            np.array(["1", 1, 0], dtype=object), np.full((3, 3), 1 / 3), labels=[0, 1, 2]
        )


def test_labels_need_two_classes():
    with _raises("labels must hold at least 2 classes; got [0]."):
        expected_calibration_error([0, 0], [0.2, 0.5], labels=[0])


@pytest.mark.parametrize("metric", [reliability_curve, expected_calibration_error])
def test_kind_error(metric):
    with _raises("kind must be 'top_label' or one of the classes [0, 1, 2]; got 'toplabel'."):
        metric(Y_TRUE, Y_PROBA, kind="toplabel")
    with _raises("kind must be 'top_label' or one of the classes [0, 1, 2]; got 3."):
        metric(Y_TRUE, Y_PROBA, kind=3)
    with _raises("kind must be 'top_label' or one of the classes [0, 1, 2]; got 3."):
        metric(Y_TRUE, Y_PROBA, kind=np.int64(3))
    with _raises("kind must be 'top_label' or one of the classes [0, 1, 2]; got 'a'."):
        metric(Y_TRUE, Y_PROBA, kind=np.str_("a"))
