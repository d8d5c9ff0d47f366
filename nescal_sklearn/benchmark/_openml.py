"""OpenML tasks and suites through openml-python and its cache (openml imported lazily)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._specs import OpenMLSettings

__all__ = ["OpenMLTaskData", "OpenMLUnavailableError", "expand_suite", "load_openml_task"]

_LOCK = threading.RLock()


class OpenMLUnavailableError(RuntimeError):
    """An OpenML task or suite is neither in the cache nor downloadable."""


def _import_openml():
    try:
        import openml
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            "OpenML datasets need openml-python: pip install 'nescal-sklearn[openml]'."
        ) from None
    return openml


@contextmanager
def openml_settings(settings: OpenMLSettings) -> Iterator[object]:
    """Apply ``settings`` to ``openml.config`` for the block, then restore the previous ones.

    Yields the ``openml`` module. Loads are serialised by a lock because
    ``openml.config`` is global to the process.
    """
    openml = _import_openml()
    config = openml.config
    with _LOCK:
        saved = config.get_config_as_dict()
        try:
            if settings.cache_dir is not None:
                config.set_root_cache_directory(settings.cache_dir)
            if settings.server is not None:
                config.server = settings.server
            if settings.n_retries is not None:
                config.set_retry_policy(saved["retry_policy"], settings.n_retries)
            yield openml
        finally:
            config.set_root_cache_directory(saved["cachedir"])
            config.server = saved["server"]
            config.set_retry_policy(saved["retry_policy"], saved["connection_n_retries"])


@dataclass(frozen=True)
class OpenMLTaskData:
    """Features, labels and the task's own train/test splits (sample 0 of each fold)."""

    task_id: int
    dataset_name: str
    X: pd.DataFrame
    y: pd.Series
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


def _unavailable(what: str, openml, exc: Exception) -> OpenMLUnavailableError:
    return OpenMLUnavailableError(
        f"{what} is not in the OpenML cache directory {openml.config.get_cache_directory()!r} "
        f"and could not be downloaded from {openml.config.server!r} ({_reason(exc)}). Connect "
        "to the network, or set 'openml.cache_dir' (and 'openml.server') in the config to a "
        "cache that holds it."
    )


def load_openml_task(task_id: int, settings: OpenMLSettings) -> OpenMLTaskData:
    """Load a supervised-classification task (data and splits) with openml-python.

    Parameters
    ----------
    task_id : int
        OpenML task id.
    settings : OpenMLSettings
        Cache directory, server and retries to use (None keeps openml's own).

    Raises
    ------
    OpenMLUnavailableError
        If the task is not cached and cannot be downloaded; the message names the
        task id and the cache directory.
    """
    with openml_settings(settings) as openml:
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
            raise _unavailable(f"OpenML task {task_id}", openml, exc) from None
        except Exception as exc:  # connection errors of requests, cache misses, ...
            raise _unavailable(f"OpenML task {task_id}", openml, exc) from None
        if type(task).__name__ != "OpenMLClassificationTask":
            raise ValueError(
                f"OpenML task {task_id} is a {type(task).__name__}; expected a supervised "
                "classification task."
            )
        X, y = task.get_X_and_y(dataset_format="dataframe")
        n_repeats, n_folds, _ = task.get_split_dimensions()
        folds = {
            (r, f): tuple(
                np.asarray(idx) for idx in task.get_train_test_split_indices(repeat=r, fold=f)
            )
            for r in range(n_repeats)
            for f in range(n_folds)
        }
        name = task.get_dataset().name
    if isinstance(y.dtype, pd.CategoricalDtype):
        y = y.astype(str)
    return OpenMLTaskData(
        int(task_id), name, X, y.reset_index(drop=True), n_repeats, n_folds, folds
    )


def expand_suite(suite: int | str, settings: OpenMLSettings) -> list[int]:
    """Return the task ids of an OpenML benchmark suite (id or alias, e.g. ``"OpenML-CC18"``).

    Raises
    ------
    OpenMLUnavailableError
        If the suite cannot be fetched.
    """
    with openml_settings(settings) as openml:
        try:
            return [int(t) for t in openml.study.get_suite(suite).tasks]
        except Exception as exc:
            raise OpenMLUnavailableError(
                f"OpenML suite {suite!r} could not be fetched from {openml.config.server!r} "
                f"({_reason(exc)}); openml-python does not cache suites, so without network "
                "list the suite's task ids under 'datasets' as {'openml_task': id} entries."
            ) from None
