"""Rows of a benchmark dataset: the row cap, the long-tailed subsample, and the split.

:func:`stratified_split` and :func:`preprocess_split` are the one split and
preprocessing implementation: the tabular preprocessing
(:func:`nescal_sklearn.make_tabular_preprocessor`; standard scaling for plain arrays) is
fitted on the training rows only and applied to the validation and test rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import train_test_split

from nescal_sklearn.preprocessing import ColumnLayout

#: Seed of the stratified subsample taken when a dataset has more than ``max_rows`` rows,
#: and of :func:`make_imbalanced`.
SUBSAMPLE_SEED = 0

#: Rows of each class a capped dataset keeps at least (when it has them): a stratified
#: train/validation/test split needs 3.
MIN_ROWS_PER_CLASS = 3


@dataclass(frozen=True)
class Split:
    """Preprocessed arrays of a train / validation / test split, and the dataset's classes.

    ``layout`` (a :class:`~nescal_sklearn.preprocessing.ColumnLayout`) says which
    preprocessed columns are numeric and which one-hot encode one categorical feature,
    and ``imputed_row`` what a missing value becomes in each column (the preprocessor's
    ``imputed_row_``); None for both: every column numeric, a missing value at 0, the
    training mean of a standardised column. Built by keyword.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: np.ndarray
    layout: ColumnLayout | None = None
    imputed_row: np.ndarray | None = None


def take_rows(X, index: np.ndarray):
    """Rows ``index`` of a DataFrame (by position) or of an array."""
    return X.iloc[index] if hasattr(X, "iloc") else X[index]


def top_up_rare_classes(kept: np.ndarray, dropped: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Add rows from ``dropped`` so that every class has at least ``MIN_ROWS_PER_CLASS``
    rows in ``kept`` (or all its rows); ``kept`` is returned unchanged when none is short."""
    extra = []
    for label in np.unique(y):
        missing = min(MIN_ROWS_PER_CLASS, int(np.sum(y == label))) - int(np.sum(y[kept] == label))
        if missing > 0:
            extra.append(dropped[y[dropped] == label][:missing])
    return np.concatenate([kept, *extra]) if extra else kept


def cap_rows(X, y: np.ndarray, max_rows: int | None, seed: int = SUBSAMPLE_SEED):
    """Stratified subsample of ``max_rows`` rows (seeded), topped up so that every class
    keeps at least ``MIN_ROWS_PER_CLASS`` rows (a very rare class can otherwise keep 0 or 1).

    Parameters
    ----------
    X : DataFrame or ndarray
        Features.
    y : ndarray of shape (n_samples,)
        Labels.
    max_rows : int or None
        The cap; None (or a dataset already small enough) returns ``X, y`` unchanged.
    seed : int, default=SUBSAMPLE_SEED
        Seed of the subsample.

    Returns
    -------
    X, y
        The kept rows.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_bench import cap_rows
    >>> X, y = np.arange(100).reshape(50, 2), np.repeat([0, 1], [48, 2])
    >>> np.bincount(cap_rows(X, y, 10)[1])
    array([10,  2])
    """
    if max_rows is None or len(y) <= max_rows:
        return X, y
    index = np.arange(len(y))
    dropped, kept = train_test_split(index, test_size=max_rows, stratify=y, random_state=seed)
    kept = top_up_rare_classes(kept, dropped, y)
    return take_rows(X, kept), y[kept]


def make_imbalanced(y: np.ndarray, ratio: float, seed: int = SUBSAMPLE_SEED) -> np.ndarray:
    """Row indices of a long-tailed subsample: class sizes decay geometrically to ``ratio``.

    Classes are ranked by size (ties by label); the largest keeps all its ``n_max``
    rows and the class of rank ``r`` (of ``C``) keeps at most
    ``max(MIN_ROWS_PER_CLASS, round(n_max * ratio ** (r / (C - 1))))`` rows, drawn
    uniformly (seeded). A class already smaller keeps all its rows, so the rarest
    class ends up at about ``ratio`` times the largest.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels.
    ratio : float in (0, 1)
        Target size of the rarest class relative to the largest.
    seed : int, default=SUBSAMPLE_SEED
        Seed of the draw.

    Returns
    -------
    ndarray of int
        Sorted indices of the kept rows.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_bench import make_imbalanced
    >>> y = np.repeat([0, 1, 2], 100)
    >>> np.bincount(y[make_imbalanced(y, 0.1)])
    array([100,  32,  10])
    """
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio must be in (0, 1); got {ratio!r}.")
    y = np.asarray(y)
    labels, counts = np.unique(y, return_counts=True)
    order = sorted(range(len(labels)), key=lambda i: (-counts[i], i))
    n_max = counts[order[0]]
    rng = np.random.default_rng(seed)
    kept = []
    for rank, i in enumerate(order):
        exponent = rank / (len(labels) - 1) if len(labels) > 1 else 0.0
        size = max(MIN_ROWS_PER_CLASS, int(round(n_max * ratio**exponent)))
        rows = np.flatnonzero(y == labels[i])
        if size < len(rows):
            rows = rng.choice(rows, size=size, replace=False)
        kept.append(rows)
    return np.sort(np.concatenate(kept))


def preprocess_split(
    X, y, train: np.ndarray, validation: np.ndarray, test: np.ndarray, classes=None
) -> Split:
    """Fit the tabular preprocessing on the ``train`` rows and transform all three parts.

    Parameters
    ----------
    X : DataFrame or array-like
        Raw features: a DataFrame gets :func:`nescal_sklearn.make_tabular_preprocessor`
        (numeric columns imputed and standardised, categorical ones imputed and
        one-hot encoded), a plain array :class:`~sklearn.preprocessing.StandardScaler`.
    y : array-like of shape (n_samples,)
        Labels.
    train, validation, test : ndarray of int
        Row positions of each part, in the order the rows are used.
    classes : array-like or None, default=None
        Classes of the dataset; None takes the unique labels of ``y``.

    Returns
    -------
    Split
        float32 matrices and the labels of each part; for a DataFrame with categorical
        columns, the preprocessor's column layout and imputed row (a frame of numeric
        columns alone, like a plain array, keeps None: a missing value at the training
        mean 0, as the lab's missing-value corruption has always imputed such frames).
    """
    if hasattr(X, "columns"):
        from nescal_sklearn import make_tabular_preprocessor

        preprocess = make_tabular_preprocessor()
    else:
        from sklearn.preprocessing import StandardScaler

        preprocess = StandardScaler()
    y = np.asarray(y)
    fitted = [preprocess.fit_transform(take_rows(X, train))]
    fitted += [preprocess.transform(take_rows(X, rows)) for rows in (validation, test)]
    X_train, X_val, X_test = (np.asarray(part, dtype=np.float32) for part in fitted)
    declared = {}
    categorical = getattr(preprocess, "output_indices_", {}).get("categorical", slice(0, 0))
    if categorical.stop > categorical.start:
        declared = {"layout": preprocess.column_layout_, "imputed_row": preprocess.imputed_row_}
    return Split(
        X_train=X_train,
        y_train=y[train],
        X_val=X_val,
        y_val=y[validation],
        X_test=X_test,
        y_test=y[test],
        classes=np.unique(y) if classes is None else np.asarray(classes),
        **declared,
    )


def stratified_split(X, y, *, seed: int, fractions=(0.6, 0.2, 0.2)) -> Split:
    """Split stratified by class, fit the tabular preprocessing on the training part only.

    Parameters
    ----------
    X : DataFrame or array-like
        Raw features (numeric and categorical columns).
    y : array-like
        Labels.
    seed : int
        Seed of the split.
    fractions : tuple of 3 floats, default=(0.6, 0.2, 0.2)
        Train, validation and test fractions (summing to 1).

    Returns
    -------
    Split

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from nescal_bench import stratified_split
    >>> X, y = load_iris(return_X_y=True, as_frame=True)
    >>> split = stratified_split(X, y, seed=0)
    >>> split.X_train.shape, split.X_val.shape, split.X_test.shape
    ((90, 4), (30, 4), (30, 4))
    """
    train_f, val_f, test_f = fractions
    if not np.isclose(train_f + val_f + test_f, 1.0) or min(fractions) <= 0:
        raise ValueError(f"fractions must be 3 positive numbers summing to 1; got {fractions!r}.")
    y = np.asarray(y)
    rest, test = train_test_split(
        np.arange(len(y)), test_size=test_f, stratify=y, random_state=seed
    )
    train, validation = train_test_split(
        rest, test_size=val_f / (train_f + val_f), stratify=y[rest], random_state=seed
    )
    return preprocess_split(X, y, train, validation, test)
