"""NeighbourhoodSmoothing: the NeSCal penalty over a fixed graph and a prediction cache."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ._cache import PredictionCache
from ._divergence import (
    AGGREGATIONS,
    _FusedPenalty,
    js_mean_kernel,
    js_pairwise_kernel,
    log_softmax_and_probs,
    neighbourhood_penalty,
)
from ._soft_target import soft_target_kernel, soft_target_penalty

#: Accepted values of ``divergence``: the Jensen–Shannon penalty or the KL soft target.
DIVERGENCES = ("js", "soft_target")

#: Accepted values of ``adaptive``: per-row strength of the penalty.
ADAPTIVE = (None, "agreement", "density")

__all__ = ["NeighbourhoodSmoothing"]


class NeighbourhoodSmoothing:
    """NeSCal penalty: each row's prediction against its graph neighbours' cached ones.

    Holds the neighbour graph and a :class:`PredictionCache`. Calling it on a
    batch's logits and row indices returns the (unweighted) penalty, computed
    against the neighbours' *cached* distributions, and then refreshes the
    batch's own rows of the cache with its detached predictions. Multiply by
    the weight λ(t) (see :func:`penalty_weight`) and add to the cross-entropy.

    The default penalty is the neighbour soft target (``divergence="soft_target"``):
    KL from the neighbours' mean cached distribution to the row's prediction, the
    best variant of this project's study and the default of
    :class:`~nescal_sklearn.losses.NeSCalLoss`. The method as published is the
    Jensen–Shannon penalty, ``divergence="js"`` (with ``aggregation``).

    Parameters
    ----------
    neighbors : Tensor or ndarray of shape (n_samples, k), integer
        Neighbour indices of every training row, e.g. from
        ``nescal_sklearn.graph.build_knn_graph`` or :func:`random_graph`.
    initial_log_probs : Tensor of shape (n_samples, n_classes)
        Log-probabilities used to fill the cache (one forward pass over the
        training rows when the graph is built).
    aggregation : {"pairwise", "mean"}, default="pairwise"
        See :func:`neighbourhood_penalty` (``divergence="js"`` only).
    divergence : {"soft_target", "js"}, default="soft_target"
        ``"soft_target"``: :func:`soft_target_penalty`, KL from the neighbours' mean
        distribution; ``"js"``: the published method's Jensen–Shannon penalty,
        :func:`neighbourhood_penalty`.
    target_temperature : float, default=1.0
        Temperature of the soft target (``divergence="soft_target"`` only).
    adaptive : {None, "agreement", "density"}, default=None
        Per-row strength of the penalty. None: every row weighs 1.
        ``"agreement"``: row ``i`` weighs ``1 - q̄_i(y_i)``, the probability its
        neighbours' mean cached prediction puts on *other* classes than its label —
        the penalty acts where the neighbourhood disagrees with the label and
        vanishes where it agrees (needs ``target`` at each call).
        ``"density"``: row ``i`` weighs its mean cosine similarity to its neighbours
        (clipped at 0), divided by the mean over all rows — rows in dense regions
        are smoothed more than isolated ones (needs ``similarities``).
    similarities : Tensor or ndarray of shape (n_samples, k), optional
        Similarity of each row to each of its neighbours (``build_knn_graph(...,
        return_similarities=True)``); required by ``adaptive="density"``.

    Notes
    -----
    Per-row sample weights (``sample_weight`` at each call) multiply each row's own
    term, together with the ``adaptive`` weights: the penalty is
    ``mean_i(w_i * a_i * v_i)`` over the batch (divided by the batch size, not by the
    sum of the weights). They never change what is cached.

    Attributes
    ----------
    neighbors : Tensor of shape (n_samples, k), int64
    cache : PredictionCache
    aggregation : str
    row_weights : Tensor of shape (n_samples,) or None
        The fixed per-row weights of ``adaptive="density"``.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.penalties import NeighbourhoodSmoothing
    >>> neighbors = torch.tensor([[1], [0], [1]])
    >>> initial = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]))
    >>> smoothing = NeighbourhoodSmoothing(neighbors, initial, divergence="js")
    >>> logits = torch.zeros(2, 2, requires_grad=True)  # batch: rows 0 and 2
    >>> penalty = smoothing(logits, torch.tensor([0, 2]))
    >>> penalty.backward()
    >>> round(penalty.item(), 4)  # mean of JS((.5,.5), (.9,.1)) and JS((.5,.5), (.9,.1))
    0.1017
    >>> smoothing.cache.log_probs[2].exp()  # refreshed with the batch's prediction
    tensor([0.5000, 0.5000])
    """

    def __init__(
        self,
        neighbors: Tensor,
        initial_log_probs: Tensor,
        *,
        aggregation: str = "pairwise",
        divergence: str = "soft_target",
        target_temperature: float = 1.0,
        adaptive: str | None = None,
        similarities: Tensor | None = None,
    ) -> None:
        if adaptive not in ADAPTIVE:
            raise ValueError(f"adaptive must be None, 'agreement' or 'density'; got {adaptive!r}.")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be 'pairwise' or 'mean'; got {aggregation!r}.")
        if divergence not in DIVERGENCES:
            raise ValueError(f"divergence must be 'js' or 'soft_target'; got {divergence!r}.")
        if isinstance(neighbors, np.ndarray):
            neighbors = torch.from_numpy(neighbors)
        neighbors = torch.as_tensor(neighbors)
        if neighbors.ndim != 2 or neighbors.is_floating_point() or neighbors.is_complex():
            raise ValueError(
                "neighbors must be an integer array of shape (n_samples, k); got dtype "
                f"{neighbors.dtype} and shape {tuple(neighbors.shape)}."
            )
        cache = PredictionCache(initial_log_probs)
        if neighbors.shape[0] != cache.n_samples:
            raise ValueError(
                f"neighbors has {neighbors.shape[0]} rows but initial_log_probs has "
                f"{cache.n_samples}; both must have one row per training example."
            )
        if neighbors.numel() and (
            int(neighbors.min()) < 0 or int(neighbors.max()) >= cache.n_samples
        ):
            raise ValueError(
                f"neighbors must index rows in [0, {cache.n_samples}); got values in "
                f"[{int(neighbors.min())}, {int(neighbors.max())}]."
            )
        self.neighbors = neighbors.to(device=cache.log_probs.device, dtype=torch.int64)
        self.cache = cache
        if divergence == "js" and aggregation == "pairwise":
            cache.neg_entropy()  # the pairwise kernel reads it; fill it now, not in a batch
        self.aggregation = aggregation
        self.divergence = divergence
        self.target_temperature = target_temperature
        self.adaptive = adaptive
        self.row_weights = None
        if adaptive == "density":
            self.row_weights = _density_weights(similarities, tuple(neighbors.shape)).to(
                cache.log_probs.device
            )

    def __call__(
        self,
        logits: Tensor,
        indices: Tensor,
        target: Tensor | None = None,
        sample_weight: Tensor | None = None,
        *,
        update_cache: bool = True,
    ) -> Tensor:
        """Penalty of a batch, then refresh the batch's rows of the cache.

        Parameters
        ----------
        logits : Tensor of shape (B, n_classes)
            The model's logits for the batch rows.
        indices : Tensor of shape (B,), int64
            Those rows' positions in the training set (graph node ids).
        target : Tensor of shape (B,), int64, optional
            The rows' class indices; required by ``adaptive="agreement"``.
        sample_weight : Tensor of shape (B,), optional
            Finite non-negative per-row weights, on the device of ``logits``: row
            ``i``'s term is multiplied by ``w_i`` (and by its ``adaptive`` weight), so
            the penalty is ``mean_i(w_i * a_i * v_i)``. None weighs every row 1.
        update_cache : bool, default=True
            Overwrite the batch's rows of the cache with its detached predictions
            after computing the penalty (NeSCal's per-batch refresh). False leaves the
            cache as it is (a cache frozen at graph time, or one refilled each epoch
            with :meth:`refill_cache`).

        Returns
        -------
        Tensor
            Scalar penalty, differentiable with respect to ``logits``.

        Notes
        -----
        The value is that of :func:`soft_target_penalty` or
        :func:`neighbourhood_penalty` on ``log_softmax(logits)`` and the neighbours'
        cached log-probabilities, computed in a few fused passes: the neighbours'
        mean distribution is one gather-and-sum over the cached probabilities, the
        pairwise Jensen–Shannon needs one logarithm per (row, neighbour, class), and
        the gradient with respect to the logits is formed in closed form with the
        value (``w_i / B · (p_i − t_i)`` for the soft target; ``½ p log(p / m)``
        through ``log_softmax`` for JS), so the backward pass is one multiplication.
        """
        indices = torch.as_tensor(indices)
        if indices.ndim != 1 or logits.ndim != 2 or logits.shape[0] != indices.shape[0]:
            raise ValueError(
                "logits must have shape (B, n_classes) and indices shape (B,); got "
                f"{tuple(logits.shape)} and {tuple(indices.shape)}."
            )
        n_samples = self.cache.n_samples
        if indices.numel():
            low, high = (int(v) for v in torch.aminmax(indices))
            if low < 0 or high >= n_samples:
                raise IndexError(
                    f"indices must be training-row positions in [0, {n_samples}); got values "
                    f"in [{low}, {high}]."
                )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, logits)
        n_neighbours = self.neighbors.shape[1]
        if n_neighbours == 0 or not logits.is_floating_point():
            return self._reference_call(logits, indices, target, sample_weight, update_cache)
        z = logits.detach()
        cache = self.cache
        rows = indices.to(self.neighbors.device)
        log_p, p = log_softmax_and_probs(z)
        need_grad = logits.requires_grad and torch.is_grad_enabled()
        neg_entropy = None
        if z.shape[0] == 0:
            value, grad = z.sum() * 0.0, torch.zeros_like(z)
        elif self.divergence == "js" and self.aggregation == "pairwise":
            # (k, B) neighbour ids, so the sums over neighbours run over the outer axis.
            ids = self.neighbors.index_select(0, rows).t().reshape(-1)
            q = _like(cache.probs.index_select(0, ids), z).view(n_neighbours, z.shape[0], -1)
            q_neg_entropy = cache.neg_entropy().index_select(0, ids).to(z)
            sums = q.sum(dim=0) if self.adaptive == "agreement" else None
            weights = _times(self._row_weights(rows, sums, target, n_neighbours), sample_weight, z)
            value, grad, neg_entropy = js_pairwise_kernel(
                log_p, p, q, q_neg_entropy.view(n_neighbours, -1), weights, need_grad
            )
        else:
            ids = self.neighbors.index_select(0, rows)
            sums = _like(cache.prob_sums(ids), z)
            weights = _times(self._row_weights(rows, sums, target, n_neighbours), sample_weight, z)
            if self.divergence == "js":
                value, grad = js_mean_kernel(log_p, p, sums.div_(n_neighbours), weights, need_grad)
            else:
                soft, log_soft = self._soft_target(sums, ids)
                value, grad = soft_target_kernel(log_p, p, soft, log_soft, weights, need_grad)
        if update_cache:
            cache._write(indices, log_p, p, neg_entropy)
        if not need_grad:
            return value
        return _FusedPenalty.apply(logits, value, grad)

    def refill_cache(self, log_probs: Tensor) -> None:
        """Replace every cached row with ``log_probs`` (a detached copy).

        What NeSCal's ``cache="epoch"`` does at the start of each penalised epoch, with
        the log-probabilities of a fresh eval-mode forward pass over the training rows
        (:meth:`NeSCalRuntime.refresh_cache`).

        Parameters
        ----------
        log_probs : Tensor of shape (n_samples, n_classes)
            New log-probabilities of every training row, in graph-node order; stored
            on the cache's device and in its dtype.

        Examples
        --------
        >>> import torch
        >>> from nescal_sklearn.penalties import NeighbourhoodSmoothing
        >>> smoothing = NeighbourhoodSmoothing(
        ...     torch.tensor([[1], [0]]), torch.log(torch.full((2, 2), 0.5))
        ... )
        >>> smoothing.refill_cache(torch.log(torch.tensor([[0.9, 0.1], [0.2, 0.8]])))
        >>> smoothing.cache.probs
        tensor([[0.9000, 0.1000],
                [0.2000, 0.8000]])
        """
        cache = self.cache
        expected = (cache.n_samples, cache.n_classes)
        if not isinstance(log_probs, Tensor) or tuple(log_probs.shape) != expected:
            shape = tuple(log_probs.shape) if isinstance(log_probs, Tensor) else None
            raise ValueError(
                f"log_probs must be a tensor of shape {expected} (one row per cached "
                f"training row); got {type(log_probs).__name__} with shape {shape}."
            )
        if not log_probs.is_floating_point():
            raise ValueError(
                f"log_probs must be a floating-point tensor; got dtype {log_probs.dtype}."
            )
        store = cache.log_probs
        cache.log_probs = log_probs.detach().to(device=store.device, dtype=store.dtype).clone()
        if self.divergence == "js" and self.aggregation == "pairwise":
            cache.neg_entropy()  # the pairwise kernel reads it; fill it now, not in a batch

    def _soft_target(self, sums: Tensor, ids: Tensor) -> tuple[Tensor, Tensor]:
        """The soft target ``q̄^(1/T)`` (renormalised) and its log, from ``Σ_j q_ij``."""
        temperature = self.target_temperature
        if temperature == 1.0:
            target = sums.div_(sums.sum(dim=-1, keepdim=True))
            return target, target.log()
        finfo = torch.finfo(sums.dtype)
        if temperature > 1.0 and bool((sums < ids.shape[1] * finfo.tiny / finfo.eps).any()):
            # Softening lifts classes whose cached probabilities underflowed (they are
            # floored at `tiny`); take those means in log space from the log-probabilities.
            log_mean = torch.logsumexp(self.cache.neighbours(ids).to(sums), dim=1)
        else:
            log_mean = sums.log_()
        log_target, target = log_softmax_and_probs(log_mean.div_(temperature))
        return target, log_target

    def _reference_call(
        self,
        logits: Tensor,
        indices: Tensor,
        target: Tensor | None,
        sample_weight: Tensor | None = None,
        update_cache: bool = True,
    ) -> Tensor:
        """The unfused computation, for the cases the fused kernels do not take (k = 0)."""
        log_p = F.log_softmax(logits, dim=-1)
        neighbour_ids = self.neighbors[indices.to(self.neighbors.device)]
        neighbour_log_probs = self.cache.neighbours(neighbour_ids).to(log_p.device)
        sums = neighbour_log_probs.detach().exp().sum(dim=1)
        weights = self._row_weights(indices, sums, target, neighbour_log_probs.shape[1])
        weights = _times(weights, sample_weight, log_p)
        if self.divergence == "soft_target":
            value = soft_target_penalty(
                log_p, neighbour_log_probs, temperature=self.target_temperature, weights=weights
            )
        else:
            value = neighbourhood_penalty(
                log_p, neighbour_log_probs, self.aggregation, weights=weights
            )
        if update_cache:
            self.cache.update(indices, log_p.detach())
        return value

    def _row_weights(
        self, indices: Tensor, prob_sums: Tensor, target: Tensor | None, n_neighbours: int
    ) -> Tensor | None:
        """Per-row weights of ``adaptive`` (None without); ``prob_sums`` is ``Σ_j q_ij``."""
        if self.adaptive == "density":
            return self.row_weights.index_select(0, indices.to(self.row_weights.device))
        if self.adaptive != "agreement":
            return None
        if target is None:
            raise ValueError("adaptive='agreement' needs the batch's target labels; got None.")
        target = torch.as_tensor(target, device=prob_sums.device).long()
        if target.shape != indices.shape:
            raise ValueError(
                f"target must have shape {tuple(indices.shape)} like indices; got "
                f"{tuple(target.shape)}."
            )
        on_label = prob_sums.gather(1, target.unsqueeze(1)).squeeze(1) / n_neighbours
        return (1.0 - on_label).clamp(min=0.0, max=1.0)

    def to(self, device: torch.device | str) -> NeighbourhoodSmoothing:
        """Move the graph and the cache to ``device`` in place and return ``self``."""
        self.neighbors = self.neighbors.to(device)
        self.cache.to(device)
        if self.row_weights is not None:
            self.row_weights = self.row_weights.to(device)
        return self

    def __repr__(self) -> str:
        n_samples, k = self.neighbors.shape
        return (
            f"NeighbourhoodSmoothing(n_samples={n_samples}, n_neighbors={k}, "
            f"n_classes={self.cache.n_classes}, aggregation={self.aggregation!r}, "
            f"divergence={self.divergence!r}, adaptive={self.adaptive!r})"
        )


def _check_sample_weight(sample_weight, logits: Tensor) -> Tensor:
    """Check per-row weights for the batch ``logits``; return them detached, in its dtype."""
    if not isinstance(sample_weight, Tensor):
        raise TypeError(
            "sample_weight must be None or a 1-D floating-point tensor of per-row weights; "
            f"got {type(sample_weight).__name__}."
        )
    if not sample_weight.is_floating_point():
        raise TypeError(
            f"sample_weight must be a floating-point tensor; got {sample_weight.dtype}."
        )
    if sample_weight.shape != logits.shape[:1]:
        raise ValueError(
            f"sample_weight must have shape (B,) = ({logits.shape[0]},), one weight per batch "
            f"row; got shape {tuple(sample_weight.shape)}."
        )
    if sample_weight.device != logits.device:
        raise ValueError(
            f"sample_weight must be on the device of logits ({logits.device}); got "
            f"{sample_weight.device}."
        )
    bad = ~(torch.isfinite(sample_weight) & (sample_weight >= 0))
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"sample_weight must be finite and >= 0; got {float(sample_weight[row])!r} at "
            f"row {row}."
        )
    dtype = logits.dtype if logits.is_floating_point() else sample_weight.dtype
    return sample_weight.detach().to(dtype)


def _times(row_weights: Tensor | None, sample_weight: Tensor | None, like: Tensor) -> Tensor | None:
    """The product of the ``adaptive`` row weights and the sample weights (None for 1).

    Both are taken in the dtype and on the device of the batch ``like`` (the float32
    density weights of a float64 batch are widened; otherwise nothing is converted).
    """
    if row_weights is not None:
        row_weights = row_weights.to(device=like.device, dtype=like.dtype)
    if sample_weight is None:
        return row_weights
    if row_weights is None:
        return sample_weight
    return row_weights * sample_weight


def _like(values: Tensor, like: Tensor) -> Tensor:
    """Cached probabilities on ``like``'s device and dtype, still at least ``tiny`` there."""
    if values.dtype == like.dtype and values.device == like.device:
        return values
    return values.to(like).clamp_(min=torch.finfo(like.dtype).tiny)


def _density_weights(similarities, shape: tuple[int, int]) -> Tensor:
    """Mean similarity to the neighbours, clipped at 0, scaled to mean 1 over the rows."""
    if similarities is None:
        raise ValueError(
            "adaptive='density' needs the graph's similarities (build_knn_graph(..., "
            "return_similarities=True)); got None."
        )
    if isinstance(similarities, np.ndarray):
        similarities = torch.from_numpy(similarities)
    similarities = torch.as_tensor(similarities, dtype=torch.float32)
    if tuple(similarities.shape) != shape:
        raise ValueError(
            f"similarities must have the shape of neighbors {shape}; got "
            f"{tuple(similarities.shape)}."
        )
    if not torch.isfinite(similarities).all():
        raise ValueError("similarities must be finite.")
    density = similarities.mean(dim=1).clamp(min=0.0)
    mean = density.mean()
    if not mean > 0:
        return torch.ones(shape[0])
    return density / mean
