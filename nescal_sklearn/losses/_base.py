"""The loss-object protocol shared by every training objective.

A loss object is a small parameter container that is also callable in a plain
PyTorch loop: ``loss(logits, target, sample_weight=None)`` returns the batch-mean
scalar (see :class:`TrainingLoss` for how per-row weights enter). It exposes
scikit-learn's ``get_params``/``set_params`` so that ``NeSCalClassifier(loss=obj)``
supports ``clone``, ``set_params(loss__param=...)`` and ``GridSearchCV``.

This module imports torch only: no scikit-learn, no skorch.
"""

from __future__ import annotations

import inspect
import math
from numbers import Real
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from .._params import ParamsMixin
from ..exceptions import ParameterError, ParameterTypeError

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
            raise ParameterError(
                "loss",
                f"Unknown loss {loss!r}: expected a TrainingLoss object or one of "
                f"{sorted(LOSSES)}.",
            ) from None
    raise ParameterTypeError(
        "loss",
        f"loss must be a registered name or a TrainingLoss object; got {type(loss).__name__} "
        f"{loss!r}.",
    )


class TrainingLoss(ParamsMixin):
    """Base class of the training objectives selectable with ``NeSCalClassifier(loss=...)``.

    Subclasses store their ``__init__`` keyword arguments unchanged, implement
    :meth:`forward` and, when they have hyperparameters, :meth:`validate`.

    Per-row weights: ``loss(logits, target, sample_weight=w)``, ``w`` a 1-D float
    tensor of shape (n,) of finite non-negative weights on the device of ``logits``,
    weighs each row as if it appeared ``w_i`` times in the batch:

    * per-row (decomposable) terms — cross-entropy, label smoothing, focal, adaptive
      focal, the MbLS margin penalty and the cross-entropy part of MMCE, MDCA and
      S-AvUC — become ``mean_i(w_i * l_i)``: the weighted *sum* divided by the batch
      size n, not by ``sum(w)``. With weights of mean 1 over the training rows (as
      ``NeSCalClassifier.fit`` normalises them) this is an unbiased estimate of the
      objective on the training set with each row repeated ``w_i`` times;
    * batch statistics — MMCE's kernel sums and its counts m, n; MDCA's mean
      confidence and class frequency; S-AvUC's soft counts — are those of the batch in
      which row i is repeated ``w_i`` times (weighted sums and weighted counts), so
      with integer weights they equal the duplicated batch's exactly, and a zero
      weight removes the row. A batch whose weights are all 0 gives 0.

    ``sample_weight=None`` runs the unweighted computation unchanged, and weights
    that are all 1 give the same value and gradient, bit for bit. A subclass whose
    :meth:`forward` takes no ``sample_weight`` works unweighted and refuses weights.

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

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Return the batch-mean loss for ``logits`` (n, C) and integer ``target`` (n,).

        ``sample_weight`` (n,) weighs the rows as the class docstring describes.
        """
        raise NotImplementedError

    def __call__(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Return the batch-mean loss (:meth:`forward`), weighted by ``sample_weight``."""
        if sample_weight is None:
            return self.forward(logits, target)
        if "sample_weight" not in inspect.signature(self.forward).parameters:
            raise TypeError(
                f"{type(self).__name__}.forward takes no sample_weight, so this loss cannot "
                "weigh rows; add a sample_weight=None parameter to its forward."
            )
        return self.forward(logits, target, sample_weight=sample_weight)

    def validate(self) -> None:
        """Raise naming the parameter and value if a hyperparameter is invalid.

        A :class:`~nescal_sklearn.exceptions.ParameterError` (a ``ValueError``, or a
        :class:`~nescal_sklearn.exceptions.ParameterTypeError` for a wrong type) whose
        ``param`` is the parameter's name, as :func:`check_real` raises.
        """

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
    and the value received, e.g. ``"FocalLoss: gamma must be >= 0; got -1."``; the error
    (:class:`~nescal_sklearn.exceptions.ParameterTypeError` for a value that is not a
    real number, else :class:`~nescal_sklearn.exceptions.ParameterError`) carries
    ``name`` as ``param``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ParameterTypeError(
            name, f"{owner}: {name} must be a real number; got {type(value).__name__} {value!r}."
        )
    below = low is not None and (value < low if low_inclusive else value <= low)
    above = high is not None and (value > high if high_inclusive else value >= high)
    if below or above or value != value:
        lo = "" if low is None else f"{'>=' if low_inclusive else '>'} {low}"
        hi = "" if high is None else f"{'<=' if high_inclusive else '<'} {high}"
        expected = " and ".join(part for part in (lo, hi) if part)
        raise ParameterError(name, f"{owner}: {name} must be {expected}; got {value!r}.")
    if not math.isfinite(value):
        raise ParameterError(name, f"{owner}: {name} must be finite; got {value!r}.")


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
    >>> logits, target = torch.tensor([[2.0, 0.0], [0.0, 0.0]]), torch.tensor([0, 0])
    >>> weights = torch.tensor([2.0, 0.0])  # the first row twice, the second not at all
    >>> round(float(loss(logits, target, sample_weight=weights)), 4)  # 2 log(1 + e**-2) / 2
    0.1269
    """

    def __init__(self) -> None:
        pass

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if sample_weight is None:
            return F.cross_entropy(logits, target)
        weight = check_sample_weight(type(self).__name__, sample_weight, logits)
        return weighted_nll_loss(F.log_softmax(logits, dim=1), target, weight)


def check_sample_weight(owner: str, sample_weight: Any, logits: torch.Tensor) -> torch.Tensor:
    """Check per-row weights for ``logits`` (n, ...); return them detached, in its dtype.

    ``sample_weight`` must be a floating-point tensor of shape (n,), on the device of
    ``logits``, with finite non-negative values. Messages start with ``owner`` and name
    ``sample_weight`` and what was received.
    """
    if not isinstance(sample_weight, torch.Tensor):
        raise TypeError(
            f"{owner}: sample_weight must be None or a 1-D floating-point tensor of per-row "
            f"weights; got {type(sample_weight).__name__}."
        )
    if not sample_weight.is_floating_point():
        raise TypeError(
            f"{owner}: sample_weight must be a floating-point tensor; got {sample_weight.dtype}."
        )
    if logits.ndim < 2:
        raise ValueError(
            f"{owner}: sample_weight needs logits of shape (n_samples, n_classes); got logits "
            f"of shape {tuple(logits.shape)}."
        )
    n_samples = logits.shape[0]
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"{owner}: sample_weight must have shape (n_samples,) = ({n_samples},); got shape "
            f"{tuple(sample_weight.shape)}."
        )
    if sample_weight.device != logits.device:
        raise ValueError(
            f"{owner}: sample_weight must be on the device of logits ({logits.device}); got "
            f"{sample_weight.device}."
        )
    bad = ~(torch.isfinite(sample_weight) & (sample_weight >= 0))
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"{owner}: sample_weight must be finite and >= 0; got {float(sample_weight[row])!r} "
            f"at row {row}."
        )
    return sample_weight.detach().to(logits.dtype)


def weighted_nll_loss(
    log_p: torch.Tensor, target: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """``mean_i(weight_i * -log_p[i, target_i])``: the weighted sum over n, not over the weights.

    ``F.nll_loss`` on the rows scaled by their weights, so that weights all 1 give
    exactly ``F.nll_loss(log_p, target)`` (value and gradient).
    """
    return F.nll_loss(log_p * weight.view(-1, *([1] * (log_p.ndim - 1))), target)
