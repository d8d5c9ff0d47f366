"""The n × C cache of predicted log-probabilities that neighbours are read from."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["PredictionCache"]


class PredictionCache:
    """Detached per-row log-probabilities, gathered for neighbours and refreshed per batch.

    NeSCal reads the neighbours' distributions from this cache instead of running
    extra forward passes: it is filled once (one forward pass over the training
    rows when the graph is built) and each batch then overwrites its own rows with
    its freshly predicted, detached log-probabilities.

    Parameters
    ----------
    log_probs : Tensor of shape (n_samples, n_classes)
        Initial log-probabilities; stored as a detached copy.

    Attributes
    ----------
    log_probs : Tensor of shape (n_samples, n_classes)
        The cached log-probabilities (no gradient).

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.penalties import PredictionCache
    >>> cache = PredictionCache(torch.log(torch.full((4, 2), 0.5)))
    >>> cache.update(torch.tensor([1]), torch.log(torch.tensor([[0.9, 0.1]])))
    >>> cache.neighbours(torch.tensor([[1, 2]])).exp()
    tensor([[[0.9000, 0.1000],
             [0.5000, 0.5000]]])
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
    def n_samples(self) -> int:
        """Number of cached rows."""
        return self.log_probs.shape[0]

    @property
    def n_classes(self) -> int:
        """Number of classes (columns)."""
        return self.log_probs.shape[1]

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
        self.log_probs[indices.to(self.log_probs.device)] = log_probs.detach().to(
            device=self.log_probs.device, dtype=self.log_probs.dtype
        )

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
        return self.log_probs[neighbor_indices.to(self.log_probs.device)]

    def to(self, device: torch.device | str) -> PredictionCache:
        """Move the cache to ``device`` in place and return it."""
        self.log_probs = self.log_probs.to(device)
        return self

    def __repr__(self) -> str:
        return (
            f"PredictionCache(n_samples={self.n_samples}, n_classes={self.n_classes}, "
            f"device={self.log_probs.device})"
        )
