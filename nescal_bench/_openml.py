"""OpenML tasks and suites through openml-python and its cache (openml imported lazily).

openml-python caches parsed data as pickles and loads them again, so a cache directory
is trusted like code. A cache that a configuration names (``openml.cache_dir``) is
never given to openml as it is: its files, openml's pickles left out, are linked into a
private temporary cache for the duration of each load, so a pickle planted there is
never read (openml parses the ARFF files again and pickles into the private copy).
openml's own default cache is used as openml uses it. With ``offline``, a task whose
files are not in the cache is refused before openml is called (no download).
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_LOCK = threading.RLock()


class OpenMLUnavailableError(RuntimeError):
    """An OpenML task or suite is neither in the cache nor downloadable (or, offline,
    not cached)."""


def _import_openml():
    try:
        import openml
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            'OpenML datasets need openml-python: pip install -e ".[bench]" openml.'
        ) from None
    return openml


def _mirror(cache_dir: Path, private: Path) -> None:
    """Link every regular file of ``cache_dir`` except pickles into ``private``."""
    for path in cache_dir.rglob("*"):
        if path.is_file() and not path.is_symlink() and ".pkl" not in path.name:
            target = private / path.relative_to(cache_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())


@contextmanager
def openml_settings(settings) -> Iterator[tuple[object, Path]]:
    """Apply ``settings`` to ``openml.config`` for the block, then restore the previous ones.

    Yields the ``openml`` module and the cache directory to name in messages (the
    configuration's, for a private mirror). Loads are serialised by a lock because
    ``openml.config`` is global to the process.
    """
    openml = _import_openml()
    config = openml.config
    with _LOCK, ExitStack() as stack:
        saved = config.get_config_as_dict()
        try:
            if settings.server is not None:
                config.server = settings.server
            if settings.cache_dir is not None:
                private = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="openml-")))
                _mirror(Path(settings.cache_dir), private)
                config.set_root_cache_directory(str(private))
                inside = Path(config.get_cache_directory()).relative_to(private)
                shown = Path(settings.cache_dir) / inside
            else:
                shown = Path(config.get_cache_directory())
            if settings.n_retries is not None:
                config.set_retry_policy(saved["retry_policy"], settings.n_retries)
            yield openml, shown
        finally:
            config.set_root_cache_directory(saved["cachedir"])
            config.server = saved["server"]
            config.set_retry_policy(saved["retry_policy"], saved["connection_n_retries"])


def _missing(cache: Path, task_id: int) -> str | None:
    """The first file a load of ``task_id`` needs that ``cache`` lacks (None: none)."""
    task = cache / "tasks" / str(task_id)
    if not (task / "task.xml").is_file():
        return str(task / "task.xml")
    if not any((task / f).is_file() for f in ("datasplits.arff", "datasplits.pkl.py3")):
        return str(task / "datasplits.arff")
    found = re.search(r"<oml:data_set_id>(\d+)<", (task / "task.xml").read_text())
    dataset = cache / "datasets" / (found.group(1) if found else "?")
    if not (dataset / "description.xml").is_file():
        return str(dataset / "description.xml")
    if not any((dataset / f).is_file() for f in ("dataset.arff", "dataset.pq", "dataset.pkl.py3")):
        return str(dataset / "dataset.arff")
    return None


@dataclass(frozen=True)
class OpenMLTaskData:
    """Features, labels and the task's own train/test splits (sample 0 of each fold)."""

    task_id: int
    dataset_name: str
    X: object  # a DataFrame
    y: object  # a Series
    n_repeats: int
    n_folds: int
    folds: dict  # (repeat, fold) -> (train indices, test indices)

    def fold_of_seed(self, seed: int) -> tuple[int, int]:
        """The (repeat, fold) a seed uses: fold ``seed % n_folds`` of repeat ``seed // n_folds``
        (repeats cycle when the seed runs past them).

        Examples
        --------
        >>> import pandas as pd
        >>> data = OpenMLTaskData(1, "d", pd.DataFrame(), pd.Series(), 2, 10, {})
        >>> data.fold_of_seed(3), data.fold_of_seed(12), data.fold_of_seed(25)
        ((0, 3), (1, 2), (0, 5))
        """
        repeat, fold = divmod(seed, self.n_folds)
        return repeat % self.n_repeats, fold


def _reason(exc: Exception) -> str:
    reason = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {reason[:200] + '...' if len(reason) > 200 else reason}"


def _unavailable(what: str, openml, shown: Path, exc: Exception) -> OpenMLUnavailableError:
    return OpenMLUnavailableError(
        f"{what} is not in the OpenML cache directory {str(shown)!r} "
        f"and could not be downloaded from {openml.config.server!r} ({_reason(exc)}). Connect "
        "to the network, or set 'openml.cache_dir' (and 'openml.server') in the config to a "
        "cache that holds it."
    )


def load_openml_task(task_id: int, settings, *, offline: bool = False) -> OpenMLTaskData:
    """Load a supervised-classification task (data and splits) with openml-python.

    Parameters
    ----------
    task_id : int
        OpenML task id.
    settings : OpenMLSettings
        Cache directory, server and retries to use (None keeps openml's own).
    offline : bool, default=False
        Refuse a task that is not cached, before openml is called.

    Raises
    ------
    OpenMLUnavailableError
        If the task is not cached and cannot be downloaded; the message names the
        task id and the cache directory.
    """
    with openml_settings(settings) as (openml, shown):
        missing = _missing(Path(openml.config.get_cache_directory()), task_id) if offline else None
        if missing is not None:
            raise OpenMLUnavailableError(
                f"OpenML task {task_id} is not in the OpenML cache directory {str(shown)!r} "
                f"({missing.replace(openml.config.get_cache_directory(), str(shown))} is "
                "missing), and --offline downloads nothing"
            )
        try:
            task = openml.tasks.get_task(
                task_id,
                download_splits=True,
                download_data=True,
                download_qualities=False,
                download_features_meta_data=False,
            )
        except openml.exceptions.OpenMLServerException as exc:
            if "Unknown task" in str(exc) or getattr(exc, "code", None) == 151:
                raise ValueError(f"OpenML has no task {task_id}: {exc}") from None
            raise _unavailable(f"OpenML task {task_id}", openml, shown, exc) from None
        except Exception as exc:  # connection errors of requests, cache misses, ...
            raise _unavailable(f"OpenML task {task_id}", openml, shown, exc) from None
        if type(task).__name__ != "OpenMLClassificationTask":
            raise ValueError(
                f"OpenML task {task_id} is a {type(task).__name__}; expected a supervised classification task."
            )
        X, y = task.get_X_and_y(dataset_format="dataframe")
        n_repeats, n_folds, _ = task.get_split_dimensions()
        folds = {
            (r, f): tuple(
                np.asarray(i) for i in task.get_train_test_split_indices(repeat=r, fold=f)
            )
            for r in range(n_repeats)
            for f in range(n_folds)
        }
        name = task.get_dataset().name
    if y.dtype.name == "category":
        y = y.astype(str)
    return OpenMLTaskData(
        int(task_id), name, X, y.reset_index(drop=True), n_repeats, n_folds, folds
    )


def expand_suite(suite: int | str, settings, *, offline: bool = False) -> list[int]:
    """Return the task ids of an OpenML benchmark suite (id or alias, e.g. ``"OpenML-CC18"``).

    Raises
    ------
    OpenMLUnavailableError
        If the suite cannot be fetched.
    """
    if offline:
        raise OpenMLUnavailableError(
            f"OpenML suite {suite!r}: openml-python does not cache suites, and --offline "
            "downloads nothing; list the suite's task ids as {'openml_task': id} entries"
        )
    with openml_settings(settings) as (openml, _):
        try:
            return [int(t) for t in openml.study.get_suite(suite).tasks]
        except Exception as exc:
            raise OpenMLUnavailableError(
                f"OpenML suite {suite!r} could not be fetched from {openml.config.server!r} "
                f"({_reason(exc)}); openml-python does not cache suites, so without network "
                "list the suite's task ids under 'datasets' as {'openml_task': id} entries."
            ) from None
