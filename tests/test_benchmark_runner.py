"""The benchmark runner end to end: dry run, records, reproducibility, resume, report."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import wilcoxon

from nescal_sklearn.benchmark import (
    RecordStore,
    RunError,
    load_config,
    plan_run,
    run_benchmark,
    validate_config,
)
from nescal_sklearn.cli import main

TINY = {
    "name": "tiny",
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}, {"sklearn": "breast_cancer"}],
    "methods": [
        {"loss": "ce"},
        {"loss": "nescal", "params": {"n_neighbors": 5}, "grid": {"weight": [0.5, 1.0]}},
        {
            "name": "nescal_random",
            "loss": "nescal",
            "params": {"n_neighbors": 5, "graph": "random"},
        },
        {
            "name": "hgb",
            "estimator": "sklearn.ensemble.HistGradientBoostingClassifier",
            "params": {"max_iter": 10},
        },
    ],
    "calibrators": ["temperature"],
    "search_seeds": [0],
    "confirm_seeds": [1, 2],
    "budget": {"max_epochs": 2, "hidden_sizes": [16]},
}


def write_config(directory: Path, data: dict, name: str = "tiny.json") -> Path:
    data = {**data, "output": str(directory / "results")}
    path = directory / name
    path.write_text(json.dumps(data))
    return path


def deterministic(record: dict) -> dict:
    """A record without its timing and host (the ``run`` section)."""
    return {k: v for k, v in record.items() if k != "run"}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    config = load_config(write_config(directory, TINY))
    stream = io.StringIO()
    summary = run_benchmark(config, stream=stream)
    return config, summary, stream.getvalue()


def test_dry_run_prints_the_plan_and_trains_nothing(tmp_path, capsys):
    path = write_config(tmp_path, TINY)
    assert main(["run", str(path), "--dry-run", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Plan of 'tiny' -> {tmp_path / 'results'}\ndatasets (3):\n")
    assert re.search(r"sklearn-iris +150 rows +4 features +3 classes", out)
    assert re.search(
        r"nescal +loss=nescal \{\"n_neighbors\": 5\}; 2 grid points: weight in \[0.5, 1.0\]", out
    )
    assert "hgb                      sklearn.ensemble.HistGradientBoostingClassifier" in out
    assert "calibrators: temperature\n" in out
    assert (
        "seeds: search [0], confirm [1, 2]; grid point chosen on mean validation NLL (raw)\n" in out
    )
    assert (
        "fits: 3 datasets x (2 searched grid points x 1 search seeds + 4 methods x 2 confirm "
        "seeds) = 30 fits, 30 distinct" in out
    )
    assert re.search(r"estimated time: \d+ (s|min \d\d s) with 2 jobs \(.*ce: measured ", out)
    assert not (tmp_path / "results").exists()


def test_end_to_end_records(tiny_run):
    config, summary, progress = tiny_run
    store = RecordStore(config.output)
    plan = plan_run(config)
    assert summary.n_finished == plan.n_fits == 30 and not summary.failures
    assert len(store.keys()) == 30
    record = store.read(sorted(store.keys())[0])
    assert set(record["test"]) == {"raw", "temperature"}
    assert set(record["test"]["raw"]) >= {"nll", "ece", "brier", "accuracy"}
    assert set(record["environment"]) >= {"nescal_sklearn", "torch", "sklearn", "numpy", "skorch"}
    assert record["run"]["fit_seconds"] > 0
    assert len(record["reliability"]["raw"]["counts"]) == 15
    for key in store.keys():
        assert store.read(key)["key"] == key
    lines = [line for line in progress.splitlines() if line.startswith("[")]
    assert len(lines) == 30
    assert re.match(
        r"\[1/30\] sklearn-\w+ \| nescal \| weight=0.5 \| seed 0 \(search\) \| val NLL \d\.\d{4} \| "
        r"test NLL \d\.\d{4} ECE \d\.\d{4} acc \d\.\d{4} \| temperature: NLL \d\.\d{4} ECE \d\.\d{4} \| "
        r"\d+\.\d s$",
        lines[0],
    )
    assert "tiny: 30 fits finished, 0 already recorded, 0 failed" in progress
    saved = json.loads((Path(config.output) / "config.json").read_text())
    assert validate_config(saved, check_files=False).methods == config.methods


def test_same_config_and_seeds_reproduce_the_records(tiny_run, tmp_path):
    config, _, _ = tiny_run
    subset = {**TINY, "datasets": TINY["datasets"][:1], "methods": TINY["methods"][:3]}
    again = load_config(write_config(tmp_path, subset))
    run_benchmark(again, progress=False, report=False)
    first, second = RecordStore(config.output), RecordStore(again.output)
    assert second.keys() and second.keys() <= first.keys()
    for key in second.keys():
        assert deterministic(second.read(key)) == deterministic(first.read(key))


def test_existing_records_need_resume(tiny_run):
    config, _, _ = tiny_run
    with pytest.raises(
        RunError,
        match=re.escape(
            f"The output directory {str(Path(config.output).resolve())!r} already holds 30 records; "
            "pass --resume (resume=True) to continue that run, or set another 'output' in the config."
        ),
    ):
        run_benchmark(config, progress=False)
    summary = run_benchmark(config, resume=True, progress=False, report=False)
    assert (summary.n_finished, summary.n_skipped, summary.failures) == (0, 30, [])


def test_report_contents(tiny_run):
    config, summary, _ = tiny_run
    output = Path(config.output)
    markdown = (output / "report.md").read_text()
    for heading in (
        "# Benchmark report: tiny",
        "## Average ranks",
        "## Per-dataset results",
        "### sklearn-iris",
        "## Wins / ties / losses and Wilcoxon signed-rank tests",
        "### Against CE `ce`",
        "### Against NeSCal `nescal`",
        "## Random-graph control",
        "## Model selection",
        "## Environment",
    ):
        assert f"\n{heading}\n" in f"\n{markdown}", heading
    assert "| Method | Calibration | NLL | ECE | Brier | Accuracy | Chosen point |" in markdown
    assert re.search(r"\| ce \| raw \| \d\.\d{4} ± \d\.\d{4} \|", markdown)
    assert re.search(
        r"\| nescal \| raw \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| weight=(0\.5|1\.0) \|", markdown
    )
    assert "| Method | NLL raw | NLL +temperature | ECE raw |" in summary.report["headline"]
    # the random-graph control sits right after NeSCal, in the headline and per dataset
    headline_rows = [line.split(" | ")[0][2:] for line in summary.report["headline"].splitlines()]
    assert headline_rows[2:] == ["ce", "nescal", "nescal_random", "hgb"]
    iris = markdown.split("### sklearn-iris")[1].split("###")[0]
    rows = [line.split(" | ")[0][2:] for line in iris.splitlines() if line.startswith("| ")]
    assert rows[2:] == [
        "ce",
        "ce",
        "nescal",
        "nescal",
        "nescal_random",
        "nescal_random",
        "hgb",
        "hgb",
    ]

    # the Wilcoxon p-value of nescal vs ce (NLL, raw) is scipy's on the per-dataset means
    store = RecordStore(output)
    means = {}
    for record in store.load_all():
        if record["seed"] in config.confirm_seeds and record["method"] in ("ce", "nescal"):
            means.setdefault((record["method"], record["dataset"]), []).append(
                record["test"]["raw"]["nll"]
            )
    datasets = [d.name for d in config.datasets]
    a = [np.mean(means[("nescal", d)]) for d in datasets]
    b = [np.mean(means[("ce", d)]) for d in datasets]
    if not np.allclose(a, b, rtol=0, atol=0):
        p = wilcoxon(a, b).pvalue
        section = markdown.split("### Against CE `ce`")[1].split("###")[0]
        nescal_row = next(line for line in section.splitlines() if line.startswith("| nescal |"))
        assert f"p={p:.3g}" in nescal_row.split(" | ")[1]
    assert re.search(r"\d+/\d+/\d+, p=(\d|n/a)", markdown)

    figures = sorted(p.name for p in (output / "figures").glob("*.png"))
    assert figures == ["sklearn-breast_cancer.png", "sklearn-iris.png", "sklearn-wine.png"]
    for name in figures:
        assert (output / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![Reliability diagrams of {name[:-4]}](figures/{name})" in markdown
    page = (output / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert 'src="figures/' not in page and "<table>" in page


def test_report_command_rewrites_the_report(tiny_run, capsys):
    config, _, _ = tiny_run
    output = Path(config.output)
    (output / "report.md").unlink()
    assert main(["report", str(output)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| Method | NLL raw | NLL +temperature |")
    assert (output / "report.md").is_file()
    assert main(["report", str(output / "nowhere")]) == 2


def test_failed_fits_are_reported_and_retried(tmp_path, capsys):
    failing = {
        **TINY,
        "datasets": [{"sklearn": "iris"}],
        "methods": [{"loss": "ce"}, {"loss": "nescal", "params": {"n_neighbors": 500}}],
        "search_seeds": [],
        "confirm_seeds": [0],
    }
    path = write_config(tmp_path, failing)
    assert main(["run", str(path)]) == 1
    captured = capsys.readouterr()
    assert "1 fit(s) failed; see" in captured.err
    assert (
        "| nescal | no grid | seed 0 (confirm) | FAILED: ValueError: loss__n_neighbors=500"
        in captured.err
    )
    assert len(list((tmp_path / "results" / "failures").glob("*.json"))) == 1
    assert "## Failed fits" in (tmp_path / "results" / "report.md").read_text()
    assert main(["run", str(path), "--resume"]) == 1  # retried, fails again
    assert "1 already recorded, 1 failed" in capsys.readouterr().err


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path):
    config_data = {
        **TINY,
        "datasets": [{"sklearn": "digits"}],
        "methods": [{"loss": "ce"}],
        "search_seeds": [],
        "confirm_seeds": list(range(12)),
        "budget": {"max_epochs": 3, "hidden_sizes": [16]},
    }
    path = write_config(tmp_path, config_data)
    records = tmp_path / "results" / "records"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "nescal_sklearn.cli", "run", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            if records.is_dir() and len(list(records.glob("*.json"))) >= 3:
                break
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    before = {p.name: p.read_bytes() for p in records.glob("*.json")}
    if len(before) == 12:
        pytest.skip("the run finished before it could be killed")
    assert 3 <= len(before) < 12

    assert main(["run", str(path), "--resume"]) == 0
    after = {p.name: p.read_bytes() for p in records.glob("*.json")}
    plan = plan_run(load_config(path))
    expected = {f"{t.key}.json" for t in plan.confirm_fixed}
    assert set(after) == expected  # nothing lost, nothing extra
    assert all(after[name] == data for name, data in before.items())  # finished fits untouched
    assert not list(records.glob(".*"))  # no temporary files left

    # the resumed run equals an uninterrupted one, here with 2 parallel joblib workers
    (tmp_path / "fresh").mkdir()
    fresh = load_config(write_config(tmp_path / "fresh", config_data))
    run_benchmark(fresh, jobs=2, progress=False, report=False)
    fresh_store, store = RecordStore(fresh.output), RecordStore(tmp_path / "results")
    assert fresh_store.keys() == store.keys()
    for key in store.keys():
        assert deterministic(fresh_store.read(key)) == deterministic(store.read(key))
