"""The plan of a run: which fits exist, their keys, and the grid point chosen per method.

Model selection: for each (dataset, method) whose grid has more than one point,
every point is fitted on every search seed; the point with the lowest mean
validation NLL wins (NLL of the raw model, or after the calibrator named by the
config's ``selection``; ties go to the first point in grid order). The chosen
point is then fitted on the confirm seeds, whose test metrics are the reported
results. A method with a single point skips the search.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._config import (
    BenchmarkConfig,
    Budget,
    CalibratorSpec,
    DatasetSpec,
    MethodSpec,
    OpenMLSettings,
    Splits,
)
from ._datasets import _data_dir
from ._records import record_key

__all__ = ["FitTask", "Plan", "build_plan", "expand_datasets", "select_point"]


@dataclass(frozen=True)
class FitTask:
    """Everything one fit needs; sent as is to a joblib or dask worker."""

    key: str
    dataset: DatasetSpec
    method: MethodSpec
    point: dict
    seed: int
    stage: str  # "search" or "confirm" (display only: not part of the key)
    estimator_params: dict
    splits: Splits
    budget: Budget
    calibrators: tuple[CalibratorSpec, ...]
    data_dir: str | None
    openml: OpenMLSettings
    identity: dict = field(repr=False)


def _identity(config: BenchmarkConfig, dataset, method, params, seed) -> dict:
    split = (
        {"task_validation": config.splits.task_validation}
        if dataset.kind == "openml_task"
        else {k: v for k, v in config.splits.to_json().items() if k != "task_validation"}
    )
    return {
        "dataset": {**dataset.to_json(), "max_rows": config.budget.max_rows},
        "method": {
            "name": method.name,
            "kind": "loss" if method.is_neural else "estimator",
            "target": method.loss or method.estimator,
            "params": params,
        },
        "seed": seed,
        "protocol": {
            "splits": split,
            "calibrators": [c.to_json() for c in config.calibrators],
        },
    }


def make_task(config: BenchmarkConfig, dataset, method, point, seed, stage) -> FitTask:
    """The fit of ``method`` at grid ``point`` on ``dataset`` with ``seed``."""
    params = method.estimator_params(point)
    if method.is_neural:
        params = {**config.budget.estimator_params(), **params}
    identity = _identity(config, dataset, method, params, seed)
    data_dir = os.path.abspath(_data_dir(config.data_dir))  # workers may run elsewhere
    return FitTask(
        key=record_key(identity),
        dataset=dataset,
        method=method,
        point=dict(point),
        seed=seed,
        stage=stage,
        estimator_params=params,
        splits=config.splits,
        budget=config.budget,
        calibrators=config.calibrators,
        data_dir=data_dir,
        openml=config.openml,
        identity=identity,
    )


@dataclass
class Plan:
    """Fits known before training, and the (dataset, method) pairs awaiting a selection."""

    config: BenchmarkConfig
    search: list[FitTask]
    confirm_fixed: list[FitTask]
    gridded: list[tuple[DatasetSpec, MethodSpec]]

    @property
    def n_confirm(self) -> int:
        return len(self.config.datasets) * len(self.config.methods) * len(self.config.confirm_seeds)

    @property
    def n_fits(self) -> int:
        """Number of distinct fits: a confirm fit equal to a search fit (same grid point and
        seed) runs once."""
        known = {t.key for t in self.search} | {t.key for t in self.confirm_fixed}
        seeds = self.config.confirm_seeds
        fresh = sum(seed not in self.config.search_seeds for seed in seeds)
        return len(known) + len(self.gridded) * fresh

    def confirm_tasks(self, records: dict[str, dict]) -> tuple[list[FitTask], list[tuple]]:
        """Confirm fits of the gridded pairs whose search is complete in ``records``.

        Returns the tasks, and the pairs still missing search records.
        """
        tasks, missing = [], []
        for dataset, method in self.gridded:
            choice = select_point(self.config, dataset, method, records)
            if choice is None:
                missing.append((dataset, method))
                continue
            point, _ = choice
            for seed in self.config.confirm_seeds:
                tasks.append(make_task(self.config, dataset, method, point, seed, "confirm"))
        return tasks, missing


def build_plan(config: BenchmarkConfig) -> Plan:
    """The fits of ``config`` (OpenML suites must already be expanded)."""
    search, confirm_fixed, gridded = [], [], []
    for dataset in config.datasets:
        for method in config.methods:
            points = method.points()
            if len(points) == 1:
                confirm_fixed.extend(
                    make_task(config, dataset, method, points[0], seed, "confirm")
                    for seed in config.confirm_seeds
                )
                continue
            gridded.append((dataset, method))
            search.extend(
                make_task(config, dataset, method, point, seed, "search")
                for point in points
                for seed in config.search_seeds
            )
    return Plan(config, search, confirm_fixed, gridded)


def select_point(
    config: BenchmarkConfig, dataset: DatasetSpec, method: MethodSpec, records: dict[str, Any]
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
            record = records.get(make_task(config, dataset, method, point, seed, "search").key)
            if record is None:
                return None
            values.append(record["validation"][config.selection]["nll"])
        scores.append((point, float(np.mean(values))))
    best = min(range(len(scores)), key=lambda i: (not np.isfinite(scores[i][1]), scores[i][1], i))
    return scores[best][0], scores


def expand_datasets(config: BenchmarkConfig) -> BenchmarkConfig:
    """Replace each OpenML suite by its tasks (fetched with openml-python), dropping repeats."""
    if not any(d.kind == "openml_suite" for d in config.datasets):
        return config
    from ._openml import expand_suite

    out: list[DatasetSpec] = []
    for dataset in config.datasets:
        expanded = (
            [DatasetSpec("openml_task", t) for t in expand_suite(dataset.ref, config.openml)]
            if dataset.kind == "openml_suite"
            else [dataset]
        )
        out.extend(d for d in expanded if d not in out)
    return config.with_datasets(tuple(out))
