"""The benchmark report: ``report.md`` and a self-contained ``report.html`` from a results folder.

Built from the folder alone (:func:`~._results.load_results`): torch is not imported.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ._config import BenchmarkConfig
from ._registry import METRICS, N_BINS
from ._render import Heading, Image, Paragraph, Table, to_html, to_markdown
from ._results import RunResults, load_results
from ._stats import (
    average_ranks,
    confirm_frame,
    mean_table,
    paired_means,
    wilcoxon_p,
    wins_ties_losses,
)

__all__ = ["build_report", "penalty_counts", "write_report"]


def ordered_methods(config: BenchmarkConfig) -> list[str]:
    """Baseline first, then the reference with its random-graph controls beside it, then
    the rest."""
    names = [m.name for m in config.methods]
    first = [n for n in (config.report.baseline, config.report.reference) if n]
    lead = list(dict.fromkeys(first + list(config.report.controls)))
    return lead + [n for n in names if n not in lead]


def _stage_label(stage: str) -> str:
    return "raw" if stage == "raw" else f"+{stage}"


def _fmt(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _fmt_rank(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2f}"


def _fmt_p(p: float) -> str:
    return "n/a" if not math.isfinite(p) else f"{p:.3g}"


def _point(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "-"


def _ranks(means, stage, metric, methods):
    return average_ranks(means, stage, metric, methods, METRICS[metric].greater_is_better)


def _compared(means, method, other, stage, metric, tolerance) -> tuple[str, str]:
    """``("wins/ties/losses", "p=...")`` of ``method`` against ``other`` across datasets
    (per-dataset means; Wilcoxon on the paired differences)."""
    a, b = paired_means(means, method, other, stage, metric)
    greater = METRICS[metric].greater_is_better
    wtl = wins_ties_losses(a, b, greater_is_better=greater, tolerance=tolerance)
    return "/".join(map(str, wtl)), f"p={_fmt_p(wilcoxon_p(a - b))}"


def _headline(config, means, methods, stages) -> tuple[Table, int]:
    header = ["Method"]
    columns = []
    for metric in config.metrics:
        for stage in stages[:2]:
            header.append(f"{METRICS[metric].label} {_stage_label(stage)}")
            columns.append((stage, metric))
    ranks = {col: _ranks(means, col[0], col[1], methods) for col in columns}
    n_ranked = max((n for _, n in ranks.values()), default=0)
    rows = [[m] + [_fmt_rank(ranks[col][0][m]) for col in columns] for m in methods]
    return Table(header, rows, ["l"] + ["r"] * len(columns)), n_ranked


def _dataset_section(config, ds, means, chosen, reported, methods, stages, base) -> list:
    blocks: list = [Heading(ds.name, 3)]
    example = next(iter(reported.get(ds.name, {}).values()), [None])[0]
    if example is not None:
        d = example["data"]
        blocks.append(
            Paragraph(
                f"{d['n_train']} train / {d['n_validation']} validation / {d['n_test']} test rows, "
                f"{d['n_features']} features after preprocessing, {d['n_classes']} classes; "
                f"split: {d['split']}."
            )
        )
    metrics = list(config.metrics)
    header = ["Method", "Calibration"] + [METRICS[m].label for m in metrics] + ["Chosen point"]
    best = {}
    for stage in stages:
        for metric in metrics:
            values = {
                m: means.loc[(ds.name, m, stage, metric), "mean"]
                for m in methods
                if (ds.name, m, stage, metric) in means.index
            }
            if values:
                pick = max if METRICS[metric].greater_is_better else min
                best[(stage, metric)] = pick(values.values())
    rows, n_seeds = [], 0
    for method in methods:
        for stage in stages:
            if (ds.name, method, stage, metrics[0]) not in means.index:
                continue
            row = [method, stage]
            for metric in metrics:
                stats = means.loc[(ds.name, method, stage, metric)]
                n_seeds = max(n_seeds, int(stats["n"]))
                cell = f"{stats['mean']:.4f} ± {stats['std']:.4f}"
                row.append(f"**{cell}**" if stats["mean"] == best.get((stage, metric)) else cell)
            choice = chosen.get((ds.name, method))
            row.append(_point(choice[0]) if choice and stage == "raw" else "")
            rows.append(row)
    if not rows:
        return blocks + [Paragraph("No confirm-seed records yet.")]
    blocks.append(Table(header, rows, ["l", "l"] + ["r"] * len(metrics) + ["l"]))
    blocks.append(
        Paragraph(f"Mean ± std over {n_seeds} confirm seed(s); best per calibration in bold.")
    )
    curves = {
        m: {
            stage: [r["reliability"][stage] for r in recs if stage in r["reliability"]]
            for stage in stages
        }
        for m, recs in reported.get(ds.name, {}).items()
        if m in methods
    }
    curves = {m: curves[m] for m in methods if m in curves}
    if curves:
        from ._figures import reliability_figure

        relative = f"figures/{ds.name}.png"
        reliability_figure(
            curves, stages, f"{ds.name}: reliability (top label, pooled seeds)", base / relative
        )
        blocks.append(Image(relative, f"Reliability diagrams of {ds.name}"))
    return blocks


def _comparisons(config, means, methods, stages, reference: str, label: str) -> list:
    blocks: list = [Heading(f"Against {label} `{reference}`", 3)]
    for stage in stages:
        header = ["Method"] + [METRICS[m].label for m in config.metrics]
        rows = []
        for method in methods:
            if method == reference:
                continue
            row = [method]
            for metric in config.metrics:
                tolerance = config.report.tie_tolerance
                row.append(", ".join(_compared(means, method, reference, stage, metric, tolerance)))
            rows.append(row)
        blocks += [
            Paragraph(f"Calibration: **{stage}** (both methods {_stage_label(stage)})."),
            Table(header, rows, ["l"] + ["r"] * len(config.metrics)),
        ]
    return blocks


def _control_section(config, means, stages) -> list:
    reference = config.report.reference
    controls = list(config.report.controls)
    if not reference or not controls:
        return []
    blocks: list = [
        Heading("Random-graph control", 2),
        Paragraph(
            f"`{reference}` (kNN graph on the network's embeddings) beside its control(s) "
            f"{', '.join(f'`{c}`' for c in controls)} (same penalty, neighbours drawn at random). "
            "If the graph's representation space matters, NeSCal should beat the control."
        ),
    ]
    datasets = [d.name for d in config.datasets]
    for stage in stages:
        header = ["Dataset"]
        for metric in ("nll", "ece"):
            header += [f"{METRICS[metric].label} {name}" for name in [reference, *controls]]
        rows = []
        for ds in datasets:
            row = [ds]
            for metric in ("nll", "ece"):
                for name in [reference, *controls]:
                    key = (ds, name, stage, metric)
                    row.append(_fmt(means.loc[key, "mean"]) if key in means.index else "n/a")
            rows.append(row)
        tests = []
        for control in controls:
            for metric in ("nll", "ece"):
                tolerance = config.report.tie_tolerance
                counts, p = _compared(means, reference, control, stage, metric, tolerance)
                tests.append(
                    f"{METRICS[metric].label}: `{reference}` vs `{control}` "
                    f"{counts} (wins/ties/losses), Wilcoxon {p}"
                )
        blocks += [
            Paragraph(f"Calibration: **{stage}**."),
            Table(header, rows, ["l"] + ["r"] * (len(header) - 1)),
            Paragraph("; ".join(tests) + "."),
        ]
    return blocks


def _intro(config, methods, stages, reported, results: RunResults) -> list:
    expected = len(config.datasets) * len(config.methods) * len(config.confirm_seeds)
    present = sum(len(found) for by_method in reported.values() for found in by_method.values())
    blocks: list = [Heading(f"Benchmark report: {config.name}", 1)]
    if config.description:
        blocks.append(Paragraph(config.description))
    blocks.append(
        Paragraph(
            f"{len(config.datasets)} datasets, {len(methods)} methods ({', '.join(methods)}), "
            f"post-hoc calibrators: {', '.join(stages[1:]) or 'none'}. Grid points chosen on mean "
            f"validation NLL ({config.selection}) over search seeds {list(config.search_seeds)}; "
            f"results are test-split metrics over confirm seeds {list(config.confirm_seeds)} "
            f"({present} of {expected} confirm fits recorded). ECE: top-label, {N_BINS} "
            "equal-width bins; Brier: sum over classes."
        )
    )
    if config.conditions:
        names = ", ".join(f"`{c.name}` ({c.kind})" for c in config.conditions)
        blocks.append(
            Paragraph(
                f"Evaluation conditions recorded: {names}; compare methods under one with "
                "`nescal-bench compare RESULTS_DIR --condition NAME`."
            )
        )
    if results.stale:
        blocks.append(
            Paragraph(
                f"{len(results.stale)} records in the folder were written under another key "
                "(an earlier configuration, recipe or record format) and are ignored."
            )
        )
    return blocks


def _rank_blocks(config, means, methods, stages) -> tuple[list, Table]:
    headline, n_ranked = _headline(config, means, methods, stages)
    blocks: list = [
        Heading("Average ranks", 2),
        Paragraph(
            f"Mean rank over the {n_ranked} dataset(s) every method has (1 = best; ties "
            f"averaged), raw and after {stages[1] if len(stages) > 1 else 'no calibrator'}."
        ),
        headline,
    ]
    header = ["Method"] + [METRICS[m].label for m in config.metrics]
    for stage in stages[2:]:
        ranks = {m: _ranks(means, stage, m, methods)[0] for m in config.metrics}
        rows = [[meth] + [_fmt_rank(ranks[m][meth]) for m in config.metrics] for meth in methods]
        blocks += [
            Paragraph(f"After **{stage}**:"),
            Table(header, rows, ["l"] + ["r"] * len(config.metrics)),
        ]
    return blocks, headline


def _selection_blocks(config, chosen) -> list:
    rows = [
        [ds, method, _point(point), "; ".join(f"{_point(p)}: {s:.4f}" for p, s in scores)]
        for (ds, method), (point, scores) in chosen.items()
        if scores
    ]
    if not rows:
        return []
    return [
        Heading("Model selection", 2),
        Paragraph(
            f"Mean validation NLL ({config.selection}) of every grid point over the search seeds."
        ),
        Table(["Dataset", "Method", "Chosen point", "Validation NLL per point"], rows),
    ]


def penalty_counts(reported: dict) -> dict[str, dict[str, int]]:
    """Per method, the reported fits by ``penalty_status`` (methods whose fits record one).

    A status other than ``"penalised"`` means the smoothing penalty never trained the
    returned model: it equals its warm-up (base-loss) training.
    """
    out: dict[str, dict[str, int]] = {}
    for by_method in reported.values():
        for method, records in by_method.items():
            for record in records:
                status = record.get("fit", {}).get("penalty_status")
                if status is not None:
                    counts = out.setdefault(method, {})
                    counts[status] = counts.get(status, 0) + 1
    return out


def _penalty_blocks(reported: dict, methods: list[str]) -> list:
    counts = penalty_counts(reported)
    if not counts:
        return []
    rows = []
    for method in (m for m in methods if m in counts):
        by_status = counts[method]
        inactive = {s: n for s, n in sorted(by_status.items()) if s != "penalised"}
        detail = ", ".join(f"{s} {n}" for s, n in inactive.items())
        rows.append(
            [method, str(sum(by_status.values())), str(sum(inactive.values())), detail or "-"]
        )
    return [
        Heading("Penalty status", 2),
        Paragraph(
            "Reported fits of the neighbour-penalty methods, and how many of them returned a "
            "model the penalty never trained (`penalty_status` other than `penalised`: no "
            "graph was built, or early stopping restored an epoch from before it), which "
            "equals plain warm-up training."
        ),
        Table(["Method", "Fits", "Not penalised", "Why"], rows, ["l", "r", "r", "l"]),
    ]


def _closing_blocks(results: RunResults) -> list:
    blocks: list = []
    failures = results.failures
    if failures:
        rows = [
            [f["dataset"], f["method"], _point(f["point"]), str(f["seed"]), f["error"]]
            for f in failures
        ]
        blocks += [
            Heading("Failed fits", 2),
            Table(["Dataset", "Method", "Point", "Seed", "Error"], rows),
        ]
    planned = results.index.keys()
    records = {key: r for key, r in results.records.items() if key in planned}
    blocks.append(Heading("Environment", 2))
    versions = {json.dumps(r["environment"], sort_keys=True) for r in records.values()}
    for item in sorted(versions):
        blocks.append(Paragraph(", ".join(f"{k} {v}" for k, v in json.loads(item).items())))
    seconds = sum(r["run"]["fit_seconds"] for r in records.values())
    blocks.append(Paragraph(f"{len(records)} records; total fit time {seconds:.0f} s."))
    return blocks


def build_report(results_dir: str | Path) -> tuple[list, Table]:
    """The report's blocks and its headline table (average ranks), drawing the figures."""
    base = Path(results_dir)
    results = load_results(base, move_corrupt=True)
    config = results.config
    methods = ordered_methods(config)
    stages = config.stages
    reported = results.reported()
    chosen = results.selections()
    blocks = _intro(config, methods, stages, reported, results)
    if not reported:
        blocks.append(Paragraph("No confirm-seed records yet: nothing to report."))
        return blocks, Table(["Method"], [[m] for m in methods])
    means = mean_table(confirm_frame(reported))

    rank_blocks, headline = _rank_blocks(config, means, methods, stages)
    blocks += rank_blocks
    blocks.append(Heading("Per-dataset results", 2))
    for ds in config.datasets:
        blocks += _dataset_section(config, ds, means, chosen, reported, methods, stages, base)
    blocks += [
        Heading("Wins / ties / losses and Wilcoxon signed-rank tests", 2),
        Paragraph(
            "Each cell: datasets where the method is better / tied / worse than the reference "
            "(mean over confirm seeds; a tie is a relative difference <= "
            f"{config.report.tie_tolerance:g}), then the two-sided Wilcoxon signed-rank p-value "
            "across datasets (scipy; n/a with fewer than 2 datasets or all differences zero)."
        ),
    ]
    for reference, label in ((config.report.baseline, "CE"), (config.report.reference, "NeSCal")):
        if reference:
            blocks += _comparisons(config, means, methods, stages, reference, label)
    blocks += _control_section(config, means, stages)
    blocks += _penalty_blocks(reported, methods)
    blocks += _selection_blocks(config, chosen)
    blocks += _closing_blocks(results)
    return blocks, headline


def write_report(results_dir: str | Path) -> dict:
    """Write ``report.md``, ``report.html`` and ``figures/*.png`` into ``results_dir``.

    Returns
    -------
    dict
        ``markdown`` and ``html`` paths, and ``headline``: the average-rank table as Markdown.
    """
    base = Path(results_dir)
    blocks, headline = build_report(base)
    title = blocks[0].text
    markdown, page = base / "report.md", base / "report.html"
    markdown.write_text(to_markdown(blocks))
    page.write_text(to_html(blocks, base, title))
    return {"markdown": markdown, "html": page, "headline": to_markdown([headline])}
