"""Lazy re-exports (PEP 562) for a package's ``__init__``: each name is imported on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of a package that re-exports lazily.

    ``exports`` maps each public name to the module, relative to the package, that
    defines it. A name is imported on first access and then stored in ``namespace``
    (the package's ``globals()``), so later accesses do not go through ``__getattr__``.

    Parameters
    ----------
    namespace : dict
        The package's ``globals()``.
    exports : mapping of str to str
        Public name -> defining module, relative to the package (``"metrics"``,
        ``"_config"``).

    Returns
    -------
    __getattr__, __dir__ : callable
        To assign to the package's names of the same name.

    Examples
    --------
    >>> import nescal_sklearn
    >>> "NeSCalClassifier" in dir(nescal_sklearn)
    True
    >>> nescal_sklearn.no_such_name
    Traceback (most recent call last):
    ...
    AttributeError: module 'nescal_sklearn' has no attribute 'no_such_name'
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        try:
            module = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *exports])

    return __getattr__, __dir__
