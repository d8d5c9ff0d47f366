"""The NeSCal objective: a stateless spec (base loss + neighbourhood penalty settings)."""

from __future__ import annotations

from numbers import Integral, Real

import torch
from torch import nn

from .._params import check_int
from ..exceptions import ParameterError, ParameterTypeError
from ..graph import GRAPHS, KNN_METHODS, MEMBER_GRAPHS, REDUCTIONS, neighbourhood_from_model
from ..penalties import (
    ADAPTIVE,
    AGGREGATIONS,
    CACHE_MODES,
    DIVERGENCES,
    SCHEDULES,
    NeighbourhoodSmoothing,
    NeSCalRuntime,
)
from ._base import TrainingLoss, get_loss, register_loss

__all__ = ["NeSCalLoss"]

#: Each string setting of :class:`NeSCalLoss` -> its allowed values, taken from the layer
#: that implements them.
CHOICES: dict[str, tuple[str, ...]] = {
    "schedule": SCHEDULES,
    "aggregation": AGGREGATIONS,
    "graph": GRAPHS,
    "reduction": REDUCTIONS,
    "graph_method": KNN_METHODS,
    "divergence": DIVERGENCES,
    "adaptive": ADAPTIVE,
    "cache": CACHE_MODES,
    "member_graph": MEMBER_GRAPHS,
}


@register_loss("nescal")
class NeSCalLoss(TrainingLoss):
    """Neighbourhood Smoothing for Calibration (NeSCal): the settings of one method.

    The objective, after a warm-up on the base loss alone, is

        ``base(logits, y) + lambda(t) * penalty(p_i, neighbours of i)``,

    where the neighbours come from a k-nearest-neighbour graph built once, when the
    warm-up ends, on the network's own embeddings of the training rows, and their
    distributions are read from a cache that each batch refreshes with its own
    detached predictions (see ``cache`` for the alternatives). With the default ``divergence="soft_target"`` the penalty
    is ``KL(q̄_i || p_i)``, ``q̄_i`` the neighbours' mean cached distribution; the
    method as published is the Jensen–Shannon penalty, ``divergence="js"``
    (``mean_j JS(p_i, q_ij)`` with ``aggregation="pairwise"``).

    The defaults are the best variant of this project's study on tabular data
    (``docs/nescal_on_tabular.md``): the warm-up ends at the base loss's
    validation optimum (``warmup="auto"``) and the penalty is the soft target
    with ``weight=1.0``. The published method is
    ``NeSCalLoss(warmup=<epochs or fraction>, divergence="js", weight=1.0)``.

    This object only holds settings: it is a cloneable spec that a fit never
    mutates. Calling it computes the base loss; the graph, the cache and the
    current weight of a fit are one :class:`~nescal_sklearn.penalties.NeSCalRuntime`,
    built by :meth:`build_runtime` and owned by whoever trains (the estimator,
    or a plain PyTorch loop: see ``examples/torch_loop.py``).

    Parameters
    ----------
    n_neighbors : int, default=10
        Neighbours per training row in the graph.
    weight : float, default=1.0
        Penalty weight lambda (>= 0) at the end of warm-up.
    warmup : int, float or "auto", default="auto"
        Length of the base-loss warm-up: an ``int`` is a number of epochs, a ``float``
        in [0, 1) a fraction of ``max_epochs`` (rounded down). ``"auto"`` ends the
        warm-up where the base loss's validation NLL stops improving (no improvement
        for 5 epochs), restores that best checkpoint's weights (not the
        optimizer state) and builds the graph there; it needs validation rows
        (the estimator's early stopping).
    divergence : {"soft_target", "js"}, default="soft_target"
        ``"soft_target"``: KL from the neighbours' mean distribution to the
        prediction — a neighbour-informed soft label
        that keeps the wrong-class ranking label smoothing erases. ``"js"``: the
        published method's Jensen–Shannon penalty, averaged over the neighbours.
    graph : {"knn", "random"}, default="knn"
        ``"random"`` is the random-graph control: the same degree, neighbours drawn
        uniformly at random (seeded by the estimator's ``random_state``).
    base_loss : str or TrainingLoss, default="ce"
        The loss the penalty is added to (for example ``"label_smoothing"``). Its own
        hyperparameters are nested: ``base_loss__epsilon``.

    The settings the project's ablation found inert, or never ablated (the weight
    schedule, the auto warm-up's patience, the JS aggregation, the embedding reduction,
    the neighbour search, the soft target's temperature, per-row strength, the cache
    refresh, the ensemble graph), are fixed here at the values below and are parameters
    of :class:`~nescal_sklearn.losses.experimental.ExperimentalNeSCalLoss`
    (``loss="nescal_experimental"``).

    Notes
    -----
    ``warmup="auto"`` needs validation rows; ``NeSCalClassifier`` falls back to a
    0.3 fraction (with a warning) when early stopping is off.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from nescal_sklearn.losses import NeSCalLoss
    >>> spec = NeSCalLoss(n_neighbors=2, weight=0.5, warmup=0)
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> X, y = torch.randn(6, 3), torch.tensor([0, 1, 0, 1, 0, 1])
    >>> runtime = spec.build_runtime(net, X, start_epoch=0, max_epochs=10, random_state=0)
    >>> runtime.set_epoch(0)
    0.5
    >>> rows = torch.tensor([0, 1])
    >>> logits = net(X[rows])
    >>> loss = spec(logits, y[rows]) + runtime.current_weight * runtime.penalty(logits, rows)
    >>> bool(loss > 0)
    True
    """

    uses_neighbours = True

    #: Fixed settings (parameters of ``ExperimentalNeSCalLoss``).
    schedule = "constant"
    warmup_patience = 5
    aggregation = "pairwise"
    reduction = None
    n_components = None
    graph_method = "auto"
    target_temperature = 1.0
    adaptive = None
    cache = "batch"
    member_graph = "shared"

    def __init__(
        self,
        n_neighbors: int = 10,
        weight: float = 1.0,
        warmup: int | float | str = "auto",
        divergence: str = "soft_target",
        graph: str = "knn",
        base_loss: str | TrainingLoss = "ce",
    ) -> None:
        self.n_neighbors = n_neighbors
        self.weight = weight
        self.warmup = warmup
        self.divergence = divergence
        self.graph = graph
        self.base_loss = base_loss

    # -- validation ---------------------------------------------------------------
    def validate(self) -> None:
        name = type(self).__name__
        check_int("n_neighbors", self.n_neighbors, low=1, owner=name)
        self._check_real("weight", low=0.0)
        self._check_real("target_temperature", low=0.0, low_inclusive=False)
        for param, allowed in CHOICES.items():
            if getattr(self, param) not in allowed:
                raise ParameterError(
                    param,
                    f"{name}: {param} must be one of {list(allowed)}; got {getattr(self, param)!r}.",
                )
        check_int("warmup_patience", self.warmup_patience, low=1, owner=name)
        warmup = self.warmup
        if warmup == "auto":
            pass
        elif isinstance(warmup, bool) or not isinstance(warmup, Real):
            raise ParameterTypeError(
                "warmup",
                f"{name}: warmup must be an int number of epochs, a float fraction in "
                f"[0, 1) or 'auto'; got {warmup!r}.",
            )
        elif isinstance(warmup, Integral):
            if warmup < 0:
                raise ParameterError(
                    "warmup", f"{name}: warmup must be >= 0 epochs; got {warmup!r}."
                )
        elif not 0.0 <= warmup < 1.0:
            raise ParameterError(
                "warmup",
                f"{name}: warmup as a float is a fraction of max_epochs and must be in "
                f"[0, 1); got {warmup!r}.",
            )
        if self.adaptive == "density" and self.graph != "knn":
            raise ParameterError(
                "adaptive",
                f"{name}: adaptive='density' weighs rows by their similarity to kNN "
                f"neighbours and needs graph='knn'; got graph={self.graph!r}.",
            )
        check_int("n_components", self.n_components, low=1, owner=name, none=True)
        try:
            base = self.base()
        except ParameterError as exc:  # get_loss names the parameter "loss"
            raise type(exc)("base_loss", str(exc)) from None
        if base.uses_neighbours:
            raise ParameterError(
                "base_loss", f"{name}: base_loss cannot itself be a neighbour loss; got {base!r}."
            )
        try:
            base.validate()
        except ParameterError as exc:
            raise exc.nested("base_loss") from None

    # -- schedule -----------------------------------------------------------------
    def warmup_epochs(self, max_epochs: int) -> int | None:
        """Base-loss epochs before the graph is built (None for ``warmup="auto"``).

        Examples
        --------
        >>> from nescal_sklearn.losses import NeSCalLoss
        >>> NeSCalLoss(warmup=0.3).warmup_epochs(60), NeSCalLoss(warmup=5).warmup_epochs(60)
        (18, 5)
        """
        if self.warmup == "auto":
            return None
        if isinstance(self.warmup, Integral):
            return int(self.warmup)
        return int(float(self.warmup) * max_epochs)

    # -- the runtime ----------------------------------------------------------------
    def build_runtime(
        self,
        module: nn.Module,
        X: torch.Tensor,
        *,
        start_epoch: int,
        max_epochs: int,
        random_state: int | None = None,
        embedding_layer: str | None = None,
        n_neighbors: int | None = None,
        deadline: float | None = None,
    ) -> NeSCalRuntime:
        """Build the graph on ``module``'s embeddings of the training rows ``X``.

        Calls :func:`~nescal_sklearn.graph.neighbourhood_from_model` with this spec's
        graph settings and wraps the result, with its penalty and schedule
        settings, in a new :class:`~nescal_sklearn.penalties.NeSCalRuntime`. The
        spec itself is not changed.

        Parameters
        ----------
        module : torch.nn.Module
            The network after warm-up (it runs once in eval mode, without gradients).
        X : Tensor of shape (n_samples, n_features)
            The training rows, in the order of the row ids the batches will carry.
        start_epoch : int
            0-based epoch about to run: the first penalised one.
        max_epochs : int
            The training budget (end of the cosine schedule).
        random_state : int or None, default=None
            Seed of the approximate search, the reductions and the random graph.
        embedding_layer : str or None, default=None
            Layer whose input is the embedding (None: the last ``nn.Linear``).
        n_neighbors : int or None, default=None
            Neighbours per row for this fit, instead of the spec's ``n_neighbors``
            (what an estimator uses when the data holds too few rows for it).
        deadline : float or None, default=None
            A time on ``time.perf_counter``'s clock by which the graph must be built
            (:func:`~nescal_sklearn.graph.build_knn_graph`'s ``deadline``); None: none.

        Returns
        -------
        NeSCalRuntime

        Raises
        ------
        GraphTimeout
            When the search passes ``deadline``.
        """
        found = neighbourhood_from_model(
            module,
            X,
            self.n_neighbors if n_neighbors is None else n_neighbors,
            graph=self.graph,
            embedding_layer=embedding_layer,
            reduction=self.reduction,
            n_components=self.n_components,
            method=self.graph_method,
            random_state=random_state,
            return_similarities=self.adaptive == "density",
            member_graph=self.member_graph,
            deadline=deadline,
        )
        smoothing = NeighbourhoodSmoothing(
            found.neighbors,
            found.log_probs,
            aggregation=self.aggregation,
            divergence=self.divergence,
            target_temperature=float(self.target_temperature),
            adaptive=self.adaptive,
            similarities=found.similarities,
        )
        return NeSCalRuntime(
            smoothing,
            weight=float(self.weight),
            schedule=self.schedule,
            start_epoch=start_epoch,
            end_epoch=max(max_epochs, start_epoch + 1),
            build_seconds=found.seconds,
            cache=self.cache,
        )

    def set_params(self, **params) -> NeSCalLoss:
        """Set parameters; ``base_loss__<name>`` reaches into the base loss.

        When ``base_loss`` is a registered name, a nested parameter first replaces it
        with a loss object of that name (default parameters), as
        ``NeSCalClassifier.set_params(loss__...)`` does for ``loss``.

        Examples
        --------
        >>> from nescal_sklearn.losses import NeSCalLoss
        >>> NeSCalLoss(base_loss="label_smoothing").set_params(base_loss__epsilon=0.2)
        NeSCalLoss(base_loss=LabelSmoothingLoss(epsilon=0.2))
        """
        params = dict(params)
        nested = any(key.startswith("base_loss__") for key in params)
        base = params.get("base_loss", self.base_loss)
        if nested and isinstance(base, str):
            params["base_loss"] = get_loss(base)  # set before the nested values
        return super().set_params(**params)

    # -- computation --------------------------------------------------------------
    def base(self) -> TrainingLoss:
        """The base loss object (``base_loss`` itself, or a new one from its name)."""
        return get_loss(self.base_loss)

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The base loss alone; the penalty is the runtime's (see :meth:`build_runtime`).

        ``sample_weight`` is passed on to the base loss (and, by whoever trains, to
        :meth:`NeSCalRuntime.penalty <nescal_sklearn.penalties.NeSCalRuntime.penalty>`).
        """
        if sample_weight is None:
            return self.base().forward(logits, target)
        return self.base()(logits, target, sample_weight=sample_weight)
