"""Fitting an ensemble's members fold by fold: the first fold first, within a time budget.

:func:`fit_in_stages` fits ``members x folds`` models through joblib in two stages:

1. **The first fold of every member.** A ``screen`` function (the ensemble's greedy
   selection on that fold's held-out rows) then gives each member a weight, and a member
   of weight 0 is dropped: it is never fitted on the other folds.
2. **The other folds of the members kept**, fold by fold.

With a ``time_limit``, every fit starts only before the deadline, and a member whose
``fit`` can stop on time (a ``max_time`` parameter, as :class:`NeSCalClassifier` has) gets
its share of the time left: the time left divided by the rounds of fits still to come on
the ``n_jobs`` workers. A member that cannot (scikit-learn's gradient boosting) is timed on
the first fold, and its later folds are counted against the time left. The folds whose
every kept member finished are the folds of the ensemble; the rest are dropped.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import clone

from ..model_selection import fit_on_fold

__all__ = ["StagedFits", "fit_in_stages"]

#: Share of the time limit the member fits may use; the rest is left for the out-of-fold
#: predictions, the weights and the choice of the map.
FIT_SHARE = 0.9


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
    screening_weights : ndarray or None
        The members' weights on the first fold's held-out rows (None without screening).
    timed_out : bool
        Whether the time limit left folds or members out.
    """

    models: list[list]
    seconds: np.ndarray
    folds: list[int] = field(default_factory=list)
    kept: list[bool] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    screening_weights: np.ndarray | None = None
    timed_out: bool = False


def _timed_fit(estimator, X, y, train, test, fit_params, seed, deadline, timed_deadline, rounds):
    """Fit one member on one fold, unless the deadline has passed; ``(model, seconds)``.

    A member with a ``max_time`` parameter gets the time to ``timed_deadline`` divided by
    ``rounds``, the rounds of such fits from this one's to the last (``time.time()``: the
    same clock in every worker process). Asked when the fit starts, the share takes up
    what earlier fits left or overran.
    """
    if deadline is not None:
        now = time.time()
        if now >= deadline:
            return None, np.nan
        if rounds is not None:
            share = max(min((timed_deadline - now) / rounds, deadline - now), 0.0)
            estimator = clone(estimator).set_params(max_time=share)
    start = time.perf_counter()
    model = fit_on_fold(estimator, X, y, train, test, fit_params=fit_params, seed=seed)
    return model, time.perf_counter() - start


def _stops_on_time(estimator) -> bool:
    return "max_time" in estimator.get_params(deep=False)


class _Progress:
    """One line per finished fit on stdout: which, how long, and the time to go."""

    def __init__(self, owner: str, names: Sequence[str], n_folds: int, verbose: int):
        self.owner, self.names, self.n_folds = owner, names, n_folds
        self.verbose = verbose
        self.start = time.perf_counter()

    def say(self, message: str) -> None:
        if self.verbose:
            print(f"[{self.owner}] {message}", file=sys.stdout, flush=True)

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
    time_limit: float | None = None,
    fit_share: float = FIT_SHARE,
    screen: Callable[[list], np.ndarray] | None = None,
    verbose: int = 0,
    owner: str = "CrossFitClassifier",
) -> StagedFits:
    """Fit every member on every fold, the first fold first, within ``time_limit``.

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
    time_limit : float or None, default=None
        Seconds for the caller's whole fit, from this call on. None: no limit.
    fit_share : float, default=:data:`FIT_SHARE`
        The share of ``time_limit`` these fits may take; the caller keeps the rest for
        what follows.
    screen : callable or None, default=None
        Given the first fold's models (one per member), the members' weights on that
        fold's held-out rows; members of weight 0 are dropped. None keeps every member.
    verbose : int, default=0
        Print a line per finished fit (members, folds, elapsed and estimated time).
    owner : str, default="CrossFitClassifier"
        The name the progress lines start with.

    Returns
    -------
    StagedFits
    """
    n_folds, n_members = len(folds), len(members)
    models: list[list] = [[None] * n_members for _ in range(n_folds)]
    seconds = np.full((n_folds, n_members), np.nan)
    start = time.time()
    deadline = None if time_limit is None else start + fit_share * time_limit
    workers = max(1, min(effective_n_jobs(n_jobs), n_folds * n_members))
    timed = [_stops_on_time(member) for member in members]
    progress = _Progress(owner, names, n_folds, verbose)
    total = n_folds * n_members

    def run(jobs: list[tuple[int, int]], later: list[tuple[int, int]]) -> None:
        timed_deadline, rounds = _plan([jobs, later], timed, seconds, deadline, workers)
        tasks = (
            delayed(_timed_fit)(
                members[m],
                X,
                y,
                *folds[f],
                fit_params[m],
                seeds[f],
                deadline,
                timed_deadline,
                rounds[i],
            )
            for i, (f, m) in enumerate(jobs)
        )
        results = Parallel(n_jobs=n_jobs, return_as="generator")(tasks)
        for (f, m), (model, took) in zip(jobs, results, strict=True):
            models[f][m], seconds[f, m] = model, took
            done = int(np.sum(~np.isnan(seconds)))
            progress.fitted(f, m, took, done, _time_to_go(seconds, keep, workers), total)

    keep = [True] * n_members
    later = [(f, m) for f in range(1, n_folds) for m in range(n_members)]
    run([(0, m) for m in range(n_members)], later)
    result = StagedFits(models, seconds)
    if screen is not None and n_members > 1 and all(model is not None for model in models[0]):
        result.screening_weights = np.asarray(screen(models[0]), dtype=float)
        for m, weight in enumerate(result.screening_weights):
            if weight <= 0:
                keep[m] = False
                result.dropped[names[m]] = (
                    "weight 0 in the greedy selection on the first fold's held-out rows"
                )
        progress.say(
            "first fold's weights: "
            + ", ".join(
                f"{n} {w:.2f}" for n, w in zip(names, result.screening_weights, strict=True)
            )
            + ("; dropping " + ", ".join(result.dropped) if result.dropped else "")
        )
    total = n_members + (n_folds - 1) * sum(keep)
    run([(f, m) for f, m in later if keep[m]], [])
    result.kept = keep
    result.folds = [f for f in range(n_folds) if all(models[f][m] is not None for m in _on(keep))]
    result.timed_out = len(result.folds) < n_folds
    if result.timed_out:
        progress.say(
            f"time limit: {len(result.folds)} of {n_folds} folds finished; the others are left out"
        )
    return result


def _on(keep: Sequence[bool]) -> list[int]:
    return [m for m, kept in enumerate(keep) if kept]


def _plan(stages, timed, seconds, deadline, workers) -> tuple[float | None, list]:
    """The deadline of the timed fits, and for each job of the first of ``stages`` the
    rounds of timed fits from its own to the last (None for an untimed job).

    The timed fits end before the deadline less the untimed members' expected time
    (their mean fit so far, per fit still to run, spread over the workers). Timed fits
    run ``workers`` at a time, stage after stage: ``ceil(timed fits / workers)`` rounds
    in each stage.
    """
    jobs = stages[0]
    if deadline is None:
        return None, [None] * len(jobs)
    untimed = sum(
        np.nanmean(seconds[:, m]) if np.any(~np.isnan(seconds[:, m])) else 0.0
        for stage in stages
        for _, m in stage
        if not timed[m]
    )
    per_stage = [math.ceil(sum(timed[m] for _, m in stage) / workers) for stage in stages]
    rounds, position = [], 0
    for _, m in jobs:
        if not timed[m]:
            rounds.append(None)
            continue
        rounds.append(per_stage[0] - position // workers + sum(per_stage[1:]))
        position += 1
    return deadline - untimed / workers, rounds


def _time_to_go(seconds: np.ndarray, keep: Sequence[bool], workers: int) -> float:
    """The fits still to run, each at its member's mean fit so far, over the workers."""
    left = 0.0
    for m in _on(keep):
        done = ~np.isnan(seconds[:, m])
        if np.any(done):
            left += np.mean(seconds[done, m]) * np.sum(~done)
    return left / workers
