"""The plan of a run: which fits exist, their identities and keys, and the grid point chosen.

Model selection: for each (dataset, method) whose grid has more than one point,
every point is fitted on every search seed; the point with the lowest mean
validation NLL wins (NLL of the raw model, or after the calibrator named by the
config's ``selection``; ties go to the first point in grid order). The chosen
point is then fitted on the confirm seeds, whose test metrics are the reported
results. A method with a single point skips the search.

Every fit's key is the hash of its identity (:func:`fit_identity`), which holds the
parameters the configuration states and, for ``NeSCalClassifier``, the recipe that fixes
every other setting: a library default that changes later leaves the keys (and what the
stored records mean) as they are.
:class:`FitIndex` (``plan.json`` in a results folder) maps every fit a run may need
to its key, so the report and ``compare`` find a run's records without importing
torch.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

import numpy as np

from ._base import RunError
from ._config import BenchmarkConfig, Budget, CalibratorSpec, Splits
from ._methods import MethodSpec, from_method, keyed, stated_params
from ._records import RECORD_FORMAT, identity_differences, record_key
from ._sources import DataContext, DatasetSource


def point_label(point: dict) -> str:
    """A grid point as text (``weight=0.5, n_neighbors=5``; ``no grid`` when empty)."""
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "no grid"


@dataclass(frozen=True)
class FitTask:
    """Everything one fit needs; sent as is to a joblib or dask worker."""

    key: str
    dataset: DatasetSource
    method: MethodSpec
    point: dict
    seed: int
    stage: str  # "search" or "confirm" (display only: not part of the key)
    estimator: Any  # unfitted; the fit clones it
    estimator_params: dict  # the parameters the config sets (budget, params, point)
    splits: Splits
    budget: Budget
    calibrators: tuple[CalibratorSpec, ...]
    conditions: tuple
    data: DataContext
    identity: dict = field(repr=False)


def fit_identity(
    config: BenchmarkConfig, dataset: DatasetSource, method: MethodSpec, params: dict, seed: int
) -> dict:
    """What a fit's record key is the hash of (see :func:`~._records.record_key`).

    The parameters are those the configuration states (``params``; for a
    ``NeSCalClassifier`` method they include the recipe, which fixes every other
    setting), never the library's resolved defaults: a default that changes later cannot
    change what a stored record means, nor orphan it.
    """
    identity = {
        "dataset": dataset.to_json(),
        "max_rows": config.budget.max_rows,
        "split": dataset.split_identity(config.splits),
        "method": method.name,
        "kind": method.kind.identity(),
        "estimator": keyed(method.kind.estimator_path),
        "params": stated_params(params),
        "seed": seed,
        "calibrators": [c.to_json() for c in config.calibrators],
        "conditions": [c.to_json() for c in config.conditions],
        "threads": config.budget.threads,
    }
    if method.fit_on != "train":  # absent by default: the keys of earlier runs stay valid
        identity["fit_on"] = method.fit_on
    return identity


def make_task(config: BenchmarkConfig, dataset, method, point, seed, stage, data) -> FitTask:
    """The fit of ``method`` at grid ``point`` on ``dataset`` with ``seed``."""
    params = config.estimator_params(method, point)
    identity = fit_identity(config, dataset, method, params, seed)
    return FitTask(
        key=record_key(identity),
        dataset=dataset,
        method=method,
        point=dict(point),
        seed=seed,
        stage=stage,
        estimator=config.build(method, point, seed),
        estimator_params=params,
        splits=config.splits,
        budget=config.budget,
        calibrators=config.calibrators,
        conditions=config.conditions,
        data=data,
        identity=identity,
    )


def _point_id(point: dict) -> str:
    return json.dumps(point, sort_keys=True)


@dataclass
class FitIndex:
    """The key of every fit a run may need, by (dataset, method, grid point, seed).

    Written to ``plan.json`` beside the records, so a results folder can be read
    (report, ``compare``) without rebuilding estimators.
    """

    entries: dict[tuple[str, str, str, int], str] = field(default_factory=dict)

    def add(self, task: FitTask) -> None:
        self.entries[(task.dataset.name, task.method.name, _point_id(task.point), task.seed)] = (
            task.key
        )

    def key(self, dataset: str, method: str, point: dict, seed: int) -> str | None:
        return self.entries.get((dataset, method, _point_id(point), seed))

    def keys(self) -> set[str]:
        return set(self.entries.values())

    def to_json(self) -> dict:
        fits = sorted(self.entries.items())
        return {
            "format": RECORD_FORMAT,
            "fits": [
                {"dataset": d, "method": m, "point": json.loads(p), "seed": s, "key": key}
                for (d, m, p, s), key in fits
            ],
        }

    @classmethod
    def from_json(cls, data: dict) -> FitIndex:
        return cls(
            {
                (f["dataset"], f["method"], _point_id(f["point"]), f["seed"]): f["key"]
                for f in data["fits"]
            }
        )


@dataclass
class Plan:
    """Fits known before training, the confirm fits of each gridded pair per grid point,
    and the index of all of them."""

    config: BenchmarkConfig
    search: list[FitTask]
    confirm_fixed: list[FitTask]
    gridded: list[tuple[DatasetSource, MethodSpec]]
    confirm_candidates: dict[tuple[str, str], dict[str, list[FitTask]]]
    index: FitIndex

    @property
    def n_confirm(self) -> int:
        return len(self.config.datasets) * len(self.config.methods) * len(self.config.confirm_seeds)

    @property
    def n_fits(self) -> int:
        """Number of distinct fits: a confirm fit equal to a search fit (same grid point and
        seed) runs once."""
        fresh = sum(seed not in self.config.search_seeds for seed in self.config.confirm_seeds)
        return len({t.key for t in self.search + self.confirm_fixed}) + len(self.gridded) * fresh

    def tasks(self) -> list[FitTask]:
        """Every task the plan may run (search, confirm, and each point's confirm fits)."""
        by_points = self.confirm_candidates.values()
        return (
            self.search
            + self.confirm_fixed
            + [t for by in by_points for ts in by.values() for t in ts]
        )

    def confirm_tasks(self, records: dict[str, dict]) -> tuple[list[FitTask], list[tuple]]:
        """Confirm fits of the gridded pairs whose search is complete in ``records``.

        Returns the tasks, and the pairs still missing search records.
        """
        tasks, missing = [], []
        for dataset, method in self.gridded:
            choice = select_point(self.config, self.index, dataset.name, method, records)
            if choice is None:
                missing.append((dataset, method))
                continue
            point, _ = choice
            tasks.extend(self.confirm_candidates[(dataset.name, method.name)][_point_id(point)])
        return tasks, missing


def build_plan(config: BenchmarkConfig, offline: bool = False) -> Plan:
    """The fits of ``config`` (OpenML suites must already be expanded)."""
    search, confirm_fixed, gridded, candidates = [], [], [], {}
    index = FitIndex()
    data = config.data_context(offline)

    def make(dataset, method, point, seed, stage):
        return make_task(config, dataset, method, point, seed, stage, data)

    for dataset in config.datasets:
        for method in config.methods:
            points = method.points()
            if len(points) == 1:
                confirm_fixed += [
                    make(dataset, method, points[0], s, "confirm") for s in config.confirm_seeds
                ]
                continue
            gridded.append((dataset, method))
            search += [
                make(dataset, method, p, s, "search") for p in points for s in config.search_seeds
            ]
            candidates[(dataset.name, method.name)] = {
                _point_id(p): [make(dataset, method, p, s, "confirm") for s in config.confirm_seeds]
                for p in points
            }
    plan = Plan(config, search, confirm_fixed, gridded, confirm_candidates=candidates, index=index)
    for task in plan.tasks():
        index.add(task)
    return plan


def fit_index(config: BenchmarkConfig) -> FitIndex:
    """The key of every fit ``config`` plans (the index of :func:`build_plan`), found
    without building an estimator or reading data: what reading its records needs, so a
    report from stored records needs neither the data nor an anchor's package."""
    index = FitIndex()
    for dataset, method in product(config.datasets, config.methods):
        points = method.points()
        seeds = [*(config.search_seeds if len(points) > 1 else ()), *config.confirm_seeds]
        for point, seed in product(points, seeds):
            params = config.estimator_params(method, point)
            key = record_key(fit_identity(config, dataset, method, params, seed))
            index.entries[(dataset.name, method.name, _point_id(point), seed)] = key
    return index


def select_point(
    config: BenchmarkConfig,
    index: FitIndex,
    dataset: str,
    method: MethodSpec,
    records: dict[str, Any],
) -> tuple[dict, list[tuple[dict, float]]] | None:
    """The grid point with the lowest mean validation NLL over the search seeds.

    Returns ``(point, [(point, score), ...])``, or None while a search record is
    missing. A single-point grid returns its point with an empty score list.
    """
    points = method.points()
    if len(points) == 1:
        return points[0], []
    scores = []
    for point in points:
        values = []
        for seed in config.search_seeds:
            record = records.get(index.key(dataset, method.name, point, seed))
            if record is None:
                return None
            # A calibrator that failed on this fit gives the point no score (NaN: last).
            stage = record["validation"].get(config.selection)
            values.append(np.nan if stage is None else stage["nll"])
        scores.append((point, float(np.mean(values))))
    best = min(range(len(scores)), key=lambda i: (not np.isfinite(scores[i][1]), scores[i][1], i))
    return scores[best][0], scores


def expand_datasets(config: BenchmarkConfig, offline: bool = False) -> BenchmarkConfig:
    """Replace each OpenML suite by its tasks (fetched with openml-python), dropping repeats."""
    out: list[DatasetSource] = []
    for dataset in config.datasets:
        out.extend(d for d in dataset.expand(config.data_context(offline)) if d not in out)
    return replace(config, datasets=tuple(out))


def stale_records(plan: Plan, records: dict[str, dict], where: str) -> list[str]:
    """Lines saying which records of a results folder no planned fit has (another key).

    A stale record with the same dataset, method, grid point and seed as a planned fit
    is compared with it: the lines name the identity fields that differ (a changed
    default, another library version, ...).
    """
    planned = {task.key: task for task in plan.tasks()}
    stale = [r for key, r in records.items() if key not in planned]
    if not stale:
        return []
    lines = [f"{len(stale)} records in {where} were written under another key and are ignored"]
    groups: dict[str, list[dict]] = defaultdict(list)
    for record in stale:
        key = plan.index.key(
            record.get("dataset"), record.get("method"), record.get("point", {}), record.get("seed")
        )
        if key is None:
            groups["no planned fit has their dataset, method, grid point and seed"].append(record)
            continue
        diffs = identity_differences(record.get("identity", {}), planned[key].identity)
        shown = "; ".join(diffs[:6]) + (f"; ... ({len(diffs) - 6} more)" if len(diffs) > 6 else "")
        groups[f"same dataset, method, grid point and seed as a planned fit; {shown}"].append(
            record
        )
    for text, members in sorted(groups.items(), key=lambda item: -len(item[1])):
        lines.append(f"  {len(members)}: {text}")
    return lines


def follows_records(task: FitTask) -> bool:
    """Whether a parameter of ``task`` follows another method's records
    (``{"from_method": NAME}``, see :func:`resolve`)."""
    return any(from_method(value) is not None for value in task.estimator_params.values())


def resolve(task: FitTask, plan: Plan, records: dict[str, dict]) -> FitTask:
    """``task`` with each parameter ``{"from_method": NAME}`` replaced by the fit seconds
    (``run.fit_seconds``) of method ``NAME``'s record on the same dataset and seed, at that
    method's chosen grid point; the record then holds the seconds in its ``params``.

    Raises
    ------
    RunError
        When ``records`` hold no such record (the method has not run, or failed).
    """
    from sklearn.base import clone

    resolved = {}
    for param, value in task.estimator_params.items():
        name = from_method(value)
        if name is None:
            continue
        source = next(m for m in plan.config.methods if m.name == name)
        choice = select_point(plan.config, plan.index, task.dataset.name, source, records)
        key = (
            None
            if choice is None
            else plan.index.key(task.dataset.name, name, choice[0], task.seed)
        )
        if key not in records:
            raise RunError(
                f"{param}={value!r} takes the fit seconds of method {name!r} on dataset "
                f"{task.dataset.name!r}, seed {task.seed}, and this run has no record of that "
                f"fit (not run, or failed): run {name!r} there first"
            )
        resolved[param] = float(records[key]["run"]["fit_seconds"])
    if not resolved:
        return task
    estimator = clone(task.estimator).set_params(**resolved)
    return replace(
        task, estimator=estimator, estimator_params={**task.estimator_params, **resolved}
    )
