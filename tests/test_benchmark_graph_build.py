"""Smoke test of benchmarks/graph_build.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "graph_build.py"


def test_graph_build_benchmark_quick_run():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.split()[:2] == ["n", "method"] for line in lines), result.stdout
    rows = [line.split() for line in lines if line.split()[:1] == ["2000"]]
    assert [row[1] for row in rows] == ["exact", "auto"], result.stdout
    assert all(row[2] == "exact" and row[7] == "1.000" for row in rows), result.stdout
