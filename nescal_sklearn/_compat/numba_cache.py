"""An opt-in disk cache for the numba functions that pynndescent and umap compile uncached.

Off unless ``NESCAL_SKLEARN_JIT_CACHE=1`` (or ``true``, ``yes``) is set in the
environment: nescal_sklearn then patches the uncached ``@njit`` functions of pynndescent
and umap (only when an approximate neighbour search or a UMAP reduction first runs,
never on import). Without it, those libraries compile as they always do.

pynndescent marks only part of its ``@njit`` functions ``cache=True``; the NN-descent
kernels are ``cache=False`` — most take the distance function as an argument, which
numba cannot cache (the argument's type names the jitted function by its memory
address, different in every process). So every new Python process spends tens of
seconds compiling them again, and ``NUMBA_CACHE_DIR`` alone does not help them: it
only relocates the cache of functions that already opted in.

:func:`enable_jit_cache` gives those module-level functions a numba
``FunctionCache`` whose index key spells such an argument by its module, name and
a hash of its source file instead of its address. When an entry is loaded, its
signature is re-pointed at this process's function objects. Guards:

* a signature that still names something by address (a closure, a function not
  reachable as a module attribute) is neither loaded nor saved — it could never
  match in another process, and saving it would grow the cache on every run;
* functions numba refuses to cache (``uses dynamic globals``; pynndescent's
  top-level ``nn_descent`` and ``nn_descent_internal`` are such) compile as before,
  with numba's warning silenced;
* anything else that goes wrong (numba internals that moved, a cache folder that
  cannot be written, an entry that cannot be read or saved) falls back to plain
  compiling, with a ``RuntimeWarning`` that names the failure (shown once per
  kind of failure, by Python's default warning filter).

Measured on 2 shared cores, 5000 x 32 float32 rows, first
``build_knn_graph(X, 10, method="approximate")`` of a process with a warm cache:
8-16 s with this cache against 34-40 s with ``NUMBA_CACHE_DIR`` alone (UMAP
reduction: 15-21 s against 47-50 s); first ever: 70-95 s either way.

Files go to ``NUMBA_CACHE_DIR`` when the user sets it, else to
:func:`jit_cache_dir` (``$XDG_CACHE_HOME/nescal_sklearn/numba``, by default
``~/.cache/nescal_sklearn/numba``). Entries are keyed by hashes of the source
files, so upgrading the libraries invalidates them; delete the folder to clear it.
Unset ``NESCAL_SKLEARN_JIT_CACHE`` (or set it to 0) to turn the mechanism off again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import re
import sys
import warnings

__all__ = [
    "PYNNDESCENT_MODULES",
    "UMAP_MODULES",
    "enable_jit_cache",
    "jit_cache_dir",
    "jit_cache_enabled",
]

#: pynndescent modules whose functions NNDescent construction calls.
PYNNDESCENT_MODULES = (
    "pynndescent.pynndescent_",
    "pynndescent.utils",
    "pynndescent.kernels",
    "pynndescent.rp_trees",
    "pynndescent.distances",
    "pynndescent.graph_utils",
)
#: umap-learn modules whose functions ``UMAP.fit_transform`` calls (besides pynndescent).
UMAP_MODULES = (
    "umap.umap_",
    "umap.layouts",
    "umap.spectral",
    "umap.utils",
    "umap.distances",
    "umap.sparse",
)

#: Environment variable that turns the cache on when set to 1, true or yes.
ENV_SWITCH = "NESCAL_SKLEARN_JIT_CACHE"

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def jit_cache_enabled() -> bool:
    """Whether :func:`enable_jit_cache` acts: ``NESCAL_SKLEARN_JIT_CACHE`` is 1, true or yes."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() in ("1", "true", "yes")


def jit_cache_dir() -> str:
    """Directory of the persistent JIT cache (``NUMBA_CACHE_DIR`` wins when set)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nescal_sklearn", "numba")


def _fall_back(what: str, exc: BaseException) -> None:
    warnings.warn(
        f"nescal_sklearn's numba cache could not {what} ({type(exc).__name__}: {exc}); "
        f"compiling without it. Unset {ENV_SWITCH} to turn the cache off.",
        RuntimeWarning,
        stacklevel=3,
    )


@functools.cache
def _file_hash(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def _dispatcher_name(dispatcher) -> str | None:
    """A jitted function's stable name: its module, qualified name and a hash of its
    source file; None for a closure or a function not reachable as a module attribute."""
    func = dispatcher.py_func
    module = sys.modules.get(getattr(func, "__module__", None))
    if (
        func.__closure__ is not None
        or module is None
        or getattr(module, func.__name__, None) is not dispatcher
    ):
        return None
    return f"{func.__module__}.{func.__qualname__}@{_file_hash(module.__file__)}"


def _stable_signature(args) -> str | None:
    """``str(args)`` with jitted-function arguments named stably; None if impossible."""
    from numba.core import types
    from numba.core.dispatcher import Dispatcher

    text = str(args)
    for arg in args:
        if isinstance(arg, types.Dispatcher):
            dispatcher = arg.dispatcher
        elif isinstance(arg, types.Omitted) and isinstance(arg.value, Dispatcher):
            dispatcher = arg.value
        else:
            continue
        name = _dispatcher_name(dispatcher)
        if name is None:
            return None
        text = text.replace(repr(dispatcher), name)
    return None if _ADDRESS.search(text) else text


def _arg_types(sig) -> tuple:
    """The argument types of a numba signature, or of a tuple of them."""
    from numba.core import typing

    return tuple(sig.args if isinstance(sig, typing.Signature) else sig)


@functools.lru_cache(maxsize=1)
def _stable_cache_class():
    """numba's ``FunctionCache`` with index keys by :func:`_stable_signature`, files under
    :func:`jit_cache_dir`, and failures turned into :func:`_fall_back` warnings."""
    from numba.core import caching, typing
    from numba.core.errors import NumbaWarning

    class _Locator(caching.UserWideCacheLocator):
        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            subpath = self.get_suitable_cache_subpath(py_file)
            self._cache_path = os.path.join(jit_cache_dir(), subpath)

    class _Impl(caching.CompileResultCacheImpl):
        _locator_classes = [caching.UserProvidedCacheLocator, _Locator]

    class StableSignatureCache(caching.FunctionCache):
        _impl_class = _Impl

        def _index_key(self, sig, codegen):
            key = super()._index_key(sig, codegen)
            return (_stable_signature(_arg_types(sig)),) + tuple(key[1:])

        def load_overload(self, sig, target_context):
            args = _arg_types(sig)
            if _stable_signature(args) is None:
                return None
            try:
                cres = super().load_overload(sig, target_context)
            except Exception as exc:  # a stale or unreadable entry: compile instead
                _fall_back("load a compiled function", exc)
                return None
            if cres is not None and str(args) != str(cres.signature.args):
                # Re-point the unpickled signature at this process's function objects.
                cres.fndesc.argtypes = args
                cres = cres._replace(signature=typing.signature(cres.signature.return_type, *args))
            return cres

        def save_overload(self, sig, data):
            if _stable_signature(_arg_types(sig)) is None:
                return
            with warnings.catch_warnings():
                # numba's own "cannot cache ... uses dynamic globals": expected, see above.
                warnings.simplefilter("ignore", NumbaWarning)
                try:
                    super().save_overload(sig, data)
                except Exception as exc:  # unpicklable or unwritable: stay uncached
                    _fall_back("save a compiled function", exc)

    return StableSignatureCache


def enable_jit_cache(module_names: tuple[str, ...]) -> int:
    """Give the uncached numba functions of ``module_names`` a persistent disk cache.

    Idempotent (a function given a cache keeps it) and best effort: a module that
    cannot be imported is skipped; a numba without the expected internals, or a cache
    folder that cannot be used, leaves things as they were, with a ``RuntimeWarning``.
    Call it before the functions are first used in the process. Does nothing unless
    ``NESCAL_SKLEARN_JIT_CACHE=1`` (opt-in).

    Parameters
    ----------
    module_names : tuple of str
        Importable module names, e.g. :data:`PYNNDESCENT_MODULES`.

    Returns
    -------
    int
        Number of functions given a cache by this call.

    Examples
    --------
    >>> from nescal_sklearn._compat.numba_cache import enable_jit_cache
    >>> enable_jit_cache(("a_module_that_is_not_installed",))
    0
    """
    if not jit_cache_enabled():
        return 0
    modules = []
    for name in module_names:
        try:
            modules.append(importlib.import_module(name))
        except ImportError:  # not installed, or not in this version: the caller reports it
            continue
        except Exception as exc:
            _fall_back(f"import {name}", exc)
    if not modules:
        return 0
    try:
        from numba.core import caching
        from numba.core.dispatcher import Dispatcher

        cache_class = _stable_cache_class()
    except Exception as exc:  # numba internals moved: run uncached
        _fall_back("be set up with this numba", exc)
        return 0
    count = 0
    for module in modules:
        for obj in list(vars(module).values()):
            if (
                isinstance(obj, Dispatcher)
                and isinstance(obj._cache, caching.NullCache)
                and getattr(obj.py_func, "__module__", None) == module.__name__
            ):
                try:
                    obj._cache = cache_class(obj.py_func)
                except Exception as exc:  # e.g. no writable cache location
                    _fall_back(f"give {module.__name__}.{obj.py_func.__name__} a cache", exc)
                    continue
                count += 1
    return count
