"""Validation of the entries of a configuration: datasets, methods, calibrators, sections.

Parameter values of methods and calibrators are checked by the library itself (the
loss objects' ``validate``, the estimators' parameter constraints) on a fresh object
holding only the parameter at hand, so the error names exactly one key.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from pathlib import Path
from typing import Any

from ._registry import CALIBRATORS, available_calibrators, calibrator_class
from ._specs import (
    _RUNNER_PARAMS,
    DATASET_KINDS,
    SKLEARN_DATASETS,
    Budget,
    CalibratorSpec,
    ConfigError,
    DatasetSpec,
    MethodSpec,
    Splits,
    _fail,
    _int,
    _is_int,
    _is_real,
    _mapping,
    _object,
)


def _dataset(path: str, entry: Any, data_dir: Path | None) -> DatasetSpec:
    _mapping(path, entry, (*DATASET_KINDS, "imbalance"))
    kinds = [key for key in entry if key in DATASET_KINDS]
    if len(kinds) != 1:
        raise _fail(
            path,
            f"an object with exactly one of the keys {list(DATASET_KINDS)} (and optionally "
            "'imbalance')",
            entry,
        )
    imbalance = _imbalance(f"{path}.imbalance", entry, kinds[0])
    kind, ref = kinds[0], entry[kinds[0]]
    path = f"{path}.{kind}"
    if kind == "local":
        if not isinstance(ref, str):
            raise _fail(path, "a dataset name of the local manifest", ref)
        if data_dir is not None:
            _check_local_name(path, ref, data_dir)
    elif kind == "sklearn":
        if ref not in SKLEARN_DATASETS:
            raise _fail(path, f"one of scikit-learn's bundled sets {list(SKLEARN_DATASETS)}", ref)
    elif kind == "openml_task":
        _int(path, ref, 1)
    elif not (_is_int(ref) and ref >= 1) and not (isinstance(ref, str) and ref):
        raise _fail(path, "an OpenML suite id (int >= 1) or alias (str)", ref)
    return DatasetSpec(kind, ref, imbalance)


def _imbalance(path: str, entry: Any, kind: str) -> float | None:
    if "imbalance" not in entry:
        return None
    value = entry["imbalance"]
    if kind not in ("local", "sklearn"):
        raise ConfigError(
            path, f"only local and scikit-learn datasets can be made imbalanced; got {kind!r}"
        )
    if not _is_real(value) or not 0.0 < value < 1.0:
        raise _fail(path, "a size ratio of the rarest to the largest class in (0, 1)", value)
    return float(value)


def _check_local_name(path: str, name: str, data_dir: Path) -> None:
    manifest = data_dir / "manifest.json"
    if not manifest.is_file():
        raise ConfigError(
            path,
            f"no manifest.json in data_dir {str(data_dir)!r} (resolved to "
            f"{str(data_dir.resolve())!r}); set data_dir or NESCAL_DATA_DIR",
        )
    names = [item["name"] for item in json.loads(manifest.read_text())]
    if name not in names:
        raise _fail(path, f"a dataset of {str(manifest)!r}, one of {names}", name)


def _import_classifier(path: str, ref: Any) -> type:
    from sklearn.base import is_classifier

    if not isinstance(ref, str) or not ref:
        raise _fail(
            path, "an import path such as 'sklearn.ensemble.HistGradientBoostingClassifier'", ref
        )
    if "." in ref:
        module_name, _, attr = ref.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(path, f"cannot import {ref!r}: {exc}") from None
    else:
        from sklearn.utils.discovery import all_estimators

        found = dict(all_estimators(type_filter="classifier"))
        if ref not in found:
            raise _fail(path, "an import path, or the name of a scikit-learn classifier", ref)
        cls = found[ref]
    try:
        ok = isinstance(cls, type) and is_classifier(cls()) and hasattr(cls, "predict_proba")
    except TypeError:  # a class whose constructor needs arguments
        ok = False
    if not ok:
        raise _fail(path, "a scikit-learn classifier class with predict_proba", ref)
    return cls


def _public_path(cls: type) -> str:
    """The shortest importable path of ``cls``: ``sklearn.ensemble.HistGradientBoostingClassifier``."""
    parts = cls.__module__.split(".")
    for i in range(1, len(parts) + 1):
        module = ".".join(parts[:i])
        try:
            if getattr(importlib.import_module(module), cls.__name__, None) is cls:
                return f"{module}.{cls.__name__}"
        except ImportError:
            continue
    return f"{cls.__module__}.{cls.__name__}"


def _check_value(path: str, make: Any, target: str, value: Any) -> None:
    """Set one parameter on a fresh object from ``make()`` and run the library's checks."""
    obj = make()
    try:
        if target.startswith("loss__") and hasattr(obj, "validate"):
            obj.set_params(**{target[len("loss__") :]: value})
            obj.validate()
        else:
            obj.set_params(**{target: value})
            if hasattr(obj, "_validate_params"):
                obj._validate_params()
    except (ValueError, TypeError) as exc:
        raise ConfigError(path, _as_expected(str(exc))) from None


# The two shapes of the library's parameter errors: the loss objects' and scikit-learn's.
_LIBRARY_ERRORS = (
    re.compile(r"^(?P<owner>\w+): \w+ must be (?P<expected>.+?); got (?P<got>.+?)\.?$", re.S),
    re.compile(
        r"^The '\w+' parameter of (?P<owner>\w+) must be (?P<expected>.+?)\. "
        r"Got (?P<got>.+?) instead\.$",
        re.S,
    ),
)


def _as_expected(message: str) -> str:
    """Reword a library parameter error as ``expected ... (Owner), got ...`` when it has a
    known shape; otherwise return it unchanged."""
    for pattern in _LIBRARY_ERRORS:
        match = pattern.match(message)
        if match:
            return f"expected {match['expected']} ({match['owner']}), got {match['got']}"
    return message


def _method(path: str, entry: Any) -> MethodSpec:
    _mapping(path, entry, ("name", "loss", "estimator", "params", "grid"))
    if ("loss" in entry) == ("estimator" in entry):
        raise _fail(path, "an object with exactly one of the keys 'loss' and 'estimator'", entry)
    params = _object(f"{path}.params", entry.get("params", {}))
    grid = _object(f"{path}.grid", entry.get("grid", {}))
    for name in set(params) & set(grid):
        raise ConfigError(f"{path}.grid.{name}", "also given in params; give it in one place")

    if "loss" in entry:
        from ..estimator import NeSCalClassifier
        from ..losses import LOSSES, get_loss

        loss = entry["loss"]
        if loss not in LOSSES:
            raise _fail(f"{path}.loss", f"a registered loss name, one of {sorted(LOSSES)}", loss)
        loss_names = set(get_loss(loss).get_params(deep=True))
        estimator_names = set(NeSCalClassifier().get_params(deep=False))

        def resolve(name: str, where: str) -> str:
            if name.startswith("loss__") and name[len("loss__") :] in loss_names:
                return name
            if name in loss_names:
                return f"loss__{name}"
            if name in estimator_names and name not in _RUNNER_PARAMS:
                return name
            if name in _RUNNER_PARAMS:
                raise ConfigError(where, "set by the runner (loss, seeds), not by the config")
            raise ConfigError(
                where,
                f"unknown parameter; expected a parameter of loss {loss!r} "
                f"{sorted(loss_names)} or of NeSCalClassifier {sorted(estimator_names - set(_RUNNER_PARAMS))}",
            )

        def make(target: str):
            return get_loss(loss) if target.startswith("loss__") else NeSCalClassifier(loss=loss)

        default_name, target_module = loss, None
    else:
        cls = _import_classifier(f"{path}.estimator", entry["estimator"])
        estimator_names = set(cls().get_params(deep=True))

        def resolve(name: str, where: str) -> str:
            if name == "random_state":
                raise ConfigError(where, "set by the runner from the seeds, not by the config")
            if name not in estimator_names:
                raise ConfigError(
                    where,
                    f"unknown parameter of {cls.__name__}; expected one of {sorted(estimator_names)}",
                )
            return name

        def make(target: str):
            return cls()

        loss, default_name, target_module = None, cls.__name__, _public_path(cls)

    targets = {}
    for name, value in params.items():
        targets[name] = resolve(name, f"{path}.params.{name}")
        _check_value(f"{path}.params.{name}", lambda t=targets[name]: make(t), targets[name], value)
    checked_grid = {}
    for name, values in grid.items():
        where = f"{path}.grid.{name}"
        targets[name] = resolve(name, where)
        if not isinstance(values, list) or not values:
            raise _fail(where, "a non-empty list of values", values)
        for i, value in enumerate(values):
            _check_value(f"{where}[{i}]", lambda t=targets[name]: make(t), targets[name], value)
        checked_grid[name] = tuple(values)
    name = entry.get("name", default_name)
    if not isinstance(name, str) or not name.replace("-", "_").replace(".", "_").isidentifier():
        raise _fail(f"{path}.name", "a name of letters, digits, '_', '-' or '.'", name)
    return MethodSpec(
        name=name,
        loss=loss,
        estimator=target_module,
        params=dict(params),
        grid=checked_grid,
        targets=targets,
    )


def _calibrator(path: str, entry: Any) -> CalibratorSpec:
    if isinstance(entry, str):
        entry = {"name": entry}
    _mapping(path, entry, ("name", "params"))
    name = entry.get("name")
    if name not in CALIBRATORS:
        raise _fail(
            f"{path}.name" if "params" in entry else path, f"one of {list(CALIBRATORS)}", name
        )
    cls = calibrator_class(name)
    if cls is None:
        raise ConfigError(
            path,
            f"calibrator {name!r} ({CALIBRATORS[name]}) is not available in this version of "
            f"nescal_sklearn.calibration; available: {available_calibrators()}",
        )
    params = _object(f"{path}.params", entry.get("params", {}))
    for key, value in params.items():
        if key == "estimator":
            raise ConfigError(f"{path}.params.{key}", "set by the runner (the fitted model)")

        def make():
            from sklearn.frozen import FrozenEstimator
            from sklearn.linear_model import LogisticRegression

            return cls(FrozenEstimator(LogisticRegression()))

        _check_value(f"{path}.params.{key}", make, key, value)
    return CalibratorSpec(name, dict(params))


def _splits(path: str, value: Any) -> Splits:
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


def _budget(path: str, value: Any) -> Budget:
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
