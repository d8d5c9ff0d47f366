"""``limit_threads``: torch's and the BLAS/OpenMP pools' thread counts for one block, held by
one thread of the process at a time; ``torch_threads``: torch's alone, for a forward pass;
``prediction_threads``: the threads fitted networks predict on within a block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from threadpoolctl import threadpool_limits

__all__ = ["limit_threads", "prediction_threads", "torch_threads"]

#: torch's default random generator (weight initialisation, dropout masks) and its thread
#: count are one per process: two network fits in two threads of one process would draw
#: from each other's stream and set each other's threads. Every block of
#: :func:`limit_threads` holds this lock, so such fits run one at a time.
_PROCESS_STATE = threading.RLock()

#: The threads a fitted network predicts on instead of its own ``n_threads`` (None: its
#: own), set by :func:`prediction_threads` for the calling thread's context only.
_PREDICTION_THREADS: ContextVar[int | None] = ContextVar("prediction_threads", default=None)


@contextmanager
def limit_threads(n_threads: int | None) -> Iterator[None]:
    """Run the block on ``n_threads`` threads (torch, OpenMP and BLAS), then restore them.

    As scikit-learn bounds its BLAS threads with :func:`threadpoolctl.threadpool_limits`
    for one call, this does the same for torch (``torch.set_num_threads``) too. Parallel
    fits, one per core, each run on one thread this way; several fits each on every core
    spin against each other (two fits at two threads each ran 13x slower on two cores).

    The block holds a process-wide (re-entrant) lock: torch's random generator and
    thread count are process-wide, so network fits and predictions in several threads
    of one process (joblib's ``threading`` backend, a dask cluster of threads) run one
    at a time, and a seeded fit gives the same model under any joblib backend.
    Processes (joblib's default, loky) are not affected.

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
    with torch_threads(n_threads):  # the lock and torch's threads
        if n_threads is None:
            yield
            return
        with threadpool_limits(limits=n_threads):
            yield


@contextmanager
def torch_threads(n_threads: int | None) -> Iterator[None]:
    """Run the block on ``n_threads`` of torch's threads, then restore them: for blocks that
    run torch operations alone, such as a network's forward pass at prediction.

    torch sets its own OpenMP and MKL threads with ``torch.set_num_threads``, so a block
    of torch operations needs nothing more. :func:`limit_threads` also limits every other
    BLAS and OpenMP pool of the process through :func:`threadpoolctl.threadpool_limits`,
    whose scan of the process's libraries takes 3 to 30 ms a call: more than a boosted
    model takes to predict 1,000 rows. The block holds the same process-wide lock as
    :func:`limit_threads`.

    Parameters
    ----------
    n_threads : int or None
        torch's threads for the block; ``None`` changes nothing.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.estimator import torch_threads
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    """
    with _PROCESS_STATE:
        if n_threads is None:
            yield
            return
        previous = torch.get_num_threads()
        torch.set_num_threads(n_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


@contextmanager
def prediction_threads(n_threads: int | None) -> Iterator[None]:
    """Within the block, a fitted ``NeSCalClassifier`` predicts on ``n_threads`` of torch's
    threads instead of its own ``n_threads``, whose one thread suits parallel fits, not
    a model that predicts alone (a cross-fitted ensemble predicts its members one after
    another: :class:`~nescal_sklearn.ensemble.CrossFitClassifier` predicts in this block
    with its ``n_jobs``). Fits are not affected.

    The setting is the calling thread's (a :class:`contextvars.ContextVar`): threads that
    the block starts predict on their networks' own ``n_threads``. Predictions at another
    thread count differ by float32 round-off only.

    Parameters
    ----------
    n_threads : int or None
        torch's threads of each prediction in the block; ``None``: each network's own.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn import NeSCalClassifier
    >>> from nescal_sklearn.estimator import prediction_threads
    >>> X, y = np.random.default_rng(0).normal(size=(40, 3)), np.arange(40) % 2
    >>> model = NeSCalClassifier(loss="ce", max_epochs=1, random_state=0).fit(X, y)
    >>> with prediction_threads(2):
    ...     model.predict_proba(X).shape
    (40, 2)
    """
    if n_threads is not None and (
        isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1
    ):
        raise ValueError(f"n_threads must be a positive int or None, got {n_threads!r}.")
    token = _PREDICTION_THREADS.set(n_threads)
    try:
        yield
    finally:
        _PREDICTION_THREADS.reset(token)
