"""The neighbour soft-target penalty: KL from the neighbours' mean distribution."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from ._divergence import _scale_rows, _weighted_mean, neighbour_mean_log_probs, weighted_mean

__all__ = ["soft_target_penalty"]


def soft_target_penalty(
    log_p: Tensor,
    neighbour_log_probs: Tensor,
    *,
    temperature: float = 1.0,
    weights: Tensor | None = None,
) -> Tensor:
    """Mean over rows of KL(q̄_i ‖ p_i), q̄_i the neighbours' mean distribution at a temperature.

    Unlike the Jensen–Shannon penalty, whose gradient vanishes when a row confidently
    disagrees with its neighbours, this is a soft-label cross-entropy toward what
    the neighbourhood predicts (minus the target's entropy, so it is 0 at
    agreement): a label-smoothing target that keeps the wrong-class ranking of the
    neighbours instead of spreading mass uniformly. ``q̄`` is treated as a constant.

    Parameters
    ----------
    log_p : Tensor of shape (B, C)
        The batch's log-probabilities.
    neighbour_log_probs : Tensor of shape (B, k, C)
        Cached log-probabilities of each row's neighbours.
    temperature : float, default=1.0
        ``q̄`` is re-normalised as ``q̄^(1/temperature)``: > 1 softens, < 1 sharpens.
    weights : Tensor of shape (B,), optional
        Per-row weights (treated as constants): the result is ``mean_i w_i KL_i``.

    Returns
    -------
    Tensor
        Scalar, in nats.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.penalties import soft_target_penalty
    >>> log_p = torch.log(torch.tensor([[0.5, 0.5]]))
    >>> neighbours = torch.log(torch.tensor([[[0.9, 0.1], [0.7, 0.3]]]))  # mean (0.8, 0.2)
    >>> round(float(soft_target_penalty(log_p, neighbours)), 4)  # KL((.8,.2) || (.5,.5))
    0.1927
    """
    if (
        log_p.ndim != 2
        or neighbour_log_probs.ndim != 3
        or (
            neighbour_log_probs.shape[0] != log_p.shape[0]
            or neighbour_log_probs.shape[2] != log_p.shape[1]
        )
    ):
        raise ValueError(
            "log_p must have shape (B, C) and neighbour_log_probs shape (B, k, C); got "
            f"{tuple(log_p.shape)} and {tuple(neighbour_log_probs.shape)}."
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature!r}.")
    log_mean = neighbour_mean_log_probs(neighbour_log_probs.detach())
    log_target = F.log_softmax(log_mean / temperature, dim=-1)
    per_row = F.kl_div(log_p, log_target, reduction="none", log_target=True).sum(-1)
    return weighted_mean(per_row, weights)


def soft_target_kernel(
    log_p: Tensor,
    p: Tensor,
    target: Tensor,
    log_target: Tensor,
    weights: Tensor | None,
    need_grad: bool,
) -> tuple[Tensor, Tensor | None]:
    """``mean_i w_i KL(t_i ‖ p_i)`` and its gradient w.r.t. the logits, ``w_i / B · (p_i − t_i)``.

    ``target`` (B, C) is the soft target ``t`` (rows summing to 1), ``log_target``
    its (finite) logarithm, which is overwritten.
    """
    value = _weighted_mean(log_target.sub_(log_p).mul_(target).sum(dim=-1), weights)
    if not need_grad:
        return value, None
    return value, _scale_rows(p - target, weights, 1.0)
