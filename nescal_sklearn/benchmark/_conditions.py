"""Evaluation conditions: the test rows shifted, and out-of-distribution (OOD) rows.

Each condition is built from the fit's preprocessed split (:class:`ConditionContext`),
with its own generator seeded by the fit's seed and the condition's name
(:func:`condition_rng`), so every method sees the same rows. Two families:

* :class:`ShiftCondition` corrupts the test rows; the fit records every metric of
  :data:`~._registry.METRICS` on them against the test labels. Besides the two fixed
  corruptions here (``gaussian_noise``, ``missing_entries``), :mod:`._corruptions` has
  the corruptions at severities 1-5.
* :class:`OODCondition` makes rows that belong to no class; the fit records every
  metric of :data:`~._registry.OOD_METRICS`, which tell the in-distribution rows (0)
  from them (1). Here: shuffled columns and scaled rows; :mod:`._ood_sets` has the rows
  of another dataset and the class held out of training.

One small class per kind; :data:`CONDITIONS` is the only place where a configuration
``kind`` becomes a class. A new kind is a new class; a new OOD score is a new entry of
``OOD_METRICS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._condition_base import (
    CLEAN,
    Condition,
    ConditionContext,
    ConditionSkipped,
    OODCondition,
    ShiftCondition,
    condition_rng,
)
from ._corruptions import (
    CategorySwap,
    Corruption,
    FeatureNoise,
    MissingValues,
    PCShift,
    ScaleDrift,
)
from ._ood_sets import ForeignRows, HeldOutClass
from ._specs import ConfigError, _fail, _is_real, _mapping

__all__ = [
    "CLEAN",
    "CONDITIONS",
    "CategorySwap",
    "Condition",
    "ConditionContext",
    "ConditionSkipped",
    "Corruption",
    "FeatureNoise",
    "ForeignRows",
    "GaussianNoise",
    "HeldOutClass",
    "MissingEntries",
    "MissingValues",
    "OODCondition",
    "PCShift",
    "ScaleDrift",
    "ScaledRows",
    "ShiftCondition",
    "ShuffledColumns",
    "condition_rng",
]


class _OfTestMatrix:
    """A condition whose rows depend on the preprocessed test matrix alone (:meth:`rows`)."""

    def apply(self, context: ConditionContext, rng: np.random.Generator) -> np.ndarray:
        return self.rows(context.X_test, rng)


def _real(path: str, entry: Mapping, key: str, default: float | None, low: float, high=None):
    value = entry.get(key, default)
    if value is None:
        raise ConfigError(f"{path}.{key}", "required key missing; expected a number")
    in_range = _is_real(value) and value > low and (high is None or value < high)
    if not in_range:
        interval = f"> {low:g}" if high is None else f"in ({low:g}, {high:g})"
        raise _fail(f"{path}.{key}", f"a number {interval}", value)
    return float(value)


def _one_number(cls, path: str, entry: Mapping, key: str, default, low: float, high=None):
    """The condition ``cls`` of an entry with one number, ``key`` (checked by :func:`_real`);
    its default name is ``<kind>_<number>``."""
    _mapping(path, entry, ("name", "kind", key))
    value = _real(path, entry, key, default, low, high)
    return cls(entry.get("name", f"{cls.kind}_{value:g}"), value)


@dataclass(frozen=True)
class GaussianNoise(_OfTestMatrix, ShiftCondition):
    """Independent N(0, sd²) noise added to every entry of the preprocessed test matrix.

    Numeric columns are standardised on the training rows, so ``sd`` is in units of
    each feature's training standard deviation.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.benchmark import GaussianNoise
    >>> X = np.zeros((1000, 3), dtype=np.float32)
    >>> noisy = GaussianNoise("noise", sd=0.5).rows(X, np.random.default_rng(0))
    >>> noisy.dtype, round(float(noisy.std()), 1)
    (dtype('float32'), 0.5)
    """

    name: str
    sd: float
    kind: ClassVar[str] = "gaussian_noise"

    @classmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> GaussianNoise:
        return _one_number(cls, path, entry, "sd", None, 0.0)

    def params(self) -> dict:
        return {"sd": self.sd}

    def rows(self, X_test, rng):
        noise = rng.standard_normal(X_test.shape).astype(X_test.dtype, copy=False)
        return X_test + np.asarray(self.sd, dtype=X_test.dtype) * noise


@dataclass(frozen=True)
class MissingEntries(_OfTestMatrix, ShiftCondition):
    """``round(fraction * size)`` entries of the preprocessed test matrix, drawn uniformly
    without replacement, set to 0: the training mean of a standardised column, "not this
    category" for a one-hot column. (The pipeline would impute the training median and
    the most frequent category instead: :class:`MissingValues` does that, at severities.)

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.benchmark import MissingEntries
    >>> X = np.ones((10, 10), dtype=np.float32)
    >>> int((MissingEntries("m", 0.2).rows(X, np.random.default_rng(0)) == 0).sum())
    20
    """

    name: str
    fraction: float
    kind: ClassVar[str] = "missing_entries"

    @classmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> MissingEntries:
        return _one_number(cls, path, entry, "fraction", None, 0.0, 1.0)

    def params(self) -> dict:
        return {"fraction": self.fraction}

    def rows(self, X_test, rng):
        out = X_test.copy()
        chosen = rng.choice(X_test.size, size=round(self.fraction * X_test.size), replace=False)
        out.flat[chosen] = 0
        return out


@dataclass(frozen=True)
class ShuffledColumns(_OfTestMatrix, OODCondition):
    """Every column of the test matrix permuted on its own: the marginals are kept, the
    dependencies between features destroyed."""

    name: str
    kind: ClassVar[str] = "shuffled_columns"

    @classmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> ShuffledColumns:
        _mapping(path, entry, ("name", "kind"))
        return cls(entry.get("name", cls.kind))

    def params(self) -> dict:
        return {}

    def rows(self, X_test, rng):
        return np.column_stack([rng.permutation(column) for column in X_test.T]).astype(
            X_test.dtype
        )


@dataclass(frozen=True)
class ScaledRows(_OfTestMatrix, OODCondition):
    """The test rows multiplied by ``factor``: far from the training data, where ReLU
    networks extrapolate with growing confidence (the generator is not used)."""

    name: str
    factor: float = 4.0
    kind: ClassVar[str] = "scaled_rows"

    @classmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> ScaledRows:
        return _one_number(cls, path, entry, "factor", 4.0, 0.0)

    def params(self) -> dict:
        return {"factor": self.factor}

    def rows(self, X_test, rng):
        return X_test * np.asarray(self.factor, dtype=X_test.dtype)


#: Configuration ``kind`` of a condition -> its class.
CONDITIONS: dict[str, type[Condition]] = {
    cls.kind: cls
    for cls in (
        GaussianNoise,
        MissingEntries,
        ShuffledColumns,
        ScaledRows,
        FeatureNoise,
        MissingValues,
        ScaleDrift,
        CategorySwap,
        PCShift,
        ForeignRows,
        HeldOutClass,
    )
}
