"""The comparison statistics of the benchmark, written once: paired changes, wins/ties/losses,
Wilcoxon signed-rank tests, the better of several references; and the per-dataset tables
of confirm-seed results that the report ranks."""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import rankdata, wilcoxon

from ._conditions import CLEAN

__all__ = [
    "PairedComparison",
    "average_ranks",
    "confirm_frame",
    "mean_ranks",
    "mean_table",
    "paired_comparison",
    "paired_means",
    "relative_change",
    "wilcoxon_p",
    "wins_ties_losses",
]


def wilcoxon_p(differences) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired ``differences`` (scipy, zero
    differences dropped); NaN with fewer than 2 of them or when all are 0.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._stats import wilcoxon_p
    >>> wilcoxon_p([-20.0, -10.0, 5.0])  # ranks 3, 2 negative, 1 positive: P(W <= 1) = 2/8
    0.5
    """
    differences = np.asarray(differences, dtype=float)
    if len(differences) < 2 or not np.any(differences != 0):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(wilcoxon(differences).pvalue)


def relative_change(values, reference) -> np.ndarray:
    """``100 * (values - reference) / reference``: the change in percent of the reference.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._stats import relative_change
    >>> relative_change([0.9, 1.2], [1.0, 1.0]).round(6).tolist()
    [-10.0, 20.0]
    """
    values, reference = np.asarray(values, dtype=float), np.asarray(reference, dtype=float)
    return 100.0 * (values - reference) / reference


def wins_ties_losses(
    values, reference, *, greater_is_better: bool, tolerance: float
) -> tuple[int, int, int]:
    """Pairs where ``values`` beat, tie with or lose to ``reference``.

    A tie is a difference of at most ``tolerance`` times ``|reference|`` (relative).

    Examples
    --------
    >>> from nescal_sklearn.benchmark._stats import wins_ties_losses
    >>> wins_ties_losses([1.0, 3.0, 5.0], [2.0, 3.01, 4.0], greater_is_better=False,
    ...                  tolerance=0.01)
    (1, 1, 1)
    """
    a, b = np.asarray(values, dtype=float), np.asarray(reference, dtype=float)
    diff = (-1.0 if greater_is_better else 1.0) * (a - b)
    tie = np.abs(a - b) <= tolerance * np.abs(b)
    return int(np.sum(~tie & (diff < 0))), int(np.sum(tie)), int(np.sum(~tie & (diff > 0)))


@dataclass(frozen=True)
class PairedComparison:
    """A method against a reference (or the per-dataset better of several) across datasets.

    Attributes
    ----------
    datasets : list of str
        The datasets the method and every reference have (sorted).
    references : list of str
        The reference used on each dataset (the better one, with several).
    changes : ndarray
        Relative change of the method against that reference, in percent.
    n_better : int
        Datasets where the method is strictly better.
    median_change : float
        Median of ``changes``.
    p_value : float
        Two-sided Wilcoxon signed-rank p-value of ``changes`` (NaN: see :func:`wilcoxon_p`).
    accuracy_change : float or None
        Median accuracy difference (fraction) against the same references, when given.
    """

    datasets: list[str]
    references: list[str]
    changes: np.ndarray
    n_better: int
    median_change: float
    p_value: float
    accuracy_change: float | None


def paired_comparison(
    method: Mapping[str, float],
    references: Mapping[str, Mapping[str, float]],
    *,
    greater_is_better: bool,
    accuracy: tuple[Mapping[str, float], Mapping[str, Mapping[str, float]]] | None = None,
) -> PairedComparison | None:
    """Compare per-dataset values of a method with one or several references.

    With several references, each dataset uses the best of them on that dataset: a
    hindsight choice, which favours the reference (ties go to the first given).

    Parameters
    ----------
    method : mapping
        ``dataset -> value`` of the method (a mean over seeds).
    references : mapping
        ``reference name -> dataset -> value``.
    greater_is_better : bool
        Direction of the metric.
    accuracy : (mapping, mapping) or None, default=None
        The method's and the references' ``dataset -> accuracy``, for the median
        accuracy change against the reference chosen on each dataset.

    Returns
    -------
    PairedComparison or None
        None when no dataset has the method and every reference.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._stats import paired_comparison
    >>> c = paired_comparison({"x": 0.9, "y": 0.5},
    ...                       {"ce": {"x": 1.0, "y": 1.0}, "ls": {"x": 0.8, "y": 2.0}},
    ...                       greater_is_better=False)
    >>> c.references, c.changes.round(6).tolist(), c.n_better
    (['ls', 'ce'], [12.5, -50.0], 1)
    """
    names = list(references)
    datasets = sorted(d for d in method if all(d in references[r] for r in names))
    if not datasets:
        return None
    sign = -1.0 if greater_is_better else 1.0
    chosen = [min(names, key=lambda r, d=d: sign * references[r][d]) for d in datasets]
    ours = np.array([method[d] for d in datasets], dtype=float)
    theirs = np.array([references[r][d] for r, d in zip(chosen, datasets, strict=True)])
    changes = relative_change(ours, theirs)
    better = ours > theirs if greater_is_better else ours < theirs
    accuracy_change = None
    if accuracy is not None:
        ours_acc, theirs_acc = accuracy
        accuracy_change = float(
            np.median(
                [ours_acc[d] - theirs_acc[r][d] for r, d in zip(chosen, datasets, strict=True)]
            )
        )
    return PairedComparison(
        datasets=datasets,
        references=chosen,
        changes=changes,
        n_better=int(np.sum(better)),
        median_change=float(np.median(changes)),
        p_value=wilcoxon_p(changes),
        accuracy_change=accuracy_change,
    )


def mean_ranks(
    values: Mapping[str, Mapping[Hashable, float]], *, greater_is_better: bool
) -> tuple[dict[str, float], int]:
    """Average rank (1 = best, ties averaged) of each method over the units every method
    has: datasets, or (dataset, condition) pairs when settings are pooled.

    Parameters
    ----------
    values : mapping
        ``method -> unit -> value``.
    greater_is_better : bool
        Direction of the metric.

    Returns
    -------
    ranks : dict
        ``method -> mean rank`` (NaN for every method when no unit has them all).
    n_units : int
        The units ranked.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._stats import mean_ranks
    >>> mean_ranks({"a": {"x": 1.0, "y": 2.0}, "b": {"x": 2.0, "y": 2.0, "z": 0.0}},
    ...            greater_is_better=False)
    ({'a': 1.25, 'b': 1.75}, 2)
    """
    methods = list(values)
    units = [u for u in next(iter(values.values()), {}) if all(u in values[m] for m in methods)]
    if not units:
        return {m: math.nan for m in methods}, 0
    table = np.array([[values[m][u] for m in methods] for u in units], dtype=float)
    if greater_is_better:
        table = -table
    ranks = np.vstack([rankdata(row) for row in table]).mean(axis=0)
    return dict(zip(methods, ranks.tolist(), strict=True)), len(units)


# --------------------------------------------------------------------------- report tables
def confirm_frame(reported: dict, condition: str = CLEAN) -> pd.DataFrame:
    """Long table of reported results (``dataset -> method -> [records]``) under ``condition``.

    Columns: dataset, method, stage (``"raw"`` or a calibrator), metric, seed, value.
    ``condition`` is :data:`CLEAN` (the test rows) or an evaluation condition's name.
    """

    def measured(record):
        return record["test"] if condition == CLEAN else record["conditions"].get(condition, {})

    rows = [
        (dataset, method, stage, metric, record["seed"], value)
        for dataset, by_method in reported.items()
        for method, found in by_method.items()
        for record in found
        for stage, metrics in measured(record).items()
        for metric, value in metrics.items()
    ]
    columns = ["dataset", "method", "stage", "metric", "seed", "value"]
    return pd.DataFrame(rows, columns=columns)


def mean_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation (ddof=1; 0 for one seed) and count over the confirm seeds.

    Indexed by (dataset, method, stage, metric).
    """
    grouped = frame.groupby(["dataset", "method", "stage", "metric"], sort=False)["value"]
    out = grouped.agg(mean="mean", std="std", n="count")
    out["std"] = out["std"].fillna(0.0)
    return out


def _stage_means(means: pd.DataFrame, stage: str, metric: str) -> pd.DataFrame | None:
    """Per-dataset means by method at ``stage`` (None when no fit has that stage: a
    calibrator that failed on every fit)."""
    try:
        sub = means.xs((stage, metric), level=("stage", "metric"))
    except KeyError:
        return None
    return sub["mean"].unstack("method")


def paired_means(means: pd.DataFrame, method: str, other: str, stage: str, metric: str):
    """Per-dataset means of ``method`` and ``other`` on the datasets both have."""
    sub = _stage_means(means, stage, metric)
    if sub is None or method not in sub or other not in sub:
        return np.array([]), np.array([])
    both = sub[[method, other]].dropna()
    return both[method].to_numpy(), both[other].to_numpy()


def average_ranks(
    means: pd.DataFrame, stage: str, metric: str, methods: Sequence[str], greater_is_better: bool
) -> tuple[dict[str, float], int]:
    """Mean rank (1 = best, ties averaged) of each method over the datasets all of them have.

    Returns the ranks and the number of datasets ranked.
    """
    sub = _stage_means(means, stage, metric)
    present = [] if sub is None else [m for m in methods if m in sub]
    sub = None if sub is None else sub[present].dropna()
    if sub is None or sub.empty:
        return {m: math.nan for m in methods}, 0
    values = sub.to_numpy()
    if greater_is_better:
        values = -values
    ranks = np.vstack([rankdata(row) for row in values]).mean(axis=0)
    out = dict(zip(present, ranks.tolist(), strict=True))
    return {m: out.get(m, math.nan) for m in methods}, len(sub)
