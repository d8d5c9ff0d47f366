"""Datasets of a benchmark run (local, scikit-learn, OpenML) and the split of each seed."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils import _safe_indexing

from ..estimator import NeSCalClassifier, make_tabular_pipeline
from ._config import DatasetSpec, OpenMLSettings, Splits
from ._datasets import _data_dir, load_local_dataset
from ._protocol import Split, stratified_split

__all__ = [
    "BenchmarkData",
    "describe_dataset",
    "load_benchmark_data",
    "make_imbalanced",
    "make_split",
]

#: Seed of the stratified subsample taken when a dataset has more than ``max_rows`` rows.
SUBSAMPLE_SEED = 0


@dataclass(frozen=True)
class BenchmarkData:
    """A dataset ready for splitting: raw features, labels and, for OpenML, the task."""

    name: str
    X: pd.DataFrame | np.ndarray
    y: np.ndarray
    task: object | None = None  # OpenMLTaskData

    @property
    def n_classes(self) -> int:
        return len(np.unique(self.y))


#: Rows of each class a capped dataset keeps at least (when it has them): a stratified
#: train/validation/test split needs 3.
MIN_ROWS_PER_CLASS = 3


def top_up_rare_classes(kept: np.ndarray, dropped: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Add rows from ``dropped`` so that every class has at least ``MIN_ROWS_PER_CLASS``
    rows in ``kept`` (or all its rows); ``kept`` is returned unchanged when none is short."""
    extra = []
    for label in np.unique(y):
        missing = min(MIN_ROWS_PER_CLASS, int(np.sum(y == label))) - int(np.sum(y[kept] == label))
        if missing > 0:
            extra.append(dropped[y[dropped] == label][:missing])
    return np.concatenate([kept, *extra]) if extra else kept


def _subsample(X, y, max_rows: int | None, seed: int = SUBSAMPLE_SEED):
    """Stratified subsample of ``max_rows`` rows, topped up so that every class keeps at
    least ``MIN_ROWS_PER_CLASS`` rows (a very rare class can otherwise keep 0 or 1)."""
    if max_rows is None or len(y) <= max_rows:
        return X, y
    index = np.arange(len(y))
    dropped, kept = train_test_split(index, test_size=max_rows, stratify=y, random_state=seed)
    kept = top_up_rare_classes(kept, dropped, y)
    return _safe_indexing(X, kept), y[kept]


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
    >>> from nescal_sklearn.benchmark import make_imbalanced
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


@functools.lru_cache(maxsize=4)
def load_benchmark_data(
    spec: DatasetSpec, data_dir: str | None, openml: OpenMLSettings, max_rows: int | None
) -> BenchmarkData:
    """Load one dataset (cached per process, so a worker reads each file once).

    ``max_rows`` caps a local or scikit-learn dataset by a stratified subsample
    (seed :data:`SUBSAMPLE_SEED`); for an OpenML task it caps the training part of
    each fold instead (see :func:`make_split`), so the task's test folds stay whole.
    """
    if spec.kind == "openml_task":
        from ._openml import load_openml_task

        task = load_openml_task(int(spec.ref), openml)
        return BenchmarkData(spec.name, task.X, np.asarray(task.y), task)
    if spec.kind == "sklearn":
        import sklearn.datasets

        X, y = getattr(sklearn.datasets, f"load_{spec.ref}")(return_X_y=True)
    elif spec.kind == "local":
        dataset = load_local_dataset(str(spec.ref), data_dir)
        X, y = dataset.X, dataset.y
    else:
        raise ValueError(f"OpenML suite {spec.ref!r} must be expanded into tasks before loading.")
    y = np.asarray(y)
    if spec.imbalance is not None:
        kept = make_imbalanced(y, spec.imbalance)
        X, y = _safe_indexing(X, kept), y[kept]
    X, y = _subsample(X, y, max_rows)
    if isinstance(X, pd.DataFrame):
        X = X.reset_index(drop=True)
    return BenchmarkData(spec.name, X, np.asarray(y))


def _preprocessed(X, y, train, val, test, classes) -> Split:
    """Fit the tabular preprocessing (as :func:`stratified_split` does) on ``train`` rows."""
    preprocess = make_tabular_pipeline(NeSCalClassifier())[:-1]
    if not hasattr(X, "columns"):
        preprocess = StandardScaler()

    def rows(index):
        return X.iloc[index] if hasattr(X, "iloc") else X[index]

    X_train = np.asarray(preprocess.fit_transform(rows(train)), dtype=np.float32)
    return Split(
        X_train=X_train,
        y_train=y[train],
        X_val=np.asarray(preprocess.transform(rows(val)), dtype=np.float32),
        y_val=y[val],
        X_test=np.asarray(preprocess.transform(rows(test)), dtype=np.float32),
        y_test=y[test],
        classes=classes,
    )


def make_split(
    data: BenchmarkData, seed: int, splits: Splits, max_rows: int | None
) -> tuple[Split, str]:
    """The preprocessed train / validation / test split of ``seed``, and a description.

    A local or scikit-learn dataset gets :func:`stratified_split` with the
    configured fractions. An OpenML task uses its own fold (see
    :meth:`OpenMLTaskData.fold_of_seed`): the test part is the task's, the task's
    training part is split (stratified, seeded) into training and validation with
    ``splits.task_validation``, after an optional stratified cap at ``max_rows``.
    """
    if data.task is None:
        fractions = (splits.train, splits.validation, splits.test)
        return stratified_split(data.X, data.y, seed=seed, fractions=fractions), "stratified"
    repeat, fold = data.task.fold_of_seed(seed)
    train_all, test = data.task.folds[(repeat, fold)]
    y = data.y
    if max_rows is not None and len(train_all) > max_rows:
        train_all, _ = train_test_split(
            train_all, train_size=max_rows, stratify=y[train_all], random_state=SUBSAMPLE_SEED
        )
    train, val = train_test_split(
        train_all, test_size=splits.task_validation, stratify=y[train_all], random_state=seed
    )
    split = _preprocessed(data.X, y, np.sort(train), np.sort(val), np.asarray(test), np.unique(y))
    return split, f"openml task {data.task.task_id} repeat {repeat} fold {fold}"


def describe_dataset(
    spec: DatasetSpec, data_dir: str | None, openml: OpenMLSettings, max_rows: int | None
) -> dict:
    """Rows, features and classes of a dataset, for the dry-run plan.

    Local datasets are described from the manifest without reading the parquet file.
    """
    if spec.kind == "local" and spec.imbalance is None:
        manifest = json.loads((Path(_data_dir(data_dir)) / "manifest.json").read_text())
        entry = next(item for item in manifest if item["name"] == spec.ref)
        rows = entry["n_rows"] if max_rows is None else min(entry["n_rows"], max_rows)
        return {"rows": rows, "features": entry["n_features"], "classes": entry["n_classes"]}
    data = load_benchmark_data(spec, data_dir, openml, max_rows)
    rows = len(data.y)
    if data.task is not None and max_rows is not None:
        rows = min(rows, max_rows)
    return {"rows": rows, "features": data.X.shape[1], "classes": data.n_classes}
