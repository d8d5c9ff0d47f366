"""The dry-run time estimate, from the measured fit times of existing records.

A dry run trains nothing, so the only honest source of a time is a record of a fit
that ran: its ``run.fit_seconds`` and ``run.calibration_seconds``, its training rows
(``data.n_train``) and epochs (``fit.n_epochs``). Each planned fit is estimated

1. by the mean time of the records of the same dataset and method, when there are any;
2. otherwise by its method's mean seconds per training row and epoch over the records
   of that method, times the planned training rows and the method's mean epochs;
3. otherwise not at all (the fit is counted as unestimated).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["Estimate", "estimate_seconds"]


@dataclass(frozen=True)
class Estimate:
    """Estimated seconds of fitting, and how many fits each rule estimated."""

    seconds: float
    by_pair: int
    by_method: int
    unestimated: int
    n_records: int


def _seconds(record: dict) -> float:
    run = record["run"]
    return float(run["fit_seconds"]) + float(run.get("calibration_seconds", 0.0))


def _epochs(record: dict) -> int:
    fit = record.get("fit", {})
    return int(fit.get("n_epochs") or fit.get("n_iter") or 1)


def estimate_seconds(
    fits: Iterable[tuple[str, str, float]], records: Iterable[dict]
) -> Estimate | None:
    """Estimate the seconds of ``fits`` from ``records`` (None without any record).

    Parameters
    ----------
    fits : iterable of (dataset, method, training rows)
        One entry per planned fit.
    records : iterable of dict
        Records of earlier fits (any configuration); only their dataset and method
        names, timings, training rows and epochs are used.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._estimate import estimate_seconds
    >>> records = [{"dataset": "a", "method": "ce", "data": {"n_train": 100},
    ...             "fit": {"n_epochs": 10}, "run": {"fit_seconds": 2.0,
    ...             "calibration_seconds": 0.0}}]
    >>> estimate = estimate_seconds([("a", "ce", 100), ("b", "ce", 300), ("a", "x", 5)],
    ...                             records)
    >>> estimate.seconds, estimate.by_pair, estimate.by_method, estimate.unestimated
    (8.0, 1, 1, 1)
    """
    records = list(records)
    if not records:
        return None
    pair_times: dict[tuple[str, str], list[float]] = defaultdict(list)
    rates: dict[str, list[float]] = defaultdict(list)
    epochs: dict[str, list[int]] = defaultdict(list)
    for record in records:
        pair_times[(record["dataset"], record["method"])].append(_seconds(record))
        n_train = max(int(record["data"]["n_train"]), 1)
        rates[record["method"]].append(_seconds(record) / (n_train * _epochs(record)))
        epochs[record["method"]].append(_epochs(record))
    total, by_pair, by_method, unestimated = 0.0, 0, 0, 0
    for dataset, method, n_train in fits:
        if (dataset, method) in pair_times:
            total += float(np.mean(pair_times[(dataset, method)]))
            by_pair += 1
        elif method in rates:
            total += float(np.mean(rates[method]) * n_train * np.mean(epochs[method]))
            by_method += 1
        else:
            unestimated += 1
    return Estimate(total, by_pair, by_method, unestimated, len(records))
