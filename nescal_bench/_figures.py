"""The lab's figures (matplotlib, imported lazily), as PNG bytes (the caller writes them
atomically): reliability diagrams of a dataset pooled over the confirm seeds, and the
per-dataset change dot plot of ``compare``."""

from __future__ import annotations

import io

import numpy as np

from nescal_sklearn.metrics import ReliabilityCurve

#: Panels per row of a reliability figure.
MAX_COLUMNS = 4


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi, bbox_inches="tight")
    return buffer.getvalue()


def pool_reliability(bins: list[dict]) -> tuple[ReliabilityCurve, float]:
    """Pool the top-label bins of several records (same equal-width edges) into one curve.

    Returns the pooled :class:`~nescal_sklearn.metrics.ReliabilityCurve` and its ECE
    (the count-weighted mean gap of its non-empty bins, as
    :func:`~nescal_sklearn.metrics.expected_calibration_error` computes it from the
    predictions; ``nescal_sklearn.metrics`` has no public ECE of a curve, so it is
    computed here, and only here, from the pooled bins).

    Examples
    --------
    >>> from nescal_bench import pool_reliability
    >>> a = {"counts": [1, 0], "confidence": [0.4, None], "accuracy": [0.0, None]}
    >>> b = {"counts": [3, 2], "confidence": [0.2, 0.9], "accuracy": [1.0, 0.5]}
    >>> curve, ece = pool_reliability([a, b])
    >>> curve.counts.tolist(), curve.confidence.round(2).tolist(), curve.bin_edges.tolist()
    ([4.0, 2.0], [0.25, 0.9], [0.0, 0.5, 1.0])
    >>> round(ece, 4)  # (4 * |0.75 - 0.25| + 2 * |0.5 - 0.9|) / 6
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
    edges = np.linspace(0.0, 1.0, len(counts) + 1)
    return ReliabilityCurve(confidence, accuracy, counts, edges), ece


def reliability_figure(
    curves: dict[str, dict[str, list[dict]]], stages: list[str], title: str
) -> bytes:
    """Draw one panel per stage (raw, then each calibrator; 4 per row), one curve per method.

    Parameters
    ----------
    curves : dict
        ``method -> stage -> [record["reliability"][stage], ...]`` (confirm seeds).
    stages : list of str
        Panels, in order.
    title : str
        Figure title.
    """
    from matplotlib.figure import Figure

    from nescal_sklearn.plotting import ReliabilityDisplay

    ncols = min(len(stages), MAX_COLUMNS)
    nrows = -(-len(stages) // ncols)
    figure = Figure(figsize=(4.8 * ncols, 5.6 * nrows), dpi=90)
    figure.subplots_adjust(
        left=0.8 / (4.8 * ncols),
        right=0.98,
        bottom=0.5 / (5.6 * nrows),
        top=1 - 0.75 / (5.6 * nrows),
        wspace=0.25,
        hspace=0.3,
    )
    grid = figure.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in grid[len(stages) :]:
        ax.set_visible(False)
    axes = grid[: len(stages)]
    for ax, stage in zip(axes, stages, strict=True):
        for method, by_stage in curves.items():
            if not by_stage.get(stage):
                continue
            curve, ece = pool_reliability(by_stage[stage])
            ReliabilityDisplay(**vars(curve), ece=ece, estimator_name=method).plot(ax=ax)
        ax.set_title("raw" if stage == "raw" else f"after {stage}")
        if ax.get_legend() is not None:
            ax.legend(loc="best", fontsize="small")
    figure.suptitle(title)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()


def plot_changes(
    comparisons: dict,
    reference: str,
    *,
    axis_label: str,
    stage_label: str,
    greater_is_better: bool = False,
    limit: float = 25.0,
) -> bytes:
    """Dot plot of per-dataset relative changes of several methods against ``reference``.

    Parameters
    ----------
    comparisons : dict
        ``method -> PairedComparison`` (see :func:`~._stats.paired_comparison`); datasets
        are ordered by the first method's change.
    reference : str
        Name of the reference, for the axis label.
    axis_label : str
        What changes, e.g. ``"test NLL"``.
    stage_label : str
        At which stage, e.g. ``"after temperature scaling"``.
    greater_is_better : bool, default=False
        Direction of the metric (the legend counts "higher" instead of "lower").
    limit : float, default=25.0
        Changes beyond ``limit`` % are drawn at the edge as arrows.
    """
    from matplotlib.figure import Figure

    methods = list(comparisons)
    per_method = {
        m: (dict(zip(c.datasets, c.changes, strict=True)), c.p_value)
        for m, c in comparisons.items()
    }
    first = per_method[methods[0]][0]
    order = sorted(first, key=lambda d: first[d])
    fig = Figure(figsize=(7.5, 0.32 * len(order) + 1.6), dpi=120)
    ax = fig.subplots()
    offsets = np.linspace(-0.25, 0.25, len(methods)) if len(methods) > 1 else [0.0]
    word = "higher" if greater_is_better else "lower"
    for offset, method in zip(offsets, methods, strict=True):
        changes, p = per_method[method]
        ys = [i + offset for i, d in enumerate(order) if d in changes]
        xs = np.array([changes[d] for d in order if d in changes])
        clipped = np.clip(xs, -limit, limit)
        inside = np.abs(xs) <= limit
        better = int(np.sum(xs > 0)) if greater_is_better else int(np.sum(xs < 0))
        label = f"{method}: {better}/{len(xs)} {word}, median {np.median(xs):+.2f} %, p = {p:.2g}"
        points = ax.scatter(clipped[inside], np.asarray(ys)[inside], s=22, label=label)
        for x, y, raw in zip(clipped[~inside], np.asarray(ys)[~inside], xs[~inside], strict=True):
            ax.scatter(
                [x], [y], marker=">" if raw > 0 else "<", s=40, color=points.get_facecolor()[0]
            )
    bar = 2.0 if greater_is_better else -2.0
    ax.axvline(0.0, color="black", linewidth=0.8)
    sign = "+" if bar > 0 else "−"
    ax.axvline(
        bar, color="grey", linewidth=0.8, linestyle="--", label=f"the bar's median ({sign}2 %)"
    )
    ax.set_yticks(range(len(order)), order)
    ax.set_xlim(-limit * 1.05, limit * 1.05)
    ax.set_xlabel(f"change in {axis_label} vs {reference}, {stage_label} (%; {word} is better)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(order)), fontsize=8)
    fig.tight_layout()
    return _png(fig)
