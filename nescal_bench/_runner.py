"""Run a benchmark: plan, fit in parallel (joblib, or dask through joblib), record, report.

Fits run with ``joblib.Parallel`` (loky worker processes). Each finished fit comes back to
the runner, which writes it as one record file (atomically), so killing the run loses
no recorded fit and ``resume=True`` skips every fit already recorded.

Nothing lost, nothing silently wrong:

* the run holds the output directory's lock (``filelock`` on ``OUTPUT/.lock``, released
  by the kernel however the runner dies) from before it writes ``config.json`` to its
  end: one runner per output folder;
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
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from ._base import ConfigError, RunError
from ._config import BenchmarkConfig, check_output_path
from ._plan import (
    FitTask,
    Plan,
    build_plan,
    expand_datasets,
    follows_records,
    point_label,
    resolve,
    stale_records,
)
from ._records import RecordStore, real_dir, write_atomic


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


def plan_run(config: BenchmarkConfig, *, offline: bool = False) -> Plan:
    """Expand OpenML suites into their tasks and list the fits (``offline``: OpenML loads
    only cached tasks)."""
    return build_plan(expand_datasets(config, offline), offline)


@contextlib.contextmanager
def output_lock(output: Path):
    """Hold ``output/.lock`` (``filelock``) in the block: one runner per output folder."""
    from filelock import FileLock, Timeout

    path = output / ".lock"
    if path.is_symlink():
        raise RunError(
            f"{path} is a symbolic link; nescal-bench never writes through one: remove it"
        )
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunError(
            f"the output directory {str(output)!r} is in use by another nescal-bench run; "
            "wait for it to end, or set another 'output'"
        ) from None
    try:
        yield path
    finally:
        lock.release()


def estimate_seconds(fits, records: list[dict]) -> tuple[float, int, int, int] | None:
    """Estimated seconds of ``fits`` (``(dataset, method, training rows)`` each) from the
    fit times of ``records``: ``(seconds, by pair, by method, unestimated)``, None without
    records. A fit is estimated by the mean time of the records of its dataset and method;
    else by its method's mean seconds per training row and epoch times its rows and the
    method's mean epochs; else not at all.

    Examples
    --------
    >>> from nescal_bench._runner import estimate_seconds
    >>> records = [{"dataset": "a", "method": "ce", "data": {"n_train": 100},
    ...             "fit": {"n_epochs": 10}, "run": {"fit_seconds": 2.0,
    ...             "calibration_seconds": 0.0}}]
    >>> estimate_seconds([("a", "ce", 100), ("b", "ce", 300), ("a", "x", 5)], records)
    (8.0, 1, 1, 1)
    """
    if not records:
        return None
    times: dict = defaultdict(list)
    for r in records:
        seconds = r["run"]["fit_seconds"] + r["run"].get("calibration_seconds", 0.0)
        epochs = int(r.get("fit", {}).get("n_epochs") or r.get("fit", {}).get("n_iter") or 1)
        times[(r["dataset"], r["method"])].append(seconds)
        times[r["method"]].append((seconds / (max(r["data"]["n_train"], 1) * epochs), epochs))
    total, counts = 0.0, [0, 0, 0]
    for dataset, method, n_train in fits:
        if (dataset, method) in times:
            total, counts[0] = total + float(np.mean(times[(dataset, method)])), counts[0] + 1
        elif method in times:
            rate, epochs = np.mean(times[method], axis=0)
            total, counts[1] = total + float(rate * n_train * epochs), counts[1] + 1
        else:
            counts[2] += 1
    return (total, *counts)


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
    lines += [
        f"  {d.name:<24} {sizes[d.name]['rows']:>7} rows  {sizes[d.name]['features']:>4} features  "
        f"{sizes[d.name]['classes']:>3} classes"
        for d in config.datasets
    ]
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
    conditions = ", ".join(
        f"{c.name} ({c.kind}{''.join(f' {k}={v}' for k, v in c.params().items())})"
        for c in config.conditions
    )
    searched = sum(len(m.points()) for m in config.methods if len(m.points()) > 1)
    return [
        *lines,
        f"calibrators: {calibrators or 'none'}",
        f"conditions: {conditions or 'none'}",
        f"seeds: search {list(config.search_seeds)}, confirm {list(config.confirm_seeds)}; grid point "
        f"chosen on mean validation NLL ({config.selection})",
        f"fits: {len(config.datasets)} datasets x ({searched} searched grid points x "
        f"{len(config.search_seeds)} search seeds + {len(config.methods)} methods x "
        f"{len(config.confirm_seeds)} confirm seeds) = {len(plan.search) + plan.n_confirm} fits, "
        f"{plan.n_fits} distinct (a confirm fit equal to a search fit runs once)",
    ]


def _estimate_line(
    plan: Plan, sizes: dict, records: list[dict], where: str, done: set[str], jobs
) -> str:
    first = [next(iter(by_point.values())) for by_point in plan.confirm_candidates.values()]
    todo = {t.key: t for t in plan.search + plan.confirm_fixed + [t for ts in first for t in ts]}
    todo = [t for key, t in todo.items() if key not in done]  # each distinct fit once
    train = plan.config.splits.train
    estimate = estimate_seconds(
        [(t.dataset.name, t.method.name, sizes[t.dataset.name]["rows"] * train) for t in todo],
        records,
    )
    if estimate is None:
        return (
            "estimated time: none (a dry run trains nothing, and there are no records to measure from: "
            "pass --estimate-from RESULTS_DIR of an earlier run of similar fits, or --resume with an "
            "output folder that holds records)"
        )
    seconds, by_pair, by_method, unestimated = estimate
    how = (
        f"from the fit times of {len(records)} records in {where}: {by_pair} fits by the records of their "
        f"dataset and method, {by_method} by their method's seconds per training row and epoch"
        + (f", {unestimated} fits of methods without records not counted" if unestimated else "")
    )
    parallel = max(1, min(jobs, max(len(todo), 1)))
    return (
        f"estimated time: {_format_seconds(seconds / parallel)} with {jobs} job{'s' * (jobs != 1)} "
        f"({_format_seconds(seconds)} of fitting for {len(todo)} fits, {how})"
    )


def dry_run(
    config: BenchmarkConfig,
    *,
    jobs: int = 1,
    resume: bool = False,
    estimate_from: Sequence[str | Path] = (),
    offline: bool = False,
) -> str:
    """The plan as text: datasets x methods x grid x seeds, number of fits, time estimate.

    Nothing is trained. The time estimate, if any, comes from the measured fit times
    of existing records (see :func:`estimate_seconds`): those in the output folder when
    ``resume``, and those in the ``estimate_from`` folders.

    Parameters
    ----------
    config : BenchmarkConfig
        The validated configuration.
    jobs : int, default=1
        Parallel fits the estimate divides by.
    resume : bool, default=False
        Also say which planned fits the output folder already holds, and which of its
        records were written under another key; the estimate covers the rest.
    estimate_from : sequence of path, default=()
        Results folders whose records give the time estimate.
    offline : bool, default=False
        Load only cached OpenML tasks (never download).
    """
    plan = plan_run(config, offline=offline)
    config = plan.config
    context = config.data_context(offline)
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
        records += RecordStore(folder).load(move=False).values()
        sources.append(str(folder))
    lines.append(_estimate_line(plan, sizes, records, ", ".join(sources), done, jobs))
    return "\n".join(lines)


# --------------------------------------------------------------------------- run
def _summary_line(result: dict, task: FitTask, done: int, total: int, selection: str) -> str:
    head = (
        f"[{done}/{total}] {task.dataset.name} | {task.method.name} | {point_label(task.point)} | "
        f"seed {task.seed} ({task.stage})"
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


class _Progress:
    """The state of a run while fits come back: records, summary counts, progress output."""

    def __init__(
        self,
        plan: Plan,
        store: RecordStore,
        records: dict,
        summary: RunSummary,
        stream: IO[str],
        progress: bool,
    ) -> None:
        from tqdm.auto import tqdm

        self.plan, self.store, self.records, self.summary = plan, store, records, summary
        self.stream, self.progress = stream, progress
        self.bar = tqdm(
            total=plan.n_fits,
            file=stream,
            disable=not progress or None,
            unit="fit",
            dynamic_ncols=True,
            desc=plan.config.name,
        )

    def pending(self, tasks: Iterable[FitTask]) -> list[FitTask]:
        """The tasks not yet recorded (each key once); recorded ones count as skipped."""
        tasks = list({t.key: t for t in tasks}.values())
        done = [t for t in tasks if t.key in self.records]
        self.summary.n_skipped += len(done)
        self.bar.update(len(done))
        return [t for t in tasks if t.key not in self.records]

    def resolved(self, tasks: list[FitTask]) -> list[FitTask]:
        """``tasks`` with the parameters that follow other methods' records resolved
        (:func:`~._plan.resolve`); a task whose record is missing fails here."""
        from ._fit import failed

        out = []
        for task in tasks:
            try:
                out.append(resolve(task, self.plan, self.records))
            except RunError as exc:
                self.on_result(task, failed(task, exc))
        return out

    def on_result(self, task: FitTask, result: dict) -> None:
        """Write the record (or the failure note) of a finished fit: only the runner writes."""
        item = result["record"] if result["ok"] else result["failure"]
        try:
            (self.store.write if result["ok"] else self.store.write_failure)(item)
        except OSError as exc:
            what = "record" if result["ok"] else "failure note"
            raise RunError(
                f"cannot write the {what} of fit {item['key']} into "
                f"{str(self.store.root)!r}: {exc.strerror or exc}"
            ) from None
        if result["ok"]:
            self.records[item["key"]] = item
            self.summary.n_finished += 1
        else:
            self.summary.failures.append(item)
        self.bar.update(1)
        if self.progress:
            summary = self.summary
            done = summary.n_skipped + summary.n_finished + len(summary.failures)
            line = _summary_line(result, task, done, self.plan.n_fits, self.plan.config.selection)
            self.bar.write(line, file=self.stream)

    def run(self, tasks: list[FitTask], jobs: int) -> None:
        """Fit ``tasks`` (here, or in ``jobs`` loky workers), calling :meth:`on_result`."""
        from joblib import Parallel, delayed, parallel_config

        from ._fit import run_fit
        from ._watchdog import watch_parent

        if jobs == 1:
            for task in tasks:
                self.on_result(task, run_fit(task))
            return
        by_key, parent = {t.key: t for t in tasks}, os.getpid()
        # loky workers each watch the runner and exit as soon as it is gone
        with parallel_config(backend="loky", initializer=watch_parent, initargs=(parent,)):
            calls = (delayed(run_fit)(t, parent) for t in tasks)
            results = Parallel(n_jobs=jobs, return_as="generator_unordered")(calls)
            try:
                for result in results:
                    key = result["record"]["key"] if result["ok"] else result["failure"]["key"]
                    self.on_result(by_key[key], result)
            except BaseException:  # Ctrl-C or an error: stop the workers now (joblib kills them)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # its warning about a generator left unconsumed
                    results.close()
                raise


def _save_run(plan: Plan, output: Path) -> None:
    """Write ``config.json`` (normalised, suites expanded) and ``plan.json`` (every key)."""
    config = plan.config
    saved = config.to_json()
    saved["output"] = str(output)
    if config.data_dir is not None:
        saved["data_dir"] = str(Path(config.data_dir).resolve())
    write_atomic(output / "config.json", saved)
    write_atomic(output / "plan.json", plan.index.to_json())


def _load_records(store: RecordStore, plan: Plan, *, move: bool) -> dict[str, dict]:
    """The valid records of the output folder (others skipped with a warning, moved aside
    with ``move``); planned ones must have the config's stages and metrics."""
    config = plan.config
    planned = {task.key for task in plan.tasks()}
    return store.load(move=move, planned=planned, stages=config.stages, metrics=config.metrics)


#: The file a runner writes into an output folder it creates (or finds empty, but for the
#: lock file): the mark of the folders it may write into again. A folder of an older
#: nescal-bench, which wrote no mark, is known by its ``config.json``, ``plan.json`` and
#: ``records/``.
MARK = ".nescal-bench"


def _refuse_existing(store: RecordStore, output: Path, resume: bool) -> None:
    """Refuse a folder that holds files nescal-bench did not write, and one that holds
    records without ``resume``."""
    found = sorted(p.name for p in output.iterdir() if p.name != ".lock") if output.is_dir() else []
    if found and MARK not in found and not {"config.json", "plan.json", "records"} <= set(found):
        shown = ", ".join(found[:5]) + (f", ... ({len(found)} entries)" if len(found) > 5 else "")
        raise RunError(
            f"the output directory {str(output)!r} holds files that nescal-bench did not write "
            f"({shown}); it never writes into such a folder"
            + (" (--resume continues only a folder of its own)" if resume else "")
            + ": set 'output' to a new or an empty folder, or move those files away"
        )
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
    resume: bool = False,
    progress: bool = True,
    stream: IO[str] | None = None,
    report: bool = True,
    offline: bool = False,
) -> RunSummary:
    """Run every fit of ``config``, writing records to ``config.output``, then the report.

    Parameters
    ----------
    config : BenchmarkConfig
        The validated configuration.
    jobs : int, default=1
        Parallel fits on this machine (joblib; 1 runs in this process).
    resume : bool, default=False
        Continue a run: skip fits whose record exists. Without it, an output
        directory that already holds records is an error. Records of the folder that
        no planned fit has (another key: an edited config, a changed default, another
        library version or thread count) are ignored, and the run says so. Files that
        are not valid records are moved to ``records/corrupt/`` with a
        :class:`~._records.CorruptRecordWarning`, and their fits run again. With or
        without it, an existing folder that is not empty must be one of the runner's
        own: the runner never writes into a folder of someone else's files.
    progress : bool, default=True
        Progress bar and one line per finished fit on ``stream``.
    stream : file or None, default=None
        Where progress goes; ``sys.stderr`` when None.
    report : bool, default=True
        Write ``report.md`` and ``report.html`` at the end.
    offline : bool, default=False
        Load only cached OpenML tasks (never download): an uncached task stops the run.

    Returns
    -------
    RunSummary

    Raises
    ------
    RunError
        Before any fit (and before ``config.json`` is written) if the output directory
        is unusable, holds files that nescal-bench did not write (its own folders carry
        :data:`MARK`), holds records without ``resume``, or is locked by another run.
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
    plan = plan_run(config, offline=offline)
    config = plan.config
    context = config.data_context(offline)
    for dataset in config.datasets:
        dataset.prepare(context)

    summary = RunSummary(output=output, n_planned=plan.n_fits)
    with contextlib.ExitStack() as stack:
        real_dir(output)
        stack.enter_context(output_lock(output))
        _refuse_existing(store, output, resume)  # again, now that no other run can write
        if {p.name for p in output.iterdir()} <= {".lock"}:  # new or empty: its own, marked
            write_atomic(output / MARK, "A results folder of nescal-bench run.\n")
        store.remove_temporaries()  # left by a dead runner: only the lock holder writes
        records = _load_records(store, plan, move=True)
        _save_run(plan, output)
        summary.stale = stale_records(plan, records, str(output))
        if progress:
            for line in summary.stale:
                print(line, file=stream)
        state = _Progress(plan, store, records, summary, stream, progress)
        stack.callback(state.bar.close)
        later = [t for t in plan.confirm_fixed if follows_records(t)]
        first = [t for t in plan.search + plan.confirm_fixed if not follows_records(t)]
        state.run(state.pending(first), jobs)
        confirm, missing = plan.confirm_tasks(records)
        already = {t.key for t in plan.search + plan.confirm_fixed}
        fresh = state.pending([t for t in confirm if t.key not in already])
        state.run(fresh, jobs)
        # the methods whose parameters follow the records of those above (time_limit)
        state.run(state.resolved(state.pending(later)), jobs)
        state.bar.close()

        summary.seconds = time.perf_counter() - start
        if progress:
            print(
                f"{config.name}: {summary.n_finished} fits finished, {summary.n_skipped} already recorded, "
                f"{len(summary.failures)} failed, in {_format_seconds(summary.seconds)}"
                + (f"; {len(missing)} method(s) lack search records" if missing else ""),
                file=stream,
            )
        if report:
            from ._report import write_report

            summary.report = write_report(output)
    return summary
