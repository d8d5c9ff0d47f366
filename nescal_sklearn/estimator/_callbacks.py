"""skorch callbacks of NeSCal's training phases, one job each.

* :class:`ValidationNLL` records, every epoch, the validation NLL (``valid_nll``,
  weighted when the validation rows are), the NLL after the temperature that is best
  on those rows (``valid_refined_nll``) and that temperature (``valid_temperature``):
  the two stopping criteria, under the callback's own history keys;
* :class:`WarmupEnd` decides when the warm-up is over (a fixed epoch, or the
  plateau of the validation criterion for ``warmup="auto"``) and sets
  ``net.warmup_end_epoch_``;
* :class:`BuildNeighbourhood` builds the graph at the start of that epoch and sets
  ``net.nescal_`` (the per-fit :class:`~nescal_sklearn.penalties.NeSCalRuntime`),
  and with ``cache="epoch"`` refills the neighbours' prediction cache at the start of
  each later epoch;
* :class:`PenaltySchedule` sets the runtime's weight for each epoch;
* skorch's own ``EarlyStopping(load_best=True)``, unmodified and never stopping, keeps
  the best epoch's weights and restores them at the end;
* :class:`StopAfterPatience` ends training once the criterion has not improved for
  ``patience`` epochs, counted from the end of the warm-up.

They share state through the net's two documented attributes (``warmup_end_epoch_``,
``nescal_``, see :class:`NeSCalNet`) and the history keys they record; none writes a
key or an attribute of skorch's. Their order matters where one reads what another
records in the same epoch: ``make_net`` (``_net.py``) lists them in the order the
tests pin (``tests/test_fit_phases.py``).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping

import numpy as np
import torch
from skorch.callbacks import Callback, EarlyStopping, PrintLog

from ..exceptions import GraphTimeout
from ..losses import NeSCalLoss
from ..metrics.logits import optimal_log_temperature, weighted_nll

__all__ = [
    "BuildNeighbourhood",
    "PenaltySchedule",
    "PlainPrintLog",
    "StopAfterPatience",
    "StopOnTime",
    "StopTraining",
    "ValidationNLL",
    "WarmupEnd",
]


class ValidationNLL(Callback):
    """Record the validation NLL, and the NLL after the best temperature on those rows.

    The validation pass's logits are collected batch by batch (no extra forward
    pass). At the end of the epoch the history gets ``valid_nll``, the NLL of all
    validation rows (``sum_i w_i l_i / sum_i w_i`` with weighted rows, a
    ``"sample_weight"`` entry in the batch's dict ``X``); ``valid_refined_nll``, the NLL
    after the one temperature fitted on them by NLL (the 1-D search of
    :func:`nescal_sklearn.metrics.refinement_log_loss`: the refinement loss);
    ``valid_temperature``; and ``refinement_seconds`` (the solve's wall time).
    skorch's own ``valid_loss`` is left as skorch records it.
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
        net.history.record("valid_nll", weighted_nll(logits, targets, weights))
        net.history.record("valid_refined_nll", result.nll)
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
        them: the penalised epochs continue with the optimizer's latest moments
        (``docs/nescal_on_tabular.md`` has the measurement behind this choice). The
        best weights are kept by a skorch ``EarlyStopping(load_best=True)`` that counts
        any strict improvement (``threshold=0``) and never stops, run by this callback
        during the warm-up only.
    patience : int
        Patience of the ``auto`` warm-up.
    monitor : str, default="valid_nll"
        History key of the criterion the ``auto`` warm-up watches (lower is better):
        ``"valid_nll"`` (validation NLL) or ``"valid_refined_nll"`` (validation NLL
        after the best temperature), the same as early stopping's.

    Attributes
    ----------
    checkpoint_ : skorch.callbacks.EarlyStopping or None
        The keeper of the best warm-up epoch's weights (``warmup="auto"``, until the
        warm-up ends).
    restored_epoch_ : int or None
        1-based epoch whose checkpoint the ``auto`` warm-up restored.
    """

    def __init__(self, warmup_epochs: int | None, patience: int, monitor: str = "valid_nll"):
        self.warmup_epochs = warmup_epochs
        self.patience = patience
        self.monitor = monitor

    def on_train_begin(self, net, **kwargs) -> None:
        self.restored_epoch_ = None
        self.checkpoint_ = None
        if self.warmup_epochs is None:
            self.checkpoint_ = EarlyStopping(
                monitor=self.monitor,
                patience=net.max_epochs + 1,  # never stops: it keeps the best weights
                threshold=0.0,
                threshold_mode="abs",
                lower_is_better=True,
                load_best=True,
            )
            self.checkpoint_.on_train_begin(net)

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        if self.warmup_epochs is not None and epoch == self.warmup_epochs:
            net.warmup_end_epoch_ = epoch

    def on_epoch_end(self, net, **kwargs) -> None:
        if self.warmup_epochs is not None or net.warmup_end_epoch_ is not None:
            return
        self.checkpoint_.on_epoch_end(net)
        epoch = len(net.history)  # 1-based, as the checkpoint's best_epoch_
        best = self.checkpoint_.best_epoch_
        if epoch - best >= self.patience:
            weights = self.checkpoint_.best_model_weights_
            self.checkpoint_ = None
            if weights is not None:  # None: no epoch had a finite criterion
                net.module_.load_state_dict(weights)
                self.restored_epoch_ = best
                net.history.record("warmup_restored_epoch", best)
            net.warmup_end_epoch_ = epoch  # the 0-based index of the next epoch


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
    n_neighbors : int or None, default=None
        Neighbours per row, when the fit clamped the spec's ``n_neighbors``; None: the
        spec's.
    stop_on_time : StopOnTime or None, default=None
        The fit's time limit: the graph must be built by its deadline, or not at all.
        A search that passes it (:class:`~nescal_sklearn.exceptions.GraphTimeout`)
        leaves the epoch unpenalised, and :class:`StopOnTime` ends training after it.

    Attributes
    ----------
    timed_out_epoch_ : int or None
        The (1-based) epoch whose graph search ran out of time; None if none did.
    """

    def __init__(
        self,
        loss: NeSCalLoss,
        X_train: torch.Tensor,
        max_epochs: int,
        embedding_layer: str | None,
        random_state: int,
        n_neighbors: int | None = None,
        stop_on_time: StopOnTime | None = None,
    ) -> None:
        self.loss = loss
        self.X_train = X_train
        self.max_epochs = max_epochs
        self.embedding_layer = embedding_layer
        self.random_state = random_state
        self.n_neighbors = n_neighbors
        self.stop_on_time = stop_on_time

    def on_train_begin(self, net, **kwargs) -> None:
        self.timed_out_epoch_ = None

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        runtime = net.nescal_
        if runtime is not None:
            if runtime.cache == "epoch" and epoch > runtime.start_epoch:
                seconds = runtime.refresh_cache(net.module_, self.X_train)
                net.history.record("cache_seconds", seconds)
            return
        if net.warmup_end_epoch_ is None or self.timed_out_epoch_ is not None:
            return
        on_time = self.stop_on_time
        try:
            net.nescal_ = self.loss.build_runtime(
                net.module_,
                self.X_train,
                start_epoch=epoch,
                max_epochs=self.max_epochs,
                random_state=self.random_state,
                embedding_layer=self.embedding_layer,
                n_neighbors=self.n_neighbors,
                deadline=None if on_time is None else on_time.deadline_,
            )
        except GraphTimeout:
            self.timed_out_epoch_ = epoch + 1
            return
        net.history.record("graph_seconds", net.nescal_.build_seconds)


class PenaltySchedule(Callback):
    """Set the penalty weight of each epoch on ``net.nescal_``; record ``penalty_weight``."""

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        weight = 0.0 if net.nescal_ is None else net.nescal_.set_epoch(epoch)
        net.history.record("penalty_weight", weight)


class StopTraining(KeyboardInterrupt):
    """The package's own end of training: patience spent (:class:`StopAfterPatience`)
    or time up (:class:`StopOnTime`).

    skorch ends its loop on a ``KeyboardInterrupt`` and then runs ``on_train_end``
    (the best-epoch keeper restores its epoch). This subclass is how
    :class:`~._net.NeSCalNet` tells a planned end from a user's Ctrl-C, which it
    re-raises instead of letting skorch swallow it.
    """


class StopAfterPatience(Callback):
    """End training once the criterion has not improved for ``patience`` epochs.

    "Improved" is what the best-epoch keeper (skorch's ``EarlyStopping``, which must
    come before this callback) counts as an improvement: the epochs without one are
    the epochs since its ``best_epoch_``. With ``after_warmup`` (neighbour losses) they
    count only from the start of the first penalised epoch, ``net.warmup_end_epoch_``,
    so the penalty always gets ``patience`` epochs. Training ends as skorch's own
    callbacks end it, by raising a ``KeyboardInterrupt``: :class:`StopTraining`, which
    the net tells from a user's Ctrl-C.

    Parameters
    ----------
    patience : int
        Epochs without improvement before stopping.
    keeper : skorch.callbacks.EarlyStopping
        The best-epoch keeper whose ``best_epoch_`` (1-based) this callback reads.
    after_warmup : bool, default=False
        Count only from ``net.warmup_end_epoch_`` (no stop before it is set).

    Attributes
    ----------
    stopped_ : bool
        Whether this callback ended training.
    """

    def __init__(self, patience: int, keeper: EarlyStopping, after_warmup: bool = False) -> None:
        self.patience = patience
        self.keeper = keeper
        self.after_warmup = after_warmup

    def on_train_begin(self, net, **kwargs) -> None:
        self.stopped_ = False

    def on_epoch_end(self, net, **kwargs) -> None:
        epoch = len(net.history)  # 1-based, as the keeper's best_epoch_
        misses = epoch - self.keeper.best_epoch_
        if self.after_warmup:
            start = net.warmup_end_epoch_  # 0-based index of the first penalised epoch
            if start is None:
                return
            misses = min(misses, epoch - 1 - start)
        if misses >= self.patience:
            self.stopped_ = True
            raise StopTraining  # skorch's way to end the loop; restores run after it


class StopOnTime(Callback):
    """End training when one more epoch would end after ``time_limit`` seconds of training.

    At the end of each epoch, the seconds since training began plus the longest epoch so
    far are compared with ``time_limit``; past it, training ends as
    :class:`StopAfterPatience` ends it (:class:`StopTraining` after setting
    ``stopped_``), and the best-epoch keeper restores its epoch.

    Parameters
    ----------
    time_limit : float
        Seconds of training.

    Attributes
    ----------
    stopped_ : bool
        Whether this callback ended training.
    deadline_ : float
        ``time_limit`` seconds after training began, on ``time.perf_counter``'s clock.
    """

    def __init__(self, time_limit: float) -> None:
        self.time_limit = time_limit

    def on_train_begin(self, net, **kwargs) -> None:
        self.stopped_ = False
        self.start_ = time.perf_counter()
        self.deadline_ = self.start_ + self.time_limit
        self.longest_ = 0.0
        self.last_ = self.start_

    def on_epoch_end(self, net, **kwargs) -> None:
        now = time.perf_counter()
        self.longest_ = max(self.longest_, now - self.last_)
        self.last_ = now
        if now - self.start_ + self.longest_ > self.time_limit:
            self.stopped_ = True
            raise StopTraining  # skorch's way to end the loop; restores run after it


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
