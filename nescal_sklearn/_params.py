"""A minimal ``get_params``/``set_params`` protocol for objects below the estimator layer.

Loss objects live in the pure-torch layers, which must not import scikit-learn, yet
they have to work with :func:`sklearn.base.clone`, ``set_params(loss__weight=...)``
and ``GridSearchCV``. scikit-learn only needs ``get_params(deep=...)`` and
``set_params(**params)`` with the ``__init__`` convention (every keyword argument is
stored unchanged under its own name), which this mixin provides.
"""

from __future__ import annotations

import inspect
from typing import Any


class ParamsMixin:
    """Give a class scikit-learn's parameter protocol from its ``__init__`` signature."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        init = cls.__init__
        if init is object.__init__:
            return []
        params = inspect.signature(init).parameters.values()
        for p in params:
            if p.kind == p.VAR_POSITIONAL or p.kind == p.VAR_KEYWORD:
                raise TypeError(
                    f"{cls.__name__}.__init__ must not take *args or **kwargs; got {p.name!r}."
                )
        return sorted(p.name for p in params if p.name != "self")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the constructor parameters (and nested ones when ``deep``)."""
        out: dict[str, Any] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                for sub_name, sub_value in value.get_params(deep=True).items():
                    out[f"{name}__{sub_name}"] = sub_value
            out[name] = value
        return out

    def set_params(self, **params: Any):
        """Set constructor parameters, ``name__sub`` reaching into nested objects."""
        valid = set(self._get_param_names())
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for {type(self).__name__}; "
                    f"valid parameters are {sorted(valid)}."
                )
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        defaults = {
            p.name: p.default
            for p in inspect.signature(type(self).__init__).parameters.values()
            if p.name != "self"
        }
        shown = []
        for name in self._get_param_names():
            value = getattr(self, name)
            default = defaults.get(name, inspect.Parameter.empty)
            try:
                same = value is default or bool(value == default)
            except Exception:  # arrays and other non-boolean comparisons
                same = False
            if not same:
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"
