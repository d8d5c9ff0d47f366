"""Neighbour graphs: a network's training rows -> embeddings -> cosine kNN (or random) graph."""

from ._from_model import (
    EMBEDDING_BATCH_ROWS,
    GRAPHS,
    MEMBER_GRAPHS,
    EmbeddingRecorder,
    ModelNeighbourhood,
    embed_rows,
    find_embedding_layer,
    neighbourhood_from_model,
)
from ._knn import AUTO_EXACT_MAX_SAMPLES, KNN_METHODS, REDUCTIONS, build_knn_graph
from ._random import random_graph

__all__ = [
    "AUTO_EXACT_MAX_SAMPLES",
    "EMBEDDING_BATCH_ROWS",
    "GRAPHS",
    "MEMBER_GRAPHS",
    "KNN_METHODS",
    "REDUCTIONS",
    "EmbeddingRecorder",
    "ModelNeighbourhood",
    "build_knn_graph",
    "embed_rows",
    "find_embedding_layer",
    "neighbourhood_from_model",
    "random_graph",
]
