"""The label-smoothing epsilon sweep: run its config, then draw the figures and the table.

One command produces everything (``docs/diagnostics.md`` shows the output)::

    python benchmarks/label_smoothing_sweep.py --jobs 2

It runs ``benchmarks/configs/label_smoothing_sweep.json`` through the runner (resumable:
fits already recorded are kept) and then reads the records. A method's epsilon is its
loss's resolved ``epsilon``, 0 for a cross-entropy method; a method with any other
loss (NeSCal) is drawn beside the sweep as a reference. Per dataset every figure uses
the mean over confirm seeds of the test metric. Written to ``--figures`` (default
``docs/figures``):

* ``label_smoothing_ece.png``: test ECE against epsilon, raw and after TS (the U-shape);
* ``label_smoothing_nll.png``: test NLL against epsilon per dataset, raw and after TS,
  with the analytic floor ``-log(1 - eps + eps/K)`` of a model at the smoothed optimum;
* ``label_smoothing_accuracy.png``: the change in test accuracy against epsilon;
* ``label_smoothing_reliability.png``: reliability curves at three epsilons (pooled over
  seeds), each truncated at its confidence ceiling ``1 - eps + eps/K``.

The markdown table printed at the end gives, per epsilon, the median over datasets of
the raw and after-TS ECE, the NLL change against epsilon 0 raw and after TS, the share
of the NLL that smoothing gives up which TS recovers, and the accuracy change; then,
raw and after TS, on how many datasets the ECE is lowest at an interior epsilon.
``--no-run`` only draws, from an existing results folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from nescal_bench.studies import markdown_table, run_configs, save_figure

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "benchmarks" / "configs" / "label_smoothing_sweep.json"

#: The epsilons whose reliability curves are drawn (the nearest swept ones are used).
RELIABILITY_EPSILONS = (0.0, 0.1, 0.3)
#: Datasets of the reliability figure (2, 4, 10 and 26 classes) where the run has them;
#: otherwise the four with most test rows.
RELIABILITY_DATASETS = ("adult", "car", "pendigits", "letter")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="the sweep's config")
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (runner --jobs)")
    parser.add_argument(
        "--figures", type=Path, default=ROOT / "docs" / "figures", help="folder of the figures"
    )
    parser.add_argument("--no-run", action="store_true", help="draw from the existing results only")
    return parser.parse_args(argv)


def sweep_epsilon(record: dict) -> float | None:
    """The record's epsilon: the one its config states, else its recipe's; 0 for
    cross-entropy; None for any other method."""
    from nescal_sklearn.estimator import get_recipe

    identity = record["identity"]
    loss = identity.get("kind", {}).get("loss")
    if loss == "ce":
        return 0.0
    if loss != "label_smoothing":
        return None
    params = identity["params"]
    if "loss__epsilon" in params:
        return float(params["loss__epsilon"])
    return float(get_recipe(params["recipe"]).loss_params["label_smoothing"]["epsilon"])


def collect(results):
    """``(rows, references)``: per (dataset, epsilon) and per (dataset, method) the seed
    means of raw and calibrated test metrics (the results frame), the class count and the
    reliability bins pooled over the seeds."""
    from nescal_bench import pool_reliability

    frame = results.frame()
    means = frame[frame["condition"] == "clean"].pivot_table(
        index=["dataset", "method"], columns=["stage", "metric"], values="value"
    )
    rows: dict[tuple[str, float], dict] = {}
    references: dict[tuple[str, str], dict] = {}
    for dataset, methods in results.reported().items():
        for method, records in methods.items():
            summary = {
                "n_classes": records[0]["data"]["n_classes"],
                "method": method,
                "reliability": pool_reliability([r["reliability"]["raw"] for r in records])[0],
                "n_test": sum(int(r["data"]["n_test"]) for r in records),
            }
            for label, stage in (("raw", "raw"), ("ts", "temperature")):
                for metric in ("nll", "ece", "accuracy"):
                    value = means.get((stage, metric), {}).get((dataset, method), np.nan)
                    if np.isfinite(value):  # a calibrator that failed has no stage
                        summary[f"{metric}_{label}"] = float(value)
            epsilon = sweep_epsilon(records[0])
            if epsilon is None:
                references[(dataset, method)] = summary
            else:
                rows[(dataset, epsilon)] = summary
    return rows, references


def ceiling(epsilon: float, n_classes: int) -> float:
    """Top-class confidence at the label-smoothing optimum: ``1 - eps + eps/K``."""
    return 1.0 - epsilon + epsilon / n_classes


def table(rows, datasets, epsilons) -> str:
    """The markdown summary table (medians over datasets)."""
    cells = []
    for epsilon in epsilons:
        have = [d for d in datasets if (d, epsilon) in rows and (d, 0.0) in rows]
        if not have:
            continue
        ece_raw = np.median([rows[(d, epsilon)]["ece_raw"] for d in have])
        ece_ts = np.median([rows[(d, epsilon)].get("ece_ts", np.nan) for d in have])
        change_raw, change_ts, recovered, accuracy = [], [], [], []
        for d in have:
            row, base = rows[(d, epsilon)], rows[(d, 0.0)]
            change_raw.append(100 * (row["nll_raw"] / base["nll_raw"] - 1))
            change_ts.append(100 * (row.get("nll_ts", np.nan) / base.get("nll_ts", np.nan) - 1))
            accuracy.append(100 * (row["accuracy_raw"] - base["accuracy_raw"]))
            given_up = row["nll_raw"] - base["nll_raw"]
            if epsilon > 0 and given_up > 0 and "nll_ts" in row and "nll_ts" in base:
                recovered.append(1 - (row["nll_ts"] - base["nll_ts"]) / given_up)
        share = (
            f"{100 * np.median(recovered):.0f} % ({len(recovered)} datasets)"
            if recovered
            else "— (no dataset's raw NLL rose)"
        )
        cells.append(
            [
                f"{epsilon:g}",
                f"{ece_raw:.4f}",
                f"{ece_ts:.4f}",
                f"{np.median(change_raw):+.2f} %",
                f"{np.nanmedian(change_ts):+.2f} %",
                share,
                f"{np.median(accuracy):+.2f}",
            ]
        )
    return markdown_table(
        [
            "epsilon",
            "ECE raw",
            "ECE after TS",
            "NLL vs eps 0, raw",
            "NLL vs eps 0, after TS",
            "share of the raw NLL increase TS recovers",
            "accuracy change (pp)",
        ],
        cells,
    )


def draw(rows, references, datasets, epsilons, figures: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures.mkdir(parents=True, exist_ok=True)
    written, xs = [], np.array(epsilons)

    def series(dataset, key):
        return np.array([rows.get((dataset, e), {}).get(key, np.nan) for e in epsilons])

    # 1. ECE against epsilon
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, label, title in zip(axes, ("raw", "ts"), ("raw", "after TS"), strict=True):
        curves = np.array([series(d, f"ece_{label}") for d in datasets])
        ax.plot(xs, curves.T, color="0.75", lw=0.8)
        ax.plot(xs, np.nanmedian(curves, axis=0), "o-", color="C0", lw=2, label="median")
        ref = [v[f"ece_{label}"] for v in references.values() if f"ece_{label}" in v]
        if ref:
            ax.axhline(np.median(ref), color="C3", ls=":", label="NeSCal (median)")
        ax.set(title=f"test ECE, {title}", xlabel="label smoothing epsilon", yscale="log")
        ax.legend()
    axes[0].set_ylabel("ECE (15 bins; grey: one dataset)")
    written.append(save_figure(fig, figures / "label_smoothing_ece.png"))

    # 2. NLL against epsilon, per dataset, with the floor
    n, cols = len(datasets), min(5, len(datasets))
    nrows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.0 * cols, 2.4 * nrows), squeeze=False)
    for ax, dataset in zip(axes.flat, datasets, strict=False):
        k = next(rows[(dataset, e)]["n_classes"] for e in epsilons if (dataset, e) in rows)
        fine = np.linspace(0, max(epsilons), 100)
        ax.plot(xs, series(dataset, "nll_raw"), "o-", ms=3, label="raw")
        ax.plot(xs, series(dataset, "nll_ts"), "s--", ms=3, label="after TS")
        ax.plot(fine, -np.log(ceiling(fine, k)), color="k", lw=1, label="floor -log(1-e+e/K)")
        ax.set_title(f"{dataset} (K={k})", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7)
    fig.supxlabel("label smoothing epsilon")
    fig.supylabel("test NLL (nats)")
    written.append(save_figure(fig, figures / "label_smoothing_nll.png"))

    # 3. accuracy change against epsilon
    fig, ax = plt.subplots(figsize=(5.5, 4))
    changes = np.array(
        [100 * (series(d, "accuracy_raw") - series(d, "accuracy_raw")[0]) for d in datasets]
    )
    ax.plot(xs, changes.T, color="0.75", lw=0.8)
    ax.plot(xs, np.nanmedian(changes, axis=0), "o-", color="C0", lw=2, label="median")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(
        xlabel="label smoothing epsilon",
        ylabel="test accuracy change vs epsilon 0 (pp)",
        title="accuracy (grey: one dataset)",
    )
    ax.legend()
    written.append(save_figure(fig, figures / "label_smoothing_accuracy.png"))

    # 4. reliability curves at three epsilons, truncated at each ceiling
    chosen_eps = sorted({min(epsilons, key=lambda e: abs(e - t)) for t in RELIABILITY_EPSILONS})
    shown = [d for d in RELIABILITY_DATASETS if d in datasets]
    if not shown:
        shown = sorted(datasets, key=lambda d: -rows.get((d, 0.0), {}).get("n_test", 0))[:4]
    fig, axes = plt.subplots(1, len(shown), figsize=(3.6 * len(shown), 3.6), squeeze=False)
    for ax, dataset in zip(axes[0], shown, strict=True):
        for colour, epsilon in zip(("C0", "C1", "C2"), chosen_eps, strict=False):
            row = rows.get((dataset, epsilon))
            if row is None:
                continue
            curve = row["reliability"]
            keep = curve.counts > 0
            top = ceiling(epsilon, row["n_classes"])
            ax.plot(
                curve.confidence[keep],
                curve.accuracy[keep],
                "o-",
                ms=3,
                color=colour,
                label=f"eps={epsilon:g}",
            )
            if epsilon > 0:
                ax.axvline(top, color=colour, ls=":", lw=1)
        ax.plot([0, 1], [0, 1], color="k", lw=0.8)
        ax.set(
            title=f"{dataset} (K={row['n_classes']})",
            xlabel="confidence",
            xlim=(0, 1.01),
            ylim=(0, 1.01),
        )
        ax.legend(fontsize=7, loc="upper left")
    axes[0, 0].set_ylabel("accuracy (dotted: ceiling 1-e+e/K)")
    written.append(save_figure(fig, figures / "label_smoothing_reliability.png"))
    return written


def main(argv=None) -> int:
    args = parse_args(argv)
    from nescal_bench import load_results
    from nescal_bench.studies import load_study_config

    config = load_study_config(args.config, run=not args.no_run)  # --no-run: no data needed
    output = Path(config.output)
    if not args.no_run:
        run_configs([config], jobs=args.jobs)
    results = load_results(output)
    rows, references = collect(results)
    if not rows:
        print(f"no label-smoothing or cross-entropy records in {output}", file=sys.stderr)
        return 1
    datasets = [d.name for d in results.config.datasets if any(k[0] == d.name for k in rows)]
    epsilons = sorted({e for _, e in rows})
    for path in draw(rows, references, datasets, epsilons, args.figures):
        print(f"wrote {path}")
    print(
        f"\n{len(datasets)} datasets, seeds {list(results.config.confirm_seeds)}, 'after TS' = temperature\n"
    )
    print(f"{table(rows, datasets, epsilons)}\n")
    for stage, label in (("raw", "raw"), ("ts", "after TS")):
        print(u_shape(rows, datasets, epsilons, stage, label))
    return 0


def u_shape(rows, datasets, epsilons, stage: str, label: str) -> str:
    """Where each dataset's ECE is lowest: at an interior epsilon (the U-shape) or an end."""
    where = []
    for dataset in datasets:
        curve = [rows.get((dataset, e), {}).get(f"ece_{stage}", np.nan) for e in epsilons]
        if not np.all(np.isnan(curve)):
            where.append(epsilons[int(np.nanargmin(curve))])
    interior = sum(epsilons[0] < e < epsilons[-1] for e in where)
    return (
        f"ECE {label}: lowest at an interior epsilon (U-shape) on {interior} of {len(where)} datasets, at "
        f"epsilon {epsilons[0]:g} on {where.count(epsilons[0])}, at {epsilons[-1]:g} on {where.count(epsilons[-1])}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
