"""The network of a fit: the module, checked, and the skorch net that trains it.

* :func:`plan_neighbours` fixes NeSCal's warm-up and neighbour count for the fit's data;
* :func:`build_network` builds the module a fit trains (the default network with the
  options of ``module_kwargs`` on the column layout, a module class, or a copy of an
  instance) and checks it on two training rows;
* :func:`make_net` assembles :class:`NeSCalNet` and its callbacks, in the order they
  must run each epoch;
* :class:`NeSCalNet` extends skorch through its documented hooks only: ``initialize``
  (the per-fit attributes below), ``get_all_learnable_params`` (frozen parameters stay
  out of the optimizer), ``infer`` (the batch arrives as a dict ``{"X": features,
  "index": row ids}``; the module sees the features only), ``get_loss`` (skorch's, with
  :class:`TrainingCriterion` as the criterion, plus the NeSCal penalty) and
  ``train_step_single`` (mixup, as an explicit step). No private name of skorch is used;
* :func:`module_logits` is the network's prediction on rows, in eval mode.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from skorch import NeuralNet
from skorch.callbacks import EarlyStopping, PassthroughScoring, ProgressBar
from skorch.dataset import Dataset, unpack_data
from skorch.helper import predefined_split
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from ..exceptions import ParameterError
from ..losses import TrainingLoss
from ..nn import build_module, ensemble_logits, flatten_members, layout_kwargs
from ._callbacks import (
    BuildNeighbourhood,
    PenaltySchedule,
    PlainPrintLog,
    StopAfterPatience,
    StopOnTime,
    ValidationNLL,
    WarmupEnd,
)
from ._fit_data import FitData, largest_abs
from ._freeze import FrozenParts, Unfreeze, resolve_frozen
from ._schedule import lr_scheduler
from ._settings import FitSettings

__all__ = [
    "NeSCalNet",
    "NeighbourPlan",
    "TrainingCriterion",
    "build_network",
    "frozen_parts",
    "make_net",
    "module_logits",
    "plan_neighbours",
    "training_device",
]

#: Rows per forward pass in ``predict``, ``predict_proba`` and ``decision_function``.
PREDICT_BATCH_ROWS = 8192

#: Warm-up fraction used by ``warmup="auto"`` when there are no validation rows.
AUTO_WARMUP_FALLBACK = 0.3


@dataclass(frozen=True)
class NeighbourPlan:
    """NeSCal's warm-up and neighbour count as one fit trains them (``warmup_``,
    ``n_neighbors_``): ``"auto"`` or a number of epochs, and the neighbours per row."""

    warmup: int | str
    n_neighbors: int


def plan_neighbours(settings: FitSettings, data: FitData) -> NeighbourPlan | None:
    """NeSCal's warm-up and neighbour count as this fit will train them (None for a loss
    without a graph).

    The spec is not changed: what differs from it (the ``auto`` warm-up without
    validation rows, a default ``n_neighbors`` too large for the data) is returned,
    announced with a warning, and recorded as ``warmup_`` and ``n_neighbors_``.
    """
    loss = settings.loss
    if not loss.uses_neighbours:
        return None
    max_epochs = settings.max_epochs
    warmup: int | str = "auto"
    if loss.warmup == "auto" and data.X_valid is None:
        warmup = int(AUTO_WARMUP_FALLBACK * max_epochs)
        warnings.warn(
            "loss__warmup='auto' ends the warm-up where the validation NLL stops "
            "improving, but early_stopping=False holds out no validation rows; the "
            f"warm-up falls back to {AUTO_WARMUP_FALLBACK} of max_epochs ({warmup} "
            "epochs, warmup_). Pass an int or float warmup to silence this warning.",
            UserWarning,
            stacklevel=3,
        )
    elif loss.warmup != "auto":
        warmup = loss.warmup_epochs(max_epochs)
    n_train = len(data.X_train)
    held = (
        f" after holding out validation_fraction={settings.validation_fraction}"
        if data.held_out
        else ""
    )
    n_neighbors = loss.n_neighbors
    if n_train < n_neighbors + 1 and settings.loss_name is not None and n_train >= 2:
        n_neighbors = n_train - 1
        warnings.warn(
            f"loss__n_neighbors={loss.n_neighbors} (the recipe's value for "
            f"loss={settings.loss_name!r}) needs at least {loss.n_neighbors + 1} training "
            f"rows; got {n_train}{held}. Using {n_neighbors} neighbours instead (recorded "
            "as n_neighbors_); pass loss__n_neighbors explicitly to choose.",
            UserWarning,
            stacklevel=3,
        )
    if n_train < n_neighbors + 1:
        raise ParameterError(
            "loss__n_neighbors",
            f"loss__n_neighbors={loss.n_neighbors} needs at least {loss.n_neighbors + 1} "
            f"training rows; got {n_train}{held}.",
        )
    return NeighbourPlan(warmup, n_neighbors)


def training_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device that is available here (else a ParameterError)."""
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:  # torch's own message lists the device types it knows
        raise ParameterError(
            "device",
            f"device={device!r} is not a torch device; expected a device string "
            f"such as 'cpu', 'cuda' or 'cuda:1' (torch: {exc}).",
        ) from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError(
            "device", f"device={device!r} was requested but CUDA is not available."
        )
    return resolved


def build_network(settings: FitSettings, data: FitData) -> nn.Module:
    """The network, checked on two training rows: one logit per class and member."""
    n_classes = len(data.classes)
    mlp_kwargs: dict[str, Any] = {
        "hidden_sizes": settings.hidden_sizes,
        "dropout": settings.dropout,
        "activation": settings.activation,
    }
    kwargs = dict(settings.module_kwargs)
    if settings.module is None:
        kwargs = layout_kwargs(kwargs, data.layout)
        if kwargs.get("numeric_embedding") is not None and not kwargs["embedded_features"]:
            warnings.warn(
                f"module_kwargs numeric_embedding={kwargs['numeric_embedding']!r} "
                "finds no numeric column to embed in the layout (every column "
                "is one-hot or binary); the network sees the columns as they are.",
                UserWarning,
                stacklevel=4,
            )
    module = build_module(
        settings.module,
        kwargs,
        n_features=data.n_features_in,
        n_classes=n_classes,
        mlp_kwargs=mlp_kwargs,
    )
    probe = torch.as_tensor(data.X_train[:2])
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            out = module(probe)
    except Exception as exc:  # the module's own error, on rows of the data's width
        raise ValueError(
            f"module {type(module).__name__} failed on a batch of X's rows "
            f"({data.n_features_in} columns): {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        module.train(was_training)
    if not isinstance(out, torch.Tensor) or out.dim() not in (2, 3):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"module {type(module).__name__} must return logits of shape (n, n_classes) "
            f"or (n, n_members, n_classes); got {shape} for a batch of {len(probe)} rows."
        )
    if out.shape[-1] != n_classes:
        raise ValueError(
            f"module {type(module).__name__} returns {out.shape[-1]} logits per row, but "
            f"y has {n_classes} classes {data.classes.tolist()!r}; the output width "
            "must be the number of classes."
        )
    if not bool(torch.isfinite(out).all()):
        raise ValueError(
            f"module {type(module).__name__} returns non-finite logits (nan or inf) for "
            f"the first {len(probe)} rows of X before any training (their largest "
            f"absolute value is {largest_abs(data.X_train[:2]):.3g}); a module "
            "must map finite inputs to finite logits."
        )
    return module


def frozen_parts(module: nn.Module, freeze) -> FrozenParts:
    """The parts of ``module`` that the patterns ``freeze`` freeze; not all of it."""
    frozen = resolve_frozen(module, freeze)
    n_params = sum(1 for _ in module.parameters())
    if len(frozen.parameters) == n_params:
        raise ParameterError(
            "freeze",
            f"freeze={list(freeze)!r} freezes every parameter of "
            f"{type(module).__name__}: nothing would train. Leave some part (a head) "
            "unfrozen.",
        )
    return frozen


def make_net(
    settings: FitSettings,
    data: FitData,
    plan: NeighbourPlan | None,
    module: nn.Module,
    *,
    device: torch.device,
    seed: int,
    frozen: FrozenParts | None,
) -> tuple[NeSCalNet, dict]:
    """The skorch net and its callbacks, in the order they must run each epoch.

    The order is pinned by a test: the validation criterion is recorded before the
    warm-up and the best-epoch keeper read it, and the keeper updates its best
    epoch before :class:`StopAfterPatience` counts from it.

    Parameters
    ----------
    settings : FitSettings
    data : FitData
    plan : NeighbourPlan or None
        NeSCal's warm-up and neighbour count (:func:`plan_neighbours`); None for a loss
        without a graph.
    module : torch.nn.Module
        The network (:func:`build_network`).
    device : torch.device
    seed : int
        Seed of the graph and of mixup.
    frozen : FrozenParts or None
        The frozen part of ``module``.

    Returns
    -------
    net : NeSCalNet
    callbacks : dict
        The callbacks by name, for the checks after training.
    """
    loss, max_epochs = settings.loss, settings.max_epochs
    validated = data.X_valid is not None
    monitor = settings.criterion.key if validated else None
    callbacks: dict = {}
    if validated:
        callbacks["validation_nll"] = ValidationNLL()
    if plan is not None:
        fixed = None if plan.warmup == "auto" else plan.warmup
        callbacks["warmup_end"] = WarmupEnd(fixed, loss.warmup_patience, monitor=monitor)
        callbacks["build_neighbourhood"] = BuildNeighbourhood(
            loss,
            torch.as_tensor(data.X_train),
            max_epochs,
            settings.embedding_layer,
            seed,
            n_neighbors=plan.n_neighbors,
        )
    callbacks["penalty_schedule"] = PenaltySchedule()
    callbacks["train_penalty"] = PassthroughScoring(name="train_penalty", on_train=True)
    train_split = None
    if validated:
        valid_X = (
            data.X_valid
            if data.w_valid is None
            else {"X": data.X_valid, "sample_weight": data.w_valid}
        )
        train_split = predefined_split(Dataset(valid_X, data.y_valid))
        keeper = EarlyStopping(
            monitor=monitor,
            patience=max_epochs + 1,  # never stops: it keeps and restores the best
            threshold=1e-4,
            threshold_mode="rel",
            lower_is_better=True,
            load_best=True,
        )
        callbacks["best_epoch"] = keeper
        if settings.patience is not False:
            callbacks["stop_after_patience"] = StopAfterPatience(
                settings.patience, keeper, after_warmup=plan is not None
            )
    if settings.time_limit is not None:
        callbacks["stop_on_time"] = StopOnTime(settings.time_limit)
    if frozen is not None and settings.unfreeze_at is not None:
        callbacks["unfreeze"] = Unfreeze(settings.unfreeze_at, settings.unfreeze_lr)
    if settings.lr_schedule != "constant":
        callbacks["lr_schedule"] = lr_scheduler(settings.lr_schedule, max_epochs)
    if settings.verbose >= 2:
        callbacks["progress_bar"] = ProgressBar()
    net = NeSCalNet(
        module=module,
        criterion=TrainingCriterion(loss.base() if loss.uses_neighbours else loss),
        optimizer=torch.optim.AdamW,
        lr=settings.lr,
        optimizer__weight_decay=settings.weight_decay,
        max_epochs=max_epochs,
        batch_size=settings.batch_size,
        iterator_train__shuffle=True,
        train_split=train_split,
        callbacks=list(callbacks.items()),
        device=device,
        verbose=int(settings.verbose >= 1),
        training_loss=loss,
        mixup=settings.mixup,
        mixup_seed=seed,
        frozen=frozen,
    )
    net.set_params(callbacks__print_log=PlainPrintLog() if settings.verbose else None)
    return net, callbacks


def _hold_in_eval(module: torch.nn.Module, args) -> None:
    """Forward pre-hook of a frozen submodule: it runs in eval mode, whatever the net's."""
    module.eval()


class TrainingCriterion(nn.Module):
    """The criterion of :class:`NeSCalNet`: the base loss in train mode, the negative
    log-likelihood in eval mode.

    skorch puts its criterion in train mode for a training step and in eval mode for a
    validation step, so training batches pay the objective's base loss and validation
    batches give the NLL, whatever the objective (early stopping and the ``auto``
    warm-up select on it). The target is the labels, or ``(labels, sample_weight)`` for
    a weighted batch: training rows then pay the base loss weighted by
    ``sample_weight``, and a validation batch's loss is its weighted mean NLL.

    Parameters
    ----------
    base_loss : TrainingLoss
        The loss every training batch pays (NeSCal's base loss, for NeSCal).
    """

    def __init__(self, base_loss: TrainingLoss) -> None:
        super().__init__()
        self.base_loss = base_loss

    def forward(self, y_pred: torch.Tensor, y_true) -> torch.Tensor:
        sample_weight = None
        if isinstance(y_true, list | tuple):
            y_true, sample_weight = y_true
        if self.training:
            return self.base_loss(y_pred, y_true, sample_weight=sample_weight)
        if sample_weight is None:
            return F.cross_entropy(y_pred, y_true)
        nll = F.cross_entropy(y_pred, y_true, reduction="none")
        total = sample_weight.sum().clamp_min(torch.finfo(nll.dtype).tiny)
        return (sample_weight * nll).sum() / total


class NeSCalNet(NeuralNet):
    """skorch ``NeuralNet`` training a module with a :class:`TrainingLoss`.

    Training batches are dicts ``{"X": features, "index": row ids}``; the row ids
    are positions among the training rows (the neighbour graph's node ids), and
    only training rows carry them: the validation dataset is plain features.

    Parameters
    ----------
    *args, **kwargs
        Passed to :class:`skorch.NeuralNet` (``module``, ``optimizer``, ...).
    training_loss : TrainingLoss
        The objective. For a neighbour loss (NeSCal) this is the spec; the net
        trains on its base loss (:meth:`NeSCalLoss.base`, the ``criterion``'s) plus the
        runtime's penalty.
    mixup : float, default=0.0
        Beta(alpha, alpha) mixup of inputs and targets when > 0.
    mixup_seed : int or None, default=None
        Seed of the generator drawing the mixup coefficients and partners.
    frozen : FrozenParts or None, default=None
        Parameters kept out of the optimizer (and submodules kept in eval mode, by a
        forward pre-hook on each) until the ``Unfreeze`` callback, if any, calls
        :meth:`unfreeze`.

    Attributes
    ----------
    nescal_ : NeSCalRuntime or None
        The per-fit state of NeSCal (graph, cache, current weight).
        Set by the ``BuildNeighbourhood`` callback when the graph is built; None
        before that and for losses without a graph.
    warmup_end_epoch_ : int or None
        0-based epoch at whose start NeSCal's warm-up is over (the first penalised
        epoch). Set by the ``WarmupEnd`` callback; read by ``BuildNeighbourhood`` and
        by early stopping (whose patience counts from it).
    mixup_rng_ : numpy.random.Generator
        The mixup generator (seeded with ``mixup_seed``).
    frozen_ : FrozenParts or None
        The part that is frozen now (``frozen`` until unfrozen, then None).
    frozen_hooks_ : list
        Handles of the forward pre-hooks that hold the frozen submodules in eval mode;
        :meth:`unfreeze` removes them (the estimator does too, after training).

    Notes
    -----
    The ``criterion`` is a :class:`TrainingCriterion`: the base loss for training
    batches, the negative log-likelihood for validation batches, whatever the objective.
    Batches may carry ``"sample_weight"`` in their dict ``X``: training rows then pay
    ``mean_i w_i l_i`` (base loss and the penalty's own term), and a validation batch's
    loss is its weighted mean NLL.
    """

    def __init__(
        self,
        *args,
        training_loss: TrainingLoss,
        mixup: float = 0.0,
        mixup_seed: int | None = None,
        frozen: FrozenParts | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.training_loss = training_loss
        self.mixup = mixup
        self.mixup_seed = mixup_seed
        self.frozen = frozen

    def initialize(self):
        self.frozen_ = self.frozen  # read by get_all_learnable_params in super().initialize()
        super().initialize()
        if self.frozen_ is not None:
            for name, param in self.module_.named_parameters():
                if name in self.frozen_.parameters:
                    param.requires_grad_(False)
        self.frozen_hooks_ = []
        if self.frozen_ is not None:
            modules = dict(self.module_.named_modules())
            for name in self.frozen_.modules:
                self.frozen_hooks_.append(modules[name].register_forward_pre_hook(_hold_in_eval))
        self.nescal_ = None
        self.warmup_end_epoch_ = None
        self.mixup_rng_ = np.random.default_rng(self.mixup_seed)
        return self

    def get_all_learnable_params(self):
        """skorch's learnable parameters, less the frozen ones (while they are frozen)."""
        frozen = getattr(self, "frozen_", None)
        for name, param in super().get_all_learnable_params():
            if frozen is None or name not in frozen.parameters:
                yield name, param

    def unfreeze(self) -> list[torch.nn.Parameter]:
        """Train the frozen part from now on: its parameters need gradients again and its
        submodules follow the net's train/eval mode. Returns those parameters (in name
        order), for the optimizer's new parameter group."""
        named = dict(self.module_.named_parameters())
        params = [named[name] for name in sorted(self.frozen_.parameters)]
        for param in params:
            param.requires_grad_(True)
        self.remove_frozen_hooks()
        self.frozen_ = None
        return params

    def remove_frozen_hooks(self) -> None:
        """Remove the hooks that hold the frozen submodules in eval mode."""
        for handle in getattr(self, "frozen_hooks_", []):
            handle.remove()
        self.frozen_hooks_ = []

    def get_iterator(self, dataset, training=False):
        """The batches, each drawn from the rows by one indexing.

        skorch's default iterator, a ``DataLoader`` with a batch size, calls the
        dataset once per row and stacks the rows: at a few microseconds a row, more time
        than the network's own forward and backward on tabular data. This one hands the
        dataset each batch's row indices at once (a ``BatchSampler`` over the same
        random or sequential order, drawn from the same generator), and skorch's
        ``Dataset`` indexes its arrays with them: the same rows, in the same order, as
        the same tensors.
        """
        kwargs = dict(self.get_params_for("iterator_train" if training else "iterator_valid"))
        batch_size = kwargs.pop("batch_size", self.batch_size)
        if batch_size == -1:
            batch_size = len(dataset)
        order = (
            RandomSampler(dataset) if kwargs.pop("shuffle", False) else SequentialSampler(dataset)
        )
        batches = BatchSampler(order, batch_size, drop_last=False)
        return DataLoader(dataset, batch_size=None, sampler=batches, **kwargs)

    def infer(self, x, **fit_params):
        """The module's output; an ensemble's (n, k, C) is combined outside training.

        In train mode the members' logits reach :meth:`get_loss` as they are (each
        member pays its own loss); in eval mode (validation, skorch's predict) they
        are the ensemble's logits, the log of the members' mean probability
        (:func:`~nescal_sklearn.nn.ensemble_logits`), so the validation NLL and
        the refinement temperature are the ensemble's.
        """
        if isinstance(x, Mapping):
            x = x["X"]
        y_pred = super().infer(x, **fit_params)
        if not self.module_.training and y_pred.dim() == 3:
            return ensemble_logits(y_pred)
        return y_pred

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """skorch's loss (the criterion's) plus, in training, weight × the NeSCal penalty.

        An ensemble's members each pay the loss on every row. Records the batch's
        penalty as ``train_penalty`` (0 before the graph and for losses without one).
        """
        y_true = y_true.to(y_pred.device)
        weights = _sample_weight(X, y_pred)
        index = None
        if training:
            index = X["index"] if isinstance(X, Mapping) else None
            if y_pred.dim() == 3:  # an ensemble: every member pays its loss on every row
                if index is not None:
                    index = torch.as_tensor(index)
                y_pred, y_true, index, weights = flatten_members(y_pred, y_true, index, weights)
        # skorch's steps set the criterion's mode; set here too, for any other caller
        self.criterion_.train(training)
        target = y_true if weights is None else (y_true, weights)
        loss = super().get_loss(y_pred, target, X=X, training=training)
        if not training:
            return loss
        runtime = self.nescal_
        if runtime is None:
            self.history.record_batch("train_penalty", 0.0)
            return loss
        penalty = runtime.penalty(y_pred, index, y_true, sample_weight=weights)
        self.history.record_batch("train_penalty", float(penalty.detach()))
        if runtime.current_weight == 0.0:
            return loss  # exactly the base loss's gradient (the cache is still refreshed)
        return loss + runtime.current_weight * penalty

    def get_mixup_loss(self, y_pred, y_true, X, lam: float, perm: torch.Tensor):
        """The mixup objective: ``lam`` × the objective on the rows' own labels (penalty
        included) + ``(1 − lam)`` × the base loss on the partners' labels."""
        own = self.get_loss(y_pred, y_true, X=X, training=True)
        weights = _sample_weight(X, y_pred)  # each row keeps its own weight
        partner_target = y_true.to(y_pred.device)[perm]
        if y_pred.dim() == 3:
            y_pred, partner_target, _, weights = flatten_members(
                y_pred, partner_target, None, weights
            )
        target = partner_target if weights is None else (partner_target, weights)
        partners = super().get_loss(y_pred, target, X=X, training=True)
        return lam * own + (1.0 - lam) * partners

    def train_step_single(self, batch, **fit_params):
        """One training step; with mixup, the inputs are mixed before the forward pass.

        Each row keeps the larger share of its mixed input (``lam >= 0.5``), so its
        row id, and NeSCal's penalty and cache refresh, refer to the row that
        dominates the input: the cache row of a batch row is overwritten with the
        train-mode prediction on its *mixed* input.
        """
        if not self.mixup:
            return super().train_step_single(batch, **fit_params)
        self.module_.train()  # train mode, as skorch's own step sets it
        self.criterion_.train()
        Xi, yi = unpack_data(batch)
        features = torch.as_tensor(Xi["X"], device=self.device)
        lam = float(self.mixup_rng_.beta(self.mixup, self.mixup))
        lam = max(lam, 1.0 - lam)
        perm = torch.as_tensor(self.mixup_rng_.permutation(len(features)), device=self.device)
        mixed = {**Xi, "X": lam * features + (1.0 - lam) * features[perm]}
        y_pred = self.infer(mixed, **fit_params)
        loss = self.get_mixup_loss(y_pred, yi, mixed, lam, perm)
        loss.backward()
        return {"loss": loss, "y_pred": y_pred}


def _sample_weight(X, like: torch.Tensor) -> torch.Tensor | None:
    """The batch's ``"sample_weight"`` (from its dict ``X``) on ``like``'s device and dtype."""
    if not isinstance(X, Mapping) or X.get("sample_weight") is None:
        return None
    return torch.as_tensor(X["sample_weight"]).to(device=like.device, dtype=like.dtype)


def module_logits(module: nn.Module, X: np.ndarray) -> np.ndarray:
    """The network's logits (an ensemble's: the log of its mean probability) on float32
    rows ``X``, as float64 (n, n_classes), computed in eval mode where the network lives.

    The network is never moved, and a fitted one (in eval mode) is not written to, so
    prediction is thread-safe; a network in training mode is put back in it afterwards.
    """
    parameter = next(module.parameters(), None)
    device = torch.device("cpu") if parameter is None else parameter.device
    was_training = module.training
    if was_training:
        module.eval()
    outputs = []
    try:
        with torch.no_grad():
            for chunk in torch.split(torch.as_tensor(X), PREDICT_BATCH_ROWS):
                outputs.append(ensemble_logits(module(chunk.to(device)).float()).cpu())
    finally:
        if was_training:
            module.train()
    return torch.cat(outputs).numpy().astype(np.float64)
