"""Dataset sources of a benchmark: the local suite, scikit-learn's sets, OpenML tasks and suites.

``{"local": name}``, ``{"sklearn": name}``, ``{"openml_task": id}`` and
``{"openml_suite": id}`` in a configuration become :class:`LocalSource`,
:class:`SklearnSource`, :class:`OpenMLTaskSource` and :class:`OpenMLSuiteSource`;
``"imbalance"`` wraps a local or scikit-learn source in :class:`ImbalancedSource`, and
``{"suite": "dev"}`` stands for the local sets of a named suite (:data:`SUITES`), written
once here instead of in every configuration. Each source knows its name (checked to be
a safe file name: it names the report's figures), its JSON form, its identity (part of
every record key), how to load, describe (for the dry run) and split itself.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
from sklearn.model_selection import train_test_split

from ._base import check_name
from ._data import SUBSAMPLE_SEED, cap_rows, make_imbalanced, preprocess_split, take_rows

#: Where the development suite lives, relative to the repository root; the
#: ``NESCAL_DATA_DIR`` environment variable overrides it.
DEFAULT_DATA_DIR = Path("..") / "shared" / "data"

#: The datasets bundled with scikit-learn that ``{"sklearn": name}`` accepts.
SKLEARN_DATASETS = ("iris", "wine", "breast_cancer", "digits")

#: Named suites of local datasets: ``{"suite": name}`` in a configuration's ``datasets``.
# A data table: the suite's names wrapped at 100 columns, not one per line (fmt: skip).
SUITES: dict[str, tuple[str, ...]] = {
    "dev": ("adult", "bank-marketing", "electricity", "shuttle", "letter", "magic-telescope",
            "pendigits", "phoneme", "spambase", "churn", "mnist_784_5k", "fashion-mnist", "kc1",
            "car", "credit-g", "vehicle", "diabetes", "soybean", "wdbc"),
}  # fmt: skip


def data_dir(folder: str | os.PathLike | None) -> Path:
    """``folder``, else ``$NESCAL_DATA_DIR``, else :data:`DEFAULT_DATA_DIR`."""
    if folder is not None:
        return Path(folder)
    return Path(os.environ.get("NESCAL_DATA_DIR", DEFAULT_DATA_DIR))


class LocalDataset(NamedTuple):
    """A dataset of the local suite: features (``X``, a DataFrame with numeric and
    ``category`` columns, missing values as NaN), labels (``y``, column ``target``) and
    its manifest entry (``info``)."""

    name: str
    X: Any
    y: Any
    info: dict


def list_local_datasets(folder: str | os.PathLike | None = None) -> list[dict]:
    """The manifest entries of the local suite (``folder/manifest.json``; None:
    ``$NESCAL_DATA_DIR`` or ``../shared/data``)."""
    path = data_dir(folder) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"No manifest.json in data_dir={str(path.parent)!r} (resolved to "
            f"{str(path.parent.resolve())!r}); pass data_dir or set NESCAL_DATA_DIR."
        )
    return json.loads(path.read_text())


def load_local_dataset(name: str, folder: str | os.PathLike | None = None) -> LocalDataset:
    """Load one dataset of the local suite by its manifest name (e.g. ``"credit-g"``)."""
    import pandas as pd

    entries = {entry["name"]: entry for entry in list_local_datasets(folder)}
    if name not in entries:
        raise ValueError(f"Unknown dataset name={name!r}; the manifest lists {sorted(entries)}.")
    frame = pd.read_parquet(data_dir(folder) / entries[name]["file"])
    y = frame.pop("target")
    if isinstance(y.dtype, pd.CategoricalDtype):
        y = y.astype(str)
    return LocalDataset(name, X=frame, y=y, info=entries[name])


@dataclass(frozen=True)
class DataContext:
    """Where data come from: the local suite's folder, openml settings, the row cap, and
    whether OpenML may download (``offline``: only cached tasks)."""

    data_dir: str | None
    openml: Any  # OpenMLSettings
    max_rows: int | None
    offline: bool = False


@dataclass(frozen=True)
class BenchmarkData:
    """A dataset ready for splitting: raw features, labels and, for OpenML, the task."""

    name: str
    X: Any
    y: np.ndarray
    task: object | None = None  # OpenMLTaskData

    @property
    def n_classes(self) -> int:
        return len(np.unique(self.y))


class DatasetSource:
    """One dataset entry of a configuration (subclasses are frozen dataclasses: hashable,
    so that loads are cached per source)."""

    key: ClassVar[str]
    ref: Any

    def __post_init__(self) -> None:
        check_name(self.name)  # it names the report's figure: never a path

    @property
    def name(self) -> str:
        """Name used in records, tables and file names."""
        return f"{self.key}-{self.ref}"

    def to_json(self) -> dict:
        """The configuration entry (also what identifies the data in a record key)."""
        return {self.key: self.ref}

    def load(self, context: DataContext) -> BenchmarkData:
        """Load the data (capped at ``context.max_rows`` where the source applies a cap)."""
        X, y = self.raw(context)
        X, y = cap_rows(X, np.asarray(y), context.max_rows)
        if hasattr(X, "reset_index"):
            X = X.reset_index(drop=True)
        return BenchmarkData(self.name, X=X, y=np.asarray(y))

    def raw(self, context: DataContext) -> tuple[Any, np.ndarray]:
        """All the rows: features and labels."""
        raise NotImplementedError

    def describe(self, context: DataContext) -> dict:
        """Rows, features and classes, for the dry-run plan."""
        data = load_benchmark_data(self, context)
        rows = min(len(data.y), context.max_rows or len(data.y))
        return {"rows": rows, "features": data.X.shape[1], "classes": data.n_classes}

    def expand(self, context: DataContext) -> tuple[DatasetSource, ...]:
        """The sources this entry stands for (itself, or a suite's tasks)."""
        return (self,)

    def prepare(self, context: DataContext) -> None:
        """Fetch what a fit needs before any fit starts (nothing by default)."""

    def split(self, data: BenchmarkData, seed: int, splits, max_rows: int | None):
        """The preprocessed split of ``seed`` and a description: stratified by default."""
        from ._data import stratified_split

        fractions = (splits.train, splits.validation, splits.test)
        return stratified_split(data.X, data.y, seed=seed, fractions=fractions), "stratified"

    def split_identity(self, splits) -> dict:
        """The split settings this source uses (part of every record key)."""
        return {"train": splits.train, "validation": splits.validation, "test": splits.test}


@dataclass(frozen=True)
class LocalSource(DatasetSource):
    """A parquet file of the local suite, by its ``manifest.json`` name.

    Examples
    --------
    >>> from nescal_bench import LocalSource
    >>> LocalSource("adult").name, LocalSource("adult").to_json()
    ('adult', {'local': 'adult'})
    """

    ref: str
    key: ClassVar[str] = "local"

    @property
    def name(self) -> str:
        return self.ref

    def raw(self, context: DataContext):
        dataset = load_local_dataset(self.ref, context.data_dir)
        return dataset.X, dataset.y

    def describe(self, context: DataContext) -> dict:
        """From the manifest, without reading the parquet file."""
        entry = next(e for e in list_local_datasets(context.data_dir) if e["name"] == self.ref)
        rows = min(entry["n_rows"], context.max_rows or entry["n_rows"])
        return {"rows": rows, "features": entry["n_features"], "classes": entry["n_classes"]}

    def check_files(self, folder: Path) -> str | None:
        """What is wrong with this dataset's files under ``folder`` (None: nothing)."""
        manifest = folder / "manifest.json"
        if not manifest.is_file():
            return f"no manifest.json in data_dir {str(folder)!r} (resolved to {str(folder.resolve())!r}); set data_dir or NESCAL_DATA_DIR"
        entries = {e["name"]: e for e in json.loads(manifest.read_text())}
        if self.ref not in entries:
            return f"expected a dataset of {str(manifest)!r}, one of {list(entries)}, got {json.dumps(self.ref)}"
        file = entries[self.ref].get("file")
        if file is not None and not (folder / file).is_file():
            return f"the entry {self.ref!r} of {str(manifest)!r} names the file {str(folder / file)!r}, which does not exist"
        return None


@dataclass(frozen=True)
class SklearnSource(DatasetSource):
    """A dataset bundled with scikit-learn (``sklearn.datasets.load_<name>``).

    Examples
    --------
    >>> from nescal_bench import SklearnSource
    >>> SklearnSource("iris").name
    'sklearn-iris'
    """

    ref: str
    key: ClassVar[str] = "sklearn"

    def raw(self, context: DataContext):
        import sklearn.datasets

        return getattr(sklearn.datasets, f"load_{self.ref}")(return_X_y=True)


@dataclass(frozen=True)
class ImbalancedSource(DatasetSource):
    """A local or scikit-learn source made long-tailed (see :func:`make_imbalanced`),
    before the row cap.

    Examples
    --------
    >>> from nescal_bench import ImbalancedSource, LocalSource
    >>> source = ImbalancedSource(LocalSource("letter"), 0.05)
    >>> source.name, source.to_json()
    ('letter-imbalance-0.05', {'local': 'letter', 'imbalance': 0.05})
    """

    base: DatasetSource
    ratio: float

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
    >>> from nescal_bench import OpenMLTaskSource
    >>> OpenMLTaskSource(31).name
    'openml-task-31'
    """

    ref: int
    key: ClassVar[str] = "openml_task"

    @property
    def name(self) -> str:
        return f"openml-task-{self.ref}"

    def load(self, context: DataContext) -> BenchmarkData:
        """The whole task (``max_rows`` caps each training fold instead, in :meth:`split`)."""
        from ._openml import load_openml_task

        task = load_openml_task(int(self.ref), context.openml, offline=context.offline)
        return BenchmarkData(self.name, X=task.X, y=np.asarray(task.y), task=task)

    def prepare(self, context: DataContext) -> None:
        """Load the task once (an unavailable task stops the run before any fit)."""
        load_benchmark_data(self, context)

    def split(self, data: BenchmarkData, seed: int, splits, max_rows: int | None):
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
        split = preprocess_split(
            data.X, y, np.sort(train), np.sort(val), np.asarray(test), np.unique(y)
        )
        return split, f"openml task {data.task.task_id} repeat {repeat} fold {fold}"

    def split_identity(self, splits) -> dict:
        return {"task_validation": splits.task_validation}


@dataclass(frozen=True)
class OpenMLSuiteSource(DatasetSource):
    """An OpenML benchmark suite (id or alias), expanded into its tasks when a run starts.

    Examples
    --------
    >>> from nescal_bench import OpenMLSuiteSource
    >>> OpenMLSuiteSource("OpenML-CC18").name
    'openml-suite-OpenML-CC18'
    """

    ref: int | str
    key: ClassVar[str] = "openml_suite"

    @property
    def name(self) -> str:
        return f"openml-suite-{self.ref}"

    def expand(self, context: DataContext) -> tuple[DatasetSource, ...]:
        from ._openml import expand_suite

        tasks = expand_suite(self.ref, context.openml, offline=context.offline)
        return tuple(OpenMLTaskSource(task) for task in tasks)

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
