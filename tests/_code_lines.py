"""Code lines of the library and of the lab: lines holding code, docstrings, comments and
blank lines excluded (the count of ``reviews/architecture-ed7ab4a.md``).

Run from the repository root (``git stash`` or another checkout gives the "before")::

    python tests/_code_lines.py
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENDMARKER}  # fmt: skip


def code_lines(source: str) -> int:
    """Lines of ``source`` that hold a token other than a comment, docstrings excluded."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                    and isinstance(first.value.value, str):  # fmt: skip
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


#: The lab, wherever it lives: the package, or before it the library's benchmark room and
#: its command line; and the scripts of ``benchmarks/``.
LAB = ("nescal_bench", "nescal_sklearn/benchmark", "nescal_sklearn/cli.py", "benchmarks/*.py")


def count(*paths: str, root: Path = ROOT) -> int:
    """Code lines of the Python files at ``paths`` (files, folders searched recursively, or
    glob patterns) under ``root``; absent paths count 0."""
    files: set[Path] = set()
    for path in paths:
        found = root.glob(path) if "*" in path else [root / path]
        files.update(p for f in found for p in ([f] if f.is_file() else f.rglob("*.py")))
    return sum(code_lines(f.read_text()) for f in files)


def lab(root: Path = ROOT) -> int:
    """Code lines of the lab."""
    return count(*LAB, root=root)


def library(root: Path = ROOT) -> int:
    """Code lines of the library (``nescal_sklearn`` less a benchmark room it may hold)."""
    return count("nescal_sklearn", root=root) - count("nescal_sklearn/benchmark", "nescal_sklearn/cli.py", root=root)


if __name__ == "__main__":
    here = Path.cwd()
    parts = {path: count(path, root=here) for path in LAB}
    print(f"library (nescal_sklearn): {library(here)}")
    print(f"lab: {lab(here)} (" + ", ".join(f"{p} {n}" for p, n in parts.items() if n) + ")")
    # tools/: audits of the reviews (the reliability review's re-measurement), not the lab
    print(f"tools, outside both: {count('tools', root=here)}")
