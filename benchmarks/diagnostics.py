"""The theory checks of ``nescal_sklearn.diagnostics`` on trained models of the dev suite.

For every dataset and seed this fits, on the runner's split and preprocessing (3000-row
cap, 60/20/20 stratified split), with the training recipe ``"2026-12-02"`` on the sweep
config's budget (60 epochs, patience 10, one thread): cross-entropy, label smoothing at
epsilon 0.1 and 0.3, default NeSCal, and a second cross-entropy model with another
initialisation (the control for the ranking measure). Then it measures, and prints as
markdown:

* the neighbour confidence gap on each model's own kNN graph (10 neighbours, cosine on
  its embeddings; training rows among themselves and test rows against the training
  rows): the share of edges where ``|conf_i - conf_j| <= TV <= sqrt(2 JS)`` holds (a
  theorem: 100 % or a bug), and the median neighbour JS and confidence gap of NeSCal
  against cross-entropy;
* per split, summarised as a median and range over splits: the tightness of each
  inequality and its largest excess; the local Fisher-Laplacian ratio
  ``JS / (1/8 sum (p - q)^2 / p)`` at the median edge of NeSCal's graph, and on its edges
  of small relative difference; the label-smoothing closed forms on the training rows
  (share of rows above the confidence ceiling, logit gap against its bound, NLL against
  its floor);
* the ranking of the wrong classes: per test row (three classes or more), the Spearman
  correlation of a model's wrong-class probabilities with cross-entropy's;
* the local calibration error (kNN neighbourhoods of the standardised inputs) of CE,
  LS 0.1 and NeSCal on the test rows, raw and after temperature scaling.

Models are compared with the lab's statistics, as ``nescal-bench compare`` does: on the
seed means per dataset, the datasets where a model is lower (strictly, and beyond the
1 % tie tolerance), the median relative change and the Wilcoxon signed-rank p of the
relative changes (``paired_comparison``).

Figures go to ``--figures`` (default ``docs/figures``): ``diagnostics_neighbour_gap.png``,
``diagnostics_fisher.png``, ``diagnostics_label_smoothing.png``. Run from the
repository root::

    python benchmarks/diagnostics.py --jobs 2            # 19 datasets x 2 seeds, 875 s on 2 busy cores
    python benchmarks/diagnostics.py --no-run            # report again from results/diagnostics.pkl
    python benchmarks/diagnostics.py --quick             # smoke run (seconds)
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from nescal_bench import CLEAN, SUITES, paired_comparison, unit_table, wins_ties_losses
from nescal_bench.studies import markdown_table, save_figure
from nescal_sklearn.diagnostics import fisher_laplacian_ratio, plot_diagnostics

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT.parent / "shared" / "data"
#: The training recipe of the study (its budget set by the options below).
RECIPE = "2026-12-02"
#: name -> (loss, loss parameters, seed offset of the initialisation)
MODELS = {
    "ce": ("ce", {}, 0),
    "ce_other_seed": ("ce", {}, 1000),
    "ls_010": ("label_smoothing", {"loss__epsilon": 0.1}, 0),
    "ls_030": ("label_smoothing", {"loss__epsilon": 0.3}, 0),
    "nescal": ("nescal", {}, 0),
}
#: The dataset of the figures (10 classes), when it is in the run.
FEATURED = "pendigits"
#: Neighbourhood size of the local calibration error.
LCE_NEIGHBORS = 20
#: What each neighbour-gap graph reports per split: label -> its summary key.
GAP_SPREAD = {
    "conf gap / TV, median edge": "median_gap_over_tv",
    "TV / sqrt(2 JS), median edge": "median_tv_over_bound",
    "conf gap - TV, largest": "max_gap_excess",
    "TV - sqrt(2 JS), largest": "max_tv_excess",
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(SUITES["dev"]))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (one thread each)")
    parser.add_argument("--max-rows", type=int, default=3000)
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--patience", type=int, default=10)
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument("--save", type=Path, default=Path("results") / "diagnostics.pkl")
    parser.add_argument("--no-run", action="store_true", help="report from --save")
    parser.add_argument("--quick", action="store_true", help="smoke run, sklearn's data")
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
    ``proba`` and ``reference`` (rows whose wrong classes all tie are skipped)."""
    from scipy.stats import spearmanr

    wrong = np.arange(proba.shape[1]) != y[:, None]
    n = len(y)
    pairs = zip(proba[wrong].reshape(n, -1), reference[wrong].reshape(n, -1), strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a row whose wrong classes all tie: NaN
        return float(np.nanmean([spearmanr(a, b).statistic for a, b in pairs]))


def measure(name: str, seed: int, args: argparse.Namespace) -> dict:
    """Fit the models of :data:`MODELS` on one split and measure every check: the result
    objects of the figures; ``values``, the compared measures as ``(metric, stage, model,
    value)``; ``spread``, those summarised over splits, as ``(measure, model, value)``."""
    import torch
    from sklearn.frozen import FrozenEstimator

    from nescal_sklearn import CalibratedTemperature, NeSCalClassifier
    from nescal_sklearn.diagnostics import label_smoothing_bounds, neighbour_confidence_gap
    from nescal_sklearn.metrics import expected_calibration_error, local_calibration_error
    from nescal_sklearn.scorers import LocalCalibrationScorer

    torch.set_num_threads(1)
    split = load(name, args.max_rows, seed)
    y_train, y_val, y_test = (
        np.searchsorted(split.classes, y) for y in (split.y_train, split.y_val, split.y_test)
    )
    k = len(split.classes)
    models = {}
    for model_name, (loss, params, offset) in MODELS.items():
        model = NeSCalClassifier(loss=loss, recipe=RECIPE, random_state=seed + offset)
        model.set_params(max_epochs=args.max_epochs, patience=args.patience, **params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PenaltyInactiveWarning: counted in the report
            models[model_name] = model.fit(split.X_train, y_train, X_val=split.X_val, y_val=y_val)
    out = {"dataset": name, "seed": seed, "penalty_status": models["nescal"].penalty_status_}
    out["gap"], values, spread = {"ce": {}, "nescal": {}}, [], []
    for m, graph in ((m, graph) for m in ("ce", "nescal") for graph in ("train", "test")):
        X, reference = (split.X_train, None) if graph == "train" else (split.X_test, split.X_train)
        gap = neighbour_confidence_gap(models[m], X, reference_X=reference)
        out["gap"][m][graph] = gap
        values += [(key, graph, m, gap.summary[key]) for key in ("median_js", "mean_gap")]
        spread += [(label, "every graph", gap.summary[k]) for label, k in GAP_SPREAD.items()]
    out["fisher"] = {}  # on NeSCal's training graph, by L2 and by relative distance
    for d in ("l2", "relative"):
        out["fisher"][d] = fisher_laplacian_ratio(models["nescal"], split.X_train, distance=d)
    l2, relative = out["fisher"].values()
    spread.append(("Fisher ratio, median L2 edge", "NeSCal train", l2.ratio_at_median_distance))
    for bound in (0.1, 0.01):
        near = relative.distance < bound
        ratios = relative.ratio[near & np.isfinite(relative.ratio)]
        edges = f"edges with max_c |p_c - q_c| / p_c < {bound:g}"
        spread.append((f"% of {edges}", "NeSCal train", 100 * near.mean()))
        ratio = np.median(ratios) if len(ratios) else np.nan  # no edge this close: no ratio
        spread.append((f"Fisher ratio, median of {edges}", "NeSCal train", ratio))
    out["ls_bounds"] = {}
    for m in ("ls_010", "ls_030"):
        b = out["ls_bounds"][m] = label_smoothing_bounds(models[m], split.X_train, y_train)
        gap = b.summary["median_gap_mean_other"] / b.logit_gap_bound
        spread.append(("LS: % of rows above the ceiling", m, 100 * b.fraction_above_ceiling))
        spread.append(("LS: median logit gap (top - mean other) / bound", m, gap))
        spread.append(("LS: training NLL / floor", m, b.mean_nll / b.nll_floor))
    proba = {m: models[m].predict_proba(split.X_test) for m in models}
    if k >= 3:  # 1 - rho, so that lower is better like every other compared measure
        for m in ("ce_other_seed", "ls_010", "ls_030", "nescal"):
            rho = wrong_class_rank_correlation(y_test, proba[m], proba["ce"])
            values.append(("1 - rho", "test", m, 1 - rho))
    # the scorer's LCE: neighbourhoods of the standardised test rows, the same for every model
    lce = LocalCalibrationScorer(local_calibration_error, n_neighbors=LCE_NEIGHBORS)
    for m in ("ce", "ls_010", "nescal"):
        calibrated = CalibratedTemperature(FrozenEstimator(models[m])).fit(split.X_val, y_val)
        for stage, fitted in (("raw", models[m]), ("ts", calibrated)):
            values.append(("lce", stage, m, -lce(fitted, split.X_test, y_test)))
            p = fitted.predict_proba(split.X_test)
            ece = expected_calibration_error(y_test, p, labels=np.arange(k))
            values.append(("ece", stage, m, ece))
    return {**out, "values": values, "spread": spread}


def main(argv=None) -> int:
    args = parse_args(argv)
    import pickle

    if args.no_run:
        report(pickle.loads(args.save.read_bytes()), args)
        return 0
    from joblib import Parallel, delayed

    tasks = [(d, s) for d in args.datasets for s in args.seeds]
    start = time.perf_counter()
    results = Parallel(n_jobs=args.jobs, verbose=10)(delayed(measure)(d, s, args) for d, s in tasks)
    print(f"done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_bytes(pickle.dumps(results))
    report(results, args)
    return 0


def values_frame(results: list[dict]):
    """The compared measures of ``results`` as the lab's tidy frame (one condition)."""
    import pandas as pd

    rows = [(r["dataset"], CLEAN, *v) for r in results for v in r["values"]]
    return pd.DataFrame(
        rows, columns=["dataset", "condition", "metric", "stage", "method", "value"]
    )


def medians(frame, metric: str, stage: str):
    """Per model, the median over datasets of the seed means of ``metric`` at ``stage``."""
    return unit_table(frame, [CLEAN], stage, metric).median()


def paired(frame, metric: str, stage: str, new: str, old: str) -> str:
    """The lab's paired comparison of model ``new`` with ``old`` (lower is better) on the
    seed means per dataset: the datasets where ``new`` is lower, strictly and beyond the
    1 % tie tolerance, the median relative change, and its Wilcoxon p (``wilcoxon_p`` on
    the relative changes, as ``nescal-bench compare``)."""
    values = unit_table(frame, [CLEAN], stage, metric)
    if new == old or not {new, old} <= set(values.columns):
        return "—"
    c = paired_comparison(
        values[new].to_dict(), {old: values[old].to_dict()}, greater_is_better=False
    )
    both = values.loc[c.datasets, new], values.loc[c.datasets, old]
    wins, ties, _ = wins_ties_losses(*both, greater_is_better=False, tolerance=0.01)
    n = len(c.datasets)
    return (
        f"{c.n_better}/{n} lower strictly, {wins}/{n} beyond 1 % ({ties} tied), "
        f"median {c.median_change:+.1f} %, p = {c.p_value:.2g}"
    )


def report(results: list[dict], args) -> None:
    """Print the markdown findings and draw the figures."""
    import pandas as pd

    results = sorted(results, key=lambda r: (r["dataset"], r["seed"]))
    print(f"## Diagnostics: {len({r['dataset'] for r in results})} datasets, seeds {args.seeds}\n")
    gaps = [g for r in results for m in r["gap"].values() for g in m.values()]
    edges = sum(g.n_edges for g in gaps)
    held_gap = sum(g.fraction_gap_within_tv * g.n_edges for g in gaps)
    held_tv = sum(g.fraction_tv_within_bound * g.n_edges for g in gaps)
    print("### Neighbour confidence gap: |conf_i - conf_j| <= TV <= sqrt(2 JS)\n")
    print(
        f"* |conf gap| <= TV held on {held_gap:.0f} of {edges} edges ({100 * held_gap / edges:.4f} %); "
        f"TV <= sqrt(2 JS) on {held_tv:.0f} ({100 * held_tv / edges:.4f} %)"
    )
    synthetic = fisher_laplacian_ratio(synthetic=True, random_state=0)
    print(
        f"* Fisher-Laplacian ratio JS / (1/8 sum (p - q)^2 / p) on synthetic perturbations: "
        f"{synthetic.ratio_at_min_distance:.6f} at the smallest distance, "
        f"{synthetic.ratio_at_median_distance:.4f} at the median"
    )
    spread = [s for r in results for s in r["spread"]]
    spread = pd.DataFrame(spread, columns=["measure", "model", "value"])
    table = spread.groupby(["measure", "model"], sort=False)["value"].agg(["median", "min", "max"])
    print(f"\nOver the {len(results)} splits (the rows of every graph: {len(gaps)} graphs):\n")
    print(table.reset_index().to_markdown(index=False, floatfmt=".4g"))

    frame = values_frame(results)
    penalised = values_frame([r for r in results if r["penalty_status"] == "penalised"])
    statuses = [r["penalty_status"] for r in results]
    print(
        f"\nNeSCal fits penalised: {statuses.count('penalised')} of {len(statuses)} "
        f"(the others returned their warm-up checkpoint or never built the graph)"
    )
    for chosen, splits in ((frame, "all splits"), (penalised, "the penalised splits only")):
        rows = []
        for graph, key in ((g, k) for g in ("train", "test") for k in ("median_js", "mean_gap")):
            ce, nescal = (medians(chosen, key, graph).get(m, np.nan) for m in ("ce", "nescal"))
            versus = paired(chosen, key, graph, "nescal", "ce")
            rows.append([graph, key, f"{ce:.2e}", f"{nescal:.2e}", versus])
        print(f"\nNeSCal against CE, each on its own model's graph, {splits}:\n")
        print(markdown_table(["graph", "measure", "CE", "NeSCal", "NeSCal vs CE"], rows))

    print("\n### Wrong-class ranking against CE (test rows, datasets with 3+ classes)\n")
    ranked = [(frame, m, m) for m in ("ce_other_seed", "ls_010", "ls_030", "nescal")]
    rows = []
    for chosen, m, label in [*ranked, (penalised, "nescal", "nescal, penalised splits only")]:
        rho = 1 - medians(chosen, "1 - rho", "test").get(m, np.nan)
        versus = paired(chosen, "1 - rho", "test", m, "ce_other_seed")
        rows.append([label, f"{rho:.3f}", versus])
    columns = ["model", "mean Spearman with CE (median over datasets)"]
    print(markdown_table([*columns, "1 - rho against ce_other_seed"], rows))

    print(f"\n### Local calibration error ({LCE_NEIGHBORS} input neighbours), test rows, medians\n")
    rows = [
        [m, *(f"{medians(frame, x, s)[m]:.4f}" for x in ("lce", "ece") for s in ("raw", "ts"))]
        for m in ("ce", "ls_010", "nescal")
    ]
    print(markdown_table(["model", "LCE raw", "LCE after TS", "ECE raw", "ECE after TS"], rows))
    print()
    compared = [(frame, m, "") for m in ("nescal", "ls_010")]
    for chosen, m, label in [*compared, (penalised, "nescal", ", penalised splits only")]:
        for stage in ("raw", "ts"):
            print(f"* {m} vs CE, LCE {stage}{label}: {paired(chosen, 'lce', stage, m, 'ce')}")
    print(f"* nescal vs ls_010, LCE after TS: {paired(frame, 'lce', 'ts', 'nescal', 'ls_010')}")
    draw(results, args.figures)


def draw(results: list[dict], figures: Path) -> None:
    import matplotlib.pyplot as plt

    figures.mkdir(parents=True, exist_ok=True)
    featured = next((r for r in results if r["dataset"] == FEATURED), results[0])
    title = f"{featured['dataset']}, seed {featured['seed']}"
    gaps = featured["gap"]
    displays = plot_diagnostics({"CE": gaps["ce"]["train"], "NeSCal": gaps["nescal"]["train"]})
    fig = displays[0].figure_
    fig.suptitle(f"neighbour confidence gap on each model's training graph ({title})")
    save_figure(fig, figures / "diagnostics_neighbour_gap.png")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (distance, edges) in zip(axes, featured["fisher"].items(), strict=True):
        synthetic = fisher_laplacian_ratio(synthetic=True, random_state=0, distance=distance)
        plot_diagnostics({"NeSCal's edges": edges, "synthetic": synthetic}, ax=ax)
    fig.suptitle(f"local Fisher-Laplacian form ({title})")
    save_figure(fig, figures / "diagnostics_fisher.png")
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for row, bounds in zip(axes, featured["ls_bounds"].values(), strict=True):
        bounds.plot(ax=row, name=f"LS epsilon {bounds.epsilon:g}")
    fig.suptitle(f"label smoothing on the training rows ({title})")
    save_figure(fig, figures / "diagnostics_label_smoothing.png")
    print(f"\nfigures: {', '.join(p.name for p in sorted(figures.glob('diagnostics_*.png')))}")


if __name__ == "__main__":
    raise SystemExit(main())
