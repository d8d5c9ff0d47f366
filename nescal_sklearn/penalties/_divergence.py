"""Jensen–Shannon divergence from log-probabilities, and the neighbourhood penalty."""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

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


# ---------------------------------------------------------------------------------------------
# Fused kernels of NeighbourhoodSmoothing's per-batch call. Each works on detached tensors and
# returns the penalty and, when asked, its gradient with respect to the logits in closed form;
# _FusedPenalty hands that gradient to autograd. Same values as the functions above, to
# float32 round-off, in a few vectorised passes over the batch. Probabilities here are never
# below the dtype's smallest normal number (see log_softmax_and_probs and PredictionCache), so
# their logarithms are finite without clamping.


class _FusedPenalty(torch.autograd.Function):
    """``value`` as a function of ``logits`` whose gradient was computed with it: ``grad``."""

    @staticmethod
    def forward(ctx, logits: Tensor, value: Tensor, grad: Tensor) -> Tensor:
        ctx.save_for_backward(grad)
        return value.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor):
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, None


def log_softmax_and_probs(logits: Tensor) -> tuple[Tensor, Tensor]:
    """``log_softmax(logits)`` and ``softmax(logits)`` over the last axis, in one pass.

    The probabilities are floored at the dtype's smallest normal number (a change
    below 1.2e-38 in float32), so that no subnormal number enters later arithmetic
    and their logarithms are finite; the log-probabilities are exact.
    """
    finfo = torch.finfo(logits.dtype)
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    # exp(shifted) / total >= tiny when shifted >= log(tiny) + log(C), as total <= C.
    floor = math.log(finfo.tiny) + math.log(max(logits.shape[-1], 1))
    exp = shifted.clamp(min=floor).exp_()
    total = exp.sum(dim=-1, keepdim=True)
    log_p = shifted.sub_(total.log())
    return log_p, exp.div_(total)


def _finite_log_p(log_p: Tensor) -> Tensor:
    """``log_p`` floored at ``log(tiny)``: ``p · log p`` is then ~0, never ``0 · -inf``."""
    return log_p.clamp(min=math.log(torch.finfo(log_p.dtype).tiny))


def _through_log_softmax(grad_log_p: Tensor, p: Tensor) -> Tensor:
    """Gradient w.r.t. the logits from the gradient w.r.t. ``log_softmax(logits)``."""
    return grad_log_p.sub_(p * grad_log_p.sum(dim=-1, keepdim=True))


def _weighted_mean(rows: Tensor, weights: Tensor | None) -> Tensor:
    """``mean_i w_i rows_i`` (plain mean without weights).

    Multiply, then the plain mean: weights that are all 1 give the unweighted value bit for
    bit, as :func:`weighted_mean` does.
    """
    if weights is None:
        return rows.mean()
    return rows.mul(weights).mean()


def _scale_rows(grad: Tensor, weights: Tensor | None, factor: float) -> Tensor:
    """``grad`` (B, C) multiplied in place by ``factor / B`` (times ``w_i`` on row ``i``)."""
    factor = factor / grad.shape[0]
    if weights is None:
        return grad.mul_(factor)
    return grad.mul_(weights.mul(factor).unsqueeze_(1))


def js_mean_kernel(
    log_p: Tensor, p: Tensor, mean_q: Tensor, weights: Tensor | None, need_grad: bool
) -> tuple[Tensor, Tensor | None]:
    """``mean_i w_i JS(p_i, q̄_i)`` from the neighbours' mean distribution ``q̄`` (B, C).

    ``∂JS(p, q)/∂ log p_c = ½ p_c log(p_c / m_c)`` with ``m = (p + q) / 2``. Rows
    are clamped to ``[0, log 2]`` (zero gradient outside), as :func:`js_divergence`.
    ``mean_q`` is overwritten.
    """
    log_m = (p + mean_q).mul_(0.5).log_()
    p_term = _finite_log_p(log_p).sub_(log_m).mul_(p)
    q_term = mean_q.log().sub_(log_m).mul_(mean_q)
    raw = q_term.add_(p_term).sum(dim=-1).mul_(0.5)
    value = _weighted_mean(raw.clamp(min=0.0, max=_LOG2), weights)
    if not need_grad:
        return value, None
    inside = ((raw >= 0.0) & (raw <= _LOG2)).unsqueeze_(1)
    grad_log_p = _scale_rows(p_term.mul_(inside), weights, 0.5)
    return value, _through_log_softmax(grad_log_p, p)


def js_pairwise_kernel(
    log_p: Tensor,
    p: Tensor,
    neighbour_probs: Tensor,
    neighbour_neg_entropy: Tensor,
    weights: Tensor | None,
    need_grad: bool,
) -> tuple[Tensor, Tensor | None, Tensor]:
    """``mean_i w_i mean_j JS(p_i, q_ij)`` from the neighbours' cached probabilities.

    ``neighbour_probs`` is laid out (k, B, C) and is overwritten;
    ``neighbour_neg_entropy`` (k, B) holds ``Σ_c q_c log q_c`` of each neighbour.
    With ``s = p + q`` (so ``m = s / 2``)::

        JS(p, q) = log 2 + ½ Σ_c p_c log p_c + ½ Σ_c q_c log q_c − ½ Σ_c s_c log s_c
        ∂JS / ∂ log p_c = ½ p_c (log p_c + log 2 − log s_c)

    so one logarithm per (row, neighbour, class) gives both the value and the
    gradient. Each row's mean is clamped to ``[0, log 2]``. Also returns
    ``Σ_c p_c log p_c`` of the batch rows (for the cache).
    """
    n_neighbours = neighbour_probs.shape[0]
    log_p = _finite_log_p(log_p)
    neg_entropy = (p * log_p).sum(dim=-1)
    s = neighbour_probs.add_(p)
    log_s = s.log()
    s_log_s = s.mul_(log_s).sum(dim=0).sum(dim=-1)
    raw = (
        neighbour_neg_entropy.sum(dim=0)
        .sub_(s_log_s)
        .mul_(0.5 / n_neighbours)
        .add_(neg_entropy, alpha=0.5)
        .add_(_LOG2)
    )
    value = _weighted_mean(raw.clamp_(min=0.0, max=_LOG2), weights)
    if not need_grad:
        return value, None, neg_entropy
    grad_log_p = log_s.sum(dim=0).mul_(-1.0 / n_neighbours).add_(log_p).add_(_LOG2).mul_(p)
    return value, _through_log_softmax(_scale_rows(grad_log_p, weights, 0.5), p), neg_entropy
