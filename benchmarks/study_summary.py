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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="one or more results folders")
    parser.add_argument("--confirm-seeds", nargs="+", type=int, default=[3, 4, 5])
    parser.add_argument("--references", nargs="+", default=["ce", "label_smoothing"])
    parser.add_argument(
        "--best-of", nargs="*", default=["ce", "label_smoothing"],
        help="also compare with the per-dataset better of these methods (none: skip)",
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
