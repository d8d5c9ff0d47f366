"""Benchmarking: datasets, the evaluation protocol, the config-driven runner and its report."""

from ._config import (
    BenchmarkConfig,
    ConfigError,
    DatasetSpec,
    MethodSpec,
    load_config,
    validate_config,
)
from ._data import make_imbalanced
from ._datasets import DEFAULT_DATA_DIR, LocalDataset, list_local_datasets, load_local_dataset
from ._openml import OpenMLUnavailableError
from ._protocol import FitResult, Split, evaluate_proba, fit_and_evaluate, stratified_split
from ._records import RecordStore
from ._report import write_report
from ._runner import RunError, RunSummary, dry_run, plan_run, run_benchmark

__all__ = [
    "BenchmarkConfig",
    "ConfigError",
    "DEFAULT_DATA_DIR",
    "DatasetSpec",
    "MethodSpec",
    "OpenMLUnavailableError",
    "RecordStore",
    "RunError",
    "RunSummary",
    "dry_run",
    "load_config",
    "plan_run",
    "run_benchmark",
    "validate_config",
    "write_report",
    "FitResult",
    "LocalDataset",
    "Split",
    "evaluate_proba",
    "fit_and_evaluate",
    "list_local_datasets",
    "load_local_dataset",
    "make_imbalanced",
    "stratified_split",
]
