"""A worker process of a cross-fitted fit ends with the process that started it.

joblib's loky workers check that their parent lives only between two tasks. When the
process that fits a :class:`~nescal_sklearn.ensemble.CrossFitClassifier` is killed (a
kernel restarted, ``kill``, an out-of-memory kill), a worker would go on with its
member's fit to the end, minutes of gradient boosting on a large table, on cores the
user thinks are free. :func:`exit_with_parent`, called by each member fit in a worker,
starts (once per process) a daemon thread that checks every :data:`INTERVAL` seconds
that the worker's parent is still the fitting process (``os.getppid()``; a dead
parent's children are reparented) and ends the worker with ``os._exit`` the moment it
is not.

Only a child of the fitting process watches: a fit in the fitting process itself (one
job, threads) or in a worker that is not its child (dask's) starts nothing.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["INTERVAL", "PARENT_GONE_STATUS", "exit_with_parent"]

#: Seconds between two checks of the parent.
INTERVAL = 0.5

#: Exit status of a worker whose parent is gone.
PARENT_GONE_STATUS = 75

_watched: int | None = None


def _watch(parent: int, interval: float) -> None:
    while os.getppid() == parent:
        time.sleep(interval)
    os._exit(PARENT_GONE_STATUS)


def exit_with_parent(parent: int, interval: float = INTERVAL) -> bool:
    """In a child process of ``parent``: end this process as soon as ``parent`` is gone.

    Starts the watching thread once per process; True when this call started it.
    Nothing happens in ``parent`` itself or in a process that is not its child.
    """
    global _watched
    if os.getpid() == parent or os.getppid() != parent or _watched == parent:
        return False
    _watched = parent
    watcher = threading.Thread(
        target=_watch, args=(parent, interval), name="nescal-exit-with-parent", daemon=True
    )
    watcher.start()
    return True
