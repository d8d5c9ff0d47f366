"""The small parts of a benchmark configuration, as frozen dataclasses, and its error type.

Datasets, methods and evaluation conditions have their own modules (``_sources``,
``_methods``, ``_conditions``); the checks shared by every section live here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BenchmarkWarning",
    "Budget",
    "CalibratorSpec",
    "ConfigError",
    "ConfigWarning",
    "OpenMLSettings",
    "ReportSettings",
    "RunError",
    "Splits",
]


class ConfigError(ValueError):
    """An invalid benchmark configuration; ``path`` is the bad key (``""`` for the file).

    Examples
    --------
    >>> from nescal_sklearn.benchmark import ConfigError
    >>> str(ConfigError("budget.max_epochs", "expected int >= 1, got 0"))
    'budget.max_epochs: expected int >= 1, got 0'
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class RunError(RuntimeError):
    """A run (or a read of a results folder) that cannot go on: an output directory that
    holds records without resume, is in use by another run or cannot be written, an
    unreachable scheduler, an unreadable ``config.json`` (``nescal-bench`` exits 2)."""


class BenchmarkWarning(UserWarning):
    """Something a benchmark command noticed and worked around (``nescal-bench`` prints
    it as ``nescal-bench: warning: ...``)."""


class ConfigWarning(BenchmarkWarning):
    """A configuration that is valid but probably not what was meant; the message starts
    with the path of the key."""


def _show(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _fail(path: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(path, f"expected {expected}, got {_show(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(path: str, value: Any, low: int) -> int:
    if not _is_int(value) or value < low:
        raise _fail(path, f"int >= {low}", value)
    return value


def _object(path: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise _fail(path, "an object", value)
    return value


def _mapping(path: str, value: Any, allowed: tuple[str, ...]) -> Mapping:
    _object(path, value)
    for key in value:
        if key not in allowed:
            raise ConfigError(
                f"{path}.{key}" if path else key,
                f"unknown key; expected one of {sorted(allowed)}",
            )
    return value


def _optional_str(path: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise _fail(path, "a non-empty string", value)
    return value


@dataclass(frozen=True)
class CalibratorSpec:
    """A post-hoc calibrator applied to every fitted model.

    ``name`` is its class in the registry (``CALIBRATORS``); ``label``, when given, names
    its stage instead, so that one class can be configured more than once with
    different ``params``.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._specs import CalibratorSpec
    >>> CalibratorSpec("temperature", {}).stage
    'temperature'
    >>> spec = CalibratorSpec("temperature", {"guard": None}, label="temperature_plain")
    >>> spec.stage, spec.to_json()["label"]
    ('temperature_plain', 'temperature_plain')
    """

    name: str
    params: Mapping[str, Any]
    label: str | None = None

    @property
    def stage(self) -> str:
        """The stage this calibrator's results are recorded under: the label, else the name."""
        return self.label if self.label is not None else self.name

    def to_json(self) -> dict:
        """``{"name", "params"}``, plus ``"label"`` only when one is given (so that an
        entry without a label keeps the record keys it had before labels existed)."""
        out = {"name": self.name, "params": dict(self.params)}
        if self.label is not None:
            out["label"] = self.label
        return out


@dataclass(frozen=True)
class Splits:
    """Stratified fractions, and the validation share of an OpenML task's training fold."""

    train: float = 0.6
    validation: float = 0.2
    test: float = 0.2
    task_validation: float = 0.2

    def to_json(self) -> dict:
        return {
            "train": self.train,
            "validation": self.validation,
            "test": self.test,
            "task_validation": self.task_validation,
        }


@dataclass(frozen=True)
class Budget:
    """Training budget of the neural methods, a row cap for every dataset, threads per fit.

    ``recipe`` is the configuration's top-level ``"recipe"``: the training recipe the
    ``NeSCalClassifier`` methods take every setting the configuration does not state from.
    """

    max_epochs: int | None = None
    patience: int | None = None
    batch_size: int | None = None
    hidden_sizes: tuple[int, ...] | None = None
    max_rows: int | None = None
    threads: int = 1
    device: str | None = None
    recipe: str | None = None

    def estimator_params(self) -> dict:
        """The ``NeSCalClassifier`` parameters the budget sets (the ones given)."""
        names = ("recipe", "max_epochs", "patience", "batch_size", "hidden_sizes", "device")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def to_json(self) -> dict:
        """The ``"budget"`` section (the recipe is the configuration's own key)."""
        out = self.estimator_params()
        out.pop("recipe", None)
        if "hidden_sizes" in out:
            out["hidden_sizes"] = list(out["hidden_sizes"])
        out["max_rows"] = self.max_rows
        out["threads"] = self.threads
        return out


@dataclass(frozen=True)
class OpenMLSettings:
    """openml-python settings used while loading tasks (None keeps openml's own)."""

    cache_dir: str | None = None
    server: str | None = None
    n_retries: int | None = None

    def to_json(self) -> dict:
        return {"cache_dir": self.cache_dir, "server": self.server, "n_retries": self.n_retries}


@dataclass(frozen=True)
class ReportSettings:
    """The comparison references of the report, its random-graph controls, the tie tolerance.

    ``controls`` are the methods compared with ``reference`` in the report's
    random-graph section (by default the methods whose resolved estimator parameters
    have ``loss__graph == "random"`` at every grid point).
    """

    baseline: str | None = None
    reference: str | None = None
    controls: tuple[str, ...] = ()
    tie_tolerance: float = 0.01

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline,
            "reference": self.reference,
            "controls": list(self.controls),
            "tie_tolerance": self.tie_tolerance,
        }
