"""``nescal-bench compare`` and the paired statistics, against hand-worked values."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _benchmark_helpers import table_rows

from nescal_bench import (
    ScaledRows,
    calibrators_markdown,
    compare_markdown,
    load_config,
    results_frame,
    run_benchmark,
)
from nescal_bench._compare import subset
from nescal_bench._results import _frame, _rows
from nescal_bench._stats import (
    paired_comparison,
    relative_change,
    wilcoxon_p,
    wins_ties_losses,
)
from nescal_bench.cli import main


# --------------------------------------------------------------------------- statistics
def test_wilcoxon_p_by_hand():
    # n = 3, one sign on rank 1 and the other on ranks 2 and 3: the smaller rank sum is 1,
    # P(W <= 1) = 2/8 under the null, two-sided p = 0.5
    assert wilcoxon_p([-20.0, -10.0, 5.0]) == pytest.approx(0.5)
    # all three of one sign: P(W <= 0) = 1/8, two-sided 0.25
    assert wilcoxon_p([1.0, 2.0, 3.0]) == pytest.approx(0.25)
    # zero differences are dropped: n = 2, ranks 1 (-) and 2 (+), P(W <= 1) = 2/4, p = 1
    assert wilcoxon_p([60.0, -10.0, 0.0]) == pytest.approx(1.0)
    assert np.isnan(wilcoxon_p([1.0])) and np.isnan(wilcoxon_p([0.0, 0.0]))


def test_relative_change_and_wins_ties_losses():
    assert relative_change([0.8, 0.45, 0.42], [1.0, 0.5, 0.4]) == pytest.approx([-20, -10, 5])
    # higher is better: 0.9 beats 0.8, 0.5 loses to 0.6, 0.7 ties 0.7001 within 1 %
    assert wins_ties_losses(
        [0.9, 0.5, 0.7], [0.8, 0.6, 0.7001], greater_is_better=True, tolerance=0.01
    ) == (1, 1, 1)


def test_better_of_two_references_is_chosen_per_dataset():
    method = {"x": 0.9, "y": 0.5, "z": 1.0}
    references = {"ce": {"x": 1.0, "y": 1.0}, "ls": {"x": 0.8, "y": 2.0, "z": 1.0}}
    accuracy = ({"x": 0.5, "y": 0.5}, {"ce": {"x": 0.5, "y": 0.5}, "ls": {"x": 0.6, "y": 0.6}})
    c = paired_comparison(method, references, greater_is_better=False, accuracy=accuracy)
    # z lacks ce; x: the better reference is ls (0.8): +12.5 %; y: ce (1.0): -50 %
    assert c.datasets == ["x", "y"] and c.references == ["ls", "ce"]
    assert c.changes.tolist() == pytest.approx([12.5, -50.0])
    assert (c.n_better, c.median_change) == (1, pytest.approx(-18.75))
    assert c.at_tolerance == (1, 0, 1)  # -50 % lower, +12.5 % higher, by more than 1 %
    wide = paired_comparison(method, references, greater_is_better=False, tolerance=0.2)
    assert (wide.n_better, wide.at_tolerance) == (1, (1, 1, 0))  # +12.5 % is a tie at 20 %
    assert c.accuracy_change == pytest.approx(-0.05)  # median of -0.1 (vs ls) and 0.0 (vs ce)
    assert paired_comparison({"q": 1.0}, references, greater_is_better=False) is None


# --------------------------------------------------------------------------- markdown
def _records(
    method: str,
    nll: list[float],
    auroc: list[float],
    accuracy_shift: float = 0.0,
    fit_seconds: tuple[float, ...] = (1.0, 1.0, 1.0),
):
    """Two seeds per dataset whose means are ``nll`` / ``auroc`` / ``fit_seconds``
    (datasets a, b, c)."""
    out = []
    for dataset, n, a, t in zip("abc", nll, auroc, fit_seconds, strict=True):
        for seed, delta in ((3, -0.1), (4, 0.1)):
            clean = {"nll": n + delta * n, "accuracy": 0.8 + accuracy_shift, "ece": 0.1}
            far = {"auroc": a + delta * a, "max_proba": 0.9}
            out.append(
                {
                    "key": f"{method}-{dataset}-{seed}",
                    "method": method,
                    "dataset": dataset,
                    "seed": seed,
                    "test": {"raw": clean, "temperature": clean},
                    "conditions": {"ood_far": {"raw": far, "temperature": far}},
                    "fit": {},
                    "run": {"fit_seconds": t + delta * t},
                }
            )
    return out


def _pooled(*groups, stages=("raw", "temperature")):
    """The results frame of hand-made records (as ``results_frame`` builds it)."""
    rows = [row for records in groups for record in records for row in _rows(record)]
    conditions = {"ood_far": ScaledRows("ood_far")}
    return _frame(rows, stages=list(stages), conditions=conditions, seeds=[3, 4], datasets=[])


def rows_of(text: str, after: str) -> list[str]:
    """The rows of the table after ``after``, as ``| a | b |`` with single spaces."""
    return ["| " + " | ".join(row) + " |" for row in table_rows(text, after)]


def test_counts_medians_and_p_values_against_each_reference():
    pooled = _pooled(
        _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8]),
        # NLL change -20 %, -10 %, +5 %; AUROC change +10 %, +20 %, -5 %
        _records("nescal", [0.8, 0.45, 0.42], [0.66, 0.84, 0.76], accuracy_shift=0.01),
        _records("same", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8]),
    )
    text = compare_markdown(pooled)
    assert text.startswith("# Paired comparisons, confirm seeds [3, 4], 3 datasets\n\n")
    against = rows_of(text, "## Against `ce`")
    for stage in ("raw", "ts"):  # at 1 %: -20 % and -10 % lower, +5 % higher
        assert f"| nescal | {stage} | 2/3 | 2 / 0 / 1 | -10.00 % | 0.5 | +1.00 pt |" in against
        assert f"| same | {stage} | 0/3 | 0 / 3 / 0 | +0.00 % | nan | +0.00 pt |" in against
    assert against[0] == (
        "| method | stage | lower NLL strictly on | at 1 %: lower / tied / higher "
        "| median NLL change | Wilcoxon p | median accuracy change |"
    )
    assert "Against `label_smoothing`" not in text  # absent reference skipped
    assert "better of" not in text  # a single reference present
    # per-dataset mean NLL after TS (best in bold), then raw
    after_ts = rows_of(text, "## Test NLL after temperature scaling, mean over confirm seeds\n")
    assert after_ts[0] == "| dataset | ce | nescal | same |"
    assert "| a | 1.0000 | **0.8000** | 1.0000 |" in after_ts
    raw = rows_of(text, "## Raw test NLL (no temperature scaling), mean over confirm seeds\n")
    assert "| c | 0.4000 | 0.4200 | 0.4000 |" in raw
    ood = compare_markdown(pooled, condition="ood_far")
    assert "| nescal | raw | 2/3 | 2 / 0 / 1 | +10.00 % | 0.5 | – |" in rows_of(
        ood, "## Against `ce`"
    )
    assert rows_of(ood, "## Against `ce`")[0].startswith(
        "| method | stage | higher AUROC strictly on | at 1 %: higher / tied / lower "
        "| median AUROC change |"
    )
    assert "| b | 0.7000 | **0.8400** | 0.7000 |" in rows_of(
        ood, "mean over confirm seeds"
    )  # higher in bold


def test_against_a_second_reference_and_the_better_of_both():
    two = compare_markdown(
        _pooled(
            _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8]),
            _records("label_smoothing", [0.5, 0.25, 0.2], [0.6, 0.7, 0.8]),
        ),
        best_of=(),
    )
    assert "| label_smoothing | raw | 3/3 | 3 / 0 / 0 | -50.00 % | 0.25 | +0.00 pt |" in rows_of(
        two, "## Against `ce`"
    )
    assert "| ce | raw | 0/3 | 0 / 0 / 3 | +100.00 % | 0.25 | +0.00 pt |" in rows_of(
        two, "## Against `label_smoothing`"
    )
    pooled = _pooled(
        _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8]),
        _records("label_smoothing", [0.5, 1.0, 0.4], [0.9, 0.5, 0.8]),
        # NLL vs the better (ls, ce, either): +60 %, -10 %, +0 %;
        # AUROC vs the better (ls 0.9, ce 0.7, 0.8): -10 %, +20 %, +0 %
        _records("nescal", [0.8, 0.45, 0.4], [0.81, 0.84, 0.8]),
    )
    title = "## Against the better of `ce` and `label_smoothing` (per dataset and stage)\n\n"
    note = (
        "The better reference is chosen per dataset and stage in hindsight, which favours "
        "the reference.\n"
    )
    better_of = rows_of(compare_markdown(pooled), title + note)
    assert "| nescal | raw | 1/3 | 1 / 1 / 1 | +0.00 % | 1 | +0.00 pt |" in better_of
    assert not any(row.startswith(("| ce |", "| label_smoothing |")) for row in better_of)
    far = rows_of(compare_markdown(pooled, condition="ood_far"), title + note)
    assert "| nescal | ts | 1/3 | 1 / 1 / 1 | +0.00 % | 1 | – |" in far


def test_the_tie_tolerance_and_the_ratios_of_run_columns():
    header = "| method | stage | lower NLL strictly on | at 15 %: lower / tied / higher "
    header += "| median NLL change | Wilcoxon p | median accuracy change "
    pooled = _pooled(
        _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8], fit_seconds=(10.0, 20.0, 40.0)),
        # NLL -20 %, -10 %, +5 %; fit seconds (seed means) 0.4, 1.5 and 1.0 times ce's
        _records("nescal", [0.8, 0.45, 0.42], [0.66, 0.84, 0.76], fit_seconds=(4.0, 30.0, 40.0)),
    )
    wide = compare_markdown(pooled, tolerance=0.15, ratios=["fit_seconds"])
    against = rows_of(wide, "## Against `ce`")
    assert against[0] == header + "| fit_seconds ratio: median (range), ≤ 0.5 on |"
    # at 15 %: -20 % lower, -10 % and +5 % tied; the ratios' median 1.0, not the ratio of
    # the medians (30 / 20 = 1.5)
    assert (
        "| nescal | ts | 2/3 | 1 / 2 / 0 | -10.00 % | 0.5 | +0.00 pt | 1 (0.4–1.5), ≤ 0.5 on 1/3 |"
        in against
    )
    strict = rows_of(compare_markdown(pooled, tolerance=0), "## Against `ce`")
    assert strict[0] == (
        "| method | stage | lower NLL strictly on | median NLL change | Wilcoxon p "
        "| median accuracy change |"
    )
    assert "| nescal | ts | 2/3 | -10.00 % | 0.5 | +0.00 pt |" in strict
    with pytest.raises(
        ValueError, match=re.escape("ratios: expected run columns of ('fit_seconds'")
    ):
        compare_markdown(pooled, ratios=["value"])
    # against the better of two, the ratio is to the reference chosen on each dataset:
    # label_smoothing on a (40 s), ce on b and c (tied on c: the first given)
    better = _pooled(
        _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8], fit_seconds=(10.0, 10.0, 10.0)),
        _records("label_smoothing", [0.5, 1.0, 0.4], [0.9, 0.5, 0.8], fit_seconds=(40.0,) * 3),
        _records("nescal", [0.8, 0.45, 0.4], [0.81, 0.84, 0.8], fit_seconds=(10.0, 10.0, 10.0)),
    )
    text = compare_markdown(better, ratios=["fit_seconds"])
    assert (
        "| nescal | raw | 1/3 | 1 / 1 / 1 | +0.00 % | 1 | +0.00 pt | 1 (0.25–1), ≤ 0.5 on 1/3 |"
        in rows_of(text, "## Against the better of")
    )


def test_members_and_penalty_status_are_counted():
    records = _records("nescal", [0.8, 0.45, 0.42], [0.66, 0.84, 0.76])
    for record, status in zip(records, ["penalised"] * 3 + ["no_graph"] * 2 + [None], strict=True):
        if status is not None:
            record["fit"]["penalty_status"] = status
    crossfit = _records("cf", [0.8, 0.45, 0.42], [0.66, 0.84, 0.76])
    for i, record in enumerate(crossfit):  # hgb dropped on two fits; 5 NeSCal models a fit
        statuses = {"penalised": 5} if i < 3 else {"penalised": 2, "warmup_checkpoint": 3}
        record["fit"] = {"dropped": ["hgb"] if i < 2 else [], "member_status": {"nescal": statuses}}
    text = compare_markdown(
        _pooled(_records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8]), records, crossfit)
    )
    assert rows_of(text, "## Members and penalty status") == [
        "| method | member | fits | dropped after fold 1 | no_graph | penalised | warmup_checkpoint |",
        "| cf | hgb | 6 | 2 | 0 | 0 | 0 |",
        "| cf | nescal | 6 | 0 | 0 | 21 | 9 |",
        "| nescal | – | 6 | 0 | 2 | 3 | 0 |",
    ]
    assert "## Members and penalty status" not in compare_markdown(_pooled(records[5:]))


# --------------------------------------------------------------------------- end to end
CONFIG = {
    "name": "summary",
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
    "recipe": "2026-12-04",
    "methods": [
        {"name": "ce", "loss": "ce"},
        {"name": "ls", "loss": "label_smoothing", "grid": {"epsilon": [0.05, 0.2]}},
    ],
    "calibrators": ["temperature"],
    "search_seeds": [0],
    "confirm_seeds": [1, 2],
    "budget": {"max_epochs": 2, "hidden_sizes": [8]},
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("compare")
    out = []
    for name, methods in (("one", CONFIG["methods"]), ("two", [{"name": "mdca", "loss": "mdca"}])):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**CONFIG, "methods": methods, "output": str(tmp_path / name)}))
        run_benchmark(load_config(path), progress=False, report=False)
        out.append(tmp_path / name)
    # a stale record of an earlier config (another method) in the first folder is ignored
    records = sorted((out[0] / "records").glob("*.json"))
    stale = json.loads(records[0].read_text())
    stale.update(key="0" * 20, method="removed_method", seed=1)
    (out[0] / "records" / f"{'0' * 20}.json").write_text(json.dumps(stale))
    return out


def test_compare_reports_only_the_configs_chosen_fits(folders, tmp_path, capsys):
    one, two = folders
    plot = tmp_path / "changes.png"
    args = [str(one), "--best-of", "ce", "ls", "--plot", str(plot)]
    assert main(["compare", *args]) == 0
    out = capsys.readouterr().out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.endswith(f"\nFigure: {plot}\n")
    assert "## Against `ce`" in out and "removed_method" not in out
    assert "## Against the better of `ce` and `ls`" in out
    rows = [row for row in rows_of(out, "## Against `ce`") if row.startswith("| ls | raw |")]
    assert len(rows) == 1 and "/2 |" in rows[0]  # two datasets compared
    table = rows_of(out, "## Test NLL after temperature scaling")
    assert any(r.startswith("| sklearn-iris |") for r in table) and any(
        r.startswith("| sklearn-wine |") for r in table
    )
    # the reported ls fits are its chosen point's confirm fits: the report says the same
    pooled = results_frame([one])
    report = json.loads((one / "config.json").read_text())
    assert pooled.attrs["seeds"] == report["confirm_seeds"] == [1, 2]
    rows = pooled.query("method == 'ls' and dataset == 'sklearn-iris' and condition == 'clean'")
    assert len(rows.query("stage == 'raw' and metric == 'nll'")) == 2


def test_compare_pools_folders_and_counts_a_key_once(folders, capsys):
    one, two = folders
    assert main(["compare", str(one)]) == 0
    alone = capsys.readouterr().out
    assert main(["compare", str(one), str(one)]) == 0
    assert capsys.readouterr().out == alone  # the same fits twice count once
    assert main(["compare", str(one), str(two), "--confirm-seeds", "2"]) == 0
    pooled = capsys.readouterr().out
    assert pooled.startswith("# Paired comparisons, confirm seeds [2], 2 datasets\n")
    assert any(
        re.fullmatch(r"\| mdca \| ts \| \d/2 \|.*", r) for r in rows_of(pooled, "## Against `ce`")
    )
    assert "| dataset | ce | ls | mdca |" in rows_of(pooled, "mean over confirm seeds")


def test_compare_errors(folders, capsys):
    one, _ = folders
    assert main(["compare", str(one), "--plot", "x.png", "--plot-methods", "nope"]) == 2
    assert capsys.readouterr().err == (
        "nescal-bench: error: --plot: no records of ['nope']; methods are ['ce', 'ls']\n"
    )
    assert main(["compare", str(one), "--ratio", "seconds"]) == 2
    assert capsys.readouterr().err.startswith(
        "nescal-bench: error: ratios: expected run columns of ('fit_seconds', "
    )
    assert main(["compare", str(one / "records")]) == 2
    assert "No config.json in results directory" in capsys.readouterr().err


def test_compare_report_and_validate_import_neither_torch_nor_skorch(folders, tmp_path):
    one, _ = folders
    config = tmp_path / "sklearn_only.json"
    methods = [{"estimator": "sklearn.linear_model.LogisticRegression", "params": {"C": 2.0}}]
    config.write_text(json.dumps({**CONFIG, "methods": methods}))
    code = (
        "import sys\n"
        "from nescal_bench.cli import main\n"
        f"assert main(['compare', {str(one)!r}]) == 0\n"
        f"assert main(['report', {str(one)!r}]) == 0\n"
        f"assert main(['validate', {str(config)!r}]) == 0\n"
        "print(sorted(m for m in ('torch', 'skorch') if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.splitlines()[-1] == "[]"
    assert Path(one / "report.md").is_file()


# --------------------------------------------------------------------------- stage filters
def test_subset_keeps_the_asked_methods_and_stages():
    pooled = _pooled(
        _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8]),
        _records("nescal", [0.8, 0.45, 0.42], [0.66, 0.84, 0.76]),
    )
    only = subset(pooled, ["nescal"], ["temperature"])
    assert set(only["method"]) == {"nescal"} and only.attrs["stages"] == ["temperature"]
    assert set(only.query("dataset == 'a'")["stage"]) == {"temperature"}
    assert sorted(set(only.query("dataset == 'a'")["seed"])) == [3, 4]
    assert pooled.attrs["stages"] == ["raw", "temperature"]  # the original is untouched
    with pytest.raises(ValueError, match=re.escape("no stage 'sms' in the results; they have")):
        subset(pooled, stages=["sms"])
    with pytest.raises(ValueError, match=re.escape("no method 'x' in the results")):
        subset(pooled, ["x"])


def test_compare_stages_and_methods_flags(folders, capsys):
    one, _ = folders
    assert main(["compare", str(one), "--stages", "temperature", "--methods", "ls"]) == 0
    out = capsys.readouterr().out
    against = rows_of(out, "## Against `ce`")
    assert any(r.startswith("| ls | ts |") for r in against) and not any(
        r.startswith("| ls | raw |") for r in against
    )
    assert "| sklearn-iris | – | – |" in rows_of(out, "## Raw test NLL")  # no raw stage kept
    assert main(["compare", str(one), "--stages", "platt"]) == 2
    assert "no stage 'platt' in the results" in capsys.readouterr().err
    args = ["--tolerance", "0", "--ratio", "fit_seconds", "--ratio", "model_bytes"]
    assert main(["compare", str(one), "--methods", "ls", *args]) == 0
    assert rows_of(capsys.readouterr().out, "## Against `ce`")[0] == (
        "| method | stage | lower NLL strictly on | median NLL change | Wilcoxon p "
        "| median accuracy change | fit_seconds ratio: median (range), ≤ 0.5 on "
        "| model_bytes ratio: median (range), ≤ 0.5 on |"
    )


# --------------------------------------------------------------------------- calibrators
def _calibrated(method, raw, stages):
    """One dataset, two seeds: raw NLL ``raw[i]``, each stage's NLL ``stages[name][i]``."""
    return [
        {
            "key": f"{method}-{seed}",
            "method": method,
            "dataset": "d",
            "seed": seed,
            "test": {"raw": {"nll": raw[i]}, **{s: {"nll": v[i]} for s, v in stages.items()}},
            "fit": {},
        }
        for i, seed in enumerate((3, 4))
    ]


def test_calibrators_table_by_hand():
    pooled = _pooled(
        _calibrated("ce", [1.0, 1.0], {"temperature": [0.9, 1.02], "plain": [0.8, 1.5]}),
        _calibrated("ls", [0.5, 0.5], {"temperature": [0.45, 0.45], "plain": [0.4, 0.6]}),
        stages=("raw", "temperature", "plain"),
    )
    text = calibrators_markdown(pooled)
    rows = [
        r for h in ("per fit", "seed means", "per method (over datasets)") for r in rows_of(text, h)
    ]
    # per fit against raw: temperature -10, +2, -10, -10 %; plain -20, +50, -20, +20 %
    assert "| temperature | 4 | -10.00 % | 0 | +2.00 % | d / ce / seed 4 |" in rows
    assert "| plain | 4 | +0.00 % | 2 | +50.00 % | d / ce / seed 4 |" in rows
    # against temperature on seed means: ce 1.15 vs 0.96 (+19.79 %), ls 0.5 vs 0.45 (+11.11 %)
    assert "| plain | 0/2 | +15.45 % | 0.5 |" in rows
    assert "| raw | 0/2 | +7.64 % | 0.5 |" in rows  # ce +4.17 %, ls +11.11 %
    # per method against raw, seed means: ce 0.96 and 1.15 vs 1.0; ls 0.45 and 0.5 vs 0.5
    assert "| ce | -4.00 % | +15.00 % |" in rows and "| ls | -10.00 % | +0.00 % |" in rows
    with pytest.raises(ValueError, match=re.escape("no calibration stage 'sms'")):
        calibrators_markdown(pooled, reference="sms")


def test_calibrators_command(folders, capsys):
    one, _ = folders
    assert main(["calibrators", str(one), "--methods", "ce"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Calibrators side by side, confirm seeds [1, 2], 2 datasets, 1 methods")
    assert any(
        re.fullmatch(r"\| temperature \| 4 \| [-+]\d+\.\d\d % \| \d \|.*", r)
        for r in rows_of(out, "per fit")
    )
    assert main(["calibrators", str(one), "--reference", "sms"]) == 2
    assert "no calibration stage 'sms' in the results" in capsys.readouterr().err
