"""The one binning implementation behind every binned metric and the reliability plot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import (
    CheckedProba,
    check_classification_proba,
    check_n_bins,
    check_strategy,
    resolve_kind,
)

__all__ = ["ReliabilityCurve", "classwise_reliability_curves", "reliability_curve"]


@dataclass(frozen=True, eq=False)
class ReliabilityCurve:
    """Per-bin statistics of a reliability diagram, as returned by :func:`reliability_curve`.

    Every array has one entry per bin, empty bins included (``counts == 0``, NaN
    means), so ``bin_edges[i]`` and ``bin_edges[i + 1]`` always bound bin ``i``.
    The arrays are read-only.

    Attributes
    ----------
    confidence : ndarray of shape (n_bins,)
        Weighted mean predicted probability in each bin (NaN for an empty bin).
    accuracy : ndarray of shape (n_bins,)
        Weighted observed frequency in each bin: for the top label, the fraction of
        rows whose most probable class is the true class; for one class, the
        fraction of rows of that class (NaN for an empty bin).
    counts : ndarray of shape (n_bins,)
        Sum of the sample weights in each bin (the number of rows when unweighted).
    bin_edges : ndarray of shape (n_bins + 1,)
        Increasing bin edges. Bin ``i`` is ``(bin_edges[i], bin_edges[i + 1]]``; the
        first bin also holds ``bin_edges[0]``.

    Examples
    --------
    >>> from nescal_sklearn.metrics import reliability_curve
    >>> curve = reliability_curve([0, 1, 1], [0.2, 0.7, 0.9], n_bins=2, kind=1)
    >>> curve.counts
    array([1., 2.])
    >>> curve.accuracy
    array([0., 1.])
    """

    confidence: np.ndarray
    accuracy: np.ndarray
    counts: np.ndarray
    bin_edges: np.ndarray


def reliability_curve(
    y_true: Any,
    y_proba: Any,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    labels: Any = None,
    sample_weight: Any = None,
    kind: Any = "top_label",
) -> ReliabilityCurve:
    """Bin predicted probabilities and compare them with observed frequencies.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row (integers, strings, ...).
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``. A 1-D (or
        one-column) array is the probability of the second class of a binary
        problem, as in scikit-learn. Rows must sum to 1 within a relative
        tolerance of 1e-6 (sqrt of the machine epsilon for float32 and lower
        precisions, e.g. 3.5e-4).
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        ``"uniform"``: equal-width bins on [0, 1]. ``"quantile"``: edges at the
        weighted quantiles (inverted CDF, numpy's ``method="inverted_cdf"``) of the
        binned probabilities, so each bin holds about the same weight and integer
        sample weights act exactly like repeated rows; tied values can leave bins
        empty.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba``, in column order. Defaults to the
        sorted unique values of ``y_true``; required when ``y_true`` lacks a class
        that ``y_proba`` has a column for (pass ``estimator.classes_``).
        Unlike :func:`sklearn.metrics.log_loss`, which sorts ``labels``, the order
        given here is the column order.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weight of each row.
    kind : "top_label" or a class label, default="top_label"
        ``"top_label"``: bin each row's largest probability (ties go to the first
        column) against whether that class is the true one. A class label: bin
        that class's probability against whether the row belongs to it
        (one-vs-rest).

    Returns
    -------
    curve : ReliabilityCurve
        ``confidence``, ``accuracy``, ``counts`` and ``bin_edges``. Empty bins are
        kept, with count 0 and NaN means.

    See Also
    --------
    expected_calibration_error : Weighted mean gap of this curve.
    sklearn.calibration.calibration_curve : The binary, unweighted counterpart,
        which drops empty bins.

    Notes
    -----
    Bins are closed on the right, ``(lo, hi]``, the first one on both sides, as in
    :func:`sklearn.calibration.calibration_curve` and Guo et al. (2017).

    Examples
    --------
    >>> from nescal_sklearn.metrics import reliability_curve
    >>> y_true = [0, 1, 1, 2]
    >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
    >>> curve = reliability_curve(y_true, y_proba, n_bins=5)
    >>> curve.bin_edges
    array([0. , 0.2, 0.4, 0.6, 0.8, 1. ])
    >>> curve.counts
    array([0., 0., 2., 2., 0.])
    >>> curve.confidence
    array([nan, nan, 0.6, 0.8, nan])
    >>> curve.accuracy
    array([nan, nan, 0.5, 1. , nan])
    """
    checked, n_bins, strategy = _check_inputs(
        y_true, y_proba, n_bins, strategy, labels, sample_weight
    )
    return curve_from_checked(checked, resolve_kind(kind, checked.labels), n_bins, strategy)


def classwise_reliability_curves(
    y_true: Any,
    y_proba: Any,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    labels: Any = None,
    sample_weight: Any = None,
) -> dict[Any, ReliabilityCurve]:
    """One one-vs-rest reliability curve per class, inputs validated once.

    The curve of class ``c`` is ``reliability_curve(..., kind=c)``: that class's
    predicted probability binned against whether the row belongs to it. The mean of
    their expected calibration errors is :func:`classwise_calibration_error`.

    Parameters
    ----------
    y_true, y_proba, n_bins, strategy, labels, sample_weight
        As in :func:`reliability_curve` (same defaults).

    Returns
    -------
    curves : dict of class label to ReliabilityCurve
        One entry per column of ``y_proba``, in column order; the keys are the
        labels as Python scalars (``labels.tolist()``).

    See Also
    --------
    reliability_curve : The curve of one class, or of the top label.
    classwise_calibration_error : Mean ECE of these curves.

    Examples
    --------
    >>> from nescal_sklearn.metrics import classwise_reliability_curves, ece_from_curve
    >>> y_true = [0, 1, 1, 2]
    >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
    >>> curves = classwise_reliability_curves(y_true, y_proba, n_bins=5)
    >>> list(curves)
    [0, 1, 2]
    >>> curves[2].counts
    array([3., 0., 0., 1., 0.])
    >>> [round(ece_from_curve(curve), 6) for curve in curves.values()]
    [0.3, 0.325, 0.125]
    """
    checked, n_bins, strategy = _check_inputs(
        y_true, y_proba, n_bins, strategy, labels, sample_weight
    )
    return {
        label: curve_from_checked(checked, column, n_bins, strategy)
        for column, label in enumerate(checked.labels.tolist())
    }


def _check_inputs(
    y_true: Any, y_proba: Any, n_bins: Any, strategy: Any, labels: Any, sample_weight: Any
) -> tuple[CheckedProba, int, str]:
    """The validated inputs of a reliability curve: ``(checked, n_bins, strategy)``."""
    n_bins = check_n_bins(n_bins)
    strategy = check_strategy(strategy)
    checked = check_classification_proba(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    return checked, n_bins, strategy


def binned_rows(
    checked: CheckedProba, column: int | None, n_bins: int, strategy: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each row's score, outcome and bin, and the bin edges; ``column=None``: top label.

    The one binning rule every binned metric, the curve and its bootstrap band share:
    bins are ``(lo, hi]`` between the edges of ``strategy``.
    """
    if column is None:
        predicted = np.argmax(checked.proba, axis=1)
        score = checked.proba[np.arange(predicted.shape[0]), predicted]
        outcome = predicted == checked.y_index
    else:
        score = checked.proba[:, column]
        outcome = checked.y_index == column
    edges = _EDGES[strategy](score, checked.sample_weight, n_bins)
    bin_index = np.searchsorted(edges[1:-1], score, side="left")
    return score, outcome, bin_index, edges


def curve_from_checked(
    checked: CheckedProba, column: int | None, n_bins: int, strategy: str
) -> ReliabilityCurve:
    """Reliability curve of validated inputs; ``column=None`` means the top label."""
    confidence, outcome, bin_index, edges = binned_rows(checked, column, n_bins, strategy)
    weights = checked.sample_weight
    counts = np.bincount(bin_index, weights=weights, minlength=n_bins)
    sum_confidence = np.bincount(bin_index, weights=weights * confidence, minlength=n_bins)
    sum_outcome = np.bincount(bin_index, weights=weights * outcome, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.where(counts > 0, sum_confidence / counts, np.nan)
        mean_outcome = np.where(counts > 0, sum_outcome / counts, np.nan)
    arrays = (mean_confidence, mean_outcome, counts, edges)
    for array in arrays:
        array.setflags(write=False)
    return ReliabilityCurve(*arrays)


def _uniform_edges(confidence: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    return np.linspace(0.0, 1.0, n_bins + 1)


def _quantile_edges(confidence: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    """Weighted inverted-CDF quantiles at 0, 1/n_bins, ..., 1 (rows of zero weight ignored)."""
    keep = weights > 0
    order = np.argsort(confidence[keep], kind="stable")
    values = confidence[keep][order]
    cumulative = np.cumsum(weights[keep][order])
    targets = np.arange(n_bins + 1) * cumulative[-1] / n_bins
    targets[-1] = cumulative[-1]
    index = np.minimum(np.searchsorted(cumulative, targets, side="left"), values.shape[0] - 1)
    return values[index]


_EDGES = {"uniform": _uniform_edges, "quantile": _quantile_edges}
