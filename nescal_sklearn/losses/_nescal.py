"""The NeSCal objective: a base loss plus the neighbourhood-smoothing penalty."""

from __future__ import annotations

from numbers import Integral, Real

import torch

from ..penalties import ADAPTIVE, DIVERGENCES, NeighbourhoodSmoothing, penalty_weight
from ._base import TrainingLoss, get_loss, register_loss

__all__ = ["NeSCalLoss"]

_SCHEDULES = ("constant", "cosine")
_AGGREGATIONS = ("pairwise", "mean")
_GRAPHS = ("knn", "random")
_REDUCTIONS = (None, "pca", "umap")
_METHODS = ("auto", "exact", "approximate")


@register_loss("nescal")
class NeSCalLoss(TrainingLoss):
    """Neighbourhood Smoothing for Calibration (NeSCal).

    The defaults are the best variant of this project's study on tabular data
    (``docs/nescal_on_tabular.md``): the warm-up ends at the cross-entropy
    validation optimum (``warmup="auto"``) and the penalty is the neighbour
    soft target (``divergence="soft_target"``, ``weight=1.0``). The method as
    published — a fixed warm-up then the Jensen–Shannon penalty — is
    ``NeSCalLoss(warmup=<epochs>, divergence="js", weight=1.0)``.

    After a warm-up with the base loss, a k-nearest-neighbour graph is built once
    on the network's own embeddings of the training rows. From then on the loss is
    ``base(logits, y) + lambda(t) * mean_i JS(p_i || neighbours of i)``, the
    neighbours' distributions read from a cache that each batch refreshes with its
    own detached predictions.

    Parameters
    ----------
    n_neighbors : int, default=10
        Neighbours per training row in the graph.
    weight : float, default=1.0
        Penalty weight lambda (>= 0) at the end of warm-up.
    schedule : {"constant", "cosine"}, default="constant"
        ``"cosine"`` decays the weight to 0 from the end of warm-up to the last epoch.
    warmup : int, float or "auto", default="auto"
        Length of the base-loss warm-up: an ``int`` is a number of epochs, a ``float``
        in [0, 1) a fraction of ``max_epochs`` (rounded down). ``"auto"`` ends the
        warm-up where the base loss's validation NLL stops improving (no improvement
        for ``warmup_patience`` epochs), restores that best checkpoint and builds the
        graph there; it needs the estimator's early stopping (validation rows).
    warmup_patience : int, default=5
        Patience of ``warmup="auto"``.
    aggregation : {"pairwise", "mean"}, default="pairwise"
        ``"pairwise"`` averages the divergence to each neighbour; ``"mean"`` takes the
        divergence to the neighbours' mean distribution (cheaper).
    graph : {"knn", "random"}, default="knn"
        ``"random"`` is the random-graph control: the same degree, neighbours drawn
        uniformly at random (seeded by the estimator's ``random_state``).
    reduction : {None, "pca", "umap"}, default=None
        Optional reduction of the embeddings before the neighbour search.
    n_components : int or None, default=None
        Output dimension of ``reduction`` (library default when None).
    graph_method : {"auto", "exact", "approximate"}, default="auto"
        Neighbour search, see :func:`nescal_sklearn.graph.build_knn_graph`.
    divergence : {"js", "soft_target"}, default="soft_target"
        ``"js"``: the method's Jensen–Shannon penalty (with ``aggregation``).
        ``"soft_target"``: KL from the neighbours' mean distribution (at
        ``target_temperature``) to the prediction — a neighbour-informed soft label
        that keeps the wrong-class ranking label smoothing erases.
    target_temperature : float, default=1.0
        Temperature of the soft target (``divergence="soft_target"`` only).
    base_loss : str or TrainingLoss, default="ce"
        The loss the penalty is added to (for example ``"label_smoothing"``). Its own
        hyperparameters are nested: ``base_loss__epsilon``.
    adaptive : {None, "agreement", "density"}, default=None
        Per-row strength of the penalty (see ``NeighbourhoodSmoothing``). None: every
        row weighs ``weight``. ``"agreement"``: row ``i`` weighs
        ``weight * (1 - q̄_i(y_i))``, the mass its neighbourhood puts on other classes
        than its label. ``"density"``: ``weight`` times the row's mean cosine
        similarity to its neighbours, scaled to mean 1 (needs ``graph="knn"``).

    Notes
    -----
    ``warmup="auto"`` needs validation rows; ``NeSCalClassifier`` falls back to a
    0.3 fraction (with a warning) when early stopping is off. In a plain PyTorch loop: call :meth:`start_smoothing` once with the graph and the
    initial log-probabilities of every training row, :meth:`set_epoch` at the start of
    each epoch, and ``loss(logits, target, indices=rows)`` for each batch. Before
    :meth:`start_smoothing`, the loss is the base loss alone.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import NeSCalLoss
    >>> loss = NeSCalLoss(n_neighbors=2, weight=0.5, warmup=0)
    >>> neighbors = torch.tensor([[1, 2], [0, 2], [0, 1]])
    >>> loss.start_smoothing(neighbors, torch.log_softmax(torch.zeros(3, 2), dim=1))
    >>> loss.set_epoch(0, max_epochs=10)
    0.5
    >>> value = loss(torch.zeros(2, 2), torch.tensor([0, 1]), indices=torch.tensor([0, 1]))
    >>> round(float(value), 4)  # log 2 + 0.5 * 0 (predictions equal the neighbours')
    0.6931
    """

    uses_neighbours = True

    def __init__(
        self,
        n_neighbors: int = 10,
        weight: float = 1.0,
        schedule: str = "constant",
        warmup: int | float | str = "auto",
        warmup_patience: int = 5,
        aggregation: str = "pairwise",
        graph: str = "knn",
        reduction: str | None = None,
        n_components: int | None = None,
        graph_method: str = "auto",
        divergence: str = "soft_target",
        target_temperature: float = 1.0,
        base_loss: str | TrainingLoss = "ce",
        adaptive: str | None = None,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.weight = weight
        self.schedule = schedule
        self.warmup = warmup
        self.warmup_patience = warmup_patience
        self.aggregation = aggregation
        self.graph = graph
        self.reduction = reduction
        self.n_components = n_components
        self.graph_method = graph_method
        self.divergence = divergence
        self.target_temperature = target_temperature
        self.base_loss = base_loss
        self.adaptive = adaptive

    # -- validation ---------------------------------------------------------------
    def validate(self) -> None:
        name = type(self).__name__
        if isinstance(self.n_neighbors, bool) or not isinstance(self.n_neighbors, Integral):
            raise TypeError(f"{name}: n_neighbors must be an int >= 1; got {self.n_neighbors!r}.")
        if self.n_neighbors < 1:
            raise ValueError(f"{name}: n_neighbors must be an int >= 1; got {self.n_neighbors!r}.")
        self._check_real("weight", low=0.0)
        self._check_real("target_temperature", low=0.0, low_inclusive=False)
        for param, allowed in (
            ("schedule", _SCHEDULES),
            ("aggregation", _AGGREGATIONS),
            ("graph", _GRAPHS),
            ("reduction", _REDUCTIONS),
            ("graph_method", _METHODS),
            ("divergence", DIVERGENCES),
            ("adaptive", ADAPTIVE),
        ):
            if getattr(self, param) not in allowed:
                raise ValueError(
                    f"{name}: {param} must be one of {list(allowed)}; got {getattr(self, param)!r}."
                )
        warmup = self.warmup
        if isinstance(self.warmup_patience, bool) or not isinstance(
            self.warmup_patience, Integral
        ) or self.warmup_patience < 1:
            raise ValueError(
                f"{name}: warmup_patience must be an int >= 1; got {self.warmup_patience!r}."
            )
        if warmup == "auto":
            pass
        elif isinstance(warmup, bool) or not isinstance(warmup, Real):
            raise TypeError(
                f"{name}: warmup must be an int number of epochs, a float fraction in "
                f"[0, 1) or 'auto'; got {warmup!r}."
            )
        elif isinstance(warmup, Integral):
            if warmup < 0:
                raise ValueError(f"{name}: warmup must be >= 0 epochs; got {warmup!r}.")
        elif not 0.0 <= warmup < 1.0:
            raise ValueError(
                f"{name}: warmup as a float is a fraction of max_epochs and must be in "
                f"[0, 1); got {warmup!r}."
            )
        if self.adaptive == "density" and self.graph != "knn":
            raise ValueError(
                f"{name}: adaptive='density' weighs rows by their similarity to kNN "
                f"neighbours and needs graph='knn'; got graph={self.graph!r}."
            )
        if self.n_components is not None and (
            isinstance(self.n_components, bool)
            or not isinstance(self.n_components, Integral)
            or self.n_components < 1
        ):
            raise ValueError(
                f"{name}: n_components must be None or an int >= 1; got {self.n_components!r}."
            )
        base = get_loss(self.base_loss)
        if base.uses_neighbours:
            raise ValueError(f"{name}: base_loss cannot itself be a neighbour loss; got {base!r}.")
        base.validate()

    # -- schedule -----------------------------------------------------------------
    def warmup_epochs(self, max_epochs: int) -> int | None:
        """Base-loss epochs before the graph is built (None for ``warmup="auto"``)."""
        if self.warmup == "auto":
            return None
        if isinstance(self.warmup, Integral):
            return int(self.warmup)
        return int(float(self.warmup) * max_epochs)

    def set_epoch(self, epoch: int, *, max_epochs: int) -> float:
        """Set the penalty weight for the 0-based ``epoch`` about to run; return it."""
        start = getattr(self, "start_epoch_", None)
        if start is None:
            start = self.warmup_epochs(max_epochs) or 0
        self.current_weight_ = penalty_weight(
            epoch,
            weight=float(self.weight),
            schedule=self.schedule,
            start_epoch=start,
            end_epoch=max(max_epochs, start + 1),
        )
        return self.current_weight_

    # -- state --------------------------------------------------------------------
    def start_smoothing(
        self,
        neighbors: torch.Tensor,
        initial_log_probs: torch.Tensor,
        *,
        epoch: int | None = None,
        similarities: torch.Tensor | None = None,
    ) -> None:
        """Switch the penalty on with a neighbour graph and a filled prediction cache.

        ``epoch`` (0-based, the first penalised epoch) anchors the weight schedule;
        None uses the fixed warm-up length. ``similarities`` (one per neighbour) are
        required by ``adaptive="density"``.
        """
        self.smoothing_ = NeighbourhoodSmoothing(
            neighbors,
            initial_log_probs,
            aggregation=self.aggregation,
            divergence=self.divergence,
            target_temperature=float(self.target_temperature),
            adaptive=self.adaptive,
            similarities=similarities,
        )
        self.start_epoch_ = epoch

    def stop_smoothing(self) -> None:
        """Drop the graph and the cache (nothing of them is needed at inference)."""
        for attr in (
            "smoothing_",
            "current_weight_",
            "base_loss_",
            "last_penalty_",
            "start_epoch_",
        ):
            self.__dict__.pop(attr, None)

    @property
    def smoothing_active(self) -> bool:
        """Whether :meth:`start_smoothing` has been called (and not stopped)."""
        return getattr(self, "smoothing_", None) is not None

    # -- computation --------------------------------------------------------------
    def _base(self) -> TrainingLoss:
        if isinstance(self.base_loss, TrainingLoss):
            return self.base_loss
        base = self.__dict__.get("base_loss_")
        if base is None or base.name != self.base_loss:
            base = get_loss(self.base_loss)
            self.base_loss_ = base
        return base

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The base loss alone (what validation reports: no penalty)."""
        return self._base().forward(logits, target)

    def __call__(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        *,
        indices: torch.Tensor | None = None,
    ) -> torch.Tensor:
        loss = self.forward(logits, target)
        weight = getattr(self, "current_weight_", float(self.weight))
        if not self.smoothing_active or indices is None:
            self.last_penalty_ = None
            return loss
        penalty = self.smoothing_(logits, indices, target)
        self.last_penalty_ = float(penalty.detach())
        if weight == 0.0:
            return loss
        return loss + weight * penalty


