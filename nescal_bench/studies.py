"""What the study scripts of ``benchmarks/`` share: run their configs, read a config's
results as the tidy frame, and the paired table of every method against a reference.

A study is a list of configs and a table specification: which methods against which
reference, at which stage, with which extra columns. Every number comes from
:func:`~._results.results_frame`'s rows and :mod:`._stats`.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._compare import _comparison, render, table
from ._conditions import CLEAN
from ._config import BenchmarkConfig, validate_config
from ._figures import plot_changes
from ._plan import expand_datasets, fit_index
from ._records import RecordStore
from ._registry import METRICS
from ._results import RunResults
from ._runner import run_benchmark
from ._stats import unit_table, wins_ties_losses

__all__ = [
    "config_frame",
    "config_records",
    "load_study_config",
    "markdown_table",
    "median",
    "plot_changes",
    "run_configs",
    "save_figure",
    "versus",
]


def load_study_config(
    path: Path, quick: dict | None = None, output: Path | None = None, edit=None, run: bool = True
):
    """The validated config at ``path``; with ``quick``, its keys replaced by those of
    ``quick`` (a smoke run), its output moved to ``output`` and ``edit(data)`` applied.
    ``run=False`` (a script's ``--no-run``) reads it for its stored records: without the
    data's manifest, and leaving the packages of anchors that are not installed (pytabkit,
    lightgbm, autogluon) unimported (:func:`~._config.validate_config`'s ``imports``)."""
    data = json.loads(Path(path).read_text())
    if quick is not None:
        data.update(copy.deepcopy(quick), output=str(output))
        if edit is not None:
            edit(data)
    return validate_config(data, default_name=Path(path).stem, check_files=run, imports=run)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table of text cells (``DataFrame.to_markdown``)."""
    return render([table(columns, rows)]).rstrip("\n")


def run_configs(configs: Sequence[BenchmarkConfig], *, jobs: int = 1, report: bool = True) -> None:
    """Run every config, resuming what its output folder already holds."""
    for config in configs:
        resume = (Path(config.output) / "records").is_dir()
        run_benchmark(config, jobs=jobs, resume=resume, stream=sys.stderr, report=report)


def config_records(config: BenchmarkConfig, index=None) -> dict[str, dict]:
    """The records of ``config``'s own fits in its output folder (which other configs may
    share), by key (``index``: its :func:`~._plan.fit_index`)."""
    planned = (index or fit_index(expand_datasets(config, offline=True))).keys()
    return {
        k: r for k, r in RecordStore(Path(config.output)).load(move=False).items() if k in planned
    }


def config_frame(config: BenchmarkConfig):
    """The results frame of ``config``'s own fits in its output folder: the records of its
    plan, at its chosen grid points (no estimator built, no data read)."""
    config = expand_datasets(config, offline=True)
    index = fit_index(config)
    records = config_records(config, index)
    return RunResults(Path(config.output), config, index, records=records).frame()


def versus(
    frame, reference: str, *, stage: str, metric: str = "nll", tolerance: float = 0.01
) -> dict:
    """Every method's paired comparison with ``reference`` on the seed means per dataset:
    ``method -> {"comparison", "wtl", "accuracy", "raw"}`` (the raw-stage comparison,
    and the median accuracy change in points), for the methods sharing a dataset with it."""
    values, info = unit_table(frame, [CLEAN], stage, metric), METRICS[metric]
    out = {}
    for method in (m for m in values.columns if m != reference and reference in values):
        c = _comparison(frame, [CLEAN], metric, info, method, [reference], stage, True)
        if c is not None:
            both = values.loc[c.datasets, method], values.loc[c.datasets, reference]
            better = info.greater_is_better
            out[method] = {
                "comparison": c,
                "wtl": wins_ties_losses(*both, greater_is_better=better, tolerance=tolerance),
                "accuracy": 100 * c.accuracy_change,
                "raw": _comparison(frame, [CLEAN], metric, info, method, [reference], "raw", False),
            }
    return out


def save_figure(fig, path: Path) -> Path:
    """Lay out the pyplot figure ``fig``, write it to ``path`` (110 dpi) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def median(values) -> float:
    """The median of ``values`` (NaN when empty)."""
    values = np.asarray(list(values), dtype=float)
    return float(np.median(values)) if len(values) else float("nan")
