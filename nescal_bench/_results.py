"""Results folders read back: their saved configuration, plan and records, and the one
tidy results frame that the report, ``compare``, ``calibrators`` and the studies read.

Reading a folder imports neither torch nor skorch, nor any import path its
configuration names: the configuration is read without the library's parameter checks
(it was checked when the run started) and the records are found through the keys saved
in ``plan.json``. Files of ``records/`` and ``failures/`` that are not valid records are
skipped with a :class:`~._records.CorruptRecordWarning` (and, for the report, moved
aside).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._base import ConfigError, RunError
from ._conditions import CLEAN
from ._config import BenchmarkConfig, validate_config
from ._plan import FitIndex, select_point
from ._records import RecordStore

#: The columns of :func:`results_frame`: one row per fit, condition, stage and metric.
#: ``calibration`` is the map a self-calibrating fit chose (``CrossFitClassifier``'s
#: ``calibration_``), None for the others; ``network_weight`` the summed weight of its
#: members other than gradient boosting, NaN for the others; ``dropped`` (the members
#: it dropped after the first fold) and ``member_status`` (member -> ``penalty_status``
#: -> fitted models) are a cross-fitted fit's, None for the others.
# A data table: column names wrapped at 100 columns, not one per line (fmt: skip).
COLUMNS = ("key", "dataset", "method", "seed", "condition", "stage", "metric", "value",
           "penalty_status", "fit_seconds", "cache_seconds", "calibration",
           "n_train", "n_test", "predict_seconds", "model_bytes", "network_weight", "dropped",
           "member_status")  # fmt: skip


@dataclass
class RunResults:
    """The configuration, fit index and records of one results folder."""

    path: Path
    config: BenchmarkConfig
    index: FitIndex
    records: dict[str, dict]
    move_corrupt: bool = False

    @property
    def stale(self) -> list[dict]:
        """Records no fit of the saved plan has (written under another key)."""
        planned = self.index.keys()
        return [record for key, record in self.records.items() if key not in planned]

    @property
    def failures(self) -> list[dict]:
        """The failures noted in the folder for fits of the saved plan."""
        planned = self.index.keys()
        failures = RecordStore(self.path).failures(move=self.move_corrupt)
        return [f for f in failures if f["key"] in planned]

    def selections(self) -> dict[tuple[str, str], tuple]:
        """``(dataset, method) -> (chosen point, [(point, mean validation NLL), ...])``
        where the search is complete."""
        out = {}
        for dataset in self.config.datasets:
            for method in self.config.methods:
                choice = select_point(self.config, self.index, dataset.name, method, self.records)
                if choice is not None:
                    out[(dataset.name, method.name)] = choice
        return out

    def reported(self, seeds=None) -> dict[str, dict[str, list[dict]]]:
        """The reported records: ``dataset -> method -> [record per confirm seed]`` at the
        chosen grid point (pairs whose search is incomplete are left out).

        ``seeds`` restricts the confirm seeds (default: the configuration's).
        """
        chosen = self.selections()
        seeds = self.config.confirm_seeds if seeds is None else seeds
        out: dict = {}
        for dataset in self.config.datasets:
            for method in self.config.methods:
                if (dataset.name, method.name) not in chosen:
                    continue
                point = chosen[(dataset.name, method.name)][0]
                keys = [
                    self.index.key(dataset.name, method.name, point, seed)
                    for seed in self.config.confirm_seeds
                    if seed in seeds
                ]
                found = [self.records[key] for key in keys if key in self.records]
                if found:
                    out.setdefault(dataset.name, {})[method.name] = found
        return out

    def rows(self, seeds=None, seen: set | None = None) -> list[tuple]:
        """The rows of :func:`results_frame` of the reported records (each key once:
        those in ``seen`` are skipped, and added to it)."""
        seen = set() if seen is None else seen
        out = []
        for by_method in self.reported(seeds).values():
            for records in by_method.values():
                for record in (r for r in records if r["key"] not in seen):
                    seen.add(record["key"])
                    out.extend(_rows(record))
        return out

    def frame(self):
        """The results frame of this folder alone (see :func:`results_frame`)."""
        config = self.config
        return _frame(
            self.rows(),
            stages=config.stages,
            seeds=list(config.confirm_seeds),
            conditions={c.name: c for c in config.conditions},
            datasets=[d.name for d in config.datasets],
        )


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunError(f"{path}: cannot be read as JSON ({exc}); rerun its config") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: expected a JSON object; rerun its config")
    return data


def load_results(results_dir: str | Path, *, move_corrupt: bool = False) -> RunResults:
    """Read the ``config.json``, ``plan.json`` and records that ``run`` wrote in ``results_dir``.

    Parameters
    ----------
    results_dir : path
        The ``output`` of a run.
    move_corrupt : bool, default=False
        Move files of ``records/`` and ``failures/`` that are not valid records to their
        ``corrupt/`` subfolder (they are skipped, with a warning, either way).

    Raises
    ------
    FileNotFoundError
        If the folder lacks ``config.json`` or ``plan.json``.
    RunError
        If one of them is not readable JSON of the expected layout.
    """
    results_dir = Path(results_dir)
    path = results_dir / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"No config.json in results directory {str(results_dir)!r}; is it the 'output' of a run?"
        )
    plan = results_dir / "plan.json"
    if not plan.is_file():
        raise FileNotFoundError(
            f"No plan.json in results directory {str(results_dir)!r}: it was written by an "
            "older nescal-bench, whose record keys this version does not use; run its config "
            "again (--resume in the same folder ignores the old records and says so)."
        )
    try:
        config = validate_config(_read_json(path), check_files=False, check_params=False)
    except ConfigError as exc:
        raise RunError(f"{path}: {exc}; rerun its config") from None
    try:
        index = FitIndex.from_json(_read_json(plan))
    except (KeyError, TypeError) as exc:
        raise RunError(
            f"{plan}: not a plan written by nescal-bench ({exc!r}); rerun its config"
        ) from None
    records = RecordStore(results_dir).load(
        move=move_corrupt, planned=index.keys(), stages=config.stages, metrics=config.metrics
    )
    return RunResults(results_dir, config, index, records=records, move_corrupt=move_corrupt)


def _rows(record: dict):
    fit, run, data = (record.get(part, {}) for part in ("fit", "run", "data"))
    head = tuple(record[k] for k in ("key", "dataset", "method", "seed"))
    info = (fit.get("penalty_status"), run.get("fit_seconds"), fit.get("cache_seconds"))
    members = [spec["class"] for _, spec in record.get("params", {}).get("estimators", [])]
    weights = zip(members, fit.get("weights") or [np.nan] * len(members), strict=True)
    network = sum(w for c, w in weights if "HistGradientBoosting" not in c) if members else np.nan
    sizes = (data.get("n_train"), data.get("n_test"))
    tail = (*info, fit.get("calibration"), *sizes, run.get("predict_seconds"))
    tail = (*tail, run.get("model_bytes"), network, fit.get("dropped"), fit.get("member_status"))
    for condition, stages in {CLEAN: record["test"], **record.get("conditions", {})}.items():
        for stage, metrics in stages.items():
            for metric, value in metrics.items():
                yield (*head, condition, stage, metric, value, *tail)


def _frame(rows: list, **attrs):
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame.attrs.update(attrs)
    return frame


def results_frame(folders: Sequence[str | Path], seeds: Sequence[int] | None = None):
    """The reported (confirm-seed) results of ``folders`` as one tidy ``DataFrame``.

    One row per fit, condition (``"clean"``: the test rows), stage and metric, with the
    columns :data:`COLUMNS`. Each folder contributes the fits its saved configuration
    reports (the chosen grid point of every method, on its confirm seeds, or on
    ``seeds``); a fit recorded in two folders (same key) counts once. ``frame.attrs``
    holds ``stages`` (raw, then the calibrators, in order), ``conditions`` (name ->
    :class:`~._conditions.Condition`), ``seeds`` and ``datasets`` (in configuration
    order).

    Examples
    --------
    >>> import tempfile
    >>> from nescal_bench import results_frame
    >>> results_frame([tempfile.mkdtemp()])
    Traceback (most recent call last):
    ...
    FileNotFoundError: No config.json in results directory ...; is it the 'output' of a run?
    """
    rows, seen, stages, conditions, all_seeds, datasets = [], set(), [], {}, set(), []
    for folder in folders:
        results = load_results(folder)
        config = results.config
        all_seeds.update(config.confirm_seeds)
        stages += [s for s in config.stages if s not in stages]
        datasets += [d.name for d in config.datasets if d.name not in datasets]
        conditions.update({c.name: c for c in config.conditions if c.name not in conditions})
        rows += results.rows(seeds, seen)
    seeds = sorted(all_seeds) if seeds is None else list(seeds)
    return _frame(rows, stages=stages, conditions=conditions, seeds=seeds, datasets=datasets)
