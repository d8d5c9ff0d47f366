"""The random-graph control: neighbours drawn uniformly at random."""

from __future__ import annotations

import torch
from torch import Tensor

from .._params import check_int
from ._checks import check_n_neighbors

__all__ = ["random_graph"]


def random_graph(n_samples: int, n_neighbors: int, *, random_state: int | None = None) -> Tensor:
    """Random neighbour indices with the same degree as a kNN graph — the ablation control.

    Each row gets ``n_neighbors`` distinct neighbours drawn uniformly at random
    from the other ``n_samples - 1`` rows (never itself). Sampling is vectorised
    over rows (Floyd's algorithm, one step per neighbour column), so a million
    rows with ten neighbours takes about a second.

    Parameters
    ----------
    n_samples : int
        Number of rows (graph nodes).
    n_neighbors : int
        Neighbours per row, ``1 <= n_neighbors < n_samples``.
    random_state : int or None, default=None
        Seed; the same seed gives the same graph. ``None`` draws a fresh seed.

    Returns
    -------
    Tensor of shape (n_samples, n_neighbors), int64
        Row ``i`` lists the neighbours of row ``i`` (in random order).

    Examples
    --------
    >>> from nescal_sklearn.graph import random_graph
    >>> graph = random_graph(5, 2, random_state=0)
    >>> graph.shape, graph.dtype
    (torch.Size([5, 2]), torch.int64)
    >>> bool((graph != torch.arange(5)[:, None]).all())
    True
    """
    check_int("n_samples", n_samples)
    check_n_neighbors(n_neighbors, n_samples)
    if random_state is not None:
        check_int("random_state", random_state)
    generator = torch.Generator()
    if random_state is None:
        generator.seed()
    else:
        generator.manual_seed(int(random_state))

    # Floyd's algorithm on the population {0, ..., n - 2} of "other rows", all rows at
    # once: step j draws t in [0, j]; if t was already chosen in that row, take j.
    population = n_samples - 1
    chosen = torch.empty((n_samples, n_neighbors), dtype=torch.int64)
    for column, j in enumerate(range(population - n_neighbors, population)):
        draw = torch.randint(0, j + 1, (n_samples,), generator=generator, dtype=torch.int64)
        if column:
            taken = (chosen[:, :column] == draw[:, None]).any(dim=1)
            draw = torch.where(taken, torch.full_like(draw, j), draw)
        chosen[:, column] = draw
    # Skip the row itself: values at or above the row index move up by one.
    rows = torch.arange(n_samples, dtype=torch.int64)[:, None]
    chosen += (chosen >= rows).to(torch.int64)
    # Floyd's order is not uniform; shuffle each row so every column is exchangeable.
    order = torch.rand((n_samples, n_neighbors), generator=generator).argsort(dim=1)
    return torch.gather(chosen, 1, order)
