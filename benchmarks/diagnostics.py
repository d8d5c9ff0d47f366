"""The theory checks of ``nescal_sklearn.diagnostics`` on trained models of the dev suite.

For every dataset and seed this fits, on the runner's split and preprocessing (3000-row
cap, 60/20/20 stratified split, the sweep config's budget: 60 epochs, patience 10, one
thread), cross-entropy, label smoothing at epsilon 0.1 and 0.3, default NeSCal, and a
second cross-entropy model with another initialisation (the control for the ranking
measure). Then it measures, and prints as markdown:

* the neighbour confidence gap on each model's own kNN graph (10 neighbours, cosine on
  its embeddings; training rows among themselves and test rows against the training
  rows): the share of edges where ``|conf_i - conf_j| <= TV <= sqrt(2 JS)`` holds (a
  theorem: 100 % or a bug), the median tightness of each inequality, and the median
  neighbour JS and confidence gap of NeSCal against cross-entropy;
* the local Fisher-Laplacian ratio ``JS / (1/8 sum (p - q)^2 / p)`` at the median
  edge of NeSCal's graph, and on synthetic perturbations;
* the label-smoothing closed forms on the training rows (share of rows above the
  confidence ceiling, logit gap against its bound, hard-label NLL against its floor);
* the ranking of the wrong classes: per test row (three classes or more), the Spearman
  correlation of a model's wrong-class probabilities with cross-entropy's;
* the local calibration error (kNN neighbourhoods of the standardised inputs) of CE,
  LS 0.1 and NeSCal on the test rows, raw and after temperature scaling, compared
  pairwise over datasets (Wilcoxon signed-rank).

Figures go to ``--figures`` (default ``docs/figures``): ``diagnostics_neighbour_gap.png``,
``diagnostics_fisher.png``, ``diagnostics_label_smoothing.png``. Run from the
repository root::

    python benchmarks/diagnostics.py --jobs 2            # 19 datasets x 2 seeds, ~10 min
    python benchmarks/diagnostics.py --no-run            # report again from results/diagnostics.pkl
    python benchmarks/diagnostics.py --quick             # smoke run (seconds)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from nescal_bench import SUITES, wilcoxon_p
from nescal_bench.studies import save_figure

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT.parent / "shared" / "data"
#: name -> (loss, loss parameters, seed offset of the initialisation)
MODELS = {
    "ce": ("ce", {}, 0),
    "ce_other_seed": ("ce", {}, 1000),
    "ls_010": ("label_smoothing", {"epsilon": 0.1}, 0),
    "ls_030": ("label_smoothing", {"epsilon": 0.3}, 0),
    "nescal": ("nescal", {}, 0),
}
N_NEIGHBORS = 10
#: The dataset of the figures (10 classes), when it is in the run.
FEATURED = "pendigits"
#: Neighbourhood size of the local calibration error.
LCE_NEIGHBORS = 20


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(SUITES["dev"]))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (one thread each)")
    parser.add_argument("--max-rows", type=int, default=3000)
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--patience", type=int, default=10)
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument(
        "--save",
        type=Path,
        default=Path("results") / "diagnostics.pkl",
        help="where the measured results are kept (pickle), for --no-run",
    )
    parser.add_argument(
        "--no-run", action="store_true", help="report and draw from --save, fitting nothing"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: sklearn's digits and wine, 8 epochs"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.seeds = ["sklearn-digits", "sklearn-wine"], [0]
        args.max_epochs, args.patience, args.max_rows = 8, 3, 600
    return args


def load(name: str, max_rows: int, seed: int):
    """The runner's split of dataset ``name`` (local suite, or ``sklearn-<name>``)."""
    from nescal_bench import cap_rows, load_local_dataset, stratified_split

    if name.startswith("sklearn-"):
        import sklearn.datasets

        X, y = getattr(sklearn.datasets, f"load_{name[8:]}")(return_X_y=True, as_frame=True)
    else:
        data = load_local_dataset(name, DATA_DIR)
        X, y = data.X, data.y
    X, y = cap_rows(X, np.asarray(y), max_rows)
    return stratified_split(X, y, seed=seed)


def wrong_class_rank_correlation(y, proba, reference) -> float:
    """Mean over rows of the Spearman correlation of the wrong-class probabilities of
    ``proba`` and ``reference`` (rows whose wrong classes are all tied are skipped)."""
    from scipy.stats import rankdata

    n, k = proba.shape
    mask = np.ones_like(proba, dtype=bool)
    mask[np.arange(n), y] = False
    a = rankdata(proba[mask].reshape(n, k - 1), axis=1)
    b = rankdata(reference[mask].reshape(n, k - 1), axis=1)
    a, b = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
    denominator = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    keep = denominator > 0
    return float(np.mean((a * b).sum(axis=1)[keep] / denominator[keep])) if keep.any() else np.nan


def measure(name: str, seed: int, args: argparse.Namespace) -> dict:
    """Fit the models of :data:`MODELS` on one split and measure every check."""
    import warnings

    import torch
    from sklearn.frozen import FrozenEstimator

    from nescal_sklearn import CalibratedTemperature, NeSCalClassifier
    from nescal_sklearn.diagnostics import (
        fisher_laplacian_ratio,
        label_smoothing_bounds,
        neighbour_confidence_gap,
    )
    from nescal_sklearn.metrics import expected_calibration_error, local_calibration_error
    from nescal_sklearn.scorers import LocalCalibrationScorer

    torch.set_num_threads(1)
    split = load(name, args.max_rows, seed)
    y_train, y_val, y_test = (
        np.searchsorted(split.classes, y) for y in (split.y_train, split.y_val, split.y_test)
    )
    k = len(split.classes)
    models, seconds = {}, {}
    for model_name, (loss, params, offset) in MODELS.items():
        start = time.perf_counter()
        model = NeSCalClassifier(
            loss=loss,
            max_epochs=args.max_epochs,
            patience=args.patience,
            random_state=seed + offset,
        ).set_params(**{f"loss__{k}": v for k, v in params.items()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PenaltyInactiveWarning: counted below instead
            model.fit(split.X_train, y_train, X_val=split.X_val, y_val=y_val)
        models[model_name] = model
        seconds[model_name] = time.perf_counter() - start
    out: dict = {
        "dataset": name,
        "seed": seed,
        "n_classes": k,
        "seconds": seconds,
        "penalty_status": models["nescal"].penalty_status_,
    }
    # the scorer's LCE: neighbourhoods of the standardised test rows, the same for every model
    lce = LocalCalibrationScorer(local_calibration_error, n_neighbors=LCE_NEIGHBORS)
    out["gap"], out["lce"], out["ece"], out["ranking"] = {}, {}, {}, {}
    for m in ("ce", "nescal"):
        out["gap"][m] = {
            "train": neighbour_confidence_gap(models[m], split.X_train, n_neighbors=N_NEIGHBORS),
            "test": neighbour_confidence_gap(
                models[m], split.X_test, reference_X=split.X_train, n_neighbors=N_NEIGHBORS
            ),
        }
    for key, distance in (("fisher", "l2"), ("fisher_relative", "relative")):
        out[key] = fisher_laplacian_ratio(
            models["nescal"], split.X_train, n_neighbors=N_NEIGHBORS, distance=distance
        )
    out["ls_bounds"] = {
        m: label_smoothing_bounds(models[m], split.X_train, y_train) for m in ("ls_010", "ls_030")
    }
    test_proba = {m: models[m].predict_proba(split.X_test) for m in models}
    if k >= 3:
        for m in ("ce_other_seed", "ls_010", "ls_030", "nescal"):
            out["ranking"][m] = wrong_class_rank_correlation(
                y_test, test_proba[m], test_proba["ce"]
            )
    for m in ("ce", "ls_010", "nescal"):
        calibrated = CalibratedTemperature(FrozenEstimator(models[m])).fit(split.X_val, y_val)
        for stage, fitted in (("raw", models[m]), ("ts", calibrated)):
            out["lce"][(m, stage)] = -lce(fitted, split.X_test, y_test)
            proba = fitted.predict_proba(split.X_test)
            out["ece"][(m, stage)] = expected_calibration_error(y_test, proba, labels=np.arange(k))
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    import pickle

    if args.no_run:
        report(pickle.loads(args.save.read_bytes()), args)
        return 0
    from joblib import Parallel, delayed

    tasks = [(d, s) for d in args.datasets for s in args.seeds]
    print(f"{len(tasks)} splits x {len(MODELS)} models, --jobs {args.jobs}", file=sys.stderr)
    start = time.perf_counter()
    results = []
    measured = Parallel(n_jobs=args.jobs, return_as="generator")(
        delayed(measure)(d, s, args) for d, s in tasks
    )
    for i, result in enumerate(measured, 1):
        print(
            f"[{i}/{len(tasks)}] {result['dataset']} seed {result['seed']}: "
            f"{sum(result['seconds'].values()):.1f} s",
            file=sys.stderr,
        )
        results.append(result)
    print(f"done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_bytes(pickle.dumps(results))
    report(results, args)
    return 0


def paired(new: list[float], old: list[float]) -> str:
    """``lower on / n, median relative change, Wilcoxon p`` of ``new`` against ``old``."""
    new, old = np.asarray(new, float), np.asarray(old, float)
    keep = np.isfinite(new) & np.isfinite(old)
    new, old = new[keep], old[keep]
    if not len(new):
        return "—"
    change = 100 * np.median(new / np.where(old > 0, old, np.nan) - 1)
    p = wilcoxon_p(new - old)
    return f"{int(np.sum(new < old))}/{len(new)} lower, median {change:+.1f} %, p = {p:.2g}"


def seed_means(results):
    """Per dataset (rows), the mean over its seeds of every compared value (columns ``gap
    MODEL GRAPH MEASURE``, ``ranking MODEL``, ``lce MODEL STAGE``, ``ece MODEL STAGE``), over
    the seeds where it is finite."""
    import pandas as pd

    rows = [
        {
            "dataset": r["dataset"],
            **{f"ranking {m}": v for m, v in r["ranking"].items()},
            **{f"{x} {m} {stage}": v for x in ("lce", "ece") for (m, stage), v in r[x].items()},
            **{
                f"gap {m} {graph} {k}": gap.summary[k]
                for m, by_graph in r["gap"].items()
                for graph, gap in by_graph.items()
                for k in ("median_js", "mean_gap")
            },
        }
        for r in results
    ]
    if not rows:
        return pd.DataFrame()
    values = pd.DataFrame(rows).set_index("dataset").astype(float)
    return values.where(np.isfinite(values)).groupby(level=0).mean()


def matched(means, new: str, old: str) -> tuple[np.ndarray, np.ndarray]:
    """The columns ``new`` and ``old`` of :func:`seed_means` on the datasets that have both."""
    both = means.reindex(columns=[new, old]).dropna()
    return both[new].to_numpy(), both[old].to_numpy()


def report(results: list[dict], args) -> None:
    """Print the markdown findings and draw the figures."""
    results = sorted(results, key=lambda r: (r["dataset"], r["seed"]))
    print(f"## Diagnostics: {len({r['dataset'] for r in results})} datasets, seeds {args.seeds}\n")

    # 1. the inequalities, over every model, split and graph
    gaps = [g for r in results for m in r["gap"].values() for g in m.values()]
    edges = sum(g.n_edges for g in gaps)
    held_gap = sum(g.fraction_gap_within_tv * g.n_edges for g in gaps)
    held_tv = sum(g.fraction_tv_within_bound * g.n_edges for g in gaps)
    print("### Neighbour confidence gap: |conf_i - conf_j| <= TV <= sqrt(2 JS)\n")
    print(f"* edges checked: {edges} ({len(gaps)} graphs: CE and NeSCal, train and test-to-train)")
    print(
        f"* |conf gap| <= TV held on {held_gap:.0f} ({100 * held_gap / edges:.4f} %); "
        f"TV <= sqrt(2 JS) on {held_tv:.0f} ({100 * held_tv / edges:.4f} %)"
    )
    print(
        f"* largest excess: gap - TV {max(g.max_gap_excess for g in gaps):.2e}, "
        f"TV - sqrt(2 JS) {max(g.max_tv_excess for g in gaps):.2e}"
    )
    for label, key in (
        ("conf gap / TV", "median_gap_over_tv"),
        ("TV / sqrt(2 JS)", "median_tv_over_bound"),
    ):
        values = [getattr(g, key) for g in gaps]
        print(
            f"* tightness, {label}: median over graphs of the per-edge median "
            f"{np.nanmedian(values):.3f} (range {np.nanmin(values):.3f}-{np.nanmax(values):.3f})"
        )
    means = seed_means(results)
    penalised = seed_means([r for r in results if r["penalty_status"] == "penalised"])
    for chosen, heading in (
        (means, "NeSCal against CE, each on its own model's graph (per dataset, mean over seeds)"),
        (penalised, "The same, on the splits whose NeSCal fit was penalised"),
    ):
        print(
            f"\n{heading}:\n\n| graph | measure | CE (median over datasets) | NeSCal | NeSCal vs CE |\n|---|---|---|---|---|"
        )
        for graph in ("train", "test"):
            for label, key in (
                ("median neighbour JS", "median_js"),
                ("mean confidence gap", "mean_gap"),
            ):
                a, b = matched(chosen, f"gap nescal {graph} {key}", f"gap ce {graph} {key}")
                if len(a):
                    print(
                        f"| {graph} | {label} | {np.median(b):.2e} | {np.median(a):.2e} | {paired(a, b)} |"
                    )
    statuses = [r["penalty_status"] for r in results]
    print(
        f"\nNeSCal fits penalised: {statuses.count('penalised')} of {len(statuses)} "
        f"(the others returned their warm-up checkpoint or never built the graph)\n"
    )

    # 2. Fisher-Laplacian form
    from nescal_sklearn.diagnostics import fisher_laplacian_ratio

    synthetic = fisher_laplacian_ratio(synthetic=True, random_state=0, name="synthetic")
    at_median = [r["fisher"].ratio_at_median_distance for r in results]
    print("### Local Fisher-Laplacian form: JS / (1/8 sum (p - q)^2 / p)\n")
    print(
        f"* NeSCal's training graph, ratio at the median edge (by distance): median over splits "
        f"{np.nanmedian(at_median):.4f} (range {np.nanmin(at_median):.4f}-{np.nanmax(at_median):.4f}); "
        f"median edge L2 distance {np.nanmedian([r['fisher'].median_distance for r in results]):.3g}"
    )
    rel = [r["fisher_relative"] for r in results]
    for bound in (0.1, 0.01):
        near = [f.ratio[(f.distance < bound) & np.isfinite(f.ratio)] for f in rel]
        medians = [np.median(v) for v in near if len(v)]
        share = np.median([np.mean(f.distance < bound) for f in rel])
        lead = (
            f"* edges whose largest relative difference max_c |p_c - q_c| / p_c is below {bound:g}"
        )
        if not medians:  # no split has an edge this close: nothing to take a ratio of
            print(f"{lead}: none in any split")
            continue
        print(
            f"{lead} (median share of a graph's edges {100 * share:.1f} %): median ratio "
            f"{np.median(np.concatenate(near)):.4f} pooled, per split {np.min(medians):.4f}-"
            f"{np.max(medians):.4f} ({len(medians)} splits have such edges)"
        )
    print(
        f"* synthetic perturbations: ratio {synthetic.ratio_at_min_distance:.6f} at the smallest "
        f"distance, {synthetic.ratio_at_median_distance:.4f} at the median\n"
    )

    # 3. label smoothing closed forms
    print(
        "### Label-smoothing closed forms, training rows\n\n| epsilon | rows above the ceiling | median logit gap "
        "(top - mean other) / bound | training NLL / floor |\n|---|---|---|---|"
    )
    for m in ("ls_010", "ls_030"):
        bounds = [r["ls_bounds"][m] for r in results]
        above = [b.fraction_above_ceiling for b in bounds]
        gap = [b.summary["median_gap_mean_other"] / b.logit_gap_bound for b in bounds]
        nll = [b.mean_nll / b.nll_floor for b in bounds]
        print(
            f"| {bounds[0].epsilon:g} | median {100 * np.median(above):.1f} % (range {100 * np.min(above):.1f}-"
            f"{100 * np.max(above):.1f} %) | {np.median(gap):.2f} | {np.median(nll):.2f} (all >= 1: "
            f"{all(v >= 1 for v in nll)}) |"
        )

    # 4. wrong-class ranking; higher is better here: 1 - rho is the "error" compared
    print(
        "\n### Wrong-class ranking against CE (test rows, datasets with 3+ classes)\n\n"
        "| model | mean Spearman with CE (median over datasets) | vs CE with another seed |\n|---|---|---|"
    )
    for m in ("ce_other_seed", "ls_010", "ls_030", "nescal"):
        a, b = matched(means, f"ranking {m}", "ranking ce_other_seed")
        versus = "—" if m == "ce_other_seed" else paired(1 - a, 1 - b)
        median = means.reindex(columns=[f"ranking {m}"]).iloc[:, 0].median()
        print(f"| {m} | {median:.3f} | 1 - rho: {versus} |")
    # NeSCal's fits that returned CE's warm-up checkpoint rank exactly like CE: leave them out
    a, b = matched(penalised, "ranking nescal", "ranking ce_other_seed")
    if len(a):
        print(
            f"| nescal, penalised fits only | {np.median(a):.3f} | 1 - rho: {paired(1 - a, 1 - b)} |"
        )

    # 5. local calibration error
    print(
        f"\n### Local calibration error (kNN, {LCE_NEIGHBORS} neighbours of the standardised inputs, 15 "
        "confidence bins), test rows\n\n| model | LCE raw | LCE after TS | ECE raw | ECE after TS |\n|---|---|---|---|---|"
    )
    for m in ("ce", "ls_010", "nescal"):
        cells = [
            means[f"{x} {m} {stage}"].median() for x in ("lce", "ece") for stage in ("raw", "ts")
        ]
        print(f"| {m} | " + " | ".join(f"{v:.4f}" for v in cells) + " |")
    print()
    for m in ("nescal", "ls_010"):
        for stage in ("raw", "ts"):
            a, b = matched(means, f"lce {m} {stage}", f"lce ce {stage}")
            print(f"* {m} vs CE, LCE {stage}: {paired(a, b)}")
    for stage in ("raw", "ts"):
        a, b = matched(penalised, f"lce nescal {stage}", f"lce ce {stage}")
        if len(a):
            print(f"* nescal vs CE, LCE {stage}, penalised fits only: {paired(a, b)}")
    a, b = matched(means, "lce nescal ts", "lce ls_010 ts")
    print(f"* nescal vs ls_010, LCE after TS: {paired(a, b)}")
    draw(results, args.figures)


def draw(results: list[dict], figures: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nescal_sklearn.diagnostics import fisher_laplacian_ratio, plot_diagnostics

    figures.mkdir(parents=True, exist_ok=True)
    featured = next((r for r in results if r["dataset"] == FEATURED), results[0])
    title = f"{featured['dataset']}, seed {featured['seed']}"
    fig = plot_diagnostics(
        {"CE": featured["gap"]["ce"]["train"], "NeSCal": featured["gap"]["nescal"]["train"]}
    )[0].figure_
    fig.suptitle(f"neighbour confidence gap on each model's training graph ({title})")
    save_figure(fig, figures / "diagnostics_neighbour_gap.png")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), squeeze=False)
    for ax, key, metric in zip(
        axes[0], ("fisher", "fisher_relative"), ("l2", "relative"), strict=True
    ):
        synthetic = fisher_laplacian_ratio(synthetic=True, random_state=0, distance=metric)
        plot_diagnostics({"NeSCal's edges": featured[key], "synthetic": synthetic}, ax=ax)
    fig.suptitle(f"local Fisher-Laplacian form ({title})")
    save_figure(fig, figures / "diagnostics_fisher.png")
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), squeeze=False)
    for row, m in zip(axes, ("ls_010", "ls_030"), strict=True):
        featured["ls_bounds"][m].plot(
            ax=row, name=f"LS epsilon {featured['ls_bounds'][m].epsilon:g}"
        )
    fig.suptitle(f"label smoothing on the training rows ({title})")
    save_figure(fig, figures / "diagnostics_label_smoothing.png")
    print(f"\nfigures: {', '.join(p.name for p in sorted(figures.glob('diagnostics_*.png')))}")


if __name__ == "__main__":
    raise SystemExit(main())
