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

    def on_epoch_begin(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        weight = 0.0
        if self.loss.uses_neighbours:
            if epoch == self.loss.warmup_epochs(self.max_epochs) and not self.loss.smoothing_active:
                seconds = self._build(net)
                net.history.record("graph_seconds", seconds)
            weight = self.loss.set_epoch(epoch, max_epochs=self.max_epochs)
        net.history.record("penalty_weight", weight)

    def _build(self, net) -> float:
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
        if self.loss.graph == "random":
            neighbors = random_graph(len(log_probs), n_neighbors, random_state=self.random_state)
        else:
            embeddings = torch.cat(recorder.outputs).float().cpu().numpy()
            neighbors = build_knn_graph(
                embeddings,
                n_neighbors,
                reduction=self.loss.reduction,
                n_components=self.loss.n_components,
                method=self.loss.graph_method,
                random_state=self.random_state,
            )
        neighbors = torch.as_tensor(np.asarray(neighbors), dtype=torch.int64, device=net.device)
        self.loss.start_smoothing(neighbors, log_probs)
        return time.perf_counter() - start


class EarlyStoppingAfterWarmup(Callback):
    """Stop when validation NLL has not improved for ``patience`` epochs; restore the best.

    Counting starts at ``start_epoch`` (the end of warm-up), so a run never stops
    before the penalty has acted, and only checkpoints from that epoch on compete.

    Parameters
    ----------
    patience : int
        Epochs without improvement before stopping.
    start_epoch : int
        0-based epoch from which the best checkpoint is tracked.
    threshold : float, default=1e-4
        Relative improvement that counts.
    """

    def __init__(self, patience: int, start_epoch: int, threshold: float = 1e-4) -> None:
        self.patience = patience
        self.start_epoch = start_epoch
        self.threshold = threshold

    def initialize(self):
        self.best_score_ = np.inf
        self.best_epoch_ = None
        self.best_state_ = None
        return self

    def on_epoch_end(self, net, **kwargs) -> None:
        epoch = len(net.history) - 1
        if epoch < self.start_epoch:
            return
        score = net.history[-1, "valid_loss"]
        improved = score < self.best_score_ * (1.0 - self.threshold) or self.best_epoch_ is None
        net.history.record("valid_nll_best", bool(improved))
        if improved:
            self.best_score_ = score
            self.best_epoch_ = epoch
            self.best_state_ = copy.deepcopy(net.module_.state_dict())
        elif epoch - self.best_epoch_ >= self.patience:
            raise KeyboardInterrupt  # skorch's documented way to end training early

    def on_train_end(self, net, **kwargs) -> None:
        if self.best_state_ is not None:
            net.module_.load_state_dict(self.best_state_)
        self.best_state_ = None
