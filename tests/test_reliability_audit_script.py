"""``tools/reliability_audit.py``: its classification rules, and a smoke run of ten
of the review's A1 cases (the full run is outside the suite)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "reliability_audit.py"
REVIEW = ROOT.parent / "shared" / "reviews" / "reliability-ed7ab4a.md"


def _load_script():
    spec = importlib.util.spec_from_file_location("reliability_audit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


audit = _load_script()


def _case(verdict="clear", outcome="ValueError: old message [at x.py:1 (f)]", id_="E999"):
    return audit.Case(id_, "input", "fit(CE())", verdict, outcome)


def test_raised_in_torch_is_raw_whatever_the_message():
    outcome = audit.Outcome(
        kind="raised", error="IndexError", message="module Target 2", package="torch",
        names=("module",),
    )  # fmt: skip
    assert audit.categorize(_case(), outcome) == ("raw", False)


@pytest.mark.parametrize(
    ("message", "names", "category"),
    [
        ("n_threads must be an int, not a bool; got True.", ("n_threads",), "clear"),
        ("Linear.__init__() missing 2 required positional arguments", ("module",), "unclear"),
        (
            "X has 5 features, but NeSCalClassifier is expecting 4",
            ("X", "X_val", "y_val"),
            "unclear",
        ),
        ("X_val: X has 5 features", ("X", "X_val", "y_val"), "clear"),
        ("self.X_val was wrong", ("X_val",), "unclear"),  # an attribute is not the argument
    ],
)
def test_raised_elsewhere_is_clear_when_it_names_an_argument(message, names, category):
    outcome = audit.Outcome(
        kind="raised", error="ValueError", message=message, package="nescal_sklearn", names=names
    )
    assert audit.categorize(_case(outcome="no result after 120 s"), outcome) == (category, False)


def test_an_unchanged_message_keeps_the_reviewers_verdict():
    """The review called 'Unknown label type: continuous' clear; it names no argument."""
    seen = "ValueError: Unknown label type: continuous. Maybe you are …"
    outcome = audit.Outcome(
        kind="raised", error="ValueError", package="sklearn", names=("y",),
        message="Unknown label type: continuous. Maybe you are trying to fit a classifier",
    )  # fmt: skip
    assert audit.categorize(_case("clear", seen), outcome) == ("clear", True)
    assert audit.categorize(_case("clear", "ValueError: other"), outcome) == ("unclear", False)


@pytest.mark.parametrize(
    ("fields", "id_", "category"),
    [
        ({}, "E999", "legit"),
        ({"warnings": ("UserWarning: look",)}, "E999", "legit, warns"),
        ({"bad_proba": True}, "E999", "SILENTLY WRONG"),
        ({"silent": True}, "E232", "SILENTLY WRONG"),
        ({"silent": False}, "E232", "legit"),
        ({"silent": True, "warnings": ("UserWarning: look",)}, "E232", "legit, warns"),
        ({"questionable": True}, "E151", "questionable"),
        (
            {"questionable": True, "warnings": ("PenaltyInactiveWarning: no penalty",)},
            "E151",
            "questionable",
        ),
    ],
)
def test_returned_cases(fields, id_, category):
    outcome = audit.Outcome(kind="returned", **fields)
    assert audit.categorize(_case("ok", "returned {}", id_), outcome) == (category, False)


def test_a_hang_is_a_hang():
    assert audit.categorize(_case(), audit.Outcome(kind="hang")) == ("crash/hang", False)


def test_old_api_calls_are_translated():
    call = "(lambda e: (fit(e), e.categorical_groups_))(CE(categorical_embedding=True))"
    assert audit.translate(call) == (
        "(lambda e: (fit(e), embedded_groups(e)))(CE(categorical_embedding=True))"
    )


SMOKE_IDS = "E001,E009,E095,E136,E139,E175,E204,E210,E232,E233"


@pytest.mark.skipif(not REVIEW.is_file(), reason="the review ../shared/reviews is absent")
def test_smoke_run_of_ten_cases():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--parts", "A1", "--ids", SMOKE_IDS, "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == audit.HEADER
    assert lines[2] == "| A1 review | 10 | 1 | 1 | 2 | 0 | 4 | 1 | 0 | 1 |"
    assert lines[3] == "| A1 now | 10 | 9 | 0 | 0 | 0 | 0 | 1 | 0 | 0 |"
    listed = {line.split(":")[0]: line for line in lines[lines.index("every case:") + 1 :]}
    assert sorted(listed) == sorted(SMOKE_IDS.split(","))
    expected = {
        "E001": "clear -> clear",
        "E009": "legit -> legit",
        "E095": "raw -> clear",
        "E136": "SILENTLY WRONG -> clear",
        "E139": "SILENTLY WRONG -> clear",
        "E175": "unclear -> clear",
        "E204": "raw -> clear",
        "E210": "questionable -> clear",
        "E232": "SILENTLY WRONG -> clear",
        "E233": "SILENTLY WRONG -> clear",
    }
    for id_, change in expected.items():
        assert listed[id_].startswith(f"{id_}: {change}: "), listed[id_]
    assert (
        "E232: SILENTLY WRONG -> clear: ValueError: sample_weight (times class_weight)"
        in (listed["E232"])
    )
    assert lines[5].startswith("8 cases changed category")


def test_a_missing_review_is_refused(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--review", str(tmp_path / "none.md")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"--review '{tmp_path / 'none.md'}': no such file" in result.stderr
