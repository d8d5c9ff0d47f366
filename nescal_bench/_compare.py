"""Comparisons of methods and of calibrators across results folders, from the tidy results
frame (:func:`~._results.results_frame`), as Markdown (``DataFrame.to_markdown``):

* ``nescal-bench compare`` (:func:`compare_markdown`, :func:`plot_comparison`): every
  method against each reference and against the per-dataset better of several (a
  hindsight choice, which favours the reference), at every stage, under the clean test
  rows or evaluation conditions (several conditions pool into (dataset, condition) units);
* ``nescal-bench calibrators`` (:func:`calibrators_markdown`): the calibrators of a run
  side by side, per fit against the uncalibrated model and against a reference stage.

A page is a list of blocks, each Markdown text (a heading, a paragraph, an image) or a
``DataFrame`` of text cells (a table, :func:`table`); :func:`render` joins them. Nothing
here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._conditions import CLEAN
from ._records import write_atomic
from ._registry import METRICS
from ._stats import average_ranks, paired_comparison, relative_change, unit_table

#: How a stage is written in the tables (``ts``: after temperature scaling), and in titles.
STAGE_LABELS = {"temperature": "ts"}
STAGE_TITLES = {"temperature": "temperature scaling"}
#: The numeric run columns of the results frame that ``compare --ratio`` takes ratios of.
RATIO_COLUMNS = ("fit_seconds", "predict_seconds", "model_bytes", "cache_seconds", "network_weight")


class CompareError(ValueError):
    """A comparison that cannot be made (an unknown condition, metric, method or stage)."""


def table(columns: Sequence[str], rows: Sequence[Sequence]):
    """A ``DataFrame`` of text cells: a table block."""
    import pandas as pd

    return pd.DataFrame([[str(c) for c in row] for row in rows], columns=list(columns))


def render(blocks: list) -> str:
    """The Markdown page of ``blocks`` (Markdown text, or a ``DataFrame``: a table)."""
    return (
        "\n\n".join(
            b if isinstance(b, str) else b.to_markdown(index=False, disable_numparse=True)
            for b in blocks
        )
        + "\n"
    )


def subset(frame, methods: Sequence[str] | None = None, stages: Sequence[str] | None = None):
    """The rows of ``frame`` of ``methods`` and ``stages`` (None: all); CompareError for a
    name the results lack."""
    for what, asked, column in (("method", methods, "method"), ("stage", stages, "stage")):
        have = list(dict.fromkeys(frame[column])) if column == "method" else frame.attrs["stages"]
        for name in asked or ():
            if name not in have:
                raise CompareError(f"no {what} {name!r} in the results; they have {have}")
    out = frame[frame["method"].isin(methods if methods is not None else frame["method"])]
    if stages is not None:
        out = out[out["stage"].isin(stages)]
        out.attrs = {**frame.attrs, "stages": [s for s in frame.attrs["stages"] if s in stages]}
    return out


def _conditions(frame, condition: str | Sequence[str]) -> list[str]:
    """The condition names ``condition`` stands for: ``"clean"``, a condition, a family of
    severities (every one of them), or a list of these."""
    known = frame.attrs["conditions"]
    families: dict[str, list[str]] = {}
    for name, c in known.items():
        if hasattr(c, "family"):
            families.setdefault(c.family, []).append(name)
    names: list[str] = []
    for item in [condition] if isinstance(condition, str) else condition:
        found = [item] if item == CLEAN or item in known else families.get(item)
        if found is None:
            extra = f", families {list(families)}" if families else ""
            raise CompareError(
                f"no evaluation condition {item!r} in the results; they have {[CLEAN, *known]}{extra}"
            )
        names += [n for n in found if n not in names]
    return names


def _metric(frame, names: list[str], metric: str | None):
    """The metric compared under the conditions ``names`` (their default when None) and its
    :class:`~._registry.Metric`."""
    conditions = frame.attrs["conditions"]
    registries = [
        (METRICS, "nll") if n == CLEAN else (conditions[n].metrics, conditions[n].default_metric)
        for n in names
    ]
    registry, default = registries[0]
    if any(r is not registry for r, _ in registries):
        raise CompareError(
            f"the conditions {list(names)} record different metrics; pool shifted test rows "
            "or out-of-distribution sets, not both"
        )
    name = default if metric is None else metric
    if name not in registry:
        where = f"condition {names[0]!r}" if len(names) == 1 else f"conditions {list(names)}"
        raise CompareError(
            f"metric {name!r} is not recorded under {where}; expected one of {list(registry)}"
        )
    return name, registry[name]


def _comparison(frame, names, metric, info, method, refs, stage, with_accuracy, tolerance=0.01):
    values = unit_table(frame, names, stage, metric).reindex(columns=[method, *refs])
    accuracy = None
    if with_accuracy:
        acc = unit_table(frame, names, stage, "accuracy").reindex(columns=[method, *refs])
        accuracy = (acc[method].to_dict(), {r: acc[r].to_dict() for r in refs})
    return paired_comparison(
        values[method].to_dict(),
        {r: values[r].to_dict() for r in refs},
        greater_is_better=info.greater_is_better,
        accuracy=accuracy,
        tolerance=tolerance,
    )


def comparison_table(
    frame, names, metric, info, refs, methods, with_accuracy, tolerance=0.01, ratios=()
):
    """Every method but ``refs`` against (the per-unit better of) ``refs``, at every stage;
    ``tolerance`` and ``ratios`` as in :func:`compare_markdown`."""
    rows = []
    for method in (m for m in methods if m not in refs):
        for stage in frame.attrs["stages"]:
            args = (frame, names, metric, info, method, refs, stage, with_accuracy, tolerance)
            c = _comparison(*args)
            if c is None:
                continue
            accuracy = "–" if c.accuracy_change is None else f"{100 * c.accuracy_change:+.2f} pt"
            counts = [f"{c.n_better}/{len(c.datasets)}"]
            counts += [" / ".join(map(str, c.at_tolerance))] if tolerance else []
            label, change = STAGE_LABELS.get(stage, stage), _percent(c.median_change)
            row = [method, label, *counts, change, f"{c.p_value:.3g}", accuracy]
            for column in ratios:  # against each unit's reference
                runs = unit_table(frame, names, stage, metric, column)
                runs = runs.reindex(index=c.datasets, columns=[method, *refs])
                pairs = zip(c.datasets, c.references, strict=True)
                r = np.array([runs.at[d, method] / runs.at[d, ref] for d, ref in pairs])
                median, low, high, halved = np.median(r), r.min(), r.max(), np.sum(r <= 0.5)
                row.append(f"{median:.3g} ({low:.3g}–{high:.3g}), ≤ 0.5 on {halved}/{len(r)}")
            rows.append(row)
    word, other = ("higher", "lower") if info.greater_is_better else ("lower", "higher")
    columns = ["method", "stage", f"{word} {info.label} strictly on"]
    columns += [f"at {100 * tolerance:g} %: {word} / tied / {other}"] if tolerance else []
    columns += [f"median {info.label} change", "Wilcoxon p", "median accuracy change"]
    columns += [f"{column} ratio: median (range), ≤ 0.5 on" for column in ratios]
    return table(columns, rows)


def penalty_blocks(frame) -> list:
    """Per method and member of a cross-fitted method (``–``: the method's own network),
    the fits that dropped the member after the first fold, and its fitted models by
    ``penalty_status``."""
    import pandas as pd

    fits, rows = frame.drop_duplicates("key"), []
    for _, fit in fits.iterrows():
        method, dropped, members = fit["method"], fit["dropped"], fit["member_status"] or {}
        if isinstance(fit["penalty_status"], str):
            rows.append((method, "–", fit["penalty_status"], 1))
        rows += [(method, m, "dropped after fold 1", 1) for m in dropped or ()]
        rows += [(method, m, s, n) for m, found in members.items() for s, n in found.items()]
    if not rows:
        return []
    counts = pd.DataFrame(rows, columns=["method", "member", "what", "n"]).pivot_table(
        index=["method", "member"], columns="what", values="n", aggfunc="sum", fill_value=0
    )
    counts.insert(0, "fits", counts.index.get_level_values(0).map(fits["method"].value_counts()))
    return [
        "## Members and penalty status",
        "Per method, and per member of a cross-fitted method (`–`: its own network): its fits, "
        "those that dropped the member after the first fold, and the member's models by "
        "`penalty_status` (other than `penalised`: the penalty never trained the model).",
        table(["method", "member", *counts.columns], counts.reset_index().to_numpy()),
    ]


def compare_markdown(
    frame,
    *,
    references: Sequence[str] = ("ce", "label_smoothing"),
    best_of: Sequence[str] = ("ce", "label_smoothing"),
    condition: str | Sequence[str] = CLEAN,
    metric: str | None = None,
    tolerance: float = 0.01,
    ratios: Sequence[str] = (),
) -> str:
    """The comparison tables as Markdown.

    Parameters
    ----------
    frame : DataFrame
        From :func:`~._results.results_frame`.
    references : sequence of str, default=("ce", "label_smoothing")
        Methods every other is compared with (skipped when absent).
    best_of : sequence of str, default=("ce", "label_smoothing")
        Also compare with the per-dataset better of these (when at least two are present).
    condition : str or sequence of str, default="clean"
        The test rows (``"clean"``), an evaluation condition of the runs, a family of
        severities (``"noise"`` for ``noise@1`` ... ``noise@5``), or a list of these.
        Several conditions are pooled: the paired units are (dataset, condition) pairs,
        the per-dataset tables give the mean over the conditions, and a table of average
        ranks over the pairs is added.
    metric : str or None, default=None
        The compared metric; None: NLL, or the condition's own default (the entropy
        AUROC for an out-of-distribution condition).
    tolerance : float, default=0.01
        Beside the strict count, the units where the method is better, tied and worse at
        this relative tie tolerance (:func:`~._stats.wins_ties_losses`); 0: not shown.
    ratios : sequence of str, default=()
        Run columns of :data:`RATIO_COLUMNS` (``fit_seconds``, ...): for each, the median
        over units of the per-unit ratio of the method's seed mean to its reference's (a
        median of ratios, never a ratio of medians), their range, and the units where the
        ratio is at most 0.5.

    Raises
    ------
    CompareError
        For an unknown condition, metric or ratio column, or conditions that record
        different metrics.
    """
    names = _conditions(frame, condition)
    metric, info = _metric(frame, names, metric)
    if not set(ratios) <= set(RATIO_COLUMNS):
        raise CompareError(f"ratios: expected run columns of {RATIO_COLUMNS}, got {list(ratios)}")
    conditions = frame.attrs["conditions"]
    with_accuracy = metric != "accuracy" and (
        names[0] == CLEAN or "accuracy" in conditions[names[0]].metrics
    )
    methods, stages = sorted(frame["method"].unique()), frame.attrs["stages"]
    datasets = sorted(frame["dataset"].unique())
    pooling = len(names) > 1
    under = "" if names[0] == CLEAN else f" under `{names[0]}`"
    if pooling:
        under = f" pooled over {len(names)} conditions ({', '.join(f'`{n}`' for n in names)})"
    seeds = frame.attrs["seeds"]
    blocks: list = [f"# Paired comparisons{under}, confirm seeds {seeds}, {len(datasets)} datasets"]
    if pooling:
        blocks.append(
            "Each paired unit is a (dataset, condition) pair: the counts, medians "
            "and the Wilcoxon test run over the pairs both methods have."
        )
    groups = [([r], f"Against `{r}`") for r in references if r in methods]
    present = [r for r in best_of if r in methods]
    if len(present) > 1:
        both = " and ".join(f"`{r}`" for r in present)
        groups.append((present, f"Against the better of {both} (per dataset and stage)"))
    for refs, title in groups:
        blocks.append(f"## {title}")
        if len(refs) > 1:
            blocks.append(
                "The better reference is chosen per dataset and stage in hindsight, which "
                "favours the reference."
            )
        args = (frame, names, metric, info, refs, methods, with_accuracy, tolerance, ratios)
        blocks.append(comparison_table(*args))
    if pooling:
        rows = []
        for stage in stages:
            values = unit_table(frame, names, stage, metric).reindex(columns=methods)
            ranks, n = average_ranks(values, greater_is_better=info.greater_is_better)
            rows.append([STAGE_LABELS.get(stage, stage), n, *(f"{ranks[m]:.2f}" for m in methods)])
        blocks += [
            f"## Average ranks over (dataset, condition) pairs (1 = best {info.label})",
            table(["stage", "units", *methods], rows),
        ]
        label = f"{info.label}, mean over the {len(names)} conditions,"
    else:
        label = f"test {info.label}" if names[0] == CLEAN else f"{info.label}{under}"
    calibrated = [s for s in stages if s != "raw"]
    titles = [STAGE_TITLES.get(s, f"{s} calibration") for s in calibrated]
    headings = [f"{label[0].upper()}{label[1:]} after {t}" for t in titles]
    headings.append(f"Raw {label}" + (f" (no {' or '.join(titles)})" if titles else ""))
    for stage, heading in zip([*calibrated, "raw"], headings, strict=True):
        means = unit_table(frame, names, stage, metric)
        if pooling and not means.empty:  # per dataset: the mean over the conditions it has
            means = means.groupby(lambda unit: unit.split(", ")[0]).mean()
        rows = []
        for dataset, row in means.reindex(index=datasets, columns=methods).iterrows():
            best = row.max() if info.greater_is_better else row.min()
            cells = [_mean(v, bold=stage != "raw" and v == best) for v in row]
            rows.append([dataset, *cells])
        blocks += [f"## {heading}, mean over confirm seeds", table(["dataset", *methods], rows)]
    return render([*blocks, *penalty_blocks(frame)])


def _mean(value: float, bold: bool) -> str:
    if not np.isfinite(value):
        return "–"
    return f"**{value:.4f}**" if bold else f"{value:.4f}"


def plot_comparison(
    frame, methods: Sequence[str], reference: str, path, *, condition=CLEAN, metric=None
) -> Path:
    """Draw the per-dataset (or, pooling conditions, per-pair) changes of ``methods``
    against ``reference`` (after the first calibrator, or raw without one) to the PNG
    ``path``; ``condition`` as in :func:`compare_markdown`.

    Raises
    ------
    CompareError
        For a method or reference without records, or an unknown condition or metric.
    """
    from ._figures import plot_changes

    names = _conditions(frame, condition)
    metric, info = _metric(frame, names, metric)
    have = sorted(frame["method"].unique())
    unknown = sorted({*methods, reference} - set(have))
    if unknown:
        raise CompareError(f"--plot: no records of {unknown}; methods are {have}")
    stage = next((s for s in frame.attrs["stages"] if s != "raw"), "raw")
    found = {
        m: _comparison(frame, names, metric, info, m, [reference], stage, False) for m in methods
    }
    found = {m: c for m, c in found.items() if c is not None}
    if not found:
        raise CompareError(f"--plot: no dataset has both {list(methods)} and {reference!r}")
    under = "" if names[0] == CLEAN else f" under {names[0]}"
    under = f" pooled over {len(names)} conditions" if len(names) > 1 else under
    stage_label = (
        "raw" if stage == "raw" else f"after {STAGE_TITLES.get(stage, f'{stage} calibration')}"
    )
    figure = plot_changes(
        found,
        reference,
        axis_label=f"test {info.label}{under}",
        stage_label=stage_label,
        greater_is_better=info.greater_is_better,
    )
    write_atomic(Path(path), figure)
    return Path(path)


def _percent(change: float) -> str:
    return "–" if np.isnan(change) else f"{change:+.2f} %"


def calibrators_markdown(
    frame, *, reference: str = "temperature", tolerance: float = 5.0, metric: str = "nll"
) -> str:
    """The calibrators of the results side by side, as Markdown (lower ``metric`` is better).

    Three tables, on the clean test rows: each calibrator against the uncalibrated model
    per fit (method × dataset × seed: median change, fits more than ``tolerance`` percent
    worse, the worst fit); each stage against ``reference`` per (method, dataset) on the
    seed means (lower on, median change, Wilcoxon p); the median change against the
    uncalibrated model per method and calibrator.

    Raises
    ------
    CompareError
        When the results have no calibrator, or not the reference stage.
    """
    calibrated = [s for s in frame.attrs["stages"] if s != "raw"]
    if not calibrated:
        raise CompareError("the results have no calibrator stage; only 'raw'")
    if reference not in calibrated:
        raise CompareError(
            f"no calibration stage {reference!r} in the results; they have {calibrated}"
        )
    rows = frame[(frame["condition"] == CLEAN) & (frame["metric"] == metric)]
    fits = rows.pivot_table(index=["method", "dataset", "seed"], columns="stage", values="value")
    seeds = rows.pivot_table(index=["method", "dataset"], columns="stage", values="value")
    methods = sorted(frame["method"].unique())
    per_fit = []
    for stage in (s for s in calibrated if s in fits and "raw" in fits):
        pair = fits[["raw", stage]].dropna()
        if pair.empty:
            continue
        changes = relative_change(pair[stage], pair["raw"])
        method, dataset, seed = pair.index[int(np.argmax(changes))]
        worse = int(np.sum(changes > tolerance))
        worst = f"{dataset} / {method} / seed {seed}"
        row = [stage, len(pair), _percent(np.median(changes)), worse]
        per_fit.append([*row, f"{changes.max():+.2f} %", worst])
    against, means = [], seeds.reindex(columns=["raw", *calibrated])
    for stage in (s for s in ["raw", *calibrated] if s != reference):
        c = paired_comparison(means[stage], {reference: means[reference]}, greater_is_better=False)
        if c is not None:
            lower = f"{c.n_better}/{len(c.datasets)}"
            against.append([stage, lower, _percent(c.median_change), f"{c.p_value:.3g}"])
    changes = 100 * means[calibrated].sub(means["raw"], axis=0).div(means["raw"], axis=0)
    medians = changes.groupby(level="method").median().reindex(methods)
    per_method = [[m, *(_percent(v) for v in row)] for m, row in medians.iterrows()]
    n_datasets, label = frame["dataset"].nunique(), metric.upper()
    columns = ["calibrator", "fits", "median change", f"fits > {tolerance:g} % worse"]
    return render(
        [
            f"# Calibrators side by side, confirm seeds {frame.attrs['seeds']}, "
            f"{n_datasets} datasets, {len(methods)} methods",
            "Every calibrator is fitted on the same validation rows of the same model. "
            f"Test {label}; changes in percent, lower is better.",
            "## Against the uncalibrated model, per fit (method × dataset × seed)",
            table([*columns, "worst change", "worst fit"], per_fit),
            f"## Against `{reference}`, per (method, dataset), seed means",
            table(["calibrator", f"lower {label} on", "median change", "Wilcoxon p"], against),
            "## Median change against the uncalibrated model, per method (over datasets)",
            table(["method", *calibrated], per_method),
        ]
    )
