"""The learning-rate schedule of a fit: a multiplier per epoch, applied by a callback."""

from __future__ import annotations

import math

from skorch.callbacks import Callback

__all__ = ["LR_SCHEDULES", "EpochLRSchedule", "lr_factor", "lr_scheduler"]

#: Accepted values of ``NeSCalClassifier(lr_schedule=...)``.
LR_SCHEDULES = ("constant", "cosine", "flat_cosine")


def lr_factor(schedule: str, epoch: int, max_epochs: int) -> float:
    """The learning-rate multiplier of the 0-based ``epoch`` under ``schedule``.

    ``"constant"``: 1. ``"cosine"``: ``(1 + cos(pi * epoch / max_epochs)) / 2``, from 1
    down towards 0 at ``max_epochs``. ``"flat_cosine"``: 1 for the first half of the
    epochs, then the cosine over the second half.

    Examples
    --------
    >>> from nescal_sklearn.estimator._schedule import lr_factor
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
