"""The skorch network behind :class:`NeSCalClassifier`.

It extends skorch through its documented hooks only: ``initialize`` (the per-fit
attributes below), ``get_all_learnable_params`` (frozen parameters stay out of the
optimizer), ``infer`` (the batch arrives as a dict ``{"X": features, "index": row
ids}``; the module sees the features only), ``get_loss`` (the objective: base loss
plus the NeSCal penalty) and ``train_step_single`` (mixup, as an explicit step). No
private method of skorch is overridden.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from skorch import NeuralNet
from skorch.dataset import unpack_data

from ..losses import TrainingLoss
from ..nn import ensemble_logits, flatten_members
from ._freeze import FrozenParts

__all__ = ["NeSCalNet"]


def _hold_in_eval(module: torch.nn.Module, args) -> None:
    """Forward pre-hook of a frozen submodule: it runs in eval mode, whatever the net's."""
    module.eval()


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
        trains on its base loss (:meth:`NeSCalLoss.base`) plus the runtime's penalty.
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
    base_loss_ : TrainingLoss
        The loss every training batch pays (the spec's base loss for NeSCal).
    nescal_ : NeSCalRuntime or None
        The per-fit state of NeSCal (graph, cache, current weight, last penalty).
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
    The validation loss is always the negative log-likelihood (plain
    cross-entropy), whatever the objective: early stopping and the ``auto`` warm-up
    select on it. Batches may carry ``"sample_weight"`` in their dict ``X``: training
    rows then pay ``mean_i w_i l_i`` (base loss and the penalty's own term), and a
    validation batch's loss is its weighted mean NLL. ``criterion`` is required by skorch but unused: :meth:`get_loss`
    computes the objective.
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
        loss = self.training_loss
        self.base_loss_ = loss.base() if loss.uses_neighbours else loss
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
        """Training: base loss + weight × NeSCal penalty (once the graph exists).

        Records the batch's penalty as ``train_penalty`` (0 before the graph and for
        losses without one). Validation: the NLL.
        """
        y_true = y_true.to(y_pred.device)
        weights = _sample_weight(X, y_pred)
        if not training:
            if weights is None:
                return F.cross_entropy(y_pred, y_true)
            nll = F.cross_entropy(y_pred, y_true, reduction="none")
            return (weights * nll).sum() / weights.sum().clamp_min(torch.finfo(nll.dtype).tiny)
        index = X["index"] if isinstance(X, Mapping) else None
        if y_pred.dim() == 3:  # an ensemble: every member pays its loss on every row
            if index is not None:
                index = torch.as_tensor(index)
            y_pred, y_true, index, weights = flatten_members(y_pred, y_true, index, weights)
        loss = self.base_loss_(y_pred, y_true, sample_weight=weights)
        runtime = self.nescal_
        if runtime is None:
            self.history.record_batch("train_penalty", 0.0)
            return loss
        penalty = runtime.penalty(y_pred, index, y_true, sample_weight=weights)
        self.history.record_batch("train_penalty", runtime.last_penalty)
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
        partners = self.base_loss_(y_pred, partner_target, sample_weight=weights)
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
        self._set_training(True)
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
