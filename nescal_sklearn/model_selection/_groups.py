"""Groups of rows that must stay in one fold: the user's group ids, read as labels, and
the groups of exact duplicate rows.

Group ids are labels, not numbers: :func:`group_codes` turns ids of any hashable kind
(strings, floats, huge or negative integers) into codes ``0..k-1`` once, so that every
later step (the splitter, the count of groups spread over test parts) works on ``k``
groups in memory linear in the rows, whatever the ids' values.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

__all__ = ["duplicate_groups", "group_codes", "spread_groups"]


def _is_missing(value) -> bool:
    """Whether one id is missing: None, a float NaN, NaT, or pandas' NA."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    return isinstance(value, np.datetime64 | np.timedelta64) and bool(np.isnat(value))


def group_codes(groups) -> np.ndarray:
    """Group ids as codes ``0..k-1``: equal ids, equal codes; sortable ids keep their order.

    Parameters
    ----------
    groups : array-like of shape (n_samples,)
        One id per row, of any hashable kind: integers of any size or sign, floats,
        strings, or a mix of kinds.

    Returns
    -------
    ndarray of int of shape (n_samples,)

    Raises
    ------
    ValueError
        When an id is missing (NaN, None, NaT) or cannot be compared with the others
        for equality (an unhashable id such as a list).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.model_selection._groups import group_codes
    >>> group_codes(["p-7", "p-3", "p-7"]).tolist()
    [1, 0, 1]
    >>> group_codes(np.array([10**20, -1, 10**20, "p-1"], dtype=object)).tolist()
    [0, 1, 0, 2]
    """
    values = np.asarray(groups)
    if values.ndim != 1:
        values = np.asarray(groups, dtype=object).reshape(-1)
    missing = [i for i, value in enumerate(values.tolist()) if _is_missing(value)]
    if missing:
        raise ValueError(
            f"groups has {len(missing)} missing ids (NaN, None or NaT; the first at row "
            f"{missing[0]}) among its {values.size}: give every row a group id, a group of "
            "its own (e.g. its row number) for a row that belongs to no group."
        )
    try:
        return np.unique(values, return_inverse=True)[1].reshape(-1)
    except TypeError:  # ids of kinds that do not sort together (numbers and strings)
        pass
    codes: dict = {}
    try:
        found = [codes.setdefault(value, len(codes)) for value in values.tolist()]
    except TypeError as error:
        raise ValueError(
            f"groups must hold one hashable id per row (a number or a string); got {error}."
        ) from None
    return np.asarray(found, dtype=np.intp)  # in the order the ids first appear


def _row_ids(X) -> np.ndarray | None:
    """One id per row, equal for identical rows; None for input whose rows are not compared."""
    if hasattr(X, "columns") and hasattr(X, "iloc"):  # a pandas DataFrame: pandas is there
        from pandas.util import hash_pandas_object

        return hash_pandas_object(X, index=False).to_numpy()
    if sparse.issparse(X):
        return None
    try:
        values = np.asarray(X)
    except (TypeError, ValueError):
        return None
    if values.ndim != 2 or values.shape[0] == 0:
        return None
    if values.dtype == object:
        ids: dict = {}
        try:
            return np.array([ids.setdefault(tuple(row), len(ids)) for row in values.tolist()])
        except TypeError:  # unhashable cells
            return None
    if values.dtype.kind == "f":
        values = values + 0.0  # -0.0 and 0.0 are the same value
    rows = np.ascontiguousarray(values).view(
        np.dtype((np.void, values.dtype.itemsize * values.shape[1]))
    )
    return rows.reshape(-1)


def duplicate_groups(X) -> np.ndarray | None:
    """Group ids that put exact duplicate rows of ``X`` together, or None without duplicates.

    Rows are compared as ``fit`` receives them (the preprocessed matrix inside a
    pipeline): a NumPy array or list by value (``-0.0`` equals ``0.0``; a NaN equals a
    NaN of the same bits), a pandas DataFrame by the hash of its values. Sparse input is
    not compared.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)

    Returns
    -------
    ndarray of shape (n_samples,) or None
        Equal for rows that are copies of each other, distinct otherwise; None when no
        two rows are equal.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.model_selection import duplicate_groups
    >>> duplicate_groups(np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0]]))
    array([1, 0, 1])
    """
    ids = _row_ids(X)
    if ids is None:
        return None
    _, groups, counts = np.unique(ids, return_inverse=True, return_counts=True)
    return groups.reshape(-1) if np.any(counts > 1) else None


def spread_groups(codes: np.ndarray, folds: list[tuple]) -> tuple[int, int]:
    """The groups with rows in two or more test parts of ``folds``, and their rows.

    Parameters
    ----------
    codes : ndarray of int of shape (n_samples,)
        Group codes ``0..k-1`` (:func:`group_codes`, :func:`duplicate_groups`).
    folds : list of (train, test) index arrays

    Returns
    -------
    n_groups, n_rows : int
    """
    fold_of = np.empty(codes.size, dtype=np.intp)
    for f, (_, test) in enumerate(folds):
        fold_of[test] = f
    n_groups = int(codes.max()) + 1 if codes.size else 0
    lowest = np.full(n_groups, np.iinfo(np.intp).max)
    highest = np.full(n_groups, -1)
    np.minimum.at(lowest, codes, fold_of)
    np.maximum.at(highest, codes, fold_of)
    split = lowest != highest
    return int(np.sum(split)), int(np.sum(split[codes]))
