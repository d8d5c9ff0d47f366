"""Which columns of a preprocessed matrix are numeric, and which one-hot encode a feature.

A :class:`ColumnLayout` is *declared* by whoever made the columns: a fitted
:func:`make_tabular_preprocessor` exposes it as ``column_layout_``, a user passes it (or
the one-hot groups) to ``NeSCalClassifier(categorical_features=...)``. When nobody
declares it, :meth:`ColumnLayout.guess` finds it in the values, the documented fallback:
columns with more than two distinct values are numeric (:func:`numeric_columns`), runs of
adjacent 0/1 columns with exactly one 1 per row are one-hot groups
(:func:`one_hot_groups`). The guess misreads a ``drop="first"`` encoding (no run sums
to 1) and adjacent indicator columns that happen to sum to 1; a declared layout does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np

__all__ = ["ColumnLayout", "numeric_columns", "one_hot_groups"]


@dataclass(frozen=True)
class ColumnLayout:
    """The roles of the columns of a numeric matrix.

    Parameters
    ----------
    n_features : int
        Number of columns.
    numeric : tuple of int
        Columns holding numeric values (those a numeric embedding or scaler acts on).
    groups : tuple of tuple of int
        One-hot encoded categorical features: the columns of each, in order.

    Examples
    --------
    >>> from nescal_sklearn.preprocessing import ColumnLayout
    >>> layout = ColumnLayout.from_groups(5, [[2, 3, 4]])
    >>> layout.numeric, layout.groups
    ((0, 1), ((2, 3, 4),))
    """

    n_features: int
    numeric: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def from_groups(cls, n_features: int, groups: Sequence[Sequence[int]]) -> ColumnLayout:
        """The layout of declared one-hot ``groups``; every other column is numeric.

        Raises
        ------
        ValueError
            If a group is empty, holds a column twice (or shares one with another
            group), or names a column outside ``range(n_features)``.
        """
        checked: list[tuple[int, ...]] = []
        seen: set[int] = set()
        for group in groups:
            columns = tuple(_column(c, n_features) for c in group) if _is_sequence(group) else ()
            if (
                not columns
                or -1 in columns
                or seen & set(columns)
                or len(set(columns)) != len(columns)
            ):
                raise ValueError(
                    "categorical_features must be a sequence of one-hot groups, each a "
                    f"non-empty sequence of distinct column indices in [0, {n_features}) that "
                    f"no other group holds; got {_shown(groups)!r}."
                )
            seen |= set(columns)
            checked.append(columns)
        numeric = tuple(j for j in range(n_features) if j not in seen)
        return cls(n_features, numeric, tuple(checked))

    @classmethod
    def guess(cls, X: np.ndarray) -> ColumnLayout:
        """The fallback: the layout read from the values of the training rows ``X``.

        Numeric columns are those with more than two distinct values
        (:func:`numeric_columns`); groups are :func:`one_hot_groups`.
        """
        groups = one_hot_groups(X)
        return cls(X.shape[1], tuple(numeric_columns(X)), tuple(tuple(g) for g in groups))


def _is_sequence(value) -> bool:
    return isinstance(value, Sequence | np.ndarray) and not isinstance(value, str)


def _column(value, n_features: int) -> int:
    if isinstance(value, Integral | np.integer) and not isinstance(value, bool):
        if 0 <= int(value) < n_features:
            return int(value)
    return -1  # rejected by the caller with the whole value in the message


def _shown(groups):
    if _is_sequence(groups):
        return [list(g) if _is_sequence(g) else g for g in groups]
    return groups


def numeric_columns(X: np.ndarray) -> list[int]:
    """Columns with more than two distinct (non-NaN) values: the ones a numeric embedding gets.

    One-hot and binary columns hold at most two values; embedding them periodically
    adds width and nothing a linear layer cannot already do with them.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.preprocessing import numeric_columns
    >>> numeric_columns(np.array([[0.0, 1.5, 1.0], [1.0, 2.5, 0.0], [0.0, 3.5, 1.0]]))
    [1]
    """
    X = np.asarray(X)
    columns = []
    for j in range(X.shape[1]):
        values = X[:, j]
        if np.unique(values[~np.isnan(values)]).size > 2:
            columns.append(j)
    return columns


def one_hot_groups(X: np.ndarray, min_size: int = 2) -> list[list[int]]:
    """Runs of adjacent 0/1 columns that one-hot encode a categorical feature.

    A group is a run of adjacent columns holding only 0 and 1 whose sum is exactly 1 on
    every row: each row has one category. Columns are scanned left to right; a run
    grows until its row sums are all 1 (a group) or some row sum exceeds 1 (then its
    first column is a plain binary column and the scan restarts after it). This finds
    the output of a ``OneHotEncoder`` (``make_tabular_preprocessor``, the benchmark
    runner's preprocessing) without being told where it is.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training rows.
    min_size : int, default=2
        Smallest group returned, in columns.

    Returns
    -------
    list of list of int
        The column indices of each group, groups in column order.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.preprocessing import one_hot_groups
    >>> X = np.array([[0.5, 1, 0, 0, 1], [1.5, 0, 1, 0, 0], [2.5, 0, 0, 1, 1]])
    >>> one_hot_groups(X)
    [[1, 2, 3]]
    """
    X = np.asarray(X, dtype=float)
    binary = [bool(np.isin(X[:, j], (0.0, 1.0)).all()) for j in range(X.shape[1])]
    groups: list[list[int]] = []
    start = 0
    while start < X.shape[1]:
        end = _group_end(X, binary, start) if binary[start] else None
        if end is None:  # not the start of a group: a numeric or plain binary column
            start += 1
            continue
        if end - start + 1 >= min_size:
            groups.append(list(range(start, end + 1)))
        start = end + 1
    return groups


def _group_end(X: np.ndarray, binary: list[bool], start: int) -> int | None:
    """The last column of the one-hot group starting at ``start``, or None if none does."""
    total = X[:, start].copy()
    end = start
    while not np.all(total == 1.0):
        end += 1
        if end >= X.shape[1] or not binary[end] or np.any(total + X[:, end] > 1):
            return None
        total += X[:, end]
    return end
