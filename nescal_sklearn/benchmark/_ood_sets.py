"""Out-of-distribution sets that need more than the test matrix: rows of another dataset,
and a class held out of training (which needs a model fitted without it)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._condition_base import ConditionContext, ConditionSkipped, OODCondition
from ._data import Split
from ._specs import _fail, _mapping

__all__ = ["FOREIGN_DATASETS", "ForeignRows", "HeldOutClass"]

#: The local datasets :class:`ForeignRows` draws from by default, in order of preference:
#: 16, 57, 784 and 784 numeric columns.
FOREIGN_DATASETS = ("letter", "spambase", "mnist_784_5k", "fashion-mnist")


@functools.lru_cache(maxsize=2)
def _numeric_frame(name: str, data_dir: str | None):
    """The numeric columns of a local dataset, as stored (cached per process)."""
    from ._datasets import load_local_dataset

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
    >>> from nescal_sklearn.benchmark._conditions import ForeignRows
    >>> ForeignRows("ood_foreign").to_json()["datasets"]
    ['letter', 'spambase', 'mnist_784_5k', 'fashion-mnist']
    """

    name: str
    datasets: tuple[str, ...] = FOREIGN_DATASETS
    kind: ClassVar[str] = "foreign_rows"

    @classmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> ForeignRows:
        _mapping(path, entry, ("name", "kind", "datasets"))
        datasets = entry.get("datasets", list(FOREIGN_DATASETS))
        ok = isinstance(datasets, list) and datasets
        if not ok or not all(isinstance(d, str) and d for d in datasets):
            raise _fail(f"{path}.datasets", "a non-empty list of local dataset names", datasets)
        return cls(entry.get("name", cls.kind), tuple(datasets))

    def params(self) -> dict:
        return {"datasets": list(self.datasets)}

    def source(self, context: ConditionContext) -> str:
        """The dataset the rows come from; :class:`ConditionSkipped` when none fits."""
        d = len(context.layout.numeric)
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
        numeric = context.layout.numeric
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
    >>> from nescal_sklearn.benchmark import stratified_split
    >>> from nescal_sklearn.benchmark._conditions import HeldOutClass
    >>> y = np.repeat([0, 1, 2], [50, 30, 20])
    >>> split = stratified_split(np.arange(200.0).reshape(100, 2), y, seed=0)
    >>> reduced = HeldOutClass("held_out_class").refit_split(split)
    >>> reduced.classes.tolist(), sorted(set(reduced.y_train.tolist()))
    ([1, 2], [1, 2])
    """

    name: str
    kind: ClassVar[str] = "held_out_class"
    refits: ClassVar[bool] = True

    @classmethod
    def from_config(cls, path: str, entry: Mapping[str, Any]) -> HeldOutClass:
        _mapping(path, entry, ("name", "kind"))
        return cls(entry.get("name", cls.kind))

    def params(self) -> dict:
        return {}

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
        return Split(
            X_train=split.X_train[train],
            y_train=split.y_train[train],
            X_val=split.X_val[val],
            y_val=split.y_val[val],
            X_test=split.X_test[test],
            y_test=split.y_test[test],
            classes=split.classes[split.classes != label],
            layout=split.layout,
        )

    def apply(self, context, rng):
        """The test rows of the held-out class."""
        return context.X_test[context.split.y_test == self.held_out(context.split)]
