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
  :data:`FIT_SHARE`); the rest is left for what follows them. No fit starts after its
  deadline. A member that can stop on time (a ``time_limit`` parameter, as
  ``NeSCalClassifier`` has) gets its share of the time left (:meth:`TimeBudget.share`),
  asked when its fit starts, as its ``time_limit``; a refit gets at least
  :data:`MIN_SHARE` seconds.
* **One clock.** ``time.monotonic``: it never jumps with the system's clock, and on one
  machine every process reads the same one, so a loky or local dask worker asks it
  when its fit starts. Workers on other machines do not share it: ``time_limit`` needs
  the member fits on the machine that calls ``fit``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from sklearn.base import clone

__all__ = [
    "CLOCK",
    "FIT_SHARE",
    "MIN_SHARE",
    "REFIT_FIT_SHARE",
    "TimeBudget",
    "stops_on_time",
]

#: The clock of every budget, in seconds.
CLOCK = time.monotonic

#: Share of the time limit by which the member fits end (the refits, with
#: ``refit=True``); the rest is left for the out-of-fold predictions, the weights and the
#: choice of the map.
FIT_SHARE = 0.9

#: With ``refit=True``, the share of the time limit by which the cross-fitting's member
#: fits end; the refits take what is left of :data:`FIT_SHARE`.
REFIT_FIT_SHARE = 0.65

#: Seconds: the least share of a refit that stops on time.
MIN_SHARE = 1e-3


def stops_on_time(estimator) -> bool:
    """Whether ``estimator`` can stop its own fit on time: it has a ``time_limit``
    parameter (as ``NeSCalClassifier`` has)."""
    return "time_limit" in estimator.get_params(deep=False)


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
    """

    deadline: float
    timed_deadline: float | None = None
    rounds: int | None = None

    @classmethod
    def of_fit(cls, start: float, time_limit: float | None, share: float) -> TimeBudget | None:
        """The budget of fits that end by ``share`` of ``time_limit`` after ``start``
        (read from :data:`CLOCK`); None without a limit."""
        return None if time_limit is None else cls(start + share * time_limit)

    def planned(self, timed_deadline: float, rounds: int | None) -> TimeBudget:
        """This budget for one fit, with the plan of its stage."""
        return replace(self, timed_deadline=timed_deadline, rounds=rounds)

    def share(self, now: float) -> float:
        """Seconds a fit that stops on time may take from ``now``: the time to
        ``timed_deadline`` divided by ``rounds``, at most the time to ``deadline``.
        Asked when the fit starts, it takes up what earlier fits left or overran."""
        timed = self.deadline if self.timed_deadline is None else self.timed_deadline
        return min((timed - now) / (self.rounds or 1), self.deadline - now)

    def started(self, estimator, *, refit: bool = False):
        """``estimator`` as it may start now, or None when no time is left for it.

        A member that stops on time is cloned with ``time_limit`` set to its
        :meth:`share` (at least :data:`MIN_SHARE` for a refit, which always starts). A
        member fit starts only before ``deadline``.
        """
        now = CLOCK()
        if not refit and now >= self.deadline:
            return None
        if not stops_on_time(estimator):
            return estimator
        share = max(self.share(now), MIN_SHARE if refit else 0.0)
        return clone(estimator).set_params(time_limit=share)
