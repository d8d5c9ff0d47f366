"""``limit_threads``: torch's and the BLAS/OpenMP pools' thread counts for one block."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from threadpoolctl import threadpool_limits

__all__ = ["limit_threads"]


@contextmanager
def limit_threads(n_threads: int | None) -> Iterator[None]:
    """Run the block on ``n_threads`` threads (torch, OpenMP and BLAS), then restore them.

    As scikit-learn bounds its BLAS threads with :func:`threadpoolctl.threadpool_limits`
    for one call, this does the same for torch (``torch.set_num_threads``) too. Parallel
    fits, one per core, each run on one thread this way; several fits each on every core
    spin against each other (two fits at two threads each ran 13x slower on two cores).

    Parameters
    ----------
    n_threads : int or None
        Threads for the block; ``None`` changes nothing.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.estimator import limit_threads
    >>> with limit_threads(1):
    ...     torch.get_num_threads()
    1
    """
    if n_threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        with threadpool_limits(limits=n_threads):
            yield
    finally:
        torch.set_num_threads(previous)
