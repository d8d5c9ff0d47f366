"""The folds of a cross-fitting: groups, exact duplicate rows, and the checks that run
before any fold model is fitted."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import sparse
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, check_cv

from .._params import plain

__all__ = ["check_partition", "duplicate_groups", "inner_split", "make_folds"]


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


def _named(cv) -> str:
    """``cv`` as a message names it: ``cv=<repr>``, or folds given as (train, test) pairs
    (whose repr would print every row number) as such."""
    if cv is None:
        return "cv"
    if isinstance(cv, numbers.Integral) or hasattr(cv, "split"):
        return f"cv={cv!r}"
    return "cv (the (train, test) pairs given)"


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


def check_partition(folds: Sequence[tuple], n_samples: int, cv=None) -> None:
    """Raise a ``ValueError`` unless the test parts of ``folds`` hold every row exactly once.

    Cross-fitting gives each row one out-of-fold prediction, from the fold model that
    held it out; a row in no test part would have none, a row in several would have
    several. ``ShuffleSplit``, ``RepeatedStratifiedKFold`` and a ``PredefinedSplit``
    with unassigned rows are not partitions.

    Parameters
    ----------
    folds : sequence of (train, test) index arrays
    n_samples : int
        Number of rows.
    cv : object, default=None
        The splitter that made ``folds``, named in the message.

    Raises
    ------
    ValueError
        Naming ``cv`` and how many rows are in no test part, in several, or outside
        the data, or a fold that trains on rows it holds out.
    """
    tests = [np.asarray(test, dtype=np.intp).reshape(-1) for _, test in folds]
    every = np.concatenate(tests) if tests else np.empty(0, dtype=np.intp)
    outside = every[(every < 0) | (every >= n_samples)]
    counts = np.bincount(every[(every >= 0) & (every < n_samples)], minlength=n_samples)
    problems = []
    if outside.size:
        problems.append(
            f"name {np.unique(outside).size} rows that X does not have "
            f"(e.g. {int(outside[0])}; X has {n_samples} rows)"
        )
    if np.any(counts == 0):
        problems.append(f"leave {int(np.sum(counts == 0))} of the {n_samples} rows in no test part")
    if np.any(counts > 1):
        problems.append(f"put {int(np.sum(counts > 1))} rows in two or more")
    for f, ((train, _), test) in enumerate(zip(folds, tests, strict=True)):
        both = np.intersect1d(np.asarray(train, dtype=np.intp), test).size
        if both:
            problems.append(f"fold {f} trains on {both} of the rows it holds out")
            break
    if problems:
        raise ValueError(
            f"{_named(cv)} does not split the rows into a partition: its {len(folds)} test parts "
            f"{' and '.join(problems)}. Cross-fitting needs every row in exactly one test "
            "part, which holds it out of one fold model and gives it one out-of-fold "
            "prediction: use KFold, StratifiedKFold, GroupKFold or StratifiedGroupKFold, "
            "or an int."
        )


def _check_fold_classes(folds: list[tuple], y: np.ndarray, classes: np.ndarray, cv) -> None:
    """Every class must have rows in every fold's training part."""
    counts = np.bincount(y, minlength=classes.size)
    for f, (train, _) in enumerate(folds):
        missing = np.flatnonzero(np.bincount(y[train], minlength=classes.size) == 0)
        if missing.size:
            label = plain(classes[missing[0]])
            count = int(counts[missing[0]])
            rows = "its only row" if count == 1 else f"all {count} of its rows"
            raise ValueError(
                f"Class {label!r} has {count} row{'' if count == 1 else 's'} in y, and {_named(cv)} "
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


def _split(cv, X, y: np.ndarray, groups, seed: int | None, shuffle: bool) -> list[tuple]:
    """The folds of ``cv``: an int is a ``StratifiedKFold``, or a ``StratifiedGroupKFold``
    with ``groups`` (shuffled by ``seed`` when ``shuffle``); a splitter gets ``groups``."""
    if not isinstance(cv, numbers.Integral):
        return list(check_cv(cv, classifier=True).split(X, y, groups))
    kind = StratifiedKFold if groups is None else StratifiedGroupKFold
    splitter = kind(int(cv), shuffle=shuffle, random_state=seed if shuffle else None)
    return list(splitter.split(X, y, groups))


def _duplicate_folds(cv: int, X, y, classes, duplicates, seed, shuffle) -> list[tuple] | None:
    """``cv=int`` folds that keep copies together, or None where they cannot be made
    (fewer groups of copies than folds) or leave a class out of a training part."""
    if np.unique(duplicates).size < cv:
        return None
    folds = _split(cv, X, y, duplicates, seed, shuffle)
    try:
        _check_fold_classes(folds, y, classes, cv)
    except ValueError:
        return None
    return folds


def make_folds(
    cv,
    X,
    y: np.ndarray,
    classes: np.ndarray,
    *,
    groups=None,
    sample_weight: np.ndarray | None = None,
    rng=None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) folds of a cross-fitting, checked before any fit.

    ``cv=int`` gives stratified folds: by group when ``groups`` are given, and otherwise
    by exact duplicate rows when ``X`` has any (:func:`duplicate_groups`), so that a row
    and its copy never fall in different folds (unless the copies are too few distinct
    rows to make ``cv`` folds with every class in each training part: then the plain
    stratified folds, as copies are then what the data is made of). A splitter gets
    ``groups``; when groups (or copies) still end up in several test parts, one warning
    says how many.

    Parameters
    ----------
    cv : int or cross-validation splitter or iterable of (train, test)
    X : array-like of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Label-encoded targets (indices into ``classes``).
    classes : ndarray of shape (n_classes,)
        The class labels, for messages.
    groups : array-like of shape (n_samples,) or None, default=None
        Group of each row: rows of a group stay in one fold.
    sample_weight : ndarray of shape (n_samples,) or None, default=None
        Every fold's training and test part must hold a positive weight.
    rng : RandomState instance or None, default=None
        Shuffles the folds of an int ``cv`` (one draw of ``rng``, only then); None keeps
        the rows in order, as scikit-learn's ``check_cv(int)`` does.

    Returns
    -------
    list of (train, test) index arrays

    Raises
    ------
    ValueError
        When the test parts are not a partition of the rows (:func:`check_partition`),
        when a fold's training part holds no row of a class, or a fold's part no
        positive weight.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.model_selection import make_folds
    >>> X = np.array([[0.0], [1.0], [0.0], [2.0], [3.0], [4.0]])  # rows 0 and 2 are copies
    >>> y = np.array([0, 1, 0, 1, 0, 1])
    >>> [test.tolist() for _, test in make_folds(2, X, y, np.array([0, 1]))]
    [[0, 2, 5], [1, 3, 4]]
    """
    integral = isinstance(cv, numbers.Integral)
    shuffle = rng is not None
    seed = rng.randint(2**31 - 1) if integral and shuffle else None
    together = groups if groups is not None else duplicate_groups(X)
    folds = None
    if integral and groups is None and together is not None:
        folds = _duplicate_folds(int(cv), X, y, classes, together, seed, shuffle)
    fallback = folds is None and integral and groups is None
    if folds is None:
        folds = _split(cv, X, y, groups, seed, shuffle)
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
            f"{_named(cv)}, so their copies train the fold models that predict them out of "
            "fold: oof_proba_, the member weights, early stopping and the map's choice "
            "see in-sample predictions. Pass groups (one id per row; equal for rows that "
            "must stay together) with cv=int, GroupKFold or StratifiedGroupKFold.",
            UserWarning,
            stacklevel=4,
        )


def inner_split(y: np.ndarray, random_state, n_splits: int = 5) -> list[tuple]:
    """A stratified, shuffled split of rows into ``n_splits`` parts, for maps fitted on all
    parts but one (fewer parts when a class has fewer rows; none for a single row).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    random_state : int, RandomState instance or None
        Seeds the shuffle.
    n_splits : int, default=5
        The most parts: at least 2, at most the rows of the rarest class present.

    Returns
    -------
    list of (train, test) index arrays
    """
    if y.size < 2:
        return []
    counts = np.bincount(y)
    n_splits = int(max(2, min(n_splits, counts[counts > 0].min())))
    with warnings.catch_warnings():  # a class of fewer rows than parts: scikit-learn warns
        warnings.simplefilter("ignore", UserWarning)
        splitter = StratifiedKFold(n_splits, shuffle=True, random_state=random_state)
        return list(splitter.split(np.zeros(y.size), y))
