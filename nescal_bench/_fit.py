"""One fit of a benchmark run: split, train, calibrate post hoc, measure, build the record.

:func:`execute_fit` is the one fit-calibrate-evaluate path of the benchmark, the
function joblib ships to a worker. It uses the package like a user would:
the planned estimator (``NeSCalClassifier`` or a scikit-learn classifier), then each
configured calibrator around ``FrozenEstimator(model)`` fitted on the validation rows.
"""

from __future__ import annotations

import pickle
import platform
import time
import timeit
import traceback
import warnings
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator

from nescal_sklearn.estimator import limit_threads
from nescal_sklearn.model_selection import takes_validation_rows

from ._adapters import calibrator_summary
from ._conditions import ConditionContext, ConditionSkipped
from ._data import Split
from ._evaluate import evaluate_refit, evaluate_stages
from ._plan import FitTask
from ._records import library_versions
from ._registry import CALIBRATORS
from ._sources import load_benchmark_data
from ._watchdog import watch_parent

#: Calls of ``predict_proba`` on the test rows that time a model's serving (the fastest).
PREDICT_CALLS = 3

#: Fitted attributes copied into a record's ``fit`` section when the model has them.
FIT_INFO = ("n_epochs_", "best_epoch_", "graph_epoch_", "n_iter_", "penalty_status_")

#: Warning categories a fit's record leaves out (library deprecations are not the fit's).
IGNORED_WARNINGS = (DeprecationWarning, PendingDeprecationWarning)


@contextmanager
def collect_warnings(into: list[str]):
    """Record the warnings raised in the block (not shown), each distinct message once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for category in IGNORED_WARNINGS:
            warnings.simplefilter("ignore", category)
        yield
    for item in caught:
        message = f"{item.category.__name__}: {item.message}"
        if message not in into:
            into.append(message)


#: Estimator parameters holding a thread count that defaults to "all cores" when None
#: (pytabkit's ``n_threads``); the fit sets them to the budget's thread count.
THREAD_PARAMS = ("n_threads",)


def _fit(estimator, split: Split, threads: int | None = None, fit_on: str = "train"):
    """Fit; ``X_val``/``y_val`` go to the estimators that early-stop on them
    (:func:`nescal_sklearn.model_selection.takes_validation_rows`, the library's rule).

    Every such estimator gets the same validation rows: ``NeSCalClassifier``,
    ``HistGradientBoostingClassifier(early_stopping=True)`` (not ``"auto"``, which ignores
    them below 10,000 rows), LightGBM and pytabkit's models (which then, with their
    default ``n_cv=1, n_refit=0``, neither split off validation rows of their own nor
    refit on them). A parameter of :data:`THREAD_PARAMS` left at None is set to
    ``threads``, so that the estimator keeps to the fit's thread budget (pytabkit would
    otherwise set torch to every physical core during its fit).
    """
    if threads is not None:
        params = estimator.get_params(deep=False)
        unset = {name: threads for name in THREAD_PARAMS if name in params and params[name] is None}
        if unset:
            estimator.set_params(**unset)
    if fit_on == "train+validation":  # a method that calibrates itself out of fold
        X = np.concatenate([split.X_train, split.X_val])
        return estimator.fit(X, np.concatenate([split.y_train, split.y_val]))
    if takes_validation_rows(estimator):
        return estimator.fit(split.X_train, split.y_train, X_val=split.X_val, y_val=split.y_val)
    return estimator.fit(split.X_train, split.y_train)


#: Training rows of the untimed fit that a process runs before its first timed one.
WARM_UP_ROWS = 2000
_warmed = False  # whether this process has run its warm-up fit


def _warm_up(task: FitTask, split: Split) -> None:
    """Once per process, before the first timed fit: fit a clone of ``task``'s estimator on
    its first :data:`WARM_UP_ROWS` training rows, untimed, its outcome ignored. A process's
    first fit pays one-off costs (torch's first kernels and allocations): on
    magic-telescope, 15.5 s for the first fit of two folds with the refit against 10.0 and
    10.9 for the next two (a throwaway script, 2026-12-07); they would otherwise land on one record of each run."""
    global _warmed
    if not _warmed:
        _warmed = True
        small = replace(
            split, X_train=split.X_train[:WARM_UP_ROWS], y_train=split.y_train[:WARM_UP_ROWS]
        )
        with collect_warnings([]), suppress(Exception):
            _fit(clone(task.estimator), small, task.budget.threads, task.method.fit_on)


def _fit_info(model) -> dict:
    """The fitted attributes of :data:`FIT_INFO` the model has (an array ``n_iter_``, one
    count per class as in ``LogisticRegression``, gives its largest count)."""
    info = {}
    for attr in FIT_INFO:
        value = getattr(model, attr, None)
        if value is not None:
            info[attr.rstrip("_")] = value if isinstance(value, str) else int(np.max(value))
    # A model that weighs and calibrates members out of fold (CrossFitClassifier).
    if isinstance(getattr(model, "calibration_", None), str):
        info["calibration"] = model.calibration_
        info["weights"] = [float(w) for w in model.weights_]
        info["dropped"] = sorted(getattr(model, "dropped_", {}))
        info["timed_out"] = bool(getattr(model, "timed_out_", False))
        info["member_status"] = _member_status(model)
        info["member_seconds"] = np.nansum(model.fit_seconds_, axis=0).tolist()  # all folds
    if isinstance(getattr(model, "models_", None), list):  # an AutoML model's trained models
        info["models"] = [str(name) for name in model.models_]
    history = getattr(model, "history_", None)
    if history is not None:
        # Seconds per fit of the parts a report prices separately (NeSCal's graph build and
        # the cache refill of cache="epoch"), summed over the epochs that logged them.
        for key in ("graph_seconds", "cache_seconds"):
            logged = [row[key] for row in history if key in row]
            if logged:
                info[key] = float(np.sum(logged))
    return info


def _serving_cost(model, X_test) -> dict:
    """What serving the model costs: the seconds of ``predict_proba`` on the test rows, the
    fastest of :data:`PREDICT_CALLS` calls (the first pays one-off costs: caches, thread
    pools), and the bytes of the pickled model."""
    calls = timeit.repeat(lambda: model.predict_proba(X_test), number=1, repeat=PREDICT_CALLS)
    return {"predict_seconds": min(calls), "model_bytes": len(pickle.dumps(model))}


def _member_status(model) -> dict:
    """Per member of a cross-fitted ensemble, how many of its fitted models ended with each
    ``penalty_status_`` (NeSCal members only)."""
    groups = model.estimators_ if model.estimators_ is not None else [model.refitted_]
    names = [name for name, _ in model.estimators]
    counts: dict[str, dict[str, int]] = {}
    for models in groups:
        for name, member in zip(names, models, strict=True):
            status = getattr(member, "penalty_status_", None)
            if status is not None:
                counts.setdefault(name, {}).setdefault(status, 0)
                counts[name][status] += 1
    return counts


def _calibrate(model, split: Split, calibrators, fit_on: str = "train") -> tuple[dict, dict]:
    """``({"raw": model, stage: fitted calibrator, ...}, {stage: {"error": ...}})``: each
    calibrator around ``FrozenEstimator(model)`` fitted on the validation rows; one that
    raises fails its stage only. A model fitted on the validation rows too calibrates
    itself: every stage is the model's own output."""
    stages = {"raw": model}
    failed: dict[str, dict] = {}
    if fit_on == "train+validation":
        return {"raw": model, **{spec.stage: model for spec in calibrators}}, failed
    for spec in calibrators:
        calibrator = CALIBRATORS[spec.name](FrozenEstimator(model), **spec.params)
        try:
            stages[spec.stage] = calibrator.fit(split.X_val, split.y_val)
        except Exception as exc:  # that stage only: the model and the others stay
            failed[spec.stage] = {"error": f"{type(exc).__name__}: {exc}"}
    return stages, failed


def _refit_conditions(task: FitTask, split: Split, context: ConditionContext) -> dict:
    """Conditions that need a model fitted without some training rows: each fits a clone
    of the task's estimator on its :meth:`refit_split`, calibrates it like the main
    model, and measures it. Returns ``conditions``, ``skipped`` (reasons) and ``refits``
    (the rows, the held-out label, the seconds and any failed stage of each refit)."""
    conditions, skipped, refits = {}, {}, {}
    for condition in task.conditions:
        if not condition.refits:
            continue
        try:
            reduced = condition.refit_split(split)
        except ConditionSkipped as exc:
            skipped[condition.name] = str(exc)
            continue
        start = time.perf_counter()
        try:
            model = _fit(clone(task.estimator), reduced, task.budget.threads, task.method.fit_on)
            stages, failed = _calibrate(model, reduced, task.calibrators, task.method.fit_on)
            conditions[condition.name] = evaluate_refit(
                condition, stages, reduced, context, task.seed
            )
        except Exception as exc:  # the refit only: the main model's record stays
            skipped[condition.name] = f"its refit failed: {type(exc).__name__}: {exc}"
            continue
        held_out = condition.held_out(split)
        refits[condition.name] = {
            "held_out": held_out.item() if hasattr(held_out, "item") else held_out,
            "n_train": len(reduced.y_train),
            "seconds": time.perf_counter() - start,
            **({"failed_stages": failed} if failed else {}),
        }
    return {"conditions": conditions, "skipped": skipped, "refits": refits}


def execute_fit(task: FitTask) -> dict:
    """Run one fit and return its record (see ``docs/benchmark_runner.md`` for the layout)."""
    caught: list[str] = []
    seconds: dict[str, float] = {}

    @contextmanager
    def step(name: str):  # timed, its warnings recorded (predictions warn too)
        start = time.perf_counter()
        with collect_warnings(caught):
            yield
        seconds[name] = time.perf_counter() - start

    with limit_threads(task.budget.threads):
        data = load_benchmark_data(task.dataset, task.data)
        split, split_name = task.dataset.split(data, task.seed, task.splits, task.budget.max_rows)
        _warm_up(task, split)
        with step("fit_seconds"):
            model = _fit(clone(task.estimator), split, task.budget.threads, task.method.fit_on)
        serving = _serving_cost(model, split.X_test)
        with step("calibration_seconds"):
            stages, failed = _calibrate(model, split, task.calibrators, task.method.fit_on)
        context = ConditionContext(split, dataset=task.dataset.name, data_dir=task.data.data_dir)
        with step("evaluation_seconds"):
            measured = evaluate_stages(stages, split, task.conditions, task.seed, context)
        with step("refit_seconds"):
            refitted = _refit_conditions(task, split, context)
        found = {**measured["conditions"], **refitted["conditions"]}
        skipped = {**measured["skipped_conditions"], **refitted["skipped"]}
        order = [c.name for c in task.conditions]
        measured["conditions"] = {name: found[name] for name in order if name in found}
        measured["skipped_conditions"] = {name: skipped[name] for name in order if name in skipped}
    if not refitted["refits"]:
        del seconds["refit_seconds"]
    sizes = {
        "n_train": len(split.y_train),
        "n_validation": len(split.y_val),
        "n_test": len(split.y_test),
        "n_features": int(split.X_train.shape[1]),
        "n_classes": len(split.classes),
    }
    refits = {"refits": refitted["refits"]} if refitted["refits"] else {}
    summaries = {name: calibrator_summary(f) for name, f in stages.items() if name != "raw"}
    return {
        "key": task.key,
        "dataset": task.dataset.name,
        "method": task.method.name,
        "point": task.point,
        "seed": task.seed,
        "params": task.estimator_params,
        "identity": task.identity,
        "data": {"split": split_name, **sizes},
        **measured,
        "fit": {**_fit_info(model), "warnings": caught, **refits},
        "calibrators": {**summaries, **failed},
        "environment": library_versions(),
        "run": {
            **seconds,
            **serving,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(),
        },
    }


def run_fit(task: FitTask, parent_pid: int | None = None) -> dict:
    """Worker entry point: run ``task`` and return ``{"ok": True, "record": ...}`` or
    ``{"ok": False, "failure": ...}``; the runner writes it (only the holder of the output
    folder's lock writes there).

    An exception inside the fit never stops the run, but a ``KeyboardInterrupt``
    (Ctrl-C) does: it propagates, and nothing is recorded for the interrupted fit.
    ``parent_pid`` is the runner's pid when this runs in one of its worker processes:
    the worker then exits as soon as the runner is gone (see :mod:`._watchdog`).
    """
    watch_parent(parent_pid)
    try:
        return {"ok": True, "record": execute_fit(task)}
    except Exception as exc:  # reported by the runner, retried by --resume
        return failed(task, exc)


def failed(task: FitTask, exc: Exception) -> dict:
    """``{"ok": False, "failure": ...}``: the failure note of ``task``, which raised ``exc``."""
    failure = {
        "key": task.key,
        "dataset": task.dataset.name,
        "method": task.method.name,
        "point": task.point,
        "seed": task.seed,
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(exc)),
    }
    return {"ok": False, "failure": failure}
