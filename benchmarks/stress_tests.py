"""Stress tests: run the corruption and OOD config(s), then write the tables and figures.

One command produces everything (``docs/stress_tests.md`` describes the output)::

    python benchmarks/stress_tests.py --jobs 2 --out docs/figures/stress_tests

It runs ``benchmarks/configs/stress_tests.json`` (or every ``--config`` given, pooled)
through the runner, resumable: fits already recorded are kept. Then it reads the
confirm-seed records (the lab's results frame). Every number is a median over datasets
of a mean over confirm seeds; a dataset counts in a table only where every method has
the value (a corruption a dataset skips, the category swap of a dataset without
categorical features, leaves it out of that corruption). Written to ``--out``:

* ``stress_tests.md``: per corruption family, NLL, ECE and accuracy per severity (and
  clean), raw and after temperature scaling (TS, fitted on the clean validation rows), with the mean over the severities; a summary of
  every method over all corruptions; per OOD set, AUROC, AUPR-in, AUPR-out and FPR at 95 %
  TPR by entropy and by max-probability, and the mean max-probability on the OOD rows;
  then paired statistics against ``--reference`` over (dataset, condition) pairs
  (Wilcoxon signed-rank) and average ranks, per family and pooled;
* ``stress_nll.png``, ``stress_ece.png``, ``stress_accuracy.png``: the metric against
  severity, one panel per family, one line per method (solid raw, dashed after the
  calibrator).

``--no-run`` only reports, from the existing results folder(s).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from nescal_bench import (
    average_ranks,
    paired_comparison,
    results_frame,
    unit_table,
)
from nescal_bench.studies import load_study_config, markdown_table, median, run_configs

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "benchmarks" / "configs" / "stress_tests.json"
#: The metrics of the corruption tables and figures, and of the OOD table.
SHIFT_METRICS = ("nll", "ece", "accuracy")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, action="append", help="a config to run (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (runner --jobs)")
    parser.add_argument("--out", type=Path, help="folder of the tables and figures")
    parser.add_argument("--no-run", action="store_true", help="report from existing results only")
    parser.add_argument("--reference", default="ce", help="the method of the paired statistics")
    return parser.parse_args(argv)


def complete(means, methods, conditions, stage: str, metric: str):
    """Seed means (datasets × (method, condition), ``conditions`` of every method) on the
    datasets where every method has every condition (``means``: the seed-mean value of
    every (stage, metric, dataset) row and (method, condition) column)."""
    columns = pd.MultiIndex.from_product([methods, conditions])
    try:
        table = means.loc[(stage, metric)]
    except KeyError:  # no record has this stage and metric
        table = pd.DataFrame(columns=columns, dtype=float)
    return table.reindex(columns=columns).dropna()


def _fmt(value: float, metric: str) -> str:
    return (
        "–" if np.isnan(value) else f"{100 * value:.1f}" if metric == "accuracy" else f"{value:.4f}"
    )


def family_tables(frame, means, families, stages) -> list[str]:
    """Per family: method × stage × metric rows; clean, each severity, the mean over them."""
    lines = [
        "## Corruptions, per severity",
        "",
        "Median over datasets of the seed-mean metric "
        "(accuracy in %); `mean` is the median over datasets of the mean over the severities.",
        "",
    ]
    conditions = frame.attrs["conditions"]
    methods = sorted(frame["method"].unique())
    for family, names in families.items():
        columns = ["clean", *names]
        n = len(complete(means, methods, columns, "raw", "nll"))
        lines += [f"### `{family}` ({conditions[names[0]].kind}), {n} datasets", ""]
        if n == 0:
            lines += ["No dataset has every severity for every method.", ""]
            continue
        rows = []
        for method in methods:
            for stage, label in stages:
                for metric in SHIFT_METRICS:
                    table = complete(means, methods, columns, stage, metric)[method]
                    cells = [*table.median(), median(table[names].mean(axis=1))]
                    rows.append([method, label, metric, *(_fmt(v, metric) for v in cells)])
        header = [
            "method",
            "stage",
            "metric",
            "clean",
            *(f"s{conditions[c].severity}" for c in names),
            "mean",
        ]
        lines += [markdown_table(header, rows), ""]
    return lines


def summary_table(means, methods, families, stages) -> list[str]:
    """Every method over all corruptions: the median over datasets of the mean over every
    corruption condition a dataset has (the (dataset, condition) pairs every method has)."""
    names = [c for members in families.values() for c in members]
    if not names:
        return []
    rows = []
    for method in methods:
        for stage, label in stages:
            cells = []
            for metric in SHIFT_METRICS:
                table = means.loc[(stage, metric)].reindex(
                    columns=pd.MultiIndex.from_product([methods, ["clean", *names]])
                )
                every = table.notna().T.groupby(level=1).all().T  # (dataset, condition) pairs
                per = table[method].where(every)
                clean, corrupted = per.pop("clean"), per.mean(axis=1)
                keep = clean.notna() & corrupted.notna()
                cells += [_fmt(median(clean[keep]), metric), _fmt(median(corrupted[keep]), metric)]
            rows.append([method, label, *cells])
    columns = [f"{m} {w}" for m in SHIFT_METRICS for w in ("clean", "corrupted")]
    header = ["method", "stage", *columns]
    return [
        "## Corruptions, summary",
        "",
        "Per dataset the mean over every corruption condition it "
        "has (all families and severities), then the median over datasets; `clean` the same "
        "for the test rows.",
        "",
        markdown_table(header, rows),
        "",
    ]


def ood_tables(frame, means, ood, stages) -> list[str]:
    if not ood:
        return []
    conditions = frame.attrs["conditions"]
    methods = sorted(frame["method"].unique())
    metrics = conditions[ood[0]].metrics  # every OOD set records the same
    lines = [
        "## Out-of-distribution detection",
        "",
        "Median over datasets; the unprefixed scores "
        "rank rows by predictive entropy, `MSP` by the largest probability; `max-probability` "
        "is the mean largest probability on the out-of-distribution rows.",
        "",
    ]
    for name in ood:
        n = len(complete(means, methods, [name], "raw", "auroc"))
        lines += [f"### `{name}` ({conditions[name].kind}), {n} datasets", ""]
        if n == 0:
            lines += ["No dataset has this set for every method.", ""]
            continue
        rows = []
        for method in methods:
            for stage, label in stages:
                values = [complete(means, methods, [name], stage, m)[method][name] for m in metrics]
                rows.append([method, label, *(f"{median(v):.4f}" for v in values)])
        labels = [info.label for info in metrics.values()]
        lines += [markdown_table(["method", "stage", *labels], rows), ""]
    return lines


def statistics_tables(frame, families, ood, stages, reference: str) -> list[str]:
    """Paired statistics against ``reference`` over (dataset, condition) pairs, and average
    ranks, per family, over all corruptions and over all OOD sets."""
    methods = sorted(frame["method"].unique())
    if reference not in methods:
        return [f"No statistics: the reference method {reference!r} has no records.", ""]
    conditions = frame.attrs["conditions"]
    scopes = [(f"`{f}`", names, ("nll", "ece")) for f, names in families.items()]
    if len(families) > 1:
        scopes.append(
            ("all corruptions", [c for n in families.values() for c in n], ("nll", "ece"))
        )
    if ood:
        scopes.append(("all OOD sets", ood, ("auroc", "msp_auroc", "max_proba")))
    rows = []
    for scope, names, metrics in scopes:
        for metric in metrics:
            info = conditions[names[0]].metrics[metric]
            for stage, label in stages:
                table = unit_table(frame, names, stage, metric).reindex(columns=methods)
                ranks, _ = average_ranks(table, greater_is_better=info.greater_is_better)
                for method in (m for m in methods if m != reference):
                    c = paired_comparison(
                        table[method].to_dict(),
                        {reference: table[reference].to_dict()},
                        greater_is_better=info.greater_is_better,
                    )
                    if c is not None:
                        better = f"{c.n_better}/{len(c.datasets)}"
                        cells = [better, f"{c.median_change:+.2f} %", f"{c.p_value:.3g}"]
                        average = [f"{ranks[m]:.2f}" for m in methods]
                        rows.append([scope, info.label, label, method, *cells, *average])
    header = ["scope", "metric", "stage", "method", "better on", "median change", "Wilcoxon p"]
    header += [f"rank {m}" for m in methods]
    return [
        f"## Paired statistics against `{reference}`",
        "",
        "Over (dataset, condition) pairs: "
        "the pairs where the method is better, the median relative change, the two-sided "
        "Wilcoxon signed-rank p-value of the changes; average ranks (1 = best) of every method "
        "over the pairs all of them have. The same, per family: `nescal-bench compare RESULTS "
        "--condition FAMILY --metric METRIC`.",
        "",
        markdown_table(header, rows),
        "",
    ]


def draw(frame, means, families, stages, out: Path) -> list[Path]:
    from matplotlib.figure import Figure

    written, conditions = [], frame.attrs["conditions"]
    methods = sorted(frame["method"].unique())
    for metric, title in (
        (("nll", "NLL"), ("ece", "ECE"), ("accuracy", "accuracy")) if families else ()
    ):
        fig = Figure(figsize=(3.3 * len(families), 3.2))
        axes = fig.subplots(1, len(families), squeeze=False)[0]
        for ax, (family, names) in zip(axes, families.items(), strict=True):
            severities = [0, *(conditions[c].severity for c in names)]
            for i, method in enumerate(methods):
                for (stage, label), style in zip(stages, ("-", "--"), strict=False):
                    table = complete(means, methods, ["clean", *names], stage, metric)[method]
                    if len(table):
                        line = {"marker": "o", "ms": 3, "color": f"C{i}"}
                        ax.plot(
                            severities, table.median(), style, **line, label=f"{method} ({label})"
                        )
            ax.set(
                title=f"{family} ({len(table)} datasets)",
                xlabel="severity (0: clean)",
                xticks=severities,
            )
            ax.tick_params(labelsize=8)
        axes[0].set_ylabel(f"test {title}, median over datasets")
        axes[-1].legend(fontsize=7)
        fig.tight_layout()
        written.append(out / f"stress_{metric}.png")
        fig.savefig(written[-1], dpi=110)
    return written


def main(argv=None) -> int:
    args = parse_args(argv)
    # --no-run reads the records alone: no data, no anchor imported
    configs = [load_study_config(p, run=not args.no_run) for p in args.config or [CONFIG]]
    if not args.no_run:
        run_configs(configs, jobs=args.jobs)
    outputs = [config.output for config in configs]
    frame = results_frame(outputs)
    if frame.empty:
        print(f"no records in {outputs}", file=sys.stderr)
        return 1
    stages = [("raw", "raw"), ("temperature", "TS")]
    if "temperature" not in frame.attrs["stages"]:
        stages.pop()
    families: dict[str, list[str]] = {}
    for name, condition in frame.attrs["conditions"].items():
        if hasattr(condition, "family"):
            families.setdefault(condition.family, []).append(name)
    ood = [n for n, c in frame.attrs["conditions"].items() if "auroc" in c.metrics]
    # the seed-mean value of every (stage, metric, dataset) and (method, condition)
    means = frame.pivot_table(
        index=["stage", "metric", "dataset"], columns=["method", "condition"], values="value"
    )
    out = args.out or Path(configs[0].output) / "stress_tests"
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# Stress tests: {', '.join(outputs)}",
        "",
        f"{frame['dataset'].nunique()} datasets, methods {sorted(frame['method'].unique())}, confirm seeds "
        f"{frame.attrs['seeds']}; TS = `temperature` fitted on the clean validation rows.",
        "",
        *family_tables(frame, means, families, stages),
        *summary_table(means, sorted(frame["method"].unique()), families, stages),
        *ood_tables(frame, means, ood, stages),
        *statistics_tables(frame, families, ood, stages, args.reference),
    ]
    text = "\n".join(lines)
    (out / "stress_tests.md").write_text(text + "\n")
    for path in [out / "stress_tests.md", *draw(frame, means, families, stages, out)]:
        print(f"wrote {path}")
    print(f"\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
