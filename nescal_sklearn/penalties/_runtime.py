"""NeSCalRuntime: the per-fit state of NeSCal (graph, cache, current weight)."""

from __future__ import annotations

import time

import torch
from torch import Tensor, nn

from ..nn import member_log_probs
from ._schedule import penalty_weight
from ._smoothing import NeighbourhoodSmoothing

__all__ = ["CACHE_MODES", "NeSCalRuntime"]

#: Accepted values of ``cache``: when the neighbours' cached predictions are refreshed —
#: with each batch's own detached predictions (NeSCal's default), never after graph time,
#: or by one eval-mode forward pass over the training rows at the start of each epoch.
CACHE_MODES = ("batch", "frozen", "epoch")

#: Rows per forward pass of :meth:`NeSCalRuntime.refresh_cache` (as at graph time).
REFRESH_BATCH_ROWS = 4096


class NeSCalRuntime:
    """Everything NeSCal changes while it trains, apart from its settings.

    The settings live in :class:`~nescal_sklearn.losses.NeSCalLoss`, a stateless
    spec that is never mutated during a fit. The spec builds one runtime when the
    warm-up ends (:meth:`NeSCalLoss.build_runtime
    <nescal_sklearn.losses.NeSCalLoss.build_runtime>`); whoever trains owns it —
    the skorch net behind ``NeSCalClassifier`` (as ``net.nescal_``, dropped after
    ``fit``) or a plain PyTorch loop — and adds ``runtime.weight *
    runtime.penalty(logits, rows, target)`` to the base loss of each batch.

    Parameters
    ----------
    smoothing : NeighbourhoodSmoothing
        The neighbour graph and the prediction cache.
    weight : float
        Peak penalty weight λ (``NeSCalLoss.weight``).
    schedule : {"constant", "cosine"}
        See :func:`penalty_weight`.
    start_epoch : int
        0-based epoch at whose start the graph was built: the first penalised epoch.
    end_epoch : int
        End of the cosine decay (the training budget ``max_epochs``); greater than
        ``start_epoch`` for ``schedule="cosine"``.
    build_seconds : float, default=0.0
        Wall time spent building the graph and filling the cache.
    cache : {"batch", "frozen", "epoch"}, default="batch"
        When the neighbours' cached predictions change. ``"batch"``: each
        :meth:`penalty` call overwrites its rows with the batch's detached
        predictions (NeSCal as published). ``"frozen"``: never — the neighbours are
        read as the network predicted them when the graph was built. ``"epoch"``:
        :meth:`penalty` leaves the cache alone; whoever trains calls
        :meth:`refresh_cache` at the start of each penalised epoch after the first
        (an extra eval-mode forward pass over the training rows; ``NeSCalClassifier``
        does it and records its wall time as ``cache_seconds``).

    Attributes
    ----------
    current_weight : float
        λ of the epoch set by :meth:`set_epoch` (0 before the first call).

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.penalties import NeighbourhoodSmoothing, NeSCalRuntime
    >>> smoothing = NeighbourhoodSmoothing(
    ...     torch.tensor([[1], [0]]), torch.log(torch.tensor([[0.8, 0.2], [0.6, 0.4]]))
    ... )
    >>> runtime = NeSCalRuntime(smoothing, weight=0.5, schedule="constant",
    ...                         start_epoch=3, end_epoch=10)
    >>> runtime.set_epoch(3)
    0.5
    >>> logits = torch.zeros(1, 2)
    >>> penalty = runtime.penalty(logits, torch.tensor([0]))
    >>> round(float(penalty), 4)  # KL((0.6, 0.4) || (0.5, 0.5))
    0.0201
    >>> loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0]))
    >>> loss = loss + runtime.current_weight * penalty
    """

    def __init__(
        self,
        smoothing: NeighbourhoodSmoothing,
        *,
        weight: float,
        schedule: str,
        start_epoch: int,
        end_epoch: int,
        build_seconds: float = 0.0,
        cache: str = "batch",
    ) -> None:
        if cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {list(CACHE_MODES)}; got {cache!r}.")
        # Validates weight, schedule and the epochs once, here, not at the first epoch.
        penalty_weight(
            start_epoch,
            weight=weight,
            schedule=schedule,
            start_epoch=start_epoch,
            end_epoch=end_epoch,
        )
        self.smoothing = smoothing
        self.weight = float(weight)
        self.schedule = schedule
        self.start_epoch = int(start_epoch)
        self.end_epoch = int(end_epoch)
        self.build_seconds = float(build_seconds)
        self.cache = cache
        self.current_weight = 0.0

    def set_epoch(self, epoch: int) -> float:
        """Set :attr:`current_weight` for the 0-based ``epoch`` about to run; return it."""
        self.current_weight = penalty_weight(
            epoch,
            weight=self.weight,
            schedule=self.schedule,
            start_epoch=self.start_epoch,
            end_epoch=self.end_epoch,
        )
        return self.current_weight

    def penalty(
        self,
        logits: Tensor,
        indices: Tensor,
        target: Tensor | None = None,
        sample_weight: Tensor | None = None,
    ) -> Tensor:
        """The penalty of a batch, before λ (then, with ``cache="batch"``, its cache rows
        are refreshed).

        Parameters
        ----------
        logits : Tensor of shape (B, n_classes)
        indices : Tensor of shape (B,)
            The batch rows' positions among the training rows (graph node ids).
        target : Tensor of shape (B,), optional
            Class indices (``adaptive="agreement"`` needs them).
        sample_weight : Tensor of shape (B,), optional
            Per-row weights multiplying each row's term (see
            :meth:`NeighbourhoodSmoothing.__call__`); None weighs every row 1.

        Returns
        -------
        Tensor
            Scalar penalty, differentiable with respect to ``logits``: also the value to
            record (``NeSCalClassifier`` logs it as ``train_penalty``).
        """
        return self.smoothing(
            logits,
            indices,
            target,
            sample_weight=sample_weight,
            update_cache=self.cache == "batch",
        )

    def refresh_cache(
        self, module: nn.Module, X: Tensor, *, batch_size: int = REFRESH_BATCH_ROWS
    ) -> float:
        """Refill the whole cache from one eval-mode forward pass over ``X``; return its seconds.

        What ``cache="epoch"`` asks for at the start of each penalised epoch after the
        first (the graph's own forward pass filled the cache for the first). The module
        runs in eval mode (dropout off), without gradients, in chunks of ``batch_size``
        rows on the device of its parameters, as when the graph was built; its previous
        mode is restored afterwards. Any ``cache`` setting may call it.

        Parameters
        ----------
        module : torch.nn.Module
            The network being trained.
        X : Tensor of shape (n_samples, n_features)
            The training rows, in graph-node order (as given to ``build_runtime``).
        batch_size : int, default=4096
            Rows per forward pass.

        Returns
        -------
        float
            Wall time of the forward pass and the refill, in seconds.

        Examples
        --------
        >>> import torch
        >>> from torch import nn
        >>> from nescal_sklearn.penalties import NeighbourhoodSmoothing, NeSCalRuntime
        >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        >>> X = torch.randn(3, 3)
        >>> smoothing = NeighbourhoodSmoothing(
        ...     torch.tensor([[1], [2], [0]]), torch.log(torch.full((3, 2), 0.5))
        ... )
        >>> runtime = NeSCalRuntime(smoothing, weight=1.0, schedule="constant",
        ...                         start_epoch=0, end_epoch=5, cache="epoch")
        >>> seconds = runtime.refresh_cache(net, X)
        >>> fresh = torch.log_softmax(net(X), dim=1).detach()
        >>> torch.allclose(smoothing.cache.log_probs, fresh)
        True
        """
        start = time.perf_counter()
        parameter = next(module.parameters(), None)
        device = torch.device("cpu") if parameter is None else parameter.device
        was_training = module.training
        module.eval()
        try:
            with torch.no_grad():
                chunks = torch.split(torch.as_tensor(X), batch_size)
                logits = [module(chunk.to(device)) for chunk in chunks]
        finally:
            module.train(was_training)
        # (n, C), or members' (n, k, C) as member rows (n * k, C): the cache's layout.
        self.smoothing.refill_cache(member_log_probs(torch.cat(logits).float()))
        return time.perf_counter() - start

    def __repr__(self) -> str:
        return (
            f"NeSCalRuntime({self.smoothing!r}, weight={self.weight!r}, "
            f"schedule={self.schedule!r}, start_epoch={self.start_epoch}, "
            f"end_epoch={self.end_epoch}, cache={self.cache!r})"
        )
