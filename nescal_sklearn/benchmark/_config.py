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
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._conditions import Condition
from ._entries import (
    budget_section,
    calibrators_section,
    check_methods_with_budget,
    check_search_seeds,
    conditions_section,
    datasets_section,
    methods_section,
    metrics_section,
    openml_section,
    recipe_section,
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
    ConfigWarning,
    OpenMLSettings,
    ReportSettings,
    Splits,
    _fail,
    _mapping,
    _optional_str,
    _show,
)

__all__ = [
    "BenchmarkConfig",
    "ConfigError",
    "ConfigWarning",
    "check_output_path",
    "load_config",
    "validate_config",
]


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
        """``"raw"`` then each calibrator's stage (its label, else its name): the stages
        every fit is measured at."""
        return ["raw", *(c.stage for c in self.calibrators)]

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
            "recipe": self.budget.recipe,
            "budget": {k: v for k, v in self.budget.to_json().items() if v is not None},
            "metrics": list(self.metrics),
            "selection": self.selection,
            "report": self.report.to_json(),
        }


_TOP_LEVEL = (
    "name", "description", "output", "data_dir", "openml", "datasets", "methods",
    "calibrators", "conditions", "search_seeds", "confirm_seeds", "splits", "recipe",
    "budget", "metrics", "selection", "report",
)  # fmt: skip


def _path_str(path: str, value: Any) -> str | None:
    """An optional, non-empty path string without NUL characters."""
    value = _optional_str(path, value)
    if value is not None and "\0" in value:
        raise _fail(path, "a path without NUL characters", value)
    return value


def check_output_path(output: str, data_dir: str | None = None) -> None:
    """Check that ``output`` can be the results directory of a run.

    It must not contain NUL characters, must be (or be creatable as) a directory that
    this process can write, and must not be the local datasets' folder ``data_dir``.

    Raises
    ------
    ConfigError
        With the path ``output``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from nescal_sklearn.benchmark import check_output_path
    >>> file = pathlib.Path(tempfile.mkdtemp()) / "taken.json"
    >>> _ = file.write_text("{}")
    >>> try:
    ...     check_output_path(str(file / "results"))
    ... except ValueError as exc:
    ...     print(str(exc).split(": ", 1)[0], "...", str(exc).rsplit(": ", 1)[1])
    output ... it is a file, not a directory
    """
    if "\0" in output:
        raise _fail("output", "a path without NUL characters", output)
    target = Path(output)
    if target.exists() and not target.is_dir():
        raise ConfigError("output", f"{output!r} exists and is not a directory")
    existing = target
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing != target and not existing.is_dir():
        raise ConfigError(
            "output",
            f"{output!r} cannot be created: {str(existing)!r} is in its path, and "
            "it is a file, not a directory",
        )
    if existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            "output", f"{output!r} cannot be written: no write permission in {str(existing)!r}"
        )
    from ._datasets import _data_dir

    local = _data_dir(data_dir)
    if target.resolve() == local.resolve():
        raise ConfigError(
            "output",
            f"expected a folder of its own, got the data_dir {str(local)!r} (the local "
            "datasets' folder)",
        )


def _default_output(name: str) -> str:
    output = os.path.join("results", name)
    inside = os.path.normpath(output).split(os.sep)
    if os.path.isabs(name) or "\0" in name or len(inside) < 2 or inside[0] != "results":
        raise ConfigError(
            "name",
            f"expected a name that keeps the default output folder 'results/<name>' inside "
            f"'results/' (or set 'output'), got {_show(name)}",
        )
    return output


def _warn_shared_seeds(methods, search: tuple, confirm: tuple) -> None:
    shared = [seed for seed in confirm if seed in search]
    if shared and any(len(m.points()) > 1 for m in methods):
        warnings.warn(
            f"confirm_seeds: {shared} {'is' if len(shared) == 1 else 'are'} also in "
            "search_seeds; a gridded method's confirm fit on such a seed is its search fit "
            "at the chosen point, which biases the reported result towards that point; keep "
            "confirm_seeds apart from search_seeds",
            ConfigWarning,
            stacklevel=3,
        )


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
        for ``NeSCalClassifier`` methods), each method's estimator at every grid point
        with the budget (e.g. a warm-up that never ends within ``max_epochs``), and
        resolve the report's defaults; warn (:class:`ConfigWarning`) about confirm seeds
        that are also search seeds. False only reads the structure: for a saved run's
        configuration, which the report and ``compare`` read without importing torch;
        such a configuration cannot plan fits.

    Raises
    ------
    ConfigError
        With the path of the first bad key. With ``check_files``, also for an ``output``
        that cannot be the results directory (see :func:`check_output_path`).

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
    ...                      "confirm_seeds": [0], "recipe": "2026-12-04",
    ...                      "budget": {"max_epochs": 0}})
    ... except ConfigError as exc:
    ...     print(exc)
    budget.max_epochs: expected int >= 1, got 0
    """
    _mapping("", data, _TOP_LEVEL)
    name = _optional_str("name", data.get("name")) or default_name
    output = _path_str("output", data.get("output")) or _default_output(name)
    data_dir = _path_str("data_dir", data.get("data_dir"))
    if check_files:
        check_output_path(output, data_dir)
    from ._datasets import _data_dir

    datasets = datasets_section(data, _data_dir(data_dir) if check_files else None)
    methods = methods_section(data, check_params=check_params)
    calibrators = calibrators_section(data, check_params=check_params)
    conditions = conditions_section(data)
    search, confirm = seeds_section(data)
    check_search_seeds(methods, search, data)
    metrics = metrics_section(data, BenchmarkConfig.metrics)
    selection = selection_section(data, calibrators)
    budget = replace(
        budget_section(data.get("budget", {})),
        recipe=recipe_section(data.get("recipe"), methods, check_params=check_params),
    )
    if check_params:
        check_methods_with_budget(methods, budget)
        _warn_shared_seeds(methods, search, confirm)
    report = report_section(data.get("report", {}), methods, budget, check_params=check_params)
    return BenchmarkConfig(
        name=name,
        description=data.get("description", ""),
        output=output,
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
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "", f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        data = json.loads(text, object_pairs_hook=_Pairs)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "", f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    return validate_config(_plain(data, ""), default_name=path.stem)


class _Pairs(dict):
    """A JSON object as parsed, remembering the keys given more than once."""

    def __init__(self, pairs) -> None:
        super().__init__(pairs)
        seen: set[str] = set()
        self.duplicates = [key for key, _ in pairs if key in seen or seen.add(key)]


def _plain(value: Any, path: str) -> Any:
    """The parsed JSON as plain dicts and lists; ConfigError at a duplicate key (JSON
    would keep only its last value, silently)."""
    if isinstance(value, _Pairs):
        for key in value.duplicates:
            raise ConfigError(
                f"{path}.{key}" if path else key,
                "given more than once in the same object; JSON keeps only the last value, "
                "so give it once",
            )
        return {k: _plain(v, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value
