"""build_knn_graph: embeddings -> (optionally reduced) unit rows -> cosine kNN graph."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np

from .._params import check_int
from ._approximate import approximate_neighbours
from ._checks import check_n_neighbors
from ._exact import check_deadline, exact_neighbours
from ._reduce import default_n_components, l2_normalise, reduce_embeddings

__all__ = ["AUTO_EXACT_MAX_SAMPLES", "KNN_METHODS", "REDUCTIONS", "build_knn_graph"]

#: ``method="auto"`` searches exactly up to this many rows and uses pynndescent above.
#: Timed on a shared 2-core machine (benchmarks/graph_build.py, 256-d, k=10): exact
#: costs ~2 s at 10k, ~3-4 s at 20k, ~35-50 s at 50k and ~190 s at 100k rows (n^2);
#: a warm approximate build costs ~1 s at 10-20k, ~3 s at 50k and 6-17 s at 100k,
#: so it is faster from ~10k rows, but its numba JIT adds ~10 s to the first call in
#: each process (~60-100 s the very first time). 20k keeps the exact search under a
#: few seconds and below the JIT cost.
AUTO_EXACT_MAX_SAMPLES = 20_000

#: Accepted values of ``method`` in :func:`build_knn_graph`.
KNN_METHODS = ("auto", "exact", "approximate")
#: Accepted values of ``reduction`` in :func:`build_knn_graph`.
REDUCTIONS = (None, "pca", "umap")


def _as_array(embeddings) -> np.ndarray:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency, kept optional here
        torch = None
    if torch is not None and isinstance(embeddings, torch.Tensor):
        embeddings = embeddings.detach().cpu().numpy()
    data = np.asarray(embeddings)
    if data.dtype.kind not in "fiub":
        raise ValueError(f"embeddings must be numeric; got dtype {data.dtype}.")
    if data.ndim != 2:
        raise ValueError(
            "embeddings must be a 2-D array of shape (n_samples, n_features); got an array "
            f"with ndim={data.ndim} and shape {data.shape}."
        )
    if data.shape[1] == 0:
        raise ValueError(f"embeddings must have at least one feature; got shape {data.shape}.")
    if data.dtype.kind == "f" and not np.isfinite(data.sum(dtype=np.float64)):
        raise ValueError(
            "embeddings contains NaN or infinite values; the graph needs finite embeddings "
            "(check the network's outputs after warm-up)."
        )
    return data


def build_knn_graph(
    embeddings,
    n_neighbors: int,
    *,
    reduction: str | None = None,
    n_components: int | None = None,
    method: str = "auto",
    chunk_size: int | None = None,
    random_state: int | None = None,
    return_similarities: bool = False,
    deadline: float | None = None,
):
    """Connect every row to its ``n_neighbors`` most cosine-similar other rows.

    Rows are L2-normalised (zero rows stay zero and are similar to nothing),
    optionally reduced with PCA or UMAP and re-normalised, then searched:

    * ``"exact"``: chunked matmul + top-k per chunk; peak memory
      O(chunk_size × n + n × k), never an n × n matrix.
    * ``"approximate"``: pynndescent's NN-descent graph (built with ``k + 1``
      neighbours, self dropped). Its numba functions compile on the first call
      in a process; nescal_sklearn caches what can be cached on disk (see
      ``nescal_sklearn/_compat/numba_cache.py``) so later processes pay less.
    * ``"auto"``: exact up to :data:`AUTO_EXACT_MAX_SAMPLES` rows (20,000),
      approximate above (exact, with a warning, if pynndescent is not installed);
      exact at any size under a ``deadline``, since only the exact search can stop
      on time (a cold approximate search spends ~35 s compiling first).

    Each row's neighbours come sorted by decreasing similarity; among equal
    similarities the lower index comes first (exact search, including which rows
    make the cut).

    Parameters
    ----------
    embeddings : ndarray or Tensor of shape (n_samples, n_features)
        One embedding per training row (e.g. the network's penultimate layer).
    n_neighbors : int
        Neighbours per row, ``1 <= n_neighbors < n_samples``.
    reduction : {None, "pca", "umap"}, default=None
        Optional dimension reduction before the search (``"umap"`` needs umap-learn).
    n_components : int or None, default=None
        Target dimension of the reduction; default 32 for PCA and 10 for UMAP
        (capped by the data's size). Only valid with a reduction.
    method : {"auto", "exact", "approximate"}, default="auto"
        Search method, see above.
    chunk_size : int or None, default=None
        Query rows per block of the exact search; ``None`` picks ~128 MB blocks.
    random_state : int or None, default=None
        Seed of PCA's randomised solver, UMAP and NN-descent.
    return_similarities : bool, default=False
        Also return the neighbours' cosine similarities.
    deadline : float or None, default=None
        A time on ``time.perf_counter``'s clock by which the search must end: past
        it, :class:`~nescal_sklearn.exceptions.GraphTimeout` is raised between two
        blocks of the exact search, or before an approximate one starts (which
        cannot stop once started). None: no deadline.

    Returns
    -------
    neighbors : ndarray of shape (n_samples, n_neighbors), int64
        ``neighbors[i]`` are the indices of row ``i``'s neighbours, never ``i``.
    similarities : ndarray of shape (n_samples, n_neighbors), float32
        Only when ``return_similarities=True``; cosine similarity in the searched
        (reduced, if any) space.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.graph import build_knn_graph
    >>> embeddings = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> build_knn_graph(embeddings, 1)
    array([[1],
           [0],
           [3],
           [2]])
    >>> neighbors, sims = build_knn_graph(embeddings, 2, return_similarities=True)
    >>> neighbors[0], sims[0].round(3)
    (array([1, 3]), array([0.994, 0.11 ], dtype=float32))
    """
    data = _as_array(embeddings)
    n_samples, n_features = data.shape
    check_n_neighbors(n_neighbors, n_samples)
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"reduction must be one of {list(REDUCTIONS)}; got reduction={reduction!r}."
        )
    if method not in KNN_METHODS:
        raise ValueError(f"method must be one of {list(KNN_METHODS)}; got method={method!r}.")
    if chunk_size is not None:
        check_int("chunk_size", chunk_size)
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1; got chunk_size={chunk_size}.")
    if n_components is not None:
        check_int("n_components", n_components)
        if reduction is None:
            raise ValueError(
                f"n_components={n_components} needs a reduction ('pca' or 'umap'); got "
                "reduction=None."
            )
        limit = min(n_samples, n_features) if reduction == "pca" else min(n_samples - 1, n_features)
        if not 1 <= n_components <= limit:
            bound = (
                "min(n_samples, n_features)"
                if reduction == "pca"
                else "min(n_samples - 1, n_features)"
            )
            raise ValueError(
                f"n_components={n_components} is out of range for reduction={reduction!r}: it "
                f"must be between 1 and {bound} = {limit}."
            )

    unit = l2_normalise(data)
    del data
    if reduction is not None:
        if n_components is None:
            n_components = default_n_components(reduction, n_samples, n_features)
        unit = reduce_embeddings(unit, reduction, n_components, random_state)

    if method == "auto":
        small = n_samples <= AUTO_EXACT_MAX_SAMPLES or deadline is not None
        method = "exact" if small else "approximate"
        if method == "approximate" and importlib.util.find_spec("pynndescent") is None:
            warnings.warn(
                f"method='auto' would search the {n_samples} rows approximately, but "
                "pynndescent is not installed (pip install pynndescent); falling back to "
                "the exact search, whose time grows with n_samples squared.",
                RuntimeWarning,
                stacklevel=2,
            )
            method = "exact"
    if method == "approximate" and n_neighbors + 1 < n_samples:
        check_deadline(deadline, 0, n_samples)
        neighbors, sims = approximate_neighbours(unit, n_neighbors, random_state)
    else:
        neighbors, sims = exact_neighbours(unit, n_neighbors, chunk_size, deadline=deadline)
    return (neighbors, sims) if return_similarities else neighbors
