"""Local calibration error: the calibration gap of each row's feature-space neighbourhood."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ._binning import _uniform_edges
from ._validation import check_classification_proba, check_n_bins, plain

__all__ = ["local_calibration_error"]

KERNELS = ("knn", "laplacian")
REDUCTIONS = ("mean", "max")
#: Entries of one ``chunk × bin`` block (about 4 MB per float64 array).
_BLOCK_ENTRIES = 2**19


def local_calibration_error(
    y_true: Any,
    y_proba: Any,
    features: Any,
    *,
    n_neighbors: int = 20,
    n_bins: int = 15,
    reduction: str = "mean",
    kernel: str = "knn",
    bandwidth: float = 1.0,
    labels: Any = None,
    sample_weight: Any = None,
) -> float:
    """Local calibration error (LCE): the top-label gap of each row's neighbourhood.

    For each row ``i`` with confidence ``c_i = max_k p_ik`` and correctness
    ``a_i = 1[argmax_k p_ik = y_i]``, the local error is the weighted average of
    ``c_j - a_j`` over the rows ``j`` near ``i`` in ``features`` that fall in the
    same confidence bin as ``i``, in absolute value::

        LCE_i = | sum_j w_j K_ij (c_j - a_j) | / sum_j w_j K_ij,  j in bin(i)

    ``reduction="mean"`` returns ``sum_i w_i LCE_i / sum_i w_i``;
    ``reduction="max"`` returns ``max_i LCE_i`` over the rows of positive weight
    (Luo et al.'s MLCE). A model can have a zero ECE and a large LCE: when one
    region of the feature space is over-confident and another under-confident at
    the same confidence, the bins average the two errors away, the neighbourhoods
    do not.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row (integers, strings, ...).
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``; a 1-D array is
        the probability of the second class of a binary problem.
    features : array-like of shape (n_samples, n_features) or (n_samples,)
        Where each row lies, for the neighbourhoods: input features, or a model's
        embeddings. Distances are Euclidean, so put the columns on comparable
        scales first (standardise them). A 1-D array is one feature.
    n_neighbors : int, default=20
        ``kernel="knn"``: size of each neighbourhood, the row itself included,
        counted among the rows of the row's confidence bin. A bin with fewer rows
        is taken whole, so ``n_neighbors`` larger than the number of rows is
        allowed and means "the whole bin". Unused with ``kernel="laplacian"``.
    n_bins : int, default=15
        Number of equal-width confidence bins on [0, 1], closed on the right as in
        :func:`reliability_curve`; ``n_bins=1`` drops the bin restriction.
    reduction : {"mean", "max"}, default="mean"
        Weighted mean of the local errors (LCE), or their maximum (MLCE).
    kernel : {"knn", "laplacian"}, default="knn"
        ``"knn"``: ``K_ij = 1`` for the ``n_neighbors`` nearest rows ``j`` of the
        bin (uniform weights), else 0. ``"laplacian"``: Luo et al.'s kernel,
        ``K_ij = exp(-||x_i - x_j|| / bandwidth)`` (Euclidean norm) over the whole
        bin.
    bandwidth : float, default=1.0
        Length scale of the Laplacian kernel, in the units of ``features``. Unused
        with ``kernel="knn"``.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba``; defaults to the sorted unique
        values of ``y_true`` and is required when ``y_true`` lacks a class.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weight of each row: ``w_j`` in each neighbourhood average and
        ``w_i`` in the mean. With weights, ``n_neighbors`` is a weight: a
        neighbourhood holds the nearest rows until their weights add up to
        ``n_neighbors``, the farthest one counted in part, so an integer weight
        acts exactly like repeating the row.

    Returns
    -------
    lce : float
        In [0, 1]; 0 when every neighbourhood is calibrated. ``reduction="max"`` is
        never below ``reduction="mean"``.

    See Also
    --------
    expected_calibration_error : The binned, global counterpart. With
        ``kernel="knn"`` and ``n_neighbors`` at least the number of rows, each
        neighbourhood is the whole bin, so the LCE is the ECE (and the MLCE the
        MCE) of the same bins; with ``n_neighbors=1`` it is the mean of
        ``|c_i - a_i|``.

    Notes
    -----
    Rows at the same distance from ``i`` at the edge of its neighbourhood share the
    places left in proportion to their weights (so the result does not depend on
    the order of the rows). Time is quadratic in the rows of a bin; memory
    stays at a few ``chunk × bin`` blocks of about 4 MB, whatever the size of
    the data.

    References
    ----------
    Luo, Bhatnagar, Bai, Zhao, Wang, Xiong, Savarese, Ermon, Schmerling & Pavone,
    "Local Calibration: Metrics and Recalibration", UAI 2022 (PMLR 180:1286-1295),
    arXiv:2102.10809: the LCE of a row is the kernel-weighted average of
    confidence minus correctness over the rows of its confidence bin, the MLCE its
    maximum over rows. The kNN kernel is this package's variant.

    Examples
    --------
    Two clusters on a line, all rows at confidence 0.75: the left one always right
    (under-confident by 0.25), the right one right half of the time
    (over-confident by 0.25). Overall 75 % are right, so the ECE is 0; each
    neighbourhood of 4 rows sees a gap of 0.25:

    >>> from nescal_sklearn.metrics import expected_calibration_error, local_calibration_error
    >>> x = [0.0, 0.1, 0.2, 0.3, 5.0, 5.1, 5.2, 5.3]
    >>> y_true = [1, 1, 1, 1, 1, 0, 0, 1]
    >>> y_proba = [0.75] * 8  # probability of class 1
    >>> expected_calibration_error(y_true, y_proba)
    0.0
    >>> local_calibration_error(y_true, y_proba, x, n_neighbors=4)
    0.25
    """
    n_neighbors = _check_n_neighbors(n_neighbors)
    n_bins = check_n_bins(n_bins)
    reduction = _check_choice("reduction", reduction, REDUCTIONS)
    kernel = _check_choice("kernel", kernel, KERNELS)
    bandwidth = _check_bandwidth(bandwidth)
    checked = check_classification_proba(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    points = _check_features(features, checked.y_index.shape[0])

    predicted = np.argmax(checked.proba, axis=1)
    confidence = checked.proba[np.arange(predicted.shape[0]), predicted]
    gap = confidence - (predicted == checked.y_index)
    weights = checked.sample_weight
    edges = _uniform_edges(confidence, weights, n_bins)
    bin_index = np.searchsorted(edges[1:-1], confidence, side="left")

    local = np.zeros(gap.shape[0])
    for rows in _groups(bin_index):
        local[rows] = _local_gaps(
            points[rows], gap[rows], weights[rows], kernel, n_neighbors, bandwidth
        )
    local = np.abs(local)
    if reduction == "max":
        return float(np.max(local[weights > 0]))
    return float(np.sum(weights * local) / np.sum(weights))


# --------------------------------------------------------------------------- checks


def _check_n_neighbors(n_neighbors: Any) -> int:
    if (
        isinstance(n_neighbors, bool | np.bool_)
        or not isinstance(n_neighbors, numbers.Integral)
        or n_neighbors < 1
    ):
        raise ValueError(f"n_neighbors must be an integer >= 1; got {plain(n_neighbors)!r}.")
    return int(n_neighbors)


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        expected = " or ".join(repr(choice) for choice in choices)
        raise ValueError(f"{name} must be {expected}; got {plain(value)!r}.")
    return str(value)


def _check_bandwidth(bandwidth: Any) -> float:
    if (
        isinstance(bandwidth, bool | np.bool_)
        or not isinstance(bandwidth, numbers.Real)
        or not np.isfinite(bandwidth)
        or bandwidth <= 0
    ):
        raise ValueError(f"bandwidth must be a finite number > 0; got {plain(bandwidth)!r}.")
    return float(bandwidth)


def _check_features(features: Any, n_samples: int) -> np.ndarray:
    """``features`` as a float64 ``(n_samples, n_features)`` array, centred on its midrange."""
    try:
        raw = np.asarray(features)
    except ValueError:  # numpy refuses nested sequences of unequal lengths
        raise ValueError(
            "features must be an array of shape (n_samples, n_features); its rows differ in length."
        ) from None
    if raw.dtype.kind not in "biuf":
        raise ValueError(f"features must hold numbers; got an array of dtype {raw.dtype}.")
    if raw.ndim == 1:
        raw = raw[:, None]
    if raw.ndim != 2 or raw.shape[1] == 0:
        raise ValueError(
            "features must be of shape (n_samples,) or (n_samples, n_features) with at "
            f"least one feature; got shape {raw.shape}."
        )
    if raw.shape[0] != n_samples:
        raise ValueError(
            "y_true and features must have the same number of samples; "
            f"got {n_samples} and {raw.shape[0]}."
        )
    points = raw.astype(np.float64)
    bad = ~np.isfinite(points)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"features must not contain NaN or infinity; got {points[row, col]} in row {row}."
        )
    # Centring keeps the expanded squared distances accurate; the midrange, unlike the
    # mean, does not depend on the order of the rows.
    return points - (points.max(axis=0) + points.min(axis=0)) / 2


# --------------------------------------------------------------------------- computation


def _groups(bin_index: np.ndarray) -> list[np.ndarray]:
    """Row indices of each non-empty bin."""
    order = np.argsort(bin_index, kind="stable")
    bounds = np.flatnonzero(np.diff(bin_index[order])) + 1
    return np.split(order, bounds)


def _squared_distances(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    sq = (left**2).sum(axis=1)[:, None] + (right**2).sum(axis=1)[None, :] - 2 * left @ right.T
    return np.maximum(sq, 0.0)


def _local_gaps(
    points: np.ndarray,
    gap: np.ndarray,
    weights: np.ndarray,
    kernel: str,
    n_neighbors: int,
    bandwidth: float,
) -> np.ndarray:
    """Signed local gap of every row of one bin (0 where its neighbourhood weighs nothing)."""
    m = points.shape[0]
    out = np.zeros(m)
    chunk = max(1, _BLOCK_ENTRIES // m)
    for start in range(0, m, chunk):
        rows = np.arange(start, min(start + chunk, m))
        sq = _squared_distances(points[rows], points)
        sq[np.arange(rows.shape[0]), rows] = 0.0  # each row is its own nearest
        if kernel == "knn":
            numerator, denominator = _knn_sums(sq, weights, gap, n_neighbors)
        else:
            share = np.exp(-np.sqrt(sq) / bandwidth) * weights
            numerator = share @ gap
            denominator = share.sum(axis=1)
        positive = denominator > 0
        out[rows[positive]] = numerator[positive] / denominator[positive]
    return out


def _knn_sums(
    sq: np.ndarray, weights: np.ndarray, gap: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """``sum_j share_ij gap_j`` and ``sum_j share_ij`` for each row of ``sq``.

    Only the nearest columns are sorted: ``2 k + 1`` of them at first, twice as many
    for the rows whose neighbourhood they do not settle (zero or small weights, ties),
    up to all of them.
    """
    n_rows, m = sq.shape
    numerator, denominator = np.zeros(n_rows), np.zeros(n_rows)
    pending = np.arange(n_rows)
    size = min(m, 2 * k + 1)
    while pending.size:
        block = sq[pending]
        if size < m:
            columns = np.argpartition(block, size - 1, axis=1)[:, :size]
        else:
            columns = np.broadcast_to(np.arange(m), block.shape)
        dist = np.take_along_axis(block, columns, axis=1)
        order = np.argsort(dist, axis=1, kind="stable")
        columns = np.take_along_axis(columns, order, axis=1)
        share, closer = _shares(np.take_along_axis(dist, order, axis=1), weights[columns], k)
        # Every column left out is at least as far as the last one kept: the rows that
        # take their whole weight k from columns strictly closer than it are settled.
        settled = np.ones(pending.size, dtype=bool) if size == m else closer[:, -1] >= k
        numerator[pending[settled]] = np.sum(share * gap[columns], axis=1)[settled]
        denominator[pending[settled]] = np.sum(share, axis=1)[settled]
        pending = pending[~settled]
        size = min(m, 2 * size)
    return numerator, denominator


def _shares(dist: np.ndarray, w: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Weight each column brings to its row's neighbourhood, columns sorted by ``dist``.

    The nearest columns are taken until their weights reach ``k``; the columns at the
    distance where that happens (ties included) share what is left in proportion to
    their weights. Also returns, for each column, the weight strictly closer than it.
    """
    through = np.cumsum(w, axis=1)
    m = dist.shape[1]
    columns = np.broadcast_to(np.arange(m), dist.shape)
    first = np.ones(dist.shape, dtype=bool)
    first[:, 1:] = dist[:, 1:] != dist[:, :-1]
    last = np.ones(dist.shape, dtype=bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, columns, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, columns, m - 1)[:, ::-1], axis=1)[:, ::-1]
    closer = np.take_along_axis(through - w, start, axis=1)
    tied = np.take_along_axis(through, end, axis=1) - closer
    fraction = np.divide(k - closer, tied, out=np.zeros(dist.shape), where=tied > 0)
    return w * np.clip(fraction, 0.0, 1.0), closer
