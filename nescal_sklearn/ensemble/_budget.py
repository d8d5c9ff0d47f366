"""The time budget of one ``CrossFitClassifier.fit``: one clock, read once, one owner.

``CrossFitClassifier.fit`` reads :data:`CLOCK` on its first line and turns its
``time_limit`` into a :class:`TimeBudget`, a frozen deadline on that clock; every later
step reads the budget it is handed, never the limit. Its rules:

* **What counts.** Everything from the first line of ``fit`` on: the validation of the
  data, the hashing of duplicate rows, the start-up of joblib's workers (a loky worker
  imports torch on its first fit, seconds of a cold process), the member fits, the
  out-of-fold predictions, the weights, the map and the refits.
* **The shares.** The member fits of the cross-fitting end by :data:`FIT_SHARE` of the
  limit (:data:`REFIT_FIT_SHARE` with ``refit=True``, whose refits end by
  :data:`FIT_SHARE`); the rest is left for what follows them. No member fit of the
  cross-fitting starts after its deadline. A member that can stop on time (a
  ``time_limit`` parameter, as ``NeSCalClassifier`` has; scikit-learn's gradient
  boosting, trained in rounds of trees, :class:`OnTime`) gets the smaller of its own
  ``time_limit`` and its share of the time left (:meth:`TimeBudget.share`), asked when
  its fit starts; one that cannot stop starts only if its mean fit so far lets it end
  by the deadline.
* **A share too small** (under :data:`MIN_SHARE` seconds: the time of the fits that
  stop on time has run out, as when members that cannot stop took longer than
  planned, or the workers took long to start) does not start a fit: it counts as timed
  out, like a fit after the deadline, and the model is made of the folds that
  finished. The fits the model needs are the exception: every member's first fold and
  every refit start whatever the time, with at least :data:`MIN_SHARE` (one epoch of a
  network), so that ``fit`` never fails for lack of time; a limit too short for them
  is overrun by them.
* **One clock.** ``time.time``, the wall clock: every process reads the same one, on
  this machine and on any other whose clock is synchronised (NTP), so a loky worker or
  a dask worker, local or remote, asks it when its fit starts. (A monotonic clock
  would not jump with a change of the system's time, but its zero differs between
  machines, so a deadline read on another machine's would be silently wrong.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier

__all__ = [
    "CLOCK",
    "FIT_SHARE",
    "FIRST_TREES",
    "MIN_SHARE",
    "OnTime",
    "REFIT_FIT_SHARE",
    "TimeBudget",
    "fit_of",
    "stops_on_time",
]

#: The clock of every budget, in seconds.
CLOCK = time.time

#: Share of the time limit by which the member fits end (the refits, with
#: ``refit=True``); the rest is left for the out-of-fold predictions, the weights and the
#: choice of the map.
FIT_SHARE = 0.9

#: With ``refit=True``, the share of the time limit by which the cross-fitting's member
#: fits end; the refits take what is left of :data:`FIT_SHARE`.
REFIT_FIT_SHARE = 0.65

#: Seconds: a member fit whose share of the time is smaller is not started (a refit
#: gets this much at least).
MIN_SHARE = 1e-3


#: Trees of the first ``warm_start`` round of :class:`OnTime`: they time the rest. One:
#: a round of fashion-mnist's (784 columns, 10 classes) 10 trees took 25-33 s.
FIRST_TREES = 1


def stops_on_time(estimator) -> bool:
    """Whether ``estimator`` can stop its own fit on time: it has a ``time_limit``
    parameter (as ``NeSCalClassifier`` has), or it is scikit-learn's gradient boosting,
    which :class:`OnTime` fits in rounds of trees."""
    return "time_limit" in estimator.get_params(deep=False) or isinstance(
        estimator, HistGradientBoostingClassifier
    )


@dataclass(frozen=True)
class OnTime:
    """A gradient boosting fit that adds no tree after ``seconds``: what
    :meth:`TimeBudget.started` gives for a ``HistGradientBoostingClassifier``.

    :meth:`fit` trains the boosting with ``warm_start`` in rounds: :data:`FIRST_TREES`
    trees, then each round as many more as the time left allows at the pace of the trees
    so far (a round re-bins the rows, which that pace includes) but at most as many as
    there are (the rounds double, so that their re-binning stays a few rounds' cost),
    until ``max_iter`` trees, early stopping, or the time is out. Given the time, the
    rounds grow the trees of one ``fit``: the same splits and the same random numbers (the boosting keeps its seed
    and its feature-sampling generator between rounds), and early stopping by
    scikit-learn's rule on the scores of every tree so far, so that a round never
    continues past the tree at which one ``fit`` would have stopped.
    """

    estimator: HistGradientBoostingClassifier
    seconds: float

    def fit(self, estimator, X, y, **kwargs):
        """``estimator`` (unfitted, a clone of :attr:`estimator`) fitted on ``X, y``."""
        start = CLOCK()
        deadline = start + self.seconds
        trees, warm_start = estimator.max_iter, estimator.warm_start
        estimator.set_params(warm_start=True, max_iter=min(FIRST_TREES, trees))
        estimator.fit(X, y, **kwargs)
        while estimator.n_iter_ == estimator.max_iter < trees and not _stopped(estimator):
            now = CLOCK()
            pace = (now - start) / estimator.n_iter_
            more = min(int((deadline - now) / pace), estimator.n_iter_)
            if more < 1:
                break
            estimator.set_params(max_iter=min(trees, estimator.n_iter_ + more))
            estimator.fit(X, y, **kwargs)
        return estimator.set_params(warm_start=warm_start, max_iter=trees)


def fit_of(started) -> tuple:
    """What :meth:`TimeBudget.started` gave, as ``(estimator, fit)``: ``fit(estimator,
    X, y, **kwargs)`` fits it (:meth:`OnTime.fit` for gradient boosting, else its own
    ``fit``)."""
    if isinstance(started, OnTime):
        return started.estimator, started.fit
    return started, type(started).fit


def _stopped(boosting) -> bool:
    """Whether early stopping ends ``boosting`` at its last tree: scikit-learn's rule
    (``BaseHistGradientBoosting._should_stop``), none of the last ``n_iter_no_change``
    scores better than the one before them by ``tol``."""
    if not boosting.do_early_stopping_:
        return False
    scores = boosting.validation_score_  # empty when it early-stops on the training loss
    scores = scores if len(scores) else boosting.train_score_
    reference = boosting.n_iter_no_change + 1
    if len(scores) < reference:
        return False
    return not any(score > scores[-reference] + boosting.tol for score in scores[1 - reference :])


@dataclass(frozen=True)
class TimeBudget:
    """A deadline on :data:`CLOCK` for a stage of member fits, and how it is shared.

    Attributes
    ----------
    deadline : float
        No fit starts at or after it.
    timed_deadline : float or None
        The fits that stop on time end by it: ``deadline`` less the expected time of the
        members that cannot stop (None: ``deadline``).
    rounds : int or None
        The rounds of fits that stop on time, from this fit's to the last, on the
        workers (None: one).
    needed : bool
        Whether the model needs the fit (a member's first fold, a refit): it starts
        whatever the time.
    expected : float or None
        The seconds a fit that cannot stop is expected to take (its member's mean fit
        so far): it starts only if it is expected to end by ``deadline`` (None: it
        starts before ``deadline``).
    """

    deadline: float
    timed_deadline: float | None = None
    rounds: int | None = None
    needed: bool = False
    expected: float | None = None

    @classmethod
    def of_fit(
        cls, start: float, time_limit: float | None, share: float, *, needed: bool = False
    ) -> TimeBudget | None:
        """The budget of fits that end by ``share`` of ``time_limit`` after ``start``
        (read from :data:`CLOCK`); None without a limit."""
        if time_limit is None:
            return None
        return cls(start + share * time_limit, needed=needed)

    def planned(
        self,
        timed_deadline: float,
        rounds: int | None,
        *,
        needed: bool,
        expected: float | None = None,
    ) -> TimeBudget:
        """This budget for one fit, with the plan of its stage."""
        return replace(
            self, timed_deadline=timed_deadline, rounds=rounds, needed=needed, expected=expected
        )

    def share(self, now: float) -> float:
        """Seconds a fit that stops on time may take from ``now``: the time to
        ``timed_deadline`` divided by ``rounds``, at most the time to ``deadline``.
        Asked when the fit starts, it takes up what earlier fits left or overran."""
        timed = self.deadline if self.timed_deadline is None else self.timed_deadline
        return min((timed - now) / (self.rounds or 1), self.deadline - now)

    def started(self, estimator):
        """``estimator`` as it may start now, or None when no time is left for it.

        A member that stops on time is cloned with ``time_limit`` set to the smaller of
        its own and its :meth:`share`; a share under :data:`MIN_SHARE` starts no fit. A
        member that cannot stop starts only if it is ``expected`` to end by ``deadline``
        (before it, when nothing is expected). A fit the model ``needed`` always starts,
        with a share of at least :data:`MIN_SHARE`.
        """
        now = CLOCK()
        if not self.needed and now >= self.deadline:
            return None
        if not stops_on_time(estimator):
            late = self.expected is not None and now + self.expected > self.deadline
            return None if late and not self.needed else estimator
        share = self.share(now)
        if share < MIN_SHARE:
            if not self.needed:
                return None
            share = MIN_SHARE
        if isinstance(estimator, HistGradientBoostingClassifier):
            return OnTime(estimator, share)
        own = estimator.get_params(deep=False)["time_limit"]
        return clone(estimator).set_params(time_limit=share if own is None else min(own, share))
