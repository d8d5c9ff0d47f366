"""The benchmark uses the library like a user: public names of the lower packages only."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nescal_sklearn"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``path`` (relative ones resolved)."""
    package = ["nescal_sklearn", *path.parent.relative_to(PACKAGE).parts]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return out


def test_benchmark_and_cli_import_no_private_module_of_another_package():
    files = [*sorted((PACKAGE / "benchmark").glob("*.py")), PACKAGE / "cli.py"]
    bad = []
    for path in files:
        for line, module in _imported_modules(path):
            parts = module.split(".")
            if parts[0] != "nescal_sklearn" or parts[1:2] == ["benchmark"]:
                continue
            if any(part.startswith("_") and part != "__version__" for part in parts[1:]):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert bad == []
