"""Networks that return several members' logits: how they train, predict and smooth.

A module whose output has shape ``(n, k, n_classes)`` is an ensemble of ``k``
members (``TabularMLP(n_members=k)``, TabM, any stacked model). The package handles
it the same way everywhere:

* **Prediction** is the ensemble's: the mean of the members' probabilities,
  written as logits by :func:`ensemble_logits` (the log of that mean, so that a
  softmax gives it back). The validation NLL that early stopping watches, the
  temperature, ``predict_proba`` and ``decision_function`` all see it.
* **Training** pays each member's loss on every row: :func:`flatten_members` turns a
  batch of ``n`` rows into ``n * k`` *member rows* (row ``i`` of member ``m`` is
  member row ``i * k + m``), so any per-row loss is the mean over members of the
  member's loss (TabM's recipe: members are trained, not their average).
* **NeSCal** smooths each member towards the *same member's* cached predictions of
  the row's neighbours: the cache holds ``n_train * k`` member rows, and a graph on
  the training rows becomes one on member rows by :func:`expand_member_graph`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["ensemble_logits", "expand_member_graph", "flatten_members", "member_log_probs"]


def ensemble_logits(logits: Tensor) -> Tensor:
    """The ensemble's logits: the log of the members' mean probability.

    Parameters
    ----------
    logits : Tensor of shape (n, n_classes) or (n, k, n_classes)
        One model's logits (returned unchanged) or ``k`` members' logits.

    Returns
    -------
    Tensor of shape (n, n_classes)
        ``log(mean_m softmax(logits[:, m]))`` for members; ``softmax`` of it is the
        mean probability.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import ensemble_logits
    >>> members = torch.log(torch.tensor([[[0.9, 0.1], [0.5, 0.5]]]))
    >>> torch.softmax(ensemble_logits(members), dim=-1)
    tensor([[0.7000, 0.3000]])
    """
    if logits.dim() == 2:
        return logits
    if logits.dim() != 3:
        raise ValueError(
            "a network's output must have shape (n, n_classes) or (n, n_members, n_classes); "
            f"got shape {tuple(logits.shape)}."
        )
    log_probs = torch.log_softmax(logits, dim=-1)
    return torch.logsumexp(log_probs, dim=1) - math.log(logits.shape[1])


def member_log_probs(logits: Tensor) -> Tensor:
    """Log-probabilities of every (row, member) as member rows, shape (n * k, n_classes).

    For a single model's logits (n, n_classes), its log-softmax. For members
    (n, k, n_classes), row ``i`` of member ``m`` lands at ``i * k + m``: the layout of
    NeSCal's prediction cache for an ensemble.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import member_log_probs
    >>> member_log_probs(torch.zeros(4, 3, 2)).shape
    torch.Size([12, 2])
    """
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.reshape(-1, logits.shape[-1])


def flatten_members(
    logits: Tensor,
    target: Tensor,
    indices: Tensor | None = None,
    sample_weight: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """A batch of members' logits as member rows: one row per (row, member).

    Parameters
    ----------
    logits : Tensor of shape (n, k, n_classes)
    target : Tensor of shape (n,)
    indices : Tensor of shape (n,) or None
        The rows' graph node ids; member row ids are ``index * k + m``.
    sample_weight : Tensor of shape (n,) or None
        Each row's weight, shared by its members.

    Returns
    -------
    logits : Tensor of shape (n * k, n_classes)
    target, indices, sample_weight : Tensor of shape (n * k,) or None
        Repeated per member (``indices`` mapped to member row ids).

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import flatten_members
    >>> _, target, rows, _ = flatten_members(
    ...     torch.zeros(2, 3, 4), torch.tensor([1, 0]), torch.tensor([5, 7])
    ... )
    >>> target.tolist(), rows.tolist()
    ([1, 1, 1, 0, 0, 0], [15, 16, 17, 21, 22, 23])
    """
    if logits.dim() != 3:
        raise ValueError(
            f"flatten_members needs logits of shape (n, n_members, n_classes); got shape "
            f"{tuple(logits.shape)}."
        )
    n, k, n_classes = logits.shape
    flat = logits.reshape(n * k, n_classes)
    target = target.repeat_interleave(k)
    if indices is not None:
        members = torch.arange(k, device=indices.device, dtype=indices.dtype)
        indices = (indices.unsqueeze(1) * k + members).reshape(-1)
    if sample_weight is not None:
        sample_weight = sample_weight.repeat_interleave(k)
    return flat, target, indices, sample_weight


def expand_member_graph(neighbors: Tensor, n_members: int) -> Tensor:
    """A graph on training rows as a graph on member rows (each member with its own).

    Parameters
    ----------
    neighbors : Tensor of shape (n, n_neighbors) or (n_members, n, n_neighbors)
        Row ``i`` lists its neighbours among the training rows: one graph shared by
        the members, or one graph per member.
    n_members : int

    Returns
    -------
    Tensor of shape (n * n_members, n_neighbors)
        Member row ``i * k + m`` lists the member rows ``j * k + m`` of its
        neighbours ``j`` (in member ``m``'s graph).

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import expand_member_graph
    >>> expand_member_graph(torch.tensor([[1], [0]]), 2).tolist()
    [[2], [3], [0], [1]]
    """
    k = int(n_members)
    if neighbors.dim() == 2:
        neighbors = neighbors.unsqueeze(0).expand(k, -1, -1)
    if neighbors.dim() != 3 or neighbors.shape[0] != k:
        raise ValueError(
            f"neighbors must have shape (n, n_neighbors) or ({k}, n, n_neighbors) for "
            f"n_members={k}; got shape {tuple(neighbors.shape)}."
        )
    members = torch.arange(k, device=neighbors.device, dtype=neighbors.dtype)
    expanded = neighbors * k + members.view(k, 1, 1)  # (k, n, n_neighbors)
    return expanded.permute(1, 0, 2).reshape(-1, neighbors.shape[-1])
