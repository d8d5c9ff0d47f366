"""skorch callbacks: the neighbour graph and penalty schedule, and early stopping."""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from skorch.callbacks import Callback

from ..graph import build_knn_graph
from ..losses import TrainingLoss
from ..penalties import random_graph
from ._module import EmbeddingRecorder, find_embedding_layer

__all__ = ["NeighbourGraph", "EarlyStoppingAfterWarmup"]


class NeighbourGraph(Callback):
    """Build the neighbour graph once at the end of warm-up; set each epoch's penalty weight.

    Parameters
    ----------
    loss : TrainingLoss
        The objective. Only losses with ``uses_neighbours`` get a graph.
    X_train : torch.Tensor
        The training rows (never the validation rows), in ``index`` order.
    max_epochs : int
        Training budget (the warm-up fraction and the cosine schedule refer to it).
    embedding_layer : str or None
        Name of the layer whose input is the embedding (None: the last ``nn.Linear``).
    random_state : int
        Seed of the approximate search, reductions and the random-graph control.
    inference_batch_size : int, default=4096
        Rows per forward pass when embedding the training set.
    """

    def __init__(
        self,
        loss: TrainingLoss,
        X_train: torch.Tensor,
        max_epochs: int,
        embedding_layer: str | None,
        random_state: int,
        inference_batch_size: int = 4096,
    ) -> None:
        self.loss = loss
        self.X_train = X_train
        self.max_epochs = max_epochs
        self.embedding_layer = embedding_layer
        self.random_state = random_state
        self.inference_batch_size = inference_batch_size

    def initialize(self):
        self.warmup_over_ = False
        self.best_warmup_loss_ = np.inf
        self.best_warmup_epoch_ = None
        self.best_warmup_state_ = None
        return self

    def _warmup_ends_before(self, epoch: int) -> bool:
        fixed = self.loss.warmup_epochs(self.max_epochs)
        return self.warmup_over_ if fixed is None else epoch == fixed

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        weight = 0.0
        if self.loss.uses_neighbours:
            if not self.loss.smoothing_active and self._warmup_ends_before(epoch):
                seconds = self._build(net, epoch)
                net.history.record("graph_seconds", seconds)
            if self.loss.smoothing_active:
                weight = self.loss.set_epoch(epoch, max_epochs=self.max_epochs)
        net.history.record("penalty_weight", weight)

    def on_epoch_end(self, net, **kwargs) -> None:
        """For ``warmup="auto"``: end the warm-up when validation NLL stops improving."""
        if (
            not self.loss.uses_neighbours
            or self.loss.warmup_epochs(self.max_epochs) is not None
            or self.warmup_over_
        ):
            return
        epoch = len(net.history) - 1
        score = net.history[-1, "valid_loss"]
        if score < self.best_warmup_loss_:
            self.best_warmup_loss_ = score
            self.best_warmup_epoch_ = epoch
            self.best_warmup_state_ = copy.deepcopy(net.module_.state_dict())
        elif epoch - self.best_warmup_epoch_ >= self.loss.warmup_patience:
            net.module_.load_state_dict(self.best_warmup_state_)
            net.history.record("warmup_restored_epoch", self.best_warmup_epoch_ + 1)
            self.best_warmup_state_ = None
            self.warmup_over_ = True

    def _build(self, net, epoch: int) -> float:
        start = time.perf_counter()
        module = net.module_
        was_training = module.training
        module.eval()
        layer = find_embedding_layer(module, self.embedding_layer)
        logits = []
        with torch.no_grad(), EmbeddingRecorder(layer) as recorder:
            for chunk in torch.split(self.X_train, self.inference_batch_size):
                logits.append(module(chunk.to(net.device)))
        module.train(was_training)
        log_probs = torch.log_softmax(torch.cat(logits).float(), dim=1)
        n_neighbors = self.loss.n_neighbors
        similarities = None
        if self.loss.graph == "random":
            neighbors = random_graph(len(log_probs), n_neighbors, random_state=self.random_state)
        else:
            embeddings = torch.cat(recorder.outputs).float().cpu().numpy()
            wants_similarities = getattr(self.loss, "adaptive", None) == "density"
            neighbors = build_knn_graph(
                embeddings,
                n_neighbors,
                reduction=self.loss.reduction,
                n_components=self.loss.n_components,
                method=self.loss.graph_method,
                random_state=self.random_state,
                return_similarities=wants_similarities,
            )
            if wants_similarities:
                neighbors, similarities = neighbors
                similarities = torch.as_tensor(np.asarray(similarities), dtype=torch.float32)
        neighbors = torch.as_tensor(np.asarray(neighbors), dtype=torch.int64, device=net.device)
        kwargs = {} if similarities is None else {"similarities": similarities}
        self.loss.start_smoothing(neighbors, log_probs, epoch=epoch, **kwargs)
        return time.perf_counter() - start


class EarlyStoppingAfterWarmup(Callback):
    """Stop when validation NLL has not improved for ``patience`` epochs; restore the best.

    Every epoch's checkpoint competes for "best" (warm-up epochs too, so a NeSCal run
    whose penalty never improves validation NLL returns its best warm-up model), but
    for a neighbour loss the run cannot stop until the penalty has been on for
    ``patience`` epochs: patience counts from the end of warm-up.

    Parameters
    ----------
    patience : int
        Epochs without improvement before stopping.
    loss : TrainingLoss
        The objective (its ``smoothing_active`` tells when warm-up is over).
    threshold : float, default=1e-4
        Relative improvement that counts.
    """

    def __init__(self, patience: int, loss: TrainingLoss, threshold: float = 1e-4) -> None:
        self.patience = patience
        self.loss = loss
        self.threshold = threshold

    def initialize(self):
        self.best_score_ = np.inf
        self.best_epoch_ = None
        self.best_state_ = None
        return self

    def _counting_from(self, net) -> int | None:
        """0-based epoch from which patience counts; None while stopping is not allowed."""
        if not self.loss.uses_neighbours:
            return 0
        if not self.loss.smoothing_active:
            return None
        return next(i for i, row in enumerate(net.history) if "graph_seconds" in row)

    def on_epoch_end(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        score = net.history[-1, "valid_loss"]
        improved = self.best_epoch_ is None or score < self.best_score_ * (1.0 - self.threshold)
        net.history.record("valid_nll_best", bool(improved))
        if improved:
            self.best_score_ = score
            self.best_epoch_ = epoch
            self.best_state_ = copy.deepcopy(net.module_.state_dict())
            return
        start = self._counting_from(net)
        if start is not None and epoch - max(self.best_epoch_, start) >= self.patience:
            raise KeyboardInterrupt  # skorch's documented way to end training early

    def on_train_end(self, net, **kwargs) -> None:
        if self.best_state_ is not None:
            net.module_.load_state_dict(self.best_state_)
        self.best_state_ = None
