"""Argument checks shared by the graph builders (kNN and random)."""

from __future__ import annotations

from numbers import Integral

__all__ = ["check_int", "check_n_neighbors"]


def check_int(value, name: str) -> None:
    """Raise ``TypeError`` unless ``value`` is an integer (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__} {value!r}.")


def check_n_neighbors(n_neighbors, n_samples: int) -> None:
    """Raise unless ``1 <= n_neighbors < n_samples`` (a row is never its own neighbour)."""
    check_int(n_neighbors, "n_neighbors")
    if n_neighbors < 1:
        raise ValueError(f"n_neighbors must be at least 1; got n_neighbors={n_neighbors}.")
    if n_neighbors >= n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors} must be smaller than n_samples={n_samples}: a row "
            "is never its own neighbour."
        )
