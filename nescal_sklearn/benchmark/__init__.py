"""Benchmarking: datasets, the evaluation protocol, the config-driven runner, report and comparisons."""

from ._compare import CompareError, compare_markdown, plot_comparison, pool_results
from ._conditions import (
    Condition,
    GaussianNoise,
    MissingEntries,
    OODCondition,
    ScaledRows,
    ShiftCondition,
    ShuffledColumns,
)
from ._config import BenchmarkConfig, ConfigError, load_config, validate_config
from ._data import Split, cap_rows, make_imbalanced, stratified_split
from ._datasets import DEFAULT_DATA_DIR, LocalDataset, list_local_datasets, load_local_dataset
from ._methods import ClassifierMethod, LossMethod, MethodKind, MethodSpec
from ._openml import OpenMLUnavailableError
from ._records import RecordStore
from ._report import write_report
from ._results import RunResults, load_results
from ._runner import RunError, RunSummary, dry_run, plan_run, run_benchmark
from ._sources import (
    DatasetSource,
    ImbalancedSource,
    LocalSource,
    OpenMLSuiteSource,
    OpenMLTaskSource,
    SklearnSource,
)

__all__ = [
    "BenchmarkConfig",
    "ClassifierMethod",
    "CompareError",
    "Condition",
    "ConfigError",
    "DEFAULT_DATA_DIR",
    "DatasetSource",
    "GaussianNoise",
    "ImbalancedSource",
    "LocalDataset",
    "LocalSource",
    "LossMethod",
    "MethodKind",
    "MethodSpec",
    "MissingEntries",
    "OODCondition",
    "OpenMLSuiteSource",
    "OpenMLTaskSource",
    "OpenMLUnavailableError",
    "RecordStore",
    "RunError",
    "RunResults",
    "RunSummary",
    "ScaledRows",
    "ShiftCondition",
    "ShuffledColumns",
    "SklearnSource",
    "Split",
    "cap_rows",
    "compare_markdown",
    "dry_run",
    "list_local_datasets",
    "load_config",
    "load_local_dataset",
    "load_results",
    "make_imbalanced",
    "plan_run",
    "plot_comparison",
    "pool_results",
    "run_benchmark",
    "stratified_split",
    "validate_config",
    "write_report",
]
