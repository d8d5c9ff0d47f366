"""The benchmark report: ``report.md`` and a self-contained ``report.html`` from a results folder."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ._config import BenchmarkConfig, validate_config
from ._records import RecordStore
from ._registry import METRICS
from ._render import Heading, Image, Paragraph, Table, to_html, to_markdown
from ._stats import (
    average_ranks,
    confirm_frame,
    confirm_records,
    mean_table,
    selections,
    wilcoxon_test,
    wins_ties_losses,
)

__all__ = ["build_report", "load_results", "write_report"]


def load_results(results_dir: str | Path) -> tuple[BenchmarkConfig, dict[str, dict]]:
    """The configuration saved by ``run`` in ``results_dir`` and every record there."""
    results_dir = Path(results_dir)
    path = results_dir / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"No config.json in results directory {str(results_dir)!r}; is it the 'output' of a run?"
        )
    config = validate_config(json.loads(path.read_text()), check_files=False)
    records = {r["key"]: r for r in RecordStore(results_dir).load_all()}
    return config, records


def ordered_methods(config: BenchmarkConfig) -> list[str]:
    """Baseline (CE) first, then NeSCal with its random-graph controls beside it, then the rest."""
    names = [m.name for m in config.methods]
    first = [n for n in (config.report.baseline, config.report.reference) if n]
    controls = [m.name for m in config.methods if m.is_random_graph_control]
    lead = list(dict.fromkeys(first + controls))
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


def _headline(config, means, methods, stages) -> tuple[Table, int]:
    header = ["Method"]
    columns = []
    for metric in config.metrics:
        for stage in stages[:2]:
            header.append(f"{METRICS[metric].label} {_stage_label(stage)}")
            columns.append((stage, metric))
    ranks = {col: average_ranks(means, col[0], col[1], methods) for col in columns}
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
        m: {stage: [r["reliability"][stage] for r in recs] for stage in stages}
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
                wtl = wins_ties_losses(
                    means, method, reference, stage, metric, config.report.tie_tolerance
                )
                _, p = wilcoxon_test(means, method, reference, stage, metric)
                row.append(f"{'/'.join(map(str, wtl))}, p={_fmt_p(p)}")
            rows.append(row)
        blocks += [
            Paragraph(f"Calibration: **{stage}** (both methods {_stage_label(stage)})."),
            Table(header, rows, ["l"] + ["r"] * len(config.metrics)),
        ]
    return blocks


def _control_section(config, means, stages) -> list:
    reference = config.report.reference
    controls = [m.name for m in config.methods if m.is_random_graph_control]
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
                wtl = wins_ties_losses(
                    means, reference, control, stage, metric, config.report.tie_tolerance
                )
                _, p = wilcoxon_test(means, reference, control, stage, metric)
                tests.append(
                    f"{METRICS[metric].label}: `{reference}` vs `{control}` "
                    f"{'/'.join(map(str, wtl))} (wins/ties/losses), Wilcoxon p={_fmt_p(p)}"
                )
        blocks += [
            Paragraph(f"Calibration: **{stage}**."),
            Table(header, rows, ["l"] + ["r"] * (len(header) - 1)),
            Paragraph("; ".join(tests) + "."),
        ]
    return blocks


def _intro(config, methods, stages, reported) -> list:
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
            f"({present} of {expected} confirm fits recorded). ECE: top-label, 15 equal-width "
            "bins; Brier: sum over classes."
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
        ranks = {m: average_ranks(means, stage, m, methods)[0] for m in config.metrics}
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


def _closing_blocks(base: Path, records: dict) -> list:
    blocks: list = []
    failures = sorted((base / "failures").glob("*.json")) if (base / "failures").is_dir() else []
    if failures:
        rows = []
        for path in failures:
            f = json.loads(path.read_text())
            rows.append([f["dataset"], f["method"], _point(f["point"]), str(f["seed"]), f["error"]])
        blocks += [
            Heading("Failed fits", 2),
            Table(["Dataset", "Method", "Point", "Seed", "Error"], rows),
        ]
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
    config, records = load_results(base)
    methods = ordered_methods(config)
    stages = ["raw", *(c.name for c in config.calibrators)]
    reported = confirm_records(config, records)
    chosen = selections(config, records)
    blocks = _intro(config, methods, stages, reported)
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
    blocks += _selection_blocks(config, chosen)
    blocks += _closing_blocks(base, records)
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
