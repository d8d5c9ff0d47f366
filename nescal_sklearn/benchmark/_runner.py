"""Run a benchmark: plan, fit in parallel (joblib, or dask through joblib), record, report.

Fits run with ``joblib.Parallel``; with ``scheduler`` the same calls go to a
dask.distributed cluster through joblib's dask backend. Each finished fit is one
record file written atomically by the worker (and again by the runner if the
worker's file system is not the runner's), so killing the run loses no finished
fit and ``resume=True`` skips every fit already recorded.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ._config import BenchmarkConfig
from ._plan import FitTask, Plan, build_plan, expand_datasets
from ._records import RecordStore, write_json_atomic

__all__ = ["RunError", "RunSummary", "dry_run", "plan_run", "run_benchmark"]


class RunError(RuntimeError):
    """A run that cannot start (e.g. an output directory holding records without resume)."""


@dataclass
class RunSummary:
    """What a run did."""

    output: Path
    n_planned: int
    n_skipped: int = 0
    n_finished: int = 0
    failures: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    report: dict | None = None


def plan_run(config: BenchmarkConfig) -> Plan:
    """Expand OpenML suites into their tasks and list the fits."""
    return build_plan(expand_datasets(config))


def _format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _describe_point(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "no grid"


def dry_run(config: BenchmarkConfig, *, jobs: int = 1, scheduler: str | None = None) -> str:
    """The plan as text: datasets x methods x grid x seeds, number of fits, time estimate.

    Nothing is trained except the small calibration fit of the time estimate
    (see :mod:`nescal_sklearn.benchmark._estimate`).
    """
    from ._data import describe_dataset
    from ._estimate import estimate_seconds

    plan = plan_run(config)
    config = plan.config
    lines = [f"Plan of {config.name!r} -> {config.output}"]
    sizes = {}
    lines.append(f"datasets ({len(config.datasets)}):")
    for d in config.datasets:
        sizes[d.name] = describe_dataset(d, config.data_dir, config.openml, config.budget.max_rows)
        s = sizes[d.name]
        lines.append(
            f"  {d.name:<24} {s['rows']:>7} rows  {s['features']:>4} features  {s['classes']:>3} classes"
        )
    lines.append(f"methods ({len(config.methods)}):")
    for m in config.methods:
        what = f"loss={m.loss}" if m.is_neural else m.estimator
        fixed = f" {json.dumps(dict(m.params))}" if m.params else ""
        grid = " x ".join(f"{k} in {list(v)}" for k, v in sorted(m.grid.items()))
        n = len(m.points())
        lines.append(
            f"  {m.name:<24} {what}{fixed}; {n} grid point{'s' * (n != 1)}"
            + (f": {grid}" if grid else "")
        )
    calibrators = ", ".join(c.name for c in config.calibrators) or "none"
    lines.append(f"calibrators: {calibrators}")
    lines.append(
        f"seeds: search {list(config.search_seeds)}, confirm {list(config.confirm_seeds)}; "
        f"grid point chosen on mean validation NLL ({config.selection})"
    )
    n_search_points = sum(len(m.points()) for m in config.methods if len(m.points()) > 1)
    lines.append(
        f"fits: {len(config.datasets)} datasets x ({n_search_points} searched grid points x "
        f"{len(config.search_seeds)} search seeds + {len(config.methods)} methods x "
        f"{len(config.confirm_seeds)} confirm seeds) = {len(plan.search) + plan.n_confirm} fits, "
        f"{plan.n_fits} distinct (a confirm fit equal to a search fit runs once)"
    )
    fits_per_pair: dict = {}
    for task in plan.search + plan.confirm_fixed:
        pair = (task.dataset.name, task.method.name)
        fits_per_pair[pair] = fits_per_pair.get(pair, 0) + 1
    for dataset, method in plan.gridded:
        pair = (dataset.name, method.name)
        fits_per_pair[pair] = fits_per_pair.get(pair, 0) + len(config.confirm_seeds)
    estimate = estimate_seconds(config, fits_per_pair, sizes)
    how = "".join(
        f"{loss}: measured {fixed:.2f} s per fit + {per_epoch * 1e3:.1f} ms per epoch + "
        f"{per_row * 1e6:.1f} us per row-epoch; "
        for loss, (fixed, per_epoch, per_row) in estimate["costs"].items()
    )
    if scheduler is None:
        parallel = max(1, min(jobs, plan.n_fits))
        lines.append(
            f"estimated time: {_format_seconds(estimate['total'] / parallel)} with {jobs} job"
            f"{'s' * (jobs != 1)} ({_format_seconds(estimate['total'])} of fitting; {how}"
            "rough: max_epochs without early stopping, preprocessing not counted)"
        )
    else:
        lines.append(
            f"estimated time: {_format_seconds(estimate['total'])} of fitting, divided among the "
            f"workers of {scheduler} ({how}rough: max_epochs without early stopping)"
        )
    return "\n".join(lines)


def _summary_line(result: dict, task: FitTask, done: int, total: int, selection: str) -> str:
    head = f"[{done}/{total}] {task.dataset.name} | {task.method.name} | {_describe_point(task.point)} | seed {task.seed} ({task.stage})"
    if not result["ok"]:
        return f"{head} | FAILED: {result['failure']['error']}"
    record = result["record"]
    test = record["test"]["raw"]
    line = (
        f"{head} | val NLL {record['validation'][selection]['nll']:.4f} | test NLL "
        f"{test['nll']:.4f} ECE {test['ece']:.4f} acc {test['accuracy']:.4f}"
    )
    for name in record["test"]:
        if name != "raw":
            line += f" | {name}: NLL {record['test'][name]['nll']:.4f} ECE {record['test'][name]['ece']:.4f}"
    return f"{line} | {record['run']['fit_seconds']:.1f} s"


def _execute(
    tasks: list[FitTask],
    results_dir: Path,
    jobs: int,
    dask_client: object | None,
    on_result: Callable[[FitTask, dict], None],
) -> None:
    from joblib import Parallel, delayed, parallel_config

    from ._fit import run_fit

    if not tasks:
        return
    by_key = {t.key: t for t in tasks}
    calls: Iterable = (delayed(run_fit)(t, str(results_dir)) for t in tasks)
    if dask_client is not None:
        with parallel_config(backend="dask"):
            results = Parallel(n_jobs=-1, return_as="generator_unordered")(calls)
            for result in results:
                on_result(by_key[_key_of(result)], result)
    elif jobs == 1:
        for task in tasks:
            on_result(task, run_fit(task, str(results_dir)))
    else:
        results = Parallel(n_jobs=jobs, return_as="generator_unordered")(calls)
        for result in results:
            on_result(by_key[_key_of(result)], result)


def _fetch_openml_tasks(config: BenchmarkConfig) -> None:
    """Load every OpenML task once here, before any fit: an unavailable task stops the run
    with a clear error, and parallel workers find the task in the cache."""
    from ._data import load_benchmark_data

    for dataset in config.datasets:
        if dataset.kind == "openml_task":
            load_benchmark_data(dataset, config.data_dir, config.openml, config.budget.max_rows)


def _key_of(result: dict) -> str:
    return result["record"]["key"] if result["ok"] else result["failure"]["key"]


def run_benchmark(
    config: BenchmarkConfig,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    progress: bool = True,
    stream: IO[str] | None = None,
    report: bool = True,
) -> RunSummary:
    """Run every fit of ``config``, writing records to ``config.output``, then the report.

    Parameters
    ----------
    config : BenchmarkConfig
        The validated configuration.
    jobs : int, default=1
        Parallel fits on this machine (joblib; 1 runs in this process).
    scheduler : str or None, default=None
        Address of a dask.distributed scheduler: fits run on its workers through
        joblib's dask backend (``jobs`` is then ignored). The workers need this
        package, the data and, for records written directly, the output directory.
    resume : bool, default=False
        Continue a run: skip fits whose record exists. Without it, an output
        directory that already holds records is an error.
    progress : bool, default=True
        Progress bar and one line per finished fit on ``stream``.
    stream : file or None, default=None
        Where progress goes; ``sys.stderr`` when None.
    report : bool, default=True
        Write ``report.md`` and ``report.html`` at the end.

    Returns
    -------
    RunSummary
    """
    stream = sys.stderr if stream is None else stream
    if jobs < 1:
        raise ValueError(f"jobs must be an int >= 1; got {jobs!r}.")
    start = time.perf_counter()
    output = Path(config.output).resolve()
    store = RecordStore(output)
    existing = store.keys()
    if existing and not resume:
        raise RunError(
            f"The output directory {str(output)!r} already holds {len(existing)} records; pass "
            "--resume (resume=True) to continue that run, or set another 'output' in the config."
        )
    store.remove_stale_temporaries()
    plan = plan_run(config)
    config = plan.config
    _fetch_openml_tasks(config)
    saved = config.to_json()
    saved["output"] = str(output)
    if config.data_dir is not None:
        saved["data_dir"] = str(Path(config.data_dir).resolve())
    write_json_atomic(output / "config.json", saved)

    records = {key: store.read(key) for key in existing}
    summary = RunSummary(output=output, n_planned=plan.n_fits)

    from tqdm.auto import tqdm

    bar = tqdm(
        total=plan.n_fits, file=stream, disable=not progress or None, unit="fit",
        dynamic_ncols=True, desc=config.name,
    )  # fmt: skip

    def on_result(task: FitTask, result: dict) -> None:
        if result["ok"]:
            record = result["record"]
            if not store.has(record["key"]):
                store.write(record)
            records[record["key"]] = record
            summary.n_finished += 1
        else:
            summary.failures.append(result["failure"])
        bar.update(1)
        if progress:
            done = summary.n_skipped + summary.n_finished + len(summary.failures)
            bar.write(_summary_line(result, task, done, plan.n_fits, config.selection), file=stream)

    def pending(tasks: list[FitTask]) -> list[FitTask]:
        out, seen = [], set()
        for task in tasks:
            if task.key in seen:
                continue
            seen.add(task.key)
            if task.key in records:
                summary.n_skipped += 1
                bar.update(1)
            else:
                out.append(task)
        return out

    with contextlib.ExitStack() as stack:
        client = None
        if scheduler is not None:
            from distributed import Client

            client = stack.enter_context(Client(scheduler))
        stack.callback(bar.close)
        _execute(pending(plan.search + plan.confirm_fixed), output, jobs, client, on_result)
        confirm, missing = plan.confirm_tasks(records)
        already = {t.key for t in plan.search + plan.confirm_fixed}
        _execute(
            pending([t for t in confirm if t.key not in already]), output, jobs, client, on_result
        )

    summary.seconds = time.perf_counter() - start
    if progress:
        print(
            f"{config.name}: {summary.n_finished} fits finished, {summary.n_skipped} already "
            f"recorded, {len(summary.failures)} failed, in {_format_seconds(summary.seconds)}"
            + (f"; {len(missing)} method(s) lack search records" if missing else ""),
            file=stream,
        )
    if report:
        from ._report import write_report

        summary.report = write_report(output)
    return summary
