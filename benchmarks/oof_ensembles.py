"""Cross-fitted ensembles calibrated out of fold, against HGB, LightGBM, RealMLP (issue 28;
the full-size study of issue 37 is ``--config scale``).

One command runs a config (resumable) and writes its tables and figure::

    python benchmarks/oof_ensembles.py --jobs 2                    # the confirm run (seeds 3-5)
    python benchmarks/oof_ensembles.py --config oof_ensembles_search --jobs 2   # the search seed
    python benchmarks/oof_ensembles.py --no-run                    # tables and figure from the records

The records live in the repository (``benchmarks/results/<config>/records``), so that
``--no-run`` rebuilds the page's tables on a fresh clone. For each config it writes to
``--out`` (default ``docs/figures/oof_ensembles``):

* ``table_<config>.md``: one row per method: median test NLL, the paired comparison with
  HistGradientBoosting + the package's temperature (median change, datasets lower / tied /
  higher at the config's 1 % tie tolerance, Wilcoxon p), the same against HGB + scikit-learn's
  temperature, the datasets where it is lower than RealMLP-TD and than HGB cross-fitted the
  same way, its median ECE and accuracy, its fit seconds per 1000 rows of the training split
  (median over datasets, one thread), and its fit time over HGB's on the same dataset (median;
  a cross-fitted method's divided by ``min(2, folds)``, an estimate of ``n_jobs=2``, unless
  the method sets ``n_jobs`` itself; the measured wall-time ratio is ``crossfit_cost.py``'s),
  its predict milliseconds per 1000 test rows, its pickle size and the summed weight of its
  members other than gradient boosting (medians over datasets);
* ``pairs_<config>.md``: the paired questions of the issue (cross-fitted NeSCal against
  cross-fitted CE, the chosen map or a fixed temperature, the boosting
  member, the chosen map against none);
* ``oof_ensembles_<config>.png``: median change against HGB + TS over fit seconds per 1000
  rows, one point per method, the cross-fitted NeSCal variants joined per recipe over the
  number of folds (the frontier).

Every method fitted on the training rows is scored after the temperature fitted on the
validation rows; a cross-fitted method (``fit_on: train+validation``) calibrates itself
and is scored as it is. ``--quick`` is a smoke run (iris and breast cancer, one seed, tiny
networks) into ``OUT/results``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "benchmarks" / "configs"

#: The stage every method is scored at (a self-calibrated method's stages are its output).
STAGE = "temperature"
#: The references of the table.
HGB, REALMLP, HGB_CF = "hgb", "realmlp", "hgb_cf"
#: (question, method, against): the paired comparisons of ``pairs_<config>.md``.
PAIRS = (
    ("cross-fitted NeSCal against cross-fitted CE", "recommended_nescal", "cf_ce"),
    (
        "cross-fitted NeSCal against cross-fitted CE (patience 10, 5 folds)",
        "cf_p10_k5",
        "cf_ce_p10_k5",
    ),
    ("a fixed temperature against the chosen map", "cf_p10_k5_ts", "cf_p10_k5"),
    ("the chosen map against no map", "recommended", "cf_identity"),
    ("the recommended model against HGB cross-fitted the same way", "recommended", "hgb_cf"),
    ("the recommended model against RealMLP-TD", "recommended", "realmlp"),
    ("with the HGB member against without it", "cf_p10_k5_hgb", "cf_p10_k5"),
    ("with the HGB member against without it", "recommended", "recommended_nescal"),
    (
        "the recommended model against the single default network + TS",
        "recommended",
        "nescal_single",
    ),
    (
        "cross-fitted NeSCal against the single default network + TS",
        "recommended_nescal",
        "nescal_single",
    ),
    ("cross-fitted NeSCal against the single default network + TS", "cf_p10_k5", "nescal_single"),
)
#: The smoke run of ``--quick``.
QUICK = {
    "datasets": [{"sklearn": "iris"}, {"sklearn": "breast_cancer"}],
    "confirm_seeds": [0],
    "budget": {"threads": 1},
}
QUICK_METHODS = ("hgb", "hgb_cf", "cf_p10_k5", "cf_ce_p10_k5", "nescal_single")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="oof_ensembles", help="config name (configs/)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits")
    parser.add_argument("--no-run", action="store_true", help="report from the records only")
    parser.add_argument("--quick", action="store_true", help="smoke run into OUT/results")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "figures" / "oof_ensembles", help="folder"
    )
    return parser.parse_args(argv)


def load(name: str, quick: bool, out: Path, run: bool = True):
    """The validated config (made a smoke run with ``quick``; for its records alone, without
    the data or an anchor's package, unless ``run``)."""
    from nescal_bench.studies import load_study_config

    # its output, but for a smoke run, relative to the repository root (the working directory)
    path = CONFIGS / f"{name}.json"
    return load_study_config(path, QUICK if quick else None, out / "results", _quick_methods, run)


def _quick_methods(data: dict) -> None:
    """The smoke run's methods: networks of 8 units for 4 epochs, 3 folds."""
    data["report"] = {"baseline": HGB}
    tiny = json.dumps([m for m in data["methods"] if m["name"] in QUICK_METHODS]).replace(
        '"recipe": "2026-12-04"', '"recipe": "2026-12-04", "max_epochs": 4, "hidden_sizes": [8]'
    )
    data["methods"] = json.loads(tiny)
    for method in data["methods"]:
        if method.get("loss"):
            method.setdefault("params", {}).update(max_epochs=4, hidden_sizes=[8])
        if "cv" in method.get("params", {}):
            method["params"]["cv"] = 3


def tables(config) -> tuple[str, str, dict]:
    """The methods table, the pairs table, and ``method -> (seconds, median change)`` of
    the figure, from the run's tidy results frame."""
    import pandas as pd

    from nescal_bench import paired_comparison, unit_table, wins_ties_losses
    from nescal_bench.studies import config_frame, markdown_table

    frame = config_frame(config)
    stages = ((STAGE, "nll"), (STAGE, "ece"), (STAGE, "accuracy"), ("sklearn_temperature", "nll"))
    nll, ece, accuracy, sklearn = (unit_table(frame, ["clean"], s, m) for s, m in stages)
    fits = frame.drop_duplicates("key").assign(
        seconds=lambda f: 1000 * f["fit_seconds"] / f["n_train"],
        predict=lambda f: 1e6 * f["predict_seconds"] / f["n_test"],
        megabytes=lambda f: f["model_bytes"] / 1e6,
    )
    seconds, predict, megabytes, network = (
        fits.pivot_table(index="dataset", columns="method", values=v, dropna=False)
        for v in ("seconds", "predict", "megabytes", "network_weight")
    )
    folds = {  # a method without n_jobs: its folds' time shared by two workers
        m.name: min(2, m.params["cv"]) if isinstance(m.params.get("cv"), int) else 1
        for m in config.methods
        if "n_jobs" not in m.params
    }
    ratio = (seconds / pd.Series(folds).reindex(seconds.columns, fill_value=1)).div(
        seconds[HGB], axis=0
    )

    def cell(method: str, reference, lower_only: bool = False) -> str:
        mine = nll[method].dropna()
        theirs = reference.reindex(mine.index).dropna()
        c = paired_comparison(mine.to_dict(), {"r": theirs.to_dict()}, greater_is_better=False)
        if c is None or method == theirs.name:
            return "–"
        both = (mine[c.datasets], theirs[c.datasets])
        wtl = wins_ties_losses(
            *both, greater_is_better=False, tolerance=config.report.tie_tolerance
        )
        if lower_only:
            return f"{wtl[0]}/{len(c.datasets)}"
        p = "–" if np.isnan(c.p_value) else f"{c.p_value:.2g}"
        return f"{c.median_change:+.2f} % ({wtl[0]}/{wtl[1]}/{wtl[2]}, p {p})"

    rows = [
        [
            method,
            f"{nll[method].median():.4f}",
            cell(method, nll[HGB]),
            cell(method, sklearn[HGB]) if HGB in sklearn else "–",
            *(cell(method, nll[ref], True) if ref in nll else "–" for ref in (REALMLP, HGB_CF)),
            f"{ece[method].median():.4f}",
            f"{accuracy[method].median():.4f}",
            f"{seconds[method].median():.2f}",
            f"{ratio[method].median():.1f}×",
            f"{predict[method].median():.2f}",
            f"{megabytes[method].median():.2f}",
            "–" if network[method].isna().all() else f"{network[method].median():.2f}",
        ]
        for method in nll.median().sort_values().index
    ]
    head = [
        "method",
        "median test NLL",
        "vs HGB + TS: median (lower/tied/higher, p)",
        "vs HGB + sklearn TS",
        "lower than RealMLP-TD",
        "lower than HGB cross-fitted",
        "median ECE",
        "median accuracy",
        "fit s / 1000 rows",
        "fit time × HGB's (folds two at a time)",
        "predict ms / 1000 rows",
        "pickle MB",
        "network weight",
    ]
    pairs = [[q, f"{m} vs {a}", cell(m, nll[a])] for q, m, a in PAIRS if m in nll and a in nll]
    if {"recommended", "cf_identity"} <= set(nll):  # the map, fit by fit (not seed means)
        fit = frame[
            (frame["stage"] == STAGE) & (frame["metric"] == "nll") & (frame["condition"] == "clean")
        ]
        by_fit = fit.pivot_table(index=["dataset", "seed"], columns="method", values="value")
        worst = (by_fit["recommended"] / by_fit["cf_identity"] - 1).mul(100).dropna()
        change = f"{worst.max():+.2f} % ({(worst > 5).sum()} of {len(worst)} fits above +5 %)"
        where = "{}, seed {}".format(*worst.idxmax())
        pairs.append(["the chosen map against no map: the worst fit", where, change])
    maps = fits.dropna(subset=["calibration"]).groupby("method")["calibration"]
    counts = [
        [m, ", ".join(f"{k} {v}" for k, v in sorted(c.value_counts().items()))] for m, c in maps
    ]
    pairs_md = (
        markdown_table(["question", "methods", "median change (lower/tied/higher, p)"], pairs)
        + "\n\n"
        + markdown_table(["method", "maps chosen (fits)"], counts)
    )
    points = {
        m: (max(seconds[m].median(), 1e-3), nll[m].div(nll[HGB]).sub(1).mul(100).median())
        for m in nll
    }
    return markdown_table(head, rows), pairs_md, points


def draw(points: dict, path: Path) -> Path:
    """Median change against HGB + TS over fit seconds per 1000 rows, one point a method."""
    from matplotlib.figure import Figure

    from nescal_bench.studies import save_figure

    fig = Figure(figsize=(8, 5.5))
    ax = fig.subplots()
    for method, (x, y) in points.items():
        cross = method.startswith(("cf_", "recommended", "hgb_cf", "lightgbm_cf", "ts_cv"))
        ax.scatter(x, y, marker="o" if cross else "s", color="C0" if cross else "C1", zorder=3)
        ax.annotate(method, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for recipe, colour in (("long", "C2"), ("p10", "C3"), ("e64", "C4")):
        line = [points[f"cf_{recipe}_k{k}"] for k in (3, 5, 8) if f"cf_{recipe}_k{k}" in points]
        if len(line) > 1:
            ax.plot(*zip(*line, strict=True), color=colour, lw=1, label=f"{recipe}: 3, 5, 8 folds")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("fit seconds per 1000 training rows (median over datasets, one thread)")
    ax.set_ylabel("median change in test NLL against HGB + TS (%)")
    ax.set_title("Calibrated test NLL against fit time (circles: cross-fitted)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def main(argv=None) -> int:
    from nescal_bench import run_benchmark

    args = parse_args(argv)
    args.out = args.out.resolve()
    os.chdir(ROOT)  # the configs' outputs are relative to the repository root
    config = load(args.config, args.quick, args.out, run=not args.no_run)
    if not args.no_run:
        run_benchmark(config, jobs=args.jobs, resume=True, report=False)
    args.out.mkdir(parents=True, exist_ok=True)
    table, pairs, points = tables(config)
    name = config.name
    (args.out / f"table_{name}.md").write_text(table + "\n")
    (args.out / f"pairs_{name}.md").write_text(pairs + "\n")
    draw(points, args.out / f"oof_ensembles_{name}.png")
    print(f"## {name}: test NLL after calibration, per method\n\n{table}\n\n## Paired\n\n{pairs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
