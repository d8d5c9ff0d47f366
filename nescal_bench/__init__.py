"""The nescal_sklearn lab: config-driven benchmarks, their records, reports and comparisons.

Installed with the ``bench`` extra (``pip install -e ".[bench]"``); the library
``nescal_sklearn`` never imports it. ``nescal-bench`` (:mod:`nescal_bench.cli`) is its
command line. A configuration is code: it names import paths and settings that ``run``
imports and uses, so trust a configuration (and an OpenML cache it names) like code.

Public names are loaded on first use (PEP 562), so that a loky worker's first import
(the watchdog) and ``report``/``compare`` import neither torch nor the fitting code.
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from typing import Any

# Without the bench extra the package cannot be imported: its error (named for this package)
# is the extra's install command, which the nescal-bench command prints instead of a traceback.
if _missing := [name for name in ("pandas", "pydantic", "filelock") if find_spec(name) is None]:
    raise ModuleNotFoundError(
        f"nescal_bench needs the lab's extra ({', '.join(_missing)} missing): pip install -e '.[bench]'",
        name=__name__,
    )

#: The module that defines each public name. A data table: names wrapped at 100 columns, not
#: one per line (fmt: skip).
_MODULES: dict[str, tuple[str, ...]] = {
    "_adapters": ("LightGBMClassifier", "ProbmetricsCalibrator"),
    "_autogluon": ("AutoGluonClassifier",),
    "_base": ("BenchmarkWarning", "ConfigError", "ConfigWarning", "RunError"),
    "_compare": ("CompareError", "calibrators_markdown", "compare_markdown", "plot_comparison"),
    "_conditions": ("CLEAN", "Condition", "GaussianNoise", "MissingEntries", "OODCondition",
                    "ScaledRows", "ShiftCondition", "ShuffledColumns"),
    "_config": ("BenchmarkConfig", "check_output_path", "load_config", "validate_config"),
    "_data": ("Split", "cap_rows", "make_imbalanced", "stratified_split"),
    "_figures": ("pool_reliability",),
    "_methods": ("ClassifierMethod", "LossMethod", "MethodKind", "MethodSpec"),
    "_openml": ("OpenMLUnavailableError",),
    "_records": ("CorruptRecordWarning", "InvalidRecordError", "RecordStore", "check_record"),
    "_report": ("write_report",),
    "_results": ("RunResults", "load_results", "results_frame"),
    "_runner": ("RunSummary", "dry_run", "plan_run", "run_benchmark"),
    "_sources": ("DEFAULT_DATA_DIR", "SUITES", "DatasetSource", "ImbalancedSource", "LocalDataset",
                 "LocalSource", "OpenMLSuiteSource", "OpenMLTaskSource", "SklearnSource",
                 "list_local_datasets", "load_local_dataset"),
    "_stats": ("PairedComparison", "average_ranks", "paired_comparison", "relative_change",
               "unit_table", "wilcoxon_p", "wins_ties_losses"),
}  # fmt: skip
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
