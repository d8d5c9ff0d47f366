"""Smoke run of ``benchmarks/stress_tests.py`` on its smoke config (the full study is not run
in the suite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _benchmark_helpers import squeeze

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def run_script(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "benchmarks/stress_tests.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_stress_and_smoke_configs_list_the_same_conditions():
    from nescal_bench import load_config

    full = load_config(ROOT / "benchmarks/configs/stress_tests.json")
    smoke = json.loads((ROOT / "benchmarks/configs/stress_tests_smoke.json").read_text())
    assert (
        smoke["conditions"]
        == json.loads((ROOT / "benchmarks/configs/stress_tests.json").read_text())["conditions"]
    )
    assert len(full.conditions) == 5 * 5 + 4 and len(full.datasets) == 19
    assert [m.name for m in full.methods] == ["ce", "label_smoothing", "nescal"]
    assert full.confirm_seeds == (3, 4, 5) and full.budget.max_rows == 3000


@pytest.mark.skipif(not DATA.is_dir(), reason="the local dev suite ../shared/data is absent")
def test_stress_tests_smoke(tmp_path):
    config = json.loads((ROOT / "benchmarks/configs/stress_tests_smoke.json").read_text())
    config["output"] = str(tmp_path / "results")
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps(config))
    out = run_script("--config", str(path), "--out", str(tmp_path / "report"))
    for name in ("nll", "ece", "accuracy"):
        assert (tmp_path / "report" / f"stress_{name}.png").stat().st_size > 5_000
    raw = (tmp_path / "report" / "stress_tests.md").read_text()
    assert raw in out
    tables = squeeze(raw)
    for family, kind, n in (("noise", "feature_noise", 2), ("swap", "category_swap", 1)):
        assert f"### `{family}` ({kind}), {n} datasets" in tables
    assert "| method | stage | metric | clean | s1 | s2 | s3 | s4 | s5 | mean |" in tables
    rows = [line for line in tables.splitlines() if line.startswith("| ce | TS | nll |")]
    assert len(rows) == 5  # one per family
    assert "### `ood_held_out` (held_out_class), 1 datasets" in tables  # vehicle only
    assert "| all corruptions | NLL | raw | nescal | " in tables
    assert "/45 |" in tables  # 2 datasets x 20 conditions + credit-g x 5 swaps
    # --no-run reports again from the records alone
    again = run_script("--config", str(path), "--out", str(tmp_path / "report"), "--no-run")
    assert again == out
