"""Reliability diagrams of a dataset, pooled over the confirm seeds (matplotlib, lazily)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ._registry import N_BINS

__all__ = ["pool_reliability", "reliability_figure"]

#: Panels per row of a reliability figure.
MAX_COLUMNS = 4


def pool_reliability(bins: list[dict]) -> dict:
    """Pool the top-label bins of several records (same equal-width edges) into one curve.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._figures import pool_reliability
    >>> a = {"counts": [1, 0], "confidence": [0.4, None], "accuracy": [0.0, None]}
    >>> b = {"counts": [3, 2], "confidence": [0.2, 0.9], "accuracy": [1.0, 0.5]}
    >>> pooled = pool_reliability([a, b])
    >>> pooled["counts"].tolist(), pooled["confidence"].round(2).tolist()
    ([4.0, 2.0], [0.25, 0.9])
    >>> round(pooled["ece"], 4)  # (4 * |0.75 - 0.25| + 2 * |0.5 - 0.9|) / 6
    0.4667
    """
    counts = np.zeros(len(bins[0]["counts"]))
    conf_sum = np.zeros_like(counts)
    acc_sum = np.zeros_like(counts)
    for item in bins:
        c = np.asarray(item["counts"], dtype=float)
        counts += c
        conf_sum += c * np.nan_to_num(np.array(item["confidence"], dtype=float))
        acc_sum += c * np.nan_to_num(np.array(item["accuracy"], dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = np.where(counts > 0, conf_sum / counts, np.nan)
        accuracy = np.where(counts > 0, acc_sum / counts, np.nan)
    nonempty = counts > 0
    ece = float(
        np.sum(counts[nonempty] * np.abs(accuracy[nonempty] - confidence[nonempty])) / counts.sum()
    )
    return {"counts": counts, "confidence": confidence, "accuracy": accuracy, "ece": ece}


def reliability_figure(
    curves: dict[str, dict[str, list[dict]]], stages: list[str], title: str, path: Path
) -> Path:
    """Draw one panel per stage (raw, then each calibrator; 4 per row), one curve per method.

    Parameters
    ----------
    curves : dict
        ``method -> stage -> [record["reliability"][stage], ...]`` (confirm seeds).
    stages : list of str
        Panels, in order.
    title : str
        Figure title.
    path : Path
        PNG file to write.
    """
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from ..plotting import ReliabilityDisplay

    ncols = min(len(stages), MAX_COLUMNS)
    nrows = -(-len(stages) // ncols)
    figure = Figure(figsize=(4.8 * ncols, 5.6 * nrows))
    figure.subplots_adjust(
        left=0.8 / (4.8 * ncols), right=0.98, bottom=0.5 / (5.6 * nrows),
        top=1 - 0.75 / (5.6 * nrows),
        wspace=0.25, hspace=0.3,
    )  # fmt: skip
    grid = figure.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in grid[len(stages) :]:
        ax.set_visible(False)
    axes = grid[: len(stages)]
    edges = np.linspace(0.0, 1.0, N_BINS + 1)
    for ax, stage in zip(axes, stages, strict=True):
        for method, by_stage in curves.items():
            if not by_stage.get(stage):
                continue
            pooled = pool_reliability(by_stage[stage])
            ReliabilityDisplay(
                confidence=pooled["confidence"],
                accuracy=pooled["accuracy"],
                counts=pooled["counts"],
                bin_edges=edges,
                ece=pooled["ece"],
                estimator_name=method,
            ).plot(ax=ax)
        ax.set_title("raw" if stage == "raw" else f"after {stage}")
        if ax.get_legend() is not None:
            ax.legend(loc="best", fontsize="small")
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    return path
