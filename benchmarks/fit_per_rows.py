"""Fit seconds per 10,000 training rows, per set and method, and each method's median.

Reads the records of one run, or of several pooled (a search and its confirm on other
seeds; no fit). A set's figure for a method is the mean over the seeds it ran of
``fit_seconds`` divided by the rows it fitted (train, plus validation where the
method fitted on both), times 10,000; the last row holds each method's median over the
sets where it ran on every seed (the median of per-dataset figures), and ``n`` how many.

Examples
--------
    python benchmarks/fit_per_rows.py --results benchmarks/results/fold_search
    python benchmarks/fit_per_rows.py --results benchmarks/results/scale_confirm --methods new rec
    python benchmarks/fit_per_rows.py --results benchmarks/results/budget_search benchmarks/results/budget_confirm
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from nescal_bench import load_results
from nescal_bench.studies import markdown_table


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results", required=True, nargs="+", help="a run's folder, or several (pooled)"
    )
    parser.add_argument("--methods", nargs="+", help="the methods (default: every one)")
    return parser.parse_args(argv)


def per_rows(folders: list[str], methods: list[str] | None) -> tuple[list[str], dict[str, dict]]:
    """Each method's seconds per 10,000 fitted rows by set (seed means over the pooled
    folders; complete sets)."""
    runs, seeds, fit_on = defaultdict(list), set(), {}
    for folder in folders:
        results = load_results(folder)
        fit_on |= {method.name: method.fit_on for method in results.config.methods}
        for record in results.records.values():
            done = runs[record["method"], record["dataset"]]
            if any(r["seed"] == record["seed"] for r in done):
                raise ValueError(
                    f"results={folders!r} hold {record['method']!r} on {record['dataset']!r} "
                    f"at seed {record['seed']} twice; pool folders of different seeds."
                )
            done.append(record)
            seeds.add(record["seed"])
    methods = methods or sorted({m for m, _ in runs})
    sets = sorted({s for _, s in runs})
    figures = {m: {} for m in methods}
    for (method, dataset), records in runs.items():
        if method in figures and len(records) == len(seeds):
            both = "validation" in (fit_on[method] or "")
            per_row = [
                r["run"]["fit_seconds"] / (r["data"]["n_train"] + both * r["data"]["n_validation"])
                for r in records
            ]
            figures[method][dataset] = 1e4 * np.mean(per_row)
    return sets, figures


def main(argv=None) -> None:
    args = parse_args(argv)
    sets, figures = per_rows(args.results, args.methods)
    rows = [
        [s, *(f"{figures[m][s]:.2f}" if s in figures[m] else "–" for m in figures)] for s in sets
    ]
    medians = [f"{np.median(list(v.values())):.2f}" if v else "–" for v in figures.values()]
    rows += [["median", *medians], ["n", *(str(len(v)) for v in figures.values())]]
    print(markdown_table(["fit s / 10,000 rows", *figures], rows))


if __name__ == "__main__":
    main()
