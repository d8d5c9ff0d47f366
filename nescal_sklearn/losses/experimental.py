"""Experimental NeSCal settings: the knobs the ablation found inert, or never measured.

:class:`ExperimentalNeSCalLoss` is :class:`~nescal_sklearn.losses.NeSCalLoss` with its
fixed settings opened up as parameters, for studies (``loss="nescal_experimental"``).
These settings are not part of the supported surface: they may change or go without a
deprecation. ``docs/ablations.md`` says what the ablation measured for each.
"""

from __future__ import annotations

from ._base import TrainingLoss, register_loss
from ._nescal import NeSCalLoss

__all__ = ["ExperimentalNeSCalLoss"]


@register_loss("nescal_experimental")
class ExperimentalNeSCalLoss(NeSCalLoss):
    """:class:`~nescal_sklearn.losses.NeSCalLoss` with every setting a parameter.

    Parameters
    ----------
    n_neighbors, weight, warmup, divergence, graph, base_loss
        As in :class:`~nescal_sklearn.losses.NeSCalLoss`.
    schedule : {"constant", "cosine"}, default="constant"
        ``"cosine"`` decays the weight to 0 from the end of warm-up to the last epoch.
    warmup_patience : int, default=5
        Patience of ``warmup="auto"``.
    aggregation : {"pairwise", "mean"}, default="pairwise"
        ``divergence="js"`` only: ``"pairwise"`` averages the divergence to each
        neighbour; ``"mean"`` takes the divergence to the neighbours' mean
        distribution (cheaper).
    reduction : {None, "pca", "umap"}, default=None
        Optional reduction of the embeddings before the neighbour search.
    n_components : int or None, default=None
        Output dimension of ``reduction`` (library default when None).
    graph_method : {"auto", "exact", "approximate"}, default="auto"
        Neighbour search, see :func:`nescal_sklearn.graph.build_knn_graph`.
    target_temperature : float, default=1.0
        Temperature of the soft target (``divergence="soft_target"`` only).
    adaptive : {None, "agreement", "density"}, default=None
        Per-row strength of the penalty (see ``NeighbourhoodSmoothing``). None: every
        row weighs ``weight``. ``"agreement"``: row ``i`` weighs
        ``weight * (1 - q̄_i(y_i))``, the mass its neighbourhood puts on other classes
        than its label. ``"density"``: ``weight`` times the row's mean cosine
        similarity to its neighbours, scaled to mean 1 (needs ``graph="knn"``).
    cache : {"batch", "frozen", "epoch"}, default="batch"
        When the neighbours' cached predictions are refreshed. ``"batch"``: each
        batch overwrites its own rows with its detached (train-mode) predictions, at
        no extra cost (NeSCal as published). ``"frozen"``: never; the neighbours are
        read as the network predicted them when the graph was built (eval mode).
        ``"epoch"``: the whole cache is recomputed by one eval-mode forward pass over
        the training rows at the start of each penalised epoch after the first (an
        extra forward pass per epoch: ``NeSCalClassifier`` records its wall time as
        ``cache_seconds`` in ``history_``; a plain PyTorch loop calls
        :meth:`NeSCalRuntime.refresh_cache
        <nescal_sklearn.penalties.NeSCalRuntime.refresh_cache>` itself).
    member_graph : {"shared", "per_member"}, default="shared"
        For a network that returns several members' logits, shape
        (n, n_members, n_classes) (``module_kwargs={"n_members": k}``, TabM): one
        graph built on all members' embeddings side by side and used by each, or one
        graph per member on its own embedding. Each member is smoothed towards its
        own cached predictions of the neighbours either way. Ignored for a single
        network.

    Examples
    --------
    >>> from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
    >>> ExperimentalNeSCalLoss(schedule="cosine", cache="frozen").validate()
    """

    def __init__(
        self,
        n_neighbors: int = 10,
        weight: float = 1.0,
        warmup: int | float | str = "auto",
        *,
        divergence: str = "soft_target",
        graph: str = "knn",
        base_loss: str | TrainingLoss = "ce",
        schedule: str = "constant",
        warmup_patience: int = 5,
        aggregation: str = "pairwise",
        reduction: str | None = None,
        n_components: int | None = None,
        graph_method: str = "auto",
        target_temperature: float = 1.0,
        adaptive: str | None = None,
        cache: str = "batch",
        member_graph: str = "shared",
    ) -> None:
        super().__init__(
            n_neighbors=n_neighbors,
            weight=weight,
            warmup=warmup,
            divergence=divergence,
            graph=graph,
            base_loss=base_loss,
        )
        self.schedule = schedule
        self.warmup_patience = warmup_patience
        self.aggregation = aggregation
        self.reduction = reduction
        self.n_components = n_components
        self.graph_method = graph_method
        self.target_temperature = target_temperature
        self.adaptive = adaptive
        self.cache = cache
        self.member_graph = member_graph
