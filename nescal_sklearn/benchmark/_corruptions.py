"""Tabular corruptions at severities 1-5: evaluation conditions of the benchmark runner.

Each corruption is a function of the clean preprocessed test rows, the training
statistics of the fit (:class:`~._condition_base.ConditionContext`) and a generator.
The generator is that of the corruption's *family* (its name without the ``@<severity>``
suffix), not of one severity: every severity of a family draws the same numbers and
only scales or thresholds them by its severity's entry of ``SCALES``. So, entry by entry,
a higher severity never changes fewer entries, nor moves one less (the suite checks it).

A configuration entry names one severity (``"severity": 3``, default name
``<kind>@3``) or a family (``"severities": [1, 2, 3, 4, 5]``, conditions
``<name>@1`` ... ``<name>@5``, default name the kind).

The numeric corruptions act on the numeric columns (standardised on the training rows),
the categorical one on the one-hot groups, the missing values on both; a dataset without
the columns a corruption acts on skips it, and the record says so under
``skipped_conditions`` (rather than recording the clean rows as "corrupted", which would
dilute every comparison pooled over datasets).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._condition_base import ConditionContext, ConditionSkipped, ShiftCondition
from ._specs import ConfigError, _fail, _is_int, _mapping

__all__ = [
    "SEVERITIES",
    "CategorySwap",
    "Corruption",
    "FeatureNoise",
    "MissingValues",
    "PCShift",
    "ScaleDrift",
]

#: The severities of a corruption.
SEVERITIES = (1, 2, 3, 4, 5)


def _severity(path: str, value: Any) -> int:
    if not _is_int(value) or value not in SEVERITIES:
        raise _fail(path, f"an int in {SEVERITIES[0]}..{SEVERITIES[-1]}", value)
    return value


def _severities(path: str, value: Any) -> tuple[int, ...]:
    ok = (
        isinstance(value, list)
        and value
        and all(_is_int(v) and v in SEVERITIES for v in value)
        and len(set(value)) == len(value)
    )
    if not ok:
        expected = f"a non-empty list of distinct ints in {SEVERITIES[0]}..{SEVERITIES[-1]}"
        raise _fail(path, expected, value)
    return tuple(value)


def _numeric(context: ConditionContext) -> np.ndarray:
    numeric = context.layout.numeric
    if not len(numeric):
        raise ConditionSkipped("the dataset has no numeric features")
    return numeric


@dataclass(frozen=True)
class Corruption(ShiftCondition):
    """A corruption of the test rows at one severity (1-5); see the module docstring.

    Subclasses set ``SCALES`` (one setting per severity) and :meth:`corrupt`.
    """

    name: str
    severity: int
    SCALES: ClassVar[tuple]

    @property
    def scale(self):
        """This severity's entry of ``SCALES``."""
        return self.SCALES[self.severity - 1]

    @property
    def family(self) -> str:
        """The name without its ``@<severity>`` suffix (the name itself if it has none):
        the severities of one family share their generator."""
        suffix = f"@{self.severity}"
        return self.name[: -len(suffix)] if self.name.endswith(suffix) else self.name

    @property
    def stream(self) -> str:
        """What the generator is seeded with besides the fit's seed: the family."""
        return self.family

    @classmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> Corruption:
        _mapping(path, entry, ("name", "kind", "severity"))
        if "severity" not in entry:
            raise ConfigError(
                f"{path}.severity",
                f"required key missing; expected an int in {SEVERITIES[0]}..{SEVERITIES[-1]} "
                "(or 'severities', a list of them)",
            )
        severity = _severity(f"{path}.severity", entry["severity"])
        return cls(entry.get("name", f"{cls.kind}@{severity}"), severity)

    @classmethod
    def expand(cls, path: str, entry: Mapping[str, Any]) -> tuple[Corruption, ...]:
        if "severities" not in entry:
            return (cls.from_config(path, entry),)
        if "severity" in entry:
            raise ConfigError(
                f"{path}.severity", "give either 'severity' or 'severities', not both"
            )
        _mapping(path, entry, ("name", "kind", "severities"))
        severities = _severities(f"{path}.severities", entry["severities"])
        family = entry.get("name", cls.kind)
        return tuple(cls(f"{family}@{s}", s) for s in severities)

    def params(self) -> dict:
        return {"severity": self.severity}

    def apply(self, context: ConditionContext, rng: np.random.Generator) -> np.ndarray:
        return self.corrupt(context, rng)

    @abstractmethod
    def corrupt(self, context: ConditionContext, rng: np.random.Generator) -> np.ndarray:
        """The corrupted copy of ``context.X_test`` (same dtype)."""


@dataclass(frozen=True)
class FeatureNoise(Corruption):
    """Gaussian noise on every numeric entry, in units of the feature's training sd.

    Entry ``(i, j)`` of a numeric column becomes ``x_ij + s * sd_j * z_ij`` with
    ``z_ij ~ N(0, 1)`` drawn once per family and ``sd_j`` the training standard deviation
    of the column (1 for a standardised column; 0 for a constant one, which stays put).
    One-hot columns are left alone.

    ========  ====  ====  ====  ====  ====
    severity  1     2     3     4     5
    ========  ====  ====  ====  ====  ====
    ``s``     0.25  0.5   1.0   1.5   2.0
    ========  ====  ====  ====  ====  ====

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.benchmark import stratified_split
    >>> from nescal_sklearn.benchmark._conditions import ConditionContext, FeatureNoise
    >>> X = np.random.default_rng(0).normal(size=(3000, 2))
    >>> context = ConditionContext(stratified_split(X, np.arange(3000) % 2, seed=0))
    >>> noisy = FeatureNoise("noise@3", 3).apply(context, np.random.default_rng(0))
    >>> round(float((noisy - context.X_test).std()), 1)
    1.0
    """

    kind: ClassVar[str] = "feature_noise"
    SCALES: ClassVar[tuple] = (0.25, 0.5, 1.0, 1.5, 2.0)

    def corrupt(self, context, rng):
        numeric = _numeric(context)
        X = context.X_test
        noise = rng.standard_normal((len(X), len(numeric)))
        out = X.copy()
        moved = X[:, numeric] + self.scale * context.train_sd[numeric] * noise
        out[:, numeric] = moved.astype(X.dtype)
        return out


@dataclass(frozen=True)
class MissingValues(Corruption):
    """A share of the feature values set missing and imputed the way the pipeline does.

    The features are the numeric columns and the categorical features (a one-hot group
    is one value). A value is missing when its uniform draw ``u ~ U(0, 1)`` (one per row
    and feature, drawn once per family) is below the severity's share ``q``. The rows are
    not sent through the fitted preprocessing again: the imputed value is written in the
    preprocessed matrix directly, which gives the same matrix. A missing numeric entry
    becomes its :class:`~._data.ColumnLayout` ``numeric_fill``, the standardised training
    median (the tabular preprocessor imputes the median before scaling; the training mean
    0 for a plain array, which has no imputer); a missing categorical value becomes the
    one-hot of the most frequent training category (the preprocessor's imputer).

    ========  ====  ====  ====  ====  ====
    severity  1     2     3     4     5
    ========  ====  ====  ====  ====  ====
    ``q``     0.1   0.2   0.35  0.5   0.7
    ========  ====  ====  ====  ====  ====
    """

    kind: ClassVar[str] = "missing_values"
    SCALES: ClassVar[tuple] = (0.1, 0.2, 0.35, 0.5, 0.7)

    def corrupt(self, context, rng):
        layout = context.layout
        X = context.X_test
        n_numeric = len(layout.numeric)
        missing = rng.random((len(X), n_numeric + len(layout.groups))) < self.scale
        out = X.copy()
        if n_numeric:
            fill = layout.numeric_fill.astype(X.dtype)
            out[:, layout.numeric] = np.where(missing[:, :n_numeric], fill, X[:, layout.numeric])
        for g, (group, filled) in enumerate(zip(layout.groups, layout.group_fill, strict=True)):
            rows = np.flatnonzero(missing[:, n_numeric + g])
            one_hot = np.zeros(len(group), dtype=X.dtype)
            if filled >= 0:
                one_hot[filled] = 1
            out[np.ix_(rows, group)] = one_hot
        return out


@dataclass(frozen=True)
class ScaleDrift(Corruption):
    """A random subset of the numeric features rescaled around their training mean.

    Per family the numeric features are put in a random order and each is given a random
    direction ``d_j`` in {-1, +1}; severity ``(q, g)`` rescales the first
    ``ceil(q * n_numeric)`` of them: ``x_ij -> m_j + g ** d_j * (x_ij - m_j)`` with
    ``m_j`` the training mean (0 for a standardised column). The spread of a feature
    grows (``d_j = +1``) or shrinks (``d_j = -1``) by the factor ``g``; its training mean
    stays (a location shift is :class:`PCShift`'s).

    ========  ====  ====  ====  ====  ====
    severity  1     2     3     4     5
    ========  ====  ====  ====  ====  ====
    ``q``     0.2   0.4   0.6   0.8   1.0
    ``g``     2     3     4     5     6
    ========  ====  ====  ====  ====  ====
    """

    kind: ClassVar[str] = "scale_drift"
    SCALES: ClassVar[tuple] = ((0.2, 2.0), (0.4, 3.0), (0.6, 4.0), (0.8, 5.0), (1.0, 6.0))

    def corrupt(self, context, rng):
        numeric = _numeric(context)
        order = rng.permutation(len(numeric))
        directions = rng.choice([-1.0, 1.0], size=len(numeric))
        share, factor = self.scale
        chosen = order[: math.ceil(share * len(numeric))]
        columns = numeric[chosen]
        X = context.X_test
        mean = context.train_mean[columns]
        out = X.copy()
        moved = mean + factor ** directions[chosen] * (X[:, columns] - mean)
        out[:, columns] = moved.astype(X.dtype)
        return out


@dataclass(frozen=True)
class CategorySwap(Corruption):
    """A share of the categorical values swapped to another category seen in training.

    For each row and categorical feature, one uniform draw ``u`` and one replacement,
    uniform over the feature's other one-hot columns, are drawn per family; the value is
    replaced when ``u`` is below the severity's share ``q`` (a row whose category was
    unseen, all zeros, gets any column). A feature with a single training category
    keeps its value.

    ========  ====  ====  ====  ====  ====
    severity  1     2     3     4     5
    ========  ====  ====  ====  ====  ====
    ``q``     0.1   0.25  0.4   0.6   0.8
    ========  ====  ====  ====  ====  ====
    """

    kind: ClassVar[str] = "category_swap"
    SCALES: ClassVar[tuple] = (0.1, 0.25, 0.4, 0.6, 0.8)

    def corrupt(self, context, rng):
        groups = context.layout.groups
        if not groups:
            raise ConditionSkipped("the dataset has no categorical features")
        X = context.X_test
        n = len(X)
        draws = rng.random((n, len(groups)))
        replacements = rng.random((n, len(groups)))
        out = X.copy()
        for g, group in enumerate(groups):
            if len(group) < 2:
                continue
            block = X[:, group]
            current = np.where(block.max(axis=1) > 0, np.argmax(block, axis=1), -1)
            seen = current >= 0
            others = np.where(seen, len(group) - 1, len(group))
            new = np.floor(replacements[:, g] * others).astype(int)
            new = new + (seen & (new >= current))  # skip the current category
            rows = np.flatnonzero(draws[:, g] < self.scale)
            swapped = np.zeros((len(rows), len(group)), dtype=X.dtype)
            swapped[np.arange(len(rows)), new[rows]] = 1
            out[np.ix_(rows, group)] = swapped
        return out


@dataclass(frozen=True)
class PCShift(Corruption):
    """Every test row moved along the first principal component of the training rows.

    The numeric part of each row gets ``+ d * c * sd_1 * v_1``: ``v_1`` is the first
    principal direction of the training rows' numeric columns, ``sd_1`` the standard
    deviation of the training rows along it, and the direction ``d`` in {-1, +1} is
    drawn once per family.

    ========  ====  ====  ====  ====  ====
    severity  1     2     3     4     5
    ========  ====  ====  ====  ====  ====
    ``c``     0.5   1     1.5   2     3
    ========  ====  ====  ====  ====  ====
    """

    kind: ClassVar[str] = "pc_shift"
    SCALES: ClassVar[tuple] = (0.5, 1.0, 1.5, 2.0, 3.0)

    def corrupt(self, context, rng):
        numeric = _numeric(context)
        direction = rng.choice([-1.0, 1.0])
        vector, sd = context.first_component
        X = context.X_test
        out = X.copy()
        moved = X[:, numeric] + direction * self.scale * sd * vector
        out[:, numeric] = moved.astype(X.dtype)
        return out
