"""The neighbour graph of a network's training rows: embed, search, fill the cache.

This is the one implementation of "build NeSCal's graph from a module and its
training rows": the skorch callback of ``NeSCalClassifier`` and a plain PyTorch
loop (``examples/torch_loop.py``) both call :func:`neighbourhood_from_model`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from ..nn import expand_member_graph
from ._knn import build_knn_graph
from ._random import random_graph

__all__ = [
    "EMBEDDING_BATCH_ROWS",
    "GRAPHS",
    "MEMBER_GRAPHS",
    "EmbeddingRecorder",
    "ModelNeighbourhood",
    "embed_rows",
    "find_embedding_layer",
    "neighbourhood_from_model",
]

#: Accepted values of ``graph`` in :func:`neighbourhood_from_model`: the kNN graph on the
#: embeddings, or the random-graph control (same degree, neighbours drawn at random).
GRAPHS = ("knn", "random")

#: Accepted values of ``member_graph``: one graph for every member, or one per member.
MEMBER_GRAPHS = ("shared", "per_member")

#: Rows per forward pass when embedding the training rows.
EMBEDDING_BATCH_ROWS = 4096


def find_embedding_layer(module: nn.Module, name: str | None = None) -> nn.Module:
    """Return the layer whose *input* is the embedding: ``name`` or the last ``nn.Linear``.

    Parameters
    ----------
    module : torch.nn.Module
        The network.
    name : str or None, default=None
        Dotted submodule name as in ``module.named_modules()``. None: the name the
        module itself gives in a string attribute ``embedding_layer_name`` (as
        :class:`~nescal_sklearn.nn.TabularMLP` does), else the last
        ``nn.Linear`` registered (the output layer of an MLP, whose input is the
        penultimate representation).

    Returns
    -------
    torch.nn.Module

    Examples
    --------
    >>> from torch import nn
    >>> from nescal_sklearn.graph import find_embedding_layer
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> find_embedding_layer(net) is net[2]
    True
    """
    named = dict(module.named_modules())
    if name is None and isinstance(getattr(module, "embedding_layer_name", None), str):
        name = module.embedding_layer_name
    if name is not None:
        if name not in named:
            raise ValueError(
                f"embedding_layer={name!r} is not a submodule of {type(module).__name__}; "
                f"available names: {sorted(k for k in named if k)}."
            )
        return named[name]
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(
            f"{type(module).__name__} has no nn.Linear layer; pass embedding_layer with the "
            "name of the layer whose input is the embedding."
        )
    return linears[-1]


class EmbeddingRecorder:
    """Context manager recording the (flattened) input of a layer during forward passes.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from nescal_sklearn.graph import EmbeddingRecorder
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> with EmbeddingRecorder(net[2]) as recorder:
    ...     _ = net(torch.zeros(5, 4))
    >>> recorder.outputs[0].shape
    torch.Size([5, 8])
    """

    def __init__(self, layer: nn.Module) -> None:
        self.layer = layer
        self.outputs: list[Tensor] = []

    def _hook(self, _module: nn.Module, args: tuple) -> None:
        self.outputs.append(args[0].detach().flatten(1))

    def __enter__(self) -> EmbeddingRecorder:
        self._handle = self.layer.register_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


def _module_device(module: nn.Module) -> torch.device:
    parameter = next(module.parameters(), None)
    return torch.device("cpu") if parameter is None else parameter.device


def embed_rows(
    module: nn.Module,
    X: Tensor,
    *,
    embedding_layer: str | None = None,
    batch_size: int = EMBEDDING_BATCH_ROWS,
) -> tuple[Tensor, Tensor]:
    """Embeddings and log-probabilities of ``X`` from one eval-mode forward pass.

    The module runs in eval mode (dropout off), without gradients, in chunks of
    ``batch_size`` rows on the device of its parameters; its previous mode is
    restored afterwards.

    Parameters
    ----------
    module : torch.nn.Module
        Maps a float batch (n, n_features) to logits (n, n_classes).
    X : Tensor of shape (n_samples, n_features)
        The rows (training rows only, for NeSCal's graph).
    embedding_layer : str or None, default=None
        See :func:`find_embedding_layer`.
    batch_size : int, default=EMBEDDING_BATCH_ROWS
        Rows per forward pass.

    Returns
    -------
    embeddings : Tensor of shape (n_samples, d), float32, on the module's device
        The input of the embedding layer, flattened.
    log_probs : Tensor of shape (n_samples, n_classes) or (n_samples, k, n_classes)
        ``log_softmax`` of the logits (float32, on the module's device); for a module
        returning ``k`` members' logits (n, k, n_classes), each member's.
    """
    layer = find_embedding_layer(module, embedding_layer)
    device = _module_device(module)
    was_training = module.training
    module.eval()
    logits = []
    try:
        with torch.no_grad(), EmbeddingRecorder(layer) as recorder:
            for chunk in torch.split(torch.as_tensor(X), batch_size):
                logits.append(module(chunk.to(device)))
    finally:
        module.train(was_training)
    if not recorder.outputs:
        name = next(n for n, m in module.named_modules() if m is layer)
        raise ValueError(
            f"the embedding layer {name!r} ({type(layer).__name__}) was not called in the "
            f"forward pass of {type(module).__name__}; pass embedding_layer naming a layer "
            "the forward pass uses (None picks the last nn.Linear registered)."
        )
    embeddings = torch.cat(recorder.outputs).float()
    log_probs = torch.log_softmax(torch.cat(logits).float(), dim=-1)
    return embeddings, log_probs


@dataclass(frozen=True)
class ModelNeighbourhood:
    """The graph of a network's training rows and the predictions that fill the cache.

    Attributes
    ----------
    neighbors : Tensor of shape (n_samples, k), int64
        Row ``i`` lists the neighbours of training row ``i`` (never ``i`` itself).
    log_probs : Tensor of shape (n_samples, n_classes), float32
        The eval-mode log-probabilities of every training row at graph time.
    similarities : Tensor of shape (n_samples, k), float32, or None
        Cosine similarity to each neighbour (kNN graph with
        ``return_similarities=True`` only).
    seconds : float
        Wall time of the forward pass and the neighbour search.
    n_members : int, default=1
        Members of a network returning ``k`` members' logits. With ``k > 1`` the
        rows above are *member rows*: row ``i`` of member ``m`` is ``i * k + m``
        (``n_samples * k`` of them), and each member row's neighbours are the same
        member's rows (:func:`~nescal_sklearn.penalties.expand_member_graph`).
    """

    neighbors: Tensor
    log_probs: Tensor
    similarities: Tensor | None
    seconds: float
    n_members: int = 1


def neighbourhood_from_model(
    module: nn.Module,
    X: Tensor,
    n_neighbors: int,
    *,
    graph: str = "knn",
    embedding_layer: str | None = None,
    reduction: str | None = None,
    n_components: int | None = None,
    method: str = "auto",
    random_state: int | None = None,
    return_similarities: bool = False,
    batch_size: int = EMBEDDING_BATCH_ROWS,
    member_graph: str = "shared",
    deadline: float | None = None,
) -> ModelNeighbourhood:
    """Embed the training rows with the network and build their neighbour graph.

    One eval-mode forward pass (:func:`embed_rows`) gives every row's embedding
    and log-probabilities; the graph is the cosine kNN graph of the embeddings
    (:func:`build_knn_graph`, optionally PCA or UMAP reduced), or for
    ``graph="random"`` the random-graph control (:func:`random_graph`). The
    neighbours and log-probabilities come back on the module's device, ready for
    :class:`~nescal_sklearn.penalties.NeighbourhoodSmoothing`.

    Parameters
    ----------
    module : torch.nn.Module
        The network after warm-up.
    X : Tensor of shape (n_samples, n_features)
        The training rows, in the order the batches' row ids refer to.
    n_neighbors : int
        Neighbours per row, ``1 <= n_neighbors < n_samples``.
    graph : {"knn", "random"}, default="knn"
        The kNN graph, or the random-graph control.
    embedding_layer : str or None, default=None
        See :func:`find_embedding_layer`.
    reduction, n_components, method, deadline
        See :func:`build_knn_graph` (``graph="knn"`` only).
    random_state : int or None, default=None
        Seed of the approximate search, of the reductions and of the random graph.
    return_similarities : bool, default=False
        Also return the similarity to each neighbour (needs ``graph="knn"``).
    batch_size : int, default=EMBEDDING_BATCH_ROWS
        Rows per forward pass.
    member_graph : {"shared", "per_member"}, default="shared"
        For a network returning ``k`` members' logits (n, k, n_classes): one graph
        on the rows' embeddings with every member's representation side by side
        (the embedding layer's input flattened), used by every member; or one graph
        per member, on that member's own slice of the embedding (its input must have
        shape (n, k, d)). Either way each member is smoothed towards its own cached
        predictions of the neighbours. Ignored for a single model.

    Returns
    -------
    ModelNeighbourhood

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from nescal_sklearn.graph import neighbourhood_from_model
    >>> _ = torch.manual_seed(0)
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> found = neighbourhood_from_model(net, torch.randn(20, 4), 5, random_state=0)
    >>> found.neighbors.shape, found.log_probs.shape
    (torch.Size([20, 5]), torch.Size([20, 3]))
    """
    if graph not in GRAPHS:
        raise ValueError(f"graph must be one of {list(GRAPHS)}; got graph={graph!r}.")
    if return_similarities and graph != "knn":
        raise ValueError(
            f"return_similarities=True needs graph='knn' (a random graph has no "
            f"similarities); got graph={graph!r}."
        )
    if member_graph not in MEMBER_GRAPHS:
        raise ValueError(
            f"member_graph must be one of {list(MEMBER_GRAPHS)}; got member_graph={member_graph!r}."
        )
    start = time.perf_counter()
    embeddings, log_probs = embed_rows(
        module, X, embedding_layer=embedding_layer, batch_size=batch_size
    )
    n_members = 1 if log_probs.dim() == 2 else int(log_probs.shape[1])
    if n_members > 1 and member_graph == "per_member" and graph == "knn":
        if embeddings.shape[1] % n_members:
            raise ValueError(
                f"member_graph='per_member' needs the embedding layer's input to hold one "
                f"slice per member, shape (n, {n_members}, d); its flattened width "
                f"{embeddings.shape[1]} is not a multiple of the {n_members} members."
            )
        per_member = embeddings.reshape(len(embeddings), n_members, -1)
        found = [
            _search(
                per_member[:, m],
                n_neighbors,
                graph,
                reduction=reduction,
                n_components=n_components,
                method=method,
                random_state=random_state,
                return_similarities=return_similarities,
                deadline=deadline,
            )
            for m in range(n_members)
        ]
        neighbors = np.stack([f[0] for f in found])
        sims = None if not return_similarities else np.stack([f[1] for f in found])
    else:
        neighbors, sims = _search(
            embeddings,
            n_neighbors,
            graph,
            reduction=reduction,
            n_components=n_components,
            method=method,
            random_state=random_state,
            return_similarities=return_similarities,
            deadline=deadline,
        )
    device = log_probs.device
    neighbors = torch.as_tensor(neighbors, dtype=torch.int64, device=device)
    similarities = None if sims is None else torch.as_tensor(sims, dtype=torch.float32).to(device)
    if n_members > 1:
        neighbors = expand_member_graph(neighbors, n_members)
        if similarities is not None:
            if similarities.dim() == 2:
                similarities = similarities.unsqueeze(0).expand(n_members, -1, -1)
            similarities = similarities.permute(1, 0, 2).reshape(-1, similarities.shape[-1])
        log_probs = log_probs.reshape(-1, log_probs.shape[-1])
    seconds = time.perf_counter() - start
    return ModelNeighbourhood(neighbors, log_probs, similarities, seconds, n_members)


def _search(
    embeddings: Tensor,
    n_neighbors: int,
    graph: str,
    *,
    reduction: str | None,
    n_components: int | None,
    method: str,
    random_state: int | None,
    return_similarities: bool,
    deadline: float | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The neighbours (and similarities) of one set of embeddings."""
    similarities = None
    if graph == "random":
        neighbors = random_graph(len(embeddings), n_neighbors, random_state=random_state)
    else:
        found = build_knn_graph(
            embeddings.cpu().numpy(),
            n_neighbors,
            reduction=reduction,
            n_components=n_components,
            method=method,
            random_state=random_state,
            return_similarities=return_similarities,
            deadline=deadline,
        )
        if return_similarities:
            found, sims = found
            similarities = np.asarray(sims)
        neighbors = found
    return np.asarray(neighbors), similarities
