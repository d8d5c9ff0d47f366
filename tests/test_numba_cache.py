"""Tests of nescal_sklearn._compat.numba_cache, the opt-in disk cache for pynndescent's JIT
functions (on only with NESCAL_SKLEARN_JIT_CACHE=1)."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

numba = pytest.importorskip("numba")
pytest.importorskip("pynndescent")

from numba.core import caching  # noqa: E402

from nescal_sklearn._compat import numba_cache  # noqa: E402
from nescal_sklearn._compat.numba_cache import ENV_SWITCH, enable_jit_cache  # noqa: E402

# One NN-descent in a fresh process; reports what the patched (upstream uncached)
# functions did: how many there are, their cache hits and misses, and how many of the
# hits had a jitted function (the distance) among their argument types.
_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from numba.core import types
    from nescal_sklearn.graph import build_knn_graph
    from nescal_sklearn._compat.numba_cache import PYNNDESCENT_MODULES

    data = np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32)
    start = time.perf_counter()
    build_knn_graph(data, 5, method="approximate", random_state=0)
    elapsed = time.perf_counter() - start
    patched = hits = misses = dispatcher_arg_hits = 0
    for name in PYNNDESCENT_MODULES:
        for obj in vars(sys.modules.get(name, object())).values():
            if type(getattr(obj, "_cache", None)).__name__ != "StableSignatureCache":
                continue
            patched += 1
            stats = obj.stats
            hits += sum(stats.cache_hits.values())
            misses += sum(stats.cache_misses.values())
            dispatcher_arg_hits += sum(
                count
                for sig, count in stats.cache_hits.items()
                if any(isinstance(arg, types.Dispatcher) for arg in sig)
            )
    print(json.dumps({"elapsed": elapsed, "patched": patched, "hits": hits,
                      "misses": misses, "dispatcher_arg_hits": dispatcher_arg_hits}))
    """
)


def _run_child() -> dict:
    env = {**os.environ, ENV_SWITCH: "1"}
    result = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=900
    )
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning" not in result.stderr, result.stderr  # no fallback taken
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_pynndescent_functions_from_the_cache():
    # The suite's own cache directory: the first child compiles (or, when an earlier test
    # or run has already compiled, loads); either way the second one must load.
    first = _run_child()
    assert first["patched"] > 0 and first["hits"] + first["misses"] > 0
    index_files = list(pathlib.Path(numba_cache.jit_cache_dir()).rglob("*.nbi"))
    assert any("pynndescent" in str(path) for path in index_files)

    second = _run_child()
    print(f"NN-descent first call: {first['elapsed']:.1f}s, then {second['elapsed']:.1f}s")
    assert second["hits"] > 0
    assert second["dispatcher_arg_hits"] > 0  # the case numba's own cache cannot handle
    assert second["misses"] <= first["misses"]  # a few signatures are never cached


_IMPORT_ONLY = textwrap.dedent(
    """
    import json, sys
    import nescal_sklearn
    from nescal_sklearn.graph._approximate import import_pynndescent
    from nescal_sklearn._compat.numba_cache import PYNNDESCENT_MODULES

    import_pynndescent()  # what an approximate neighbour search does first
    patched = sum(
        type(getattr(obj, "_cache", None)).__name__ == "StableSignatureCache"
        for name in PYNNDESCENT_MODULES
        for obj in getattr(sys.modules.get(name), "__dict__", {}).values()
    )
    print(json.dumps({"patched": patched}))
    """
)


def test_no_function_is_patched_without_the_switch():
    """Importing nescal_sklearn, and pynndescent through it, changes no numba function."""
    env = {k: v for k, v in os.environ.items() if k != ENV_SWITCH}
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ONLY], capture_output=True, text=True, env=env, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"patched": 0}


@pytest.fixture
def jitted_module(tmp_path, monkeypatch):
    """A fresh importable module holding one uncached ``@njit`` function."""
    name = f"nescal_test_jitted_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(
        "import numba\n\n\n@numba.njit\ndef add_one(x):\n    return x + 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV_SWITCH, "1")
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


def test_gives_each_uncached_function_a_cache_once(jitted_module):
    assert isinstance(jitted_module.add_one._cache, caching.NullCache)
    assert enable_jit_cache((jitted_module.__name__,)) == 1
    assert type(jitted_module.add_one._cache).__name__ == "StableSignatureCache"
    assert enable_jit_cache((jitted_module.__name__,)) == 0  # idempotent
    assert jitted_module.add_one(2) == 3


def test_modules_that_are_not_installed_are_skipped(jitted_module):
    assert enable_jit_cache(("nescal_no_such_module", jitted_module.__name__)) == 1


@pytest.mark.parametrize("value", [None, "", "0", "false", "No"])
def test_off_unless_the_environment_turns_it_on(jitted_module, monkeypatch, value):
    if value is None:
        monkeypatch.delenv(ENV_SWITCH)
    else:
        monkeypatch.setenv(ENV_SWITCH, value)
    assert enable_jit_cache((jitted_module.__name__,)) == 0
    assert isinstance(jitted_module.add_one._cache, caching.NullCache)


def test_warns_when_numba_internals_moved(jitted_module, monkeypatch):
    def moved():
        raise AttributeError("module 'numba.core.caching' has no attribute 'FunctionCache'")

    monkeypatch.setattr(numba_cache, "_stable_cache_class", moved)
    message = (
        "nescal_sklearn's numba cache could not be set up with this numba (AttributeError: "
        "module 'numba.core.caching' has no attribute 'FunctionCache'); compiling without "
        "it. Unset NESCAL_SKLEARN_JIT_CACHE to turn the cache off."
    )
    with pytest.warns(RuntimeWarning, match=f"^{re.escape(message)}$"):
        assert enable_jit_cache((jitted_module.__name__,)) == 0
    assert isinstance(jitted_module.add_one._cache, caching.NullCache)
    assert jitted_module.add_one(2) == 3


def test_warns_when_a_function_cannot_get_a_cache(jitted_module, monkeypatch):
    class Unwritable:
        def __init__(self, py_func):
            raise RuntimeError("no writable cache location")

    monkeypatch.setattr(numba_cache, "_stable_cache_class", lambda: Unwritable)
    message = (
        f"nescal_sklearn's numba cache could not give {jitted_module.__name__}.add_one a "
        "cache (RuntimeError: no writable cache location); compiling without it. Unset "
        "NESCAL_SKLEARN_JIT_CACHE to turn the cache off."
    )
    with pytest.warns(RuntimeWarning, match=f"^{re.escape(message)}$"):
        assert enable_jit_cache((jitted_module.__name__,)) == 0
    assert isinstance(jitted_module.add_one._cache, caching.NullCache)
