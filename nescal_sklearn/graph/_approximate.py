"""Approximate cosine kNN with pynndescent's NN-descent on unit rows."""

from __future__ import annotations

import numpy as np
import torch

from .._compat.numba_cache import PYNNDESCENT_MODULES, enable_jit_cache
from ._exact import exact_neighbours, sort_neighbours

__all__ = ["approximate_neighbours", "import_pynndescent", "row_similarities"]


def import_pynndescent():
    """Import pynndescent lazily, after giving its uncached JIT functions a disk cache."""
    try:
        import pynndescent
    except ImportError as exc:  # pragma: no cover - pynndescent ships with umap-learn
        raise ImportError(
            "method='approximate' needs pynndescent: pip install pynndescent "
            "(or nescal-sklearn[umap], which brings it)."
        ) from exc
    enable_jit_cache(PYNNDESCENT_MODULES)
    return pynndescent


def row_similarities(unit: np.ndarray, indices: np.ndarray, chunk_rows: int = 8192) -> np.ndarray:
    """Cosine similarity of each row of ``unit`` with the rows ``indices[i]`` (chunked gather)."""
    data = torch.from_numpy(unit)
    idx = torch.from_numpy(indices)
    sims = torch.empty(indices.shape, dtype=torch.float32)
    for start in range(0, len(indices), chunk_rows):
        stop = start + chunk_rows
        sims[start:stop] = torch.einsum("bd,bkd->bk", data[start:stop], data[idx[start:stop]])
    return sims.numpy()


def approximate_neighbours(
    unit: np.ndarray, n_neighbors: int, random_state: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate ``n_neighbors`` most cosine-similar rows of ``unit`` (unit-norm rows).

    NN-descent runs with ``k + 1`` neighbours and metric ``"euclidean"`` on the
    unit rows — the same order as cosine, and no normalised copy of the data
    (zero rows, if any, get an extra coordinate that puts them farther from every
    unit row than any unit row is, as cosine 0 < 1 would). Its candidate pool is
    ``min(60, 2 (k + 1))`` (pynndescent's default ``k + 1`` loses recall on
    high-dimensional clusters). Its own graph (``neighbor_graph``) is read and
    each row's self entry dropped (or, when duplicates crowd it out, the last
    entry). Rows NN-descent leaves incomplete are filled exactly.

    Returns
    -------
    indices : ndarray of shape (n, k), int64
    similarities : ndarray of shape (n, k), float32
        Sorted by decreasing similarity, lower index first among ties.
    """
    pynndescent = import_pynndescent()
    n_samples = unit.shape[0]
    points = unit
    zero_rows = ~unit.any(axis=1)
    if zero_rows.any():
        points = np.zeros((n_samples, unit.shape[1] + 1), dtype=np.float32)
        points[:, :-1] = unit
        points[zero_rows, -1] = 2.0  # distance sqrt(5) > 2 from every unit row
    index = pynndescent.NNDescent(
        points,
        n_neighbors=n_neighbors + 1,
        metric="euclidean",
        max_candidates=min(60, 2 * (n_neighbors + 1)),
        random_state=random_state,
        low_memory=True,
        compressed=False,
        verbose=False,
    )
    graph = np.asarray(index.neighbor_graph[0], dtype=np.int64)
    del index, points
    drop = graph == np.arange(n_samples)[:, None]
    drop[~drop.any(axis=1), -1] = True
    indices = np.ascontiguousarray(graph[~drop].reshape(n_samples, n_neighbors))
    del graph, drop
    sims = row_similarities(unit, np.maximum(indices, 0))
    incomplete = np.flatnonzero((indices < 0).any(axis=1))
    indices_t, sims_t = sort_neighbours(torch.from_numpy(indices), torch.from_numpy(sims))
    indices, sims = indices_t.numpy(), sims_t.numpy()
    if len(incomplete):
        indices[incomplete], sims[incomplete] = exact_neighbours(unit, n_neighbors, rows=incomplete)
    return indices, sims
