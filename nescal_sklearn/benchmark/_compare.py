"""``nescal-bench compare``: paired comparisons of methods across datasets, from results folders.

For every method against each reference and against the per-dataset better of several
references (a hindsight choice, which favours the reference), on the confirm seeds
only, at every stage (raw, each calibrator): the number of datasets where the method
is better on the seed-mean metric, the median relative change, the Wilcoxon
signed-rank p-value of the changes across datasets and the median accuracy change;
then per-dataset mean tables, and optionally a dot plot of the changes. Several
conditions (a corruption's severities, named by its family, or any list) can be pooled:
the paired units are then (dataset, condition) pairs, and average ranks are added.

Several folders are pooled: each contributes the fits its saved configuration reports
(the chosen grid point of every method, on the confirm seeds), and a fit recorded in two
of them (same record key) counts once, so methods run by different configurations on the
same datasets and seeds compare directly. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._conditions import CLEAN, Condition
from ._registry import METRICS, Metric
from ._results import load_results
from ._stats import PairedComparison, mean_ranks, paired_comparison

__all__ = ["CompareError", "PooledResults", "compare_markdown", "plot_comparison", "pool_results"]

#: How a stage is written in the tables (``ts``: after temperature scaling).
STAGE_LABELS = {"temperature": "ts"}
#: How a stage is written in titles.
STAGE_TITLES = {"temperature": "temperature scaling"}


class CompareError(ValueError):
    """A comparison that cannot be made (an unknown condition, metric or method)."""


@dataclass
class PooledResults:
    """Confirm-seed results of one or several results folders, pooled by record key.

    ``values[(method, dataset)][condition][stage][metric]`` lists the values over the
    seeds (``condition`` is ``"clean"`` for the test rows), in the order of
    ``fit_seeds[(method, dataset)]``; ``penalty[method]`` counts the pooled fits by
    ``penalty_status``.
    """

    seeds: list[int]
    stages: list[str] = field(default_factory=list)
    conditions: dict[str, Condition] = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    penalty: dict[str, dict[str, int]] = field(default_factory=dict)
    fit_seeds: dict = field(default_factory=dict)

    @property
    def methods(self) -> list[str]:
        return sorted({m for m, _ in self.values})

    @property
    def datasets(self) -> list[str]:
        return sorted({d for _, d in self.values})

    def add(self, record: dict) -> None:
        key = (record["method"], record["dataset"])
        self.fit_seeds.setdefault(key, []).append(record["seed"])
        by_condition = self.values.setdefault(key, {})
        measured = {CLEAN: record["test"], **record.get("conditions", {})}
        for condition, stages in measured.items():
            for stage, metrics in stages.items():
                cell = by_condition.setdefault(condition, {}).setdefault(stage, {})
                for metric, value in metrics.items():
                    cell.setdefault(metric, []).append(value)
        status = record.get("fit", {}).get("penalty_status")
        if status is not None:
            counts = self.penalty.setdefault(record["method"], {})
            counts[status] = counts.get(status, 0) + 1

    def subset(
        self, methods: Sequence[str] | None = None, stages: Sequence[str] | None = None
    ) -> PooledResults:
        """The same results restricted to ``methods`` and ``stages`` (None: all of them).

        Raises :class:`CompareError` naming a method or stage the results do not have.
        """
        for kind, asked, known in (
            ("method", methods, self.methods),
            ("stage", stages, self.stages),
        ):
            unknown = [x for x in (asked or ()) if x not in known]
            if unknown:
                raise CompareError(
                    f"no {kind} {unknown[0]!r} in the results; they have {list(known)}"
                )
        keep_methods = set(self.methods if methods is None else methods)
        keep_stages = [s for s in self.stages if stages is None or s in stages]
        values = {
            key: {
                condition: {s: v for s, v in by_stage.items() if s in keep_stages}
                for condition, by_stage in by_condition.items()
            }
            for key, by_condition in self.values.items()
            if key[0] in keep_methods
        }
        penalty = {m: dict(c) for m, c in self.penalty.items() if m in keep_methods}
        seeds = {k: list(v) for k, v in self.fit_seeds.items() if k[0] in keep_methods}
        return PooledResults(self.seeds, keep_stages, dict(self.conditions), values, penalty, seeds)

    @property
    def families(self) -> dict[str, list[str]]:
        """``family -> condition names`` of the corruptions at severities (by severity)."""
        out: dict[str, list[tuple[int, str]]] = {}
        for name, condition in self.conditions.items():
            family = getattr(condition, "family", None)
            if family is not None:
                out.setdefault(family, []).append((condition.severity, name))
        return {family: [name for _, name in sorted(items)] for family, items in out.items()}

    def resolve(self, condition: str | Sequence[str]) -> list[str]:
        """The condition names ``condition`` stands for: ``"clean"``, a condition, a
        family of severities (every one of them), or a list of these.

        Raises :class:`CompareError` for a name the results do not have.
        """
        asked = [condition] if isinstance(condition, str) else list(condition)
        names: list[str] = []
        for item in asked:
            if item == CLEAN or item in self.conditions:
                found = [item]
            elif item in self.families:
                found = self.families[item]
            else:
                families = f", families {list(self.families)}" if self.families else ""
                raise CompareError(
                    f"no evaluation condition {item!r} in the results; they have "
                    f"{[CLEAN, *self.conditions]}{families}"
                )
            names += [name for name in found if name not in names]
        if not names:
            raise CompareError("no evaluation condition given")
        return names

    def cells(
        self, method: str, conditions: Sequence[str], stage: str, metric: str
    ) -> dict[str, float]:
        """Seed means of ``method`` per dataset (one condition), or per ``"dataset,
        condition"`` pair (several)."""
        if len(conditions) == 1:
            return self.means(method, conditions[0], stage, metric)
        return {
            f"{dataset}, {condition}": value
            for condition in conditions
            for dataset, value in self.means(method, condition, stage, metric).items()
        }

    def means(self, method: str, condition: str, stage: str, metric: str) -> dict[str, float]:
        """``dataset -> mean over seeds`` of ``method`` (datasets that have the value)."""
        out = {}
        for (m, dataset), by_condition in self.values.items():
            values = by_condition.get(condition, {}).get(stage, {}).get(metric)
            if m == method and values:
                out[dataset] = float(np.mean(values))
        return out


def pool_results(
    folders: Sequence[str | Path], seeds: Sequence[int] | None = None
) -> PooledResults:
    """Pool the reported (confirm-seed) records of ``folders``; a key seen twice counts once.

    Parameters
    ----------
    folders : sequence of path
        Results folders of ``nescal-bench run``.
    seeds : sequence of int or None, default=None
        Confirm seeds to keep; None keeps every folder's own confirm seeds.
    """
    all_seeds: set[int] = set()
    pooled = PooledResults(seeds=list(seeds) if seeds is not None else [])
    seen: set[str] = set()
    for folder in folders:
        results = load_results(folder)
        config = results.config
        all_seeds.update(config.confirm_seeds)
        pooled.stages.extend(s for s in config.stages if s not in pooled.stages)
        for condition in config.conditions:
            pooled.conditions.setdefault(condition.name, condition)
        for by_method in results.reported(seeds).values():
            for records in by_method.values():
                for record in records:
                    if record["key"] not in seen:
                        seen.add(record["key"])
                        pooled.add(record)
    if seeds is None:
        pooled.seeds = sorted(all_seeds)
    return pooled


def _metric(pooled: PooledResults, names: Sequence[str], metric: str | None) -> tuple[str, Metric]:
    registries = [
        (METRICS, "nll")
        if name == CLEAN
        else (pooled.conditions[name].metrics, pooled.conditions[name].default_metric)
        for name in names
    ]
    registry, default = registries[0]
    if any(r is not registry for r, _ in registries):
        raise CompareError(
            f"the conditions {list(names)} record different metrics; pool shifted test rows "
            "or out-of-distribution sets, not both"
        )
    where = f"condition {names[0]!r}" if len(names) == 1 else f"conditions {list(names)}"
    name = default if metric is None else metric
    if name not in registry:
        raise CompareError(
            f"metric {name!r} is not recorded under {where}; expected one of {list(registry)}"
        )
    return name, registry[name]


def _stage_label(stage: str) -> str:
    return STAGE_LABELS.get(stage, stage)


def _stage_title(stage: str) -> str:
    return STAGE_TITLES.get(stage, f"{stage} calibration")


@dataclass(frozen=True)
class _Question:
    """What one comparison measures: conditions, a metric, and whether accuracy is shown."""

    conditions: tuple[str, ...]
    metric: str
    info: Metric
    with_accuracy: bool


def _compare(pooled, question: _Question, method: str, refs: Sequence[str], stage: str):
    q = question
    references = {r: pooled.cells(r, q.conditions, stage, q.metric) for r in refs}
    accuracy = None
    if q.with_accuracy:
        accuracy = (
            pooled.cells(method, q.conditions, stage, "accuracy"),
            {r: pooled.cells(r, q.conditions, stage, "accuracy") for r in refs},
        )
    return paired_comparison(
        pooled.cells(method, q.conditions, stage, q.metric),
        references,
        greater_is_better=q.info.greater_is_better,
        accuracy=accuracy,
    )


def _comparison_lines(pooled, question: _Question, refs: Sequence[str], title: str) -> list[str]:
    label = question.info.label
    word = "higher" if question.info.greater_is_better else "lower"
    lines = [f"## {title}", ""]
    if len(refs) > 1:
        lines += [
            "The better reference is chosen per dataset and stage in hindsight, which "
            "favours the reference.",
            "",
        ]
    lines += [
        f"| method | stage | {word} {label} on | median {label} change | Wilcoxon p "
        "| median accuracy change |",
        "|---|---|---|---|---|---|",
    ]
    for method in pooled.methods:
        if method in refs:
            continue
        for stage in pooled.stages:
            c = _compare(pooled, question, method, refs, stage)
            if c is None:
                continue
            accuracy = "–" if c.accuracy_change is None else f"{100 * c.accuracy_change:+.2f} pt"
            lines.append(
                f"| {method} | {_stage_label(stage)} | {c.n_better}/{len(c.datasets)} | "
                f"{c.median_change:+.2f} % | {c.p_value:.3g} | {accuracy} |"
            )
    return [*lines, ""]


def _dataset_table(pooled, question: _Question, stage: str, bold: bool) -> list[str]:
    methods = pooled.methods
    lines = ["| dataset | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    means = {}
    for m in methods:  # several conditions: the mean over those the dataset has
        by_dataset: dict[str, list[float]] = {}
        for condition in question.conditions:
            for dataset, value in pooled.means(m, condition, stage, question.metric).items():
                by_dataset.setdefault(dataset, []).append(value)
        means[m] = {dataset: float(np.mean(v)) for dataset, v in by_dataset.items()}
    pick = max if question.info.greater_is_better else min
    for dataset in pooled.datasets:
        values = {m: means[m][dataset] for m in methods if dataset in means[m]}
        best = pick(values.values()) if values else None
        cells = []
        for m in methods:
            if m not in values:
                cells.append("–")
                continue
            text = f"{values[m]:.4f}"
            cells.append(f"**{text}**" if bold and values[m] == best else text)
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    return lines


def _penalty_lines(pooled: PooledResults) -> list[str]:
    if not pooled.penalty:
        return []
    lines = [
        "",
        "## Fits the smoothing penalty never trained",
        "",
        "Pooled fits whose `penalty_status` is not `penalised` (no graph was built, or early "
        "stopping restored an epoch from before it): they equal plain warm-up training.",
        "",
        "| method | fits | not penalised |",
        "|---|---|---|",
    ]
    for method in sorted(pooled.penalty):
        counts = pooled.penalty[method]
        inactive = {s: n for s, n in sorted(counts.items()) if s != "penalised"}
        detail = ", ".join(f"{s} {n}" for s, n in inactive.items())
        lines.append(
            f"| {method} | {sum(counts.values())} | {sum(inactive.values())}"
            + (f" ({detail})" if detail else "")
            + " |"
        )
    return lines


def _describe(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _rank_lines(pooled: PooledResults, question: _Question) -> list[str]:
    """Average ranks of every method at every stage over the units all of them have."""
    methods = pooled.methods
    what = "(dataset, condition) pairs" if len(question.conditions) > 1 else "datasets"
    lines = [
        f"## Average ranks over {what} (1 = best {question.info.label})",
        "",
        "| stage | units | " + " | ".join(methods) + " |",
        "|---|---" + "|---" * len(methods) + "|",
    ]
    for stage in pooled.stages:
        values = {m: pooled.cells(m, question.conditions, stage, question.metric) for m in methods}
        ranks, n = mean_ranks(values, greater_is_better=question.info.greater_is_better)
        cells = " | ".join(f"{ranks[m]:.2f}" for m in methods)
        lines.append(f"| {_stage_label(stage)} | {n} | {cells} |")
    return [*lines, ""]


def compare_markdown(
    pooled: PooledResults,
    *,
    references: Sequence[str] = ("ce", "label_smoothing"),
    best_of: Sequence[str] = ("ce", "label_smoothing"),
    condition: str | Sequence[str] = CLEAN,
    metric: str | None = None,
) -> str:
    """The comparison tables as Markdown.

    Parameters
    ----------
    pooled : PooledResults
        From :func:`pool_results`.
    references : sequence of str, default=("ce", "label_smoothing")
        Methods every other is compared with (skipped when absent).
    best_of : sequence of str, default=("ce", "label_smoothing")
        Also compare with the per-dataset better of these (when at least two are present).
    condition : str or sequence of str, default="clean"
        The test rows (``"clean"``), an evaluation condition of the runs, a family of
        severities (``"noise"`` for ``noise@1`` ... ``noise@5``), or a list of these.
        Several conditions are pooled: the paired units are (dataset, condition) pairs,
        the per-dataset tables give the mean over the conditions, and a table of average
        ranks over the pairs is added.
    metric : str or None, default=None
        The compared metric; None: NLL, or the condition's own default (the entropy
        AUROC for an out-of-distribution condition).

    Raises
    ------
    CompareError
        For an unknown condition or metric, or conditions that record different metrics.
    """
    names = pooled.resolve(condition)
    name, info = _metric(pooled, names, metric)
    with_accuracy = names[0] == CLEAN or "accuracy" in pooled.conditions[names[0]].metrics
    question = _Question(tuple(names), name, info, with_accuracy and name != "accuracy")
    methods = pooled.methods
    pooling = len(names) > 1
    if pooling:
        under = f" pooled over {len(names)} conditions ({_describe(names)})"
    else:
        under = "" if names[0] == CLEAN else f" under `{names[0]}`"
    lines = [
        f"# Paired comparisons{under}, confirm seeds {pooled.seeds}, "
        f"{len(pooled.datasets)} datasets",
        "",
    ]
    if pooling:
        lines += [
            "Each paired unit is a (dataset, condition) pair: the counts, medians and the "
            "Wilcoxon test run over the pairs both methods have.",
            "",
        ]
    for reference in references:
        if reference in methods:
            lines += _comparison_lines(pooled, question, [reference], f"Against `{reference}`")
    present = [r for r in best_of if r in methods]
    if len(present) > 1:
        names_text = " and ".join(f"`{r}`" for r in present)
        title = f"Against the better of {names_text} (per dataset and stage)"
        lines += _comparison_lines(pooled, question, present, title)
    if pooling:
        lines += _rank_lines(pooled, question)
        label = f"{info.label}, mean over the {len(names)} conditions,"
    else:
        label = f"test {info.label}" if names[0] == CLEAN else f"{info.label}{under}"
    calibrated = [s for s in pooled.stages if s != "raw"]
    for stage in calibrated:
        title = f"{label[0].upper()}{label[1:]} after {_stage_title(stage)}"
        lines += [f"## {title}, mean over confirm seeds", ""]
        lines += _dataset_table(pooled, question, stage, bold=True)
        lines.append("")
    without = " or ".join(_stage_title(s) for s in calibrated)
    title = f"Raw {label}" + (f" (no {without})" if without else "")
    lines += [f"## {title}, mean over confirm seeds", ""]
    lines += _dataset_table(pooled, question, "raw", bold=False)
    lines += _penalty_lines(pooled)
    return "\n".join(lines) + "\n"


def plot_comparison(
    pooled: PooledResults,
    methods: Sequence[str],
    reference: str,
    path: Path,
    *,
    condition: str | Sequence[str] = CLEAN,
    metric: str | None = None,
) -> Path:
    """Draw the per-dataset (or, pooling conditions, per-pair) changes of ``methods``
    against ``reference`` (after the first calibrator, or raw without one) to the PNG
    ``path``; ``condition`` as in :func:`compare_markdown`.

    Raises
    ------
    CompareError
        For a method or reference without records, or an unknown condition or metric.
    """
    from ._figures import plot_changes

    names = pooled.resolve(condition)
    name, info = _metric(pooled, names, metric)
    unknown = sorted(set(methods) - set(pooled.methods))
    if unknown:
        raise CompareError(f"--plot-methods: no records of {unknown}; methods are {pooled.methods}")
    if reference not in pooled.methods:
        raise CompareError(f"--plot: no records of reference {reference!r}")
    stage = next((s for s in pooled.stages if s != "raw"), "raw")
    question = _Question(tuple(names), name, info, False)
    comparisons: dict[str, PairedComparison] = {}
    for method in methods:
        c = _compare(pooled, question, method, [reference], stage)
        if c is not None:
            comparisons[method] = c
    if not comparisons:
        raise CompareError(f"--plot: no dataset has both {list(methods)} and {reference!r}")
    if len(names) > 1:
        under = f" pooled over {len(names)} conditions"
    else:
        under = "" if names[0] == CLEAN else f" under {names[0]}"
    return plot_changes(
        comparisons,
        reference,
        path,
        axis_label=f"test {info.label}{under}",
        stage_label="raw" if stage == "raw" else f"after {_stage_title(stage)}",
        greater_is_better=info.greater_is_better,
    )
