"""Worker processes of a run die with the runner.

With ``--jobs N`` the fits run in loky worker processes. If the runner is killed
(``kill -9``), loky's workers would live on until their idle timeout (5 minutes),
taking the cores of a resumed runner (and its fits, whose results nobody reads). So
every worker runs :func:`watch_parent` when it starts (the loky initializer) and again
at each fit: a daemon thread that checks every :data:`INTERVAL` seconds that the
worker's parent is still the runner (``os.getppid()``; a dead parent's children are
reparented) and ends the worker with ``os._exit`` the moment it is not. It is
portable (no ``PR_SET_PDEATHSIG``, which would also fire when the loky thread that
spawned the worker ends). A worker also ignores SIGINT: a terminal's Ctrl-C reaches
every process of the group, and the runner alone decides (it stops the workers).

This module imports nothing heavy, so the check starts before the worker imports the
package's fitting code.
"""

from __future__ import annotations

import os
import signal
import threading

from nescal_sklearn._compat.orphans import INTERVAL, PARENT_GONE_STATUS, exit_with_parent

__all__ = ["INTERVAL", "PARENT_GONE_STATUS", "ensure_parent_alive", "watch_parent"]


def ensure_parent_alive(parent_pid: int | None) -> None:
    """End this process now if it is a worker whose runner ``parent_pid`` is gone.

    Does nothing in the runner itself, or when ``parent_pid`` is None (dask workers,
    which are not the runner's children).
    """
    if parent_pid is None or os.getpid() == parent_pid:
        return
    if os.getppid() != parent_pid:
        os._exit(PARENT_GONE_STATUS)


def watch_parent(parent_pid: int | None, interval: float = INTERVAL) -> None:
    """In a worker of the runner ``parent_pid``: exit as soon as the runner is gone.

    Starts (once per process) the library's watching thread
    (:func:`nescal_sklearn._compat.orphans.exit_with_parent`), and makes the worker
    ignore SIGINT. A no-op in the runner itself and for ``parent_pid=None``.
    """
    if parent_pid is None or os.getpid() == parent_pid:
        return
    ensure_parent_alive(parent_pid)
    if (
        exit_with_parent(parent_pid, interval)
        and threading.current_thread() is threading.main_thread()
    ):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
