"""Argument checks shared by the diagnostics: probability rows, edges, tolerances."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np

__all__ = [
    "PROBA_SUM_ATOL",
    "check_edges",
    "check_n_neighbors",
    "check_nonnegative_real",
    "check_proba",
    "check_values",
]

#: Rows of ``proba`` must sum to 1 within this (float32 softmax outputs do to ~1e-7);
#: they are then renormalised in float64 so that the theorems hold to round-off.
PROBA_SUM_ATOL = 1e-5


def check_proba(proba: Any, name: str = "proba") -> np.ndarray:
    """``proba`` as a float64 (n_samples, n_classes) array whose rows sum to exactly 1.

    Raises unless it is 2-D with at least two columns and one row, finite,
    non-negative, and each row sums to 1 within :data:`PROBA_SUM_ATOL`; the rows are
    then divided by their sums.
    """
    data = np.asarray(proba, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] < 2 or data.shape[0] < 1:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_classes) with n_samples >= 1 "
            f"and n_classes >= 2; got shape {data.shape}."
        )
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    if np.any(data < 0):
        row = int(np.nonzero((data < 0).any(axis=1))[0][0])
        raise ValueError(
            f"{name} must be non-negative; row {row} holds {float(data[row].min())!r}."
        )
    sums = data.sum(axis=1)
    bad = np.abs(sums - 1.0) > PROBA_SUM_ATOL
    if np.any(bad):
        row = int(np.nonzero(bad)[0][0])
        raise ValueError(
            f"{name} rows must sum to 1 (within {PROBA_SUM_ATOL:g}); row {row} sums to "
            f"{float(sums[row])!r}."
        )
    return data / sums[:, None]


def check_values(values: Any, name: str, n: int) -> np.ndarray:
    """A finite float64 1-D array of length ``n``."""
    data = np.array(values, dtype=np.float64)  # a copy: the result freezes it
    if data.shape != (n,):
        raise ValueError(
            f"{name} must have shape ({n},), one value per pair; got shape {data.shape}."
        )
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return data


def check_edges(edges: Any, n_left: int, n_right: int) -> np.ndarray:
    """``edges`` as an int64 (n_edges, 2) array with rows ``(i, j)`` in range."""
    data = np.asarray(edges)
    if data.ndim != 2 or data.shape[1] != 2 or data.shape[0] < 1:
        raise ValueError(
            "edges must be an integer array of shape (n_edges, 2) with n_edges >= 1, one "
            f"(i, j) pair per row; got shape {data.shape}."
        )
    if data.dtype.kind not in "iu":
        raise ValueError(f"edges must hold integer row indices; got dtype {data.dtype}.")
    data = data.astype(np.int64)
    for column, limit, what in ((0, n_left, "proba"), (1, n_right, "the reference rows")):
        values = data[:, column]
        bad = (values < 0) | (values >= limit)
        if np.any(bad):
            raise ValueError(
                f"edges[:, {column}] must index {what} (0 <= index < {limit}); got "
                f"{int(values[bad][0])}."
            )
    return data


def check_nonnegative_real(value: Any, name: str, *, high: float | None = None) -> float:
    """``value`` as a float, raising unless it is a real number in ``[0, high]``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__} {value!r}.")
    value = float(value)
    upper = np.inf if high is None else high
    if not (np.isfinite(value) and 0.0 <= value <= upper):
        expected = ">= 0" if high is None else f"in [0, {high:g}]"
        raise ValueError(f"{name} must be {expected}; got {name}={value!r}.")
    return value


def check_n_neighbors(n_neighbors: Any, n_reference: int) -> int:
    """``1 <= n_neighbors <= n_reference`` (query rows against reference rows)."""
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, Integral):
        raise TypeError(
            f"n_neighbors must be an integer; got {type(n_neighbors).__name__} {n_neighbors!r}."
        )
    if not 1 <= n_neighbors <= n_reference:
        raise ValueError(
            f"n_neighbors={n_neighbors} must be between 1 and the number of reference rows "
            f"({n_reference})."
        )
    return int(n_neighbors)
