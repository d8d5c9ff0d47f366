"""Validation of a configuration, one small function per section.

Parameter values of methods and calibrators are checked by the library itself (the
loss objects' ``validate``, the estimators' parameter constraints) on a fresh object
holding only the parameter at hand, so the error names exactly one key; the message
is the config path, then the library's own message.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from ._conditions import CLEAN, CONDITIONS, Condition
from ._methods import FIT_ON, METHOD_KINDS, MethodSpec, ParameterConflict
from ._registry import CALIBRATORS, METRICS
from ._sources import SOURCES, DatasetSource, ImbalancedSource
from ._specs import (
    Budget,
    CalibratorSpec,
    ConfigError,
    OpenMLSettings,
    ReportSettings,
    Splits,
    _fail,
    _int,
    _is_int,
    _is_real,
    _mapping,
    _object,
    _optional_str,
    _show,
)


def _required_list(data: Any, key: str, what: str) -> list:
    if key not in data:
        raise ConfigError(key, f"required key missing; expected a non-empty list of {what}")
    if not isinstance(data[key], list) or not data[key]:
        raise _fail(key, f"a non-empty list of {what}", data[key])
    return data[key]


# --------------------------------------------------------------------------- datasets
def dataset_entry(path: str, entry: Any, data_dir: Path | None) -> DatasetSource:
    """One ``datasets`` entry as a :class:`DatasetSource`."""
    _mapping(path, entry, (*SOURCES, "imbalance"))
    keys = [key for key in entry if key in SOURCES]
    if len(keys) != 1:
        raise _fail(
            path,
            f"an object with exactly one of the keys {list(SOURCES)} (and optionally 'imbalance')",
            entry,
        )
    cls = SOURCES[keys[0]]
    source = cls.from_config(f"{path}.{keys[0]}", entry[keys[0]], data_dir)
    if "imbalance" not in entry:
        return source
    if not cls.can_be_imbalanced:
        allowed = " and ".join(c.label for c in SOURCES.values() if c.can_be_imbalanced)
        raise ConfigError(
            f"{path}.imbalance",
            f"only {allowed} datasets can be made imbalanced; got {keys[0]!r}",
        )
    ratio = entry["imbalance"]
    if not _is_real(ratio) or not 0.0 < ratio < 1.0:
        raise _fail(
            f"{path}.imbalance", "a size ratio of the rarest to the largest class in (0, 1)", ratio
        )
    return ImbalancedSource(source, float(ratio))


def datasets_section(data: Any, data_dir: Path | None) -> tuple[DatasetSource, ...]:
    out: list[DatasetSource] = []
    for i, entry in enumerate(_required_list(data, "datasets", "datasets")):
        source = dataset_entry(f"datasets[{i}]", entry, data_dir)
        if source in out:
            raise ConfigError(f"datasets[{i}]", f"duplicate dataset {_show(source.to_json())}")
        out.append(source)
    return tuple(out)


# --------------------------------------------------------------------------- methods
def method_entry(path: str, entry: Any, *, check_params: bool = True) -> MethodSpec:
    """One ``methods`` entry; ``check_params=False`` only reads its structure."""
    _mapping(path, entry, ("name", "params", "grid", "fit_on", *METHOD_KINDS))
    keys = [key for key in entry if key in METHOD_KINDS]
    if len(keys) != 1:
        names = " and ".join(f"'{k}'" for k in METHOD_KINDS)
        raise _fail(path, f"an object with exactly one of the keys {names}", entry)
    params = _object(f"{path}.params", entry.get("params", {}))
    grid = _object(f"{path}.grid", entry.get("grid", {}))
    for name in set(params) & set(grid):
        raise ConfigError(f"{path}.grid.{name}", "also given in params; give it in one place")
    cls = METHOD_KINDS[keys[0]]
    if check_params:
        kind = cls.from_config(f"{path}.{keys[0]}", entry[keys[0]])
    else:
        kind = cls(entry[keys[0]])
    targets: dict[str, str] | None = {} if check_params else None
    for name, value in params.items():
        where = f"{path}.params.{name}"
        if check_params:
            targets[name] = kind.parameter_target(name, where)
            kind.check_value(where, targets[name], value)
    checked_grid = {}
    for name, values in grid.items():
        where = f"{path}.grid.{name}"
        if not isinstance(values, list) or not values:
            if check_params:
                kind.parameter_target(name, where)
            raise _fail(where, "a non-empty list of values", values)
        if check_params:
            targets[name] = kind.parameter_target(name, where)
            for i, value in enumerate(values):
                kind.check_value(f"{where}[{i}]", targets[name], value)
        checked_grid[name] = tuple(values)
    name = entry.get("name", kind.default_name)
    _check_label(f"{path}.name", name)
    fit_on = entry.get("fit_on", "train")
    if fit_on not in FIT_ON:
        raise _fail(f"{path}.fit_on", f"one of {list(FIT_ON)}", fit_on)
    if fit_on != "train" and checked_grid:
        raise ConfigError(
            f"{path}.grid",
            f"a method with fit_on={fit_on!r} trains on the validation rows, so no held-out "
            "rows are left to choose a grid point on; give it one point (params) per method",
        )
    return MethodSpec(
        name=name,
        kind=kind,
        params=dict(params),
        grid=checked_grid,
        targets=targets,
        fit_on=fit_on,
    )


def _check_label(path: str, name: Any) -> str:
    """A method name or calibrator label: letters, digits, ``_``, ``-`` and ``.``, not
    starting with a digit (the names records, tables and file names use)."""
    if not isinstance(name, str) or not name.replace("-", "_").replace(".", "_").isidentifier():
        raise _fail(path, "a name of letters, digits, '_', '-' or '.'", name)
    return name


def _check_unique_name(section: str, what: str, i: int, entry, earlier, hint: str = "") -> None:
    """Raise if one of the ``earlier`` entries of ``section`` has the name of entry ``i``."""
    for j, other in enumerate(earlier):
        if other.name == entry.name:
            raise ConfigError(
                f"{section}[{i}].name",
                f"duplicate {what} name {entry.name!r} (also {section}[{j}]){hint}",
            )


def methods_section(data: Any, *, check_params: bool) -> tuple[MethodSpec, ...]:
    methods: list[MethodSpec] = []
    for i, entry in enumerate(_required_list(data, "methods", "methods")):
        method = method_entry(f"methods[{i}]", entry, check_params=check_params)
        _check_unique_name("methods", "method", i, method, methods, "; give each a 'name'")
        methods.append(method)
    return tuple(methods)


def _locate(index: int, method: MethodSpec, point: dict, budget: Budget, param: str) -> str:
    """Where the configuration sets the estimator parameter ``param`` of ``method`` at
    ``point``: its params, its grid, the budget, or the configuration's recipe."""
    by_target = {target: name for name, target in (method.targets or {}).items()}
    name = by_target.get(param, param)
    if name in method.grid:
        values = method.grid[name]
        return f"methods[{index}].grid.{name}[{values.index(point[name])}]"
    if name in method.params:
        return f"methods[{index}].params.{name}"
    if method.kind.uses_budget and param in budget.estimator_params():
        return f"budget.{param}"
    if method.kind.uses_budget and budget.recipe is not None:
        return f"recipe {budget.recipe!r}"
    return "the estimator's default"


def check_methods_with_budget(methods: tuple[MethodSpec, ...], budget: Budget) -> None:
    """Check every method's whole estimator, budget included, at every grid point.

    Parameters are checked one by one when read; this catches those that are valid
    alone but not together, such as ``warmup: 50`` with ``budget.max_epochs: 2`` (the
    neighbour graph would never be built). The error names the config key to change.
    """
    for i, method in enumerate(methods):
        for point in method.points():
            estimator = method.build(point, budget, 0)
            where = functools.partial(_locate, i, method, point, budget)
            try:
                method.kind.check_estimator(estimator, where)
            except ParameterConflict as exc:
                where = (
                    _locate(i, method, point, budget, exc.param)
                    if exc.param is not None
                    else f"methods[{i}]"
                )
                if where == "the estimator's default":
                    where = f"methods[{i}]"
                raise ConfigError(where, str(exc)) from None


# --------------------------------------------------------------------------- calibrators
def calibrator_entry(path: str, entry: Any, *, check_params: bool = True) -> CalibratorSpec:
    """One ``calibrators`` entry: a registered name, or ``{"name", "label", "params"}``.

    ``label`` (optional) names the entry's stage; ``check_params=False`` only reads the
    structure (a saved run's configuration).
    """
    if isinstance(entry, str):
        entry = {"name": entry}
    _mapping(path, entry, ("name", "label", "params"))
    name = entry.get("name")
    if name not in CALIBRATORS:
        raise _fail(f"{path}.name" if len(entry) > 1 else path, f"one of {list(CALIBRATORS)}", name)
    label = None
    if "label" in entry:
        label = _check_label(f"{path}.label", entry["label"])
    params = _object(f"{path}.params", entry.get("params", {}))
    if check_params:
        _check_calibrator_available(path, CALIBRATORS[name])
    for key, value in params.items():
        if key == "estimator":
            raise ConfigError(f"{path}.params.{key}", "set by the runner (the fitted model)")
        if check_params:
            _check_calibrator_value(f"{path}.params.{key}", CALIBRATORS[name], key, value)
    return CalibratorSpec(name, dict(params), label)


def _check_calibrator_available(path: str, cls: type) -> None:
    """ConfigError when a calibrator needs an optional package that is not installed
    (a class with a ``check_dependencies`` classmethod, such as the external ones)."""
    check = getattr(cls, "check_dependencies", None)
    if check is None:
        return
    try:
        check()
    except ImportError as exc:
        raise ConfigError(path, str(exc)) from None


def _check_calibrator_value(path: str, cls: type, key: str, value: Any) -> None:
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression

    calibrator = cls(FrozenEstimator(LogisticRegression()))
    try:
        calibrator.set_params(**{key: value})
        calibrator._validate_params()
    except (ValueError, TypeError) as exc:
        raise ConfigError(path, str(exc)) from None


def calibrators_section(data: Any, *, check_params: bool) -> tuple[CalibratorSpec, ...]:
    entries = data.get("calibrators", [])
    if not isinstance(entries, list):
        raise _fail("calibrators", "a list of calibrator names or objects", entries)
    calibrators: list[CalibratorSpec] = []
    for i, entry in enumerate(entries):
        spec = calibrator_entry(f"calibrators[{i}]", entry, check_params=check_params)
        where = f"calibrators[{i}].label" if spec.label is not None else f"calibrators[{i}]"
        if spec.stage == "raw":
            raise ConfigError(where, "'raw' names the uncalibrated model; pick another label")
        for j, other in enumerate(calibrators):
            if other.stage == spec.stage:
                hint = "" if spec.label is not None else "; give each a 'label'"
                raise ConfigError(
                    where,
                    f"duplicate calibrator {spec.stage!r} (also calibrators[{j}]){hint}",
                )
        calibrators.append(spec)
    return tuple(calibrators)


# --------------------------------------------------------------------------- conditions
def condition_entries(path: str, entry: Any) -> tuple[Condition, ...]:
    """The conditions of one entry: one, or one per severity of a ``severities`` list."""
    _object(path, entry)
    kind = entry.get("kind")
    if kind not in CONDITIONS:
        raise _fail(f"{path}.kind", f"one of {list(CONDITIONS)}", kind)
    name = entry.get("name", "")
    if "name" in entry and (not isinstance(name, str) or not name):
        raise _fail(f"{path}.name", "a non-empty string", name)
    return CONDITIONS[kind].expand(path, entry)


def conditions_section(data: Any) -> tuple[Condition, ...]:
    entries = data.get("conditions", [])
    if not isinstance(entries, list):
        raise _fail("conditions", "a list of evaluation conditions", entries)
    conditions: dict[str, tuple[int, Condition]] = {}
    for i, entry in enumerate(entries):
        for condition in condition_entries(f"conditions[{i}]", entry):
            if condition.name == CLEAN:
                raise ConfigError(
                    f"conditions[{i}].name",
                    f"{CLEAN!r} names the unmodified test rows; pick another",
                )
            if condition.name in conditions:
                j = conditions[condition.name][0]
                raise ConfigError(
                    f"conditions[{i}].name",
                    f"duplicate condition name {condition.name!r} (also conditions[{j}])",
                )
            conditions[condition.name] = (i, condition)
    return tuple(condition for _, condition in conditions.values())


# --------------------------------------------------------------------------- small sections
def seeds_section(data: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(search_seeds, confirm_seeds)``."""
    if "confirm_seeds" not in data:
        raise ConfigError(
            "confirm_seeds", "required key missing; expected a non-empty list of ints >= 0"
        )
    confirm = _seeds("confirm_seeds", data["confirm_seeds"], required=True)
    search = _seeds("search_seeds", data.get("search_seeds", []), required=False)
    return search, confirm


def _seeds(path: str, value: Any, *, required: bool) -> tuple[int, ...]:
    if not isinstance(value, list) or (required and not value):
        raise _fail(
            path, "a non-empty list of ints >= 0" if required else "a list of ints >= 0", value
        )
    for i, seed in enumerate(value):
        _int(f"{path}[{i}]", seed, 0)
        if seed in value[:i]:
            raise ConfigError(f"{path}[{i}]", f"duplicate seed {seed}")
    return tuple(value)


def check_search_seeds(methods: tuple[MethodSpec, ...], search: tuple, data: Any) -> None:
    gridded = [(i, m) for i, m in enumerate(methods) if len(m.points()) > 1]
    if gridded and not search:
        i, m = gridded[0]
        raise ConfigError(
            "search_seeds",
            f"expected a non-empty list of ints >= 0 because methods[{i}].grid has "
            f"{len(m.points())} points, got {_show(data.get('search_seeds', []))}",
        )


def metrics_section(data: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    metrics = data.get("metrics", list(default))
    if not isinstance(metrics, list) or not metrics:
        raise _fail("metrics", f"a non-empty list of metric names from {list(METRICS)}", metrics)
    for i, metric in enumerate(metrics):
        if metric not in METRICS:
            raise _fail(f"metrics[{i}]", f"one of {list(METRICS)}", metric)
        if metric in metrics[:i]:
            raise ConfigError(f"metrics[{i}]", f"duplicate metric {metric!r}")
    return tuple(metrics)


def selection_section(data: Any, calibrators: tuple[CalibratorSpec, ...]) -> str:
    selection = data.get("selection", "raw")
    allowed = ["raw", *(c.stage for c in calibrators)]
    if selection not in allowed:
        raise _fail("selection", f"one of {allowed} (raw, or a configured calibrator)", selection)
    return selection


def splits_section(value: Any) -> Splits:
    path = "splits"
    _mapping(path, value, ("train", "validation", "test", "task_validation"))
    fractions = {}
    for key in ("train", "validation", "test", "task_validation"):
        v = value.get(key, getattr(Splits, key))
        if not _is_real(v) or not 0 < v < 1:
            raise _fail(f"{path}.{key}", "a fraction in (0, 1)", v)
        fractions[key] = float(v)
    total = fractions["train"] + fractions["validation"] + fractions["test"]
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise ConfigError(
            path,
            "expected train + validation + test == 1, got "
            f"{fractions['train']:g} + {fractions['validation']:g} + {fractions['test']:g} = {total:g}",
        )
    return Splits(**fractions)


def recipe_section(
    value: Any, methods: tuple[MethodSpec, ...], *, check_params: bool
) -> str | None:
    """The configuration's training recipe: required when a method is a NeSCalClassifier.

    Every setting a configuration does not state comes from the recipe it names, so a
    later change of the library's defaults cannot change what a stored study means.
    """
    neural = [m.name for m in methods if m.kind.uses_budget]
    if value is None:
        if neural:
            raise ConfigError(
                "recipe",
                "required: name the training recipe of the NeSCalClassifier methods "
                f'{neural} (nescal_sklearn.estimator.RECIPES), e.g. "recipe": '
                f'"{_latest_recipe()}"',
            )
        return None
    if not isinstance(value, str) or (check_params and value not in _recipe_names()):
        shown = _recipe_names() if check_params else "a recipe name"
        raise _fail("recipe", f"one of {shown}" if check_params else shown, value)
    return value


def _recipe_names() -> list[str]:
    from ..estimator import RECIPES

    return sorted(RECIPES)


def _latest_recipe() -> str:
    from ..estimator import LATEST_RECIPE

    return LATEST_RECIPE


def budget_section(value: Any) -> Budget:
    path = "budget"
    keys = ("max_epochs", "patience", "batch_size", "hidden_sizes", "max_rows", "threads", "device")
    _mapping(path, value, keys)
    out: dict[str, Any] = {}
    for key in ("max_epochs", "patience", "batch_size", "threads"):
        if key in value:
            out[key] = _int(f"{path}.{key}", value[key], 1)
    if value.get("max_rows") is not None:
        out["max_rows"] = _int(f"{path}.max_rows", value["max_rows"], 10)
    if "hidden_sizes" in value:
        sizes = value["hidden_sizes"]
        if not isinstance(sizes, list) or not all(_is_int(s) and s >= 1 for s in sizes):
            raise _fail(f"{path}.hidden_sizes", "a list of ints >= 1", sizes)
        out["hidden_sizes"] = tuple(sizes)
    if "device" in value:
        if not isinstance(value["device"], str):
            raise _fail(f"{path}.device", "a torch device string such as 'cpu'", value["device"])
        out["device"] = value["device"]
    return Budget(**out)


def openml_section(value: Any) -> OpenMLSettings:
    entry = _mapping("openml", value or {}, ("cache_dir", "server", "n_retries"))
    n_retries = entry.get("n_retries")
    if n_retries is not None:
        _int("openml.n_retries", n_retries, 1)
    return OpenMLSettings(
        cache_dir=_optional_str("openml.cache_dir", entry.get("cache_dir")),
        server=_optional_str("openml.server", entry.get("server")),
        n_retries=n_retries,
    )


# --------------------------------------------------------------------------- report
def report_section(
    value: Any, methods: tuple[MethodSpec, ...], budget: Budget, *, check_params: bool
) -> ReportSettings:
    """The report settings; unset references default from the methods' estimators."""
    entry = _mapping("report", value, ("baseline", "reference", "controls", "tie_tolerance"))
    names = [m.name for m in methods]
    for key in ("baseline", "reference"):
        if entry.get(key) is not None and entry[key] not in names:
            raise _fail(f"report.{key}", f"a method name, one of {names}", entry[key])
    controls = entry.get("controls")
    if controls is not None:
        if not isinstance(controls, list):
            raise _fail("report.controls", "a list of method names", controls)
        for i, name in enumerate(controls):
            if name not in names:
                raise _fail(f"report.controls[{i}]", f"a method name, one of {names}", name)
    tolerance = entry.get("tie_tolerance", 0.01)
    if not _is_real(tolerance) or tolerance < 0:
        raise _fail("report.tie_tolerance", "a number >= 0", tolerance)
    if not check_params:  # a saved run's settings, already resolved
        return ReportSettings(
            entry.get("baseline"), entry.get("reference"), tuple(controls or ()), float(tolerance)
        )
    if controls is None:
        controls = [m.name for m in methods if is_random_graph_control(m, budget)]
    baseline = entry.get("baseline") or _first(methods, lambda m: m.kind.is_plain_cross_entropy)
    reference = entry.get("reference") or _first(
        methods, lambda m: m.kind.uses_neighbours and m.name not in controls
    )
    return ReportSettings(baseline, reference, tuple(controls), float(tolerance))


def is_random_graph_control(method: MethodSpec, budget: Budget) -> bool:
    """True when the loss a fit would train with (the configuration's settings over its
    recipe's) has ``graph == "random"`` at every grid point: the random-graph control."""
    if not method.kind.uses_neighbours:
        return False
    return all(
        getattr(method.build(point, budget, 0).check_params()["loss"], "graph", None) == "random"
        for point in method.points()
    )


def _first(methods, predicate) -> str | None:
    return next((m.name for m in methods if predicate(m)), None)
