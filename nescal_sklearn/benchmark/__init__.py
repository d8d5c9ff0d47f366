"""Benchmarking: datasets, the evaluation protocol, the config-driven runner, report and comparisons.

Public names are loaded on first use (PEP 562), so that importing a small part (the
worker watchdog that a loky worker starts first, the record schema) does not import
pandas, scikit-learn or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._compat.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "LightGBMClassifier": "_anchors",
    "TabMModule": "_anchors",
    "calibrators_markdown": "_calibrator_compare",
    "compare_markdown": "_compare",
    "CompareError": "_compare",
    "plot_comparison": "_compare",
    "pool_results": "_compare",
    "Condition": "_conditions",
    "GaussianNoise": "_conditions",
    "MissingEntries": "_conditions",
    "OODCondition": "_conditions",
    "ScaledRows": "_conditions",
    "ShiftCondition": "_conditions",
    "ShuffledColumns": "_conditions",
    "BenchmarkConfig": "_config",
    "check_output_path": "_config",
    "ConfigError": "_config",
    "load_config": "_config",
    "validate_config": "_config",
    "cap_rows": "_data",
    "make_imbalanced": "_data",
    "Split": "_data",
    "stratified_split": "_data",
    "DEFAULT_DATA_DIR": "_datasets",
    "list_local_datasets": "_datasets",
    "load_local_dataset": "_datasets",
    "LocalDataset": "_datasets",
    "OutputLockedError": "_lock",
    "ClassifierMethod": "_methods",
    "LossMethod": "_methods",
    "MethodKind": "_methods",
    "MethodSpec": "_methods",
    "OpenMLUnavailableError": "_openml",
    "pool_reliability": "_figures",
    "check_record": "_records",
    "CorruptRecordWarning": "_records",
    "InvalidRecordError": "_records",
    "RecordStore": "_records",
    "write_report": "_report",
    "load_results": "_results",
    "RunResults": "_results",
    "dry_run": "_runner",
    "plan_run": "_runner",
    "run_benchmark": "_runner",
    "RunSummary": "_runner",
    "DatasetSource": "_sources",
    "ImbalancedSource": "_sources",
    "LocalSource": "_sources",
    "OpenMLSuiteSource": "_sources",
    "OpenMLTaskSource": "_sources",
    "SklearnSource": "_sources",
    "BenchmarkWarning": "_specs",
    "ConfigWarning": "_specs",
    "RunError": "_specs",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from ._anchors import LightGBMClassifier, TabMModule  # noqa: F401
    from ._calibrator_compare import calibrators_markdown  # noqa: F401
    from ._compare import (  # noqa: F401
        CompareError,
        compare_markdown,
        plot_comparison,
        pool_results,
    )
    from ._conditions import (  # noqa: F401
        Condition,
        GaussianNoise,
        MissingEntries,
        OODCondition,
        ScaledRows,
        ShiftCondition,
        ShuffledColumns,
    )
    from ._config import (  # noqa: F401
        BenchmarkConfig,
        ConfigError,
        check_output_path,
        load_config,
        validate_config,
    )
    from ._data import (  # noqa: F401
        Split,
        cap_rows,
        make_imbalanced,
        stratified_split,
    )
    from ._datasets import (  # noqa: F401
        DEFAULT_DATA_DIR,
        LocalDataset,
        list_local_datasets,
        load_local_dataset,
    )
    from ._figures import (  # noqa: F401
        pool_reliability,
    )
    from ._lock import (  # noqa: F401
        OutputLockedError,
    )
    from ._methods import (  # noqa: F401
        ClassifierMethod,
        LossMethod,
        MethodKind,
        MethodSpec,
    )
    from ._openml import (  # noqa: F401
        OpenMLUnavailableError,
    )
    from ._records import (  # noqa: F401
        CorruptRecordWarning,
        InvalidRecordError,
        RecordStore,
        check_record,
    )
    from ._report import (  # noqa: F401
        write_report,
    )
    from ._results import (  # noqa: F401
        RunResults,
        load_results,
    )
    from ._runner import (  # noqa: F401
        RunSummary,
        dry_run,
        plan_run,
        run_benchmark,
    )
    from ._sources import (  # noqa: F401
        DatasetSource,
        ImbalancedSource,
        LocalSource,
        OpenMLSuiteSource,
        OpenMLTaskSource,
        SklearnSource,
    )
    from ._specs import (  # noqa: F401
        BenchmarkWarning,
        ConfigWarning,
        RunError,
    )
