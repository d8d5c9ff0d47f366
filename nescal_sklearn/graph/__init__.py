"""Neighbour graphs over network embeddings: exact chunked or approximate cosine kNN."""

from ._knn import AUTO_EXACT_MAX_SAMPLES, build_knn_graph

__all__ = ["AUTO_EXACT_MAX_SAMPLES", "build_knn_graph"]
