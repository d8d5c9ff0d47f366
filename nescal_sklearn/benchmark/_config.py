"""The benchmark configuration: one JSON file, validated up front.

Every error is a :class:`ConfigError` whose message starts with the path of the bad
key in the file, then says what was expected and what was found, e.g.
``methods[2].params.n_neighbors: expected an int >= 1 (NeSCalLoss), got -3``.
Parameter values of the methods and calibrators are checked by the library's own
validation (the loss objects, the estimators' parameter constraints).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._entries import _budget, _calibrator, _dataset, _method, _seeds, _splits
from ._registry import METRICS
from ._specs import (
    Budget,
    CalibratorSpec,
    ConfigError,
    DatasetSpec,
    MethodSpec,
    OpenMLSettings,
    ReportSettings,
    Splits,
    _fail,
    _int,
    _is_real,
    _mapping,
    _show,
)

__all__ = [
    "BenchmarkConfig",
    "Budget",
    "CalibratorSpec",
    "ConfigError",
    "DatasetSpec",
    "MethodSpec",
    "OpenMLSettings",
    "ReportSettings",
    "Splits",
    "load_config",
    "validate_config",
]


# ----------------------------------------------------------------------- config
@dataclass(frozen=True)
class BenchmarkConfig:
    """A validated benchmark configuration (see :func:`validate_config`)."""

    name: str
    output: str
    datasets: tuple[DatasetSpec, ...]
    methods: tuple[MethodSpec, ...]
    calibrators: tuple[CalibratorSpec, ...] = ()
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

    def method(self, name: str) -> MethodSpec:
        return next(m for m in self.methods if m.name == name)

    def with_datasets(self, datasets: tuple[DatasetSpec, ...]) -> BenchmarkConfig:
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
    "calibrators", "search_seeds", "confirm_seeds", "splits", "budget", "metrics",
    "selection", "report",
)  # fmt: skip


def _optional_str(path: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise _fail(path, "a non-empty string", value)
    return value


def validate_config(
    data: Any, *, default_name: str = "benchmark", check_files: bool = True
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
        Check local dataset names against the manifest in ``data_dir`` (the report
        skips this: it only reads records).

    Raises
    ------
    ConfigError
        With the path of the first bad key.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import validate_config
    >>> config = validate_config({
    ...     "datasets": [{"sklearn": "iris"}],
    ...     "methods": [{"loss": "ce"}],
    ...     "confirm_seeds": [0, 1],
    ... })
    >>> config.output, [m.name for m in config.methods]
    ('results/benchmark', ['ce'])
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

    resolved_data_dir = _data_dir(data_dir) if check_files else None

    if "datasets" not in data:
        raise ConfigError("datasets", "required key missing; expected a non-empty list of datasets")
    if not isinstance(data["datasets"], list) or not data["datasets"]:
        raise _fail("datasets", "a non-empty list of datasets", data["datasets"])
    datasets = []
    for i, entry in enumerate(data["datasets"]):
        spec = _dataset(f"datasets[{i}]", entry, resolved_data_dir)
        if spec in datasets:
            raise ConfigError(f"datasets[{i}]", f"duplicate dataset {_show(spec.to_json())}")
        datasets.append(spec)

    if "methods" not in data:
        raise ConfigError("methods", "required key missing; expected a non-empty list of methods")
    if not isinstance(data["methods"], list) or not data["methods"]:
        raise _fail("methods", "a non-empty list of methods", data["methods"])
    methods: list[MethodSpec] = []
    for i, entry in enumerate(data["methods"]):
        method = _method(f"methods[{i}]", entry)
        for j, other in enumerate(methods):
            if other.name == method.name:
                raise ConfigError(
                    f"methods[{i}].name",
                    f"duplicate method name {method.name!r} (also methods[{j}]); give each a 'name'",
                )
        methods.append(method)

    calibrator_entries = data.get("calibrators", [])
    if not isinstance(calibrator_entries, list):
        raise _fail("calibrators", "a list of calibrator names or objects", calibrator_entries)
    calibrators: list[CalibratorSpec] = []
    for i, entry in enumerate(calibrator_entries):
        spec = _calibrator(f"calibrators[{i}]", entry)
        if any(c.name == spec.name for c in calibrators) or spec.name == "raw":
            raise ConfigError(f"calibrators[{i}]", f"duplicate calibrator {spec.name!r}")
        calibrators.append(spec)

    if "confirm_seeds" not in data:
        raise ConfigError(
            "confirm_seeds", "required key missing; expected a non-empty list of ints >= 0"
        )
    confirm = _seeds("confirm_seeds", data["confirm_seeds"], required=True)
    search = _seeds("search_seeds", data.get("search_seeds", []), required=False)
    gridded = [(i, m) for i, m in enumerate(methods) if len(m.points()) > 1]
    if gridded and not search:
        i, m = gridded[0]
        raise ConfigError(
            "search_seeds",
            f"expected a non-empty list of ints >= 0 because methods[{i}].grid has "
            f"{len(m.points())} points, got {_show(data.get('search_seeds', []))}",
        )

    metrics = data.get("metrics", list(BenchmarkConfig.metrics))
    if not isinstance(metrics, list) or not metrics:
        raise _fail("metrics", f"a non-empty list of metric names from {list(METRICS)}", metrics)
    for i, metric in enumerate(metrics):
        if metric not in METRICS:
            raise _fail(f"metrics[{i}]", f"one of {list(METRICS)}", metric)
        if metric in metrics[:i]:
            raise ConfigError(f"metrics[{i}]", f"duplicate metric {metric!r}")

    selection = data.get("selection", "raw")
    allowed = ["raw", *(c.name for c in calibrators)]
    if selection not in allowed:
        raise _fail("selection", f"one of {allowed} (raw, or a configured calibrator)", selection)

    report_entry = _mapping(
        "report", data.get("report", {}), ("baseline", "reference", "tie_tolerance")
    )
    names = [m.name for m in methods]
    for key in ("baseline", "reference"):
        if report_entry.get(key) is not None and report_entry[key] not in names:
            raise _fail(f"report.{key}", f"a method name, one of {names}", report_entry[key])
    tolerance = report_entry.get("tie_tolerance", 0.01)
    if not _is_real(tolerance) or tolerance < 0:
        raise _fail("report.tie_tolerance", "a number >= 0", tolerance)
    baseline = report_entry.get("baseline") or _first(methods, lambda m: m.loss == "ce")
    reference = report_entry.get("reference") or _first(
        methods, lambda m: m.loss == "nescal" and not m.is_random_graph_control
    )
    report = ReportSettings(baseline, reference, float(tolerance))

    openml_entry = _mapping(
        "openml", data.get("openml") or {}, ("cache_dir", "server", "n_retries")
    )
    n_retries = openml_entry.get("n_retries")
    if n_retries is not None:
        _int("openml.n_retries", n_retries, 1)
    openml = OpenMLSettings(
        cache_dir=_optional_str("openml.cache_dir", openml_entry.get("cache_dir")),
        server=_optional_str("openml.server", openml_entry.get("server")),
        n_retries=n_retries,
    )

    return BenchmarkConfig(
        name=name,
        description=data.get("description", ""),
        output=_optional_str("output", data.get("output")) or os.path.join("results", name),
        data_dir=data_dir,
        openml=openml,
        datasets=tuple(datasets),
        methods=tuple(methods),
        calibrators=tuple(calibrators),
        search_seeds=search,
        confirm_seeds=confirm,
        splits=_splits("splits", data.get("splits", {})),
        budget=_budget("budget", data.get("budget", {})),
        metrics=tuple(metrics),
        selection=selection,
        report=report,
    )


def _first(methods, predicate) -> str | None:
    return next((m.name for m in methods if predicate(m)), None)


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
