"""Dataset sources of a benchmark: one small class per kind of dataset entry.

``{"local": name}``, ``{"sklearn": name}``, ``{"openml_task": id}`` and
``{"openml_suite": id}`` in a configuration become :class:`LocalSource`,
:class:`SklearnSource`, :class:`OpenMLTaskSource` and :class:`OpenMLSuiteSource`;
``"imbalance"`` wraps a local or scikit-learn source in :class:`ImbalancedSource`.
Each source knows its name, its JSON form, its identity (part of every record key),
how to load, describe (for the dry run), split and, for a suite, expand itself.
:data:`SOURCES` is the only place where a configuration key becomes a class.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from ._data import SUBSAMPLE_SEED, Split, cap_rows, make_imbalanced, preprocess_split, take_rows
from ._datasets import _data_dir, load_local_dataset
from ._specs import ConfigError, OpenMLSettings, Splits, _fail, _int, _is_int

__all__ = [
    "SKLEARN_DATASETS",
    "SOURCES",
    "BenchmarkData",
    "DataContext",
    "DatasetSource",
    "ImbalancedSource",
    "LocalSource",
    "OpenMLSuiteSource",
    "OpenMLTaskSource",
    "SklearnSource",
    "load_benchmark_data",
]

#: The datasets bundled with scikit-learn that ``{"sklearn": name}`` accepts.
SKLEARN_DATASETS = ("iris", "wine", "breast_cancer", "digits")


@dataclass(frozen=True)
class DataContext:
    """Where data come from: the local suite's folder, openml settings, the row cap."""

    data_dir: str | None
    openml: OpenMLSettings
    max_rows: int | None


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


class DatasetSource(ABC):
    """One dataset entry of a configuration.

    Subclasses are frozen dataclasses (hashable: loads are cached per source) with a
    class attribute ``key``, the configuration key they are written with.
    """

    key: ClassVar[str]
    #: What the source is, in words (``"scikit-learn"``).
    label: ClassVar[str]
    #: Whether ``"imbalance"`` may wrap this source (see :class:`ImbalancedSource`).
    can_be_imbalanced: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def from_config(cls, path: str, ref: Any, data_dir: Path | None) -> DatasetSource:
        """Validate the value of ``key`` in a dataset entry; ``data_dir`` None skips file checks."""

    @property
    @abstractmethod
    def name(self) -> str:
        """Name used in records, tables and file names."""

    @abstractmethod
    def to_json(self) -> dict:
        """The configuration entry."""

    def identity(self) -> dict:
        """What identifies the data in a record key (the configuration entry)."""
        return self.to_json()

    @abstractmethod
    def load(self, context: DataContext) -> BenchmarkData:
        """Load the data (capped at ``context.max_rows`` where the source applies a cap)."""

    def describe(self, context: DataContext) -> dict:
        """Rows, features and classes, for the dry-run plan."""
        data = load_benchmark_data(self, context)
        return {"rows": len(data.y), "features": data.X.shape[1], "classes": data.n_classes}

    def expand(self, openml: OpenMLSettings) -> tuple[DatasetSource, ...]:
        """The sources this entry stands for (itself, or a suite's tasks)."""
        return (self,)

    def prepare(self, context: DataContext) -> None:
        """Fetch what a fit needs before any fit starts (nothing by default)."""
        return None

    def split(self, data: BenchmarkData, seed: int, splits: Splits, max_rows: int | None):
        """The preprocessed split of ``seed`` and a description: stratified by default."""
        from ._data import stratified_split

        fractions = (splits.train, splits.validation, splits.test)
        return stratified_split(data.X, data.y, seed=seed, fractions=fractions), "stratified"

    def split_identity(self, splits: Splits) -> dict:
        """The split settings this source uses (part of every record key)."""
        return {"train": splits.train, "validation": splits.validation, "test": splits.test}


class TabularSource(DatasetSource):
    """A source whose raw rows are loaded whole, then capped by a stratified subsample."""

    can_be_imbalanced = True

    @abstractmethod
    def raw(self, context: DataContext) -> tuple[Any, np.ndarray]:
        """All the rows: features and labels."""

    def load(self, context: DataContext) -> BenchmarkData:
        X, y = self.raw(context)
        X, y = cap_rows(X, np.asarray(y), context.max_rows)
        if isinstance(X, pd.DataFrame):
            X = X.reset_index(drop=True)
        return BenchmarkData(self.name, X, np.asarray(y))


@dataclass(frozen=True)
class LocalSource(TabularSource):
    """A parquet file of the local suite, by its ``manifest.json`` name.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import LocalSource
    >>> LocalSource("adult").name, LocalSource("adult").to_json()
    ('adult', {'local': 'adult'})
    """

    ref: str
    key: ClassVar[str] = "local"
    label: ClassVar[str] = "local"

    @classmethod
    def from_config(cls, path: str, ref: Any, data_dir: Path | None) -> LocalSource:
        if not isinstance(ref, str):
            raise _fail(path, "a dataset name of the local manifest", ref)
        if data_dir is not None:
            manifest = data_dir / "manifest.json"
            if not manifest.is_file():
                raise ConfigError(
                    path,
                    f"no manifest.json in data_dir {str(data_dir)!r} (resolved to "
                    f"{str(data_dir.resolve())!r}); set data_dir or NESCAL_DATA_DIR",
                )
            entries = json.loads(manifest.read_text())
            names = [item["name"] for item in entries]
            if ref not in names:
                raise _fail(path, f"a dataset of {str(manifest)!r}, one of {names}", ref)
            entry = entries[names.index(ref)]
            if "file" in entry and not (data_dir / entry["file"]).is_file():
                raise ConfigError(
                    path,
                    f"the entry {ref!r} of {str(manifest)!r} names the file "
                    f"{str(data_dir / entry['file'])!r}, which does not exist",
                )
        return cls(ref)

    @property
    def name(self) -> str:
        return self.ref

    def to_json(self) -> dict:
        return {self.key: self.ref}

    def raw(self, context: DataContext):
        dataset = load_local_dataset(self.ref, context.data_dir)
        return dataset.X, dataset.y

    def describe(self, context: DataContext) -> dict:
        """From the manifest, without reading the parquet file."""
        manifest = json.loads((Path(_data_dir(context.data_dir)) / "manifest.json").read_text())
        entry = next(item for item in manifest if item["name"] == self.ref)
        rows = (
            entry["n_rows"] if context.max_rows is None else min(entry["n_rows"], context.max_rows)
        )
        return {"rows": rows, "features": entry["n_features"], "classes": entry["n_classes"]}


@dataclass(frozen=True)
class SklearnSource(TabularSource):
    """A dataset bundled with scikit-learn (``sklearn.datasets.load_<name>``).

    Examples
    --------
    >>> from nescal_sklearn.benchmark import SklearnSource
    >>> SklearnSource("iris").name
    'sklearn-iris'
    """

    ref: str
    key: ClassVar[str] = "sklearn"
    label: ClassVar[str] = "scikit-learn"

    @classmethod
    def from_config(cls, path: str, ref: Any, data_dir: Path | None) -> SklearnSource:
        if ref not in SKLEARN_DATASETS:
            raise _fail(path, f"one of scikit-learn's bundled sets {list(SKLEARN_DATASETS)}", ref)
        return cls(ref)

    @property
    def name(self) -> str:
        return f"sklearn-{self.ref}"

    def to_json(self) -> dict:
        return {self.key: self.ref}

    def raw(self, context: DataContext):
        import sklearn.datasets

        return getattr(sklearn.datasets, f"load_{self.ref}")(return_X_y=True)


@dataclass(frozen=True)
class ImbalancedSource(TabularSource):
    """A local or scikit-learn source made long-tailed (see :func:`make_imbalanced`),
    before the row cap.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import ImbalancedSource, LocalSource
    >>> source = ImbalancedSource(LocalSource("letter"), 0.05)
    >>> source.name, source.to_json()
    ('letter-imbalance-0.05', {'local': 'letter', 'imbalance': 0.05})
    """

    base: TabularSource
    ratio: float
    can_be_imbalanced: ClassVar[bool] = False

    @classmethod
    def from_config(cls, path: str, ref: Any, data_dir: Path | None) -> ImbalancedSource:
        """Not a configuration key of its own: ``"imbalance"`` wraps the entry's source."""
        raise TypeError("an ImbalancedSource is built from its base source and a ratio")

    @property
    def key(self) -> str:  # type: ignore[override]
        return self.base.key

    @property
    def name(self) -> str:
        return f"{self.base.name}-imbalance-{self.ratio:g}"

    def to_json(self) -> dict:
        return {**self.base.to_json(), "imbalance": self.ratio}

    def raw(self, context: DataContext):
        X, y = self.base.raw(context)
        y = np.asarray(y)
        kept = make_imbalanced(y, self.ratio)
        return take_rows(X, kept), y[kept]


@dataclass(frozen=True)
class OpenMLTaskSource(DatasetSource):
    """An OpenML supervised-classification task, split by its own folds.

    Seed ``s`` uses fold ``s % n_folds`` of repeat ``s // n_folds`` (repeats cycle):
    the test part is the task's, and ``splits.task_validation`` of the task's
    training part (after the stratified ``max_rows`` cap) becomes the validation part.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import OpenMLTaskSource
    >>> OpenMLTaskSource(31).name
    'openml-task-31'
    """

    ref: int
    key: ClassVar[str] = "openml_task"
    label: ClassVar[str] = "OpenML task"

    @classmethod
    def from_config(cls, path: str, ref: Any, data_dir: Path | None) -> OpenMLTaskSource:
        return cls(_int(path, ref, 1))

    @property
    def name(self) -> str:
        return f"openml-task-{self.ref}"

    def to_json(self) -> dict:
        return {self.key: self.ref}

    def load(self, context: DataContext) -> BenchmarkData:
        """The whole task (``max_rows`` caps each training fold instead, in :meth:`split`)."""
        from ._openml import load_openml_task

        task = load_openml_task(int(self.ref), context.openml)
        return BenchmarkData(self.name, task.X, np.asarray(task.y), task)

    def describe(self, context: DataContext) -> dict:
        data = load_benchmark_data(self, context)
        rows = len(data.y) if context.max_rows is None else min(len(data.y), context.max_rows)
        return {"rows": rows, "features": data.X.shape[1], "classes": data.n_classes}

    def prepare(self, context: DataContext) -> None:
        """Load the task once (an unavailable task stops the run before any fit)."""
        load_benchmark_data(self, context)

    def split(self, data: BenchmarkData, seed: int, splits: Splits, max_rows: int | None):
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
        split: Split = preprocess_split(
            data.X, y, np.sort(train), np.sort(val), np.asarray(test), np.unique(y)
        )
        return split, f"openml task {data.task.task_id} repeat {repeat} fold {fold}"

    def split_identity(self, splits: Splits) -> dict:
        return {"task_validation": splits.task_validation}


@dataclass(frozen=True)
class OpenMLSuiteSource(DatasetSource):
    """An OpenML benchmark suite (id or alias), expanded into its tasks when a run starts.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import OpenMLSuiteSource
    >>> OpenMLSuiteSource("OpenML-CC18").name
    'openml-suite-OpenML-CC18'
    """

    ref: int | str
    key: ClassVar[str] = "openml_suite"
    label: ClassVar[str] = "OpenML suite"

    @classmethod
    def from_config(cls, path: str, ref: Any, data_dir: Path | None) -> OpenMLSuiteSource:
        if not (_is_int(ref) and ref >= 1) and not (isinstance(ref, str) and ref):
            raise _fail(path, "an OpenML suite id (int >= 1) or alias (str)", ref)
        return cls(ref)

    @property
    def name(self) -> str:
        return f"openml-suite-{self.ref}"

    def to_json(self) -> dict:
        return {self.key: self.ref}

    def expand(self, openml: OpenMLSettings) -> tuple[DatasetSource, ...]:
        from ._openml import expand_suite

        return tuple(OpenMLTaskSource(task) for task in expand_suite(self.ref, openml))

    def load(self, context: DataContext) -> BenchmarkData:
        raise ValueError(f"OpenML suite {self.ref!r} must be expanded into tasks before loading.")


#: Configuration key of a dataset entry -> its source class.
SOURCES: dict[str, type[DatasetSource]] = {
    cls.key: cls for cls in (LocalSource, SklearnSource, OpenMLTaskSource, OpenMLSuiteSource)
}


@functools.lru_cache(maxsize=4)
def load_benchmark_data(source: DatasetSource, context: DataContext) -> BenchmarkData:
    """``source.load(context)``, cached per process so that a worker reads each file once.

    The cached data are shared: callers must not modify them.
    """
    return source.load(context)
