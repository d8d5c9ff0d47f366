"""Run a benchmark: plan, fit in parallel (joblib, or dask through joblib), record, report.

Fits run with ``joblib.Parallel``; with ``scheduler`` the same calls go to a
dask.distributed cluster through joblib's dask backend. Each finished fit is one
record file written atomically by the worker (and again by the runner if the
worker's file system is not the runner's), so killing the run loses no finished
fit and ``resume=True`` skips every fit already recorded.

Nothing lost, nothing silently wrong:

* the run holds the output directory's lock (:mod:`._lock`) from before it writes
  ``config.json`` to its end, whatever the end;
* Ctrl-C propagates as ``KeyboardInterrupt`` (the interrupted fit is not recorded;
  with ``jobs > 1`` the workers are stopped);
* loky workers die with the runner (:mod:`._watchdog`);
* a record file counts as done only if it passes :func:`~._records.check_record`;
  others are moved to ``records/corrupt/`` with a warning, and fitted again.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ._config import BenchmarkConfig, check_output_path
from ._estimate import estimate_seconds
from ._lock import output_lock
from ._plan import FitTask, Plan, build_plan, expand_datasets, point_label, stale_records
from ._records import RecordStore, write_json_atomic
from ._specs import ConfigError, RunError

__all__ = ["RunError", "RunSummary", "dry_run", "plan_run", "run_benchmark"]

#: Seconds to wait for a dask scheduler before the run gives up (exit 2).
SCHEDULER_TIMEOUT = 30.0


@dataclass
class RunSummary:
    """What a run did; ``stale`` holds the lines about records under another key."""

    output: Path
    n_planned: int
    n_skipped: int = 0
    n_finished: int = 0
    failures: list[dict] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
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


# --------------------------------------------------------------------------- dry run
def _plan_lines(plan: Plan, sizes: dict) -> list[str]:
    config = plan.config
    lines = [f"Plan of {config.name!r} -> {config.output}", f"datasets ({len(config.datasets)}):"]
    for d in config.datasets:
        s = sizes[d.name]
        lines.append(
            f"  {d.name:<24} {s['rows']:>7} rows  {s['features']:>4} features  {s['classes']:>3} classes"
        )
    lines.append(f"methods ({len(config.methods)}):")
    for m in config.methods:
        fixed = f" {json.dumps(dict(m.params))}" if m.params else ""
        grid = " x ".join(f"{k} in {list(v)}" for k, v in sorted(m.grid.items()))
        n = len(m.points())
        lines.append(
            f"  {m.name:<24} {m.kind.describe()}{fixed}; {n} grid point{'s' * (n != 1)}"
            + (f": {grid}" if grid else "")
        )
    calibrators = ", ".join(
        c.name if c.label is None else f"{c.label} ({c.name})" for c in config.calibrators
    )
    lines.append(f"calibrators: {calibrators or 'none'}")
    conditions = ", ".join(
        f"{c.name} ({c.kind}{''.join(f' {k}={v}' for k, v in c.params().items())})"
        for c in config.conditions
    )
    lines.append(f"conditions: {conditions or 'none'}")
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
    return lines


def _distinct_fits(plan: Plan) -> list[FitTask]:
    """One task per distinct fit (a gridded pair's confirm fits at its first point)."""
    tasks, seen = [], set()
    first_points = [by_point[next(iter(by_point))] for by_point in plan.confirm_candidates.values()]
    for task in plan.search + plan.confirm_fixed + [t for ts in first_points for t in ts]:
        if task.key not in seen:
            seen.add(task.key)
            tasks.append(task)
    return tasks


def _estimate_line(
    plan: Plan, sizes: dict, records: list[dict], where: str, done: set[str], jobs, scheduler
) -> str:
    config = plan.config
    todo = [task for task in _distinct_fits(plan) if task.key not in done]
    fits = [
        (t.dataset.name, t.method.name, sizes[t.dataset.name]["rows"] * config.splits.train)
        for t in todo
    ]
    estimate = estimate_seconds(fits, records)
    if estimate is None:
        return (
            "estimated time: none (a dry run trains nothing, and there are no records to "
            "measure from: pass --estimate-from RESULTS_DIR of an earlier run of similar fits, "
            "or --resume with an output folder that holds records)"
        )
    how = (
        f"from the fit times of {estimate.n_records} records in {where}: {estimate.by_pair} "
        f"fits by the records of their dataset and method, {estimate.by_method} by their "
        "method's seconds per training row and epoch"
        + (
            f", {estimate.unestimated} fits of methods without records not counted"
            if estimate.unestimated
            else ""
        )
    )
    if scheduler is not None:
        return (
            f"estimated time: {_format_seconds(estimate.seconds)} of fitting, divided among "
            f"the workers of {scheduler} ({how})"
        )
    parallel = max(1, min(jobs, max(len(todo), 1)))
    return (
        f"estimated time: {_format_seconds(estimate.seconds / parallel)} with {jobs} job"
        f"{'s' * (jobs != 1)} ({_format_seconds(estimate.seconds)} of fitting for "
        f"{len(todo)} fits, {how})"
    )


def dry_run(
    config: BenchmarkConfig,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    estimate_from: Sequence[str | Path] = (),
) -> str:
    """The plan as text: datasets x methods x grid x seeds, number of fits, time estimate.

    Nothing is trained. The time estimate, if any, comes from the measured fit times
    of existing records (see :mod:`nescal_sklearn.benchmark._estimate`): those in the
    output folder when ``resume``, and those in the ``estimate_from`` folders.

    Parameters
    ----------
    config : BenchmarkConfig
        The validated configuration.
    jobs : int, default=1
        Parallel fits the estimate divides by.
    scheduler : str or None, default=None
        A dask scheduler address (the estimate then shows the total only).
    resume : bool, default=False
        Also say which planned fits the output folder already holds, and which of its
        records were written under another key; the estimate covers the rest.
    estimate_from : sequence of path, default=()
        Results folders whose records give the time estimate.
    """
    plan = plan_run(config)
    config = plan.config
    context = config.data_context()
    sizes = {d.name: d.describe(context) for d in config.datasets}
    lines = _plan_lines(plan, sizes)
    records: list[dict] = []
    sources: list[str] = []
    done: set[str] = set()
    if resume:
        output = Path(config.output).resolve()
        existing = _load_records(RecordStore(output), plan, move=False)
        done = {t.key for t in plan.tasks()} & set(existing)
        lines.append(f"resume: {len(done)} of the planned fits are already recorded in {output}")
        lines += stale_records(plan, existing, str(output))
        records += existing.values()
        sources.append(str(output))
    for folder in estimate_from:
        records += RecordStore(folder).load_all()
        sources.append(str(folder))
    lines.append(_estimate_line(plan, sizes, records, ", ".join(sources), done, jobs, scheduler))
    return "\n".join(lines)


# --------------------------------------------------------------------------- run
def _summary_line(result: dict, task: FitTask, done: int, total: int, selection: str) -> str:
    head = (
        f"[{done}/{total}] {task.dataset.name} | {task.method.name} | "
        f"{point_label(task.point)} | seed {task.seed} ({task.stage})"
    )
    if not result["ok"]:
        return f"{head} | FAILED: {result['failure']['error']}"
    record = result["record"]
    test = record["test"]["raw"]
    chosen = record["validation"].get(selection)
    line = (
        f"{head} | val NLL {'failed' if chosen is None else format(chosen['nll'], '.4f')} | "
        f"test NLL {test['nll']:.4f} ECE {test['ece']:.4f} acc {test['accuracy']:.4f}"
    )
    for name in record["test"]:
        if name != "raw":
            stage = record["test"][name]
            line += f" | {name}: NLL {stage['nll']:.4f} ECE {stage['ece']:.4f}"
    for name, summary in record["calibrators"].items():
        if "error" in summary:
            line += f" | {name}: FAILED ({summary['error']})"
    return f"{line} | {record['run']['fit_seconds']:.1f} s"


def _key_of(result: dict) -> str:
    return result["record"]["key"] if result["ok"] else result["failure"]["key"]


class _Progress:
    """The state of a run while fits come back: records, summary counts, progress output."""

    def __init__(self, plan: Plan, store: RecordStore, records: dict, summary: RunSummary,
                 stream: IO[str], progress: bool) -> None:  # fmt: skip
        from tqdm.auto import tqdm

        self.plan, self.store, self.records, self.summary = plan, store, records, summary
        self.stream, self.progress = stream, progress
        self.bar = tqdm(
            total=plan.n_fits, file=stream, disable=not progress or None, unit="fit",
            dynamic_ncols=True, desc=plan.config.name,
        )  # fmt: skip

    def pending(self, tasks: Iterable[FitTask]) -> list[FitTask]:
        """The tasks not yet recorded (each key once); recorded ones count as skipped."""
        out, seen = [], set()
        for task in tasks:
            if task.key in seen:
                continue
            seen.add(task.key)
            if task.key in self.records:
                self.summary.n_skipped += 1
                self.bar.update(1)
            else:
                out.append(task)
        return out

    def _write(self, write, item: dict, what: str) -> None:
        try:
            write(item)
        except OSError as exc:
            raise RunError(
                f"cannot write the {what} of fit {item['key']} into {str(self.store.root)!r}: "
                f"{exc.strerror or exc}"
            ) from None

    def on_result(self, task: FitTask, result: dict) -> None:
        summary = self.summary
        if result["ok"]:
            record = result["record"]
            if not result.get("written", True) or not self.store.has(record["key"]):
                self._write(self.store.write, record, "record")
            self.records[record["key"]] = record
            summary.n_finished += 1
        else:
            if not result.get("written", True):
                self._write(self.store.write_failure, result["failure"], "failure note")
            summary.failures.append(result["failure"])
        self.bar.update(1)
        if self.progress:
            done = summary.n_skipped + summary.n_finished + len(summary.failures)
            line = _summary_line(result, task, done, self.plan.n_fits, self.plan.config.selection)
            self.bar.write(line, file=self.stream)

    def run(self, tasks: list[FitTask], results_dir: Path, jobs: int, client) -> None:
        """Fit ``tasks`` (joblib, or the dask ``client``), calling :meth:`on_result`."""
        from joblib import Parallel, delayed, parallel_config

        from ._fit import run_fit
        from ._watchdog import watch_parent

        if not tasks:
            return
        by_key = {t.key: t for t in tasks}
        if client is None and jobs == 1:
            for task in tasks:
                self.on_result(task, run_fit(task, str(results_dir)))
            return
        if client is not None:
            backend, n_jobs, parent = parallel_config(backend="dask"), -1, None
        else:
            # loky workers: each watches the runner and exits as soon as it is gone
            parent = os.getpid()
            backend = parallel_config(backend="loky", initializer=watch_parent, initargs=(parent,))
            n_jobs = jobs
        calls = (delayed(run_fit)(t, str(results_dir), parent) for t in tasks)
        with backend:
            results = Parallel(n_jobs=n_jobs, return_as="generator_unordered")(calls)
            try:
                for result in results:
                    self.on_result(by_key[_key_of(result)], result)
            except BaseException:
                # Ctrl-C or an error here: stop the workers now (joblib kills them), without
                # its warning about a generator left unconsumed.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    results.close()
                raise


def _save_run(plan: Plan, output: Path) -> None:
    """Write ``config.json`` (normalised, suites expanded) and ``plan.json`` (every key)."""
    config = plan.config
    saved = config.to_json()
    saved["output"] = str(output)
    if config.data_dir is not None:
        saved["data_dir"] = str(Path(config.data_dir).resolve())
    write_json_atomic(output / "config.json", saved)
    write_json_atomic(output / "plan.json", plan.index.to_json())


def _load_records(store: RecordStore, plan: Plan, *, move: bool) -> dict[str, dict]:
    """The valid records of the output folder (others skipped with a warning, moved aside
    with ``move``); planned ones must have the config's stages and metrics."""
    config = plan.config
    planned = {task.key for task in plan.tasks()}
    return store.load(move=move, planned=planned, stages=config.stages, metrics=config.metrics)


def _connect(scheduler: str, stack: contextlib.ExitStack):
    """A ``distributed.Client`` of ``scheduler``; RunError (exit 2) if it cannot connect."""
    try:
        from distributed import Client
    except ImportError:
        raise RunError(
            "--scheduler: needs dask.distributed; pip install 'nescal-sklearn[dask]'"
        ) from None
    try:
        return stack.enter_context(Client(scheduler, timeout=SCHEDULER_TIMEOUT))
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise RunError(
            f"--scheduler: cannot connect to the dask scheduler {scheduler!r} "
            f"({type(exc).__name__}: {exc})"
        ) from None


def _refuse_existing(store: RecordStore, output: Path, resume: bool) -> None:
    existing = store.keys()
    if existing and not resume:
        raise RunError(
            f"The output directory {str(output)!r} already holds {len(existing)} records; pass "
            "--resume (resume=True) to continue that run, or set another 'output' in the config."
        )


def run_benchmark(
    config: BenchmarkConfig,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    progress: bool = True,
    stream: IO[str] | None = None,
    report: bool = True,
    break_lock: bool = False,
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
        directory that already holds records is an error. Records of the folder that
        no planned fit has (another key: an edited config, a changed default, another
        library version or thread count) are ignored, and the run says so. Files that
        are not valid records are moved to ``records/corrupt/`` with a
        :class:`~._records.CorruptRecordWarning`, and their fits run again.
    progress : bool, default=True
        Progress bar and one line per finished fit on ``stream``.
    stream : file or None, default=None
        Where progress goes; ``sys.stderr`` when None.
    report : bool, default=True
        Write ``report.md`` and ``report.html`` at the end.
    break_lock : bool, default=False
        Take over an output directory lock written by a run on another host (whose
        process cannot be checked from here). A lock of a dead run on this host is
        taken over without it.

    Returns
    -------
    RunSummary

    Raises
    ------
    RunError
        Before any fit (and before ``config.json`` is written) if the output directory
        is unusable, holds records without ``resume``, or is locked by another run, or
        if the scheduler cannot be reached.
    KeyboardInterrupt
        On Ctrl-C: every finished fit is recorded, the interrupted ones are not, the
        workers are stopped and the lock released.
    """
    stream = sys.stderr if stream is None else stream
    if jobs < 1:
        raise ValueError(f"jobs must be an int >= 1; got {jobs!r}.")
    start = time.perf_counter()
    try:
        check_output_path(config.output, config.data_dir)
    except ConfigError as exc:
        raise RunError(str(exc)) from None
    output = Path(config.output).resolve()
    store = RecordStore(output)
    _refuse_existing(store, output, resume)
    plan = plan_run(config)
    config = plan.config
    context = config.data_context()
    for dataset in config.datasets:
        dataset.prepare(context)

    summary = RunSummary(output=output, n_planned=plan.n_fits)
    with contextlib.ExitStack() as stack:
        client = None if scheduler is None else _connect(scheduler, stack)
        stack.enter_context(output_lock(output, break_lock=break_lock))
        _refuse_existing(store, output, resume)  # again, now that no other run can write
        store.remove_stale_temporaries()
        records = _load_records(store, plan, move=True)
        _save_run(plan, output)
        summary.stale = stale_records(plan, records, str(output))
        if progress:
            for line in summary.stale:
                print(line, file=stream)
        state = _Progress(plan, store, records, summary, stream, progress)
        stack.callback(state.bar.close)
        state.run(state.pending(plan.search + plan.confirm_fixed), output, jobs, client)
        confirm, missing = plan.confirm_tasks(records)
        already = {t.key for t in plan.search + plan.confirm_fixed}
        fresh = state.pending([t for t in confirm if t.key not in already])
        state.run(fresh, output, jobs, client)
        state.bar.close()

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
