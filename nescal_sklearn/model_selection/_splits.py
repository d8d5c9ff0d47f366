"""The folds of a cross-fitting: groups, exact duplicate rows, and the checks that run
before any fold model is fitted."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold, check_cv

from .._params import plain
from ._group_folds import _FastStratifiedGroupKFold
from ._groups import duplicate_groups, group_codes, spread_groups

__all__ = ["ROWS_PER_DISTINCT_ROW", "check_partition", "inner_split", "make_folds"]


def _named(cv) -> str:
    """``cv`` as a message names it: ``cv=<repr>``, or folds given as (train, test) pairs
    (whose repr would print every row number) as such."""
    if cv is None:
        return "cv"
    if isinstance(cv, numbers.Integral) or hasattr(cv, "split"):
        return f"cv={cv!r}"
    return "cv (the (train, test) pairs given)"


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


def _split(cv, X, y: np.ndarray, groups, seed: int | None) -> list[tuple]:
    """The folds of ``cv``: an int is a ``StratifiedKFold``, or a ``StratifiedGroupKFold``
    with ``groups`` (shuffled by ``seed``; in order for None; its folds computed faster,
    :class:`~._group_folds._FastStratifiedGroupKFold`); a splitter gets ``groups``."""
    if not isinstance(cv, numbers.Integral):
        return list(check_cv(cv, classifier=True).split(X, y, groups))
    kind = StratifiedKFold if groups is None else _FastStratifiedGroupKFold
    splitter = kind(int(cv), shuffle=seed is not None, random_state=seed)
    return list(splitter.split(X, y, groups))


#: Without groups, ``cv=int`` keeps the copies of a row in one fold unless ``X`` is made of
#: few distinct rows: at least this many rows per distinct row on average. Copies are then
#: replicates that fresh rows repeat (a table of a few categorical columns), and holding
#: out whole cells would make every out-of-fold prediction an extrapolation.
ROWS_PER_DISTINCT_ROW = 5


def _grouped_copies(cv: int, X, y, classes, copies, seed) -> list[tuple] | None:
    """``cv=int`` folds that keep copies together, or None where they cannot be made
    (fewer groups of copies than folds) or leave a class out of a training part."""
    if int(copies.max()) + 1 < cv:
        return None
    folds = _split(cv, X, y, copies, seed)
    try:
        _check_fold_classes(folds, y, classes, cv)
    except ValueError:
        return None
    return folds


def _copy_folds(cv: int, X, y, classes, copies: np.ndarray, seed) -> list[tuple]:
    """``cv=int`` folds of ``X`` with exact copies (``copies``: their groups), by the rule
    of :data:`ROWS_PER_DISTINCT_ROW`; a warning says which folds were chosen when copies
    are half of the rows or more, or the folds are the stratified ones."""
    n_rows, n_distinct = y.size, int(copies.max()) + 1
    n_copies = n_rows - int(np.sum(np.bincount(copies) == 1))  # rows that have a copy
    about = (
        f"X has {n_distinct} distinct rows among its {n_rows} ({n_rows / n_distinct:.1f} "
        f"rows each on average; {n_copies} rows have a copy)"
    )
    few = n_rows >= ROWS_PER_DISTINCT_ROW * n_distinct
    folds = None if few else _grouped_copies(cv, X, y, classes, copies, seed)
    if folds is not None:
        if 2 * n_copies >= n_rows:
            warnings.warn(
                f"{about}: cv={cv} keeps the copies of a row in one fold "
                "(StratifiedGroupKFold), as for duplicated records, so that no row is "
                "predicted out of fold by a model that trained on its copy. If the copies "
                "are independent replicates that fresh rows will repeat, pass "
                "groups=numpy.arange(n_samples) for stratified folds.",
                UserWarning,
                stacklevel=4,
            )
        return folds
    why = (
        f"{about}: its copies are replicates of few distinct rows"
        if few
        else f"{about}, too few or too unevenly spread over the classes to keep copies "
        "in one fold with rows of every class in each training part"
    )
    warnings.warn(
        f"{why}, so cv={cv} makes stratified folds (StratifiedKFold) that may put copies "
        "of a row in different folds, as fresh rows will repeat rows the model trained "
        "on. Pass groups=duplicate_groups(X) (nescal_sklearn.model_selection) to keep "
        "copies together, or groups of your own.",
        UserWarning,
        stacklevel=4,
    )
    return _split(cv, X, y, None, seed)


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

    ``cv=int`` gives stratified folds (``StratifiedKFold``): by group when ``groups``
    are given (``StratifiedGroupKFold``). Without groups, exact copies of a row in ``X``
    (:func:`duplicate_groups`) are kept in one fold, so that no row is predicted out of
    fold by a model that trained on its copy, unless ``X`` is made of few distinct rows
    (at least :data:`ROWS_PER_DISTINCT_ROW` rows per distinct row on average) or too few
    to keep them together with rows of every class in each training part: its copies
    are then replicates that fresh rows repeat, and the folds are the plain stratified
    ones. A warning says which was chosen when copies are half of the rows or more, or
    the stratified folds were chosen. A splitter gets ``groups``; when groups (or
    copies) still end up in several test parts, one warning says how many.

    Group ids are read as labels (any hashable kind: strings, floats, huge or negative
    integers), turned into codes once, so that the splitter and the count of spread
    groups see ``k`` groups whatever their ids.

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
        when a fold's training part holds no row of a class, a fold's part no positive
        weight, or a group id is missing.

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
    seed = rng.randint(2**31 - 1) if integral and rng is not None else None
    groups = None if groups is None else group_codes(groups)
    together = groups if groups is not None else duplicate_groups(X)
    if integral and groups is None and together is not None:
        folds = _copy_folds(int(cv), X, y, classes, together, seed)
        together = None  # the rule has spoken: copies in several folds are its choice
    else:
        folds = _split(cv, X, y, groups, seed)
    check_partition(folds, y.size, cv)
    _check_fold_classes(folds, y, classes, cv)
    _check_fold_weights(folds, sample_weight)
    if together is not None:
        _warn_about_spread_groups(cv, folds, together, groups is not None)
    return folds


def _warn_about_spread_groups(cv, folds, together: np.ndarray, given: bool) -> None:
    n_split, n_rows = spread_groups(together, folds)
    if n_split:
        what = "groups" if given else "groups of exact duplicate rows"
        advice = (
            "Use cv=int, GroupKFold or StratifiedGroupKFold, which keep each group in one fold."
            if given
            else "Pass groups (one id per row; equal for rows that must stay together) "
            "with cv=int, GroupKFold or StratifiedGroupKFold."
        )
        warnings.warn(
            f"{n_split} {what} ({n_rows} rows) have rows in two or more test parts of "
            f"{_named(cv)}, so their copies train the fold models that predict them out of "
            "fold: oof_proba_, the member weights, early stopping and the map's choice "
            f"see in-sample predictions. {advice}",
            UserWarning,
            stacklevel=4,
        )


def inner_split(y: np.ndarray, random_state, n_splits: int = 5) -> list[tuple]:
    """A stratified, shuffled split of rows into ``n_splits`` parts, for maps fitted on all
    parts but one (fewer parts when a class has fewer rows; not stratified when no class
    has two rows; none for a single row).

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
    if counts.max() < 2:  # a time-out's few held-out rows, one of each class
        splitter = KFold(min(n_splits, y.size), shuffle=True, random_state=random_state)
        return list(splitter.split(y))
    n_splits = int(max(2, min(n_splits, counts[counts > 0].min())))
    with warnings.catch_warnings():  # a class of fewer rows than parts: scikit-learn warns
        warnings.simplefilter("ignore", UserWarning)
        splitter = StratifiedKFold(n_splits, shuffle=True, random_state=random_state)
        return list(splitter.split(np.zeros(y.size), y))
