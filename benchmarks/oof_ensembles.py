"""Issue 28 study: cross-fitted ensembles calibrated out of fold, against HGB, LightGBM, RealMLP.

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
  same way, its median ECE and accuracy, and its fit time per 1000 rows (median over
  datasets) with its ratio to HGB + TS's (the cross-fitted methods at ``n_jobs=2``: their
  fit seconds divided by ``min(2, folds)``);
* ``pairs_<config>.md``: the paired questions of the issue (cross-fitted NeSCal against
  cross-fitted CE, the label target, the map on the folds or the ensemble, the chosen map
  or a fixed temperature, the boosting member, a pooled or per-fold temperature, the
  chosen map against none);
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
    ("cross-fitted NeSCal against cross-fitted CE (patience 10, 5 folds)", "cf_p10_k5", "cf_ce_p10_k5"),
    ("the label target (LoCal) against NeSCal's", "cf_label_p10_k5", "cf_p10_k5"),
    ("the label target (LoCal) against NeSCal's", "cf_label", "recommended_nescal"),
    ("the map on the folds against the map on the ensemble", "cf_p10_k5_folds", "cf_p10_k5"),
    ("a fixed temperature against the chosen map", "cf_p10_k5_ts", "cf_p10_k5"),
    ("the chosen map against no map", "recommended_nescal", "cf_identity"),
    ("with the HGB member against without it", "cf_p10_k5_hgb", "cf_p10_k5"),
    ("with the HGB member against without it", "recommended", "recommended_nescal"),
    ("a pooled temperature against one per fold (CalibratedTemperature(cv=5))", "ts_cv_pooled", "ts_cv_per_fold"),
    ("the recommended model against the single default network + TS", "recommended", "nescal_single"),
    ("cross-fitted NeSCal against the single default network + TS", "recommended_nescal", "nescal_single"),
    ("cross-fitted NeSCal against the single default network + TS", "cf_p10_k5", "nescal_single"),
)  # fmt: skip
#: The smoke run of ``--quick``.
QUICK = {
    "datasets": [{"sklearn": "iris"}, {"sklearn": "breast_cancer"}],
    "confirm_seeds": [0],
    "budget": {"threads": 1},
}
QUICK_METHODS = ("hgb", "hgb_cf", "cf_p10_k5", "cf_ce_p10_k5", "nescal_single", "ts_cv_pooled")


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


def load(name: str, quick: bool, out: Path):
    """The validated config (made a smoke run with ``quick``)."""
    from nescal_bench import validate_config

    data = json.loads((CONFIGS / f"{name}.json").read_text())
    if quick:
        data.update(json.loads(json.dumps(QUICK)))
        data["output"] = str(out / "results")
        data["methods"] = [_tiny(m) for m in data["methods"] if m["name"] in QUICK_METHODS]
        data["report"] = {"baseline": HGB}
    else:
        data["output"] = str(ROOT / data["output"])
    return validate_config(data, default_name=name)


def _tiny(method: dict) -> dict:
    """A method of the smoke run: networks of 8 units for 4 epochs, 3 folds."""
    text = json.dumps(method).replace(
        '"recipe": "2026-12-04"', '"recipe": "2026-12-04", "max_epochs": 4, "hidden_sizes": [8]'
    )
    method = json.loads(text)
    if method.get("loss"):
        method.setdefault("params", {}).update(max_epochs=4, hidden_sizes=[8])
    if "cv" in method.get("params", {}):
        method["params"]["cv"] = 3
    return method


def frame(config):
    """The tidy frame of the run's records: one row per (dataset, method, seed)."""
    import pandas as pd

    from nescal_bench import RecordStore, plan_run

    plan = plan_run(config)
    fit_on = {m.name: m.fit_on for m in config.methods}
    folds = {m.name: _folds(m) for m in config.methods}
    store = RecordStore(config.output)
    rows = []
    for key in sorted(store.keys() & plan.index.keys()):
        r = store.read(key)
        test = r["test"].get(STAGE) or r["test"]["raw"]
        n = r["data"]["n_train"] + (
            r["data"]["n_validation"] if fit_on[r["method"]] != "train" else 0
        )
        seconds = r["run"]["fit_seconds"] + r["run"].get("calibration_seconds", 0.0)
        rows.append(
            {
                "dataset": r["dataset"],
                "method": r["method"],
                "seed": r["seed"],
                "nll": test["nll"],
                "sklearn_nll": r["test"].get("sklearn_temperature", test)["nll"],
                "ece": test["ece"],
                "accuracy": test["accuracy"],
                "seconds_per_1000": 1000 * seconds / n,
                "seconds_per_1000_jobs2": 1000 * seconds / n / min(2, folds[r["method"]]),
                "calibration": r["fit"].get("calibration"),
            }
        )
    return pd.DataFrame(rows)


def _folds(method) -> int:
    """The folds a method fits in parallel (1 for a single fit)."""
    cv = method.params.get("cv")
    return int(cv) if isinstance(cv, int) else 1


def _paired(values, reference, tolerance: float) -> dict:
    """Median % change against ``reference`` (per dataset, seed means), lower/tied/higher, p."""
    from scipy.stats import wilcoxon

    joined = values.to_frame("a").join(reference.to_frame("b"), how="inner").dropna()
    change = 100 * (joined["a"] / joined["b"] - 1)
    lower, higher = int((change < -100 * tolerance).sum()), int((change > 100 * tolerance).sum())
    diff = joined["a"] - joined["b"]
    p = float(wilcoxon(diff).pvalue) if len(diff) > 1 and np.any(diff != 0) else float("nan")
    return {
        "median": float(np.median(change)) if len(change) else float("nan"),
        "lower": lower,
        "tied": len(change) - lower - higher,
        "higher": higher,
        "n": len(change),
        "p": p,
    }


def tables(data, tolerance: float) -> tuple[str, str, list[dict]]:
    """The methods table, the pairs table, and the rows of the figure."""
    means = data.groupby(["method", "dataset"]).mean(numeric_only=True)
    by_method = {m: means.loc[m] for m in means.index.get_level_values(0).unique()}
    hgb = by_method[HGB]
    rows = []
    for method, values in sorted(by_method.items(), key=lambda kv: np.median(kv[1]["nll"])):
        ts = _paired(values["nll"], hgb["nll"], tolerance)
        sk = _paired(values["nll"], hgb["sklearn_nll"], tolerance)
        vs = {
            ref: _paired(values["nll"], by_method[ref]["nll"], tolerance)
            for ref in (REALMLP, HGB_CF)
            if ref in by_method and ref != method
        }
        ratio = values["seconds_per_1000_jobs2"] / hgb["seconds_per_1000"]
        rows.append(
            {
                "method": method,
                "nll": float(np.median(values["nll"])),
                "vs_hgb": ts,
                "vs_hgb_sklearn": sk,
                "vs": vs,
                "ece": float(np.median(values["ece"])),
                "accuracy": float(np.median(values["accuracy"])),
                "seconds": float(np.median(values["seconds_per_1000"])),
                "ratio": float(np.median(ratio.dropna())),
            }
        )

    def cell(stats: dict) -> str:
        if not stats["n"]:
            return "–"
        p = "–" if np.isnan(stats["p"]) else f"{stats['p']:.2g}"
        return (
            f"{stats['median']:+.2f} % ({stats['lower']}/{stats['tied']}/{stats['higher']}, p {p})"
        )

    head = (
        "| method | median test NLL | vs HGB + TS: median (lower/tied/higher, p) | vs HGB + "
        "sklearn TS | lower than RealMLP-TD | lower than HGB cross-fitted | median ECE | "
        "median accuracy | fit s / 1000 rows | × HGB + TS (n_jobs=2) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    body = "".join(
        f"| {r['method']} | {r['nll']:.4f} | {cell(r['vs_hgb'])} | {cell(r['vs_hgb_sklearn'])} | "
        + " | ".join(
            f"{r['vs'][ref]['lower']}/{r['vs'][ref]['n']}" if ref in r["vs"] else "–"
            for ref in (REALMLP, HGB_CF)
        )
        + f" | {r['ece']:.4f} | {r['accuracy']:.4f} | {r['seconds']:.2f} | {r['ratio']:.1f}× |\n"
        for r in rows
    )
    pairs = []
    for question, method, against in PAIRS:
        if method in by_method and against in by_method:
            stats = _paired(by_method[method]["nll"], by_method[against]["nll"], tolerance)
            pairs.append(f"| {question} | {method} vs {against} | {cell(stats)} |\n")
    chosen = data.dropna(subset=["calibration"]).groupby("method")["calibration"]
    counts = {m: dict(c.value_counts()) for m, c in chosen}
    pairs_md = (
        "| question | methods | median change (lower/tied/higher, p) |\n|---|---|---:|\n"
        + "".join(pairs)
        + "\n\n| method | maps chosen (fits) |\n|---|---|\n"
        + "".join(
            f"| {m} | {', '.join(f'{k} {v}' for k, v in sorted(c.items()))} |\n"
            for m, c in sorted(counts.items())
        )
    )
    return head + body, pairs_md, rows


def draw(rows: list[dict], path: Path) -> Path:
    """Median change against HGB + TS over fit seconds per 1000 rows, one point a method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    points = {r["method"]: (max(r["seconds"], 1e-3), r["vs_hgb"]["median"]) for r in rows}
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
    ax.set_xlabel("fit seconds per 1000 rows (median over datasets, one thread)")
    ax.set_ylabel("median change in test NLL against HGB + TS (%)")
    ax.set_title("Calibrated test NLL against fit time (circles: cross-fitted)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    from nescal_bench import run_benchmark

    args = parse_args(argv)
    config = load(args.config, args.quick, args.out)
    if not args.no_run:
        run_benchmark(config, jobs=args.jobs, resume=True, report=False)
    data = frame(config)
    if data.empty:
        print(f"no records in {config.output}")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    table, pairs, rows = tables(data, config.report.tie_tolerance)
    name = config.name
    (args.out / f"table_{name}.md").write_text(table)
    (args.out / f"pairs_{name}.md").write_text(pairs)
    draw(rows, args.out / f"oof_ensembles_{name}.png")
    print(f"## {name}: test NLL after calibration, per method\n\n{table}\n## Paired\n\n{pairs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
