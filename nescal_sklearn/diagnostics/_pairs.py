"""The (p, q) pairs on a graph's edges: from a fitted estimator's kNN graph, or from arrays."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ._model import model_embeddings, model_proba
from ._validation import check_edges, check_n_neighbors, check_proba

__all__ = ["edge_pairs", "query_neighbours"]

#: Query rows per similarity block in :func:`query_neighbours`.
_QUERY_CHUNK = 1024


def _unit_rows(data: Any, name: str) -> np.ndarray:
    rows = np.asarray(data, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] < 1 or rows.shape[1] < 1:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_features); got shape {rows.shape}."
        )
    if not np.all(np.isfinite(rows)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    norms = np.linalg.norm(rows, axis=1)
    norms[norms == 0] = 1.0
    return rows / norms[:, None]


def query_neighbours(query: Any, reference: Any, n_neighbors: int) -> np.ndarray:
    """Each query row's ``n_neighbors`` most cosine-similar reference rows (exact, float64).

    The metric of :func:`~nescal_sklearn.graph.build_knn_graph` (unit rows, zero
    rows similar to nothing), for two different sets of rows: no row is excluded.
    Neighbours come by decreasing similarity, lower index first among ties.
    """
    queries = _unit_rows(query, "embeddings")
    references = _unit_rows(reference, "reference_embeddings")
    if queries.shape[1] != references.shape[1]:
        raise ValueError(
            f"embeddings and reference_embeddings must have the same number of columns; got "
            f"{queries.shape[1]} and {references.shape[1]}."
        )
    k = check_n_neighbors(n_neighbors, len(references))
    out = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), _QUERY_CHUNK):
        sims = queries[start : start + _QUERY_CHUNK] @ references.T
        out[start : start + _QUERY_CHUNK] = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return out


def _warn_about_zero_rows(data: Any, name: str) -> None:
    """Warn when rows of ``data`` are all zero: their cosine similarity to any row is
    undefined (0), so the kNN search gives them arbitrary neighbours."""
    rows = np.asarray(data, dtype=np.float64)
    zero = int(np.sum(~np.any(rows != 0, axis=1)))
    if zero:
        warnings.warn(
            f"{zero} of the {rows.shape[0]} rows of {name} are all zero. A zero row is "
            "similar to no row (its cosine similarity is 0 to every row), so the kNN graph "
            "joins it to arbitrary rows and its edges say nothing about the model's "
            "neighbourhoods. Drop those rows, or pass edges.",
            UserWarning,
            stacklevel=5,  # _knn_edges, edge_pairs, the diagnostic, its caller
        )


def _check_rows(data: Any, name: str, n_rows: int, other: str) -> None:
    rows = np.shape(data)[0] if np.ndim(data) else 0
    if rows != n_rows:
        raise ValueError(
            f"{name} and {other} must have one row per sample; got {rows} and {n_rows} rows."
        )


def _neighbours_to_edges(neighbours: np.ndarray) -> np.ndarray:
    rows = np.repeat(np.arange(neighbours.shape[0], dtype=np.int64), neighbours.shape[1])
    return np.column_stack([rows, neighbours.ravel().astype(np.int64)])


def _from_estimator(
    estimator: Any, X: Any, reference_X: Any, given: list[str], need_embeddings: bool
) -> tuple[Any, Any, Any, Any]:
    """``(proba, reference_proba, embeddings, reference_embeddings)`` of a fitted
    estimator on ``X`` (and ``reference_X``), the embeddings only where a graph is to be
    built; ``given`` names the arrays passed as well, which is refused."""
    if given:
        raise ValueError(
            "pass either a fitted estimator with X (and reference_X) or arrays, not both; "
            f"got an estimator and {', '.join(given)}."
        )
    if X is None:
        raise ValueError("X is required with an estimator; got X=None.")
    proba, reference_proba = model_proba(estimator, X), None
    embeddings = reference_embeddings = None
    if reference_X is not None:
        reference_proba = model_proba(estimator, reference_X)
    if need_embeddings:
        embeddings = model_embeddings(estimator, X)
        if reference_X is not None:
            reference_embeddings = model_embeddings(estimator, reference_X)
    return proba, reference_proba, embeddings, reference_embeddings


def _check_arrays(
    X: Any, reference_X: Any, proba: Any, reference_proba: Any, reference_embeddings: Any
) -> None:
    """Without an estimator: no ``X``, ``proba`` given, and reference embeddings only with
    reference probabilities."""
    if X is not None or reference_X is not None:
        raise ValueError(
            "X and reference_X need a fitted estimator; with estimator=None pass proba "
            "(and reference_proba) instead."
        )
    if proba is None:
        raise ValueError(
            "pass a fitted estimator with X, or proba with edges or embeddings; got "
            "estimator=None and proba=None."
        )
    if reference_embeddings is not None and reference_proba is None:
        raise ValueError("reference_embeddings needs reference_proba; got reference_proba=None.")


def _checked_embeddings(embeddings, name: str, n_rows: int, partner: str, of) -> None:
    """``embeddings`` (argument ``name``) has the ``n_rows`` rows of ``partner``, finite
    unit-normalisable rows (checked before the warning), and a warning for zero rows;
    ``of``: the argument the estimator embedded (``"X"``), or False for given ones."""
    _check_rows(embeddings, name, n_rows, partner)
    _unit_rows(embeddings, name)  # shape and finiteness, before the warning
    note = f" (the estimator's embeddings of {of})" if of else ""
    _warn_about_zero_rows(embeddings, name + note)


def _knn_edges(
    embeddings: Any,
    reference_embeddings: Any,
    n_rows: int,
    n_reference_rows: int | None,
    *,
    from_model: bool,
    n_neighbors: int,
    random_state: int | None,
) -> np.ndarray:
    """The edges of the cosine kNN graph on ``embeddings`` (``n_rows`` rows): among the rows
    themselves, or, given ``n_reference_rows``, from each row to its nearest reference
    rows."""
    if embeddings is None:
        raise ValueError(
            "the diagnostic needs a graph: pass edges, or embeddings to build the kNN graph "
            "on; got edges=None and embeddings=None."
        )
    _checked_embeddings(embeddings, "embeddings", n_rows, "proba", from_model and "X")
    if n_reference_rows is None:
        from ..graph import build_knn_graph

        neighbours = build_knn_graph(embeddings, n_neighbors, random_state=random_state)
        return _neighbours_to_edges(np.asarray(neighbours))
    if reference_embeddings is None:
        raise ValueError(
            "reference_proba with embeddings needs reference_embeddings (to search the "
            "reference rows); got reference_embeddings=None."
        )
    _checked_embeddings(
        reference_embeddings,
        "reference_embeddings",
        n_reference_rows,
        "reference_proba",
        from_model and "reference_X",
    )
    neighbours = query_neighbours(embeddings, reference_embeddings, n_neighbors)
    return _neighbours_to_edges(np.asarray(neighbours))


def edge_pairs(
    estimator: Any,
    X: Any,
    *,
    proba: Any,
    embeddings: Any,
    edges: Any,
    reference_X: Any,
    reference_proba: Any,
    reference_embeddings: Any,
    n_neighbors: int,
    random_state: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p, q, edges)``: ``p[e]`` and ``q[e]`` are the distributions at the ends of edge ``e``.

    Without reference rows the graph joins the rows among themselves (the cosine kNN
    graph of :func:`~nescal_sklearn.graph.build_knn_graph`, no row its own
    neighbour); with them, each row is joined to its nearest reference rows and
    ``edges[:, 1]`` indexes the reference rows.
    """
    if estimator is not None:
        arrays = {
            "proba": proba,
            "embeddings": embeddings,
            "reference_proba": reference_proba,
            "reference_embeddings": reference_embeddings,
        }
        given = [name for name, value in arrays.items() if value is not None]
        proba, reference_proba, embeddings, reference_embeddings = _from_estimator(
            estimator, X, reference_X, given, need_embeddings=edges is None
        )
    else:
        _check_arrays(X, reference_X, proba, reference_proba, reference_embeddings)
    p_rows = check_proba(proba, "proba")
    query_mode = reference_proba is not None
    q_rows = check_proba(reference_proba, "reference_proba") if query_mode else p_rows
    if q_rows.shape[1] != p_rows.shape[1]:
        raise ValueError(
            f"proba and reference_proba must have the same number of classes; got "
            f"{p_rows.shape[1]} and {q_rows.shape[1]}."
        )
    if edges is None:
        edges = _knn_edges(
            embeddings,
            reference_embeddings,
            len(p_rows),
            len(q_rows) if query_mode else None,
            from_model=estimator is not None,
            n_neighbors=n_neighbors,
            random_state=random_state,
        )
    else:
        edges = check_edges(edges, len(p_rows), len(q_rows))
    return p_rows[edges[:, 0]], q_rows[edges[:, 1]], edges
