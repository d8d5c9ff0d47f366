"""skorch callbacks of NeSCal's training phases, one job each.

* :class:`RefinedValidationLoss` records, every epoch, the validation NLL after the
  temperature that is best on the validation rows (``valid_refined_loss``) and that
  temperature (``valid_temperature``): the refinement stopping criterion;
* :class:`WarmupEnd` decides when the warm-up is over (a fixed epoch, or the
  plateau of the validation criterion for ``warmup="auto"``) and sets
  ``net.warmup_end_epoch_``;
* :class:`BuildNeighbourhood` builds the graph at the start of that epoch and sets
  ``net.nescal_`` (the per-fit :class:`~nescal_sklearn.penalties.NeSCalRuntime`),
  and with ``NeSCalLoss(cache="epoch")`` refills the neighbours' prediction cache at
  the start of each later epoch;
* :class:`PenaltySchedule` sets the runtime's weight for each epoch;
* :class:`EarlyStoppingAfterWarmup` is skorch's ``EarlyStopping(load_best=True)`` on
  either criterion, whose patience counts from the end of warm-up, and which stops by
  raising
  :class:`StopTraining` instead of ``KeyboardInterrupt`` (so that a real Ctrl-C is
  never mistaken for a planned stop).

They share state through those two documented attributes of the net (see
:class:`NeSCalNet`), never through history keys or each other.
"""

from __future__ import annotations

import copy
import re
import sys
import time
from collections.abc import Mapping

import numpy as np
import torch
from skorch.callbacks import Callback, EarlyStopping, PrintLog

from ..losses import NeSCalLoss
from ..metrics.logits import optimal_log_temperature, weighted_nll
from ._net import StopTraining

__all__ = [
    "CRITERIA",
    "BuildNeighbourhood",
    "EarlyStoppingAfterWarmup",
    "PenaltySchedule",
    "PlainPrintLog",
    "RefinedValidationLoss",
    "WarmupEnd",
]

#: Stopping criterion -> the history key it selects on (lower is better).
CRITERIA = {"nll": "valid_loss", "refinement": "valid_refined_loss"}


class RefinedValidationLoss(Callback):
    """Record the validation NLL after the best temperature on the validation rows.

    The validation pass's logits are collected batch by batch (no extra forward
    pass); at the end of the epoch one temperature is fitted on them by NLL (the 1-D
    search of :func:`nescal_sklearn.metrics.refinement_log_loss`) and the history
    gets ``valid_refined_loss`` (the NLL at that temperature: the refinement loss),
    ``valid_temperature`` and ``refinement_seconds`` (the solve's wall time).

    With weighted validation rows (a ``"sample_weight"`` entry in the batch's dict
    ``X``) the temperature is fitted on the weighted NLL, and ``valid_loss`` is
    replaced by the weighted NLL of all validation rows, ``sum_i w_i l_i / sum_i w_i``
    (skorch's own ``valid_loss`` averages batch means by batch size, which is that
    only without weights).
    """

    def on_epoch_begin(self, net, **kwargs) -> None:
        self.logits_, self.targets_, self.weights_ = [], [], []

    def on_batch_end(self, net, batch=None, training=None, y_pred=None, **kwargs) -> None:
        if training or y_pred is None:
            return
        self.logits_.append(y_pred.detach().to("cpu", torch.float64))
        self.targets_.append(torch.as_tensor(batch[1]).to("cpu"))
        features = batch[0]
        if isinstance(features, Mapping) and features.get("sample_weight") is not None:
            self.weights_.append(torch.as_tensor(features["sample_weight"]).to("cpu"))

    def on_epoch_end(self, net, **kwargs) -> None:
        if not self.logits_:
            return
        start = time.perf_counter()
        logits = torch.cat(self.logits_).numpy()
        targets = torch.cat(self.targets_).numpy().astype(np.int64)
        weights = torch.cat(self.weights_).numpy().astype(np.float64) if self.weights_ else None
        result = optimal_log_temperature(logits, targets, weights)
        self.logits_, self.targets_, self.weights_ = [], [], []
        if weights is not None:
            net.history.record("valid_loss", weighted_nll(logits, targets, weights))
        net.history.record("valid_refined_loss", result.nll)
        net.history.record("valid_temperature", result.temperature)
        net.history.record("refinement_seconds", time.perf_counter() - start)


class WarmupEnd(Callback):
    """End NeSCal's warm-up: at a fixed epoch, or where the validation criterion stalls.

    Sets ``net.warmup_end_epoch_`` (0-based index of the first penalised epoch).

    Parameters
    ----------
    warmup_epochs : int or None
        Fixed warm-up length in epochs; None for ``warmup="auto"``: the warm-up ends
        once the validation criterion (``monitor``) has not improved (strictly) for
        ``patience`` epochs.
        The best warm-up epoch's module weights are then restored, so the penalised
        epochs start from the base loss's optimum (the epochs the later warm-up took
        stay spent). The optimizer state is deliberately *not* rolled back with
        them: the penalised epochs continue with the optimizer's latest moments.
        Restoring the optimizer state too was measured on the main study
        (``benchmarks/configs/nescal_study.json``, 19 datasets, confirm seeds 3-5):
        it cut the default's median change in test NLL after temperature scaling
        against cross-entropy from -0.87 % (13/19 lower) to -0.28 % (10/19), and the
        soft target's with a per-dataset weight from -1.03 % (14/19) to -0.28 %
        (12/19).
    patience : int
        Patience of the ``auto`` warm-up.
    monitor : str, default="valid_loss"
        History key of the criterion the ``auto`` warm-up watches (lower is better):
        ``"valid_loss"`` (validation NLL) or ``"valid_refined_loss"`` (validation NLL
        after the best temperature), the same as early stopping's.

    Attributes
    ----------
    restored_epoch_ : int or None
        1-based epoch whose checkpoint the ``auto`` warm-up restored.
    """

    def __init__(self, warmup_epochs: int | None, patience: int, monitor: str = "valid_loss"):
        self.warmup_epochs = warmup_epochs
        self.patience = patience
        self.monitor = monitor

    def on_train_begin(self, net, **kwargs) -> None:
        self.best_loss_ = np.inf
        self.best_epoch_ = None
        self.best_state_ = None
        self.restored_epoch_ = None

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        if self.warmup_epochs is not None and epoch == self.warmup_epochs:
            net.warmup_end_epoch_ = epoch

    def on_epoch_end(self, net, **kwargs) -> None:
        if self.warmup_epochs is not None or net.warmup_end_epoch_ is not None:
            return
        epoch = len(net.history) - 1
        score = net.history[-1, self.monitor]
        if score < self.best_loss_:
            self.best_loss_, self.best_epoch_ = score, epoch
            self.best_state_ = copy.deepcopy(net.module_.state_dict())
        elif epoch - self.best_epoch_ >= self.patience:
            net.module_.load_state_dict(self.best_state_)
            self.best_state_ = None
            self.restored_epoch_ = self.best_epoch_ + 1
            net.history.record("warmup_restored_epoch", self.restored_epoch_)
            net.warmup_end_epoch_ = epoch + 1


class BuildNeighbourhood(Callback):
    """Build NeSCal's graph once, at the start of the first penalised epoch.

    Sets ``net.nescal_`` to the runtime that :meth:`NeSCalLoss.build_runtime` builds
    from the module and the training rows, and records its build time as
    ``graph_seconds`` in the history. With ``loss.cache == "epoch"`` it then refills the
    runtime's prediction cache at the start of every later epoch, from one eval-mode
    forward pass over the same training rows
    (:meth:`~nescal_sklearn.penalties.NeSCalRuntime.refresh_cache`), and records that
    pass's wall time as ``cache_seconds`` (the graph epoch's cache is the build's own
    forward pass, counted in ``graph_seconds``).

    Parameters
    ----------
    loss : NeSCalLoss
        The spec.
    X_train : torch.Tensor
        The training rows (never the validation rows), in ``index`` order.
    max_epochs : int
        Training budget (the end of the cosine schedule).
    embedding_layer : str or None
        Name of the layer whose input is the embedding (None: the last ``nn.Linear``).
    random_state : int
        Seed of the approximate search, reductions and the random-graph control.
    """

    def __init__(
        self,
        loss: NeSCalLoss,
        X_train: torch.Tensor,
        max_epochs: int,
        embedding_layer: str | None,
        random_state: int,
    ) -> None:
        self.loss = loss
        self.X_train = X_train
        self.max_epochs = max_epochs
        self.embedding_layer = embedding_layer
        self.random_state = random_state

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        runtime = net.nescal_
        if runtime is not None:
            if runtime.cache == "epoch" and epoch > runtime.start_epoch:
                seconds = runtime.refresh_cache(net.module_, self.X_train)
                net.history.record("cache_seconds", seconds)
            return
        if net.warmup_end_epoch_ is None:
            return
        net.nescal_ = self.loss.build_runtime(
            net.module_,
            self.X_train,
            start_epoch=epoch,
            max_epochs=self.max_epochs,
            random_state=self.random_state,
            embedding_layer=self.embedding_layer,
        )
        net.history.record("graph_seconds", net.nescal_.build_seconds)


class PenaltySchedule(Callback):
    """Set the penalty weight of each epoch on ``net.nescal_``; record ``penalty_weight``."""

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        weight = 0.0 if net.nescal_ is None else net.nescal_.set_epoch(epoch)
        net.history.record("penalty_weight", weight)


class EarlyStoppingAfterWarmup(EarlyStopping):
    """skorch's ``EarlyStopping(load_best=True)`` on a validation criterion, gated by warm-up.

    Every epoch's checkpoint competes for "best" (warm-up epochs too: a NeSCal run
    whose penalty never improves the validation NLL returns its best warm-up
    model, and ``NeSCalClassifier`` then warns). With ``wait_for_warmup`` the run
    cannot stop before the penalty has been on for ``patience`` epochs: patience
    counts from ``max(best epoch, net.warmup_end_epoch_)``.

    Parameters
    ----------
    patience : int
        Epochs without a relative improvement of ``threshold`` before stopping.
    wait_for_warmup : bool, default=False
        Gate stopping on ``net.warmup_end_epoch_`` (neighbour losses).
    threshold : float, default=1e-4
        Relative improvement that counts.
    monitor : str, default="valid_loss"
        History key of the criterion: ``"valid_loss"`` (validation NLL) or
        ``"valid_refined_loss"`` (after the best temperature, :class:`RefinedValidationLoss`).
    """

    def __init__(
        self,
        patience: int,
        wait_for_warmup: bool = False,
        threshold: float = 1e-4,
        monitor: str = "valid_loss",
    ):
        super().__init__(
            monitor=monitor,
            patience=patience,
            threshold=threshold,
            threshold_mode="rel",
            lower_is_better=True,
            load_best=True,
        )
        self.wait_for_warmup = wait_for_warmup

    def on_epoch_end(self, net, **kwargs) -> None:
        if self.wait_for_warmup:
            # skorch stops when ``misses_`` reaches ``patience``: counting misses only
            # from the end of warm-up makes that ``epoch - max(best, start) >= patience``.
            start = net.warmup_end_epoch_
            epoch = len(net.history) - 1
            self.misses_ = -1 if start is None else min(self.misses_, epoch - start - 1)
        try:
            super().on_epoch_end(net, **kwargs)
        except KeyboardInterrupt:
            if self.misses_ == self.patience:  # skorch's stop, not a Ctrl-C
                raise StopTraining from None
            raise


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


class PlainPrintLog(PrintLog):
    """skorch's per-epoch table, coloured only when standard output is a terminal.

    skorch colours the table with ANSI escape codes unconditionally, which shows up as
    ``\x1b[36m``-style noise in log files, CI output and notebooks' captured logs.
    """

    def table(self, row):
        text = super().table(row)
        stream = sys.stdout
        if getattr(stream, "isatty", None) is not None and stream.isatty():
            return text
        return _ANSI_ESCAPE.sub("", text)
