"""The n × C cache of predicted distributions that neighbours are read from."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["PredictionCache"]


class PredictionCache:
    """Detached per-row predictions, gathered for neighbours and refreshed per batch.

    NeSCal reads the neighbours' distributions from this cache instead of running
    extra forward passes: it is filled once (one forward pass over the training
    rows when the graph is built) and each batch then overwrites its own rows with
    its freshly predicted, detached log-probabilities.

    Each row is kept in the forms the penalties read, all refreshed together by
    :meth:`update`: the log-probabilities, the probabilities ``exp(log_probs)``
    (so the neighbours' mean distribution is one fused gather-and-sum, with no
    exponential over the ``k`` neighbours), and, once :meth:`neg_entropy` has been
    asked for, ``Σ_c q_c log q_c``.

    Parameters
    ----------
    log_probs : Tensor of shape (n_samples, n_classes)
        Initial log-probabilities; stored as a detached copy.

    Attributes
    ----------
    log_probs : Tensor of shape (n_samples, n_classes)
        The cached log-probabilities (no gradient). Assigning a new tensor
        refills the other forms too.
    probs : Tensor of shape (n_samples, n_classes)
        ``exp(log_probs)``, floored at the smallest normal number of the dtype
        (``1.2e-38`` in float32: no subnormal number, and a finite logarithm) —
        read-only, no gradient.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.penalties import PredictionCache
    >>> cache = PredictionCache(torch.log(torch.full((4, 2), 0.5)))
    >>> cache.update(torch.tensor([1]), torch.log(torch.tensor([[0.9, 0.1]])))
    >>> cache.neighbours(torch.tensor([[1, 2]])).exp()
    tensor([[[0.9000, 0.1000],
             [0.5000, 0.5000]]])
    >>> cache.probs[1]
    tensor([0.9000, 0.1000])
    >>> cache.n_samples, cache.n_classes
    (4, 2)
    """

    def __init__(self, log_probs: Tensor) -> None:
        if not isinstance(log_probs, Tensor) or log_probs.ndim != 2:
            shape = tuple(log_probs.shape) if isinstance(log_probs, Tensor) else None
            raise ValueError(
                "log_probs must be a tensor of shape (n_samples, n_classes); got "
                f"{type(log_probs).__name__} with shape {shape}."
            )
        if not log_probs.is_floating_point():
            raise ValueError(
                f"log_probs must be a floating-point tensor; got dtype {log_probs.dtype}."
            )
        self.log_probs = log_probs.detach().clone()

    @property
    def log_probs(self) -> Tensor:
        return self._log_probs

    @log_probs.setter
    def log_probs(self, value: Tensor) -> None:
        self._log_probs = value
        self._probs = _probs_of(value)
        self._neg_entropy = None
        self._offsets = (None, None)  # prob_sums's bag offsets for the last (B, k)

    @property
    def probs(self) -> Tensor:
        return self._probs

    @property
    def n_samples(self) -> int:
        """Number of cached rows."""
        return self._log_probs.shape[0]

    @property
    def n_classes(self) -> int:
        """Number of classes (columns)."""
        return self._log_probs.shape[1]

    def neg_entropy(self) -> Tensor:
        """``Σ_c q_c log q_c`` of every cached row (with :attr:`probs`), shape (n_samples,).

        Computed on the first call and refreshed by every later :meth:`update`.
        """
        if self._neg_entropy is None:
            self._neg_entropy = _neg_entropy_of(self._log_probs, self._probs)
        return self._neg_entropy

    def update(self, indices: Tensor, log_probs: Tensor) -> None:
        """Overwrite rows ``indices`` with detached ``log_probs``.

        Parameters
        ----------
        indices : Tensor of shape (B,), int64
            Row indices into the cache.
        log_probs : Tensor of shape (B, n_classes)
            New log-probabilities for those rows.
        """
        indices = torch.as_tensor(indices)
        if indices.ndim != 1 or log_probs.shape != (indices.shape[0], self.n_classes):
            raise ValueError(
                f"update expects indices of shape (B,) and log_probs of shape (B, "
                f"{self.n_classes}); got {tuple(indices.shape)} and {tuple(log_probs.shape)}."
            )
        log_probs = log_probs.detach()
        self._write(indices, log_probs, _probs_of(log_probs))

    def _write(
        self, indices: Tensor, log_probs: Tensor, probs: Tensor, neg_entropy: Tensor | None = None
    ) -> None:
        """Overwrite rows ``indices`` with a batch's detached log-probabilities and probabilities.

        No checks: ``indices`` is a valid (B,) index tensor and ``probs`` is
        ``exp(log_probs)`` floored at the smallest normal number. ``neg_entropy`` (B,),
        when known, is ``Σ_c q_c log q_c`` of the rows.
        """
        store = self._log_probs
        indices = indices.to(store.device)
        self._log_probs.index_copy_(
            0, indices, log_probs.to(device=store.device, dtype=store.dtype)
        )
        self._probs.index_copy_(0, indices, probs.to(device=store.device, dtype=store.dtype))
        if self._neg_entropy is not None:
            if neg_entropy is None:
                neg_entropy = _neg_entropy_of(self._log_probs[indices], self._probs[indices])
            self._neg_entropy.index_copy_(0, indices, neg_entropy.to(self._neg_entropy))

    def neighbours(self, neighbor_indices: Tensor) -> Tensor:
        """Gather cached rows: ``(B, k)`` indices give ``(B, k, n_classes)`` log-probabilities.

        Parameters
        ----------
        neighbor_indices : Tensor of shape (B, k), int64
            Row indices into the cache (any shape works; ``n_classes`` is appended).

        Returns
        -------
        Tensor of shape (B, k, n_classes)
            A new tensor (not a view of the cache), without gradient.
        """
        neighbor_indices = torch.as_tensor(neighbor_indices)
        return self._log_probs[neighbor_indices.to(self._log_probs.device)]

    def prob_sums(self, neighbor_indices: Tensor) -> Tensor:
        """``Σ_j q_ij``: the cached probabilities of each row's neighbours, summed.

        One fused gather-and-sum (``embedding_bag``); divide by ``k`` for the
        neighbours' mean distribution.

        Parameters
        ----------
        neighbor_indices : Tensor of shape (B, k), int64

        Returns
        -------
        Tensor of shape (B, n_classes)
        """
        n_rows, n_neighbours = neighbor_indices.shape
        if self._offsets[0] != (n_rows, n_neighbours):
            offsets = torch.arange(
                0, n_rows * n_neighbours, n_neighbours, device=self._probs.device
            )
            self._offsets = ((n_rows, n_neighbours), offsets)
        return F.embedding_bag(
            neighbor_indices.reshape(-1), self._probs, self._offsets[1], mode="sum"
        )

    def to(self, device: torch.device | str) -> PredictionCache:
        """Move the cache to ``device`` in place and return it."""
        self._log_probs = self._log_probs.to(device)
        self._probs = self._probs.to(device)
        self._offsets = (None, None)
        if self._neg_entropy is not None:
            self._neg_entropy = self._neg_entropy.to(device)
        return self

    def __repr__(self) -> str:
        return (
            f"PredictionCache(n_samples={self.n_samples}, n_classes={self.n_classes}, "
            f"device={self._log_probs.device})"
        )


def _floored(log_probs: Tensor) -> Tensor:
    """``log_probs`` floored at ``log(tiny)``, the smallest normal number of the dtype."""
    return log_probs.clamp(min=math.log(torch.finfo(log_probs.dtype).tiny))


def _probs_of(log_probs: Tensor) -> Tensor:
    return _floored(log_probs.detach()).exp_()


def _neg_entropy_of(log_probs: Tensor, probs: Tensor) -> Tensor:
    return (probs * _floored(log_probs)).sum(dim=-1)
