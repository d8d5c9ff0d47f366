"""Smoke run of benchmarks/ablations.py (the full ablation grid runs outside the suite)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "benchmarks" / "configs"
FACTORS = ("k", "warmup", "schedule", "reduction", "embedding", "cache", "search", "graph")


def run_script(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def load_script():
    spec = importlib.util.spec_from_file_location("ablations", ROOT / "benchmarks/ablations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_rows(text: str, factor: str) -> dict[str, list[str]]:
    """``method -> cells`` of one factor's table in the script's markdown."""
    section = text.split(f"## {factor}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {
        cells[0]: cells[1:]
        for cells in ([c.strip() for c in r.strip("|").split("|")] for r in rows[1:])
    }


@pytest.mark.parametrize("factor", FACTORS)
def test_each_factor_varies_one_thing_around_the_shared_default(factor):
    config = json.loads((CONFIGS / f"ablation_{factor}.json").read_text())
    shift = json.loads((CONFIGS / "nescal_shift.json").read_text())
    assert config["output"] == "results/ablations"  # shared: CE and the default fit once
    assert config["datasets"] == shift["datasets"] == [{"suite": "dev"}]  # the 19 dev sets
    assert config["budget"] == shift["budget"]
    assert config["confirm_seeds"] == [3, 4, 5] and config["calibrators"] == ["temperature"]
    methods = config["methods"]
    assert methods[:2] == [{"name": "ce", "loss": "ce"}, {"name": "nescal", "loss": "nescal"}]
    varied = {name for m in methods[2:] for name in m["params"]}
    # The experimental settings are ExperimentalNeSCalLoss's (the same training at its defaults).
    assert len(varied) == 1
    assert all(m["loss"] in ("nescal", "nescal_experimental") for m in methods[2:])


def test_labels_name_the_varied_setting_and_the_library_default():
    from nescal_bench import load_config

    script = load_script()
    labels = script.labels(load_config(CONFIGS / "ablation_k.json"))
    assert labels["nescal"] == "default: n_neighbors=10"
    assert labels["nescal_k3"] == "n_neighbors=3" and labels["nescal_k50"] == "n_neighbors=50"
    labels = script.labels(load_config(CONFIGS / "ablation_embedding.json"))
    assert labels["nescal_first_hidden"] == "embedding_layer='layers.3'"


def test_ablations_quick_smoke(tmp_path):
    run = run_script(
        "benchmarks/ablations.py", "--quick", "--factors", "cache", "graph", "--out", str(tmp_path)
    )
    # the second config finds CE and the default in the shared folder
    assert "ablation_graph: 2 fits finished, 4 already recorded, 0 failed" in run.stderr
    for factor in ("cache", "graph"):
        assert (tmp_path / f"ablation_{factor}.png").stat().st_size > 5_000
    text = (tmp_path / "ablations.md").read_text()
    assert text in run.stdout
    cache = table_rows(text, "cache")
    assert list(cache) == ["nescal", "nescal_cache_frozen", "nescal_cache_epoch", "ce"]
    assert cache["nescal"][0] == "default: cache='batch'" and cache["nescal"][1] == "reference"
    assert list(table_rows(text, "graph")) == ["nescal", "nescal_random_graph", "ce"]
    for cells in cache.values():
        assert cells[-1] == "0/2"  # every NeSCal fit was penalised (CE has no status)

    # the table's statistics against an independent computation from the records
    from scipy.stats import wilcoxon

    records = [json.loads(p.read_text()) for p in (tmp_path / "results/records").glob("*.json")]
    nll = {(r["method"], r["dataset"]): r["test"]["temperature"]["nll"] for r in records}
    datasets = sorted({d for _, d in nll})
    changes = [
        100 * (nll[("nescal_cache_frozen", d)] - nll[("nescal", d)]) / nll[("nescal", d)]
        for d in datasets
    ]
    assert cache["nescal_cache_frozen"][1] == f"{np.median(changes):+.2f} %"
    lower = sum(c < -1.0 for c in changes)  # the configs' tie tolerance is 1 %
    higher = sum(c > 1.0 for c in changes)
    assert cache["nescal_cache_frozen"][2] == f"{lower} / {2 - lower - higher} / {higher} of 2"
    assert cache["nescal_cache_frozen"][3] == f"{wilcoxon(changes).pvalue:.3g}"

    # --no-run reports again from the records alone
    again = run_script(
        "benchmarks/ablations.py",
        "--quick",
        "--factors",
        "cache",
        "graph",
        "--out",
        str(tmp_path),
        "--no-run",
    )
    assert "fits finished" not in again.stderr
    # exact: the same report code on the same records (floats round-trip JSON exactly)
    assert (tmp_path / "ablations.md").read_text() == text
