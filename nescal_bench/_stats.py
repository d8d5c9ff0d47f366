"""The comparison statistics of the lab, written once, on the tidy results frame: paired
changes, wins/ties/losses, Wilcoxon signed-rank tests, the better of several references,
and average ranks."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import wilcoxon


def wilcoxon_p(differences) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired ``differences`` (scipy, zero
    differences dropped); NaN with fewer than 2 of them or when all are 0.

    Examples
    --------
    >>> from nescal_bench import wilcoxon_p
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
    >>> from nescal_bench import relative_change
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
    >>> from nescal_bench import wins_ties_losses
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
    at_tolerance : (int, int, int)
        Datasets where it is better, tied and worse at the tie tolerance
        (:func:`wins_ties_losses`).
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
    at_tolerance: tuple[int, int, int]
    median_change: float
    p_value: float
    accuracy_change: float | None


def paired_comparison(
    method: Mapping[str, float],
    references: Mapping[str, Mapping[str, float]],
    *,
    greater_is_better: bool,
    accuracy: tuple[Mapping[str, float], Mapping[str, Mapping[str, float]]] | None = None,
    tolerance: float = 0.01,
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
    tolerance : float, default=0.01
        The relative tie tolerance of ``at_tolerance`` (the lab's 1 %).

    Returns
    -------
    PairedComparison or None
        None when no dataset has the method and every reference.

    Examples
    --------
    >>> from nescal_bench import paired_comparison
    >>> c = paired_comparison({"x": 0.9, "y": 0.5},
    ...                       {"ce": {"x": 1.0, "y": 1.0}, "ls": {"x": 0.8, "y": 2.0}},
    ...                       greater_is_better=False)
    >>> c.references, c.changes.round(6).tolist(), c.n_better
    (['ls', 'ce'], [12.5, -50.0], 1)
    """
    names = list(references)
    method = {d: v for d, v in method.items() if v == v}  # NaN: no value
    references = {r: {d: v for d, v in references[r].items() if v == v} for r in names}
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
        gaps = [ours_acc[d] - theirs_acc[r][d] for r, d in zip(chosen, datasets, strict=True)]
        accuracy_change = float(np.median(gaps))
    return PairedComparison(
        datasets=datasets,
        references=chosen,
        changes=changes,
        n_better=int(np.sum(better)),
        at_tolerance=wins_ties_losses(
            ours, theirs, greater_is_better=greater_is_better, tolerance=tolerance
        ),
        median_change=float(np.median(changes)),
        p_value=wilcoxon_p(changes),
        accuracy_change=accuracy_change,
    )


def unit_table(frame, conditions: Sequence[str], stage: str, metric: str, values: str = "value"):
    """Seed means (a ``DataFrame``: one row per unit, one column per method) of ``metric``
    at ``stage`` (or of the column ``values`` of its rows, such as ``fit_seconds``): the
    units are datasets (one condition) or ``"dataset, condition"`` pairs (several), every
    (method, unit) that has the value."""
    import pandas as pd

    rows = frame[
        frame["condition"].isin(conditions)
        & (frame["stage"] == stage)
        & (frame["metric"] == metric)
    ]
    if len(conditions) > 1:
        rows = rows.assign(dataset=rows["dataset"] + ", " + rows["condition"])
    if rows.empty:
        return pd.DataFrame()
    return rows.pivot_table(index="dataset", columns="method", values=values, aggfunc="mean")


def average_ranks(table, *, greater_is_better: bool) -> tuple[dict[str, float], int]:
    """Average rank (1 = best, ties averaged) of each method (a column of ``table``) over
    the units (rows) every present method has; NaN for a method without values.

    Examples
    --------
    >>> import pandas as pd
    >>> from nescal_bench import average_ranks
    >>> table = pd.DataFrame({"a": [1.0, 2.0, None], "b": [2.0, 2.0, 0.0]}, index=list("xyz"))
    >>> average_ranks(table, greater_is_better=False)
    ({'a': 1.25, 'b': 1.75}, 2)
    """
    present = table.dropna(axis=1, how="all").dropna()
    ranks = present.rank(axis=1, ascending=not greater_is_better).mean()
    return {m: float(ranks.get(m, math.nan)) for m in table.columns}, len(present)
