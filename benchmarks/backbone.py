"""Issue 12 study: backbone options and built-in ensembles against HGB, LightGBM, RealMLP, TabM.

One command runs both configs (resumable) and writes the tables and the figure
(``docs/backbone.md``)::

    python benchmarks/backbone.py --jobs 2

The configs are ``benchmarks/configs/backbone_search.json`` (search seed 0: the default
is chosen on it) and ``benchmarks/configs/backbone.json`` (confirm seeds: the figures
the page reports). For each config the script writes, from the records:

* a table with one row per method: the median over datasets of its test NLL after
  temperature scaling (seed means per dataset), its paired comparison with
  HistGradientBoosting + TS (median change, datasets lower / tied / higher, Wilcoxon
  p), the datasets where it is lower than RealMLP-TD + TS, its median accuracy change
  against the previous default (``nescal``), its fit time per 1000 training rows (median over
  datasets) and that time relative to RealMLP-TD's on the same dataset;
* a table of NeSCal against cross-entropy on the same backbone (paired per dataset);
* the two tables on their own as ``table_<config>.md`` and ``pairs_<config>.md`` (the
  page includes them);
* ``backbone_<config>.png``: median change vs HGB + TS against median fit seconds per
  1000 training rows, one point per method.

``--no-run`` reports from the records alone; ``--quick`` is a smoke run (iris and wine,
one seed, a tiny network, eight of the methods: no RealMLP or TabM) into ``OUT/results``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "benchmarks" / "configs"
sys.path.insert(0, str(ROOT / "benchmarks"))

from ablations import pooled_results, write_report  # noqa: E402  (shared with ablations)

#: The two runs: the search seed (the default is chosen on it) and the confirm seeds.
RUNS = ("backbone_search", "backbone")
#: The references of the table, and the method that was the default before this study
#: (accuracy is compared with it).
HGB, REALMLP, TODAY = "hgb", "realmlp", "nescal"
#: NeSCal method -> the cross-entropy method with the same backbone.
PAIRS = {
    "nescal": "ce",
    "nescal_m8": "ce_m8",
    "nescal_m8_robust": "ce_m8_robust",
    "nescal_rmlp": "ce_rmlp",
    "nescal_rmlp_long": "ce_rmlp_long",
    "nescal_long": "ce_long",
}
#: The methods of the smoke run (no RealMLP or TabM: their fits take tens of seconds).
QUICK_METHODS = (
    "ce", "nescal", "nescal_m8", "ce_m8", "nescal_m8_robust", "ce_m8_robust", HGB, "lightgbm",
)  # fmt: skip
#: The smoke run of ``--quick``.
QUICK = {
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
    "confirm_seeds": [0],
    "budget": {"max_epochs": 6, "patience": 3, "hidden_sizes": [16], "threads": 1},
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (runner --jobs)")
    parser.add_argument(
        "--runs", nargs="+", choices=RUNS, default=list(RUNS), help="configs to run and report"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "figures" / "backbone",
        help="folder of the figures and backbone.md",
    )
    parser.add_argument("--no-run", action="store_true", help="report from existing records only")
    parser.add_argument("--quick", action="store_true", help="smoke run into OUT/results")
    parser.add_argument("--calibrator", default="temperature", help="the post-hoc stage reported")
    return parser.parse_args(argv)


def load_config(name: str, quick: bool, out: Path):
    """The validated config ``name`` (a small smoke version with ``quick``)."""
    from nescal_sklearn.benchmark import validate_config

    data = json.loads((CONFIGS / f"{name}.json").read_text())
    if quick:
        data.update(json.loads(json.dumps(QUICK)))
        data["output"] = str(out / "results" / name)
        data["methods"] = [m for m in data["methods"] if m["name"] in QUICK_METHODS]
    return validate_config(data, default_name=name)


def per_thousand_rows(records: dict[str, dict], config) -> dict[tuple[str, str], float]:
    """``(method, dataset) -> mean fit seconds per 1000 training rows`` over the seeds."""
    from nescal_sklearn.benchmark import plan_run

    keys = set(plan_run(config).index.keys())
    found: dict[tuple[str, str], list[float]] = {}
    for key, record in records.items():
        if key not in keys or record["seed"] not in config.confirm_seeds:
            continue
        rows = record["data"]["n_train"]
        seconds = record["run"]["fit_seconds"]
        found.setdefault((record["method"], record["dataset"]), []).append(1000 * seconds / rows)
    return {k: float(np.mean(v)) for k, v in found.items()}


def method_rows(config, pooled, speed, stage: str) -> list[dict]:
    """One row per method: median NLL, comparison with HGB, wins over RealMLP, timing."""
    from nescal_sklearn.benchmark._stats import paired_comparison, wins_ties_losses

    tolerance = config.report.tie_tolerance
    hgb = pooled.means(HGB, "clean", stage, "nll")
    realmlp = pooled.means(REALMLP, "clean", stage, "nll") if REALMLP in pooled.methods else {}
    today_acc = pooled.means(TODAY, "clean", stage, "accuracy")
    rows = []
    for method in [m.name for m in config.methods if m.name in pooled.methods]:
        nll = pooled.means(method, "clean", stage, "nll")
        accuracy = pooled.means(method, "clean", stage, "accuracy")
        row = {"method": method, "median_nll": float(np.median(list(nll.values())))}
        row["vs_hgb"] = None
        if method != HGB:
            c = paired_comparison(nll, {HGB: hgb}, greater_is_better=False)
            if c is not None:
                row["vs_hgb"] = c
                row["wtl_hgb"] = wins_ties_losses(
                    [nll[d] for d in c.datasets], [hgb[d] for d in c.datasets],
                    greater_is_better=False, tolerance=tolerance,
                )  # fmt: skip
        shared = [d for d in nll if d in realmlp]
        row["below_realmlp"] = (
            None if method == REALMLP or not shared
            else (sum(nll[d] < realmlp[d] for d in shared), len(shared))
        )  # fmt: skip
        acc = [accuracy[d] - today_acc[d] for d in accuracy if d in today_acc]
        row["accuracy_change"] = 100 * float(np.median(acc)) if acc else np.nan
        mine = {d: s for (m, d), s in speed.items() if m == method}
        theirs = {d: s for (m, d), s in speed.items() if m == REALMLP}
        row["seconds_per_1000"] = float(np.median(list(mine.values()))) if mine else np.nan
        ratios = [mine[d] / theirs[d] for d in mine if d in theirs and theirs[d] > 0]
        row["vs_realmlp_time"] = float(np.median(ratios)) if ratios else np.nan
        rows.append(row)
    return rows


def methods_table(rows: list[dict], stage_label: str) -> str:
    lines = [
        f"| method | median test NLL {stage_label} | vs HGB + TS: median change | lower / tied "
        "/ higher | Wilcoxon p | lower than RealMLP-TD | accuracy vs the previous default "
        "| fit s per 1000 rows | fit time vs RealMLP-TD |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        c = row["vs_hgb"]
        if c is None:
            versus = "reference | – | –"
        else:
            wins, ties, losses = row["wtl_hgb"]
            versus = (
                f"{c.median_change:+.2f} % | {wins} / {ties} / {losses} of {len(c.datasets)} | "
                f"{c.p_value:.3g}"
            )
        below = row["below_realmlp"]
        below = "–" if below is None else f"{below[0]} of {below[1]}"
        accuracy = "–" if np.isnan(row["accuracy_change"]) else f"{row['accuracy_change']:+.2f} pt"
        ratio = "–" if np.isnan(row["vs_realmlp_time"]) else f"{row['vs_realmlp_time']:.2f}×"
        lines.append(
            f"| {row['method']} | {row['median_nll']:.4f} | {versus} | {below} | {accuracy} | "
            f"{row['seconds_per_1000']:.2f} | {ratio} |"
        )
    return "\n".join(lines)


def pairs_table(pooled, config, stage: str, stage_label: str) -> str:
    """NeSCal against cross-entropy on the same backbone, paired per dataset."""
    from nescal_sklearn.benchmark._stats import paired_comparison, wins_ties_losses

    lines = [
        f"| NeSCal | CE, same backbone | median change of test NLL {stage_label} | lower / tied "
        "/ higher | Wilcoxon p | NeSCal fits not penalised |",
        "|---|---|---|---|---|---|",
    ]
    for nescal, ce in PAIRS.items():
        if nescal not in pooled.methods or ce not in pooled.methods:
            continue
        mine = pooled.means(nescal, "clean", stage, "nll")
        theirs = pooled.means(ce, "clean", stage, "nll")
        c = paired_comparison(mine, {ce: theirs}, greater_is_better=False)
        if c is None:
            continue
        wins, ties, losses = wins_ties_losses(
            [mine[d] for d in c.datasets], [theirs[d] for d in c.datasets],
            greater_is_better=False, tolerance=config.report.tie_tolerance,
        )  # fmt: skip
        counts = pooled.penalty.get(nescal, {})
        inactive = sum(n for s, n in counts.items() if s != "penalised")
        lines.append(
            f"| {nescal} | {ce} | {c.median_change:+.2f} % | {wins} / {ties} / {losses} of "
            f"{len(c.datasets)} | {c.p_value:.3g} | {inactive}/{sum(counts.values())} |"
        )
    return "\n".join(lines)


def draw(name: str, rows: list[dict], path: Path, stage_label: str) -> Path | None:
    """Median change vs HGB + TS against median fit seconds per 1000 rows, per method."""
    shown = [r for r in rows if not np.isnan(r["seconds_per_1000"])]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, row in enumerate(shown):
        y = 0.0 if row["vs_hgb"] is None else row["vs_hgb"].median_change
        colour = "black" if row["method"] in (HGB, "lightgbm", REALMLP, "tabm") else f"C{i % 10}"
        ax.scatter(row["seconds_per_1000"], y, color=colour, s=30)
        ax.annotate(row["method"], (row["seconds_per_1000"], y), fontsize=7,
                    xytext=(4, 3), textcoords="offset points")  # fmt: skip
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("fit seconds per 1000 training rows (median over datasets, 1 thread)")
    ax.set_ylabel(f"median change of test NLL {stage_label}\nvs HistGradientBoosting + TS (%)")
    ax.set_title(f"{name}: NLL against fit time (black: anchors)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    args = parse_args(argv)
    from nescal_sklearn.benchmark import RecordStore, run_benchmark

    configs = {name: load_config(name, args.quick, args.out) for name in args.runs}
    if not args.no_run:
        for config in configs.values():
            run_benchmark(config, jobs=args.jobs, resume=True, stream=sys.stderr)
    stage = args.calibrator
    stage_label = "after TS" if stage == "temperature" else f"after {stage}"
    args.out.mkdir(parents=True, exist_ok=True)
    sections = [
        "# Backbone study: options, ensembles and anchors",
        "",
        f"Test NLL {stage_label}: per dataset the mean over the run's seeds. Regenerate with "
        "`python benchmarks/backbone.py --no-run`.",
        "",
    ]
    for name, config in configs.items():
        output = Path(config.output)
        records = RecordStore(output).load(move=False) if (output / "records").is_dir() else {}
        pooled, _ = pooled_results(config, records)
        if HGB not in pooled.methods:
            sections += [f"## {name}", "", f"No records of {HGB} in {config.output}.", ""]
            continue
        rows = method_rows(config, pooled, per_thousand_rows(records, config), stage)
        figure = draw(name, rows, args.out / f"backbone_{name}.png", stage_label)
        table = methods_table(rows, stage_label)
        pairs = pairs_table(pooled, config, stage, stage_label)
        # each table on its own too, for docs/backbone.md to include
        (args.out / f"table_{name}.md").write_text(table + "\n")
        (args.out / f"pairs_{name}.md").write_text(pairs + "\n")
        sections += [
            f"## {name}",
            "",
            f"`{config.name}`: {len(pooled.datasets)} datasets, seeds {pooled.seeds}.",
            "",
            table,
            "",
            "NeSCal against cross-entropy on the same backbone:",
            "",
            pairs,
            "",
        ]
        if figure is not None:
            sections += [f"![{name}]({figure.name})", ""]
            print(f"wrote {figure}")
    write_report(args.out / "backbone.md", sections)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
