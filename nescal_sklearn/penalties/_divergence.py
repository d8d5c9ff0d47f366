"""Jensen–Shannon divergence from log-probabilities, and the neighbourhood penalty."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["js_divergence", "neighbourhood_penalty", "AGGREGATIONS"]

#: Accepted values of ``aggregation`` in :func:`neighbourhood_penalty`.
AGGREGATIONS = ("pairwise", "mean")

_LOG2 = math.log(2.0)


def js_divergence(log_p: Tensor, log_q: Tensor) -> Tensor:
    """Jensen–Shannon divergence, in nats, between distributions given as log-probabilities.

    ``JS(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m)`` with ``m = (p + q) / 2``, reduced over
    the last axis. Everything is computed in log space (``log m`` by ``logaddexp``)
    and ``-inf`` log-probabilities are clamped to the most negative finite value
    first, so a probability of exactly 0 contributes 0 — never ``0 · inf`` — and
    both the value and its gradient stay finite for one-hot inputs and for
    ``log_softmax`` of logits as large as ±50 in float32.

    Parameters
    ----------
    log_p : Tensor of shape (..., C)
        Log-probabilities of the first distribution(s), e.g. ``log_softmax(logits)``.
    log_q : Tensor of shape (..., C)
        Log-probabilities of the second distribution(s); broadcast against ``log_p``.

    Returns
    -------
    Tensor of shape (...)
        The divergence for each broadcast row, clamped to ``[0, log 2]``.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.penalties import js_divergence
    >>> log_p = torch.log(torch.tensor([1.0, 0.0]))
    >>> log_q = torch.log(torch.tensor([0.0, 1.0]))
    >>> round(js_divergence(log_p, log_q).item(), 4)  # disjoint supports: log 2
    0.6931
    >>> js_divergence(log_p, log_p).item()
    0.0
    """
    if log_p.ndim == 0 or log_q.ndim == 0:
        raise ValueError(
            "log_p and log_q must have a class axis (last dimension); got shapes "
            f"{tuple(log_p.shape)} and {tuple(log_q.shape)}."
        )
    dtype = torch.promote_types(log_p.dtype, log_q.dtype)
    floor = torch.finfo(dtype).min
    # Clamping maps -inf to a finite floor (with zero gradient), so p = exp(floor) = 0
    # multiplies a finite difference below: no 0 * inf in the value or the gradient.
    log_p = log_p.to(dtype).clamp(min=floor)
    log_q = log_q.to(dtype).clamp(min=floor)
    log_m = torch.logaddexp(log_p, log_q) - _LOG2
    kl_pm = (log_p.exp() * (log_p - log_m)).sum(dim=-1)
    kl_qm = (log_q.exp() * (log_q - log_m)).sum(dim=-1)
    return (0.5 * (kl_pm + kl_qm)).clamp(min=0.0, max=_LOG2)


def neighbour_mean_log_probs(neighbour_log_probs: Tensor) -> Tensor:
    """Log of the neighbours' mean distribution: ``logsumexp_j log q_ij - log k``.

    ``neighbour_log_probs`` has shape (B, k, C); the result has shape (B, C).
    """
    return torch.logsumexp(neighbour_log_probs, dim=1) - math.log(neighbour_log_probs.shape[1])


def weighted_mean(per_row: Tensor, weights: Tensor | None) -> Tensor:
    """``mean_i w_i v_i`` (plain mean without weights); weights are detached."""
    if weights is None:
        return per_row.mean()
    weights = torch.as_tensor(weights).detach().to(per_row)
    if weights.shape != per_row.shape[:1]:
        raise ValueError(
            f"weights must have shape ({per_row.shape[0]},), one per row; got "
            f"{tuple(weights.shape)}."
        )
    return (weights * per_row).mean()


def neighbourhood_penalty(
    log_p: Tensor,
    neighbour_log_probs: Tensor,
    aggregation: str = "pairwise",
    *,
    weights: Tensor | None = None,
) -> Tensor:
    """Mean Jensen–Shannon divergence between rows and their neighbours' distributions.

    Parameters
    ----------
    log_p : Tensor of shape (B, C)
        Log-probabilities predicted for the batch rows.
    neighbour_log_probs : Tensor of shape (B, k, C)
        Log-probabilities of each row's ``k`` neighbours (typically read from a
        :class:`PredictionCache`, hence without gradient).
    aggregation : {"pairwise", "mean"}, default="pairwise"
        ``"pairwise"``: mean over rows and neighbours of ``JS(p_i, q_ij)``.
        ``"mean"``: mean over rows of ``JS(p_i, q̄_i)`` where ``q̄_i`` is the
        neighbours' mean distribution (``logsumexp_j log q_ij - log k``); cheaper
        and never larger than the pairwise value (JS is convex).
    weights : Tensor of shape (B,), optional
        Per-row weights (treated as constants): the mean over rows becomes
        ``mean_i w_i JS_i``.

    Returns
    -------
    Tensor
        A scalar (0-d tensor), differentiable with respect to ``log_p``.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.penalties import neighbourhood_penalty
    >>> log_p = torch.log(torch.tensor([[0.5, 0.5]]))
    >>> neighbours = torch.log(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]))
    >>> round(neighbourhood_penalty(log_p, neighbours, "pairwise").item(), 4)
    0.2158
    >>> neighbourhood_penalty(log_p, neighbours, "mean").item()  # mean neighbour = p
    0.0
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be 'pairwise' or 'mean'; got {aggregation!r}.")
    if log_p.ndim != 2:
        raise ValueError(f"log_p must have shape (B, C); got shape {tuple(log_p.shape)}.")
    if (
        neighbour_log_probs.ndim != 3
        or neighbour_log_probs.shape[0] != log_p.shape[0]
        or neighbour_log_probs.shape[2] != log_p.shape[1]
    ):
        raise ValueError(
            f"neighbour_log_probs must have shape (B, k, C) = ({log_p.shape[0]}, k, "
            f"{log_p.shape[1]}) to match log_p; got shape {tuple(neighbour_log_probs.shape)}."
        )
    n_neighbours = neighbour_log_probs.shape[1]
    if n_neighbours == 0:
        raise ValueError(
            "neighbour_log_probs must hold at least one neighbour per row; got shape "
            f"{tuple(neighbour_log_probs.shape)}."
        )
    if log_p.shape[0] == 0:
        return log_p.sum() * 0.0
    if aggregation == "pairwise":
        per_row = js_divergence(log_p.unsqueeze(1), neighbour_log_probs).mean(dim=1)
    else:
        per_row = js_divergence(log_p, neighbour_mean_log_probs(neighbour_log_probs))
    return weighted_mean(per_row, weights)
