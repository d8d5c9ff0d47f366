"""Exact cosine kNN on unit rows: chunked matmul + top-k, never an n × n block."""

from __future__ import annotations

from time import perf_counter

import numpy as np
import torch

from ..exceptions import GraphTimeout

__all__ = ["auto_chunk_size", "check_deadline", "exact_neighbours", "sort_neighbours"]

#: Target size of one chunk × n similarity block, in bytes (float32).
_BLOCK_BYTES = 128 * 2**20


def auto_chunk_size(n_samples: int) -> int:
    """Rows per chunk so that a chunk × n float32 block is about 128 MB."""
    return int(min(n_samples, max(1, _BLOCK_BYTES // (4 * max(n_samples, 1)))))


def sort_neighbours(indices: torch.Tensor, sims: torch.Tensor):
    """Order each row by decreasing similarity, lower index first among equal values."""
    indices, order = torch.sort(indices, dim=1)
    sims = torch.gather(sims, 1, order)
    sims, order = torch.sort(sims, dim=1, descending=True, stable=True)
    return torch.gather(indices, 1, order), sims


def _resolve_ties(block: torch.Tensor, threshold: torch.Tensor, k: int) -> torch.Tensor:
    """Top-k column indices of ``block`` rows, lower index first among values tied at the cut.

    Every value above the row's ``threshold`` (its k-th largest value) is kept, then
    the lowest-indexed values equal to it fill the remaining places.
    """
    threshold = threshold[:, None]
    above = block > threshold
    n_missing = k - above.sum(dim=1, keepdim=True)
    tied = block == threshold
    keep = above | (tied & (torch.cumsum(tied, dim=1) <= n_missing))
    return keep.nonzero()[:, 1].reshape(block.shape[0], k)


def check_deadline(deadline: float | None, done: int, total: int) -> None:
    """Raise :class:`~nescal_sklearn.exceptions.GraphTimeout` if ``time.perf_counter()``
    is past ``deadline`` (None: never), saying how many of ``total`` rows were searched."""
    if deadline is not None and perf_counter() > deadline:
        raise GraphTimeout(
            f"the neighbour search passed its deadline after {done} of its {total} rows"
        )


def exact_neighbours(
    unit: np.ndarray,
    n_neighbors: int,
    chunk_size: int | None = None,
    rows: np.ndarray | None = None,
    deadline: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``n_neighbors`` most cosine-similar rows of ``unit`` (unit-norm rows), self excluded.

    Parameters
    ----------
    unit : ndarray of shape (n, d), float32, C-contiguous
        L2-normalised rows (zero rows allowed).
    n_neighbors : int
        ``k``, with ``k < n``.
    chunk_size : int or None
        Query rows per matmul block; ``None`` picks ~128 MB blocks.
    rows : ndarray of int or None
        Query only these rows (default: all).
    deadline : float or None
        A time on ``time.perf_counter``'s clock: once past it, the search raises
        :class:`~nescal_sklearn.exceptions.GraphTimeout` before its next block.

    Returns
    -------
    indices : ndarray of shape (n_rows, k), int64
    similarities : ndarray of shape (n_rows, k), float32
        Sorted by decreasing similarity, lower index first among ties.
    """
    data = torch.from_numpy(unit)
    n_samples = data.shape[0]
    queries = np.arange(n_samples) if rows is None else np.asarray(rows, dtype=np.int64)
    chunk = auto_chunk_size(n_samples) if chunk_size is None else int(chunk_size)
    # One extra candidate reveals ties at the cut; there is none when k = n - 1.
    n_candidates = min(n_neighbors + 1, n_samples)
    out_idx = torch.empty((len(queries), n_neighbors), dtype=torch.int64)
    out_sim = torch.empty((len(queries), n_neighbors), dtype=torch.float32)
    with torch.no_grad():
        for start in range(0, len(queries), chunk):
            check_deadline(deadline, start, len(queries))
            query = torch.from_numpy(queries[start : start + chunk])
            contiguous = rows is None
            left = data[start : start + len(query)] if contiguous else data[query]
            block = left @ data.T
            block[torch.arange(len(query)), query] = -torch.inf
            values, idx = torch.topk(block, n_candidates, dim=1)
            idx = idx[:, :n_neighbors]
            if n_candidates > n_neighbors:
                tie_rows = (values[:, n_neighbors - 1] == values[:, n_neighbors]).nonzero()[:, 0]
                if len(tie_rows):
                    idx = idx.clone()
                    for part in torch.split(tie_rows, max(1, chunk // 4)):
                        idx[part] = _resolve_ties(
                            block[part], values[part, n_neighbors - 1], n_neighbors
                        )
            sims = torch.gather(block, 1, idx)
            idx, sims = sort_neighbours(idx, sims)
            out_idx[start : start + len(query)] = idx
            out_sim[start : start + len(query)] = sims
            del block, values
    return out_idx.numpy(), out_sim.numpy()
