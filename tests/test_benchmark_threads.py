"""Smoke run of benchmarks/threads.py (its full run is documented in docs/nescal.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_threads_benchmark_quick():
    result = subprocess.run(
        [sys.executable, "benchmarks/threads.py", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["setting", "n_threads=1", "n_threads=None", "ratio", "None/1"]
    for setting, line in zip(["alone", "side by side", "grid search"], lines[2:5], strict=True):
        assert line.startswith(setting)
        one, default, ratio = (float(v) for v in re.findall(r"([0-9.]+)[sx]", line))
        assert one > 0 and default > 0
        # Seconds are printed to 0.01 s and the ratio to 0.01: allow for both roundings.
        low, high = (default - 0.005) / (one + 0.005), (default + 0.005) / max(one - 0.005, 1e-9)
        assert low - 0.005 <= ratio <= high + 0.005
