"""Report-only commands run from the committed records alone: without the data's manifest
(``NESCAL_DATA_DIR`` pointed at a missing folder) and without the anchors' packages
(pytabkit, lightgbm, autogluon made unimportable, as if not installed), and they print
what they print with both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Run a script (argv[1:]) with the anchors' packages missing: a finder first on the path
#: gives them a spec without an origin (what the lab's check for an installed package reads
#: as not installed) whose import raises ModuleNotFoundError.
BLOCKED = """
import importlib.abc, importlib.machinery, runpy, sys

class Missing(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pytabkit", "lightgbm", "autogluon"}:
            return importlib.machinery.ModuleSpec(name, self)
    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, Missing())
for name in ("pytabkit", "lightgbm", "autogluon.tabular"):
    try:
        __import__(name)
    except ModuleNotFoundError:
        continue
    raise SystemExit(f"{name} is importable")
sys.argv = sys.argv[1:]
sys.path.insert(0, ".")  # the checkout's nescal_bench, as the scripts' tests import it
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run(*args: str, blocked: bool, tmp_path: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    if blocked:
        env["NESCAL_DATA_DIR"] = str(tmp_path / "no-data")  # no manifest.json there
    command = [sys.executable, "-c", BLOCKED, *args] if blocked else [sys.executable, *args]
    result = subprocess.run(
        command,
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_a_studys_no_run_needs_neither_the_data_nor_its_anchors(tmp_path):
    config = json.loads((ROOT / "benchmarks/configs/oof_ensembles_search.json").read_text())
    anchors = {m["estimator"] for m in config["methods"] if "estimator" in m}
    assert any(a.startswith("pytabkit.") for a in anchors)  # RealMLP-TD, from pytabkit
    script = ["benchmarks/oof_ensembles.py", "--config", "oof_ensembles_search", "--no-run"]
    alone = run(*script, "--out", str(tmp_path / "alone"), blocked=True, tmp_path=tmp_path)
    usual = run(*script, "--out", str(tmp_path / "usual"), blocked=False, tmp_path=tmp_path)
    assert alone == usual
    realmlp = [
        m["name"] for m in config["methods"] if m.get("estimator", "").startswith("pytabkit")
    ]
    table = (tmp_path / "alone" / "table_oof_ensembles_search.md").read_text()
    assert all(f"| {name} " in table for name in realmlp)  # its records reported
    assert table == (tmp_path / "usual" / "table_oof_ensembles_search.md").read_text()


def test_compare_needs_neither_the_data_nor_the_anchors(tmp_path):
    args = ["nescal_bench_command.py", "compare", "benchmarks/results/oof_ensembles_search"]
    alone = run(*args, "--stages", "raw", blocked=True, tmp_path=tmp_path)
    assert alone == run(*args, "--stages", "raw", blocked=False, tmp_path=tmp_path)
    assert "| realmlp " in alone  # the pytabkit anchor's records, compared


def test_the_keys_found_without_building_estimators_are_the_plans():
    from nescal_bench import plan_run, validate_config
    from nescal_bench._plan import fit_index

    config = validate_config(
        {
            "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
            "recipe": "2026-12-04",
            "methods": [
                {"loss": "nescal", "grid": {"weight": [0.5, 1.0]}, "params": {"n_neighbors": 5}},
                {"loss": "ce"},
                {
                    "estimator": "sklearn.ensemble.HistGradientBoostingClassifier",
                    "params": {"max_iter": 5},
                },
                {
                    "name": "lgbm",
                    "estimator": "nescal_bench.LightGBMClassifier",
                    "grid": {"num_leaves": [7, 15]},
                },
            ],
            "search_seeds": [0, 1],
            "confirm_seeds": [1, 2],
            "budget": {"max_epochs": 2},
        }
    )
    planned = plan_run(config).index.entries
    assert len(planned) == 2 * (2 * 3 + 2 + 2 + 2 * 3)  # search 0, 1 and confirm 2 per point
    assert fit_index(config).entries == planned
