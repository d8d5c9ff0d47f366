"""Evaluation conditions: the test rows shifted, and out-of-distribution (OOD) rows.

Each condition is built from the fit's preprocessed split (:class:`ConditionContext`),
with its own generator seeded by the fit's seed and the condition's name (or a
corruption's family; :func:`condition_rng`), so every method sees the same rows. Two
families:

* :class:`ShiftCondition` corrupts the test rows; the fit records every metric of
  :data:`~._registry.METRICS` on them against the test labels: Gaussian noise, missing
  entries, and the corruptions at severities 1-5 (:class:`Corruption`).
* :class:`OODCondition` makes rows that belong to no class; the fit records every
  metric of :data:`~._registry.OOD_METRICS`, which tell the in-distribution rows (0)
  from them (1): shuffled columns, scaled rows, rows of another dataset, a class held
  out of training (which needs a model fitted without it).

One small frozen dataclass per kind; its fields are the configuration entry, checked by
pydantic from their annotations (:func:`parse_conditions`); :data:`CONDITIONS` is the
only place where a configuration ``kind`` becomes a class. A condition that cannot
apply to a dataset raises :class:`ConditionSkipped`; the fit records the reason under
``skipped_conditions``.

Corruptions: the generator is that of the corruption's *family* (its name without the
``@<severity>`` suffix): every severity of a family draws the same numbers and only
scales or thresholds them by its severity's entry of ``SCALES``, so entry by entry a
higher severity never changes fewer entries, nor moves one less. A configuration entry
names one severity (``"severity": 3``, default name ``<kind>@3``) or a family
(``"severities": [1, 2, 3, 4, 5]``, conditions ``<name>@1`` ... ``<name>@5``, default
name the kind). The numeric corruptions act on the numeric columns (standardised on the
training rows), the categorical one on the one-hot groups, the missing values on both;
a dataset without the columns a corruption acts on skips it.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import AfterValidator, ConfigDict, Field, Strict, StrictInt

from ._base import ConfigError, Name, parse, show
from ._data import Split
from ._registry import METRICS, OOD_METRICS, Metric, label_metrics, ood_metrics

#: Name of the unmodified test rows (``record["test"]``), which no condition may take.
CLEAN = "clean"

Positive = Annotated[float, Strict(), Field(gt=0)]
Fraction = Annotated[float, Strict(), Field(gt=0, lt=1)]
Severity = Annotated[StrictInt, Field(ge=1, le=5)]


def _distinct(values: list) -> list:
    if len(set(values)) != len(values):
        raise ValueError(f"expected distinct severities, got {show(values)}")
    return values


Severities = Annotated[list[Severity], Field(min_length=1), AfterValidator(_distinct)]


def condition_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of one condition: fixed by the fit's seed and the condition's name.

    Examples
    --------
    >>> from nescal_bench._conditions import condition_rng
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
    >>> from nescal_bench import stratified_split
    >>> from nescal_bench._conditions import ConditionContext
    >>> X = np.random.default_rng(0).normal(size=(200, 3)) * [1.0, 1.0, 0.1]
    >>> context = ConditionContext(stratified_split(X, np.arange(200) % 2, seed=0))
    >>> context.numeric.tolist(), context.train_sd.round(3).tolist()
    ([0, 1, 2], [1.0, 1.0, 1.0])
    """

    split: Split
    dataset: str = ""
    data_dir: str | None = None

    @property
    def X_test(self) -> np.ndarray:
        return self.split.X_test

    @cached_property
    def numeric(self) -> np.ndarray:
        """Positions of the numeric columns (every column, for a split without a layout)."""
        layout = self.split.layout
        if layout is None:
            return np.arange(self.split.X_train.shape[1])
        return np.asarray(layout.numeric, dtype=int)

    @cached_property
    def groups(self) -> tuple[np.ndarray, ...]:
        """Positions of the one-hot columns of each categorical feature."""
        layout = self.split.layout
        return () if layout is None else tuple(np.asarray(g, dtype=int) for g in layout.groups)

    @cached_property
    def imputed_row(self) -> np.ndarray:
        """What a missing value becomes in each column (see :class:`~._data.Split`)."""
        row = self.split.imputed_row
        return np.zeros(self.split.X_train.shape[1]) if row is None else row

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
        numeric = self.numeric
        X = self.split.X_train[:, numeric].astype(np.float64) - self.train_mean[numeric]
        values, vectors = np.linalg.eigh(X.T @ X / len(X))
        direction = vectors[:, -1]
        direction = direction * np.sign(direction[np.argmax(np.abs(direction))])
        return direction, float(np.sqrt(max(values[-1], 0.0)))


@dataclass(frozen=True)
class Condition:
    """One evaluation condition; subclasses are frozen dataclasses whose fields are the
    configuration entry (``name`` first; ``kind`` is the class's)."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    #: Configuration ``kind`` of the condition.
    kind: ClassVar[str]
    #: The metrics the condition records, and the one ``nescal-bench compare`` uses.
    metrics: ClassVar[Mapping[str, Metric]]
    default_metric: ClassVar[str]
    #: Whether the condition needs a model fitted without some training rows (then the
    #: fit calls :meth:`refit_split` instead of :meth:`apply`).
    refits: ClassVar[bool] = False

    name: Name

    def __deepcopy__(self, memo: dict) -> Condition:
        # Frozen, and every field is immutable: a copy would equal the original. pandas
        # deep-copies a frame's ``attrs`` (which hold the conditions) on every operation.
        return self

    def default_name(self) -> str:
        """The name of an entry that gives none: its kind, or ``<kind>_<value>`` for a
        kind with one number."""
        values = list(self.params().values())
        one_number = len(values) == 1 and isinstance(values[0], float)
        return f"{self.kind}_{values[0]:g}" if one_number else self.kind

    @property
    def stream(self) -> str:
        """What the condition's generator is seeded with besides the fit's seed."""
        return self.name

    def params(self) -> dict:
        """The condition's settings (its configuration entry less ``name`` and ``kind``)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

    def apply(self, context: ConditionContext, rng: np.random.Generator) -> np.ndarray:
        """The condition's rows; raises :class:`ConditionSkipped` where it cannot apply."""
        return self.rows(context.X_test, rng)

    def rows(self, X_test: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The rows of a condition that depends on the preprocessed test matrix alone."""
        raise NotImplementedError

    def score(self, y_test, proba_test: np.ndarray, proba: np.ndarray, classes) -> dict:
        """The recorded metrics, from the predictions on the clean test rows and on
        the condition's rows."""
        raise NotImplementedError

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


@dataclass(frozen=True)
class GaussianNoise(ShiftCondition):
    """Independent N(0, sd²) noise added to every entry of the preprocessed test matrix.

    Numeric columns are standardised on the training rows, so ``sd`` is in units of
    each feature's training standard deviation.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_bench import GaussianNoise
    >>> X = np.zeros((1000, 3), dtype=np.float32)
    >>> noisy = GaussianNoise("noise", sd=0.5).rows(X, np.random.default_rng(0))
    >>> noisy.dtype, round(float(noisy.std()), 1)
    (dtype('float32'), 0.5)
    """

    sd: Positive
    kind: ClassVar[str] = "gaussian_noise"

    def rows(self, X_test, rng):
        noise = rng.standard_normal(X_test.shape).astype(X_test.dtype, copy=False)
        return X_test + np.asarray(self.sd, dtype=X_test.dtype) * noise


@dataclass(frozen=True)
class MissingEntries(ShiftCondition):
    """``round(fraction * size)`` entries of the preprocessed test matrix, drawn uniformly
    without replacement, set to 0: the training mean of a standardised column, "not this
    category" for a one-hot column. (The pipeline would impute the training median and
    the most frequent category instead: :class:`MissingValues` does that, at severities.)

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_bench import MissingEntries
    >>> X = np.ones((10, 10), dtype=np.float32)
    >>> int((MissingEntries("m", 0.2).rows(X, np.random.default_rng(0)) == 0).sum())
    20
    """

    fraction: Fraction
    kind: ClassVar[str] = "missing_entries"

    def rows(self, X_test, rng):
        out = X_test.copy()
        chosen = rng.choice(X_test.size, size=round(self.fraction * X_test.size), replace=False)
        out.flat[chosen] = 0
        return out


@dataclass(frozen=True)
class ShuffledColumns(OODCondition):
    """Every column of the test matrix permuted on its own: the marginals are kept, the
    dependencies between features destroyed."""

    kind: ClassVar[str] = "shuffled_columns"

    def rows(self, X_test, rng):
        return np.column_stack([rng.permutation(column) for column in X_test.T]).astype(
            X_test.dtype
        )


@dataclass(frozen=True)
class ScaledRows(OODCondition):
    """The test rows multiplied by ``factor``: far from the training data, where ReLU
    networks extrapolate with growing confidence (the generator is not used)."""

    factor: Positive = 4.0
    kind: ClassVar[str] = "scaled_rows"

    def rows(self, X_test, rng):
        return X_test * np.asarray(self.factor, dtype=X_test.dtype)


def _numeric(context: ConditionContext) -> np.ndarray:
    numeric = context.numeric
    if not len(numeric):
        raise ConditionSkipped("the dataset has no numeric features")
    return numeric


@dataclass(frozen=True)
class Corruption(ShiftCondition):
    """A corruption of the test rows at one severity (1-5); see the module docstring.

    Subclasses set ``SCALES`` (one setting per severity) and :meth:`corrupt`.
    """

    severity: Severity
    SCALES: ClassVar[tuple]

    def default_name(self) -> str:
        return f"{self.kind}@{self.severity}"

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

    def apply(self, context: ConditionContext, rng: np.random.Generator) -> np.ndarray:
        return self.corrupt(context, rng)

    def corrupt(self, context: ConditionContext, rng: np.random.Generator) -> np.ndarray:
        """The corrupted copy of ``context.X_test`` (same dtype)."""
        raise NotImplementedError


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
    >>> from nescal_bench import stratified_split
    >>> from nescal_bench._conditions import ConditionContext, FeatureNoise
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
    becomes the split's ``imputed_row`` there, the standardised training median (the
    tabular preprocessor imputes the median before scaling; the training mean 0 for a
    plain array and a frame of numeric columns only); a missing categorical value becomes
    the one-hot of the most frequent training category (the preprocessor's imputer).

    ========  ====  ====  ====  ====  ====
    severity  1     2     3     4     5
    ========  ====  ====  ====  ====  ====
    ``q``     0.1   0.2   0.35  0.5   0.7
    ========  ====  ====  ====  ====  ====
    """

    kind: ClassVar[str] = "missing_values"
    SCALES: ClassVar[tuple] = (0.1, 0.2, 0.35, 0.5, 0.7)

    def corrupt(self, context, rng):
        X, numeric, groups = context.X_test, context.numeric, context.groups
        fill = context.imputed_row.astype(X.dtype)
        missing = rng.random((len(X), len(numeric) + len(groups))) < self.scale
        out = X.copy()
        out[:, numeric] = np.where(missing[:, : len(numeric)], fill[numeric], X[:, numeric])
        for g, group in enumerate(groups):
            out[np.ix_(np.flatnonzero(missing[:, len(numeric) + g]), group)] = fill[group]
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
        groups = context.groups
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


#: The local datasets :class:`ForeignRows` draws from by default, in order of preference:
#: 16, 57, 784 and 784 numeric columns.
FOREIGN_DATASETS = ("letter", "spambase", "mnist_784_5k", "fashion-mnist")


@functools.lru_cache(maxsize=2)
def _numeric_frame(name: str, data_dir: str | None):
    """The numeric columns of a local dataset, as stored (cached per process)."""
    from ._sources import load_local_dataset

    return load_local_dataset(name, data_dir).X.select_dtypes("number")


def _standardised(values: np.ndarray) -> np.ndarray:
    """Columns with missing values set to the column median, then mean 0 and sd 1 (a
    constant column: 0)."""
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values).any():
        with np.errstate(all="ignore"):
            medians = np.nan_to_num(np.nanmedian(values, axis=0))
        values = np.where(np.isnan(values), medians, values)
    sd = values.std(axis=0)
    return (values - values.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


@dataclass(frozen=True)
class ForeignRows(OODCondition):
    """Rows of another local dataset, mapped onto this dataset's numeric features.

    With ``d`` the number of numeric columns of this dataset, the first dataset of
    ``datasets`` that is not this one and has at least ``d`` numeric columns gives as
    many rows as the test set (drawn without replacement when it has enough, seeded). Its
    ``d`` numeric columns at evenly spaced positions (``j * (D - 1) // (d - 1)`` of its
    ``D``) are taken, missing values set to the column median, standardised over the
    drawn rows, and written into this dataset's (standardised) numeric columns in order.
    The one-hot columns of a mixed dataset come from the clean test rows in a random
    order, so only the numeric part is foreign. Skipped (and noted in the record) for a
    dataset without numeric columns, or when no listed dataset has enough columns.

    Examples
    --------
    >>> from nescal_bench._conditions import ForeignRows
    >>> ForeignRows("ood_foreign").to_json()["datasets"]
    ['letter', 'spambase', 'mnist_784_5k', 'fashion-mnist']
    """

    datasets: Annotated[tuple[Name, ...], Field(min_length=1)] = FOREIGN_DATASETS
    kind: ClassVar[str] = "foreign_rows"

    def source(self, context: ConditionContext) -> str:
        """The dataset the rows come from; :class:`ConditionSkipped` when none fits."""
        d = len(context.numeric)
        if d == 0:
            raise ConditionSkipped("the dataset has no numeric features")
        for name in self.datasets:
            if name != context.dataset and _numeric_frame(name, context.data_dir).shape[1] >= d:
                return name
        raise ConditionSkipped(
            f"no dataset of {list(self.datasets)} other than {context.dataset!r} has "
            f"{d} numeric columns or more"
        )

    def apply(self, context, rng):
        numeric = context.numeric
        frame = _numeric_frame(self.source(context), context.data_dir)
        n, d, total = len(context.X_test), len(numeric), frame.shape[1]
        rows = rng.choice(len(frame), size=n, replace=len(frame) < n)
        columns = np.arange(d) * (total - 1) // max(d - 1, 1)
        foreign = _standardised(frame.iloc[rows, columns].to_numpy(dtype=np.float64))
        out = context.X_test[rng.permutation(n)]
        out[:, numeric] = foreign.astype(out.dtype)
        return out


@dataclass(frozen=True)
class HeldOutClass(OODCondition):
    """One class held out of training: its test rows are the out-of-distribution rows.

    The held-out class is the most frequent class of the training rows (ties: the
    smallest label). The fit trains a second model, like the first, on the training
    and validation rows of the other classes, calibrates it on those validation rows,
    and scores its predictions on the test rows of the other classes (in-distribution)
    against those on the held-out class's test rows. A dataset with fewer than 3 classes
    (holding one out would leave one) is skipped, and the record says so. The generator
    is not used.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_bench import stratified_split
    >>> from nescal_bench._conditions import HeldOutClass
    >>> y = np.repeat([0, 1, 2], [50, 30, 20])
    >>> split = stratified_split(np.arange(200.0).reshape(100, 2), y, seed=0)
    >>> reduced = HeldOutClass("held_out_class").refit_split(split)
    >>> reduced.classes.tolist(), sorted(set(reduced.y_train.tolist()))
    ([1, 2], [1, 2])
    """

    kind: ClassVar[str] = "held_out_class"
    refits: ClassVar[bool] = True

    @staticmethod
    def held_out(split: Split):
        """The held-out label; :class:`ConditionSkipped` with fewer than 3 classes."""
        labels, counts = np.unique(split.y_train, return_counts=True)
        if len(labels) < 3:
            raise ConditionSkipped(
                f"{len(labels)} classes: holding one out would leave fewer than 2"
            )
        return labels[np.argmax(counts)]

    def refit_split(self, split: Split) -> Split:
        """The split without the held-out class (training, validation and test rows)."""
        label = self.held_out(split)
        train, val, test = split.y_train != label, split.y_val != label, split.y_test != label
        return replace(
            split,
            X_train=split.X_train[train],
            y_train=split.y_train[train],
            X_val=split.X_val[val],
            y_val=split.y_val[val],
            X_test=split.X_test[test],
            y_test=split.y_test[test],
            classes=split.classes[split.classes != label],
        )

    def apply(self, context, rng):
        """The test rows of the held-out class."""
        return context.X_test[context.split.y_test == self.held_out(context.split)]


#: Configuration ``kind`` of a condition -> its class.
# A data table: the classes wrapped at 100 columns, not one per line (fmt: skip).
CONDITIONS: dict[str, type[Condition]] = {
    cls.kind: cls
    for cls in (GaussianNoise, MissingEntries, ShuffledColumns, ScaledRows, FeatureNoise,
                MissingValues, ScaleDrift, CategorySwap, PCShift, ForeignRows, HeldOutClass)
}  # fmt: skip


def _entries(i: int, entry: dict) -> list[dict]:
    """The condition entries of configuration entry ``i``: itself, or one per severity of
    a corruption's ``severities``."""
    path, cls = f"conditions[{i}]", CONDITIONS[entry["kind"]]
    fields_ = {k: v for k, v in entry.items() if k != "kind"}
    if not (issubclass(cls, Corruption) and "severities" in fields_):
        return [fields_]
    if "severity" in fields_:
        raise ConfigError(f"{path}.severity", "give either 'severity' or 'severities', not both")
    family = parse(Name, fields_.pop("name", cls.kind), f"{path}.name")
    severities = parse(Severities, fields_.pop("severities"), f"{path}.severities")
    return [{**fields_, "name": f"{family}@{s}", "severity": s} for s in severities]


def parse_conditions(value: Any) -> tuple[Condition, ...]:
    """The ``conditions`` section of a configuration (a list of entries).

    Raises
    ------
    ConfigError
        With the path of the first bad key (``conditions[0].sd``).

    Examples
    --------
    >>> from nescal_bench._conditions import parse_conditions
    >>> [c.name for c in parse_conditions([{"kind": "feature_noise", "severities": [1, 2]}])]
    ['feature_noise@1', 'feature_noise@2']
    """
    found: dict[str, tuple[int, Condition]] = {}
    for i, entry in enumerate(parse(list[dict[str, Any]], value, "conditions")):
        if entry.get("kind") not in CONDITIONS:
            raise ConfigError(
                f"conditions[{i}].kind",
                f"expected one of {list(CONDITIONS)}, got {show(entry.get('kind'))}",
            )
        for item in _entries(i, entry):
            condition = parse(CONDITIONS[entry["kind"]], {"name": "_", **item}, f"conditions[{i}]")
            if "name" not in item:
                condition = replace(condition, name=condition.default_name())
            if condition.name == CLEAN:
                raise ConfigError(
                    f"conditions[{i}].name",
                    f"{CLEAN!r} names the unmodified test rows; pick another",
                )
            if condition.name in found:
                raise ConfigError(
                    f"conditions[{i}].name",
                    f"duplicate condition name {condition.name!r} (also conditions[{found[condition.name][0]}])",
                )
            found[condition.name] = (i, condition)
    return tuple(condition for _, condition in found.values())
