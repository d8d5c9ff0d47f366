"""The layer order of DESIGN.md, enforced on the source (``docs/architecture.md``).

Every module of ``nescal_sklearn`` is parsed with :mod:`ast` (nothing is imported) and
each import, relative ones resolved, is checked against two rules:

* a *room* (a subpackage such as ``metrics``) imports only itself, the
  rooms listed for it in :data:`ALLOWED`, and the infrastructure modules
  (:data:`INFRASTRUCTURE`); from the top-level package only ``__version__``;
* no module imports a private module or a private name (``_name``) of another room:
  ``from ..metrics import reliability_curve`` is fine,
  ``from ..metrics._binning import curve_from_checked`` is not.

Imports inside functions and ``TYPE_CHECKING`` blocks count like any other; dynamic
imports through :mod:`importlib` are not seen. Subprocess checks add what parsing cannot
show: which third-party libraries a light room pulls in at run time. The library never
imports the lab, ``nescal_bench`` (installed with the ``bench`` extra).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nescal_sklearn"
ROOT = "nescal_sklearn"

#: Modules every room may import (and which import no room themselves).
INFRASTRUCTURE = frozenset({"_params", "_registry", "exceptions", "_compat"})

#: Room -> the other rooms it may import. The order of DESIGN.md's "Layers": nn (the
#: networks and ensemble helpers) below penalties, preprocessing below the estimator,
#: the fold layer (model_selection) below both calibration and the ensemble, plus the
#: plotting room (which sits beside scorers).
ALLOWED: dict[str, frozenset[str]] = {
    "metrics": frozenset(),
    "nn": frozenset(),
    "penalties": frozenset({"nn"}),
    "graph": frozenset({"penalties", "nn"}),
    "losses": frozenset({"penalties", "graph"}),
    "preprocessing": frozenset(),
    "estimator": frozenset({"losses", "penalties", "graph", "metrics", "nn", "preprocessing"}),
    "model_selection": frozenset({"metrics"}),
    "calibration": frozenset({"model_selection", "metrics"}),
    "scorers": frozenset({"metrics"}),
    "plotting": frozenset({"metrics"}),
    "ensemble": frozenset(
        {"model_selection", "calibration", "estimator", "metrics", "preprocessing"}
    ),
    "diagnostics": frozenset(
        {
            "metrics",
            "nn",
            "penalties",
            "graph",
            "losses",
            "preprocessing",
            "estimator",
            "calibration",
            "plotting",
        }
    ),
}

#: The only names a room may take from the top-level package itself.
TOP_LEVEL_NAMES = frozenset({"__version__"})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([ROOT, *parts])


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` (``nescal_sklearn.x.y``) names a module or package of the tree."""
    relative = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (PACKAGE / relative).with_suffix(".py").is_file() or (
        PACKAGE / relative / "__init__.py"
    ).is_file()


def _room(dotted: str) -> str | None:
    """The room of a module of the tree; ``None`` for the top-level package."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else None


def _imports(path: Path):
    """``(line, source, target module, imported name or None)`` for each import in ``path``.

    For ``from package import name``, the target is ``package.name`` when that is a
    module of the tree, else ``package`` with ``name`` as the imported name.
    """
    source = path.read_text()
    module = _module_name(path)
    package = module if _is_package(path) else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        text = ast.get_source_segment(source, node)  # O(file) each: only for imports
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    yield node.lineno, text, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != ROOT:
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if _is_module(submodule):
                    yield node.lineno, text, submodule, None
                else:
                    yield node.lineno, text, target, alias.name


def _violations(path: Path) -> list[str]:
    own = _room(_module_name(path))
    where = f"{path.relative_to(PACKAGE.parent)}"
    out = []
    for line, text, target, name in _imports(path):
        room = _room(target)
        first_line = text.splitlines()[0] + (" ..." if "\n" in text else "")
        reason = None
        if own is None:  # the top-level package re-exports everything, lazily
            continue
        if room is None:
            if name not in TOP_LEVEL_NAMES:
                reason = (
                    "imports the top-level package"
                    + (f" (name {name!r})" if name else "")
                    + "; only __version__ may come from there"
                )
        elif own in INFRASTRUCTURE:
            if room not in INFRASTRUCTURE:
                reason = f"infrastructure module imports the {room!r} room"
        elif room in INFRASTRUCTURE or room == own:
            pass
        elif room not in ALLOWED.get(own, frozenset()):
            allowed = sorted(ALLOWED.get(own, ()))
            reason = f"{own!r} may not import {room!r} (it may import {allowed or 'no room'})"
        elif any(part.startswith("_") for part in target.split(".")[2:]):
            reason = f"imports the private module {target} of the {room!r} room"
        elif name is not None and name.startswith("_"):
            reason = f"imports the private name {name} of the {room!r} room"
        entry = f"{where}:{line}: {first_line}  -- {reason}"
        if reason and entry not in out:  # one entry per module for ``from x import a, b``
            out.append(entry)
    return out


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_room_is_known():
    rooms = {_room(_module_name(path)) for path in _modules()} - {None}
    unknown = sorted(rooms - set(ALLOWED) - INFRASTRUCTURE)
    assert unknown == [], (
        f"New room(s) {unknown}: add them to ALLOWED in tests/test_layers.py, to "
        "docs/architecture.md and to the layers of DESIGN.md."
    )


def test_rooms_import_only_lower_rooms_and_only_their_public_names():
    bad = [violation for path in _modules() for violation in _violations(path)]
    if bad:
        pytest.fail("Imports that break the layer order:\n" + "\n".join(bad), pytrace=False)


def _import_graph(paths: list[Path]) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports (at the top, in functions, anywhere)."""
    graph = {_module_name(path): set() for path in paths}
    for path in paths:
        source = _module_name(path)
        graph[source] |= {target for _, _, target, _ in _imports(path) if target in graph}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), or a module
    that imports itself: each is an import cycle."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_loop():
    # The top-level package re-exports every room (lazily); a room may take only
    # __version__ from it, so its edges are left out rather than counted as loops.
    paths = [path for path in _modules() if path != PACKAGE / "__init__.py"]
    cycles = _cycles(_import_graph(paths))
    assert cycles == [], "Modules that import each other in a loop:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_the_cycle_checker_sees_a_loop_through_a_function_level_import(tmp_path, monkeypatch):
    package = tmp_path / ROOT
    files = {
        "__init__.py": "",
        "calibration/__init__.py": "from ._base import f\n",
        "calibration/_base.py": "def f():\n    from ._crossfit import g\n",
        "calibration/_crossfit.py": "from ._base import f\n\ndef g():\n    pass\n",
        "calibration/_maps.py": "",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    monkeypatch.setitem(globals(), "PACKAGE", package)
    graph = _import_graph(sorted(package.rglob("*.py")))
    assert _cycles(graph) == [
        ["nescal_sklearn.calibration._base", "nescal_sklearn.calibration._crossfit"]
    ]


def test_the_checker_sees_each_kind_of_violation(tmp_path, monkeypatch):
    # A throw-away tree shaped like the package, with one import of each forbidden kind.
    package = tmp_path / ROOT
    files = {
        "__init__.py": "from .metrics import f\n",
        "exceptions.py": "",
        "metrics/__init__.py": "from ._core import f\n",
        "metrics/_core.py": "from .. import exceptions\n\ndef f():\n    import nescal_sklearn.graph\n",
        "graph/__init__.py": "",
        "plotting/__init__.py": (
            "from ..metrics._core import f\n"
            "from ..metrics import _private\n"
            "from .. import metrics, __version__\n"
            "import nescal_sklearn\n"
        ),
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    monkeypatch.setitem(globals(), "PACKAGE", package)
    found = sorted(v for p in sorted(package.rglob("*.py")) for v in _violations(p))
    assert [v.split("  -- ")[0] for v in found] == [
        "nescal_sklearn/metrics/_core.py:4: import nescal_sklearn.graph",
        "nescal_sklearn/plotting/__init__.py:1: from ..metrics._core import f",
        "nescal_sklearn/plotting/__init__.py:2: from ..metrics import _private",
        "nescal_sklearn/plotting/__init__.py:4: import nescal_sklearn",
    ]
    assert "'metrics' may not import 'graph'" in found[0]


_NOT_IMPORTED = [
    (
        "import nescal_sklearn.metrics as m; "
        "m.expected_calibration_error([0, 1], [[0.9, 0.1], [0.2, 0.8]])",
        ("torch", "matplotlib"),
    ),
    ("import nescal_sklearn.penalties", ("sklearn", "skorch")),
]


@pytest.mark.parametrize(("code", "absent"), _NOT_IMPORTED, ids=["metrics", "penalties"])
def test_light_rooms_do_not_import_heavy_libraries(code, absent):
    program = (
        f"import sys; {code}; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {absent!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_library_never_imports_the_lab():
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [
                f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                for n in names
                if n.split(".")[0] == "nescal_bench"
            ]
    assert found == []
    program = (
        "import sys, importlib, nescal_sklearn\n"
        "for name in nescal_sklearn.__all__: getattr(nescal_sklearn, name)\n"
        "for sub in ('nn', 'metrics', 'calibration', 'estimator', 'diagnostics', 'plotting'):\n"
        "    importlib.import_module('nescal_sklearn.' + sub)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'nescal_bench'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_lab_without_its_extra_names_the_install_command():
    # find_spec answers None for pydantic, as in an install without the bench extra
    program = (
        "import importlib.util as util\n"
        "find = util.find_spec\n"
        "util.find_spec = lambda name, *a: None if name == 'pydantic' else find(name, *a)\n"
        "import nescal_bench\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: nescal_bench needs the lab's extra (pydantic missing): "
        "pip install -e '.[bench]'"
    )
