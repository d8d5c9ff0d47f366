"""One fit of a benchmark run: split, train, calibrate post hoc, measure, build the record.

This is the function joblib (or dask) ships to a worker. It uses the package like a
user would: ``NeSCalClassifier`` or a scikit-learn classifier, then each configured
calibrator around ``FrozenEstimator(model)`` fitted on the validation rows.
"""

from __future__ import annotations

import importlib
import inspect
import platform
import time
import traceback
from contextlib import contextmanager
from datetime import datetime, timezone

import numpy as np
from sklearn.frozen import FrozenEstimator

from ._config import MethodSpec
from ._data import load_benchmark_data, make_split
from ._plan import FitTask
from ._records import RecordStore, library_versions
from ._registry import METRICS, N_BINS, calibrator_class

__all__ = ["build_estimator", "execute_fit", "run_fit"]


@contextmanager
def limit_threads(n: int):
    """Run the block on ``n`` threads (torch, OpenMP and BLAS pools), then restore them.

    Results are bit-identical only for the same thread count, so every fit of a run
    uses the configured count whatever ``--jobs`` is.
    """
    import torch
    from threadpoolctl import threadpool_limits

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(previous)


def build_estimator(method: MethodSpec, params: dict, seed: int):
    """The unfitted estimator of ``method`` with estimator ``params``, seeded with ``seed``."""
    if method.is_neural:
        from ..estimator import NeSCalClassifier

        estimator = NeSCalClassifier(loss=method.loss, random_state=seed)
    else:
        module_name, _, name = method.estimator.rpartition(".")
        estimator = getattr(importlib.import_module(module_name), name)()
        if "random_state" in estimator.get_params():
            estimator.set_params(random_state=seed)
    params = dict(params)
    if "hidden_sizes" in params:
        params["hidden_sizes"] = tuple(params["hidden_sizes"])
    return estimator.set_params(**params)


def _fit(estimator, split):
    """Fit; ``X_val``/``y_val`` go to estimators whose ``fit`` takes them (early stopping)."""
    accepted = inspect.signature(estimator.fit).parameters
    wants_val = "X_val" in accepted and "y_val" in accepted
    if wants_val and estimator.get_params().get("early_stopping", True) is not False:
        return estimator.fit(split.X_train, split.y_train, X_val=split.X_val, y_val=split.y_val)
    return estimator.fit(split.X_train, split.y_train)


def _aligned_proba(model, X, classes: np.ndarray) -> np.ndarray:
    """``predict_proba`` with one column per class of the whole dataset (0 for unseen ones)."""
    proba = model.predict_proba(X)
    model_classes = np.asarray(model.classes_)
    if len(model_classes) == len(classes) and np.array_equal(model_classes, classes):
        return proba
    out = np.zeros((len(X), len(classes)))
    out[:, np.searchsorted(classes, model_classes)] = proba
    return out


def _metrics(y, proba, classes) -> dict[str, float]:
    return {name: float(metric.function(y, proba, classes)) for name, metric in METRICS.items()}


def _reliability(y, proba, classes) -> dict:
    """Top-label bins (equal width, :data:`N_BINS`): counts, mean confidence, accuracy."""
    from ..metrics import reliability_curve

    curve = reliability_curve(y, proba, labels=classes, n_bins=N_BINS)

    def listed(values):
        return [None if not np.isfinite(v) else float(v) for v in values]

    return {
        "counts": [int(c) for c in curve.counts],
        "confidence": listed(curve.confidence),
        "accuracy": listed(curve.accuracy),
    }


def _calibrator_summary(calibrated) -> dict:
    out = {}
    for name in ("temperature_", "temperatures_"):
        value = getattr(calibrated, name, None)
        if value is not None:
            out[name.rstrip("_")] = np.asarray(value, dtype=float).tolist()
    return out


def execute_fit(task: FitTask) -> dict:
    """Run one fit and return its record (see ``docs/benchmark_runner.md`` for the layout)."""
    with limit_threads(task.budget.threads):
        data = load_benchmark_data(task.dataset, task.data_dir, task.openml, task.budget.max_rows)
        split, split_name = make_split(data, task.seed, task.splits, task.budget.max_rows)
        classes = split.classes
        estimator = build_estimator(task.method, task.estimator_params, task.seed)
        start = time.perf_counter()
        model = _fit(estimator, split)
        fit_seconds = time.perf_counter() - start

        stages = {"raw": model}
        start = time.perf_counter()
        for spec in task.calibrators:
            calibrator = calibrator_class(spec.name)(FrozenEstimator(model), **spec.params)
            stages[spec.name] = calibrator.fit(split.X_val, split.y_val)
        calibration_seconds = time.perf_counter() - start

        validation, test, reliability = {}, {}, {}
        for name, fitted in stages.items():
            proba_val = _aligned_proba(fitted, split.X_val, classes)
            proba_test = _aligned_proba(fitted, split.X_test, classes)
            validation[name] = {
                "nll": float(METRICS["nll"].function(split.y_val, proba_val, classes))
            }
            test[name] = _metrics(split.y_test, proba_test, classes)
            reliability[name] = _reliability(split.y_test, proba_test, classes)

    fit_info = {}
    for attr in ("n_epochs_", "best_epoch_", "graph_epoch_", "n_iter_"):
        value = getattr(model, attr, None)
        if value is not None:
            fit_info[attr.rstrip("_")] = int(value)
    return {
        "key": task.key,
        "dataset": task.dataset.name,
        "method": task.method.name,
        "point": task.point,
        "seed": task.seed,
        "params": task.estimator_params,
        "identity": task.identity,
        "data": {
            "split": split_name,
            "n_train": len(split.y_train),
            "n_validation": len(split.y_val),
            "n_test": len(split.y_test),
            "n_features": int(split.X_train.shape[1]),
            "n_classes": len(classes),
        },
        "validation": validation,
        "test": test,
        "reliability": reliability,
        "fit": fit_info,
        "calibrators": {
            name: _calibrator_summary(fitted) for name, fitted in stages.items() if name != "raw"
        },
        "environment": library_versions(),
        "run": {
            "fit_seconds": fit_seconds,
            "calibration_seconds": calibration_seconds,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(),
        },
    }


def run_fit(task: FitTask, results_dir: str) -> dict:
    """Worker entry point: run ``task``, write its record (or failure), return it.

    Returns ``{"ok": True, "record": ...}`` or ``{"ok": False, "failure": ...}``; an
    exception inside the fit never stops the run.
    """
    store = RecordStore(results_dir)
    try:
        record = execute_fit(task)
    except Exception as exc:  # reported by the runner, retried by --resume
        failure = {
            "key": task.key,
            "dataset": task.dataset.name,
            "method": task.method.name,
            "point": task.point,
            "seed": task.seed,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
        try:
            store.write_failure(failure)
        except OSError:
            pass
        return {"ok": False, "failure": failure}
    try:
        store.write(record)
    except OSError:  # a remote worker without the results folder: the runner writes it
        pass
    return {"ok": True, "record": record}
