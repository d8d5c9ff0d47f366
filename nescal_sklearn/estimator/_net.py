"""The skorch net of a fit: its assembly, and the net itself.

* :func:`make_net` assembles :class:`NeSCalNet` and its callbacks, in the order they
  must run each epoch, around the module of :func:`~._network.build_network`;
* :class:`NeSCalNet` extends skorch through its documented hooks only: ``initialize``
  (the per-fit attributes below), ``get_all_learnable_params`` (frozen parameters stay
  out of the optimizer), ``infer`` (the batch arrives as a dict ``{"X": features,
  "index": row ids}``; the module sees the features only), ``get_loss`` (skorch's, with
  :class:`TrainingCriterion` as the criterion, plus the NeSCal penalty),
  ``train_step_single`` (mixup, as an explicit step) and ``partial_fit``/``fit_loop``
  (a user's Ctrl-C leaves the fit, where skorch would swallow it). No private name of
  skorch is used.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from skorch import NeuralNet
from skorch.callbacks import EarlyStopping, PassthroughScoring, ProgressBar
from skorch.dataset import Dataset, unpack_data
from skorch.helper import predefined_split
from torch import nn
from torch.utils.data import DataLoader

from ..losses import TrainingLoss
from ..nn import ensemble_logits, flatten_members
from ._callbacks import (
    BuildNeighbourhood,
    PenaltySchedule,
    PlainPrintLog,
    StopAfterPatience,
    StopOnTime,
    StopTraining,
    ValidationNLL,
    WarmupEnd,
)
from ._fit_data import FitData
from ._freeze import FrozenParts, Unfreeze
from ._network import PREDICT_BATCH_ROWS
from ._precision import bfloat16_autocast
from ._schedule import lr_scheduler
from ._settings import FitSettings

__all__ = ["NeSCalNet", "RowBatches", "RowsDataset", "TrainingCriterion", "make_net"]

#: Devices where ``torch.optim.AdamW(fused=True)`` runs: one kernel for all parameters.
FUSED_ADAMW_DEVICES = ("cpu", "cuda")


def make_net(
    settings: FitSettings,
    data: FitData,
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
        The settings for the data's rows (:meth:`FitSettings.for_rows`), NeSCal's
        warm-up and neighbour count (``neighbours``) included.
    data : FitData
    module : torch.nn.Module
        The network (:func:`~._network.build_network`).
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
    loss, max_epochs, plan = settings.loss, settings.max_epochs, settings.neighbours
    validated = data.X_valid is not None
    monitor = settings.criterion.key if validated else None
    callbacks: dict = {}
    on_time = None if settings.time_limit is None else StopOnTime(settings.time_limit)
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
            stop_on_time=on_time,
        )
    callbacks["penalty_schedule"] = PenaltySchedule()
    callbacks["train_penalty"] = PassthroughScoring(name="train_penalty", on_train=True)
    train_split = None
    if validated:
        train_split = predefined_split(RowsDataset(_valid_X(data), data.y_valid))
        callbacks.update(_early_stopping(settings, monitor, after_warmup=plan is not None))
    if on_time is not None:
        callbacks["stop_on_time"] = on_time
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
        dataset=RowsDataset,
        lr=settings.lr,
        optimizer__weight_decay=settings.weight_decay,
        # one fused kernel for every parameter: the same step up to float32 round-off
        optimizer__fused=device.type in FUSED_ADAMW_DEVICES or None,
        max_epochs=max_epochs,
        batch_size=settings.batch_size,
        iterator_train__shuffle=True,
        iterator_valid__batch_size=max(settings.batch_size, PREDICT_BATCH_ROWS),
        train_split=train_split,
        callbacks=list(callbacks.items()),
        device=device,
        verbose=int(settings.verbose >= 1),
        training_loss=loss,
        mixup=settings.mixup,
        mixup_seed=seed,
        frozen=frozen,
        precision=settings.precision,
    )
    net.set_params(callbacks__print_log=PlainPrintLog() if settings.verbose else None)
    return net, callbacks


def _valid_X(data: FitData):
    """The held-out rows as the net's dataset takes them (with their weights, if any)."""
    if data.w_valid is None:
        return data.X_valid
    return {"X": data.X_valid, "sample_weight": data.w_valid}


def _early_stopping(settings: FitSettings, monitor: str, after_warmup: bool) -> dict:
    """The best-epoch keeper, and the stop after ``patience`` epochs without improvement
    unless patience is off, by name, in the order they run."""
    keeper = EarlyStopping(
        monitor=monitor,
        patience=settings.max_epochs + 1,  # never stops: it keeps and restores the best
        threshold=1e-4,
        threshold_mode="rel",
        lower_is_better=True,
        load_best=True,
    )
    callbacks = {"best_epoch": keeper}
    if settings.patience is not False:
        callbacks["stop_after_patience"] = StopAfterPatience(
            settings.patience, keeper, after_warmup=after_warmup
        )
    return callbacks


def _hold_in_eval(module: torch.nn.Module, args) -> None:
    """Forward pre-hook of a frozen submodule: it runs in eval mode, whatever the net's."""
    module.eval()


class RowsDataset(Dataset):
    """skorch's ``Dataset``, indexed by a batch's row positions with numpy's own indexing.

    skorch indexes a numpy array (not a dict of them) through scikit-learn's
    ``_safe_indexing``, which checks the type of every index in Python: about 5 ms a
    batch of 1,024 rows, more than the network's forward and backward. When the
    features (an array, or a dict of arrays) and the labels are numpy arrays, a list
    of positions here indexes them as numpy does: the same rows, as the same arrays;
    anything else is skorch's own indexing.
    """

    def __init__(self, X, y=None, length=None):
        super().__init__(X, y, length=length)
        arrays = [*X.values()] if isinstance(X, Mapping) else [X]
        self.numpy_ = all(isinstance(a, np.ndarray) for a in [*arrays, y])

    def __getitem__(self, i):
        if not self.numpy_ or not isinstance(i, list | np.ndarray):
            return super().__getitem__(i)
        rows = np.asarray(i, dtype=np.intp)
        if isinstance(self.X, Mapping):
            X = {key: value[rows] for key, value in self.X.items()}
        else:
            X = self.X[rows]
        return self.transform(X, self.y[rows])


class RowBatches:
    """The row positions of each batch of an epoch, as numpy arrays: a ``DataLoader``'s
    sampler when the loader's own batching is off (``batch_size=None``).

    Shuffled, the order is that of ``torch.utils.data.RandomSampler`` without a generator,
    drawn as it draws it (a seed from torch's global generator when iteration starts,
    then ``torch.randperm`` under a generator of that seed), but as one array instead of
    a Python iterator over the rows (whose ``BatchSampler`` cost about 1 µs a row: 27 ms
    an epoch on adult's fold, a quarter of the matrix products' time).

    Parameters
    ----------
    n_rows, batch_size : int
    shuffle : bool
    """

    def __init__(self, n_rows: int, batch_size: int, shuffle: bool) -> None:
        self.n_rows, self.batch_size, self.shuffle = n_rows, batch_size, shuffle

    def __len__(self) -> int:
        return -(-self.n_rows // self.batch_size)

    def __iter__(self):
        order = np.arange(self.n_rows)
        if self.shuffle:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
            order = torch.randperm(self.n_rows, generator=torch.Generator().manual_seed(seed))
            order = order.numpy()
        for start in range(0, self.n_rows, self.batch_size):
            yield order[start : start + self.batch_size]


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
    precision : {"float32", "bfloat16"}, default="float32"
        The arithmetic of :meth:`infer` (training and validation passes): float32, or
        bfloat16 autocast with the logits returned in float32.

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
        precision: str = "float32",
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.training_loss = training_loss
        self.mixup = mixup
        self.mixup_seed = mixup_seed
        self.frozen = frozen
        self.precision = precision

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        """skorch's ``partial_fit``; a user's Ctrl-C at any moment of the loop is re-raised.

        skorch ends its loop on any ``KeyboardInterrupt``, its own callbacks' way to
        stop, and returns normally after ``on_train_end``; so a Ctrl-C would be
        swallowed, and one before the first epoch's end would reach
        ``EarlyStopping(load_best=True).on_train_end`` with an empty history. Here the
        loop lets only :class:`StopTraining` (the package's planned end) through to
        skorch, and a user's interrupt leaves ``fit`` as ``KeyboardInterrupt`` without
        ``on_train_end``.

        Raises
        ------
        KeyboardInterrupt
            ``"NeSCalClassifier.fit: training interrupted in epoch N"`` on a Ctrl-C.
        """
        try:
            return super().partial_fit(X, y, classes, **fit_params)
        except _Interrupted as interrupted:
            raise KeyboardInterrupt(
                f"NeSCalClassifier.fit: training interrupted in epoch {interrupted.epoch}"
            ) from None

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        """skorch's loop; a ``KeyboardInterrupt`` other than :class:`StopTraining`
        leaves it as an exception skorch does not catch (see :meth:`partial_fit`)."""
        try:
            return super().fit_loop(X, y, epochs=epochs, **fit_params)
        except StopTraining:
            raise
        except KeyboardInterrupt:
            raise _Interrupted(len(self.history)) from None

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
        dataset each batch's row positions at once (:class:`RowBatches`: the order of
        torch's ``RandomSampler``, drawn from the same generators, or the rows in order),
        and :class:`RowsDataset` indexes its arrays with them: the same rows, in the
        same order, as the same tensors.
        """
        kwargs = dict(self.get_params_for("iterator_train" if training else "iterator_valid"))
        batch_size = kwargs.pop("batch_size", self.batch_size)
        if batch_size == -1:
            batch_size = len(dataset)
        batches = RowBatches(len(dataset), batch_size, kwargs.pop("shuffle", False))
        return DataLoader(dataset, batch_size=None, sampler=batches, **kwargs)

    def validation_step(self, batch, **fit_params):
        """skorch's validation step, in ``torch.inference_mode`` (no autograd records)."""
        with torch.inference_mode():
            return super().validation_step(batch, **fit_params)

    def infer(self, x, **fit_params):
        """The module's output; an ensemble's (n, k, C) is combined outside training.

        In train mode the members' logits reach :meth:`get_loss` as they are (each
        member pays its own loss); in eval mode (validation, skorch's predict) they
        are the ensemble's logits, the log of the members' mean probability
        (:func:`~nescal_sklearn.nn.ensemble_logits`), so the validation NLL and
        the refinement temperature are the ensemble's. With ``precision="bfloat16"`` the
        pass runs under bfloat16 autocast and its logits return in float32.
        """
        if isinstance(x, Mapping):
            x = x["X"]
        if self.precision == "float32":
            y_pred = super().infer(x, **fit_params)
        else:  # the products in bfloat16, the logits back in float32 for the losses
            with bfloat16_autocast(self.device):
                y_pred = super().infer(x, **fit_params).float()
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


class _Interrupted(BaseException):
    """A user's interrupt on its way out of skorch's ``partial_fit``, which catches
    ``KeyboardInterrupt`` only; a ``BaseException``, so no ``except Exception`` holds it."""

    def __init__(self, epoch: int) -> None:
        super().__init__(epoch)
        self.epoch = epoch


def _sample_weight(X, like: torch.Tensor) -> torch.Tensor | None:
    """The batch's ``"sample_weight"`` (from its dict ``X``) on ``like``'s device and dtype."""
    if not isinstance(X, Mapping) or X.get("sample_weight") is None:
        return None
    return torch.as_tensor(X["sample_weight"]).to(device=like.device, dtype=like.dtype)
