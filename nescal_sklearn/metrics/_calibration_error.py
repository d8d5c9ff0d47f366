"""Binned calibration errors: expected (ECE), maximum (MCE) and classwise ECE."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._binning import ReliabilityCurve, classwise_reliability_curves, reliability_curve

__all__ = [
    "classwise_calibration_error",
    "ece_from_curve",
    "expected_calibration_error",
    "maximum_calibration_error",
]


def ece_from_curve(curve: ReliabilityCurve) -> float:
    """Expected calibration error of a reliability curve.

    ``sum_b (counts_b / W) * |accuracy_b - confidence_b|`` over the non-empty bins of
    ``curve``, ``W`` being the total count: what :func:`expected_calibration_error`
    returns for the inputs the curve was binned from. Useful when the curve is
    needed anyway (to plot it, or to store it), so the data are binned once.

    Parameters
    ----------
    curve : ReliabilityCurve
        As returned by :func:`reliability_curve` or
        :func:`classwise_reliability_curves`; it needs at least one non-empty bin.

    Returns
    -------
    ece : float
        In [0, 1].

    See Also
    --------
    expected_calibration_error : The same number, from labels and probabilities.

    Examples
    --------
    >>> from nescal_sklearn.metrics import ece_from_curve, reliability_curve
    >>> y_true = [0, 1, 1, 2]
    >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
    >>> curve = reliability_curve(y_true, y_proba, n_bins=5)
    >>> round(ece_from_curve(curve), 6)  # 0.5 * |0.5 - 0.6| + 0.5 * |1.0 - 0.8|
    0.15
    """
    nonempty = curve.counts > 0
    gaps = np.abs(curve.accuracy[nonempty] - curve.confidence[nonempty])
    return float(np.sum(curve.counts[nonempty] * gaps) / np.sum(curve.counts[nonempty]))


def _mce_of_curve(curve: ReliabilityCurve) -> float:
    nonempty = curve.counts > 0
    return float(np.max(np.abs(curve.accuracy[nonempty] - curve.confidence[nonempty])))


def _binning(n_bins: Any, strategy: Any, labels: Any, sample_weight: Any) -> dict[str, Any]:
    """The binning arguments that every error of this module passes on unchanged."""
    return dict(n_bins=n_bins, strategy=strategy, labels=labels, sample_weight=sample_weight)


def expected_calibration_error(
    y_true: Any,
    y_proba: Any,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    labels: Any = None,
    sample_weight: Any = None,
    kind: Any = "top_label",
) -> float:
    """Expected calibration error (ECE), top-label by default.

    ``sum_b (w_b / W) * |accuracy_b - confidence_b|`` over the non-empty bins of
    :func:`reliability_curve`, where ``w_b`` is the weight in bin ``b`` and ``W``
    the total weight.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row (integers, strings, ...).
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``; a 1-D array is
        the probability of the second class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins on [0, 1], or bins holding equal weight.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba``; defaults to the sorted unique
        values of ``y_true`` and is required when ``y_true`` lacks a class.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weight of each row.
    kind : "top_label" or a class label, default="top_label"
        Top-label ECE, or the one-vs-rest ECE of one class.

    Returns
    -------
    ece : float
        In [0, 1]; 0 is perfectly calibrated at this binning.

    See Also
    --------
    reliability_curve : The bins this error summarises.
    classwise_calibration_error : Mean one-vs-rest ECE over the classes.

    Examples
    --------
    Two rows at confidence 0.6 (one right) and two at 0.8 (both right), so with
    5 bins ``ECE = 0.5 * |0.5 - 0.6| + 0.5 * |1.0 - 0.8| = 0.15``:

    >>> from nescal_sklearn.metrics import expected_calibration_error
    >>> y_true = [0, 1, 1, 2]
    >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
    >>> round(expected_calibration_error(y_true, y_proba, n_bins=5), 6)
    0.15
    """
    binning = _binning(n_bins, strategy, labels, sample_weight)
    return ece_from_curve(reliability_curve(y_true, y_proba, kind=kind, **binning))


def maximum_calibration_error(
    y_true: Any,
    y_proba: Any,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    labels: Any = None,
    sample_weight: Any = None,
    kind: Any = "top_label",
) -> float:
    """Maximum calibration error (MCE), top-label by default.

    ``max_b |accuracy_b - confidence_b|`` over the non-empty bins of
    :func:`reliability_curve`. Always at least the ECE of the same bins.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row (integers, strings, ...).
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``; a 1-D array is
        the probability of the second class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins on [0, 1], or bins holding equal weight.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba``; defaults to the sorted unique
        values of ``y_true`` and is required when ``y_true`` lacks a class.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weight of each row.
    kind : "top_label" or a class label, default="top_label"
        Top-label MCE, or the one-vs-rest MCE of one class.

    Returns
    -------
    mce : float
        In [0, 1].

    See Also
    --------
    expected_calibration_error : The weighted mean of the same gaps.

    Examples
    --------
    >>> from nescal_sklearn.metrics import maximum_calibration_error
    >>> y_true = [0, 1, 1, 2]
    >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
    >>> round(maximum_calibration_error(y_true, y_proba, n_bins=5), 6)
    0.2
    """
    binning = _binning(n_bins, strategy, labels, sample_weight)
    return _mce_of_curve(reliability_curve(y_true, y_proba, kind=kind, **binning))


def classwise_calibration_error(
    y_true: Any,
    y_proba: Any,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    labels: Any = None,
    sample_weight: Any = None,
) -> float:
    """Classwise ECE: the mean over all classes of the one-vs-rest ECE.

    Each class's predicted probability is binned against the indicator of that
    class (``kind=label`` in :func:`reliability_curve`); every class counts
    equally, binary problems included (both columns), as in Kull et al. (2019).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row (integers, strings, ...).
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``; a 1-D array is
        the probability of the second class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins on [0, 1], or bins holding equal weight.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba``; defaults to the sorted unique
        values of ``y_true`` and is required when ``y_true`` lacks a class.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weight of each row.

    Returns
    -------
    classwise_ece : float
        In [0, 1].

    See Also
    --------
    expected_calibration_error : ECE of the top label or of a single class.

    Examples
    --------
    Per class, 5 bins: class 0 gives 0.3, class 1 0.325, class 2 0.125:

    >>> from nescal_sklearn.metrics import classwise_calibration_error
    >>> y_true = [0, 1, 1, 2]
    >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
    >>> round(classwise_calibration_error(y_true, y_proba, n_bins=5), 6)
    0.25
    """
    binning = _binning(n_bins, strategy, labels, sample_weight)
    curves = classwise_reliability_curves(y_true, y_proba, **binning)
    return float(np.mean([ece_from_curve(curve) for curve in curves.values()]))
