"""The folds of a cross-fitted ensemble: groups, exact duplicate rows, and the checks that
run before any member is fitted."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from scipy import sparse
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, check_cv

from ..calibration import check_partition

__all__ = ["duplicate_groups", "make_folds"]


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
    """
    ids = _row_ids(X)
    if ids is None:
        return None
    _, groups, counts = np.unique(ids, return_inverse=True, return_counts=True)
    return groups.reshape(-1) if np.any(counts > 1) else None


def _spanning(groups: np.ndarray, folds: list[tuple]) -> tuple[int, int]:
    """The groups with rows in two or more test parts, and how many rows they have."""
    fold_of = np.empty(groups.size, dtype=np.intp)
    for f, (_, test) in enumerate(folds):
        fold_of[test] = f
    lowest = np.full(groups.max() + 1, np.iinfo(np.intp).max)
    highest = np.full(groups.max() + 1, -1)
    np.minimum.at(lowest, groups, fold_of)
    np.maximum.at(highest, groups, fold_of)
    split = lowest != highest
    return int(np.sum(split)), int(np.sum(split[groups]))


def _check_fold_classes(folds: list[tuple], y: np.ndarray, classes: np.ndarray, cv) -> None:
    """Every class must have rows in every fold's training part."""
    counts = np.bincount(y, minlength=classes.size)
    for f, (train, _) in enumerate(folds):
        missing = np.flatnonzero(np.bincount(y[train], minlength=classes.size) == 0)
        if missing.size:
            label = classes[missing[0]]
            label = label.item() if isinstance(label, np.generic) else label
            count = int(counts[missing[0]])
            rows = "its only row" if count == 1 else f"all {count} of its rows"
            raise ValueError(
                f"Class {label!r} has {count} row{'' if count == 1 else 's'} in y, and cv={cv!r} "
                f"holds {rows} out of the training part of fold {f}, so that fold's models "
                f"would never see class {label!r}: every class needs rows in every fold's "
                "training part. Give each class at least 2 rows (cv=int stratifies the "
                "folds, so a class of 2 or more rows is in every training part), use a cv "
                "that keeps rows of every class in each training part, or drop the class."
            )


def _check_fold_weights(folds: list[tuple], sample_weight: np.ndarray | None) -> None:
    """Every fold's training and test part must hold a positive weight."""
    if sample_weight is None:
        return
    for f, (train, test) in enumerate(folds):
        for part, rows, why in (
            ("training part", train, "its models would be fitted on no weight"),
            ("test part", test, "its models early-stop and are weighed and calibrated on it"),
        ):
            if not np.sum(sample_weight[rows]) > 0:
                raise ValueError(
                    f"sample_weight is zero on every row of fold {f}'s {part} ({len(rows)} "
                    f"rows), and {why}: every fold needs rows of positive weight on both "
                    "sides. Give rows of positive weight to every fold, or use fewer folds."
                )


def _split(cv, X, y: np.ndarray, groups, seed: int | None) -> list[tuple]:
    """The folds of ``cv``: an int is a shuffled ``StratifiedKFold``, or a
    ``StratifiedGroupKFold`` with ``groups``; a splitter gets ``groups`` as they are."""
    if not isinstance(cv, numbers.Integral):
        return list(check_cv(cv, classifier=True).split(X, y, groups))
    kind = StratifiedKFold if groups is None else StratifiedGroupKFold
    return list(kind(int(cv), shuffle=True, random_state=seed).split(X, y, groups))


def _duplicate_folds(cv: int, X, y, classes, duplicates, seed) -> list[tuple] | None:
    """``cv=int`` folds that keep copies together, or None where they cannot be made
    (fewer groups of copies than folds) or leave a class out of a training part."""
    if np.unique(duplicates).size < cv:
        return None
    folds = _split(cv, X, y, duplicates, seed)
    try:
        _check_fold_classes(folds, y, classes, cv)
    except ValueError:
        return None
    return folds


def make_folds(
    cv, X, y: np.ndarray, classes: np.ndarray, groups, sample_weight, rng
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) folds of a cross-fitted ensemble, checked before any fit.

    ``cv=int`` gives stratified, shuffled folds seeded from ``rng``: by group when
    ``groups`` are given, and otherwise by exact duplicate rows when ``X`` has any
    (:func:`duplicate_groups`), so that a row and its copy never fall in different folds
    (unless the copies are too few distinct rows to make ``cv`` folds with every class in
    each training part: then the plain stratified folds, as copies are then what the data
    is made of). A splitter gets ``groups``;
    when groups (or copies) still end up in several test parts, one warning says how
    many.

    Raises
    ------
    ValueError
        When the test parts are not a partition of the rows
        (:func:`~nescal_sklearn.calibration.check_partition`), when a fold's training part
        holds no row of a class, or a fold's part no positive weight.
    """
    integral = isinstance(cv, numbers.Integral)
    seed = rng.randint(2**31 - 1) if integral else None
    together = groups if groups is not None else duplicate_groups(X)
    folds = None
    if integral and groups is None and together is not None:
        folds = _duplicate_folds(int(cv), X, y, classes, together, seed)
    fallback = folds is None and integral and groups is None
    if folds is None:
        folds = _split(cv, X, y, groups, seed)
    check_partition(folds, y.size, cv)
    _check_fold_classes(folds, y, classes, cv)
    _check_fold_weights(folds, sample_weight)
    if together is not None and not fallback:
        _warn_about_spread_groups(cv, folds, together, groups is not None)
    return folds


def _warn_about_spread_groups(cv, folds, together: np.ndarray, given: bool) -> None:
    n_split, n_rows = _spanning(together, folds)
    if n_split:
        what = "groups" if given else "groups of exact duplicate rows"
        warnings.warn(
            f"{n_split} {what} ({n_rows} rows) have rows in two or more test parts of "
            f"cv={cv!r}, so their copies train the fold models that predict them out of "
            "fold: oof_proba_, the member weights, early stopping and the map's choice "
            "see in-sample predictions. Pass groups (one id per row; equal for rows that "
            "must stay together) with cv=int, GroupKFold or StratifiedGroupKFold.",
            UserWarning,
            stacklevel=4,
        )
