"""The report of a run (:func:`write_report`): ``report.md``, a self-contained
``report.html`` and ``figures/<dataset>.png``, from the tidy results frame
(:func:`~._results.results_frame`).

The page is a list of blocks as in :mod:`._compare` (Markdown text or a table), written
as Markdown (:func:`~._compare.render`) and as HTML (:func:`render_html`: tables by
``DataFrame.to_html``, figures embedded). Nothing here imports torch. Every file is
written through a temporary file and ``os.replace``: a symbolic link planted in a
results folder is replaced, never written through.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import numpy as np

from ._compare import comparison_table, penalty_blocks, render, table
from ._conditions import CLEAN
from ._records import real_dir, write_atomic
from ._registry import METRICS, N_BINS
from ._results import load_results
from ._stats import average_ranks, unit_table

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em}th{background:#f2f2f2}img{max-width:100%}"
)


def _inline(text: str) -> str:
    """Markdown ``**bold**`` and ``code`` spans of escaped text as HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def render_html(blocks: list, base: Path, title: str) -> str:
    """One self-contained HTML page of ``blocks``; images under ``base`` are embedded."""
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
    ]
    for block in blocks:
        image = re.fullmatch(r"!\[(.*)\]\((.*)\)", block) if isinstance(block, str) else None
        if not isinstance(block, str):
            out.append(_inline(block.to_html(index=False, border=0)))
        elif image:
            data = base64.b64encode((base / image[2]).read_bytes()).decode("ascii")
            alt = html.escape(image[1])
            out.append(f"<p><img alt='{alt}' src='data:image/png;base64,{data}'></p>")
        else:
            text = block.lstrip("#")
            tag = f"h{len(block) - len(text)}" if text != block else "p"
            out.append(f"<{tag}>{_inline(html.escape(text.lstrip()))}</{tag}>")
    return "\n".join([*out, "</body></html>"]) + "\n"


def _fmt(value, digits: int = 4) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def _point(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "-"


def _report_blocks(results, frame, methods: list[str]) -> tuple[list, object]:
    config, stages, metrics = results.config, results.config.stages, list(results.config.metrics)
    expected = len(config.datasets) * len(config.methods) * len(config.confirm_seeds)
    blocks: list = [
        f"# Benchmark report: {config.name}",
        config.description,
        f"{len(config.datasets)} datasets, {len(methods)} methods ({', '.join(methods)}), "
        f"post-hoc calibrators: {', '.join(stages[1:]) or 'none'}. Grid points chosen on mean "
        f"validation NLL ({config.selection}) over search seeds {list(config.search_seeds)}; "
        f"results are test-split metrics over confirm seeds {list(config.confirm_seeds)} "
        f"({frame['key'].nunique()} of {expected} confirm fits recorded). ECE: top-label, "
        f"{N_BINS} equal-width bins; Brier: sum over classes.",
    ]
    if config.conditions:
        names = ", ".join(f"`{c.name}` ({c.kind})" for c in config.conditions)
        blocks.append(
            f"Evaluation conditions recorded: {names}; compare methods under one with "
            "`nescal-bench compare RESULTS_DIR --condition NAME`."
        )
    if results.stale:
        blocks.append(
            f"{len(results.stale)} records in the folder were written under another key "
            "(an earlier configuration, recipe or record format) and are ignored."
        )
    if frame.empty:
        blocks.append("No confirm-seed records yet: nothing to report.")
        return blocks, table(["Method"], [[m] for m in methods])

    def ranks(stage, metric):
        values = unit_table(frame, [CLEAN], stage, metric).reindex(columns=methods)
        return average_ranks(values, greater_is_better=METRICS[metric].greater_is_better)

    columns = [(s, m) for m in metrics for s in stages[:2]]
    found = {col: ranks(*col) for col in columns}
    labels = [f"{METRICS[m].label} {'raw' if s == 'raw' else '+' + s}" for s, m in columns]
    rows = [[m, *(_fmt(found[col][0][m], 2) for col in columns)] for m in methods]
    headline = table(["Method", *labels], rows)
    blocks += [
        "## Average ranks",
        f"Mean rank over the {max(n for _, n in found.values())} dataset(s) every method has "
        "(1 = best; ties averaged), raw and after "
        f"{stages[1] if len(stages) > 1 else 'no calibrator'}.",
        headline,
    ]
    for stage in stages[2:]:
        rows = [[m, *(_fmt(ranks(stage, x)[0][m], 2) for x in metrics)] for m in methods]
        blocks += [
            f"After **{stage}**:",
            table(["Method", *(METRICS[x].label for x in metrics)], rows),
        ]
    chosen, reported = results.selections(), results.reported()
    clean = frame[frame["condition"] == CLEAN]
    means = clean.groupby(["dataset", "method", "stage", "metric"])["value"]
    means = means.agg(["mean", "std", "count"]).fillna({"std": 0.0})
    blocks.append("## Per-dataset results")
    for dataset in [d.name for d in config.datasets]:
        found_records = reported.get(dataset, {})
        blocks += _dataset_blocks(
            config, dataset, means, chosen, found_records, methods, results.path
        )
    blocks += [
        "## Paired comparisons",
        "Per-dataset means over the confirm seeds of each method against the reference, at "
        "every stage (as `nescal-bench compare`): the datasets where it is strictly better, "
        "better, tied and worse at the config's `tie_tolerance`, the median relative change "
        "and the two-sided Wilcoxon signed-rank p-value of the changes (nan with fewer than 2 "
        "datasets or all changes zero).",
    ]
    report, controls = config.report, list(config.report.controls or ())
    for reference, others in (
        (report.baseline, methods),
        (report.reference, methods),
        (report.reference, controls),
    ):
        if reference and others != controls:
            blocks.append(f"### Against `{reference}`")
        elif reference and controls:
            blocks += [
                "## Random-graph control",
                f"`{reference}` (kNN graph on the network's embeddings) against its control(s) "
                f"{', '.join(f'`{c}`' for c in controls)} (same penalty, neighbours drawn at "
                "random): if the graph's representation space matters, NeSCal should beat the "
                "control.",
            ]
        else:
            continue
        for metric in metrics:
            info, with_accuracy = METRICS[metric], metric != "accuracy"
            args = (frame, [CLEAN], metric, info, [reference], others, with_accuracy)
            blocks.append(comparison_table(*args, report.tie_tolerance))
    blocks += penalty_blocks(frame)
    rows = [
        [d, m, _point(p), "; ".join(f"{_point(q)}: {s:.4f}" for q, s in scores)]
        for (d, m), (p, scores) in chosen.items()
        if scores
    ]
    if rows:
        blocks += [
            "## Model selection",
            f"Mean validation NLL ({config.selection}) of every grid point over the search seeds.",
            table(["Dataset", "Method", "Chosen point", "Validation NLL per point"], rows),
        ]
    if results.failures:
        rows = [
            [f["dataset"], f["method"], _point(f["point"]), f["seed"], f["error"]]
            for f in results.failures
        ]
        blocks += ["## Failed fits", table(["Dataset", "Method", "Point", "Seed", "Error"], rows)]
    records = [r for key, r in results.records.items() if key in results.index.keys()]
    blocks.append("## Environment")
    for item in sorted({json.dumps(r["environment"], sort_keys=True) for r in records}):
        blocks.append(", ".join(f"{k} {v}" for k, v in json.loads(item).items()))
    seconds = sum(r["run"]["fit_seconds"] for r in records)
    return [*blocks, f"{len(records)} records; total fit time {seconds:.0f} s."], headline


def _dataset_blocks(config, dataset, means, chosen, records, methods, base) -> list:
    blocks: list = [f"### {dataset}"]
    if records:
        d = next(iter(records.values()))[0]["data"]
        blocks.append(
            f"{d['n_train']} train / {d['n_validation']} validation / {d['n_test']} test rows, "
            f"{d['n_features']} features after preprocessing, {d['n_classes']} classes; split: "
            f"{d['split']}."
        )
    metrics, rows = list(config.metrics), []
    for method in methods:
        for stage in (s for s in config.stages if (dataset, method, s, metrics[0]) in means.index):
            row = [method, stage]
            for metric in metrics:
                stats = means.loc[(dataset, method, stage, metric)]
                values = means.xs((dataset, stage, metric), level=("dataset", "stage", "metric"))
                cell = f"{stats['mean']:.4f} ± {stats['std']:.4f}"
                means_ = values["mean"]
                best = means_.max() if METRICS[metric].greater_is_better else means_.min()
                row.append(f"**{cell}**" if stats["mean"] == best else cell)
            choice = chosen.get((dataset, method))
            rows.append([*row, _point(choice[0]) if choice and stage == "raw" else ""])
    if not rows:
        return [*blocks, "No confirm-seed records yet."]
    n_seeds = int(means.xs(dataset, level="dataset")["count"].max())
    labels = [METRICS[m].label for m in metrics]
    blocks += [
        table(["Method", "Calibration", *labels, "Chosen point"], rows),
        f"Mean ± std over {n_seeds} confirm seed(s); best per calibration in bold.",
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
    figure = reliability_figure(
        curves, config.stages, f"{dataset}: reliability (top label, pooled seeds)"
    )
    write_atomic(real_dir(base / "figures", replace=True) / f"{dataset}.png", figure)
    return [*blocks, f"![Reliability diagrams of {dataset}](figures/{dataset}.png)"]


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
    lead = [n for n in (report.baseline, report.reference) if n] + list(report.controls or ())
    lead = list(dict.fromkeys(lead))
    methods = lead + [m.name for m in results.config.methods if m.name not in lead]
    blocks, headline = _report_blocks(results, results.frame(), methods)
    blocks = [b for b in blocks if not isinstance(b, str) or b]  # no empty paragraph
    markdown, page = base / "report.md", base / "report.html"
    write_atomic(markdown, render(blocks))
    write_atomic(page, render_html(blocks, base, blocks[0].removeprefix("# ")))
    return {"markdown": markdown, "html": page, "headline": render([headline])}
