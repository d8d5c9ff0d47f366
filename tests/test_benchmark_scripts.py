"""Smoke runs of the slow benchmark scripts (their full runs live outside the suite)."""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import wilcoxon

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DIGITS_WINE = ("sklearn-digits", "sklearn-wine")  # the datasets of diagnostics.py --quick


def run_script(*args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_scripts_import_only_the_labs_public_names():
    private = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nescal_bench"):
                names = [*node.module.split("."), *(alias.name for alias in node.names)]
                if any(name.startswith("_") for name in names):
                    private.append(f"{path.name}:{node.lineno}")
    assert private == []


def test_overhead_quick():
    out = run_script("benchmarks/overhead.py", "--quick")
    assert "fastest epoch s after warm-up (default)" in out and "(JS pairwise)" in out
    assert "predict_proba seconds" in out
    assert "graph build (epoch 2)" in out


def test_overhead_refinement_quick():
    out = run_script("benchmarks/overhead.py", "--quick", "--refinement")
    assert "(120 validation rows)" in out
    row = next(line for line in out.splitlines() if line.startswith("solve / epoch"))
    median, largest = (float(v) for v in row.split()[-2:])
    assert 0.0 < median <= largest < 1.0  # the solve is part of the epoch it is timed in


def test_overhead_loss_call_quick():
    out = run_script("benchmarks/overhead.py", "--quick", "--loss-call", "--repeats", "1")
    lines = out.splitlines()
    assert lines[0].startswith("loss call, forward + backward: batch 256, 10 classes, k=10")
    names = [line[:38].strip() for line in lines[2:]]
    assert names == [
        "cross-entropy alone",
        "CE + soft_target (default)",
        "CE + soft_target, adaptive=agreement",
        "CE + soft_target, adaptive=density",
        "CE + soft_target, target_temperature=2",
        "CE + js pairwise",
        "CE + js mean",
    ]
    ratios = [float(line.split()[-1]) for line in lines[2:]]
    assert ratios[0] == 1.0 and all(r > 1.0 for r in ratios[1:])


@pytest.mark.skipif(not DATA.is_dir(), reason="the local dev suite ../shared/data is absent")
def test_quickstart_example_writes_table_and_diagram(tmp_path):
    out = run_script(
        "examples/quickstart.py",
        "--dataset",
        "wdbc",
        "--data-dir",
        str(DATA),
        "--max-epochs",
        "3",
        "--out",
        str(tmp_path),
    )
    assert "| NeSCal |" in out and "| Cross-entropy |" in out
    assert (tmp_path / "reliability.png").stat().st_size > 10_000
    assert "reliability.png" in (tmp_path / "quickstart.md").read_text()


def test_quickstart_example_runs_on_a_bundled_dataset_without_the_lab(tmp_path):
    out = run_script(
        "examples/quickstart.py", "--dataset", "wine", "--max-epochs", "2", "--out", str(tmp_path)
    )
    assert "| NeSCal |" in out and (tmp_path / "reliability.png").is_file()
    assert "nescal_bench" not in (ROOT / "examples" / "quickstart.py").read_text()


def test_torch_loop_example():
    out = run_script("examples/torch_loop.py")
    nll = float(out.split("test NLL")[1].split()[0])
    assert 0 < nll < 0.5


def test_label_smoothing_sweep_smoke(tmp_path):
    import json

    config = json.loads((ROOT / "benchmarks/configs/label_smoothing_sweep.json").read_text())
    config.update(
        output=str(tmp_path / "results"),
        datasets=[{"sklearn": "iris"}, {"sklearn": "wine"}],
        methods=[m for m in config["methods"] if m["name"] in ("ls_000", "ls_010", "nescal")],
        confirm_seeds=[0],
        budget={"max_epochs": 4, "patience": 2, "threads": 1, "hidden_sizes": [8]},
    )
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(config))
    out = run_script(
        "benchmarks/label_smoothing_sweep.py", "--config", str(path), "--figures", str(tmp_path)
    )
    for name in ("ece", "nll", "accuracy", "reliability"):
        assert (tmp_path / f"label_smoothing_{name}.png").stat().st_size > 5_000
    rows = [line for line in out.splitlines() if line.startswith("| 0")]
    assert [row.split("|")[1].strip() for row in rows] == ["0", "0.1"]  # nescal is no row
    assert rows[0].split("|")[4].strip() == "+0.00 %"  # epsilon 0 against itself
    assert "ECE raw: lowest at an interior epsilon (U-shape) on 0 of 2 datasets" in out
    # --no-run draws again from the records alone
    again = run_script(
        "benchmarks/label_smoothing_sweep.py",
        "--config",
        str(path),
        "--figures",
        str(tmp_path),
        "--no-run",
    )
    assert again.splitlines()[-9:] == out.splitlines()[-9:]


def test_diagnostics_quick(tmp_path):
    saved = tmp_path / "d.pkl"
    args = ("--quick", "--figures", str(tmp_path), "--save", str(saved))
    out = run_script("benchmarks/diagnostics.py", *args)
    lines = out.splitlines()
    held = next(line for line in lines if line.startswith("* |conf gap| <= TV held"))
    assert held.count("(100.0000 %)") == 2  # theorems: every edge
    for name in ("neighbour_gap", "fisher", "label_smoothing"):
        assert (tmp_path / f"diagnostics_{name}.png").stat().st_size > 5_000
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines if line.startswith("|")]
    assert {row[1] for row in cells if row[0] == "LS: training NLL / floor"} == {"ls_010", "ls_030"}
    lce = cells.index(["model", "LCE raw", "LCE after TS", "ECE raw", "ECE after TS"])
    assert [row[0] for row in cells[lce + 2 : lce + 5]] == ["ce", "ls_010", "nescal"]
    # the lab's statistic: the relative changes per dataset (one seed each) and their Wilcoxon
    after_ts = {
        (r["dataset"], model): value
        for r in pickle.loads(saved.read_bytes())
        for metric, stage, model, value in r["values"]
        if (metric, stage) == ("lce", "ts")
    }
    changes = [100 * (after_ts[d, "nescal"] / after_ts[d, "ls_010"] - 1) for d in DIGITS_WINE]
    line = next(line for line in lines if line.startswith("* nescal vs ls_010, LCE after TS"))
    expected = f"median {np.median(changes):+.1f} %, p = {wilcoxon(changes).pvalue:.2g}"
    assert line.endswith(expected), (line, expected)
    assert run_script("benchmarks/diagnostics.py", *args, "--no-run") == out


def test_member_cost_quick():
    out = run_script("benchmarks/member_cost.py", "--quick")
    header = next(line for line in out.splitlines() if line.startswith("| batch |"))
    (row,) = [line for line in out.splitlines() if line.startswith("| 64 |")]
    cells = dict(zip(header.split("|")[1:-1], row.split("|")[1:-1], strict=True))
    cells = {key.strip(): value.strip() for key, value in cells.items()}
    bound, estimator, nescal = (float(cells[k]) for k in ("bound s", "estimator s", "nescal s"))
    assert bound > 0 and estimator > 0 and nescal > 0
    assert float(cells["estimator / bound"].rstrip("×")) == pytest.approx(estimator / bound, 0.01)
    shares = [cells[k] for k in ("forward", "backward", "optimizer", "validation", "skorch")]
    assert sum(float(share.rstrip("%")) for share in shares) == pytest.approx(100, abs=3)


@pytest.mark.skipif(not DATA.is_dir(), reason="the local dev suite ../shared/data is absent")
def test_crossfit_cost_times_both_models(tmp_path):
    # dask, from the dev extra (distributed): the backend the loky default does not cover
    args = ["--datasets", "wdbc", "--max-rows", "200", "--repeats", "1", "--recipe", "2026-12-04"]
    out = run_script("benchmarks/crossfit_cost.py", *args, "--backend", "dask")
    row = next(line for line in out.splitlines() if line.startswith("| wdbc |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "160" and float(cells[2]) > 0 and float(cells[3]) > float(cells[2])


def test_serve_cost_quick():
    out = run_script("benchmarks/serve_cost.py", "--quick")
    rows = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] in ("hgb", "cross-fitted", "lean"):
            rows[cells[0]] = cells
    assert sorted(rows) == ["cross-fitted", "hgb", "lean"]
    for _, fit, predict, ratio in rows.values():
        assert float(fit) > 0 and float(predict) > 0
        expected = float(predict) / float(rows["hgb"][2])
        assert float(ratio.rstrip("×")) == pytest.approx(expected, rel=0.01, abs=0.006)
    members = [line for line in out.splitlines() if line.startswith("* ")]
    assert members and all(" ms" in line and "weight" in line for line in members)
    assert "One call: limit_threads" in out


def test_fit_per_rows_gives_the_scale_confirm_tables_bar_one():
    """Two scripts, one figure: fit_per_rows.py's median for ``new`` is the bar (1) line of
    scale_confirm_table.py (its own computation from the same records)."""
    results = ("--results", "benchmarks/results/scale_confirm")
    printed = run_script("benchmarks/fit_per_rows.py", *results, "--methods", "new", "hgb")
    median = next(line for line in printed.splitlines() if line.startswith("| median"))
    table = run_script("benchmarks/scale_confirm_table.py", *results, "--out", os.devnull)
    bar = next(line for line in table.splitlines() if line.startswith("(1) median fit s"))
    assert median.split("|")[2].strip() == bar.split(": ")[1].split()[0]
    # HGB + TS fits on the training rows alone, so its figure is not new's divided out
    assert median.split("|")[3].strip() not in ("–", median.split("|")[2].strip())


def test_fit_per_rows_pools_folders_of_other_seeds(tmp_path):
    """A search on seed 0 and its confirm on seeds 1-2 read as one study: scale_confirm's
    records split by seed into two folders give its own table, and a folder pooled with
    itself (the same fits twice) is refused."""
    import json
    import shutil

    source = ROOT / "benchmarks/results/scale_confirm"
    parts = {"seed0": [0], "seeds12": [1, 2]}
    for name, seeds in parts.items():
        (tmp_path / name / "records").mkdir(parents=True)
        for file in ("config.json", "plan.json"):
            shutil.copy(source / file, tmp_path / name / file)
        for record in (source / "records").glob("*.json"):
            if json.loads(record.read_text())["seed"] in seeds:
                shutil.copy(record, tmp_path / name / "records" / record.name)
    counts = [len(list((tmp_path / n / "records").iterdir())) for n in parts]
    assert min(counts) > 0 and sum(counts) == len(list((source / "records").iterdir()))
    methods = ("--methods", "new", "rec")
    whole = run_script("benchmarks/fit_per_rows.py", "--results", str(source), *methods)
    pooled = run_script(
        "benchmarks/fit_per_rows.py",
        "--results",
        *(str(tmp_path / n) for n in parts),
        *methods,
    )
    assert pooled == whole
    one = run_script("benchmarks/fit_per_rows.py", "--results", str(tmp_path / "seed0"), *methods)
    assert one != whole
    twice = subprocess.run(
        [sys.executable, "benchmarks/fit_per_rows.py", "--results", str(source), str(source)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert twice.returncode != 0 and "twice" in twice.stderr


def test_scale_confirm_table_names_other_studies_methods():
    """A study of other method names gets the same table by naming its roles: scale_confirm
    read with its own names given explicitly prints what the defaults print."""
    named = [
        f"--{role}={method}"
        for role, method in {
            "new": "new",
            "lean": "new_lean",
            "budget": "new_budget",
            "rec": "rec",
            "hgb": "hgb",
        }.items()
    ]
    default = run_script("benchmarks/scale_confirm_table.py", "--out", os.devnull)
    assert run_script("benchmarks/scale_confirm_table.py", "--out", os.devnull, *named) == default
    swapped = run_script(
        "benchmarks/scale_confirm_table.py", "--out", os.devnull, "--lean=new", "--budget=new"
    )
    assert "| +0.00 % " in swapped and swapped != default


def test_scale_confirm_table_reads_the_committed_records(tmp_path):
    """The study's table comes from its records alone (no fit): a row per set with every
    method on 3 seeds, the medians, and the three bars no compare call prints."""
    out = tmp_path / "table.md"
    printed = run_script("benchmarks/scale_confirm_table.py", "--out", str(out))
    table = out.read_text()
    assert table.splitlines()[0].startswith("| dataset ") and "| median " in table
    assert table.strip() in printed
    for bar in ("(1) median fit s per 10,000 rows", "(3) lean predict within 2x", "(5) sets with"):
        assert bar in printed
