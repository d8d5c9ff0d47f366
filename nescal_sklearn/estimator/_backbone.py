"""Training options of the default backbone: the learning-rate schedule, the embedded columns."""

from __future__ import annotations

import math

import numpy as np
from skorch.callbacks import Callback

__all__ = ["LR_SCHEDULES", "ColumnScaler", "lr_factor", "lr_scheduler", "numeric_columns"]

#: Accepted values of ``NeSCalClassifier(lr_schedule=...)``.
LR_SCHEDULES = ("constant", "cosine", "flat_cosine")


def lr_factor(schedule: str, epoch: int, max_epochs: int) -> float:
    """The learning-rate multiplier of the 0-based ``epoch`` under ``schedule``.

    ``"constant"``: 1. ``"cosine"``: ``(1 + cos(pi * epoch / max_epochs)) / 2``, from 1
    down towards 0 at ``max_epochs``. ``"flat_cosine"``: 1 for the first half of the
    epochs, then the cosine over the second half.

    Examples
    --------
    >>> from nescal_sklearn.estimator._backbone import lr_factor
    >>> [round(lr_factor("cosine", e, 4), 3) for e in range(4)]
    [1.0, 0.854, 0.5, 0.146]
    >>> [round(lr_factor("flat_cosine", e, 4), 3) for e in range(4)]
    [1.0, 1.0, 1.0, 0.5]
    """
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {list(LR_SCHEDULES)}; got {schedule!r}.")
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * epoch / max_epochs))
    flat = max_epochs // 2
    if epoch < flat:
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * (epoch - flat) / max(max_epochs - flat, 1)))


class EpochLRSchedule(Callback):
    """Sets each epoch's learning rate to ``base_lr * lr_factor(schedule, epoch, max_epochs)``.

    Only the optimizer's parameter groups present when training starts are scheduled,
    each from its own starting learning rate; a group added later (``unfreeze_at``)
    keeps the learning rate it was given. (``torch.optim.lr_scheduler.LambdaLR`` fails
    once a group is added after it was built.) The learning rate of the first group is
    recorded in the history as ``event_lr``.

    Parameters
    ----------
    schedule : {"constant", "cosine", "flat_cosine"}
        The multiplier of :func:`lr_factor`.
    max_epochs : int
        The epochs the schedule spans.
    """

    def __init__(self, schedule: str, max_epochs: int) -> None:
        self.schedule = schedule
        self.max_epochs = max_epochs

    def on_train_begin(self, net, **kwargs) -> None:
        self.base_lrs_ = [group["lr"] for group in net.optimizer_.param_groups]

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1  # 0-based: the net has opened this epoch's row
        factor = lr_factor(self.schedule, epoch, self.max_epochs)
        for group, base in zip(net.optimizer_.param_groups, self.base_lrs_, strict=False):
            group["lr"] = base * factor
        net.history.record("event_lr", net.optimizer_.param_groups[0]["lr"])


def lr_scheduler(schedule: str, max_epochs: int) -> Callback:
    """The skorch callback (:class:`EpochLRSchedule`) applying :func:`lr_factor` each epoch.

    The parameter groups present when training starts are scheduled; a group added
    later (``unfreeze_at``) keeps its own learning rate.
    """
    lr_factor(schedule, 0, max_epochs)  # validates the name
    return EpochLRSchedule(schedule, max_epochs)


def numeric_columns(X: np.ndarray) -> list[int]:
    """Columns with more than two distinct (non-NaN) values: the ones a numeric embedding gets.

    One-hot and binary columns hold at most two values; embedding them periodically
    adds width and nothing a linear layer cannot already do with them.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.estimator._backbone import numeric_columns
    >>> numeric_columns(np.array([[0.0, 1.5, 1.0], [1.0, 2.5, 0.0], [0.0, 3.5, 1.0]]))
    [1]
    """
    X = np.asarray(X)
    columns = []
    for j in range(X.shape[1]):
        values = X[:, j]
        if np.unique(values[~np.isnan(values)]).size > 2:
            columns.append(j)
    return columns


def one_hot_groups(X: np.ndarray, min_size: int = 2) -> list[list[int]]:
    """Runs of adjacent 0/1 columns that one-hot encode a categorical feature.

    A group is a run of adjacent columns holding only 0 and 1 whose sum is exactly 1 on
    every row: each row has one category. Columns are scanned left to right; a run
    grows until its row sums are all 1 (a group) or some row sum exceeds 1 (then its
    first column is a plain binary column and the scan restarts after it). This finds
    the output of a ``OneHotEncoder`` (``make_tabular_preprocessor``, the benchmark
    runner's preprocessing) without being told where it is.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training rows.
    min_size : int, default=2
        Smallest group returned, in columns.

    Returns
    -------
    list of list of int
        The column indices of each group, groups in column order.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.estimator._backbone import one_hot_groups
    >>> X = np.array([[0.5, 1, 0, 0, 1], [1.5, 0, 1, 0, 0], [2.5, 0, 0, 1, 1]])
    >>> one_hot_groups(X)
    [[1, 2, 3]]
    """
    X = np.asarray(X, dtype=float)
    binary = [bool(np.isin(X[:, j], (0.0, 1.0)).all()) for j in range(X.shape[1])]
    groups: list[list[int]] = []
    start = 0
    while start < X.shape[1]:
        end = _group_end(X, binary, start) if binary[start] else None
        if end is None:  # not the start of a group: a numeric or plain binary column
            start += 1
            continue
        if end - start + 1 >= min_size:
            groups.append(list(range(start, end + 1)))
        start = end + 1
    return groups


def _group_end(X: np.ndarray, binary: list[bool], start: int) -> int | None:
    """The last column of the one-hot group starting at ``start``, or None if none does."""
    total = X[:, start].copy()
    end = start
    while not np.all(total == 1.0):
        end += 1
        if end >= X.shape[1] or not binary[end] or np.any(total + X[:, end] > 1):
            return None
        total += X[:, end]
    return end


class ColumnScaler:
    """:class:`RobustSmoothClipScaler` on some columns of a float matrix, the rest unchanged.

    What ``NeSCalClassifier(numeric_scaling="robust")`` fits on its training rows
    (the columns of :func:`numeric_columns`) and applies before the network.

    Parameters
    ----------
    columns : list of int
        The columns to scale.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.estimator._backbone import ColumnScaler
    >>> X = np.array([[0.0, 1.0], [1.0, 2.0], [0.0, 3.0], [1.0, 40.0]], dtype=np.float32)
    >>> ColumnScaler([1]).fit(X).transform(X)[:, 0].tolist()
    [0.0, 1.0, 0.0, 1.0]
    """

    def __init__(self, columns: list[int]) -> None:
        self.columns = list(columns)

    def fit(self, X: np.ndarray) -> ColumnScaler:
        from ._scaling import RobustSmoothClipScaler

        self.scaler_ = RobustSmoothClipScaler().fit(X[:, self.columns]) if self.columns else None
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        if self.scaler_ is None:
            return X
        out = np.array(X, dtype=np.float32, copy=True)
        out[:, self.columns] = self.scaler_.transform(X[:, self.columns])
        return out
