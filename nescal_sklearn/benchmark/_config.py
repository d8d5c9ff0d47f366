"""The benchmark configuration: one JSON file, validated up front.

Every error is a :class:`ConfigError` whose message starts with the path of the bad
key in the file, then says what was expected and what was found, e.g.
``budget.max_epochs: expected int >= 1, got 0``. Parameter values of the methods and
calibrators are checked by the library's own validation (the loss objects, the
estimators' parameter constraints): the path, then the library's message.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._conditions import Condition
from ._entries import (
    budget_section,
    calibrators_section,
    check_search_seeds,
    conditions_section,
    datasets_section,
    methods_section,
    metrics_section,
    openml_section,
    report_section,
    seeds_section,
    selection_section,
    splits_section,
)
from ._methods import MethodSpec
from ._sources import DataContext, DatasetSource
from ._specs import (
    Budget,
    CalibratorSpec,
    ConfigError,
    OpenMLSettings,
    ReportSettings,
    Splits,
    _mapping,
    _optional_str,
)

__all__ = ["BenchmarkConfig", "ConfigError", "load_config", "validate_config"]


@dataclass(frozen=True)
class BenchmarkConfig:
    """A validated benchmark configuration (see :func:`validate_config`)."""

    name: str
    output: str
    datasets: tuple[DatasetSource, ...]
    methods: tuple[MethodSpec, ...]
    calibrators: tuple[CalibratorSpec, ...] = ()
    conditions: tuple[Condition, ...] = ()
    search_seeds: tuple[int, ...] = ()
    confirm_seeds: tuple[int, ...] = (0,)
    splits: Splits = field(default_factory=Splits)
    budget: Budget = field(default_factory=Budget)
    metrics: tuple[str, ...] = ("nll", "ece", "brier", "accuracy")
    selection: str = "raw"
    report: ReportSettings = field(default_factory=ReportSettings)
    openml: OpenMLSettings = field(default_factory=OpenMLSettings)
    data_dir: str | None = None
    description: str = ""

    @property
    def stages(self) -> list[str]:
        """``"raw"`` then each calibrator's name: the stages every fit is measured at."""
        return ["raw", *(c.name for c in self.calibrators)]

    def data_context(self) -> DataContext:
        """Where the data of this run come from (the local folder made absolute)."""
        from ._datasets import _data_dir

        data_dir = os.path.abspath(_data_dir(self.data_dir))  # workers may run elsewhere
        return DataContext(data_dir, self.openml, self.budget.max_rows)

    def with_datasets(self, datasets: tuple[DatasetSource, ...]) -> BenchmarkConfig:
        """A copy with another dataset list (OpenML suites expanded into their tasks)."""
        return replace(self, datasets=tuple(datasets))

    def to_json(self) -> dict:
        """The normalised configuration; ``validate_config(c.to_json())`` gives ``c`` back."""
        return {
            "name": self.name,
            "description": self.description,
            "output": self.output,
            "data_dir": self.data_dir,
            "openml": self.openml.to_json(),
            "datasets": [d.to_json() for d in self.datasets],
            "methods": [m.to_json() for m in self.methods],
            "calibrators": [c.to_json() for c in self.calibrators],
            "conditions": [c.to_json() for c in self.conditions],
            "search_seeds": list(self.search_seeds),
            "confirm_seeds": list(self.confirm_seeds),
            "splits": self.splits.to_json(),
            "budget": {k: v for k, v in self.budget.to_json().items() if v is not None},
            "metrics": list(self.metrics),
            "selection": self.selection,
            "report": self.report.to_json(),
        }


_TOP_LEVEL = (
    "name", "description", "output", "data_dir", "openml", "datasets", "methods",
    "calibrators", "conditions", "search_seeds", "confirm_seeds", "splits", "budget",
    "metrics", "selection", "report",
)  # fmt: skip


def validate_config(
    data: Any,
    *,
    default_name: str = "benchmark",
    check_files: bool = True,
    check_params: bool = True,
) -> BenchmarkConfig:
    """Validate a configuration object (the parsed JSON) and return a :class:`BenchmarkConfig`.

    Parameters
    ----------
    data : dict
        The parsed JSON.
    default_name : str, default="benchmark"
        ``name`` when the file gives none (the file's stem); also names the default
        output directory ``results/<name>``.
    check_files : bool, default=True
        Check local dataset names against the manifest in ``data_dir``.
    check_params : bool, default=True
        Check method and calibrator parameters with the library (which imports torch
        for ``NeSCalClassifier`` methods) and resolve the report's defaults. False
        only reads the structure: for a saved run's configuration, which the report
        and ``compare`` read without importing torch; such a configuration cannot
        plan fits.

    Raises
    ------
    ConfigError
        With the path of the first bad key.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import validate_config
    >>> config = validate_config({
    ...     "datasets": [{"sklearn": "iris"}],
    ...     "methods": [{"estimator": "sklearn.linear_model.LogisticRegression"}],
    ...     "confirm_seeds": [0, 1],
    ... })
    >>> config.output, [m.name for m in config.methods]
    ('results/benchmark', ['LogisticRegression'])
    >>> try:
    ...     validate_config({"datasets": [{"sklearn": "iris"}], "methods": [{"loss": "ce"}],
    ...                      "confirm_seeds": [0], "budget": {"max_epochs": 0}})
    ... except ConfigError as exc:
    ...     print(exc)
    budget.max_epochs: expected int >= 1, got 0
    """
    _mapping("", data, _TOP_LEVEL)
    name = _optional_str("name", data.get("name")) or default_name
    data_dir = _optional_str("data_dir", data.get("data_dir"))
    from ._datasets import _data_dir

    datasets = datasets_section(data, _data_dir(data_dir) if check_files else None)
    methods = methods_section(data, check_params=check_params)
    calibrators = calibrators_section(data, check_params=check_params)
    conditions = conditions_section(data)
    search, confirm = seeds_section(data)
    check_search_seeds(methods, search, data)
    metrics = metrics_section(data, BenchmarkConfig.metrics)
    selection = selection_section(data, calibrators)
    budget = budget_section(data.get("budget", {}))
    report = report_section(data.get("report", {}), methods, budget, check_params=check_params)
    return BenchmarkConfig(
        name=name,
        description=data.get("description", ""),
        output=_optional_str("output", data.get("output")) or os.path.join("results", name),
        data_dir=data_dir,
        openml=openml_section(data.get("openml")),
        datasets=datasets,
        methods=methods,
        calibrators=calibrators,
        conditions=conditions,
        search_seeds=search,
        confirm_seeds=confirm,
        splits=splits_section(data.get("splits", {})),
        budget=budget,
        metrics=metrics,
        selection=selection,
        report=report,
    )


def load_config(path: str | os.PathLike) -> BenchmarkConfig:
    """Read and validate a JSON configuration file.

    Parameters
    ----------
    path : path
        The JSON file; its stem is the default ``name``.

    Raises
    ------
    ConfigError
        If the file cannot be read, is not JSON, or is invalid (message starts with
        the file name, then the path of the bad key).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "", f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    return validate_config(data, default_name=path.stem)
