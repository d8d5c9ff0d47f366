"""Aggregates of confirm-seed results: means, wins/ties/losses, Wilcoxon tests, average ranks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from scipy.stats import rankdata, wilcoxon

from ._config import BenchmarkConfig
from ._plan import make_task, select_point
from ._registry import METRICS

__all__ = [
    "average_ranks",
    "confirm_frame",
    "confirm_records",
    "mean_table",
    "selections",
    "wilcoxon_test",
    "wins_ties_losses",
]


def selections(config: BenchmarkConfig, records: dict[str, dict]) -> dict[tuple[str, str], tuple]:
    """``(dataset, method) -> (chosen point, [(point, mean validation NLL), ...])`` where known."""
    out = {}
    for dataset in config.datasets:
        for method in config.methods:
            choice = select_point(config, dataset, method, records)
            if choice is not None:
                out[(dataset.name, method.name)] = choice
    return out


def confirm_records(config: BenchmarkConfig, records: dict[str, dict]) -> dict:
    """The reported records: ``dataset -> method -> [record per confirm seed]``, at the
    chosen grid point (pairs whose search is incomplete are left out)."""
    chosen = selections(config, records)
    out: dict = {}
    for dataset in config.datasets:
        for method in config.methods:
            if (dataset.name, method.name) not in chosen:
                continue
            point = chosen[(dataset.name, method.name)][0]
            keys = [
                make_task(config, dataset, method, point, seed, "confirm").key
                for seed in config.confirm_seeds
            ]
            found = [records[key] for key in keys if key in records]
            if found:
                out.setdefault(dataset.name, {})[method.name] = found
    return out


def confirm_frame(reported: dict) -> pd.DataFrame:
    """Long table of the reported results (from :func:`confirm_records`).

    Columns: dataset, method, stage (``"raw"`` or a calibrator), metric, seed, value.
    """
    rows = [
        (dataset, method, stage, metric, record["seed"], value)
        for dataset, by_method in reported.items()
        for method, found in by_method.items()
        for record in found
        for stage, metrics in record["test"].items()
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


def _paired(means: pd.DataFrame, method: str, other: str, stage: str, metric: str):
    """Per-dataset means of ``method`` and ``other`` on the datasets both have."""
    sub = means.xs((stage, metric), level=("stage", "metric"))["mean"].unstack("method")
    if method not in sub or other not in sub:
        return np.array([]), np.array([])
    both = sub[[method, other]].dropna()
    return both[method].to_numpy(), both[other].to_numpy()


def wins_ties_losses(
    means: pd.DataFrame, method: str, other: str, stage: str, metric: str, tolerance: float
) -> tuple[int, int, int]:
    """Datasets where ``method`` beats, ties or loses to ``other`` (mean over seeds).

    A tie is a difference of at most ``tolerance`` times ``|other|`` (relative).

    Examples
    --------
    >>> import pandas as pd
    >>> from nescal_sklearn.benchmark._stats import mean_table, wins_ties_losses
    >>> frame = pd.DataFrame({
    ...     "dataset": ["a", "a", "b", "b", "c", "c"], "method": ["x", "y"] * 3,
    ...     "stage": "raw", "metric": "nll", "seed": 0, "value": [1.0, 2.0, 3.0, 3.01, 5.0, 4.0],
    ... })
    >>> wins_ties_losses(mean_table(frame), "x", "y", "raw", "nll", tolerance=0.01)
    (1, 1, 1)
    """
    a, b = _paired(means, method, other, stage, metric)
    sign = -1.0 if METRICS[metric].greater_is_better else 1.0
    diff = sign * (a - b)
    tie = np.abs(a - b) <= tolerance * np.abs(b)
    return int(np.sum(~tie & (diff < 0))), int(np.sum(tie)), int(np.sum(~tie & (diff > 0)))


def wilcoxon_test(
    means: pd.DataFrame, method: str, other: str, stage: str, metric: str
) -> tuple[int, float]:
    """Two-sided Wilcoxon signed-rank test across datasets; returns (n datasets, p-value).

    The p-value is NaN with fewer than 2 paired datasets or when all differences are 0.
    """
    a, b = _paired(means, method, other, stage, metric)
    if len(a) < 2 or np.all(a == b):
        return len(a), math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return len(a), float(wilcoxon(a, b).pvalue)


def average_ranks(
    means: pd.DataFrame, stage: str, metric: str, methods: list[str]
) -> tuple[dict[str, float], int]:
    """Mean rank (1 = best, ties averaged) of each method over the datasets all of them have.

    Returns the ranks and the number of datasets ranked.
    """
    sub = means.xs((stage, metric), level=("stage", "metric"))["mean"].unstack("method")
    present = [m for m in methods if m in sub]
    sub = sub[present].dropna()
    if sub.empty:
        return {m: math.nan for m in methods}, 0
    values = sub.to_numpy()
    if METRICS[metric].greater_is_better:
        values = -values
    ranks = np.vstack([rankdata(row) for row in values]).mean(axis=0)
    out = dict(zip(present, ranks.tolist(), strict=True))
    return {m: out.get(m, math.nan) for m in methods}, len(sub)
