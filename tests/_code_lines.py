"""Code lines of the library and of the lab, counted on formatted source: each file as
``ruff format`` writes it with the project's settings (line length 100), every
``# fmt: skip`` ignored, then the lines holding code (docstrings, comments and blank lines
excluded, the count of ``reviews/architecture-ed7ab4a.md``). Folding code onto fewer lines
changes nothing in the count; only deleting code does (``reviews/architecture-8e13b82.md``).

Run from the repository root (``git stash`` or another checkout gives the "before")::

    python tests/_code_lines.py
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}
#: A ``# fmt: skip`` marker at the end of a line.
FMT_SKIP = re.compile(r"[ \t]*# fmt: skip[ \t]*$", re.MULTILINE)

#: The lab's infrastructure, wherever it lives: the package and the console script's entry
#: point (before them the library's benchmark room and its command line). Its size is a
#: maintenance cost, so it has one budget.
INFRASTRUCTURE = (
    "nescal_bench",
    "nescal_bench_command.py",
    "nescal_sklearn/benchmark",
    "nescal_sklearn/cli.py",
)
#: The study scripts: each backs a docs page's "Regenerate" block and is kept as a record,
#: so each has a cap of its own (``reviews/architecture-b2ed419.md``, recommendation 4).
SCRIPTS = ("benchmarks/*.py", "tools")
#: The lab: its infrastructure and its scripts.
LAB = INFRASTRUCTURE + SCRIPTS


def code_lines(source: str) -> int:
    """Lines of ``source`` that hold a token other than a comment, docstrings excluded."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, kinds) and body:
            first = body[0]
            value = getattr(first, "value", None)
            if isinstance(first, ast.Expr) and isinstance(value, ast.Constant):
                if isinstance(value.value, str):
                    docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def formatted(sources: list[str]) -> list[str]:
    """``sources`` as ``ruff format`` writes them with the project's settings, every
    ``# fmt: skip`` ignored."""
    with tempfile.TemporaryDirectory() as folder:
        copies = [Path(folder) / f"f{i}.py" for i in range(len(sources))]
        for copy, source in zip(copies, sources, strict=True):
            copy.write_text(FMT_SKIP.sub("", source))
        command = [sys.executable, "-m", "ruff", "format", "--quiet", "--config"]
        subprocess.run([*command, str(ROOT / "pyproject.toml"), folder], check=True)
        return [copy.read_text() for copy in copies]


def files(*paths: str, root: Path = ROOT) -> list[Path]:
    """The Python files at ``paths`` (files, folders searched recursively, or glob
    patterns) under ``root``; absent paths give none."""
    found: set[Path] = set()
    for path in paths:
        matches = root.glob(path) if "*" in path else [root / path]
        found.update(p for f in matches for p in ([f] if f.is_file() else f.rglob("*.py")))
    return sorted(found)


def per_file(*paths: str, root: Path = ROOT) -> dict[str, int]:
    """Formatted code lines of each Python file at ``paths`` (see :func:`files`), by its
    path relative to ``root``."""
    found = files(*paths, root=root)
    sources = formatted([f.read_text() for f in found])
    return {str(f.relative_to(root)): code_lines(s) for f, s in zip(found, sources, strict=True)}


def count(*paths: str, root: Path = ROOT) -> int:
    """Formatted code lines of the Python files at ``paths`` (see :func:`files`)."""
    return sum(per_file(*paths, root=root).values())


def infrastructure(root: Path = ROOT) -> int:
    """Formatted code lines of the lab's infrastructure."""
    return count(*INFRASTRUCTURE, root=root)


def scripts(root: Path = ROOT) -> dict[str, int]:
    """Formatted code lines of each study script."""
    return per_file(*SCRIPTS, root=root)


def library(root: Path = ROOT) -> int:
    """Formatted code lines of the library (``nescal_sklearn`` less a benchmark room it may
    hold)."""
    room = ("nescal_sklearn/benchmark", "nescal_sklearn/cli.py")
    return count("nescal_sklearn", root=root) - count(*room, root=root)


if __name__ == "__main__":
    here = Path.cwd()
    parts = {path: count(path, root=here) for path in INFRASTRUCTURE}
    print(f"library (nescal_sklearn): {library(here)}")
    print(
        f"lab infrastructure: {infrastructure(here)} ("
        + ", ".join(f"{p} {n}" for p, n in parts.items() if n)
        + ")"
    )
    each = scripts(here)
    print(f"study scripts: {len(each)}, largest {max(each.values(), default=0)}")
    for path, n in sorted(each.items(), key=lambda item: -item[1]):
        print(f"  {path} {n}")
