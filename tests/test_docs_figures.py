"""The tables on the study pages are what their printed commands write from the committed
records (issue 42: a table left stale, or a command that no longer runs, fails here)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: config -> the folder its committed tables live in.
STUDIES = {
    "networks_search": "networks",
    "scale": "scale",
    "oof_ensembles_search": "oof_ensembles",
    "oof_ensembles": "oof_ensembles",
    "oof_ensembles_heldout": "oof_ensembles",
}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.parametrize("config", sorted(STUDIES))
def test_the_committed_tables_are_what_no_run_writes(config, tmp_path):
    if config.startswith("oof_ensembles"):
        # their configs name RealMLP-TD, which validation imports: until report-only
        # commands stop importing the anchors, these need the bench extra's pytabkit
        pytest.importorskip("pytabkit")
    script = [sys.executable, "benchmarks/oof_ensembles.py", "--config", config]
    _run([*script, "--no-run", "--out", str(tmp_path)], ROOT)
    for kind in ("table", "pairs"):
        name = f"{kind}_{config}.md"
        committed = (DOCS / "figures" / STUDIES[config] / name).read_text()
        assert (tmp_path / name).read_text() == committed, f"docs/figures/{STUDIES[config]}/{name}"


def _page_scripts(page: str) -> list[str]:
    """The ``python - <<'EOF'`` scripts printed on a page, in order."""
    text = (DOCS / page).read_text()
    return re.findall(r"^python - <<'EOF'\n(.*?)^EOF$", text, re.S | re.M)


#: The study pages, and the scripts each still prints: the views of records moved to
#: ``nescal-bench compare`` calls (issue 42); scale.md keeps its per-dataset table, the
#: member search's written rule and the scale and graph searches' sorted per-set values
#: (the bounds on their medians), networks.md its comparison of AutoGluon's runs in two
#: studies (one method name in two folders), which no general command prints.
PAGES = {"networks.md": 1, "scale.md": 4, "oof_ensembles.md": 0}


@pytest.mark.parametrize(("page", "count"), sorted(PAGES.items()))
def test_the_scripts_printed_on_a_page_run_from_the_committed_records(page, count, tmp_path):
    # in a folder of their own (they write docs/figures/...), reading the same records
    (tmp_path / "benchmarks").symlink_to(ROOT / "benchmarks")
    (tmp_path / "docs" / "figures" / "scale").mkdir(parents=True)
    scripts = _page_scripts(page)
    assert len(scripts) == count
    for script in scripts:
        assert _run([sys.executable, "-c", script], tmp_path).stdout
    if page == "scale.md":
        written = tmp_path / "docs" / "figures" / "scale" / "per_dataset.md"
        assert written.read_text() == (DOCS / "figures" / "scale" / "per_dataset.md").read_text()


def _compare_calls(page: str) -> list[list[str]]:
    """The arguments of the ``nescal-bench compare`` calls in a page's bash blocks (their
    ``NAME=value`` variables substituted)."""
    calls = []
    for block in re.findall(r"^```bash\n(.*?)^```", (DOCS / page).read_text(), re.S | re.M):
        names = dict(re.findall(r"^(\w+)=(\S+)$", block, re.M))
        for line in re.findall(r"^nescal-bench compare (.*?)(?:\s+#.*)?$", block, re.M):
            calls.append(shlex.split(re.sub(r"\$(\w+)", lambda m, names=names: names[m[1]], line)))
    return calls


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_compare_calls_printed_on_a_page_run_from_the_committed_records(page):
    calls = _compare_calls(page)
    assert len(calls) >= 3
    for args in calls:
        out = _run([sys.executable, "nescal_bench_command.py", "compare", *args], ROOT).stdout
        assert re.search(r"strictly on +\| at 1 %", out) or "--tolerance" in args
