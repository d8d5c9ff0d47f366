"""Fitting an ensemble's members fold by fold: the first fold first, within a time budget.

:func:`fit_in_stages` fits ``members x folds`` models through joblib in two stages:

1. **The first fold of every member.** A ``screen`` function (the ensemble's greedy
   selection on that fold's held-out rows) then gives each member a weight, and a member
   of weight 0 is dropped: it is never fitted on the other folds.
2. **The other folds of the members kept**, fold by fold.

Without a screen or a time budget nothing waits for the first fold: the two stages are
one queue, and a worker free before the first fold's last fit ends starts a later fold.
With a screen they stay apart, so that no worker fits a member the screen then drops: a
dropped network's fold fit, started early, took as long as the kept fits it delayed.

With a :class:`~._budget.TimeBudget` (whose module states the rules), the first fold's
fits always run and the later ones start only before the deadline; a member that can
stop on time (:func:`~._budget.stops_on_time`) gets its share of the time left: the time
left divided by the rounds of such fits still to come on the ``n_jobs`` workers. A
member that cannot (one with neither a ``time_limit`` nor gradient boosting's rounds of
trees, :class:`~._budget.OnTime`) is timed on the first fold, and its later folds are
counted against the time left. The folds whose every kept member finished are the folds
of the ensemble; the rest are dropped. The warnings of fits in
worker processes are re-issued in the caller (:func:`kept_warnings`). With several
workers, each fit runs on its share of the cores (:func:`_timed_fit`), whatever joblib's
backend.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, cpu_count, delayed, effective_n_jobs
from threadpoolctl import threadpool_limits

from .._compat.orphans import exit_with_parent
from ..model_selection import fit_on_fold
from ._budget import TimeBudget, fit_of, stops_on_time

__all__ = [
    "StagedFits",
    "cores",
    "fit_in_stages",
    "kept_warnings",
    "reissue",
    "threads_per_fit",
]


@dataclass
class StagedFits:
    """What :func:`fit_in_stages` fitted, and what it left out and why.

    Attributes
    ----------
    models : list of list
        ``models[f][m]``: member ``m`` fitted without fold ``f``, or None.
    seconds : ndarray of shape (n_folds, n_members)
        Wall seconds of each fit (NaN where none ran).
    folds : list of int
        The folds whose every kept member was fitted: the ensemble's folds.
    kept : list of bool
        Per member: fitted on every fold of ``folds``.
    dropped : dict of str to str
        Member name -> why it was not fitted past the first fold.
    timed_out : bool
        Whether the time limit left folds or members out.
    """

    models: list[list]
    seconds: np.ndarray
    folds: list[int] = field(default_factory=list)
    kept: list[bool] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    timed_out: bool = False


@contextmanager
def kept_warnings(parent: int) -> Iterator[list]:
    """Keep the warnings raised inside, when the code runs in a process other than
    ``parent`` (a joblib worker, whose warnings would stay there): the list it yields
    then holds them, for the parent to :func:`reissue`. In ``parent`` (no joblib, or
    threads) the warnings go straight to the user, and the list stays empty."""
    kept: list = []
    if os.getpid() == parent:
        yield kept
        return
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield kept
    kept.extend((str(r.message), r.category, r.filename, r.lineno) for r in records)


def reissue(kept: list, registry: dict) -> None:
    """Raise again, in this process, the warnings :func:`kept_warnings` kept in a worker,
    at the place they were raised; ``registry`` shows each once, as Python's default
    filter does for warnings raised here."""
    for message, category, filename, lineno in kept:
        warnings.warn_explicit(message, category, filename, lineno, registry=registry)


def _timed_fit(
    estimator,
    X,
    y,
    fold,
    *,
    fit_params: dict,
    seed,
    budget: TimeBudget | None,
    parent: int,
    threads: int | None = None,
    stop_on_test: bool = True,
):
    """Fit one member on one ``(train, test)`` fold (:func:`fit_on_fold`, ``stop_on_test``
    as there), unless ``budget`` has no time left for it; ``(model, seconds, warnings kept
    in a worker)``.

    The budget is asked when the fit starts (:meth:`TimeBudget.started`), on the clock
    every worker process of this machine shares, so that a worker's start-up counts.
    ``threads`` (:func:`threads_per_fit`) bounds the fit's OpenMP pool (:func:`cores`), as
    joblib's process workers bound their own: gradient boosting's OpenMP threads would
    otherwise take every core in each of the parallel fits of a thread-based backend.
    A worker process of ``parent`` ends as soon as ``parent`` does
    (:mod:`nescal_sklearn._compat.orphans`).
    """
    exit_with_parent(parent)
    with kept_warnings(parent) as kept:
        if budget is not None:
            estimator = budget.started(estimator)
            if estimator is None:
                return None, np.nan, kept
        estimator, fit = fit_of(estimator)
        start = time.perf_counter()
        with cores(threads):
            model = fit_on_fold(
                estimator,
                X,
                y,
                *fold,
                fit_params=fit_params,
                seed=seed,
                fit=fit,
                stop_on_test=stop_on_test,
            )
    return model, time.perf_counter() - start, kept


def threads_per_fit(workers: int) -> int | None:
    """Each of ``workers`` parallel fits' share of the cores (joblib's rule for its
    process workers, ``cpu_count() // workers``); None (no bound) for one worker."""
    return None if workers <= 1 else max(1, cpu_count() // workers)


def cores(threads: int | None):
    """A block whose OpenMP pool runs ``threads`` threads (None: unchanged).

    OpenMP alone: its thread count is a setting of the calling thread, so parallel fits in
    threads of one process bound their own pools without racing. BLAS pools are
    process-wide; joblib's process workers bound them.
    """
    return nullcontext() if threads is None else threadpool_limits(threads, user_api="openmp")


class _Progress:
    """One line per finished fit on stdout: which, how long, and the time to go."""

    def __init__(self, names: Sequence[str], n_folds: int, verbose: int):
        self.names, self.n_folds, self.verbose = names, n_folds, verbose
        self.start = time.perf_counter()

    def say(self, message: str) -> None:
        if self.verbose:
            print(f"[CrossFitClassifier] {message}", file=sys.stdout, flush=True)

    def fitted(self, fold: int, member: int, seconds: float, done: int, left: float, total):
        if np.isnan(seconds):
            return
        elapsed = time.perf_counter() - self.start
        self.say(
            f"{self.names[member]} on fold {fold + 1}/{self.n_folds}: {seconds:.1f} s; "
            f"{done} of {total} fits, {elapsed:.0f} s elapsed, about {left:.0f} s to go"
        )


def fit_in_stages(
    members: Sequence,
    names: Sequence[str],
    X,
    y: np.ndarray,
    folds: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    fit_params: Sequence[dict],
    seeds: Sequence[int | None],
    n_jobs: int | None = None,
    budget: TimeBudget | None = None,
    screen: Callable[[list], np.ndarray] | None = None,
    verbose: int = 0,
    stop_on_test: bool = True,
) -> StagedFits:
    """Fit every member on every fold, the first fold first, within ``budget``.

    Parameters
    ----------
    members : sequence of estimators
        Unfitted; each is cloned once per fold.
    names : sequence of str
        The members' names (for messages).
    X : array-like of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    folds : sequence of (train, test) index arrays
    fit_params : sequence of dict
        Per member, further ``fit`` parameters (sliced to the fold's rows).
    seeds : sequence of int or None
        Per fold, the seed of every ``random_state`` of the fold's clones.
    n_jobs : int or None, default=None
        Parallel fits through joblib.
    budget : TimeBudget or None, default=None
        The deadline of these fits (:class:`~._budget.TimeBudget`). None: no limit.
    screen : callable or None, default=None
        Given the first fold's models (one per member), the members' weights on that
        fold's held-out rows; members of weight 0 are dropped. None keeps every member.
    verbose : int, default=0
        Print a line per finished fit (members, folds, elapsed and estimated time).
    stop_on_test : bool, default=True
        Members that early-stop do so on their fold's held-out rows; False: on rows of
        their training part (:func:`~nescal_sklearn.model_selection.fit_on_fold`).

    Returns
    -------
    StagedFits
    """
    n_folds, n_members = len(folds), len(members)
    result = StagedFits(
        [[None] * n_members for _ in range(n_folds)], np.full((n_folds, n_members), np.nan)
    )
    workers = max(1, min(effective_n_jobs(n_jobs), n_folds * n_members))
    timed = [stops_on_time(member) for member in members]
    progress = _Progress(names, n_folds, verbose)
    keep = [True] * n_members
    total = n_folds * n_members

    registry: dict = {}

    def run(jobs: list[tuple[int, int]], later: list[tuple[int, int]]) -> None:
        budgets = _plan([jobs, later], timed, result.seconds, budget, workers)
        tasks = (
            delayed(_timed_fit)(
                members[m],
                X,
                y,
                folds[f],
                fit_params=fit_params[m],
                seed=seeds[f],
                budget=b,
                parent=os.getpid(),
                threads=threads_per_fit(workers),
                stop_on_test=stop_on_test,
            )
            for (f, m), b in zip(jobs, budgets, strict=True)
        )
        results = Parallel(n_jobs=n_jobs, return_as="generator")(tasks)
        for (f, m), (model, took, kept) in zip(jobs, results, strict=True):
            reissue(kept, registry)
            result.models[f][m], result.seconds[f, m] = model, took
            done = int(np.sum(~np.isnan(result.seconds)))
            left = _time_to_go(result.seconds, keep, workers)
            progress.fitted(f, m, took, done, left, total)

    first = [(0, m) for m in range(n_members)]
    later = [(f, m) for f in range(1, n_folds) for m in range(n_members)]
    if budget is None and (screen is None or n_members == 1):  # one queue: no wait
        run(first + later, [])
    else:
        run(first, later)
        models = result.models[0]
        if screen is not None and n_members > 1 and all(model is not None for model in models):
            _drop(result, names, keep, np.asarray(screen(models), dtype=float), progress)
        total = n_members + (n_folds - 1) * sum(keep)
        run([(f, m) for f, m in later if keep[m]], [])
    result.kept = keep
    kept = _on(keep)
    result.folds = [f for f in range(n_folds) if all(result.models[f][m] is not None for m in kept)]
    result.timed_out = len(result.folds) < n_folds
    if result.timed_out:
        progress.say(
            f"time limit: {len(result.folds)} of {n_folds} folds finished; the others are left out"
        )
    return result


def _drop(result: StagedFits, names, keep: list[bool], weights: np.ndarray, progress) -> None:
    """Drop the members of weight 0 on the first fold (``keep``, ``result.dropped``)."""
    for m, weight in enumerate(weights):
        if weight <= 0:
            keep[m] = False
            result.dropped[names[m]] = (
                "weight 0 in the greedy selection on the first fold's held-out rows"
            )
    progress.say(
        "first fold's weights: "
        + ", ".join(f"{n} {w:.2f}" for n, w in zip(names, weights, strict=True))
        + ("; dropping " + ", ".join(result.dropped) if result.dropped else "")
    )


def _on(keep: Sequence[bool]) -> list[int]:
    return [m for m, kept in enumerate(keep) if kept]


def _plan(stages, timed, seconds, budget: TimeBudget | None, workers) -> list:
    """For each job of the first of ``stages``, its budget: the deadline of the timed
    fits, the rounds of timed fits from its own to the last, and whether the model needs
    it (the first fold; None without a budget).

    The timed fits end before the deadline less the untimed members' expected time
    (their mean fit so far, per fit still to run, spread over the workers); an untimed
    fit starts only if it is expected to end by the deadline. Timed fits
    run ``workers`` at a time, stage after stage: ``ceil(timed fits / workers)`` rounds
    in each stage.
    """
    jobs = stages[0]
    if budget is None:
        return [None] * len(jobs)
    mean = [
        float(np.nanmean(seconds[:, m])) if np.any(~np.isnan(seconds[:, m])) else None
        for m in range(seconds.shape[1])
    ]
    untimed = sum(mean[m] or 0.0 for stage in stages for _, m in stage if not timed[m])
    timed_deadline = budget.deadline - untimed / workers
    per_stage = [math.ceil(sum(timed[m] for _, m in stage) / workers) for stage in stages]
    budgets, position = [], 0
    for f, m in jobs:
        rounds = None
        if timed[m]:
            rounds = per_stage[0] - position // workers + sum(per_stage[1:])
            position += 1
        expected = None if timed[m] else mean[m]
        budgets.append(budget.planned(timed_deadline, rounds, needed=f == 0, expected=expected))
    return budgets


def _time_to_go(seconds: np.ndarray, keep: Sequence[bool], workers: int) -> float:
    """The fits still to run, each at its member's mean fit so far, over the workers."""
    left = 0.0
    for m in _on(keep):
        done = ~np.isnan(seconds[:, m])
        if np.any(done):
            left += np.mean(seconds[done, m]) * np.sum(~done)
    return left / workers
