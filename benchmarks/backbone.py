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
from pathlib import Path

import numpy as np

from nescal_bench import CLEAN, unit_table
from nescal_bench.studies import (
    config_frame,
    load_study_config,
    markdown_table,
    median,
    run_configs,
    save_figure,
    versus,
)

ROOT = Path(__file__).resolve().parents[1]
#: The two runs: the search seed (the default is chosen on it) and the confirm seeds.
RUNS = ("backbone_search", "backbone")
#: The references of the table, and the method that was the default before this study.
HGB, REALMLP, TODAY = "hgb", "realmlp", "nescal"
#: NeSCal method -> the cross-entropy method with the same backbone.
PAIRS = {
    "nescal": "ce",
    "nescal_m8": "ce_m8",
    "nescal_rmlp": "ce_rmlp",
    "nescal_rmlp_long": "ce_rmlp_long",
    "nescal_long": "ce_long",
}
#: The methods of the smoke run (no RealMLP or TabM: their fits take tens of seconds).
QUICK_METHODS = (
    "ce",
    "nescal",
    "nescal_m8",
    "ce_m8",
    HGB,
    "lightgbm",
)
QUICK = {
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
    "confirm_seeds": [0],
    "budget": {"max_epochs": 6, "patience": 3, "hidden_sizes": [16], "threads": 1},
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (runner --jobs)")
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "backbone")
    parser.add_argument("--no-run", action="store_true", help="report from existing records only")
    parser.add_argument("--quick", action="store_true", help="smoke run into OUT/results")
    return parser.parse_args(argv)


def _quick(data: dict) -> None:
    data["methods"] = [m for m in data["methods"] if m["name"] in QUICK_METHODS]


def tables(config, frame, stage: str = "temperature") -> tuple[list, str, str]:
    """The rows and Markdown of the methods table and of the NeSCal-vs-CE pairs table."""
    tolerance = config.report.tie_tolerance
    fits = frame.drop_duplicates("key")
    speed = (
        (1000 * fits["fit_seconds"] / fits["n_train"])
        .groupby([fits["method"], fits["dataset"]])
        .mean()
        .unstack("method")
    )
    nll = unit_table(frame, [CLEAN], stage, "nll")
    vs_hgb = versus(frame, HGB, stage=stage, tolerance=tolerance)
    vs_today = versus(frame, TODAY, stage=stage, tolerance=tolerance)
    rows = []
    for method in (m.name for m in config.methods if m.name in nll):
        c = vs_hgb.get(method)
        versus_hgb = (
            ["reference", "–", "–"]
            if c is None
            else [
                f"{c['comparison'].median_change:+.2f} %",
                "{} / {} / {} of {}".format(*c["wtl"], len(c["comparison"].datasets)),
                f"{c['comparison'].p_value:.3g}",
            ]
        )
        below = "–"
        if method != REALMLP and REALMLP in nll:
            both = nll[[method, REALMLP]].dropna()
            below = (
                f"{int((both[method] < both[REALMLP]).sum())} of {len(both)}" if len(both) else "–"
            )
        accuracy = f"{vs_today[method]['accuracy']:+.2f} pt" if method in vs_today else "–"
        ratio = median((speed[method] / speed[REALMLP]).dropna()) if REALMLP in speed else np.nan
        rows.append(
            [
                method,
                f"{median(nll[method].dropna()):.4f}",
                *versus_hgb,
                below,
                accuracy,
                f"{median(speed[method].dropna()):.2f}",
                "–" if np.isnan(ratio) else f"{ratio:.2f}×",
            ]
        )
    methods = markdown_table(
        [
            "method",
            "median test NLL after TS",
            "vs HGB + TS: median change",
            "lower / tied / higher",
            "Wilcoxon p",
            "lower than RealMLP-TD",
            "accuracy vs the previous default",
            "fit s per 1000 rows",
            "fit time vs RealMLP-TD",
        ],
        rows,
    )
    pairs = []
    statuses = fits.dropna(subset=["penalty_status"]).groupby("method")["penalty_status"]
    for nescal, ce in PAIRS.items():
        c = versus(
            frame[frame["method"].isin([nescal, ce])], ce, stage=stage, tolerance=tolerance
        ).get(nescal)
        if c is not None:
            found = statuses.get_group(nescal) if nescal in statuses.groups else []
            inactive = sum(s != "penalised" for s in found)
            pairs.append(
                [
                    nescal,
                    ce,
                    f"{c['comparison'].median_change:+.2f} %",
                    "{} / {} / {} of {}".format(*c["wtl"], len(c["comparison"].datasets)),
                    f"{c['comparison'].p_value:.3g}",
                    f"{inactive}/{len(found)}",
                ]
            )
    pairs_md = markdown_table(
        [
            "NeSCal",
            "CE, same backbone",
            "median change of test NLL after TS",
            "lower / tied / higher",
            "Wilcoxon p",
            "NeSCal fits not penalised",
        ],
        pairs,
    )
    return rows, methods, pairs_md


def draw(name: str, rows: list, path: Path) -> Path | None:
    """Median change vs HGB + TS against median fit seconds per 1000 rows, per method."""
    shown = [r for r in rows if r[-2] != "nan"]
    if not shown:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.subplots()
    for i, row in enumerate(shown):
        x, y = float(row[-2]), 0.0 if row[2] == "reference" else float(row[2].split()[0])
        colour = "black" if row[0] in (HGB, "lightgbm", REALMLP, "tabm") else f"C{i % 10}"
        ax.scatter(x, y, color=colour, s=30)
        ax.annotate(row[0], (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points")
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("fit seconds per 1000 training rows (median over datasets, 1 thread)")
    ax.set_ylabel("median change of test NLL after TS\nvs HistGradientBoosting + TS (%)")
    ax.set_title(f"{name}: NLL against fit time (black: anchors)", fontsize=10)
    return save_figure(fig, path)


def main(argv=None) -> int:
    args = parse_args(argv)
    quick, folder = QUICK if args.quick else None, ROOT / "benchmarks" / "configs"
    configs = {
        # --no-run: the records alone, no data, no anchor imported
        name: load_study_config(
            folder / f"{name}.json", quick, args.out / "results" / name, _quick, not args.no_run
        )
        for name in args.runs
    }
    if not args.no_run:
        run_configs(list(configs.values()), jobs=args.jobs)
    args.out.mkdir(parents=True, exist_ok=True)
    sections = [
        "# Backbone study: options, ensembles and anchors",
        "",
        "Test NLL after TS: per dataset the mean over the run's seeds. "
        "Regenerate with `python benchmarks/backbone.py --no-run`.",
        "",
    ]
    for name, config in configs.items():
        frame = config_frame(config)
        if HGB not in set(frame["method"]):
            sections += [f"## {name}", "", f"No records of {HGB} in {config.output}.", ""]
            continue
        rows, table, pairs = tables(config, frame)
        figure = draw(name, rows, args.out / f"backbone_{name}.png")
        (args.out / f"table_{name}.md").write_text(table + "\n")  # for docs/backbone.md
        (args.out / f"pairs_{name}.md").write_text(pairs + "\n")
        sections += [
            f"## {name}",
            "",
            f"`{config.name}`: {frame['dataset'].nunique()} datasets, seeds "
            f"{frame.attrs['seeds']}.",
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
    text = "\n".join(sections)
    (args.out / "backbone.md").write_text(text)
    print(f"wrote {args.out / 'backbone.md'}\n\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
