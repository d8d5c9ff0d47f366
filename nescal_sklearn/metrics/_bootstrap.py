"""Class-stratified bootstrap: confidence intervals of metrics and bands of reliability curves."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from ._binning import ReliabilityCurve, binned_rows, curve_from_checked
from ._validation import (
    check_classification_proba,
    check_n_bins,
    check_strategy,
    plain,
    resolve_kind,
)

__all__ = [
    "BootstrapInterval",
    "ReliabilityBand",
    "bootstrap_ci",
    "bootstrap_reliability_band",
]

# Keyword arguments of a metric that hold one value per row, resampled with the rows.
ROW_ARGUMENTS = ("sample_weight", "features")

#: The most resamples :func:`bootstrap_ci` and :func:`bootstrap_reliability_band` draw:
#: far more than a percentile interval needs (its quantiles settle to about 1e-3 of the
#: spread within 10 000), and a bound on the time and memory a typo can ask for.
MAX_RESAMPLES = 100_000


@dataclass(frozen=True, eq=False)
class BootstrapInterval:
    """A bootstrap confidence interval of a metric, as returned by :func:`bootstrap_ci`.

    Attributes
    ----------
    estimate : float
        The metric on the full data (not the mean of the resamples).
    low : float
        Lower end of the percentile interval: the ``(1 - confidence) / 2`` quantile of
        ``values``.
    high : float
        Upper end: the ``(1 + confidence) / 2`` quantile of ``values``.
    confidence : float
        Nominal coverage of ``[low, high]``, in (0, 1).
    n_resamples : int
        Number of bootstrap resamples.
    standard_error : float
        Bootstrap standard error: the standard deviation of ``values`` (``ddof=1``).
    values : ndarray of shape (n_resamples,)
        The metric on each resample, in the order drawn (read-only).

    Examples
    --------
    >>> from nescal_sklearn.metrics import bootstrap_ci, log_loss
    >>> interval = bootstrap_ci(
    ...     log_loss, [0, 0, 1, 1], [0.2, 0.4, 0.6, 0.9], n_resamples=50, random_state=0
    ... )
    >>> bool(interval.low <= interval.estimate <= interval.high)
    True
    >>> interval.values.shape
    (50,)
    """

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    standard_error: float
    values: np.ndarray


@dataclass(frozen=True, eq=False)
class ReliabilityBand:
    """Bootstrap band of a reliability curve, as returned by :func:`bootstrap_reliability_band`.

    Attributes
    ----------
    curve : ReliabilityCurve
        The curve of the full data; the band is around ``curve.accuracy``.
    low : ndarray of shape (n_bins,)
        Per bin, the ``(1 - confidence) / 2`` quantile of the resampled observed
        frequencies (NaN for a bin that is empty in the full data).
    high : ndarray of shape (n_bins,)
        Per bin, the ``(1 + confidence) / 2`` quantile (NaN for an empty bin).
    confidence : float
        Nominal pointwise coverage of each bin's ``[low, high]``.
    n_resamples : int
        Number of bootstrap resamples.
    accuracy : ndarray of shape (n_resamples, n_bins)
        Observed frequency of each bin in each resample; NaN where the resample left
        the bin empty (read-only, like every array here).

    Examples
    --------
    >>> from nescal_sklearn.metrics import bootstrap_reliability_band
    >>> band = bootstrap_reliability_band(
    ...     [0, 1, 1, 0, 1, 1], [0.2, 0.3, 0.7, 0.6, 0.8, 0.9], n_bins=2, kind=1,
    ...     n_resamples=20, random_state=0,
    ... )
    >>> band.low.shape, band.accuracy.shape
    ((2,), (20, 2))
    """

    curve: ReliabilityCurve
    low: np.ndarray
    high: np.ndarray
    confidence: float
    n_resamples: int
    accuracy: np.ndarray


def bootstrap_ci(
    metric: Callable[..., float],
    y_true: Any,
    y_proba: Any,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    random_state: Any = None,
    **metric_kwargs: Any,
) -> BootstrapInterval:
    """Class-stratified bootstrap confidence interval of any metric of ``(y_true, y_proba)``.

    Each resample draws, within each class of ``y_true`` separately, as many rows as
    that class has, with replacement, so every resample holds every class of
    ``y_true`` in its original proportion (a class of 2 rows included). The metric is
    computed on each resample as ``metric(y_true[idx], y_proba[idx], **metric_kwargs)``
    and the interval is the *percentile* interval of those values (numpy's default
    linear quantile), not BCa or studentised.

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_proba, **metric_kwargs)`` returning a number: any metric of
        :mod:`nescal_sklearn.metrics` or of :mod:`sklearn.metrics` that takes
        probabilities (``log_loss``, ``brier_score_loss``, ...), or your own, e.g.
        ``lambda y, p: accuracy_score(y, p.argmax(axis=1))`` for the accuracy.
    y_true : array-like of shape (n_samples,)
        True class of each row; the strata of the resampling.
    y_proba : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predicted probabilities, resampled by row; a 1-D array (probability of the
        second class of a binary problem) works for the metrics that accept one.
    n_resamples : int, default=1000
        Number of bootstrap resamples, from 2 to :data:`MAX_RESAMPLES` (100 000).
    confidence : float, default=0.95
        Nominal coverage of the interval, strictly between 0 and 1.
    random_state : int, RandomState instance or None, default=None
        Seed of the resampling (as in scikit-learn); an int gives the same resamples
        on every call.
    **metric_kwargs : dict
        Passed to ``metric`` on every call. ``sample_weight`` and ``features`` (the
        feature rows of :func:`local_calibration_error`) hold one value per row and
        are resampled with the rows; the others (``labels``, ``n_bins``, ...) pass
        through unchanged. Pass ``labels`` when ``y_proba`` has a column for a class
        that ``y_true`` lacks.

    Returns
    -------
    interval : BootstrapInterval
        ``estimate`` (the metric on the full data), ``low``, ``high``,
        ``confidence``, ``n_resamples``, ``standard_error`` and the resampled
        ``values``.

    Raises
    ------
    ValueError
        If ``n_resamples``, ``confidence`` or ``random_state`` is invalid, if ``y_true``,
        ``y_proba`` and the per-row arguments differ in length, or if every class of
        ``y_true`` has a single row (no resample differs from the data).

    Warns
    -----
    UserWarning
        When some classes of ``y_true`` have a single row: every resample repeats it,
        so the interval misses their variance and is too narrow.

    See Also
    --------
    bootstrap_reliability_band : The same resampling, per bin of a reliability curve.

    Notes
    -----
    Stratifying by class treats the class counts as fixed, as in a stratified test
    split, and keeps every resample scorable by metrics that need every class. Its
    standard error misses the part of the variance that comes from the class
    proportions themselves, which matters little unless the metric's mean differs
    much between classes. A class of a single row is the same row in every resample,
    so its part of the variance is missed altogether (``bootstrap_ci`` warns); when
    every class has a single row no resample differs from the data, and it refuses.

    The percentile interval assumes the metric is about as biased on a resample as on
    the data. Binned calibration errors such as the ECE are not: their plug-in
    estimate grows with the noise in each bin, and a resample, which repeats rows,
    is noisier, so near a calibrated model their whole bootstrap distribution can lie
    above the estimate. Read such an interval as the spread of the metric, not as
    bounds on the true calibration error, or use :func:`debiased_calibration_error`.

    Examples
    --------
    A model calibrated by construction; the log-loss of a 300-row test set, with its
    95% interval:

    >>> import numpy as np
    >>> from nescal_sklearn.metrics import bootstrap_ci, log_loss
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.uniform(0.05, 0.95, size=300)
    >>> y = (rng.uniform(size=300) < proba).astype(int)
    >>> interval = bootstrap_ci(log_loss, y, proba, n_resamples=200, random_state=0)
    >>> [round(value, 3) for value in (interval.low, interval.estimate, interval.high)]
    [0.455, 0.508, 0.56]
    >>> interval.confidence, interval.n_resamples, interval.values.shape
    (0.95, 200, (200,))
    """
    if not callable(metric):
        raise TypeError(f"metric must be callable; got {plain(metric)!r}.")
    n_resamples = _check_n_resamples(n_resamples, "n_resamples")
    confidence = _check_confidence(confidence, "confidence")
    rng = _check_random_state(random_state)
    y_true = np.asarray(y_true)
    y_proba = np.asarray(y_proba)
    n_samples = _check_rows(y_true, y_proba, metric_kwargs)
    classes, strata = np.unique(y_true.reshape(n_samples, -1)[:, 0], return_inverse=True)
    _check_strata(strata, classes, "bootstrap_ci")
    estimate = float(metric(y_true, y_proba, **metric_kwargs))

    row_arguments = {
        key: np.asarray(value)
        for key, value in metric_kwargs.items()
        if key in ROW_ARGUMENTS and value is not None
    }
    values = np.empty(n_resamples)
    for b, index in enumerate(_stratified_indices(strata, n_resamples, rng)):
        kwargs = dict(metric_kwargs)
        kwargs.update({key: value[index] for key, value in row_arguments.items()})
        values[b] = metric(y_true[index], y_proba[index], **kwargs)
    low, high = np.quantile(values, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    values.setflags(write=False)
    return BootstrapInterval(
        estimate=estimate,
        low=float(low),
        high=float(high),
        confidence=confidence,
        n_resamples=n_resamples,
        standard_error=float(np.std(values, ddof=1)),
        values=values,
    )


def bootstrap_reliability_band(
    y_true: Any,
    y_proba: Any,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    labels: Any = None,
    sample_weight: Any = None,
    kind: Any = "top_label",
    n_resamples: int = 200,
    confidence: float = 0.95,
    random_state: Any = None,
) -> ReliabilityBand:
    """Pointwise bootstrap band of the observed frequency of each bin of a reliability curve.

    The bins are those of :func:`reliability_curve` on the full data and stay fixed:
    each resample (drawn within each class, as in :func:`bootstrap_ci`) only changes
    which rows, with their sample weights, fall in each bin. Per bin, the band is the
    percentile interval of the resampled observed frequencies (fraction of right
    top-label predictions, or of rows of the class ``kind``), over the resamples that
    leave the bin non-empty.

    Parameters
    ----------
    y_true, y_proba, n_bins, strategy, labels, sample_weight, kind
        As in :func:`reliability_curve` (same defaults).
    n_resamples : int, default=200
        Number of bootstrap resamples, from 2 to :data:`MAX_RESAMPLES` (100 000).
    confidence : float, default=0.95
        Nominal pointwise coverage, strictly between 0 and 1.
    random_state : int, RandomState instance or None, default=None
        Seed of the resampling; an int gives the same resamples on every call.

    Returns
    -------
    band : ReliabilityBand
        ``curve`` (the full-data :class:`ReliabilityCurve`), ``low`` and ``high``
        (one entry per bin, NaN for empty bins), ``confidence``, ``n_resamples`` and
        the resampled per-bin frequencies ``accuracy``.

    Raises
    ------
    ValueError
        As :func:`bootstrap_ci`, also when every class of ``y_true`` has a single row.

    Warns
    -----
    UserWarning
        As :func:`bootstrap_ci`, when some classes of ``y_true`` have a single row.

    See Also
    --------
    bootstrap_ci : Bootstrap interval of a scalar metric.
    nescal_sklearn.plotting.ReliabilityDisplay : Draws this band with ``n_bootstrap``.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.metrics import bootstrap_reliability_band
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.uniform(size=500)
    >>> y = (rng.uniform(size=500) < proba).astype(int)
    >>> band = bootstrap_reliability_band(y, proba, n_bins=5, kind=1, random_state=0)
    >>> bool(np.all((band.low <= band.curve.accuracy) & (band.curve.accuracy <= band.high)))
    True
    >>> bool(np.all(band.high - band.low < 0.2))
    True
    """
    n_bins = check_n_bins(n_bins)
    strategy = check_strategy(strategy)
    n_resamples = _check_n_resamples(n_resamples, "n_resamples")
    confidence = _check_confidence(confidence, "confidence")
    rng = _check_random_state(random_state)
    checked = check_classification_proba(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    column = resolve_kind(kind, checked.labels)
    _check_strata(checked.y_index, checked.labels, "bootstrap_reliability_band")
    curve = curve_from_checked(checked, column, n_bins, strategy)

    _, outcome, bin_index, _ = binned_rows(checked, column, n_bins, strategy)
    weight = checked.sample_weight
    weighted_outcome = weight * outcome

    accuracy = np.empty((n_resamples, n_bins))
    resamples = _stratified_indices(checked.y_index, n_resamples, rng)
    for b, index in enumerate(resamples):
        counts = np.bincount(bin_index[index], weights=weight[index], minlength=n_bins)
        hits = np.bincount(bin_index[index], weights=weighted_outcome[index], minlength=n_bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy[b] = np.where(counts > 0, hits / counts, np.nan)

    low = np.full(n_bins, np.nan)
    high = np.full(n_bins, np.nan)
    quantiles = [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0]
    for bin_ in np.flatnonzero(curve.counts > 0):
        seen = accuracy[:, bin_][~np.isnan(accuracy[:, bin_])]
        if seen.size:
            low[bin_], high[bin_] = np.quantile(seen, quantiles)
    for array in (low, high, accuracy):
        array.setflags(write=False)
    return ReliabilityBand(curve, low, high, confidence, n_resamples, accuracy)


def _stratified_indices(
    strata: np.ndarray, n_resamples: int, rng: np.random.RandomState
) -> Iterator[np.ndarray]:
    """Row indices of ``n_resamples`` bootstrap resamples, each drawn within each stratum.

    ``strata`` holds a non-negative integer code per row. A resample keeps each
    stratum's size: every row of stratum ``s`` is replaced by a uniformly drawn row of
    ``s``. The resample's rows come grouped by stratum.
    """
    order = np.argsort(strata, kind="stable")
    sizes = np.bincount(strata)
    starts = np.cumsum(sizes) - sizes
    row_start = starts[strata[order]]
    row_size = sizes[strata[order]]
    for _ in range(n_resamples):
        offset = (rng.random_sample(order.shape[0]) * row_size).astype(np.intp)
        yield order[row_start + np.minimum(offset, row_size - 1)]


def _check_n_resamples(n_resamples: Any, name: str) -> int:
    if (
        isinstance(n_resamples, bool | np.bool_)
        or not isinstance(n_resamples, numbers.Integral)
        or n_resamples < 2
    ):
        raise ValueError(f"{name} must be an integer >= 2; got {plain(n_resamples)!r}.")
    if n_resamples > MAX_RESAMPLES:
        raise ValueError(
            f"{name} must be at most {MAX_RESAMPLES} (MAX_RESAMPLES); got "
            f"{plain(n_resamples)!r}. A percentile interval settles long before that."
        )
    return int(n_resamples)


def _check_random_state(random_state: Any) -> np.random.RandomState:
    """The ``RandomState`` of ``random_state``; a ``ValueError`` names a bad one."""
    try:
        return check_random_state(random_state)
    except ValueError:
        raise ValueError(
            "random_state must be None, an int or a numpy.random.RandomState instance; "
            f"got {plain(random_state)!r}."
        ) from None


def _check_strata(strata: np.ndarray, classes: np.ndarray, function: str) -> None:
    """Refuse classes that all have a single row (no resample differs from the data);
    warn about some that have (their rows never vary, so the interval is too narrow)."""
    sizes = np.bincount(strata, minlength=len(classes))
    present = sizes > 0
    single = np.asarray(classes)[present & (sizes == 1)].tolist()
    if not single:
        return
    if len(single) == int(present.sum()):
        raise ValueError(
            f"{function} cannot resample: every class of y_true has a single row "
            f"(classes {single!r}), and a class-stratified resample redraws each class's "
            "only row, so every resample is the data itself and the interval would have "
            "zero width. Pass more rows per class."
        )
    warnings.warn(
        f"{function}: the classes {single!r} of y_true have a single row each, which "
        "every class-stratified resample redraws, so their rows never vary and the "
        "interval is too narrow. Pass more rows of those classes.",
        UserWarning,
        stacklevel=3,
    )


def _check_confidence(confidence: Any, name: str) -> float:
    if (
        isinstance(confidence, bool | np.bool_)
        or not isinstance(confidence, numbers.Real)
        or not 0.0 < confidence < 1.0
    ):
        raise ValueError(
            f"{name} must be a number strictly between 0 and 1; got {plain(confidence)!r}."
        )
    return float(confidence)


def _check_rows(y_true: np.ndarray, y_proba: np.ndarray, metric_kwargs: dict[str, Any]) -> int:
    """The number of rows, after checking that every per-row input has that many."""
    if y_true.ndim == 0 or y_proba.ndim == 0:
        raise ValueError(
            "y_true and y_proba must be arrays with one entry per row; got shapes "
            f"{y_true.shape} and {y_proba.shape}."
        )
    n_samples = y_true.shape[0]
    if n_samples == 0:
        raise ValueError("y_true must not be empty; got 0 samples.")
    if y_proba.shape[0] != n_samples:
        raise ValueError(
            "y_true and y_proba must have the same number of samples; "
            f"got {n_samples} and {y_proba.shape[0]}."
        )
    for key in ROW_ARGUMENTS:
        value = metric_kwargs.get(key)
        if value is not None and (np.ndim(value) == 0 or np.shape(value)[0] != n_samples):
            raise ValueError(
                f"{key} must have one entry per row ({n_samples}), as it is resampled with "
                f"the rows; got shape {np.shape(value)}."
            )
    return n_samples
