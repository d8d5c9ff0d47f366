"""Debiased estimator of the L2 calibration error (Kumar, Liang and Ma, NeurIPS 2019)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._binning import binned_rows, curve_from_checked
from ._validation import (
    TOP_LABEL,
    check_classification_proba,
    check_n_bins,
    check_strategy,
    plain,
    resolve_kind,
)

__all__ = ["debiased_calibration_error"]

CLASSWISE = "classwise"


def debiased_calibration_error(
    y_true: Any,
    y_proba: Any,
    *,
    n_bins: int = 15,
    strategy: str = "quantile",
    labels: Any = None,
    sample_weight: Any = None,
    kind: Any = "top_label",
    squared: bool = False,
) -> float:
    """Debiased binned L2 calibration error (Kumar, Liang and Ma, 2019).

    The plug-in estimate of the squared L2 calibration error,
    ``sum_b (n_b / n) * (ybar_b - pbar_b) ** 2`` over the bins of
    :func:`reliability_curve` (``ybar_b`` the observed frequency, ``pbar_b`` the mean
    predicted probability and ``n_b`` the number of rows of bin ``b``), is biased
    upwards: even a perfectly calibrated model gets a positive value, of order
    ``n_bins / n``, because ``ybar_b`` is noisy. The debiased estimator of Kumar
    et al. subtracts the estimated variance of ``ybar_b`` in each bin::

        squared_error = sum_b (n_b / n) * [(ybar_b - pbar_b) ** 2
                                           - ybar_b * (1 - ybar_b) / (n_b - 1)]

    A bin of fewer than two rows contributes 0 (its rows still count in ``n``). The
    function returns the debiased L2 error ``sqrt(max(squared_error, 0))``, as their
    reference code does, or with ``squared=True`` the debiased squared error itself.
    With ``sample_weight``, ``n_b`` in the correction is the bin's effective number of
    rows (see the parameter).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row (integers, strings, ...).
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``; a 1-D array is
        the probability of the second class of a binary problem.
    n_bins : int, default=15
        Number of bins (the default of Kumar et al.'s ``lower_bound_scaling_ce``).
    strategy : {"quantile", "uniform"}, default="quantile"
        ``"quantile"``: bins holding equal weight ("equal-mass" bins, the setting Kumar
        et al. recommend and their default); ``"uniform"``: equal-width bins on [0, 1].
        The bins are those of :func:`reliability_curve`.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba``; defaults to the sorted unique
        values of ``y_true`` and is required when ``y_true`` lacks a class.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative *relative* weights: only their ratios matter, so counts and
        normalised weights (summing to 1) give the same error. The means ``ybar_b`` and
        ``pbar_b`` are weighted, each bin counts by its share of the total weight, and
        the correction divides by ``n_eff_b - 1``, where ``n_eff_b = (sum w)**2 /
        sum w**2`` over the rows of bin ``b`` is Kish's effective number of rows (``n_b``
        without weights; a bin with one row of positive weight contributes 0). This
        keeps the estimator unbiased: for independent rows of a bin sharing one
        frequency ``q`` (Kumar et al.'s model), the weighted ``ybar_b`` has variance
        ``q (1 - q) / n_eff_b`` and ``ybar_b (1 - ybar_b)`` has expectation
        ``q (1 - q) (1 - 1 / n_eff_b)``. A weight says how much a row counts, not how
        many independent rows it stands for: a row of weight 3 is one row
        (``n_eff = 1``), three rows of weight 1 are three; repeat rows to count them.
    kind : "top_label", "classwise" or a class label, default="top_label"
        ``"top_label"``: the error of the most probable class (the top-label
        calibration error). ``"classwise"``: Kumar et al.'s *marginal* calibration
        error, the square root of the mean over the classes of each class's
        one-vs-rest debiased squared error, each clipped at 0 first (binary problems
        included: both columns). A class label: the one-vs-rest error of that class.
    squared : bool, default=False
        Return the debiased squared error, not clipped at 0 (it can be negative, and
        is the quantity whose bias is removed, so it is the one to average over folds
        or data sets). With ``kind="classwise"`` it is the mean over the classes of
        the unclipped per-class squared errors.

    Returns
    -------
    error : float
        The debiased L2 calibration error in [0, 1], or with ``squared=True`` the
        debiased squared error, in [-0.25, 1].

    See Also
    --------
    expected_calibration_error : The plug-in L1 error of the same bins (ECE).
    reliability_curve : The bins this error summarises.

    Notes
    -----
    Kumar et al. (2019) show that this estimator needs far fewer samples than the
    plug-in one to estimate the calibration error of a binned (or
    binned-and-scaled) model to a given accuracy. For a model with continuous
    outputs, the binned error is a lower bound of its true calibration error.

    The equal-mass bins are the package's ``strategy="quantile"`` bins (weighted
    inverted-CDF quantiles). The reference code splits the sorted probabilities into
    consecutive chunks of ``ceil(n / n_bins)`` rows; both give the same bins when
    ``n_bins`` divides the number of rows and the probabilities are distinct, and
    differ by where the remainder rows go otherwise. Unlike the reference's
    ``get_calibration_error``, no switch to one bin per distinct value is made for
    probabilities that take few values; the default is top-label, not marginal.

    References
    ----------
    A. Kumar, P. Liang and T. Ma, "Verified Uncertainty Calibration", NeurIPS 2019,
    arXiv:1909.10155; reference code: github.com/p-lambda/verified_calibration
    (``calibration.utils.get_calibration_error(..., debias=True)``).

    Examples
    --------
    Two bins of four rows, each half of the data: at confidence 0.7, 4 of 4 right,
    and at confidence 0.8, 3 of 4 right. The debiased squared error is
    0.5 * ((1 - 0.7) ** 2 - 0) + 0.5 * ((0.75 - 0.8) ** 2 - 0.75 * 0.25 / 3) =
    0.5 * 0.09 + 0.5 * (0.0025 - 0.0625) = 0.015 (the plug-in one is 0.04625):

    >>> from nescal_sklearn.metrics import debiased_calibration_error
    >>> y_true = [1, 1, 1, 1, 1, 1, 1, 0]
    >>> y_proba = [0.7] * 4 + [0.8] * 4
    >>> round(debiased_calibration_error(y_true, y_proba, n_bins=2, squared=True), 6)
    0.015
    >>> round(debiased_calibration_error(y_true, y_proba, n_bins=2), 6)  # sqrt(0.015)
    0.122474
    """
    n_bins = check_n_bins(n_bins)
    strategy = check_strategy(strategy)
    if isinstance(squared, bool | np.bool_):
        squared = bool(squared)
    else:
        raise ValueError(f"squared must be True or False; got {plain(squared)!r}.")
    checked = check_classification_proba(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    if isinstance(kind, str) and kind == CLASSWISE:
        per_class = np.array(
            [
                _debiased_squared_error(checked, column, n_bins, strategy)
                for column in range(checked.proba.shape[1])
            ]
        )
        if squared:
            return float(np.mean(per_class))
        return float(np.sqrt(np.mean(np.maximum(per_class, 0.0))))
    try:
        column = resolve_kind(kind, checked.labels)
    except ValueError:
        raise ValueError(
            f"kind must be {TOP_LABEL!r}, {CLASSWISE!r} or one of the classes "
            f"{checked.labels.tolist()}; got {plain(kind)!r}."
        ) from None
    error = _debiased_squared_error(checked, column, n_bins, strategy)
    return error if squared else float(np.sqrt(max(error, 0.0)))


def _debiased_squared_error(checked, column: int | None, n_bins: int, strategy: str) -> float:
    """Kumar et al.'s debiased squared L2 error of one reliability curve (not clipped),
    with Kish's effective number of rows of each bin in the correction."""
    curve = curve_from_checked(checked, column, n_bins, strategy)
    bin_index = binned_rows(checked, column, n_bins, strategy)[2]
    counts = curve.counts
    # Kish's (sum w)**2 / sum w**2, of the weights over their largest (no underflow): the
    # number of rows without weights, 1 for a single row of positive weight.
    relative = checked.sample_weight / np.max(checked.sample_weight)
    sums = np.bincount(bin_index, weights=relative, minlength=n_bins)
    squares = np.bincount(bin_index, weights=relative**2, minlength=n_bins)
    effective = np.divide(sums**2, squares, out=np.zeros(n_bins), where=squares > 0)
    enough = effective > 1  # a single row: no variance estimate, the bin adds 0
    frequency = curve.accuracy[enough]
    gap = frequency - curve.confidence[enough]
    variance = frequency * (1.0 - frequency) / (effective[enough] - 1.0)
    return float(np.sum(counts[enough] * (gap**2 - variance)) / np.sum(counts))
