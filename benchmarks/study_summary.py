"""Paired comparison tables of a ``nescal-bench`` results folder (the issue-4 bar).

For every method against each reference (default: ``ce`` and ``label_smoothing``) and
against the per-dataset better of ``--best-of`` (default: the same two),
on the confirm seeds only: per-dataset mean test NLL raw and after temperature
scaling, the number of datasets where the method is lower, the median relative
change, the Wilcoxon signed-rank p-value across datasets, and the median accuracy
change. Prints markdown.

Examples
--------
::

    nescal-bench run benchmarks/configs/nescal_study.json --jobs 2
    python benchmarks/study_summary.py results/nescal_study --confirm-seeds 3 4 5

Several folders are pooled (a fit recorded in two of them counts once), so methods
run by different configs on the same datasets and seeds compare directly.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon

from nescal_sklearn.benchmark._report import load_results
from nescal_sklearn.benchmark._stats import confirm_records

STAGES = {"raw": "raw", "ts": "temperature"}


def load(folders: list[Path], seeds: set[int]) -> dict:
    """(method, dataset) -> stage -> metric -> list over seeds, pooled over folders.

    Each folder contributes the records its saved ``config.json`` reports (the chosen
    grid point of every method on the confirm seeds; records of earlier versions of
    the config are ignored). A fit present in several folders (same record key) is
    counted once.
    """
    table: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    seen: set[str] = set()
    for folder in folders:
        config, records = load_results(folder)
        for by_method in confirm_records(config, records).values():
            for recs in by_method.values():
                for rec in recs:
                    if rec["seed"] not in seeds or rec["key"] in seen:
                        continue
                    seen.add(rec["key"])
                    for stage, key in STAGES.items():
                        for metric, value in rec["test"][key].items():
                            table[(rec["method"], rec["dataset"])][stage][metric].append(value)
    return table


def _mean_nll(table, method: str, dataset: str, stage: str) -> float:
    return float(np.mean(table[(method, dataset)][stage]["nll"]))


def compare(table, method: str, reference: str | tuple[str, ...], stage: str):
    """Per-dataset relative NLL change of ``method`` against ``reference`` at ``stage``.

    A tuple ``reference`` is the per-dataset better (lower mean test NLL at that stage)
    of its methods: a hindsight choice, so the comparison favours the reference.
    """
    refs = (reference,) if isinstance(reference, str) else tuple(reference)
    datasets = sorted(
        d for (m, d) in table if m == method and all((r, d) in table for r in refs)
    )
    changes, acc = [], []
    for d in datasets:
        best = min(refs, key=lambda r: _mean_nll(table, r, d, stage))
        a, b = _mean_nll(table, method, d, stage), _mean_nll(table, best, d, stage)
        changes.append(100.0 * (a - b) / b)
        acc.append(
            np.mean(table[(method, d)][stage]["accuracy"])
            - np.mean(table[(best, d)][stage]["accuracy"])
        )
    changes = np.asarray(changes)
    p = wilcoxon(changes).pvalue if len(changes) > 1 and np.any(changes != 0) else float("nan")
    return datasets, changes, np.asarray(acc), p


def _comparison_table(table, methods, reference, title: str) -> None:
    refs = (reference,) if isinstance(reference, str) else tuple(reference)
    print(f"## {title}\n")
    print("| method | stage | lower NLL on | median NLL change | Wilcoxon p | median accuracy change |")
    print("|---|---|---|---|---|---|")
    for method in methods:
        if method in refs:
            continue
        for stage in STAGES:
            ds, ch, acc, p = compare(table, method, reference, stage)
            if not len(ds):
                continue
            print(
                f"| {method} | {stage} | {int(np.sum(ch < 0))}/{len(ds)} | "
                f"{np.median(ch):+.2f} % | {p:.3g} | {100 * np.median(acc):+.2f} pt |"
            )
    print()


def plot_changes(
    table, methods: list[str], reference: str, path: Path, *, stage: str = "ts", limit: float = 25.0
) -> None:
    """Dot plot of the per-dataset relative change in test NLL of ``methods`` against
    ``reference`` at ``stage``; changes beyond ``limit`` % are drawn at the edge as arrows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_method = {}
    for method in methods:
        datasets, changes, _, p = compare(table, method, reference, stage)
        per_method[method] = (dict(zip(datasets, changes, strict=True)), p)
    order = sorted(per_method[methods[0]][0], key=lambda d: per_method[methods[0]][0][d])
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(order) + 1.6))
    offsets = np.linspace(-0.25, 0.25, len(methods)) if len(methods) > 1 else [0.0]
    for offset, method in zip(offsets, methods, strict=True):
        changes, p = per_method[method]
        ys = [i + offset for i, d in enumerate(order) if d in changes]
        xs = np.array([changes[d] for d in order if d in changes])
        clipped = np.clip(xs, -limit, limit)
        inside = np.abs(xs) <= limit
        label = (
            f"{method}: {int(np.sum(xs < 0))}/{len(xs)} lower, median {np.median(xs):+.2f} %, "
            f"p = {p:.2g}"
        )
        points = ax.scatter(clipped[inside], np.asarray(ys)[inside], s=22, label=label)
        for x, y, raw in zip(clipped[~inside], np.asarray(ys)[~inside], xs[~inside], strict=True):
            ax.scatter([x], [y], marker=">" if raw > 0 else "<", s=40, color=points.get_facecolor()[0])
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.axvline(-2.0, color="grey", linewidth=0.8, linestyle="--", label="the bar's median (−2 %)")
    ax.set_yticks(range(len(order)), order)
    ax.set_xlim(-limit * 1.05, limit * 1.05)
    stage_name = "after temperature scaling" if stage == "ts" else "raw"
    ax.set_xlabel(f"change in test NLL vs {reference}, {stage_name} (%; lower is better)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(order)), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="one or more results folders")
    parser.add_argument("--confirm-seeds", nargs="+", type=int, default=[3, 4, 5])
    parser.add_argument("--references", nargs="+", default=["ce", "label_smoothing"])
    parser.add_argument(
        "--best-of", nargs="*", default=["ce", "label_smoothing"],
        help="also compare with the per-dataset better of these methods (none: skip)",
    )
    parser.add_argument(
        "--plot", type=Path, default=None,
        help="also draw the per-dataset changes against the first reference to this PNG",
    )
    parser.add_argument(
        "--plot-methods", nargs="+", default=None,
        help="methods drawn by --plot (default: every method but the references)",
    )
    args = parser.parse_args(argv)
    table = load(args.results, set(args.confirm_seeds))
    methods = sorted({m for m, _ in table})
    datasets = sorted({d for _, d in table})
    print(f"# Paired comparisons, confirm seeds {args.confirm_seeds}, {len(datasets)} datasets\n")
    for reference in args.references:
        if reference in methods:
            _comparison_table(table, methods, reference, f"Against `{reference}`")
    best_of = tuple(r for r in args.best_of if r in methods)
    if len(best_of) > 1:
        names = " and ".join(f"`{r}`" for r in best_of)
        _comparison_table(
            table, methods, best_of, f"Against the better of {names} (per dataset and stage)"
        )
    print("## Test NLL after temperature scaling, mean over confirm seeds\n")
    print("| dataset | " + " | ".join(methods) + " |")
    print("|---" * (len(methods) + 1) + "|")
    for d in datasets:
        cells = []
        values = {m: np.mean(table[(m, d)]["ts"]["nll"]) for m in methods if (m, d) in table}
        best = min(values.values()) if values else None
        for m in methods:
            if m not in values:
                cells.append("–")
            else:
                text = f"{values[m]:.4f}"
                cells.append(f"**{text}**" if values[m] == best else text)
        print(f"| {d} | " + " | ".join(cells) + " |")
    print("\n## Raw test NLL (no temperature scaling), mean over confirm seeds\n")
    print("| dataset | " + " | ".join(methods) + " |")
    print("|---" * (len(methods) + 1) + "|")
    for d in datasets:
        cells = [
            f"{np.mean(table[(m, d)]['raw']['nll']):.4f}" if (m, d) in table else "–"
            for m in methods
        ]
        print(f"| {d} | " + " | ".join(cells) + " |")
    if args.plot is not None:
        drawn = args.plot_methods or [m for m in methods if m not in args.references]
        unknown = sorted(set(drawn) - set(methods))
        if unknown:
            parser.error(f"--plot-methods: no records of {unknown}; methods are {methods}")
        plot_changes(table, drawn, args.references[0], args.plot)
        print(f"\nFigure: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
