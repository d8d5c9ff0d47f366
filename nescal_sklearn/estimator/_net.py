"""The skorch network behind :class:`NeSCalClassifier`.

It extends skorch through its documented hooks only: ``get_loss`` (the training
objective, with the batch's row ids for NeSCal), ``infer`` (the batch arrives as a
dict ``{"X": features, "index": row ids}``; the module sees the features only) and
``train_step_single`` (mixup).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from skorch import NeuralNet
from skorch.dataset import unpack_data

from ..losses import TrainingLoss

__all__ = ["NeSCalNet"]


class NeSCalNet(NeuralNet):
    """skorch ``NeuralNet`` training a module with a :class:`TrainingLoss`.

    Parameters
    ----------
    *args, **kwargs
        Passed to :class:`skorch.NeuralNet`.
    training_loss : TrainingLoss
        The objective; NeSCal's penalty reads the batch row ids from ``X["index"]``.
    mixup : float, default=0.0
        Beta(alpha, alpha) mixup of inputs and targets when > 0.
    """

    def __init__(self, *args, training_loss: TrainingLoss, mixup: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.training_loss = training_loss
        self.mixup = mixup

    def infer(self, x, **fit_params):
        if isinstance(x, Mapping):
            x = x["X"]
        return super().infer(x, **fit_params)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        y_true = y_true.to(y_pred.device)
        if not training:
            # Validation reports the negative log-likelihood, whatever the objective.
            return torch.nn.functional.cross_entropy(y_pred, y_true)
        indices = None
        if isinstance(X, Mapping) and "index" in X:
            indices = torch.as_tensor(X["index"], device=y_pred.device)
        mix = getattr(self, "_mix", None)
        if mix is None:
            loss = self.training_loss(y_pred, y_true, indices=indices)
        else:
            lam, perm = mix
            loss = lam * self.training_loss(y_pred, y_true, indices=indices) + (
                1.0 - lam
            ) * self.training_loss.forward(y_pred, y_true[perm])
        penalty = getattr(self.training_loss, "last_penalty_", None)
        self.history.record_batch("train_penalty", 0.0 if penalty is None else penalty)
        return loss

    def train_step_single(self, batch, **fit_params):
        if not self.mixup:
            return super().train_step_single(batch, **fit_params)
        self._set_training(True)
        Xi, yi = unpack_data(batch)
        features = Xi["X"] if isinstance(Xi, Mapping) else Xi
        features = torch.as_tensor(features, device=self.device)
        generator = self._mixup_rng
        lam = float(generator.beta(self.mixup, self.mixup))
        # The row keeping the larger share stays first, so NeSCal's penalty and cache
        # refer to the row that dominates the mixed input.
        lam = max(lam, 1.0 - lam)
        perm = torch.as_tensor(generator.permutation(len(features)), device=features.device)
        mixed = lam * features + (1.0 - lam) * features[perm]
        Xi = {**Xi, "X": mixed} if isinstance(Xi, Mapping) else mixed
        y_pred = self.infer(Xi, **fit_params)
        self._mix = (lam, perm)
        try:
            loss = self.get_loss(y_pred, yi, X=Xi, training=True)
        finally:
            self._mix = None
        loss.backward()
        return {"loss": loss, "y_pred": y_pred}

    def seed_mixup(self, seed: int) -> None:
        """Seed the generator that draws mixup coefficients and partners."""
        self._mixup_rng = np.random.default_rng(seed)
