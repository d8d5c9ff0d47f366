"""``nescal-bench calibrators``: the post-hoc calibrators of a run side by side.

Every stage of a run is a calibrator fitted on the same validation rows of the same
fitted model, so the stages compare on identical logits. Three tables, all on the
confirm seeds of the pooled results (:func:`~._compare.pool_results`):

* each calibrator against the uncalibrated model, **per fit** (method × dataset × seed):
  the median change in test NLL, how many fits it makes more than ``tolerance`` percent
  worse, and the worst fit — the "never hurts" check;
* each calibrator against a reference calibrator, per (method, dataset) on the seed
  means: lower on, median change, Wilcoxon p;
* the median change against the uncalibrated model per method and calibrator.

Nothing here imports torch.
"""

from __future__ import annotations

import numpy as np

from ._compare import CompareError, PooledResults
from ._conditions import CLEAN
from ._stats import relative_change, wilcoxon_p

__all__ = ["calibrators_markdown"]


def _per_fit(pooled: PooledResults, stage: str, metric: str):
    """``(method, dataset, seed, change vs raw %)`` for every fit with both stages."""
    out = []
    for (method, dataset), by_condition in sorted(pooled.values.items()):
        by_stage = by_condition.get(CLEAN, {})
        raw, calibrated = by_stage.get("raw", {}).get(metric), by_stage.get(stage, {}).get(metric)
        if not raw or not calibrated:
            continue
        seeds = pooled.fit_seeds.get((method, dataset), [])
        for i, change in enumerate(relative_change(calibrated, raw)):
            out.append((method, dataset, seeds[i] if i < len(seeds) else None, float(change)))
    return out


def _pairs(pooled: PooledResults, stage: str, reference: str, metric: str):
    """Seed means of ``stage`` and ``reference`` per (method, dataset) that has both."""
    ours, theirs = [], []
    for method in pooled.methods:
        a = pooled.means(method, CLEAN, stage, metric)
        b = pooled.means(method, CLEAN, reference, metric)
        for dataset in sorted(set(a) & set(b)):
            ours.append(a[dataset])
            theirs.append(b[dataset])
    return np.array(ours), np.array(theirs)


def calibrators_markdown(
    pooled: PooledResults,
    *,
    reference: str = "temperature",
    tolerance: float = 5.0,
    metric: str = "nll",
) -> str:
    """The calibrator tables as Markdown (lower ``metric`` is better).

    Parameters
    ----------
    pooled : PooledResults
        From :func:`~nescal_sklearn.benchmark.pool_results`.
    reference : str, default="temperature"
        The calibration stage the others are compared with (a calibrator's name or label).
    tolerance : float, default=5.0
        A fit counts as hurt when the calibrator makes its test ``metric`` more than this
        many percent worse than the uncalibrated model's.
    metric : str, default="nll"
        A test metric where lower is better (``"nll"``, ``"brier"``, ``"ece"``).

    Raises
    ------
    CompareError
        When the results have no calibrator, or not the reference stage.
    """
    calibrated = [s for s in pooled.stages if s != "raw"]
    if not calibrated:
        raise CompareError("the results have no calibrator stage; only 'raw'")
    if reference not in calibrated:
        raise CompareError(
            f"no calibration stage {reference!r} in the results; they have {calibrated}"
        )
    n_methods, n_datasets = len(pooled.methods), len(pooled.datasets)
    lines = [
        f"# Calibrators side by side, confirm seeds {pooled.seeds}, {n_datasets} datasets, "
        f"{n_methods} methods",
        "",
        "Every calibrator is fitted on the same validation rows of the same model. Test "
        f"{metric.upper()}; changes in percent, lower is better.",
        "",
        "## Against the uncalibrated model, per fit (method × dataset × seed)",
        "",
        f"| calibrator | fits | median change | fits > {tolerance:g} % worse | worst change "
        "| worst fit |",
        "|---|---|---|---|---|---|",
    ]
    for stage in calibrated:
        fits = _per_fit(pooled, stage, metric)
        if not fits:
            continue
        changes = np.array([f[3] for f in fits])
        worst = fits[int(np.argmax(changes))]
        seed = "?" if worst[2] is None else worst[2]
        lines.append(
            f"| {stage} | {len(fits)} | {np.median(changes):+.2f} % | "
            f"{int(np.sum(changes > tolerance))} | {changes.max():+.2f} % | "
            f"{worst[1]} / {worst[0]} / seed {seed} |"
        )
    lines += [
        "",
        f"## Against `{reference}`, per (method, dataset), seed means",
        "",
        f"| calibrator | lower {metric.upper()} on | median change | Wilcoxon p |",
        "|---|---|---|---|",
    ]
    for stage in ["raw", *calibrated]:
        if stage == reference:
            continue
        ours, theirs = _pairs(pooled, stage, reference, metric)
        if not len(ours):
            continue
        changes = relative_change(ours, theirs)
        lines.append(
            f"| {stage} | {int(np.sum(ours < theirs))}/{len(ours)} | "
            f"{np.median(changes):+.2f} % | {wilcoxon_p(changes):.3g} |"
        )
    lines += [
        "",
        "## Median change against the uncalibrated model, per method (over datasets)",
        "",
        "| method | " + " | ".join(calibrated) + " |",
        "|---" * (len(calibrated) + 1) + "|",
    ]
    for method in pooled.methods:
        raw = pooled.means(method, CLEAN, "raw", metric)
        cells = []
        for stage in calibrated:
            values = pooled.means(method, CLEAN, stage, metric)
            common = sorted(set(raw) & set(values))
            if not common:
                cells.append("–")
                continue
            change = relative_change([values[d] for d in common], [raw[d] for d in common])
            cells.append(f"{np.median(change):+.2f} %")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
