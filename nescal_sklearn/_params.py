"""Parameters below the estimator layer: the ``get_params``/``set_params`` protocol, and
the checks and message helpers every room shares.

Loss objects live in the pure-torch layers, which must not import scikit-learn, yet
they have to work with :func:`sklearn.base.clone`, ``set_params(loss__weight=...)``
and ``GridSearchCV``. scikit-learn only needs ``get_params(deep=...)`` and
``set_params(**params)`` with the ``__init__`` convention (every keyword argument is
stored unchanged under its own name), which :class:`ParamsMixin` provides.

:func:`check_int` is the one integer check of the rooms (a bool is not an int),
:func:`label_kinds` the one check that labels are of one kind, and :func:`plain` shows a
numpy scalar in a message as the Python value it holds.
"""

from __future__ import annotations

import inspect
from numbers import Integral, Number
from typing import Any

import numpy as np

from .exceptions import ParameterError, ParameterTypeError

__all__ = ["ParamsMixin", "check_int", "is_int", "label_kinds", "plain"]


def plain(value: Any) -> Any:
    """A numpy scalar as the Python number or string it holds (for error messages).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn._params import plain
    >>> plain(np.int64(3)), plain(np.str_("a")), plain([1])
    (3, 'a', [1])
    """
    return value.item() if isinstance(value, np.generic) else value


def label_kinds(y: np.ndarray, name: str = "y") -> set[str]:
    """The kinds of the labels in ``y`` (``"number"``, ``"str"``, ``"bool"``...); raise,
    naming ``name``, unless they are all of one kind. Empty for an array that is not of
    dtype object (its dtype is its kind).

    Raises
    ------
    ValueError
        When ``y`` mixes label kinds (numbers and strings, or ``None`` among them).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn._params import label_kinds
    >>> label_kinds(np.array([1, 2.5], dtype=object))
    {'number'}
    >>> label_kinds(np.array([1, "a"], dtype=object))
    Traceback (most recent call last):
    ...
    ValueError: y must hold labels of one type (all numbers or all strings); got a mix of ['number', 'str']. Convert the labels to one type, e.g. y.astype(str).
    """
    if y.dtype != object:
        return set()
    kinds = {
        "number" if isinstance(v, Number) and not isinstance(v, bool) else type(v).__name__
        for v in y.ravel().tolist()
    }
    if len(kinds) > 1 or kinds & {"NoneType"}:
        raise ValueError(
            f"{name} must hold labels of one type (all numbers or all strings); got a mix "
            f"of {sorted(kinds)}. Convert the labels to one type, e.g. y.astype(str)."
        )
    return kinds


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer, Python's or numpy's; a bool is not."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_int(
    name: str,
    value: Any,
    *,
    low: int | None = None,
    owner: str | None = None,
    none: bool = False,
) -> int | None:
    """``value`` as an ``int``; raise, naming ``name`` and the value, unless it is one.

    The message reads ``"[owner: ]name must be [None or ]an int[ >= low]; got value."``.

    Parameters
    ----------
    name : str
        The parameter, as the caller spells it.
    value : object
        What was passed.
    low : int or None, default=None
        The smallest value allowed; None: any int.
    owner : str or None, default=None
        A class or function name that starts the message (``"NeSCalLoss"``).
    none : bool, default=False
        Accept None (and return it).

    Raises
    ------
    ParameterTypeError
        For a value that is not an int (a bool, a float): a ``TypeError`` and a
        ``ValueError``.
    ParameterError
        For an int below ``low``.

    Examples
    --------
    >>> from nescal_sklearn._params import check_int
    >>> check_int("k", 3, low=1)
    3
    >>> check_int("k", True, low=1)
    Traceback (most recent call last):
    ...
    nescal_sklearn.exceptions.ParameterTypeError: k must be an int >= 1; got True.
    """
    if value is None and none:
        return None
    bound = "" if low is None else f" >= {low}"
    message = f"{name} must be {'None or ' if none else ''}an int{bound}; got {value!r}."
    if owner:
        message = f"{owner}: {message}"
    if not is_int(value):
        raise ParameterTypeError(name, message, value=value)
    if low is not None and value < low:
        raise ParameterError(name, message, value=value)
    return int(value)


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
