"""The lab stays a lab: at most 6,500 formatted code lines (issue 35; 7,219 at 8e13b82),
counted on the code as the formatter writes it, so that only deleting code shrinks it."""

import ast
import subprocess
import sys

from _code_lines import FMT_SKIP, LAB, ROOT, code_lines, files, formatted, lab


def test_the_counter_skips_docstrings_comments_and_blank_lines():
    source = '"""Module."""\n\n# a comment\ndef f(x):\n    """Doc."""\n    return (x +\n            1)  # two lines\n'
    assert code_lines(source) == 3


def test_the_counter_counts_folded_code_as_the_formatter_writes_it():
    folded = "values = {'a': [1, 2], 'b': [3, 4]}\n"
    wide = f"def f():\n    return {', '.join(f'value_{i}' for i in range(20))}  # fmt: skip\n"
    assert [code_lines(s) for s in formatted([folded, wide])] == [1, 23]


def test_the_lab_holds_at_most_6500_formatted_code_lines():
    assert lab() <= 6500


def test_the_lab_is_formatted():
    paths = [p for p in LAB if "*" not in p and (ROOT / p).exists()] + ["benchmarks"]
    command = [sys.executable, "-m", "ruff", "format", "--check", *paths]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_fmt_skip_only_on_data_tables_that_say_so():
    """At most 10 markers in the lab, each at the end of a statement under a comment that
    says it is a data table."""
    found = []
    for path in files(*LAB):
        source = path.read_text()
        lines = source.splitlines()
        starts = {}  # the last line of each statement -> its first line
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.stmt):
                starts[node.end_lineno] = node.lineno
        for match in FMT_SKIP.finditer(source):
            line = source.count("\n", 0, match.start()) + 1
            comment, above = [], starts.get(line, 1) - 2
            while above >= 0 and lines[above].lstrip().startswith("#"):
                comment.insert(0, lines[above].strip())
                above -= 1
            found.append((f"{path.relative_to(ROOT)}:{line}", " ".join(comment)))
    assert len(found) <= 10, found
    for where, comment in found:
        assert "data table" in comment, where


def test_no_estimator_module_holds_more_than_350_formatted_code_lines():
    """The estimator's modules stay one concern each (issue 43: ``_net.py`` held 401, four
    concerns), counted like the lab: formatted code, docstrings and comments aside."""
    paths = files("nescal_sklearn/estimator")
    counts = zip(paths, map(code_lines, formatted([p.read_text() for p in paths])), strict=True)
    over = {str(p.relative_to(ROOT)): n for p, n in counts if n > 350}
    assert not over, over
