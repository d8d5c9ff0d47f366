"""What ``fit`` checks once training is over: how it ended, whether the model is usable.

* :func:`check_finite` refuses non-finite weights or predictions, as scikit-learn's
  ``MLPClassifier`` does;
* :func:`warn_degenerate` warns when the finite model returned is degenerate;
* :func:`penalty_status` says whether a NeSCal fit's weights were trained with the
  penalty, and warns when not (:class:`~nescal_sklearn.exceptions.PenaltyInactiveWarning`).

Each reads the fit's settings, data and net (its history and named callbacks), and sets
nothing.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy.special import softmax

from ..exceptions import PenaltyInactiveWarning
from ._fit_data import FitData, largest_abs
from ._network import module_logits
from ._settings import CRITERIA, FitSettings

__all__ = ["check_finite", "penalty_status", "warn_degenerate"]


def check_finite(net, data: FitData, settings: FitSettings) -> np.ndarray:
    """Refuse non-finite weights or predictions, as scikit-learn's ``MLPClassifier``
    does; return the trained network's logits on the training rows."""
    module = net.module_
    logits = None
    if all(bool(torch.isfinite(p).all()) for p in module.parameters()):
        logits = module_logits(module, data.X_train)
    if logits is None or not np.isfinite(logits).all():
        raise ValueError(
            "Training produced non-finite parameter weights or predictions (the training "
            f"loss by epoch: {_short(net.history[:, 'train_loss'])}). The input data may "
            "contain large values and need to be preprocessed (the largest absolute value "
            f"in X is {largest_abs(data.X_train):.3g}), or lr={settings.lr:g} is too "
            "large for this data."
        )
    return logits


def warn_degenerate(net, callbacks: dict, data: FitData, settings: FitSettings, logits) -> None:
    """Warn when the (finite) model returned is degenerate: training diverged and
    early stopping kept an earlier epoch, the epoch kept is worse than predicting
    every class with equal probability, or some probabilities are exactly 0."""
    keeper = callbacks.get("best_epoch")
    best = None if keeper is None else int(keeper.best_epoch_)
    uniform = math.log(len(data.classes))
    nll = None if best is None else net.history[best - 1].get("valid_nll")
    garbage = nll is not None and nll > 2 * uniform
    losses = [row.get("train_loss") for row in net.history]
    diverged = [i + 1 for i, v in enumerate(losses) if v is None or not math.isfinite(v)]
    reasons = []
    if diverged:
        kept = "" if best is None or garbage else f", and early stopping kept epoch {best}"
        reasons.append(f"the training loss was not finite from epoch {diverged[0]} on{kept}")
    if garbage:
        reasons.append(
            f"the epoch early stopping kept (epoch {best}) has a validation NLL of "
            f"{nll:.3g}, more than twice that of predicting every class with equal "
            f"probability (log({len(data.classes)}) = {uniform:.3g})"
        )
    zero = (softmax(logits, axis=1) == 0.0).any(axis=1)
    if zero.any():
        span = float((logits.max(axis=1) - logits.min(axis=1)).max())
        reasons.append(
            f"predict_proba gives probabilities of exactly 0 on {int(zero.sum())} of the "
            f"{len(zero)} training rows (logits up to {span:.3g} apart), so a wrong "
            "prediction there has an infinite log loss"
        )
    if reasons:
        warnings.warn(
            f"NeSCalClassifier returned a degenerate model: {'; '.join(reasons)}. Lower "
            f"lr (lr={settings.lr:g}) or scale X (its largest absolute value is "
            f"{largest_abs(data.X_train):.3g}; the network expects values of about unit "
            "scale, e.g. through make_tabular_pipeline).",
            UserWarning,
            stacklevel=3,
        )


def penalty_status(
    settings: FitSettings,
    graph_epoch: int | None,
    best_epoch: int | None,
    restored_epoch: int | None,
    graph_timed_out_epoch: int | None = None,
) -> str | None:
    """Whether the returned weights were trained with the penalty; warn when not.

    ``"penalised"``, ``"no_graph"`` (the warm-up never ended, or the time limit ran out
    during the graph's search at ``graph_timed_out_epoch``) or ``"warmup_checkpoint"``
    (early stopping restored an epoch from before the graph); None for a loss without a
    graph.
    """
    loss = settings.loss
    if not loss.uses_neighbours:
        return None
    criterion = (settings.criterion or CRITERIA["nll"]).words
    if graph_timed_out_epoch is not None:
        why = (
            f"time_limit={settings.time_limit:g} s ran out while the neighbour graph was "
            f"searched at the start of epoch {graph_timed_out_epoch}, so it was never built"
        )
        status = "no_graph"
    elif graph_epoch is None:
        why = (
            "the warm-up never ended (warmup='auto' ends it once the "
            f"{criterion} has not improved for warmup_patience={loss.warmup_patience} "
            f"epochs, and "
            f"max_epochs={settings.max_epochs} ran out first), so the neighbour graph was "
            "never built"
        )
        status = "no_graph"
    elif best_epoch is not None and best_epoch < graph_epoch:
        restored = (
            ""
            if restored_epoch is None
            else f" (the auto warm-up's optimum, restored at epoch {restored_epoch})"
        )
        why = (
            f"early stopping restored epoch {best_epoch}{restored}, before the "
            f"graph was built at epoch {graph_epoch}: no penalised epoch had a "
            f"lower {criterion}"
        )
        status = "warmup_checkpoint"
    else:
        return "penalised"
    base = loss.base_loss if isinstance(loss.base_loss, str) else type(loss.base_loss).__name__
    warnings.warn(
        "NeSCalClassifier returned a model trained without the smoothing penalty, i.e. "
        f"plain {base!r} training: {why}. penalty_status_={status!r}.",
        PenaltyInactiveWarning,
        stacklevel=4,
    )
    return status


def _short(values) -> list[float]:
    """Numbers to 3 significant digits, for messages."""
    return [float(f"{float(v):.3g}") for v in values]
