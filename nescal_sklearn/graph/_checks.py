"""Argument checks shared by the graph builders (kNN and random)."""

from __future__ import annotations

from .._params import check_int

__all__ = ["check_n_neighbors"]


def check_n_neighbors(n_neighbors, n_samples: int) -> None:
    """Raise unless ``1 <= n_neighbors < n_samples`` (a row is never its own neighbour)."""
    check_int("n_neighbors", n_neighbors)
    if n_neighbors < 1:
        raise ValueError(f"n_neighbors must be at least 1; got n_neighbors={n_neighbors}.")
    if n_neighbors >= n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors} must be smaller than n_samples={n_samples}: a row "
            "is never its own neighbour."
        )
