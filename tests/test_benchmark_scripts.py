"""Smoke runs of the slow benchmark scripts (their full runs live outside the suite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def run_script(*args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_overhead_quick():
    out = run_script("benchmarks/overhead.py", "--quick")
    assert "fastest epoch s after warm-up (default)" in out and "(JS pairwise)" in out
    assert "predict_proba seconds" in out
    assert "graph build (epoch 2)" in out


@pytest.mark.skipif(not DATA.is_dir(), reason="the local dev suite ../shared/data is absent")
def test_quality_quick_records_and_summary(tmp_path):
    out_dir = tmp_path / "quality"
    out = run_script(
        "benchmarks/quality.py", "--quick", "--data-dir", str(DATA), "--out", str(out_dir),
        "--method-spec", 'auto={"loss": "nescal", "params": {"warmup": "auto"}}',
        "--protocols", "early_stopping",
    )
    records = [json.loads(line) for line in (out_dir / "records.jsonl").read_text().splitlines()]
    assert {r["method"] for r in records} == {"ce", "nescal", "auto"}
    assert all(r["raw"]["nll"] > 0 and r["after_ts"]["nll"] > 0 for r in records)
    assert "nescal vs ce, test NLL after ts" in out
    # a rerun finds every fit recorded and trains nothing
    again = run_script(
        "benchmarks/quality.py", "--quick", "--data-dir", str(DATA), "--out", str(out_dir),
        "--method-spec", 'auto={"loss": "nescal", "params": {"warmup": "auto"}}',
        "--protocols", "early_stopping",
    )
    assert "3 fits planned, 3 already recorded" in again


@pytest.mark.skipif(not DATA.is_dir(), reason="the local dev suite ../shared/data is absent")
def test_quickstart_example_writes_table_and_diagram(tmp_path):
    out = run_script(
        "examples/quickstart.py", "--dataset", "wdbc", "--data-dir", str(DATA),
        "--max-epochs", "3", "--out", str(tmp_path),
    )
    assert "| NeSCal |" in out and "| Cross-entropy |" in out
    assert (tmp_path / "reliability.png").stat().st_size > 10_000
    assert "reliability.png" in (tmp_path / "quickstart.md").read_text()


def test_torch_loop_example():
    out = run_script("examples/torch_loop.py")
    nll = float(out.split("test NLL")[1].split()[0])
    assert 0 < nll < 0.5


def test_study_summary_reports_only_the_configs_chosen_fits(tmp_path):
    from nescal_sklearn.benchmark import load_config, run_benchmark

    data = {
        "name": "summary",
        "output": str(tmp_path / "results"),
        "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
        "methods": [
            {"name": "ce", "loss": "ce"},
            {"name": "ls", "loss": "label_smoothing", "grid": {"epsilon": [0.05, 0.2]}},
        ],
        "calibrators": ["temperature"],
        "search_seeds": [0],
        "confirm_seeds": [1, 2],
        "budget": {"max_epochs": 2, "hidden_sizes": [8]},
    }
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(data))
    run_benchmark(load_config(path), progress=False, report=False)
    # a stale record of an earlier config (another method) in the folder is ignored
    records = sorted((tmp_path / "results" / "records").glob("*.json"))
    stale = json.loads(records[0].read_text())
    stale.update(key="0" * 20, method="removed_method", seed=1)
    (tmp_path / "results" / "records" / "stale.json").write_text(json.dumps(stale))

    out = run_script(
        "benchmarks/study_summary.py", str(tmp_path / "results"), "--confirm-seeds", "1", "2",
        "--best-of", "ce", "ls", "--plot", str(tmp_path / "changes.png"),
    )
    assert (tmp_path / "changes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Against `ce`" in out and "removed_method" not in out
    assert "## Against the better of `ce` and `ls`" in out
    rows = [line for line in out.splitlines() if line.startswith("| ls | raw |")]
    assert len(rows) == 1 and "/2 |" in rows[0]  # two datasets compared
    table = out.split("## Test NLL after temperature scaling")[1]
    assert "| sklearn-iris |" in table and "| sklearn-wine |" in table


def test_study_summary_better_of_two_references_is_chosen_per_dataset():
    import importlib.util

    spec = importlib.util.spec_from_file_location("study_summary", ROOT / "benchmarks" / "study_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def cell(nll, acc):
        return {stage: {"nll": [nll], "accuracy": [acc]} for stage in ("raw", "ts")}

    table = {
        ("a", "x"): cell(0.9, 0.5), ("ce", "x"): cell(1.0, 0.5), ("ls", "x"): cell(0.8, 0.6),
        ("a", "y"): cell(0.5, 0.5), ("ce", "y"): cell(1.0, 0.5), ("ls", "y"): cell(2.0, 0.6),
    }
    datasets, changes, accuracy, _ = module.compare(table, "a", ("ce", "ls"), "ts")
    assert datasets == ["x", "y"]
    # x: the better reference is ls (0.8): +12.5 %; y: ce (1.0): -50 %
    assert changes.tolist() == pytest.approx([12.5, -50.0])
    assert accuracy.tolist() == pytest.approx([-0.1, 0.0])
