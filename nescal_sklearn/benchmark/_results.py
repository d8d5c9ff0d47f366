"""A results folder read back: its saved configuration, its plan and its records.

Reading one imports neither torch nor skorch: the configuration is read without the
library's parameter checks (it was checked when the run started) and the records are
found through the keys saved in ``plan.json``. Files of ``records/`` and ``failures/``
that are not valid records are skipped with a
:class:`~._records.CorruptRecordWarning` (and, for the report, moved aside).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ._config import BenchmarkConfig, validate_config
from ._plan import FitIndex, select_point
from ._records import RecordStore
from ._specs import ConfigError, RunError

__all__ = ["RunResults", "load_results"]


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
    return RunResults(results_dir, config, index, records, move_corrupt)
