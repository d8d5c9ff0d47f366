"""benchmarks/shift.py: the corruptions, the OOD metrics, the summary, and a smoke run."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def _load_script():
    spec = importlib.util.spec_from_file_location("shift_benchmark", ROOT / "benchmarks" / "shift.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


shift = _load_script()


# --------------------------------------------------------------------------- corruptions


def test_gaussian_noise_has_the_requested_sd_and_is_seeded():
    X = np.random.default_rng(0).normal(size=(2000, 50)).astype(np.float32)
    out = shift.add_gaussian_noise(X, np.random.default_rng(1), sd=0.5)
    noise = out.astype(np.float64) - X
    assert out.dtype == np.float32 and out.shape == X.shape
    assert abs(noise.std() - 0.5) < 0.005 and abs(noise.mean()) < 0.005
    assert np.all(np.abs(noise.std(axis=0) - 0.5) < 0.05)  # every column, not just overall
    again = shift.add_gaussian_noise(X, np.random.default_rng(1), sd=0.5)
    np.testing.assert_array_equal(out, again)
    other = shift.add_gaussian_noise(X, np.random.default_rng(2), sd=0.5)
    assert not np.array_equal(out, other)


def test_conditions_are_fixed_by_seed_and_name():
    X = np.random.default_rng(0).normal(size=(40, 6)).astype(np.float32)
    first = shift.build_conditions(X, 3, shift.SHIFTS)
    second = shift.build_conditions(X, 3, shift.SHIFTS)
    assert list(first) == ["clean", "noise_0.5", "noise_1.0", "missing_20"]
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])
    np.testing.assert_array_equal(first["clean"], X)
    other_seed = shift.build_conditions(X, 4, shift.SHIFTS)
    assert not np.array_equal(first["noise_1.0"], other_seed["noise_1.0"])
    # the two noise levels use different draws, not one draw scaled
    assert not np.allclose(2 * (first["noise_0.5"] - X), first["noise_1.0"] - X)


def test_zero_entries_replaces_the_requested_fraction():
    X = np.random.default_rng(0).uniform(1.0, 2.0, size=(100, 30)).astype(np.float32)
    original = X.copy()
    out = shift.zero_entries(X, np.random.default_rng(5), fraction=0.2)
    zeroed = out == 0
    assert zeroed.sum() == 600  # 20 % of 3000 entries
    np.testing.assert_array_equal(out[~zeroed], X[~zeroed])
    np.testing.assert_array_equal(X, original)  # input untouched
    assert 0 < zeroed.sum(axis=0).min()  # spread over the columns, not a block


def test_shuffle_columns_keeps_marginals_and_breaks_rows():
    rng = np.random.default_rng(0)
    a = rng.normal(size=300)
    X = np.column_stack([a, 2 * a, rng.integers(0, 2, size=300)]).astype(np.float32)
    out = shift.shuffle_columns(X, np.random.default_rng(1))
    assert out.dtype == np.float32 and out.shape == X.shape
    for j in range(X.shape[1]):
        np.testing.assert_array_equal(np.sort(out[:, j]), np.sort(X[:, j]))
    assert not np.array_equal(out[:, 0], X[:, 0])
    assert abs(np.corrcoef(out[:, 0], out[:, 1])[0, 1]) < 0.3  # was exactly 1


def test_scale_rows_multiplies_by_four():
    X = np.random.default_rng(0).normal(size=(20, 5)).astype(np.float32)
    out = shift.OOD_SETS["ood_far"](X, np.random.default_rng(0))
    np.testing.assert_array_equal(out, 4 * X)
    assert out.dtype == np.float32


def test_ood_metrics_against_a_pairwise_count():
    proba_in = np.array([[0.9, 0.1], [0.6, 0.4], [0.99, 0.01]])
    proba_out = np.array([[0.5, 0.5], [0.7, 0.3], [0.95, 0.05], [0.8, 0.2]])

    def entropy(p):
        return -sum(q * math.log(q) for q in p if q > 0)

    s_in = [entropy(p) for p in proba_in]
    s_out = [entropy(p) for p in proba_out]
    pairs = [(o > i) + 0.5 * (o == i) for o in s_out for i in s_in]
    got = shift.ood_metrics(proba_in, proba_out)
    assert got["auroc"] == pytest.approx(sum(pairs) / len(pairs))
    assert got["max_proba"] == pytest.approx((0.5 + 0.7 + 0.95 + 0.8) / 4)
    np.testing.assert_allclose(shift.predictive_entropy(proba_out), s_out)
    assert shift.predictive_entropy(np.array([[1.0, 0.0]]))[0] == 0.0  # 0 log 0 = 0


# --------------------------------------------------------------------------- summary


def _records(method: str, nll: list[float], auroc: list[float], acc_shift: float = 0.0):
    """Two seeds per dataset whose means are ``nll`` / ``auroc`` (datasets a, b, c)."""
    out = []
    for d, n, a in zip("abc", nll, auroc, strict=True):
        for seed, delta in ((3, -0.1), (4, 0.1)):
            stage = {
                "clean": {"nll": n + delta * n, "accuracy": 0.8 + acc_shift, "ece": 0.1},
                "ood_far": {"auroc": a + delta * a, "max_proba": 0.9},
            }
            out.append({"dataset": d, "seed": seed, "method": method, "raw": stage, "ts": stage})
    return out


def test_summarise_counts_medians_and_p_values():
    records = (
        _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8])
        # NLL change -20 %, -10 %, +5 %; AUROC change +10 %, +20 %, -5 %
        + _records("nescal", [0.8, 0.45, 0.42], [0.66, 0.84, 0.76], acc_shift=0.01)
        + _records("same", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8])
    )
    text = shift.summarise(records, references=["ce", "label_smoothing"])
    # Wilcoxon, n = 3, one sign on rank 1 and the other on ranks 2, 3: the smaller rank
    # sum is 1, P(W <= 1) = 2/8 under the null, two-sided p = 0.5
    for stage in ("raw", "ts"):
        assert (
            f"| nescal | clean | {stage} | NLL | lower on 2/3 | -10.00 % | 0.5 | +1.00 pt |" in text
        )
        assert f"| nescal | ood_far | {stage} | AUROC | higher on 2/3 | +10.00 % | 0.5 | – |" in text
        assert f"| same | clean | {stage} | NLL | lower on 0/3 | +0.00 % | nan | +0.00 pt |" in text
    assert "## Against `ce`" in text
    assert "Against `label_smoothing`" not in text  # absent reference skipped
    assert "## Against `nescal`" not in text
    # per-dataset table of mean NLL after TS, and of AUROC raw / after TS
    assert "| a | 1.0000 | 0.8000 | 1.0000 |" in text
    assert "| b | 0.7000 / 0.7000 | 0.8400 / 0.8400 | 0.7000 / 0.7000 |" in text


def test_summarise_against_a_second_reference():
    records = _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8]) + _records(
        "label_smoothing", [0.5, 0.25, 0.2], [0.6, 0.7, 0.8]
    )
    text = shift.summarise(records, references=["ce", "label_smoothing"])
    assert "| label_smoothing | clean | raw | NLL | lower on 3/3 | -50.00 % | 0.25 |" in text
    assert "| ce | clean | raw | NLL | lower on 0/3 | +100.00 % | 0.25 |" in text


def test_summarise_against_the_better_of_two_references():
    records = (
        _records("ce", [1.0, 0.5, 0.4], [0.6, 0.7, 0.8])
        + _records("label_smoothing", [0.5, 1.0, 0.4], [0.9, 0.5, 0.8])
        # NLL vs the better (ls, ce, either): +60 %, -10 %, +0 %;
        # AUROC vs the better (ls 0.9, ce 0.7, 0.8): -10 %, +20 %, +0 %
        + _records("nescal", [0.8, 0.45, 0.4], [0.81, 0.84, 0.8])
    )
    text = shift.summarise(records, references=["ce", "label_smoothing"])
    assert "## Against the better of `ce` and `label_smoothing` (per dataset)" in text
    better_of = text.split("## Against the better of")[1].split("\n## ")[0]
    assert "| nescal | clean | raw | NLL | lower on 1/3 | +0.00 % |" in better_of
    assert "| nescal | ood_far | ts | AUROC | higher on 1/3 | +0.00 % |" in better_of
    assert "| ce |" not in better_of and "| label_smoothing |" not in better_of


# --------------------------------------------------------------------------- smoke run


@pytest.mark.skipif(not DATA.is_dir(), reason="the local dev suite ../shared/data is absent")
def test_quick_run_records_summary_and_resume(tmp_path, capsys):
    out = tmp_path / "shift"
    argv = ["--quick", "--data-dir", str(DATA), "--out", str(out)]
    assert shift.main(argv) == 0
    lines = (out / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted(r["method"] for r in records) == ["ce", "label_smoothing", "nescal"]
    conditions = [*shift.SHIFTS, *shift.OOD_SETS]
    for rec in records:
        assert rec["seed"] == 3 and rec["temperature"] > 0
        for stage in ("raw", "ts"):
            assert list(rec[stage]) == conditions
            for name in shift.SHIFTS:
                assert np.isfinite(rec[stage][name]["nll"]) and rec[stage][name]["nll"] > 0
                assert 0 <= rec[stage][name]["accuracy"] <= 1
            for name in shift.OOD_SETS:
                assert 0 <= rec[stage][name]["auroc"] <= 1
                assert 0.5 <= rec[stage][name]["max_proba"] <= 1  # binary dataset
    summary = (out / "summary.md").read_text()
    assert all(name in summary for name in conditions)
    assert "## Against `ce`" in summary and "## Against `label_smoothing`" in summary
    capsys.readouterr()

    assert shift.main(argv) == 0  # resume: nothing left to fit
    assert (out / "records.jsonl").read_text().splitlines() == lines
    assert "3 fits planned, 3 already recorded" in capsys.readouterr().err

    pooled = tmp_path / "pooled"
    argv = ["--summary-only", "--out", str(pooled), "--from", str(out), str(out)]
    assert shift.main(argv) == 0
    assert (pooled / "summary.md").read_text() == summary
