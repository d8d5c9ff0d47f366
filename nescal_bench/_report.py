"""What the lab writes from results folders, all from the tidy results frame
(:func:`~._results.results_frame`) and rendered with ``DataFrame.to_markdown`` and
``DataFrame.to_html``:

* the report of a run (:func:`write_report`): ``report.md``, a self-contained
  ``report.html`` and ``figures/<dataset>.png``;
* ``nescal-bench compare`` (:func:`compare_markdown`): every method against each
  reference and against the per-dataset better of several (a hindsight choice, which
  favours the reference), at every stage, under the clean test rows or evaluation
  conditions (several conditions pool into (dataset, condition) units);
* ``nescal-bench calibrators`` (:func:`calibrators_markdown`): the calibrators of a run
  side by side, per fit against the uncalibrated model and against a reference stage.

Nothing here imports torch. Every file is written through a temporary file and
``os.replace``: a symbolic link planted in a results folder is replaced, never written
through.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._conditions import CLEAN
from ._records import real_dir, write_atomic
from ._registry import METRICS, N_BINS
from ._results import load_results
from ._stats import average_ranks, paired_comparison, relative_change, unit_table, wilcoxon_p

__all__ = [
    "CompareError",
    "calibrators_markdown",
    "compare_markdown",
    "plot_comparison",
    "subset",
    "write_report",
]

#: How a stage is written in the tables (``ts``: after temperature scaling), and in titles.
STAGE_LABELS = {"temperature": "ts"}
STAGE_TITLES = {"temperature": "temperature scaling"}


class CompareError(ValueError):
    """A comparison that cannot be made (an unknown condition, metric, method or stage)."""


# --------------------------------------------------------------------------- rendering
def table(columns: Sequence[str], rows: Sequence[Sequence]):
    """A ``DataFrame`` of text cells, for :func:`render`."""
    import pandas as pd

    return pd.DataFrame([[str(c) for c in row] for row in rows], columns=list(columns))


def render(blocks: list) -> str:
    """Markdown of ``blocks``: ``("h2", text)``, ``("p", text)``, ``("img", path, alt)``
    or a ``DataFrame`` (a table)."""
    out = []
    for block in blocks:
        if hasattr(block, "to_markdown"):
            out.append(block.to_markdown(index=False, disable_numparse=True))
        elif block[0] == "img":
            out.append(f"![{block[2]}]({block[1]})")
        else:
            out.append(f"{'#' * int(block[0][1])} {block[1]}" if block[0] != "p" else block[1])
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Markdown ``**bold**`` and ``code`` spans of escaped text as HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em}th{background:#f2f2f2}img{max-width:100%}"
)


def render_html(blocks: list, base: Path, title: str) -> str:
    """One self-contained HTML page of ``blocks``; images under ``base`` are embedded."""
    out = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
    ]
    for block in blocks:
        if hasattr(block, "to_html"):
            out.append(_inline(block.to_html(index=False, border=0)))
        elif block[0] == "img":
            data = base64.b64encode((base / block[1]).read_bytes()).decode("ascii")
            out.append(
                f"<p><img alt='{html.escape(block[2])}' src='data:image/png;base64,{data}'></p>"
            )
        else:
            tag = block[0] if block[0] != "p" else "p"
            out.append(f"<{tag}>{_inline(html.escape(block[1]))}</{tag}>")
    return "\n".join([*out, "</body></html>"]) + "\n"


def _fmt(value, digits: int = 4) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def _point(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "-"


# --------------------------------------------------------------------------- the report
def _report_blocks(results, frame, methods: list[str]) -> tuple[list, object]:
    config, stages, metrics = results.config, results.config.stages, list(results.config.metrics)
    expected = len(config.datasets) * len(config.methods) * len(config.confirm_seeds)
    blocks: list = [
        ("h1", f"Benchmark report: {config.name}"),
        ("p", config.description),
        (
            "p",
            f"{len(config.datasets)} datasets, {len(methods)} methods ({', '.join(methods)}), post-hoc "
            f"calibrators: {', '.join(stages[1:]) or 'none'}. Grid points chosen on mean validation NLL "
            f"({config.selection}) over search seeds {list(config.search_seeds)}; results are test-split "
            f"metrics over confirm seeds {list(config.confirm_seeds)} ({frame['key'].nunique()} of {expected} "
            f"confirm fits recorded). ECE: top-label, {N_BINS} equal-width bins; Brier: sum over classes.",
        ),
    ]
    if config.conditions:
        names = ", ".join(f"`{c.name}` ({c.kind})" for c in config.conditions)
        blocks.append(
            (
                "p",
                f"Evaluation conditions recorded: {names}; compare methods under one with "
                "`nescal-bench compare RESULTS_DIR --condition NAME`.",
            )
        )
    if results.stale:
        blocks.append(
            (
                "p",
                f"{len(results.stale)} records in the folder were written under another key "
                "(an earlier configuration, recipe or record format) and are ignored.",
            )
        )
    if frame.empty:
        return [*blocks, ("p", "No confirm-seed records yet: nothing to report.")], table(
            ["Method"], [[m] for m in methods]
        )

    def ranks(stage, metric):
        table_ = unit_table(frame, [CLEAN], stage, metric).reindex(columns=methods)
        return average_ranks(table_, greater_is_better=METRICS[metric].greater_is_better)

    columns = [(s, m) for m in metrics for s in stages[:2]]
    found = {col: ranks(*col) for col in columns}
    headline = table(
        ["Method", *(f"{METRICS[m].label} {'raw' if s == 'raw' else '+' + s}" for s, m in columns)],
        [[m, *(_fmt(found[col][0][m], 2) for col in columns)] for m in methods],
    )
    blocks += [
        ("h2", "Average ranks"),
        (
            "p",
            f"Mean rank over the {max(n for _, n in found.values())} "
            "dataset(s) every method has (1 = best; ties averaged), raw and after "
            f"{stages[1] if len(stages) > 1 else 'no calibrator'}.",
        ),
        headline,
    ]
    for stage in stages[2:]:
        rows = [[m, *(_fmt(ranks(stage, x)[0][m], 2) for x in metrics)] for m in methods]
        blocks += [
            ("p", f"After **{stage}**:"),
            table(["Method", *(METRICS[x].label for x in metrics)], rows),
        ]
    chosen, reported = results.selections(), results.reported()
    means = frame[frame["condition"] == CLEAN].groupby(["dataset", "method", "stage", "metric"])[
        "value"
    ]
    means = means.agg(["mean", "std", "count"]).fillna({"std": 0.0})
    blocks.append(("h2", "Per-dataset results"))
    for dataset in [d.name for d in config.datasets]:
        blocks += _dataset_blocks(
            config, dataset, means, chosen, reported.get(dataset, {}), methods, results.path
        )
    blocks += [
        ("h2", "Paired comparisons"),
        (
            "p",
            "Per-dataset means over the confirm seeds of each "
            "method against the reference, at every stage (as `nescal-bench compare`): the datasets "
            "where it is better, the median relative change and the two-sided Wilcoxon signed-rank "
            "p-value of the changes (nan with fewer than 2 datasets or all changes zero).",
        ),
    ]
    controls = list(config.report.controls or ())
    for reference, others in (
        (config.report.baseline, methods),
        (config.report.reference, methods),
        (config.report.reference, controls),
    ):
        if reference and others != controls:
            blocks.append(("h3", f"Against `{reference}`"))
        elif reference and controls:
            blocks += [
                ("h2", "Random-graph control"),
                (
                    "p",
                    f"`{reference}` (kNN graph on the network's "
                    f"embeddings) against its control(s) {', '.join(f'`{c}`' for c in controls)} (same "
                    "penalty, neighbours drawn at random): if the graph's representation space matters, "
                    "NeSCal should beat the control.",
                ),
            ]
        else:
            continue
        for metric in metrics:
            blocks.append(
                _comparison_table(
                    frame,
                    [CLEAN],
                    metric,
                    METRICS[metric],
                    [reference],
                    others,
                    metric != "accuracy",
                )
            )
    blocks += _penalty_blocks(frame)
    rows = [
        [d, m, _point(p), "; ".join(f"{_point(q)}: {s:.4f}" for q, s in scores)]
        for (d, m), (p, scores) in chosen.items()
        if scores
    ]
    if rows:
        blocks += [
            ("h2", "Model selection"),
            (
                "p",
                f"Mean validation NLL ({config.selection}) of every grid "
                "point over the search seeds.",
            ),
            table(["Dataset", "Method", "Chosen point", "Validation NLL per point"], rows),
        ]
    if results.failures:
        rows = [
            [f["dataset"], f["method"], _point(f["point"]), f["seed"], f["error"]]
            for f in results.failures
        ]
        blocks += [
            ("h2", "Failed fits"),
            table(["Dataset", "Method", "Point", "Seed", "Error"], rows),
        ]
    records = [r for key, r in results.records.items() if key in results.index.keys()]
    blocks.append(("h2", "Environment"))
    for item in sorted({json.dumps(r["environment"], sort_keys=True) for r in records}):
        blocks.append(("p", ", ".join(f"{k} {v}" for k, v in json.loads(item).items())))
    seconds = sum(r["run"]["fit_seconds"] for r in records)
    return [*blocks, ("p", f"{len(records)} records; total fit time {seconds:.0f} s.")], headline


def _dataset_blocks(config, dataset, means, chosen, records, methods, base) -> list:
    blocks: list = [("h3", dataset)]
    if records:
        d = next(iter(records.values()))[0]["data"]
        blocks.append(
            (
                "p",
                f"{d['n_train']} train / {d['n_validation']} validation / {d['n_test']} test "
                f"rows, {d['n_features']} features after preprocessing, {d['n_classes']} "
                f"classes; split: {d['split']}.",
            )
        )
    metrics, rows = list(config.metrics), []
    for method in methods:
        for stage in (s for s in config.stages if (dataset, method, s, metrics[0]) in means.index):
            row = [method, stage]
            for metric in metrics:
                stats = means.loc[(dataset, method, stage, metric)]
                values = means.xs((dataset, stage, metric), level=("dataset", "stage", "metric"))[
                    "mean"
                ]
                cell = f"{stats['mean']:.4f} ± {stats['std']:.4f}"
                best = values.max() if METRICS[metric].greater_is_better else values.min()
                row.append(f"**{cell}**" if stats["mean"] == best else cell)
            choice = chosen.get((dataset, method))
            rows.append([*row, _point(choice[0]) if choice and stage == "raw" else ""])
    if not rows:
        return [*blocks, ("p", "No confirm-seed records yet.")]
    n_seeds = int(means.xs(dataset, level="dataset")["count"].max())
    blocks += [
        table(
            ["Method", "Calibration", *(METRICS[m].label for m in metrics), "Chosen point"], rows
        ),
        ("p", f"Mean ± std over {n_seeds} confirm seed(s); best per calibration in bold."),
    ]
    from ._figures import reliability_figure

    curves = {
        m: {
            s: [r["reliability"][s] for r in records[m] if s in r["reliability"]]
            for s in config.stages
        }
        for m in methods
        if m in records
    }
    title = f"{dataset}: reliability (top label, pooled seeds)"
    write_atomic(
        real_dir(base / "figures", replace=True) / f"{dataset}.png",
        reliability_figure(curves, config.stages, title),
    )
    return [*blocks, ("img", f"figures/{dataset}.png", f"Reliability diagrams of {dataset}")]


def _penalty_blocks(frame) -> list:
    """Per neighbour-loss method, the reported fits and those the penalty never trained."""
    statuses = frame.drop_duplicates("key").dropna(subset=["penalty_status"])
    rows = []
    for method, group in statuses.groupby("method", sort=False):
        inactive = (
            group["penalty_status"].value_counts().sort_index().drop("penalised", errors="ignore")
        )
        rows.append(
            [
                method,
                len(group),
                int(inactive.sum()),
                ", ".join(f"{s} {n}" for s, n in inactive.items()) or "-",
            ]
        )
    return (
        []
        if not rows
        else [
            ("h2", "Penalty status"),
            (
                "p",
                "Reported fits of the neighbour-penalty methods, and how many of them "
                "returned a model the penalty never trained (`penalty_status` other than `penalised`: no graph was "
                "built, or early stopping restored an epoch from before it), which equals plain warm-up training.",
            ),
            table(["Method", "Fits", "Not penalised", "Why"], rows),
        ]
    )


def write_report(results_dir: str | Path) -> dict:
    """Write ``report.md``, ``report.html`` and ``figures/*.png`` into ``results_dir``.

    Returns
    -------
    dict
        ``markdown`` and ``html`` paths, and ``headline``: the average-rank table as Markdown.
    """
    base = Path(results_dir)
    results = load_results(base, move_corrupt=True)
    report = results.config.report
    lead = list(
        dict.fromkeys(
            [n for n in (report.baseline, report.reference) if n] + list(report.controls or ())
        )
    )
    methods = lead + [m.name for m in results.config.methods if m.name not in lead]
    blocks, headline = _report_blocks(results, results.frame(), methods)
    blocks = [b for b in blocks if not isinstance(b, tuple) or b[1]]  # no empty paragraph
    markdown, page = base / "report.md", base / "report.html"
    write_atomic(markdown, render(blocks))
    write_atomic(page, render_html(blocks, base, blocks[0][1]))
    return {"markdown": markdown, "html": page, "headline": render([headline])}


# --------------------------------------------------------------------------- compare
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
    registries = [
        (METRICS, "nll")
        if n == CLEAN
        else (frame.attrs["conditions"][n].metrics, frame.attrs["conditions"][n].default_metric)
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


def _comparison(frame, names, metric, info, method, refs, stage, with_accuracy):
    values = unit_table(frame, names, stage, metric)
    if method not in values or any(r not in values for r in refs):
        return None
    accuracy = None
    if with_accuracy:
        acc = unit_table(frame, names, stage, "accuracy")
        accuracy = (acc[method].to_dict(), {r: acc[r].to_dict() for r in refs})
    return paired_comparison(
        values[method].to_dict(),
        {r: values[r].to_dict() for r in refs},
        greater_is_better=info.greater_is_better,
        accuracy=accuracy,
    )


def _comparison_table(frame, names, metric, info, refs, methods, with_accuracy):
    """Every method but ``refs`` against (the per-unit better of) ``refs``, at every stage."""
    rows = []
    for method in (m for m in methods if m not in refs):
        for stage in frame.attrs["stages"]:
            c = _comparison(frame, names, metric, info, method, refs, stage, with_accuracy)
            if c is not None:
                accuracy = (
                    "–" if c.accuracy_change is None else f"{100 * c.accuracy_change:+.2f} pt"
                )
                rows.append(
                    [
                        method,
                        STAGE_LABELS.get(stage, stage),
                        f"{c.n_better}/{len(c.datasets)}",
                        f"{c.median_change:+.2f} %",
                        f"{c.p_value:.3g}",
                        accuracy,
                    ]
                )
    word = "higher" if info.greater_is_better else "lower"
    columns = [
        "method",
        "stage",
        f"{word} {info.label} on",
        f"median {info.label} change",
        "Wilcoxon p",
    ]
    return table([*columns, "median accuracy change"], rows)


def compare_markdown(
    frame,
    *,
    references: Sequence[str] = ("ce", "label_smoothing"),
    best_of: Sequence[str] = ("ce", "label_smoothing"),
    condition: str | Sequence[str] = CLEAN,
    metric: str | None = None,
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

    Raises
    ------
    CompareError
        For an unknown condition or metric, or conditions that record different metrics.
    """
    names = _conditions(frame, condition)
    metric, info = _metric(frame, names, metric)
    with_accuracy = metric != "accuracy" and (
        names[0] == CLEAN or "accuracy" in frame.attrs["conditions"][names[0]].metrics
    )
    methods = sorted(frame["method"].unique())
    stages = frame.attrs["stages"]
    datasets = sorted(frame["dataset"].unique())
    pooling = len(names) > 1
    under = (
        f" pooled over {len(names)} conditions ({', '.join(f'`{n}`' for n in names)})"
        if pooling
        else ""
        if names[0] == CLEAN
        else f" under `{names[0]}`"
    )
    blocks: list = [
        (
            "h1",
            f"Paired comparisons{under}, confirm seeds {frame.attrs['seeds']}, "
            f"{len(datasets)} datasets",
        )
    ]
    if pooling:
        blocks.append(
            (
                "p",
                "Each paired unit is a (dataset, condition) pair: the counts, medians "
                "and the Wilcoxon test run over the pairs both methods have.",
            )
        )
    groups = [([r], f"Against `{r}`") for r in references if r in methods]
    present = [r for r in best_of if r in methods]
    if len(present) > 1:
        groups.append(
            (
                present,
                f"Against the better of {' and '.join(f'`{r}`' for r in present)} "
                "(per dataset and stage)",
            )
        )
    for refs, title in groups:
        blocks.append(("h2", title))
        if len(refs) > 1:
            blocks.append(
                (
                    "p",
                    "The better reference is chosen per dataset and stage in hindsight, which "
                    "favours the reference.",
                )
            )
        blocks.append(_comparison_table(frame, names, metric, info, refs, methods, with_accuracy))
    if pooling:
        what = "(dataset, condition) pairs"
        rows = []
        for stage in stages:
            ranks, n = average_ranks(
                unit_table(frame, names, stage, metric).reindex(columns=methods),
                greater_is_better=info.greater_is_better,
            )
            rows.append([STAGE_LABELS.get(stage, stage), n, *(f"{ranks[m]:.2f}" for m in methods)])
        blocks += [
            ("h2", f"Average ranks over {what} (1 = best {info.label})"),
            table(["stage", "units", *methods], rows),
        ]
        label = f"{info.label}, mean over the {len(names)} conditions,"
    else:
        label = f"test {info.label}" if names[0] == CLEAN else f"{info.label}{under}"
    calibrated = [s for s in stages if s != "raw"]
    titles = [
        f"{label[0].upper()}{label[1:]} after {STAGE_TITLES.get(s, f'{s} calibration')}"
        for s in calibrated
    ]
    without = " or ".join(STAGE_TITLES.get(s, f"{s} calibration") for s in calibrated)
    titles.append(f"Raw {label}" + (f" (no {without})" if without else ""))
    for stage, title in zip([*calibrated, "raw"], titles, strict=True):
        means = unit_table(frame, names, stage, metric)
        if pooling and not means.empty:  # per dataset: the mean over the conditions it has
            means = means.groupby(lambda unit: unit.split(", ")[0]).mean()
        means = means.reindex(index=datasets, columns=methods)
        rows = []
        for dataset, row in means.iterrows():
            best = row.max() if info.greater_is_better else row.min()
            cells = [
                "–"
                if not np.isfinite(v)
                else f"**{v:.4f}**"
                if stage != "raw" and v == best
                else f"{v:.4f}"
                for v in row
            ]
            rows.append([dataset, *cells])
        blocks += [("h2", f"{title}, mean over confirm seeds"), table(["dataset", *methods], rows)]
    return render([*blocks, *_penalty_blocks(frame)])


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
    unknown = sorted(set(methods) - set(have))
    if unknown:
        raise CompareError(f"--plot-methods: no records of {unknown}; methods are {have}")
    if reference not in have:
        raise CompareError(f"--plot: no records of reference {reference!r}")
    stage = next((s for s in frame.attrs["stages"] if s != "raw"), "raw")
    found = {
        m: _comparison(frame, names, metric, info, m, [reference], stage, False) for m in methods
    }
    found = {m: c for m, c in found.items() if c is not None}
    if not found:
        raise CompareError(f"--plot: no dataset has both {list(methods)} and {reference!r}")
    under = (
        f" pooled over {len(names)} conditions"
        if len(names) > 1
        else ""
        if names[0] == CLEAN
        else f" under {names[0]}"
    )
    stage_label = (
        "raw" if stage == "raw" else f"after {STAGE_TITLES.get(stage, f'{stage} calibration')}"
    )
    write_atomic(
        Path(path),
        plot_changes(
            found,
            reference,
            axis_label=f"test {info.label}{under}",
            stage_label=stage_label,
            greater_is_better=info.greater_is_better,
        ),
    )
    return Path(path)


# --------------------------------------------------------------------------- calibrators
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
    label = metric.upper()
    per_fit = []
    for stage in (s for s in calibrated if s in fits):
        pair = fits[["raw", stage]].dropna() if "raw" in fits else fits[[stage]].iloc[:0]
        if pair.empty:
            continue
        changes = relative_change(pair[stage], pair["raw"])
        worst = pair.index[int(np.argmax(changes))]
        per_fit.append(
            [
                stage,
                len(pair),
                f"{np.median(changes):+.2f} %",
                int(np.sum(changes > tolerance)),
                f"{changes.max():+.2f} %",
                f"{worst[1]} / {worst[0]} / seed {worst[2]}",
            ]
        )
    against = []
    for stage in (s for s in ["raw", *calibrated] if s != reference and s in seeds):
        pair = seeds[[stage, reference]].dropna()
        if pair.empty:
            continue
        changes = relative_change(pair[stage], pair[reference])
        against.append(
            [
                stage,
                f"{int(np.sum(pair[stage] < pair[reference]))}/{len(pair)}",
                f"{np.median(changes):+.2f} %",
                f"{wilcoxon_p(changes):.3g}",
            ]
        )
    per_method = []
    for method in methods:
        cells = []
        for stage in calibrated:
            pair = (
                seeds.loc[[method]][["raw", stage]].dropna()
                if method in seeds.index and stage in seeds and "raw" in seeds
                else []
            )
            cells.append(
                "–"
                if len(pair) == 0
                else f"{np.median(relative_change(pair[stage], pair['raw'])):+.2f} %"
            )
        per_method.append([method, *cells])
    n_datasets = frame["dataset"].nunique()
    return render(
        [
            (
                "h1",
                f"Calibrators side by side, confirm seeds {frame.attrs['seeds']}, {n_datasets} datasets, {len(methods)} methods",
            ),
            (
                "p",
                f"Every calibrator is fitted on the same validation rows of the same model. Test {label}; changes in percent, lower is better.",
            ),
            ("h2", "Against the uncalibrated model, per fit (method × dataset × seed)"),
            table(
                [
                    "calibrator",
                    "fits",
                    "median change",
                    f"fits > {tolerance:g} % worse",
                    "worst change",
                    "worst fit",
                ],
                per_fit,
            ),
            ("h2", f"Against `{reference}`, per (method, dataset), seed means"),
            table(["calibrator", f"lower {label} on", "median change", "Wilcoxon p"], against),
            ("h2", "Median change against the uncalibrated model, per method (over datasets)"),
            table(["method", *calibrated], per_method),
        ]
    )
