"""The benchmark configuration: one JSON file, validated up front.

The structure (keys, types, ranges) is a set of pydantic models; every error is a
:class:`ConfigError` whose message starts with the path of the bad key, then says what
was expected and what was found, e.g. ``budget.max_epochs: input should be greater than
or equal to 1, got 0``. What the structure cannot say (a method's parameters, checked by
the library's own validation at every grid point; names given twice; the recipe a
neural method needs) is checked after, with the same kind of message.

A configuration is code: ``run`` imports the import paths it names. ``validate``
imports only those of this package, the library, scikit-learn and the ``bench`` extra
(:func:`~._methods.trusted`), in ``params`` and in ``grid`` values, and lists the
others (:attr:`BenchmarkConfig.deferred`).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictInt,
    StrictStr,
    model_validator,
)

from nescal_sklearn.exceptions import ParameterError

from ._base import ConfigError, ConfigWarning, Name, check_name, parse, show
from ._conditions import Condition, parse_conditions
from ._methods import (
    FIT_ON,
    FROM_METHOD,
    METHOD_KINDS,
    ClassifierMethod,
    LossMethod,
    MethodSpec,
    from_method,
    trusted,
)
from ._registry import CALIBRATORS, METRICS
from ._sources import (
    SKLEARN_DATASETS,
    SOURCES,
    SUITES,
    DataContext,
    DatasetSource,
    ImbalancedSource,
    LocalSource,
    data_dir,
)


def _distinct(values: list) -> list:
    repeated = [v for i, v in enumerate(values) if v in values[:i]]
    if repeated:
        raise ValueError(f"expected distinct values, got {show(repeated[0])} twice")
    return values


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError(f"expected a path without NUL characters, got {show(value)}")
    return value


def _suite_ref(value: Any) -> Any:
    is_id = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if not is_id:
        try:
            check_name(value)
        except ValueError:
            raise ValueError(
                f"expected an OpenML suite id (int >= 1) or alias (a name), got {show(value)}"
            ) from None
    return value


Int1 = Annotated[StrictInt, Field(ge=1)]
Seeds = Annotated[list[Annotated[StrictInt, Field(ge=0)]], AfterValidator(_distinct)]
Fraction = Annotated[float, Strict(), Field(gt=0, lt=1)]
PathText = Annotated[StrictStr, Field(min_length=1), AfterValidator(_no_nul)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Splits(_Model):
    """Stratified fractions, and the validation share of an OpenML task's training fold."""

    train: Fraction = 0.6
    validation: Fraction = 0.2
    test: Fraction = 0.2
    task_validation: Fraction = 0.2

    @model_validator(mode="after")
    def _sums_to_one(self) -> Splits:
        total = self.train + self.validation + self.test
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(
                f"expected train + validation + test == 1, got {self.train:g} + "
                f"{self.validation:g} + {self.test:g} = {total:g}"
            )
        return self


class Budget(_Model):
    """Training budget of the neural methods, a row cap for every dataset, threads per fit."""

    max_epochs: Int1 | None = None
    patience: Int1 | None = None
    batch_size: Int1 | None = None
    hidden_sizes: tuple[Int1, ...] | None = None
    max_rows: Annotated[StrictInt, Field(ge=10)] | None = None
    threads: Int1 = 1
    device: StrictStr | None = None

    def estimator_params(self) -> dict:
        """The ``NeSCalClassifier`` parameters the budget sets (the ones given)."""
        names = ("max_epochs", "patience", "batch_size", "hidden_sizes", "device")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


class OpenMLSettings(_Model):
    """openml-python settings used while loading tasks (None keeps openml's own). A cache
    a configuration names is read without its pickles (see :mod:`._openml`)."""

    cache_dir: PathText | None = None
    server: Annotated[StrictStr, Field(min_length=1)] | None = None
    n_retries: Int1 | None = None


class ReportSettings(_Model):
    """The comparison references of the report, its random-graph controls, the tie tolerance."""

    baseline: StrictStr | None = None
    reference: StrictStr | None = None
    controls: tuple[StrictStr, ...] | None = None
    tie_tolerance: Annotated[float, Strict(), Field(ge=0)] = 0.01


class CalibratorSpec(_Model):
    """A post-hoc calibrator applied to every fitted model: ``name`` in the registry
    (``CALIBRATORS``), ``label`` (optional) the name of its stage, and its ``params``.

    Examples
    --------
    >>> from nescal_bench._config import CalibratorSpec
    >>> spec = CalibratorSpec(name="temperature", params={"guard": None}, label="ts_plain")
    >>> spec.stage, spec.to_json()
    ('ts_plain', {'name': 'temperature', 'params': {'guard': None}, 'label': 'ts_plain'})
    """

    name: Literal[tuple(CALIBRATORS)]  # type: ignore[valid-type]
    label: Name | None = None
    params: dict[str, Any] = {}

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @property
    def stage(self) -> str:
        """The stage its results are recorded under: the label, else the name."""
        return self.name if self.label is None else self.label

    def to_json(self) -> dict:
        """``{"name", "params"}``, plus ``"label"`` only when one is given (an entry
        without a label keeps the record keys it had before labels existed)."""
        out = {"name": self.name, "params": dict(self.params)}
        return out if self.label is None else {**out, "label": self.label}


class DatasetEntry(_Model):
    """One ``datasets`` entry: exactly one source key, and optionally ``imbalance``."""

    local: Name | None = None
    sklearn: Literal[SKLEARN_DATASETS] | None = None  # type: ignore[valid-type]
    openml_task: Int1 | None = None
    openml_suite: Annotated[Any, AfterValidator(_suite_ref)] = None
    suite: Literal[tuple(SUITES)] | None = None  # type: ignore[valid-type]
    imbalance: Fraction | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DatasetEntry:
        given = [key for key in (*SOURCES, "suite") if getattr(self, key) is not None]
        if len(given) != 1:
            raise ValueError(
                f"expected an object with exactly one of the keys {[*SOURCES, 'suite']} (and "
                f"optionally 'imbalance'), got {show(self.model_dump(exclude_none=True))}"
            )
        if self.imbalance is not None and given[0] not in ("local", "sklearn", "suite"):
            raise ValueError(
                f"only local and scikit-learn datasets can be made imbalanced; got {given[0]!r}"
            )
        return self

    def sources(self) -> list[DatasetSource]:
        """The sources this entry stands for (a suite's local sets, in order)."""
        if self.suite is not None:
            found: list[DatasetSource] = [LocalSource(name) for name in SUITES[self.suite]]
        else:
            key = next(k for k in SOURCES if getattr(self, k) is not None)
            found = [SOURCES[key](getattr(self, key))]
        if self.imbalance is None:
            return found
        return [ImbalancedSource(source, self.imbalance) for source in found]


class MethodEntry(_Model):
    """One ``methods`` entry: exactly one of ``loss`` and ``estimator``."""

    name: Name | None = None
    loss: StrictStr | None = None
    estimator: Any = None
    params: dict[str, Any] = {}
    grid: dict[str, Annotated[list, Field(min_length=1)]] = {}
    fit_on: Literal[FIT_ON] = "train"  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _one_kind(self) -> MethodEntry:
        if (self.loss is None) == (self.estimator is None):
            raise ValueError(
                "expected an object with exactly one of the keys 'loss' and 'estimator', "
                f"got {show(self.model_dump(exclude_defaults=True))}"
            )
        for name in sorted(set(self.params) & set(self.grid)):
            raise ValueError(f"{name!r} is given in params and in grid; give it in one place")
        if self.fit_on != "train" and self.grid:
            raise ValueError(
                f"a method with fit_on={self.fit_on!r} trains on the validation rows, so no held-out "
                "rows are left to choose a grid point on; give it one point (params)"
            )
        return self

    @property
    def default_name(self) -> str:
        """Its name: ``name``, else the loss, else the estimator's class name."""
        return self.name or self.loss or str(self.estimator).rpartition(".")[2]


class ConfigFile(_Model):
    """The keys of a configuration file."""

    name: Name | None = None
    description: StrictStr = ""
    output: PathText | None = None
    data_dir: PathText | None = None
    openml: OpenMLSettings | None = None
    datasets: Annotated[list[DatasetEntry], Field(min_length=1)]
    methods: Annotated[list[MethodEntry], Field(min_length=1)]
    calibrators: list[CalibratorSpec] = []
    conditions: Any = []
    search_seeds: Seeds = []
    confirm_seeds: Annotated[Seeds, Field(min_length=1)]
    splits: Splits = Splits()
    recipe: StrictStr | None = None
    budget: Budget = Budget()
    metrics: Annotated[
        list[Literal[tuple(METRICS)]], Field(min_length=1), AfterValidator(_distinct)  # type: ignore[valid-type]
    ] = ["nll", "ece", "brier", "accuracy"]
    selection: StrictStr = "raw"
    report: ReportSettings = ReportSettings()

    @model_validator(mode="after")
    def _names_and_seeds(self) -> ConfigFile:
        for i, method in enumerate(self.methods):
            names = [m.default_name for m in self.methods[:i]]
            if method.default_name in names:
                also = f"methods[{names.index(method.default_name)}]"
                message = f"duplicate method name {method.default_name!r} (also {also})"
                raise ConfigError(f"methods[{i}].name", f"{message}; give each a 'name'")
        stages = ["raw"]
        for i, spec in enumerate(self.calibrators):
            where = f"calibrators[{i}]" + (".label" if spec.label is not None else "")
            if spec.stage == "raw":
                raise ConfigError(where, "'raw' names the uncalibrated model; pick another label")
            if spec.stage in stages:
                hint = "" if spec.label is not None else "; give each a 'label'"
                also = f"calibrators[{stages.index(spec.stage) - 1}]"
                raise ConfigError(where, f"duplicate calibrator {spec.stage!r} (also {also}){hint}")
            stages.append(spec.stage)
        points = [math.prod(len(v) for v in m.grid.values()) for m in self.methods]
        gridded = [(i, n) for i, n in enumerate(points) if n > 1]
        if gridded and not self.search_seeds:
            i, n = gridded[0]
            message = f"methods[{i}].grid has {n} points, got []"
            raise ConfigError(
                "search_seeds", f"expected a non-empty list of ints >= 0 because {message}"
            )
        if self.selection not in stages:
            expected = f"expected one of {stages} (raw, or a configured calibrator)"
            raise ConfigError("selection", f"{expected}, got {show(self.selection)}")
        return self


@dataclass(frozen=True)
class BenchmarkConfig:
    """A validated benchmark configuration (see :func:`validate_config`).

    ``deferred`` lists the import paths a ``validate`` without foreign imports left to
    ``run`` (``(config path, import path)`` pairs).
    """

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
    recipe: str | None = None
    metrics: tuple[str, ...] = ("nll", "ece", "brier", "accuracy")
    selection: str = "raw"
    report: ReportSettings = field(default_factory=ReportSettings)
    openml: OpenMLSettings = field(default_factory=OpenMLSettings)
    data_dir: str | None = None
    description: str = ""
    deferred: tuple[tuple[str, str], ...] = ()

    @property
    def stages(self) -> list[str]:
        """``"raw"`` then each calibrator's stage: the stages every fit is measured at."""
        return ["raw", *(c.stage for c in self.calibrators)]

    def budget_params(self, method: MethodSpec) -> dict:
        """The estimator parameters the budget and the recipe give ``method``."""
        if not method.kind.uses_budget:
            return {}
        recipe = {} if self.recipe is None else {"recipe": self.recipe}
        return {**recipe, **self.budget.estimator_params()}

    def estimator_params(self, method: MethodSpec, point: dict) -> dict:
        """Every estimator parameter the configuration states for ``method`` at ``point``."""
        return method.estimator_params(point, self.budget_params(method))

    def build(self, method: MethodSpec, point: dict, seed: int):
        """The unfitted estimator of ``method`` at ``point``, seeded with ``seed``."""
        return method.build(point, self.budget_params(method), seed)

    def data_context(self, offline: bool = False) -> DataContext:
        """Where the data of this run come from (the local folder made absolute)."""
        folder = os.path.abspath(data_dir(self.data_dir))  # workers may run elsewhere
        return DataContext(folder, self.openml, max_rows=self.budget.max_rows, offline=offline)

    def to_json(self) -> dict:
        """The normalised configuration; ``validate_config(c.to_json())`` gives ``c`` back."""
        plain = {
            k: getattr(self, k)
            for k in ("name", "description", "output", "data_dir", "recipe", "selection")
        }
        entries = {
            k: [e.to_json() for e in getattr(self, k)]
            for k in ("datasets", "methods", "calibrators", "conditions")
        }
        return {
            **plain,
            **entries,
            **{k: list(getattr(self, k)) for k in ("search_seeds", "confirm_seeds", "metrics")},
            "openml": self.openml.model_dump(),
            "splits": self.splits.model_dump(),
            "budget": self.budget.model_dump(mode="json", exclude_none=True),
            "report": {**self.report.model_dump(), "controls": list(self.report.controls or ())},
        }


def check_output_path(output: str, data_folder: str | None = None) -> None:
    """Check that ``output`` can be the results directory of a run.

    It must not contain NUL characters, must be (or be creatable as) a directory that
    this process can write, and must not be the local datasets' folder.

    Raises
    ------
    ConfigError
        With the path ``output``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from nescal_bench import check_output_path
    >>> file = pathlib.Path(tempfile.mkdtemp()) / "taken.json"
    >>> _ = file.write_text("{}")
    >>> try:
    ...     check_output_path(str(file / "results"))
    ... except ValueError as exc:
    ...     print(str(exc).split(": ", 1)[0], "...", str(exc).rsplit(": ", 1)[1])
    output ... it is a file, not a directory
    """
    parse(PathText, output, "output")
    target = Path(output)
    if target.exists() and not target.is_dir():
        raise ConfigError("output", f"{output!r} exists and is not a directory")
    existing = target
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing != target and not existing.is_dir():
        raise ConfigError(
            "output",
            f"{output!r} cannot be created: {str(existing)!r} is in its path, and it is a "
            "file, not a directory",
        )
    if existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            "output", f"{output!r} cannot be written: no write permission in {str(existing)!r}"
        )
    local = data_dir(data_folder)
    if target.resolve() == local.resolve():
        raise ConfigError(
            "output",
            f"expected a folder of its own, got the data_dir {str(local)!r} (the local "
            "datasets' folder)",
        )


def _datasets(file: ConfigFile, folder: Path | None) -> tuple[DatasetSource, ...]:
    out: list[DatasetSource] = []
    for i, entry in enumerate(file.datasets):
        for source in entry.sources():
            local = source.base if isinstance(source, ImbalancedSource) else source
            problem = (
                local.check_files(folder) if folder and isinstance(local, LocalSource) else None
            )
            if problem is not None:
                raise ConfigError(f"datasets[{i}].{'suite' if entry.suite else 'local'}", problem)
            if source in out:
                raise ConfigError(f"datasets[{i}]", f"duplicate dataset {show(source.to_json())}")
            out.append(source)
    return tuple(out)


def _method(i: int, entry: MethodEntry, check_params: bool, imports: bool) -> MethodSpec:
    path = f"methods[{i}]"
    key = "loss" if entry.loss is not None else "estimator"
    ref = getattr(entry, key)
    if not check_params:
        kind = METHOD_KINDS[key](ref)
    elif key == "loss":
        kind = LossMethod.from_config(f"{path}.loss", ref)
    else:
        kind = ClassifierMethod.from_config(f"{path}.estimator", ref, imports=imports)
    grid = {k: tuple(v) for k, v in entry.grid.items()}
    name, params = entry.name or kind.default_name, dict(entry.params)
    spec = MethodSpec(name, kind, params=params, grid=grid, fit_on=entry.fit_on)
    if not check_params or (not imports and not all(map(trusted, spec.imports()))):
        return spec  # a saved run's, or a method whose imports are left to run
    targets = {}
    for section in ("params", "grid"):
        for param in getattr(entry, section):
            targets[param] = kind.parameter_target(param, f"{path}.{section}.{param}")
    return replace(spec, targets=targets)


def _locate(i: int, method: MethodSpec, point: dict, config: BenchmarkConfig, param: str) -> str:
    """Where the configuration sets the estimator parameter ``param`` of ``method`` at
    ``point``: its params, its grid, the budget, or the configuration's recipe."""
    name = {target: name for name, target in method.targets.items()}.get(param, param)
    if name in method.grid:
        return f"methods[{i}].grid.{name}[{method.grid[name].index(point[name])}]"
    if name in method.params:
        return f"methods[{i}].params.{name}"
    if method.kind.uses_budget and param in config.budget.estimator_params():
        return f"budget.{param}"
    if method.kind.uses_budget and config.recipe is not None:
        return f"recipe {config.recipe!r}"
    return f"methods[{i}]"


def _check_methods(config: BenchmarkConfig) -> None:
    """Every method's whole estimator, budget included, checked by the library at every
    grid point; the error names the configuration key to change."""
    for i, method in enumerate(config.methods):
        if method.targets is None:  # a foreign import, left to run
            continue
        for point in method.points():
            try:
                estimator = config.build(method, point, 0)
            except ConfigError as exc:  # a nested member's path, from the method's params
                raise ConfigError(
                    f"methods[{i}].params.{exc.path}", str(exc).removeprefix(f"{exc.path}: ")
                ) from None
            try:
                method.kind.check(estimator)
            except ParameterError as exc:
                raise ConfigError(*_blame(i, method, point, config, exc)) from None
            except (ValueError, TypeError) as exc:  # not the library's: the method
                raise ConfigError(f"methods[{i}]", str(exc)) from None


def _blame(i, method: MethodSpec, point: dict, config, exc: ParameterError):
    """``(key, message)``: the configuration key to change for ``exc`` (where its
    parameter ``exc.param`` is set) and the message: the library's, then where each
    parameter it compares with (``exc.context``, ``max_epochs`` for a warm-up after the
    last epoch) comes from."""
    where = _locate(i, method, point, config, exc.param)
    sources = [
        f" {name}={value!r} comes from {_locate(i, method, point, config, name)}."
        for name, value in exc.context.items()
    ]
    return (f"methods[{i}]" if where.startswith("recipe") else where), str(exc) + "".join(sources)


def _is_control(config: BenchmarkConfig, method: MethodSpec) -> bool:
    """True when the loss every fit of ``method`` trains with (the configuration's settings
    over its recipe's) has ``graph == "random"``: the random-graph control."""
    if not method.kind.uses_neighbours or method.targets is None:
        return False
    return all(
        getattr(config.build(method, p, 0).check_params()["loss"], "graph", None) == "random"
        for p in method.points()
    )


def _report(
    config: BenchmarkConfig, settings: ReportSettings, check_params: bool
) -> ReportSettings:
    names = [m.name for m in config.methods]
    given = [("report.baseline", settings.baseline), ("report.reference", settings.reference)]
    for path, name in given + [
        (f"report.controls[{j}]", n) for j, n in enumerate(settings.controls or ())
    ]:
        if name not in (None, *names):
            raise ConfigError(path, f"expected a method name, one of {names}, got {show(name)}")
    if not check_params:  # a saved run's settings, already resolved
        return settings.model_copy(update={"controls": tuple(settings.controls or ())})
    controls = settings.controls
    if controls is None:
        controls = tuple(m.name for m in config.methods if _is_control(config, m))
    baseline = settings.baseline or next(
        (m.name for m in config.methods if m.kind.is_plain_cross_entropy), None
    )
    reference = settings.reference or next(
        (m.name for m in config.methods if m.kind.uses_neighbours and m.name not in controls), None
    )
    return settings.model_copy(
        update={"baseline": baseline, "reference": reference, "controls": controls}
    )


def _check_recipe(recipe: str | None, methods: tuple[MethodSpec, ...], check_params: bool) -> None:
    """A configuration with a NeSCalClassifier method names its training recipe: every
    setting it does not state comes from that recipe, whatever the library's defaults
    become."""
    if not check_params:
        return
    from nescal_sklearn.estimator import LATEST_RECIPE, RECIPES

    neural = [m.name for m in methods if m.kind.uses_budget]
    if recipe is None and neural:
        raise ConfigError(
            "recipe",
            "required: name the training recipe of the NeSCalClassifier methods "
            f'{neural} (nescal_sklearn.estimator.RECIPES), e.g. "recipe": "{LATEST_RECIPE}"',
        )
    if recipe is not None and recipe not in RECIPES:
        raise ConfigError("recipe", f"expected one of {sorted(RECIPES)}, got {show(recipe)}")


def validate_config(
    data: Any,
    *,
    default_name: str = "benchmark",
    check_files: bool = True,
    check_params: bool = True,
    imports: bool = True,
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
        Check local dataset names against the manifest in ``data_dir``, and that
        ``output`` can be the results directory (see :func:`check_output_path`).
    check_params : bool, default=True
        Check method and calibrator parameters with the library (which imports torch
        for ``NeSCalClassifier`` methods) at every grid point with the budget, and
        resolve the report's defaults; warn (:class:`ConfigWarning`) about confirm seeds
        that are also search seeds. False only reads the structure: for a saved run's
        configuration, which the report and ``compare`` read without importing torch or
        any import path it names; such a configuration cannot plan fits.
    imports : bool, default=True
        Import the configuration's import paths that :func:`~._methods.trusted` refuses (what
        ``run`` does). False leaves them, and the checks of their methods, to ``run``
        and lists them in ``deferred`` (what ``validate`` does).

    Raises
    ------
    ConfigError
        With the path of the first bad key.

    Examples
    --------
    >>> from nescal_bench import validate_config
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
    budget.max_epochs: input should be greater than or equal to 1, got 0
    """
    file = parse(ConfigFile, data)
    name = file.name or parse(Name, default_name, "name")
    output = file.output or os.path.join("results", name)
    if check_files:
        check_output_path(output, file.data_dir)
    methods = [_method(i, entry, check_params, imports) for i, entry in enumerate(file.methods)]
    _check_sources(methods)
    if check_params:
        for i, spec in enumerate(file.calibrators):
            _check_calibrator(f"calibrators[{i}]", spec, imports)
    gridded = any(len(m.points()) > 1 for m in methods)
    _check_recipe(file.recipe, tuple(methods), check_params)
    same = ("splits", "budget", "recipe", "selection", "data_dir", "description")
    listed = ("calibrators", "search_seeds", "confirm_seeds", "metrics")
    deferred = [
        (f"methods[{i}]", ref)
        for i, m in enumerate(methods)
        if m.targets is None and check_params
        for ref in m.imports()
        if not trusted(ref)
    ]
    config = BenchmarkConfig(
        name=name,
        output=output,
        datasets=_datasets(file, data_dir(file.data_dir) if check_files else None),
        methods=tuple(methods),
        conditions=parse_conditions(file.conditions),
        deferred=tuple(deferred),
        openml=file.openml or OpenMLSettings(),
        **{k: getattr(file, k) for k in same},
        **{k: tuple(getattr(file, k)) for k in listed},
    )
    if check_params:
        _check_methods(config)
        shared = [seed for seed in file.confirm_seeds if seed in file.search_seeds]
        if shared and gridded:
            warnings.warn(
                f"confirm_seeds: {shared} {'is' if len(shared) == 1 else 'are'} also in search_seeds; a "
                "gridded method's confirm fit on such a seed is its search fit at the chosen point, which "
                "biases the reported result towards that point; keep confirm_seeds apart from search_seeds",
                ConfigWarning,
                stacklevel=2,
            )
    return replace(config, report=_report(config, file.report, check_params))


def _check_sources(methods: list[MethodSpec]) -> None:
    """Every ``{"from_method": NAME}`` value is a fixed parameter of a method without a
    grid and names another method of the configuration, one that follows none itself."""
    names = [m.name for m in methods]
    follows = {m.name for m in methods if any(map(from_method, m.params.values()))}
    for i, method in enumerate(methods):
        for param, values in method.grid.items():
            if any(map(from_method, values)):
                raise ConfigError(
                    f"methods[{i}].grid.{param}", f"{FROM_METHOD} is not a grid value"
                )
        for param, value in method.params.items():
            name, path = from_method(value), f"methods[{i}].params.{param}"
            if name is None:
                continue
            if name == method.name or name not in names:
                others = [n for n in names if n != method.name]
                raise ConfigError(
                    path, f"expected the name of another method, one of {others}, got {show(name)}"
                )
            if name in follows:
                raise ConfigError(path, f"method {name!r} follows another method's records itself")
            if method.grid:
                raise ConfigError(path, f"a method with a grid cannot take {FROM_METHOD} values")


def _check_calibrator(path: str, spec: CalibratorSpec, imports: bool = True) -> None:
    """The calibrator's own parameter checks (and its optional package being installed;
    without ``imports``, a calibrator whose package is missing is left to ``run``)."""
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression

    if "estimator" in spec.params:
        raise ConfigError(f"{path}.params.estimator", "set by the runner (the fitted model)")
    cls = CALIBRATORS[spec.name]
    try:
        getattr(cls, "check_dependencies", lambda: None)()  # an optional package installed?
    except ImportError as exc:
        if not imports:
            return
        raise ConfigError(path, str(exc)) from None
    calibrator = cls(FrozenEstimator(LogisticRegression()))
    for key, value in spec.params.items():
        try:
            calibrator.set_params(**{key: value})
            calibrator._validate_params()
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{path}.params.{key}", str(exc)) from None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ConfigError(
                key,
                "given more than once in the same object; JSON keeps only the last value, so give it once",
            )
        seen.add(key)
    return dict(pairs)


def load_config(path: str | os.PathLike, *, imports: bool = True) -> BenchmarkConfig:
    """Read and validate a JSON configuration file (its stem is the default ``name``).

    ``imports=False`` leaves foreign import paths to ``run`` (see :func:`validate_config`).

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
        raise ConfigError("", f"{path}: not UTF-8 text (byte at offset {exc.start})") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "", f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    return validate_config(data, default_name=path.stem, imports=imports)
