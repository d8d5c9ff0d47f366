"""The runner's guarantees under faults: kill -9 and resume, Ctrl-C, corrupt records, a
second runner.

Nothing lost, nothing silently wrong: after a kill at any point (``--jobs 1`` and
``--jobs 2``) and a resume, the records equal those of an uninterrupted run, and no
worker outlives the runner by more than 5 s; Ctrl-C exits 130 and no partly trained fit
is recorded; a file of ``records/`` that is not a valid record (a NaN metric included)
is skipped with a message naming it, moved to ``records/corrupt/`` and fitted again; a
second runner on the same folder is refused (``filelock``, released by the kernel
however a runner dies).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from _benchmark_helpers import deterministic

from nescal_bench import (
    BenchmarkWarning,
    RecordStore,
    RunError,
    check_record,
    load_config,
    run_benchmark,
)
from nescal_bench._runner import output_lock
from nescal_bench.cli import main

psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[1]
MAX_EPOCHS = 30

#: 8 fits of about 0.2 s each, trained for all MAX_EPOCHS epochs (patience = max_epochs):
#: a record with fewer epochs is a truncated fit.
CONFIG = {
    "name": "crash",
    "datasets": [{"sklearn": "iris"}],
    "recipe": "2026-12-04",
    "methods": [{"loss": "ce", "params": {"batch_size": 16}}],
    "confirm_seeds": list(range(8)),
    "budget": {"max_epochs": MAX_EPOCHS, "patience": MAX_EPOCHS, "hidden_sizes": [8]},
}
INTERRUPTED = (
    "nescal-bench: interrupted; every finished fit is recorded, rerun with --resume to continue.\n"
)


def write_config(directory: Path, data: dict = CONFIG) -> Path:
    path = directory / "crash.json"
    path.write_text(json.dumps({**data, "output": str(directory / "results")}))
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The records of an uninterrupted run (in this process, one job)."""
    directory = tmp_path_factory.mktemp("reference")
    config = load_config(write_config(directory))
    run_benchmark(config, progress=False, report=False)
    store = RecordStore(config.output)
    return Path(config.output), {key: deterministic(store.read(key)) for key in store.keys()}


def start_runner(path: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nescal_bench.cli", "run", str(path), *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=True,  # its own process group, as a terminal job has
        # Ctrl-C as in a terminal, even when this suite runs as a background job (a
        # non-interactive shell starts those with SIGINT ignored, and exec keeps that)
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_records(records: Path, n: int, process: subprocess.Popen, timeout=120) -> set:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {p.name for p in records.glob("*.json")} if records.is_dir() else set()
        if len(found) >= n or process.poll() is not None:
            return found
        time.sleep(0.01)
    raise AssertionError(f"fewer than {n} records after {timeout} s")


def family(process: subprocess.Popen) -> list:
    """The runner and its descendants (workers, resource trackers), while it runs."""
    try:
        runner = psutil.Process(process.pid)
        return [runner, *runner.children(recursive=True)]
    except psutil.NoSuchProcess:
        pytest.fail("the run ended before the test could interrupt it")


def alive(processes) -> list:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def assert_all_gone(processes, within: float) -> float:
    """Wait until none of ``processes`` is alive; return how long it took."""
    start = time.monotonic()
    while alive(processes) and time.monotonic() - start < within:
        time.sleep(0.05)
    left = [(p.pid, " ".join(p.cmdline()[-3:])) for p in alive(processes)]
    assert not left, f"still alive {within} s after the runner ended: {left}"
    return time.monotonic() - start


def check_against(reference: dict, records: Path, names) -> None:
    """Every record file named is a whole, valid record equal to the reference's."""
    for name in names:
        key = name[: -len(".json")]
        record = check_record(json.loads((records / name).read_text()), key)
        # exact: each fit runs on budget.threads threads in any process or --jobs: the same fit
        assert deterministic(record) == reference[key]


@pytest.mark.determinism
@pytest.mark.parametrize("jobs", [1, 2])
def test_kill_9_at_a_random_point_then_resume_loses_duplicates_and_changes_nothing(
    jobs, reference, tmp_path
):
    _, expected = reference
    path = write_config(tmp_path)
    records = tmp_path / "results" / "records"
    process = start_runner(path, "--jobs", str(jobs))
    try:
        wait_for_records(records, 1, process)
        time.sleep(random.Random(jobs).uniform(0.0, 0.2))  # a random point of the next fits
        processes = family(process)
        if jobs > 1:
            assert len(processes) > 2, "no worker processes to orphan"
        at_kill = {p.name for p in records.glob("*.json")}
        os.kill(process.pid, signal.SIGKILL)  # the runner only: its workers must follow
    finally:
        process.wait(timeout=30)
        process.stderr.close()
    assert_all_gone(processes, within=5.0)
    after = {p.name: p.read_bytes() for p in records.glob("*.json")}
    assert at_kill <= set(after) and len(after) < len(expected)
    check_against(expected, records, after)  # those finished after the kill are whole too

    config = load_config(path)
    with warnings.catch_warnings():  # the dead runner's lock needs no taking over
        warnings.simplefilter("error", BenchmarkWarning)
        run_benchmark(config, resume=True, progress=False, report=False)
    names = {p.name for p in records.glob("*.json")}
    assert names == {f"{key}.json" for key in expected}  # nothing lost, nothing extra
    check_against(expected, records, names)  # nothing differing
    assert all((records / name).read_bytes() == data for name, data in after.items())
    assert not list(records.glob(".*")) and not (records / "corrupt").exists()
    assert_released(tmp_path / "results")


SIGINT_HOOK = ROOT / "tests" / "_sigint"  # its sitecustomize.py: Ctrl-C at a chosen point


@pytest.mark.determinism
@pytest.mark.parametrize(
    "jobs, point",
    [
        (1, "get_split_datasets"),  # fit 9, in skorch's loop before its first epoch begins
        (1, "train_step_single"),  # fit 9's first batch
        (2, "get_split_datasets"),  # in a worker, while the other worker is in a fit
    ],
)
def test_ctrl_c_exits_130_and_records_no_partly_trained_fit(
    jobs, point, reference, tmp_path, capsys
):
    """Ctrl-C at a chosen point of the ninth fit (a hook, not a timer: tests/_sigint). The
    hook numbers every network fit, each process's untimed warm-up fit included (one per
    job, before its first fit): the ninth fit of the run is network fit 9 + jobs."""
    _, expected = reference  # the first 8 of these seeds
    path = write_config(tmp_path, {**CONFIG, "confirm_seeds": list(range(16))})
    records = tmp_path / "results" / "records"
    hook = tmp_path / "hook"
    hook.mkdir()
    process = start_runner(
        path,
        "--jobs",
        str(jobs),
        env={
            "PYTHONPATH": os.pathsep.join([str(SIGINT_HOOK), os.environ.get("PYTHONPATH", "")]),
            "NESCAL_TEST_SIGINT": f"{point}:{9 + jobs}:{hook}",
        },
    )
    try:
        wait_for(hook / "ready", process)
        processes = family(process)
        (hook / "go").touch()
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, err
    assert INTERRUPTED in err and "Traceback" not in err, err
    names = {p.name for p in records.glob("*.json")}
    if jobs == 1:
        assert len(names) == 8  # fits 1-8 finished and recorded; the ninth was interrupted
    else:
        assert 6 <= len(names) < 9  # the other worker's fit may have been cut too
    for name in names:
        record = check_record(json.loads((records / name).read_text()), name[:-5])
        assert record["fit"]["n_epochs"] == MAX_EPOCHS  # trained to the end: not truncated
    check_against(expected, records, [n for n in names if n[:-5] in expected])
    assert_released(tmp_path / "results")
    assert_all_gone(processes, within=5.0)


def wait_for(path: Path, process: subprocess.Popen, timeout=120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, f"{path.name} not written in {timeout} s"
        time.sleep(0.01)


def corrupt(records: Path, names: list[str]) -> dict[str, str]:
    """Damage one record file per way a file can be wrong, add a foreign file; return
    name -> the problem the warning names."""
    truncated, empty, binary, braces, missing, nan = names[:6]
    text = (records / truncated).read_text()
    (records / truncated).write_text(text[: len(text) // 2])
    (records / empty).write_bytes(b"")
    (records / binary).write_bytes(bytes(range(0xF0, 0x100)) * 4)
    (records / braces).write_text("{}")
    record = json.loads((records / missing).read_text())
    del record["validation"]
    (records / missing).write_text(json.dumps(record))
    record = json.loads((records / nan).read_text())
    record["test"]["raw"]["nll"] = float("nan")  # a hand edit: a fit cannot record NaN
    (records / nan).write_text(json.dumps(record))
    (records / "notes.json").write_text("[1, 2]")
    return {
        empty: "an empty file (0 bytes)",
        binary: "not UTF-8 text (byte 0xf0 at offset 0)",
        braces: "key: required key missing",
        missing: "validation: required key missing",
        nan: "test.raw.nll: input should be a finite number, got NaN",
    }


@pytest.mark.determinism
def test_corrupt_record_files_are_named_moved_aside_and_refitted(reference, tmp_path, capsys):
    source, expected = reference
    shutil.copytree(source, tmp_path / "results")
    path = write_config(tmp_path)
    records = tmp_path / "results" / "records"
    names = sorted(p.name for p in records.glob("*.json"))
    problems = corrupt(records, names)
    # the report skips them, naming each file and what is wrong with it, and moves them aside
    assert main(["report", str(tmp_path / "results")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 7
    for name, problem in problems.items():
        assert (
            f"nescal-bench: warning: {records / name}: skipped, not a valid record: {problem}; "
            f"moved to {records / 'corrupt' / name}; run --resume fits it again"
        ) in err
    (truncated,) = [line for line in err if names[0] in line]
    assert re.fullmatch(
        rf"nescal-bench: warning: {re.escape(str(records / names[0]))}: skipped, not a valid "
        r"record: invalid JSON at line \d+, column \d+: [^;]+; "
        rf"moved to {re.escape(str(records / 'corrupt' / names[0]))}; run --resume fits it again",
        truncated,
    )
    assert (
        f"nescal-bench: warning: {records / 'notes.json'}: skipped, not a valid record: "
        f"expected a JSON object, got list; moved to {records / 'corrupt' / 'notes.json'}"
    ) in err
    assert "(2 of 8 confirm fits recorded)" in (tmp_path / "results" / "report.md").read_text()
    assert len(list((records / "corrupt").iterdir())) == 7

    # the moved files are not done: --resume fits them again, equal to the originals
    assert main(["run", str(path), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "crash: 6 fits finished, 2 already recorded, 0 failed" in err
    assert "warning" not in err
    now = {p.name for p in records.glob("*.json")}
    assert now == {f"{key}.json" for key in expected}
    check_against(expected, records, now)


@pytest.mark.determinism
def test_resume_moves_corrupt_records_aside_itself(reference, tmp_path, capsys):
    source, expected = reference
    shutil.copytree(source, tmp_path / "results")
    path = write_config(tmp_path)
    records = tmp_path / "results" / "records"
    name = sorted(p.name for p in records.glob("*.json"))[3]
    (records / name).write_text("{}")  # counted as done before
    failures = tmp_path / "results" / "failures"
    failures.mkdir()
    (failures / "x.json").write_text("not json")
    assert main(["run", str(path), "--resume"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        f"nescal-bench: warning: {records / name}: skipped, not a valid record: key: required key missing"
    )
    assert f"moved to {records / 'corrupt' / name}; run --resume fits it again\n" in err
    assert (
        f"nescal-bench: warning: {failures / 'x.json'}: skipped, not a valid failure note: "
        "invalid JSON at line 1, column 1: Expecting value; moved to "  # text, but not a cut record
        f"{failures / 'corrupt' / 'x.json'}\n"
    ) in err
    assert "crash: 1 fits finished, 7 already recorded, 0 failed" in err
    check_against(expected, records, [name])


def assert_released(output: Path) -> None:
    """Another runner can take the output folder's lock now."""
    with output_lock(output):
        pass


def test_one_runner_per_output_folder_and_the_lock_is_released_on_every_exit(
    tmp_path, monkeypatch, capsys
):
    small = {**CONFIG, "confirm_seeds": [0], "budget": {"max_epochs": 2, "hidden_sizes": [8]}}
    config = load_config(write_config(tmp_path, small))
    output = (tmp_path / "results").resolve()
    refusal = (
        f"the output directory '{output}' is in use by another nescal-bench run; wait for it to "
        "end, or set another 'output'"
    )
    output.mkdir()
    with output_lock(output):  # another runner holds it
        with pytest.raises(RunError, match=f"^{re.escape(refusal)}$"):
            run_benchmark(config, progress=False, report=False)
        assert main(["run", str(tmp_path / "crash.json")]) == 2
        assert capsys.readouterr().err == f"nescal-bench: error: {refusal}\n"
    assert not (output / "config.json").exists()  # refused before writing anything
    run_benchmark(config, progress=False, report=False)
    assert_released(output)

    # released on Ctrl-C and on an error too
    import nescal_bench._fit as fit_module
    import nescal_bench._report as report_module

    def interrupt(task):
        raise KeyboardInterrupt

    (tmp_path / "fresh").mkdir()
    fresh = load_config(write_config(tmp_path / "fresh", small))
    monkeypatch.setattr(fit_module, "execute_fit", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(fresh, progress=False, report=False)
    assert_released(Path(fresh.output))
    assert not list((Path(fresh.output) / "records").glob("*"))  # nothing recorded
    monkeypatch.undo()

    def broken(results_dir):
        raise ValueError("report broken")

    monkeypatch.setattr(report_module, "write_report", broken)
    with pytest.raises(ValueError, match="report broken"):
        run_benchmark(fresh, progress=False)
    assert_released(Path(fresh.output))


def test_a_second_process_is_refused_while_a_runner_holds_the_folder(tmp_path):
    """The lock is the kernel's (flock): another process sees it held, and free once the
    holder is gone, however it went (here: killed)."""
    output = tmp_path / "results"
    output.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from nescal_bench._runner import output_lock\n"
            f"with output_lock(__import__('pathlib').Path({str(output)!r})):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RunError, match="is in use by another nescal-bench run"):
            with output_lock(output):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert_released(output)


def test_a_resumed_run_removes_the_temporary_files_a_dead_runner_left(reference, tmp_path):
    source, expected = reference
    shutil.copytree(source, tmp_path / "results")
    records, failures = tmp_path / "results" / "records", tmp_path / "results" / "failures"
    failures.mkdir()
    left = [records / f".{'a' * 20}.x1.tmp", failures / f".{'b' * 20}.x2.tmp"]
    for path in left:
        path.write_text("{")  # a write cut short by a kill -9
    run_benchmark(load_config(write_config(tmp_path)), resume=True, progress=False, report=False)
    assert not any(path.exists() for path in left)  # only the lock holder writes: all are stale


@pytest.mark.parametrize(
    "change, problem",
    [
        (
            lambda r: r["test"]["raw"].update(nll="x"),
            'test.raw.nll: input should be a valid number, got "x"',
        ),
        (
            lambda r: r["test"]["raw"].update(nll=float("inf")),
            "test.raw.nll: input should be a finite number, got Infinity",
        ),
        (
            lambda r: r["conditions"].update(far={"raw": {"auroc": float("nan")}}),
            "conditions.far.raw.auroc: input should be a finite number, got NaN",
        ),
        (lambda r: r.update(seed=-1), "seed: input should be greater than or equal to 0, got -1"),
        (lambda r: r.update(point=[]), "point: input should be a valid dictionary, got []"),
        (lambda r: r["data"].pop("n_train"), "data.n_train: required key missing"),
        (
            lambda r: r["run"].update(fit_seconds=None),
            "run.fit_seconds: input should be a valid number, got null",
        ),
        (
            lambda r: r["validation"].pop("raw"),
            "'validation' has the stages [] but 'test' has ['raw']",
        ),
        (
            lambda r: r.update(key="0" * 20),
            "its 'key' is '00000000000000000000', not the file's name '{key}'",
        ),
        (
            lambda r: r["reliability"]["raw"].update(counts=[1.5]),
            "reliability.raw.counts[0]: input should be a valid integer, got 1.5",
        ),
    ],
)
def test_record_schema_names_what_is_wrong(change, problem, reference):
    source, expected = reference
    key = sorted(expected)[0]
    record = RecordStore(source).read(key)
    check_record(record, key, stages=["raw"], metrics=["nll", "ece"])
    change(record)
    with pytest.raises(ValueError, match=f"^{re.escape(problem.format(key=key))}$"):
        check_record(record, key)
    with pytest.raises(ValueError, match="^'test' has the stages \\['raw'\\]; its configuration"):
        check_record(RecordStore(source).read(key), stages=["raw", "temperature"])


def test_a_record_cut_anywhere_is_not_a_valid_record(reference, tmp_path):
    from nescal_bench._records import InvalidRecordError, _parse

    source, expected = reference
    text = (source / "records" / f"{sorted(expected)[0]}.json").read_text()
    path = tmp_path / "r.json"
    for cut in range(1, len(text) - 2, 97):
        path.write_text(text[:cut])
        with pytest.raises(InvalidRecordError, match=r"^invalid JSON at line \d+, column \d+: "):
            check_record(_parse(path))
