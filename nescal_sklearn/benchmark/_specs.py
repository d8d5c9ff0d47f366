"""The parts of a benchmark configuration, as frozen dataclasses, and its error type."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import product
from typing import Any

__all__ = [
    "Budget",
    "CalibratorSpec",
    "ConfigError",
    "DatasetSpec",
    "MethodSpec",
    "OpenMLSettings",
    "ReportSettings",
    "Splits",
]

SKLEARN_DATASETS = ("iris", "wine", "breast_cancer", "digits")
DATASET_KINDS = ("local", "sklearn", "openml_task", "openml_suite")
_RUNNER_PARAMS = ("random_state", "verbose", "loss")


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


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset entry: ``kind`` is local, sklearn, openml_task or openml_suite.

    ``imbalance`` (local and scikit-learn sets only) makes the set long-tailed: see
    :func:`nescal_sklearn.benchmark.make_imbalanced`.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import DatasetSpec
    >>> DatasetSpec("openml_task", 31).name
    'openml-task-31'
    """

    kind: str
    ref: str | int
    imbalance: float | None = None

    @property
    def name(self) -> str:
        """Name used in records, tables and file names.

        Examples
        --------
        >>> from nescal_sklearn.benchmark import DatasetSpec
        >>> DatasetSpec("local", "letter", imbalance=0.05).name
        'letter-imbalance-0.05'
        """
        prefix = {"local": "", "sklearn": "sklearn-", "openml_task": "openml-task-"}
        name = f"{prefix.get(self.kind, 'openml-suite-')}{self.ref}"
        return name if self.imbalance is None else f"{name}-imbalance-{self.imbalance:g}"

    def to_json(self) -> dict:
        out: dict[str, Any] = {self.kind: self.ref}
        if self.imbalance is not None:
            out["imbalance"] = self.imbalance
        return out


@dataclass(frozen=True)
class MethodSpec:
    """A method: a ``NeSCalClassifier`` loss or a scikit-learn classifier, with a grid.

    ``params`` and ``grid`` use the configuration's names; ``targets`` maps each of
    them to the estimator parameter it sets (``n_neighbors`` -> ``loss__n_neighbors``).
    """

    name: str
    loss: str | None = None
    estimator: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, tuple] = field(default_factory=dict)
    targets: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_neural(self) -> bool:
        """True for a ``NeSCalClassifier`` method."""
        return self.loss is not None

    @property
    def is_random_graph_control(self) -> bool:
        """True for NeSCal with ``graph="random"`` at every grid point."""
        if self.loss != "nescal":
            return False
        values = self.grid.get("graph", (self.params.get("graph", "knn"),))
        return all(value == "random" for value in values)

    def points(self) -> list[dict]:
        """The grid points (configuration names), in a stable order.

        Examples
        --------
        >>> from nescal_sklearn.benchmark import MethodSpec
        >>> MethodSpec("ls", loss="label_smoothing", grid={"epsilon": (0.05, 0.1)}).points()
        [{'epsilon': 0.05}, {'epsilon': 0.1}]
        """
        names = sorted(self.grid)
        return [
            dict(zip(names, values, strict=True))
            for values in product(*(self.grid[n] for n in names))
        ]

    def estimator_params(self, point: Mapping[str, Any]) -> dict:
        """Estimator parameters (fixed ones and ``point``), keyed by estimator names."""
        merged = {**self.params, **point}
        return {self.targets.get(name, name): value for name, value in sorted(merged.items())}

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name}
        out["loss" if self.is_neural else "estimator"] = self.loss or self.estimator
        out["params"] = dict(self.params)
        out["grid"] = {name: list(values) for name, values in self.grid.items()}
        return out


@dataclass(frozen=True)
class CalibratorSpec:
    """A post-hoc calibrator applied to every fitted model (name from the registry)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "params": dict(self.params)}


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
    """Training budget of the neural methods, and a row cap for every dataset."""

    max_epochs: int | None = None
    patience: int | None = None
    batch_size: int | None = None
    hidden_sizes: tuple[int, ...] | None = None
    max_rows: int | None = None
    threads: int = 1
    device: str | None = None

    def estimator_params(self) -> dict:
        """The ``NeSCalClassifier`` parameters the budget sets (the ones given)."""
        names = ("max_epochs", "patience", "batch_size", "hidden_sizes", "device")
        out = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if "hidden_sizes" in out:
            out["hidden_sizes"] = list(out["hidden_sizes"])
        return out

    def to_json(self) -> dict:
        out = self.estimator_params()
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
    """Which methods are the comparison references, and the relative tie tolerance."""

    baseline: str | None = None
    reference: str | None = None
    tie_tolerance: float = 0.01

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline,
            "reference": self.reference,
            "tie_tolerance": self.tie_tolerance,
        }
