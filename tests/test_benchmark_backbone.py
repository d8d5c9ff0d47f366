"""Smoke run of benchmarks/backbone.py and benchmarks/ensemble_cost.py (the full study runs
outside the suite)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def run_script(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _rows(text: str, header: str) -> dict[str, list[str]]:
    section = text.split(header, 1)[1]
    lines = []
    for line in section.splitlines()[1:]:
        if line.startswith("| ") and "---" not in line:
            lines.append(line)
        elif lines and not line.startswith("|"):
            break
    return {
        cells[0]: cells[1:]
        for cells in ([c.strip() for c in r.strip("|").split("|")] for r in lines[1:])
    }


def test_backbone_quick_smoke(tmp_path):
    run = run_script(
        "benchmarks/backbone.py", "--quick", "--runs", "backbone_search", "--out", str(tmp_path)
    )
    assert (tmp_path / "backbone_backbone_search.png").stat().st_size > 5_000
    text = (tmp_path / "backbone.md").read_text()
    assert text in run.stdout
    table = _rows(text, "## backbone_search")
    assert "realmlp" not in table and "tabm" not in table  # left out of the smoke run
    assert table["hgb"][1] == "reference"
    assert {"nescal", "nescal_m8", "ce_m8", "lightgbm"} <= set(table)

    # against an independent computation from the records
    records = [
        json.loads(p.read_text())
        for p in (tmp_path / "results/backbone_search/records").glob("*.json")
    ]
    nll = {(r["method"], r["dataset"]): r["test"]["temperature"]["nll"] for r in records}
    datasets = sorted({d for _, d in nll})
    changes = [100 * (nll[("nescal_m8", d)] - nll[("hgb", d)]) / nll[("hgb", d)] for d in datasets]
    assert table["nescal_m8"][1] == f"{np.median(changes):+.2f} %"
    assert table["nescal_m8"][0] == f"{np.median([nll[('nescal_m8', d)] for d in datasets]):.4f}"
    per_1000 = [
        1000 * r["run"]["fit_seconds"] / r["data"]["n_train"]
        for r in records
        if r["method"] == "ce_m8"
    ]
    assert table["ce_m8"][-2] == f"{np.median(per_1000):.2f}"
    pairs = _rows(text, "NeSCal against cross-entropy on the same backbone:")
    assert list(pairs) == ["nescal", "nescal_m8"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ensemble_cost_quick(capsys):
    assert _load("ensemble_cost").main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| n_members=1 |" in out and "| n_members=4 |" in out
    assert "ratio to n_members=1" in out


def test_cuda_check_runs_or_says_why_not(capsys):
    assert _load("cuda_check").main() == 0
    out = capsys.readouterr().out
    assert "no CUDA device: nothing to check" in out or "all checks passed" in out
