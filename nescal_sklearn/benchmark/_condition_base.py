"""What every evaluation condition shares: its generator, its inputs, its base classes.

A condition builds its rows from a :class:`ConditionContext` (the fit's preprocessed
split, the column layout of the preprocessing, the dataset's name and where the local
datasets live) with its own generator (:func:`condition_rng`), so every method sees the
same rows. One that cannot apply to a dataset (a categorical corruption of a dataset
without categorical features) raises :class:`ConditionSkipped`; the fit then records the
reason under ``skipped_conditions`` instead of metrics.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ._data import ColumnLayout, Split
from ._registry import METRICS, OOD_METRICS, Metric, label_metrics, ood_metrics

__all__ = [
    "CLEAN",
    "Condition",
    "ConditionContext",
    "ConditionSkipped",
    "OODCondition",
    "ShiftCondition",
    "condition_rng",
]

#: Name of the unmodified test rows (``record["test"]``), which no condition may take.
CLEAN = "clean"


def condition_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of one condition: fixed by the fit's seed and the condition's name.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._conditions import condition_rng
    >>> first, again = condition_rng(3, "noise_0.5"), condition_rng(3, "noise_0.5")
    >>> bool(first.integers(100) == again.integers(100))
    True
    """
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


class ConditionSkipped(Exception):
    """A condition that does not apply to this dataset; the message says why."""


@dataclass
class ConditionContext:
    """What a condition builds its rows from; training statistics are computed once.

    Parameters
    ----------
    split : Split
        The fit's preprocessed split.
    dataset : str, default=""
        The dataset's name (a condition drawing rows of another dataset avoids it).
    data_dir : str or None, default=None
        Folder of the local datasets (None: ``$NESCAL_DATA_DIR`` or ``../shared/data``).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.benchmark import stratified_split
    >>> from nescal_sklearn.benchmark._condition_base import ConditionContext
    >>> X = np.random.default_rng(0).normal(size=(200, 3)) * [1.0, 1.0, 0.1]
    >>> context = ConditionContext(stratified_split(X, np.arange(200) % 2, seed=0))
    >>> context.layout.numeric.tolist(), context.train_sd.round(3).tolist()
    ([0, 1, 2], [1.0, 1.0, 1.0])
    """

    split: Split
    dataset: str = ""
    data_dir: str | None = None

    @property
    def X_test(self) -> np.ndarray:
        return self.split.X_test

    @cached_property
    def layout(self) -> ColumnLayout:
        """The split's column layout (every column numeric when it has none)."""
        layout = self.split.layout
        return ColumnLayout.all_numeric(self.split.X_train.shape[1]) if layout is None else layout

    @cached_property
    def train_mean(self) -> np.ndarray:
        """Mean of each preprocessed column over the training rows (float64)."""
        return self.split.X_train.mean(axis=0, dtype=np.float64)

    @cached_property
    def train_sd(self) -> np.ndarray:
        """Standard deviation (ddof=0) of each preprocessed column over the training rows."""
        return self.split.X_train.std(axis=0, dtype=np.float64)

    @cached_property
    def first_component(self) -> tuple[np.ndarray, float]:
        """The first principal direction of the training rows' numeric columns (unit
        vector, sign fixed so that its largest entry is positive) and the standard
        deviation of the training rows along it."""
        numeric = self.layout.numeric
        X = self.split.X_train[:, numeric].astype(np.float64) - self.train_mean[numeric]
        values, vectors = np.linalg.eigh(X.T @ X / len(X))
        direction = vectors[:, -1]
        direction = direction * np.sign(direction[np.argmax(np.abs(direction))])
        return direction, float(np.sqrt(max(values[-1], 0.0)))


class Condition(ABC):
    """One evaluation condition; subclasses are frozen dataclasses with a ``name`` field."""

    #: Configuration ``kind`` of the condition.
    kind: ClassVar[str]
    #: The metrics the condition records, and the one ``nescal-bench compare`` uses.
    metrics: ClassVar[Mapping[str, Metric]]
    default_metric: ClassVar[str]
    #: Whether the condition needs a model fitted without some training rows (then the
    #: fit calls :meth:`refit_split` instead of :meth:`apply`).
    refits: ClassVar[bool] = False

    name: str

    @classmethod
    @abstractmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> Condition:
        """Validate a configuration entry of this kind."""

    @classmethod
    def expand(cls, path: str, entry: Mapping[str, Any]) -> tuple[Condition, ...]:
        """The conditions a configuration entry stands for (one, unless it lists several
        severities)."""
        return (cls.from_config(path, entry),)

    @property
    def stream(self) -> str:
        """What the condition's generator is seeded with besides the fit's seed
        (:func:`condition_rng`): its name, unless the kind says otherwise."""
        return self.name

    @abstractmethod
    def params(self) -> dict:
        """The condition's settings (its configuration entry less ``name`` and ``kind``)."""

    @abstractmethod
    def apply(self, context: ConditionContext, rng: np.random.Generator) -> np.ndarray:
        """The condition's rows; raises :class:`ConditionSkipped` where it cannot apply."""

    @abstractmethod
    def score(self, y_test, proba_test: np.ndarray, proba: np.ndarray, classes) -> dict:
        """The recorded metrics, from the predictions on the clean test rows and on
        the condition's rows."""

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, **self.params()}


class ShiftCondition(Condition):
    """The test rows, corrupted; scored like the test rows (every metric of ``METRICS``)."""

    metrics = METRICS
    default_metric = "nll"

    def score(self, y_test, proba_test, proba, classes) -> dict:
        return label_metrics(y_test, proba, classes)


class OODCondition(Condition):
    """Rows of no class; scored against the in-distribution rows (the clean test rows)."""

    metrics = OOD_METRICS
    default_metric = "auroc"

    def score(self, y_test, proba_test, proba, classes) -> dict:
        return ood_metrics(proba_test, proba)
