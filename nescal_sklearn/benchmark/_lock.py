"""The lock on a run's output directory: one runner at a time.

``run`` holds ``OUTPUT/.lock`` for its whole duration: a file holding the runner's pid,
host and start time, locked with ``flock`` (the kernel releases it when the process
dies, however it dies). A second runner on the same folder is refused with a message
naming the holder. A lock file left behind by a runner that died (``kill -9``, a power
cut) is *stale*:

* on the same host, when no process holds its ``flock`` (or, on a file system without
  ``flock``, when its pid is gone): it is taken over, with a warning;
* written on another host, its process cannot be checked from here: the run is
  refused unless ``break_lock=True`` (``--break-lock``).

The lock is released (the file removed) on every way out of the run: normal end, an
exception, Ctrl-C. ``--dry-run``, ``report`` and ``compare`` only read and take no lock.
"""

from __future__ import annotations

import json
import os
import platform
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ._records import _pid_alive
from ._specs import BenchmarkWarning, RunError

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: the pid rule alone
    fcntl = None

__all__ = ["LOCK_NAME", "OutputLockedError", "output_lock"]

#: The lock file's name inside the output directory.
LOCK_NAME = ".lock"


class OutputLockedError(RunError):
    """The output directory is in use by another run (or holds another host's lock)."""


def _holder(info: dict | None) -> str:
    if not info:
        return "holder unknown: the lock file is empty or unreadable"
    return f"pid {info.get('pid')} on host {info.get('host')!r}, started {info.get('started')}"


def _read(fd: int) -> dict | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 65536).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _kernel_lock(fd: int) -> bool | None:
    """``flock`` the file: True if locked, False if another process holds it, None if the
    file system does not support it."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EOPNOTSUPP: no flock on this file system
        return None
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _acquire(output: Path, break_lock: bool) -> tuple[int, Path]:
    path = output / LOCK_NAME
    where = str(output)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            locked = _kernel_lock(fd)
            info = _read(fd)
            if locked is False:
                raise OutputLockedError(
                    f"the output directory {where!r} is in use by another nescal-bench run "
                    f"({_holder(info)}); wait for it to end, or set another 'output'"
                )
            if not _same_file(fd, path):  # released (removed) meanwhile: lock the new file
                os.close(fd)
                continue
            if info:
                same_host = info.get("host") == platform.node()
                pid = info.get("pid")
                if same_host and locked is None and isinstance(pid, int) and _pid_alive(pid):
                    raise OutputLockedError(
                        f"the output directory {where!r} is in use by another nescal-bench "
                        f"run ({_holder(info)}); wait for it to end, or set another 'output'"
                    )
                if not same_host and not break_lock:
                    raise OutputLockedError(
                        f"the output directory {where!r} holds the lock of a nescal-bench run "
                        f"on another host ({_holder(info)}), which cannot be checked from "
                        "here; if that run has ended, pass --break-lock (break_lock=True)"
                    )
                why = "is no longer running" if same_host else "was broken with --break-lock"
                warnings.warn(
                    f"{path}: took over the lock left by a nescal-bench run that {why} "
                    f"({_holder(info)})",
                    BenchmarkWarning,
                    stacklevel=4,
                )
            mine = {
                "pid": os.getpid(),
                "host": platform.node(),
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(mine) + "\n").encode())
            os.fsync(fd)
            return fd, path
        except BaseException:
            os.close(fd)
            raise


def _release(fd: int, path: Path) -> None:
    try:
        if _same_file(fd, path):
            path.unlink(missing_ok=True)  # removed while still locked: see _acquire
    finally:
        os.close(fd)  # releases the flock


@contextmanager
def output_lock(output: str | os.PathLike, *, break_lock: bool = False) -> Iterator[Path]:
    """Hold the lock of the output directory ``output`` (created if needed) in the block.

    Parameters
    ----------
    output : path
        The output directory.
    break_lock : bool, default=False
        Take over a lock file written on another host, whose process cannot be checked.

    Yields
    ------
    Path
        The lock file.

    Raises
    ------
    OutputLockedError
        If another run holds the lock.
    RunError
        If the directory cannot be created or the lock file cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> from nescal_sklearn.benchmark._lock import output_lock
    >>> folder = tempfile.mkdtemp()
    >>> with output_lock(folder) as path:
    ...     try:
    ...         with output_lock(folder):
    ...             pass
    ...     except RuntimeError as exc:
    ...         print(str(exc).split(" (")[0].endswith("is in use by another nescal-bench run"))
    ...     print(path.exists())
    True
    True
    >>> path.exists()
    False
    """
    output = Path(output)
    try:
        output.mkdir(parents=True, exist_ok=True)
        fd, path = _acquire(output, break_lock)
    except OSError as exc:
        raise RunError(
            f"output: cannot create or lock the output directory {str(output)!r}: "
            f"{exc.strerror or exc}"
        ) from None
    try:
        yield path
    finally:
        _release(fd, path)
