"""Stress tests: run the corruption and OOD config(s), then write the tables and figures.

One command produces everything (``docs/stress_tests.md`` describes the output)::

    python benchmarks/stress_tests.py --jobs 2 --out docs/figures/stress_tests

It runs ``benchmarks/configs/stress_tests.json`` (or every ``--config`` given, pooled)
through the runner, resumable: fits already recorded are kept. Then it reads the
confirm-seed records. Every number is a median over datasets of a mean over confirm
seeds; a dataset counts in a table only where every method has the value (a corruption a
dataset skips, the category swap of a dataset without categorical features, leaves it
out of that corruption). Written to ``--out``:

* ``stress_tests.md``: per corruption family, NLL, ECE and accuracy per severity (and
  clean), raw and after the calibrator (``--calibrator``, default temperature scaling
  fitted on the clean validation rows), with the mean over the severities; a summary of
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

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "benchmarks" / "configs" / "stress_tests.json"

#: The metrics of the corruption tables and figures.
SHIFT_METRICS = ("nll", "ece", "accuracy")
#: The OOD metrics of the OOD table (entropy score, max-probability score, overconfidence).
OOD_COLUMNS = (
    "auroc",
    "aupr_in",
    "aupr_out",
    "fpr95",
    "msp_auroc",
    "msp_aupr_in",
    "msp_aupr_out",
    "msp_fpr95",
    "max_proba",
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", type=Path, action="append", help="a config to run and report (repeatable)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (runner --jobs)")
    parser.add_argument(
        "--out",
        type=Path,
        help="folder of the tables and figures (default: <first config's output>/stress_tests)",
    )
    parser.add_argument("--no-run", action="store_true", help="report from existing results only")
    parser.add_argument("--calibrator", default="temperature", help="the stage called 'after TS'")
    parser.add_argument("--reference", default="ce", help="the method of the paired statistics")
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- reading
class Study:
    """The pooled results, and what the tables need from them."""

    def __init__(self, pooled, calibrator: str) -> None:
        self.pooled = pooled
        self.methods = pooled.methods
        self.stages = [("raw", "raw")]
        if calibrator in pooled.stages:
            self.stages.append((calibrator, "TS" if calibrator == "temperature" else calibrator))
        self.families = pooled.families
        self.ood = [name for name, c in pooled.conditions.items() if "auroc" in type(c).metrics]
        self._means: dict[tuple, dict[str, float]] = {}

    def means(self, method: str, condition: str, stage: str, metric: str) -> dict[str, float]:
        """``dataset -> mean over seeds`` (cached)."""
        key = (method, condition, stage, metric)
        if key not in self._means:
            self._means[key] = self.pooled.means(*key)
        return self._means[key]

    def complete(self, conditions, stage: str, metric: str) -> dict[str, dict[str, list[float]]]:
        """``method -> dataset -> [value per condition]`` on the datasets where every method
        has every condition."""
        values = {m: {c: self.means(m, c, stage, metric) for c in conditions} for m in self.methods}
        datasets = [
            d
            for d in self.pooled.datasets
            if all(d in values[m][c] for m in self.methods for c in conditions)
        ]
        return {
            m: {d: [values[m][c][d] for c in conditions] for d in datasets} for m in self.methods
        }


def _median(values) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def _fmt(value: float, metric: str) -> str:
    if np.isnan(value):
        return "–"
    return f"{100 * value:.1f}" if metric == "accuracy" else f"{value:.4f}"


# --------------------------------------------------------------------------- tables
def family_tables(study: Study) -> list[str]:
    """Per family: method × stage × metric rows; clean, each severity, the mean over them."""
    lines = ["## Corruptions, per severity", ""]
    lines += [
        "Median over datasets of the seed-mean metric (accuracy in %); `mean` is the median "
        "over datasets of the mean over the severities.",
        "",
    ]
    for family, conditions in study.families.items():
        severities = [study.pooled.conditions[c].severity for c in conditions]
        kind = study.pooled.conditions[conditions[0]].kind
        columns = ["clean", *conditions]
        first = study.complete(columns, "raw", "nll")
        n = len(next(iter(first.values()), {}))
        lines += [f"### `{family}` ({kind}), {n} datasets", ""]
        if n == 0:
            lines += ["No dataset has every severity for every method.", ""]
            continue
        header = " | ".join(f"s{s}" for s in severities)
        lines += [
            f"| method | stage | metric | clean | {header} | mean |",
            "|---|---|---|---" + "|---" * len(severities) + "|---|",
        ]
        for method in study.methods:
            for stage, label in study.stages:
                for metric in SHIFT_METRICS:
                    table = study.complete(columns, stage, metric)[method]
                    per_dataset = np.array(list(table.values()))
                    cells = [_median(per_dataset[:, j]) for j in range(per_dataset.shape[1])]
                    mean = _median(per_dataset[:, 1:].mean(axis=1))
                    values = " | ".join(_fmt(v, metric) for v in [*cells, mean])
                    lines.append(f"| {method} | {label} | {metric} | {values} |")
        lines.append("")
    return lines


def summary_table(study: Study) -> list[str]:
    """Every method over all corruptions: the median over datasets of the mean over every
    corruption condition a dataset has (the same ones for every method)."""
    conditions = [c for members in study.families.values() for c in members]
    if not conditions:
        return []
    lines = [
        "## Corruptions, summary",
        "",
        "Per dataset the mean over every corruption condition it has (all families and "
        "severities), then the median over datasets; `clean` the same for the test rows.",
        "",
        "| method | stage | "
        + " | ".join(f"{m} clean | {m} corrupted" for m in SHIFT_METRICS)
        + " |",
        "|---|---" + "|---|---" * len(SHIFT_METRICS) + "|",
    ]
    for method in study.methods:
        for stage, label in study.stages:
            cells = []
            for metric in SHIFT_METRICS:
                clean, corrupted = [], []
                for dataset in study.pooled.datasets:
                    have = {}
                    for c in ["clean", *conditions]:
                        values = [study.means(m, c, stage, metric) for m in study.methods]
                        if all(dataset in v for v in values):
                            have[c] = study.means(method, c, stage, metric)[dataset]
                    if "clean" in have and len(have) > 1:
                        clean.append(have.pop("clean"))
                        corrupted.append(np.mean(list(have.values())))
                cells += [_fmt(_median(clean), metric), _fmt(_median(corrupted), metric)]
            lines.append(f"| {method} | {label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def ood_tables(study: Study) -> list[str]:
    if not study.ood:
        return []
    labels = [study.pooled.conditions[study.ood[0]].metrics[m].label for m in OOD_COLUMNS]
    lines = [
        "## Out-of-distribution detection",
        "",
        "Median over datasets; the unprefixed scores rank rows by predictive entropy, `MSP` by "
        "the largest probability; `max-probability` is the mean largest probability on the "
        "out-of-distribution rows.",
        "",
    ]
    for name in study.ood:
        condition = study.pooled.conditions[name]
        first = study.complete([name], "raw", "auroc")
        n = len(next(iter(first.values()), {}))
        lines += [f"### `{name}` ({condition.kind}), {n} datasets", ""]
        if n == 0:
            lines += ["No dataset has this set for every method.", ""]
            continue
        lines += [
            "| method | stage | " + " | ".join(labels) + " |",
            "|---|---" + "|---" * len(labels) + "|",
        ]
        for method in study.methods:
            for stage, label in study.stages:
                cells = [
                    _median([v[0] for v in study.complete([name], stage, m)[method].values()])
                    for m in OOD_COLUMNS
                ]
                lines.append(
                    f"| {method} | {label} | " + " | ".join(f"{v:.4f}" for v in cells) + " |"
                )
        lines.append("")
    return lines


def statistics_tables(study: Study, reference: str) -> list[str]:
    """Paired statistics against ``reference`` over (dataset, condition) pairs, and average
    ranks, per family, over all corruptions and over all OOD sets."""
    from nescal_sklearn.benchmark._stats import mean_ranks, paired_comparison

    if reference not in study.methods:
        return [f"No statistics: the reference method {reference!r} has no records.", ""]
    scopes = [(f"`{f}`", members, ("nll", "ece")) for f, members in study.families.items()]
    everything = [c for members in study.families.values() for c in members]
    if len(study.families) > 1:
        scopes.append(("all corruptions", everything, ("nll", "ece")))
    if study.ood:
        scopes.append(("all OOD sets", study.ood, ("auroc", "msp_auroc", "max_proba")))
    others = [m for m in study.methods if m != reference]
    lines = [
        f"## Paired statistics against `{reference}`",
        "",
        "Over (dataset, condition) pairs: the pairs where the method is better, the median "
        "relative change, the two-sided Wilcoxon signed-rank p-value of the changes; average "
        "ranks (1 = best) of every method over the pairs all of them have. The same, per "
        "family: `nescal-bench compare RESULTS --condition FAMILY --metric METRIC`.",
        "",
        "| scope | metric | stage | method | better on | median change | Wilcoxon p | "
        + " | ".join(f"rank {m}" for m in study.methods)
        + " |",
        "|---|---|---|---|---|---|---" + "|---" * len(study.methods) + "|",
    ]
    for scope, conditions, metrics in scopes:
        for metric in metrics:
            info = study.pooled.conditions[conditions[0]].metrics[metric]
            for stage, label in study.stages:
                cells = {m: study.pooled.cells(m, conditions, stage, metric) for m in study.methods}
                ranks, _ = mean_ranks(cells, greater_is_better=info.greater_is_better)
                rank_text = " | ".join(f"{ranks[m]:.2f}" for m in study.methods)
                for method in others:
                    c = paired_comparison(
                        cells[method],
                        {reference: cells[reference]},
                        greater_is_better=info.greater_is_better,
                    )
                    if c is None:
                        continue
                    lines.append(
                        f"| {scope} | {info.label} | {label} | {method} | "
                        f"{c.n_better}/{len(c.datasets)} | {c.median_change:+.2f} % | "
                        f"{c.p_value:.3g} | {rank_text} |"
                    )
    return [*lines, ""]


# --------------------------------------------------------------------------- figures
def draw(study: Study, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    families = list(study.families.items())
    if not families:
        return written
    for metric, title in (("nll", "NLL"), ("ece", "ECE"), ("accuracy", "accuracy")):
        fig, axes = plt.subplots(
            1, len(families), figsize=(3.3 * len(families), 3.2), squeeze=False
        )
        for ax, (family, conditions) in zip(axes[0], families, strict=True):
            severities = [0, *(study.pooled.conditions[c].severity for c in conditions)]
            n = 0
            for i, method in enumerate(study.methods):
                for (stage, label), style in zip(study.stages, ("-", "--"), strict=False):
                    table = study.complete(["clean", *conditions], stage, metric)[method]
                    if not table:
                        continue
                    n = len(table)
                    curve = np.median(np.array(list(table.values())), axis=0)
                    ax.plot(
                        severities,
                        curve,
                        style,
                        marker="o",
                        ms=3,
                        color=f"C{i}",
                        label=f"{method} ({label})",
                    )
            ax.set(
                title=f"{family} ({n} datasets)", xlabel="severity (0: clean)", xticks=severities
            )
            ax.tick_params(labelsize=8)
        axes[0, 0].set_ylabel(f"test {title}, median over datasets")
        axes[0, -1].legend(fontsize=7)
        fig.tight_layout()
        path = out / f"stress_{metric}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# --------------------------------------------------------------------------- main
def main(argv=None) -> int:
    args = parse_args(argv)
    from nescal_sklearn.benchmark import load_config, pool_results, run_benchmark

    configs = [load_config(path) for path in (args.config or [CONFIG])]
    if not args.no_run:
        for config in configs:
            resume = (Path(config.output) / "records").is_dir()
            run_benchmark(config, jobs=args.jobs, resume=resume, stream=sys.stderr)
    outputs = [config.output for config in configs]
    pooled = pool_results(outputs)
    if not pooled.values:
        print(f"no records in {outputs}", file=sys.stderr)
        return 1
    study = Study(pooled, args.calibrator)
    out = args.out or Path(configs[0].output) / "stress_tests"
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# Stress tests: {', '.join(outputs)}",
        "",
        f"{len(pooled.datasets)} datasets, methods {study.methods}, confirm seeds "
        f"{pooled.seeds}; TS = `{args.calibrator}` fitted on the clean validation rows.",
        "",
        *family_tables(study),
        *summary_table(study),
        *ood_tables(study),
        *statistics_tables(study, args.reference),
    ]
    text = "\n".join(lines)
    (out / "stress_tests.md").write_text(text + "\n")
    for path in [out / "stress_tests.md", *draw(study, out)]:
        print(f"wrote {path}")
    print()
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
