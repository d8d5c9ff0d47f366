"""The loss-object protocol shared by every training objective.

A loss object is a small parameter container that is also callable in a plain
PyTorch loop: ``loss(logits, target)`` returns the batch-mean scalar. It exposes
scikit-learn's ``get_params``/``set_params`` so that ``NeSCalClassifier(loss=obj)``
supports ``clone``, ``set_params(loss__param=...)`` and ``GridSearchCV``.

This module imports torch only: no scikit-learn, no skorch.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from .._params import ParamsMixin

__all__ = ["TrainingLoss", "CrossEntropyLoss", "register_loss", "get_loss", "LOSSES"]

#: Registered loss names -> loss classes. Filled by :func:`register_loss`.
LOSSES: dict[str, type[TrainingLoss]] = {}


def register_loss(name: str):
    """Class decorator registering a :class:`TrainingLoss` subclass under ``name``."""

    def decorator(cls: type[TrainingLoss]) -> type[TrainingLoss]:
        if name in LOSSES and LOSSES[name] is not cls:
            raise ValueError(f"A loss is already registered under the name {name!r}.")
        cls.name = name
        LOSSES[name] = cls
        return cls

    return decorator


def get_loss(loss: str | TrainingLoss) -> TrainingLoss:
    """Return a loss object from a registered name, or ``loss`` itself if it is one.

    Parameters
    ----------
    loss : str or TrainingLoss
        A registered name (see ``LOSSES``) or a loss object.

    Returns
    -------
    TrainingLoss
        A new object with default parameters for a name; ``loss`` unchanged otherwise.

    Examples
    --------
    >>> from nescal_sklearn.losses import get_loss
    >>> get_loss("ce")
    CrossEntropyLoss()
    """
    if isinstance(loss, TrainingLoss):
        return loss
    if isinstance(loss, str):
        try:
            return LOSSES[loss]()
        except KeyError:
            raise ValueError(
                f"Unknown loss {loss!r}: expected a TrainingLoss object or one of "
                f"{sorted(LOSSES)}."
            ) from None
    raise TypeError(
        f"loss must be a registered name or a TrainingLoss object; got {type(loss).__name__} "
        f"{loss!r}."
    )


class TrainingLoss(ParamsMixin):
    """Base class of the training objectives selectable with ``NeSCalClassifier(loss=...)``.

    Subclasses store their ``__init__`` keyword arguments unchanged, implement
    :meth:`forward` and, when they have hyperparameters, :meth:`validate`.

    Attributes
    ----------
    name : str
        Class attribute: the registered name (set by :func:`register_loss`).
    uses_neighbours : bool
        Class attribute: True for objectives that train with a neighbour graph
        (NeSCal, whose :meth:`~nescal_sklearn.losses.NeSCalLoss.build_runtime` builds
        it); plain losses leave it False.
    """

    name: ClassVar[str] = ""
    uses_neighbours: ClassVar[bool] = False

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Return the batch-mean loss for ``logits`` (n, C) and integer ``target`` (n,)."""
        raise NotImplementedError

    def __call__(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Return the batch-mean loss (:meth:`forward`)."""
        return self.forward(logits, target)

    def validate(self) -> None:
        """Raise ``ValueError`` naming the parameter and value if a hyperparameter is invalid."""

    # -- helpers for subclasses -------------------------------------------------
    def _check_real(
        self,
        name: str,
        *,
        low: float | None = None,
        high: float | None = None,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
    ) -> None:
        check_real(
            type(self).__name__,
            name,
            getattr(self, name),
            low=low,
            high=high,
            low_inclusive=low_inclusive,
            high_inclusive=high_inclusive,
        )


def check_real(
    owner: str,
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> None:
    """Raise unless ``value`` is a finite real number within the bounds.

    Messages start with ``owner`` (a class or function name) and name the parameter
    and the value received, e.g. ``"FocalLoss: gamma must be >= 0; got -1."``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(
            f"{owner}: {name} must be a real number; got {type(value).__name__} {value!r}."
        )
    below = low is not None and (value < low if low_inclusive else value <= low)
    above = high is not None and (value > high if high_inclusive else value >= high)
    if below or above or value != value:
        lo = "" if low is None else f"{'>=' if low_inclusive else '>'} {low}"
        hi = "" if high is None else f"{'<=' if high_inclusive else '<'} {high}"
        expected = " and ".join(part for part in (lo, hi) if part)
        raise ValueError(f"{owner}: {name} must be {expected}; got {value!r}.")
    if not math.isfinite(value):
        raise ValueError(f"{owner}: {name} must be finite; got {value!r}.")


@register_loss("ce")
class CrossEntropyLoss(TrainingLoss):
    """Plain cross-entropy: the baseline every comparison uses.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import CrossEntropyLoss
    >>> loss = CrossEntropyLoss()
    >>> round(float(loss(torch.zeros(2, 4), torch.tensor([0, 3]))), 4)  # log(4)
    1.3863
    """

    def __init__(self) -> None:
        pass

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target)
