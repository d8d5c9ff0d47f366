"""The runner under faults: kill -9 and resume, Ctrl-C, corrupt records, a second runner.

Nothing lost, nothing silently wrong: after a kill at any point (``--jobs 1`` and
``--jobs 2``) and a resume, the records equal those of an uninterrupted run, and no
worker outlives the runner by more than 5 s; Ctrl-C exits 130 and no partly trained fit
is recorded; a file of ``records/`` that is not a valid record is skipped with a
message naming it, moved to ``records/corrupt/`` and fitted again; a second runner on
the same folder is refused.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _benchmark_helpers import deterministic

from nescal_sklearn.benchmark import (
    BenchmarkWarning,
    RecordStore,
    RunError,
    check_record,
    load_config,
    run_benchmark,
)
from nescal_sklearn.benchmark._lock import output_lock
from nescal_sklearn.cli import main

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


def start_runner(path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nescal_sklearn.cli", "run", str(path), *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
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
        assert deterministic(record) == reference[key]


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
    lock = tmp_path / "results" / ".lock"
    left = json.loads(lock.read_text())
    assert left["pid"] == process.pid
    with pytest.warns(BenchmarkWarning) as caught:
        run_benchmark(config, resume=True, progress=False, report=False)
    assert [str(w.message) for w in caught] == [
        f"{lock}: took over the lock left by a nescal-bench run that is no longer running "
        f"(pid {process.pid} on host {platform.node()!r}, started {left['started']})"
    ]
    names = {p.name for p in records.glob("*.json")}
    assert names == {f"{key}.json" for key in expected}  # nothing lost, nothing extra
    check_against(expected, records, names)  # nothing differing
    assert all((records / name).read_bytes() == data for name, data in after.items())
    assert not list(records.glob(".*")) and not (records / "corrupt").exists()
    assert not (tmp_path / "results" / ".lock").exists()


@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_exits_130_and_records_no_partly_trained_fit(jobs, reference, tmp_path, capsys):
    _, expected = reference  # the first 8 of these seeds
    path = write_config(tmp_path, {**CONFIG, "confirm_seeds": list(range(16))})
    records = tmp_path / "results" / "records"
    process = start_runner(path, "--jobs", str(jobs))
    try:
        wait_for_records(records, jobs, process)
        processes = family(process)
        if jobs == 1:  # meanwhile, a second runner on the same folder is refused
            lock = json.loads((tmp_path / "results" / ".lock").read_text())
            assert main(["run", str(path), "--resume"]) == 2
            assert capsys.readouterr().err == (
                f"nescal-bench: error: the output directory '{tmp_path / 'results'}' is in use "
                f"by another nescal-bench run (pid {process.pid} on host {platform.node()!r}, "
                f"started {lock['started']}); wait for it to end, or set another 'output'\n"
            )
        else:
            time.sleep(0.15)  # both workers inside a fit
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, err
    assert INTERRUPTED in err and "Traceback" not in err, err
    names = {p.name for p in records.glob("*.json")}
    assert 1 <= len(names) < 16
    for name in names:
        record = check_record(json.loads((records / name).read_text()), name[:-5])
        assert record["fit"]["n_epochs"] == MAX_EPOCHS  # trained to the end: not truncated
    check_against(expected, records, [n for n in names if n[:-5] in expected])
    assert not (tmp_path / "results" / ".lock").exists()  # released
    assert_all_gone(processes, within=5.0)


def corrupt(records: Path, names: list[str]) -> dict[str, str]:
    """Damage one record file per way a file can be wrong, add a foreign file; return
    name -> the problem the warning names."""
    truncated, empty, binary, braces, missing = names[:5]
    text = (records / truncated).read_text()
    (records / truncated).write_text(text[: len(text) // 2])
    (records / empty).write_bytes(b"")
    (records / binary).write_bytes(bytes(range(0xF0, 0x100)) * 4)
    (records / braces).write_text("{}")
    record = json.loads((records / missing).read_text())
    del record["validation"]
    (records / missing).write_text(json.dumps(record))
    (records / "notes.json").write_text("[1, 2]")
    return {
        empty: "an empty file (0 bytes)",
        binary: "not UTF-8 text (byte 0xf0 at offset 0)",
        braces: "missing the keys 'key', 'dataset', 'method', 'point', 'seed', 'params', "
        "'identity', 'data', 'validation', 'test', 'reliability', 'conditions', 'fit', "
        "'calibrators', 'environment', 'run'",
        missing: "missing the key 'validation'",
    }


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
    assert len(err) == 6
    for name, problem in problems.items():
        assert (
            f"nescal-bench: warning: {records / name}: skipped, not a valid record: {problem}; "
            f"moved to {records / 'corrupt' / name}; run --resume fits it again"
        ) in err
    (truncated,) = [line for line in err if names[0] in line]
    assert re.fullmatch(
        rf"nescal-bench: warning: {re.escape(str(records / names[0]))}: skipped, not a valid "
        r"record: invalid JSON at line \d+, column \d+: .+; no closing '}' \(truncated\?\); "
        rf"moved to {re.escape(str(records / 'corrupt' / names[0]))}; run --resume fits it again",
        truncated,
    )
    assert (
        f"nescal-bench: warning: {records / 'notes.json'}: skipped, not a valid record: "
        f"expected a JSON object, got a list; moved to {records / 'corrupt' / 'notes.json'}"
    ) in err
    assert "(3 of 8 confirm fits recorded)" in (tmp_path / "results" / "report.md").read_text()
    assert len(list((records / "corrupt").iterdir())) == 6

    # the moved files are not done: --resume fits them again, equal to the originals
    assert main(["run", str(path), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "crash: 5 fits finished, 3 already recorded, 0 failed" in err
    assert "warning" not in err
    now = {p.name for p in records.glob("*.json")}
    assert now == {f"{key}.json" for key in expected}
    check_against(expected, records, now)


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
        f"nescal-bench: warning: {records / name}: skipped, not a valid record: missing the keys "
    )
    assert f"moved to {records / 'corrupt' / name}; run --resume fits it again\n" in err
    assert (
        f"nescal-bench: warning: {failures / 'x.json'}: skipped, not a valid failure note: "
        "invalid JSON at line 1, column 1: Expecting value; moved to "  # text, but not a cut record
        f"{failures / 'corrupt' / 'x.json'}\n"
    ) in err
    assert "crash: 1 fits finished, 7 already recorded, 0 failed" in err
    check_against(expected, records, [name])


def test_lock_refusals_stale_locks_and_release(tmp_path, monkeypatch, capsys):
    small = {**CONFIG, "confirm_seeds": [0], "budget": {"max_epochs": 2, "hidden_sizes": [8]}}
    config = load_config(write_config(tmp_path, small))
    output = (tmp_path / "results").resolve()
    lock = output / ".lock"

    with output_lock(output):  # another runner holds it
        info = json.loads(lock.read_text())
        with pytest.raises(RunError) as refused:
            run_benchmark(config, progress=False, report=False)
        assert str(refused.value) == (
            f"the output directory '{output}' is in use by another nescal-bench run (pid "
            f"{os.getpid()} on host {platform.node()!r}, started {info['started']}); wait for "
            "it to end, or set another 'output'"
        )
    assert not lock.exists() and not (output / "config.json").exists()

    # a lock left by a dead runner on this host is taken over, with a warning
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    left = {"pid": int(dead), "host": platform.node(), "started": "2025-01-01T00:00:00+00:00"}
    lock.write_text(json.dumps(left))
    message = (
        f"{lock}: took over the lock left by a nescal-bench run that is no longer running "
        f"(pid {dead} on host {platform.node()!r}, started 2025-01-01T00:00:00+00:00)"
    )
    with pytest.warns(BenchmarkWarning, match=f"^{re.escape(message)}$"):
        run_benchmark(config, progress=False, report=False)
    assert not lock.exists()

    # another host's lock cannot be checked: refused unless broken explicitly
    other = {"pid": 1, "host": "elsewhere", "started": "2025-01-01T00:00:00+00:00"}
    lock.write_text(json.dumps(other))
    with pytest.raises(RunError) as refused:
        run_benchmark(config, resume=True, progress=False, report=False)
    assert str(refused.value) == (
        f"the output directory '{output}' holds the lock of a nescal-bench run on another "
        "host (pid 1 on host 'elsewhere', started 2025-01-01T00:00:00+00:00), which cannot "
        "be checked from here; if that run has ended, pass --break-lock (break_lock=True)"
    )
    assert main(["run", str(tmp_path / "crash.json"), "--resume"]) == 2
    assert capsys.readouterr().err == f"nescal-bench: error: {refused.value}\n"
    assert main(["run", str(tmp_path / "crash.json"), "--resume", "--break-lock"]) == 0
    assert capsys.readouterr().err.startswith(
        f"nescal-bench: warning: {lock}: took over the lock left by a nescal-bench run that "
        "was broken with --break-lock (pid 1 on host 'elsewhere', started "
        "2025-01-01T00:00:00+00:00)\n"
    )
    assert not lock.exists()

    # released on Ctrl-C and on an error too
    import nescal_sklearn.benchmark._fit as fit_module
    import nescal_sklearn.benchmark._report as report_module

    def interrupt(task):
        raise KeyboardInterrupt

    (tmp_path / "fresh").mkdir()
    fresh = load_config(write_config(tmp_path / "fresh", small))
    monkeypatch.setattr(fit_module, "execute_fit", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(fresh, progress=False, report=False)
    assert not (Path(fresh.output) / ".lock").exists()
    assert not list((Path(fresh.output) / "records").glob("*"))  # nothing recorded
    monkeypatch.undo()

    def broken(results_dir):
        raise ValueError("report broken")

    monkeypatch.setattr(report_module, "write_report", broken)
    with pytest.raises(ValueError, match="report broken"):
        run_benchmark(fresh, progress=False)
    assert not (Path(fresh.output) / ".lock").exists()


def test_a_resumed_run_keeps_the_temporary_files_of_live_writers(tmp_path):
    from nescal_sklearn.benchmark._records import _host_hash

    records = tmp_path / "records"
    records.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
        live = records / f".{'a' * 20}.p{sleeper.pid}h{_host_hash()}.x1.tmp"
        gone = records / f".{'b' * 20}.p{dead}h{_host_hash()}.x2.tmp"
        foreign = records / f".{'c' * 20}.p{dead}h00000000.x3.tmp"  # another host's writer
        for path in (live, gone, foreign):
            path.write_text("{")
        assert RecordStore(tmp_path).remove_stale_temporaries() == 1
        assert live.exists() and not gone.exists() and foreign.exists()
        old = time.time() - 7200
        os.utime(foreign, (old, old))  # but not forever
        assert RecordStore(tmp_path).remove_stale_temporaries() == 1 and not foreign.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda r: r["test"]["raw"].update(nll="x"), "'test.raw.nll' is \"x\"; expected a number"),
        (lambda r: r.update(seed=-1), "'seed' is -1; expected an int >= 0"),
        (lambda r: r.update(point=[]), "'point' is a list; expected an object"),
        (lambda r: r["data"].pop("n_train"), "missing the key 'n_train' of 'data'"),
        (lambda r: r["run"].update(fit_seconds=None), "'run.fit_seconds' is null; expected a "
         "number of seconds >= 0"),
        (lambda r: r["validation"].pop("raw"), "missing the key 'raw' of 'validation'"),
        (lambda r: r.update(key="0" * 20), "its 'key' is '00000000000000000000', not the "
         "file's name '{key}'"),
        (lambda r: r["reliability"]["raw"].update(counts=[1.5]), "'reliability.raw.counts' is "
         "a list; expected a list of counts"),
    ],
)  # fmt: skip
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


def test_a_record_cut_anywhere_is_called_truncated_and_other_bad_text_is_not(tmp_path):
    from nescal_sklearn.benchmark._records import InvalidRecordError, _parse

    text = json.dumps(
        {"key": "ab", "fit": {"n_epochs": 3, "history": [1.5, {"x": "y z"}]}}, indent=1
    )
    path = tmp_path / "r.json"
    for cut in range(1, len(text) - 1):
        path.write_text(text[:cut])
        with pytest.raises(InvalidRecordError, match=re.escape("no closing '}' (truncated?)")):
            _parse(path)
    for bad in ("not json", '{"a": 1} trailing', '{"a": 1,, "b": 2}', "[1, 2]]"):
        path.write_text(bad)
        with pytest.raises(InvalidRecordError) as info:
            _parse(path)
        assert "truncated" not in str(info.value), bad
