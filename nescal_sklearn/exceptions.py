"""Exceptions raised by nescal_sklearn.

Importing this module imports no third-party library, so that the pure-torch rooms can
raise these errors too; scikit-learn's ``NotFittedError`` and the scikit-learn-compatible
:class:`InvalidParameterError` are resolved on first use (PEP 562).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

__all__ = [
    "GraphTimeout",
    "InvalidParameterError",  # noqa: F822 (resolved by __getattr__)
    "NeSCalError",
    "NotFittedError",  # noqa: F822 (resolved by __getattr__)
    "ParameterError",
    "ParameterTypeError",
    "PenaltyInactiveWarning",
]

# ``NotFittedError`` is scikit-learn's own class, re-exported: every estimator and
# calibrator of nescal_sklearn raises it (through ``check_is_fitted``) when used before
# ``fit``, so one ``except sklearn.exceptions.NotFittedError`` catches them all.


class NeSCalError(Exception):
    """Base class of every error nescal_sklearn raises on its own account."""


class GraphTimeout(NeSCalError, TimeoutError):
    """The neighbour search passed its ``deadline`` before it finished.

    :func:`~nescal_sklearn.graph.build_knn_graph` raises it between two blocks of its
    exact search (or before an approximate search starts) once
    ``time.perf_counter()`` is past the deadline; ``NeSCalClassifier`` under a
    ``time_limit`` catches it, ends training and reports ``penalty_status_ ==
    "no_graph"``.
    """


class PenaltyInactiveWarning(UserWarning):
    """``NeSCalClassifier`` returned a model that the smoothing penalty never trained.

    Raised at the end of ``fit`` when a neighbour loss (NeSCal) ends up as plain
    base-loss training: the warm-up never ended, so no graph was built, or early
    stopping restored an epoch from before the graph. The fitted attribute
    ``penalty_status_`` records which (``"no_graph"`` or ``"warmup_checkpoint"``).
    """


class ParameterError(NeSCalError, ValueError):
    """A parameter of an estimator, a loss or a network has a value it cannot take.

    ``NeSCalClassifier.check_params`` (and so ``fit``, before any data is read) raises
    it for every bad parameter. It is a ``ValueError``, so ``except ValueError`` still
    catches it, and it carries the parameter's name as ``get_params(deep=True)`` of the
    object that raised it spells it, its value, and the other parameters its message
    compares it with, so a caller (a benchmark configuration, a grid search) can point at
    the settings to change without reading, or rewriting, the message.

    Parameters
    ----------
    param : str
        The parameter, as in ``get_params(deep=True)``: ``"max_epochs"``,
        ``"loss__warmup"``.
    message : str
        What is wrong, naming the parameter and the value.
    value : object, default=None
        The value of ``param`` that is wrong (None where the raiser does not give it).
    context : mapping of str to object or None, default=None
        The other parameters the message names, by name as ``param`` is spelt, with the
        values it names: ``{"max_epochs": 3}`` for a warm-up that ends after the last
        epoch.

    Attributes
    ----------
    param, value : str, object
        As given.
    context : dict
        As given (empty for None).

    Examples
    --------
    >>> from nescal_sklearn.exceptions import ParameterError
    >>> error = ParameterError(
    ...     "warmup", "warmup=5 ends after max_epochs=3.", value=5, context={"max_epochs": 3}
    ... )
    >>> error.param, error.value, error.context, isinstance(error, ValueError)
    ('warmup', 5, {'max_epochs': 3}, True)
    >>> nested = error.nested("loss")
    >>> nested.param, nested.value, nested.context, str(nested)
    ('loss__warmup', 5, {'loss__max_epochs': 3}, 'warmup=5 ends after max_epochs=3.')
    """

    def __init__(
        self,
        param: str,
        message: str,
        *,
        value: Any = None,
        context: Mapping[str, Any] | None = None,
    ):
        super().__init__(message)
        self.param = param
        self.value = value
        self.context = dict(context or {})

    def nested(self, owner: str) -> ParameterError:
        """The same error, for the parameters as the object that holds ``owner`` spells
        them (``owner__param``, and so each name of ``context``)."""
        context = {f"{owner}__{name}": value for name, value in self.context.items()}
        return type(self)(f"{owner}__{self.param}", str(self), value=self.value, context=context)

    def __reduce__(self):
        return type(self), (self.param, str(self)), {"value": self.value, "context": self.context}


class ParameterTypeError(ParameterError, TypeError):
    """A parameter of the wrong type (a float for an int, a bool for a number): a
    :class:`ParameterError`, and a ``TypeError`` as Python's own argument errors are."""


@functools.cache
def _invalid_parameter_error() -> type:
    from sklearn.utils._param_validation import InvalidParameterError as SklearnError

    class InvalidParameterError(ParameterTypeError, SklearnError):
        """A parameter that fails its estimator's declared constraints
        (``_parameter_constraints``): a :class:`ParameterTypeError` that is also
        scikit-learn's ``InvalidParameterError``, so that scikit-learn's checks and
        ``except`` clauses recognise it. Its message is scikit-learn's."""

    InvalidParameterError.__module__ = __name__
    InvalidParameterError.__qualname__ = "InvalidParameterError"  # picklable by name
    return InvalidParameterError


def __getattr__(name: str):
    if name == "NotFittedError":
        from sklearn.exceptions import NotFittedError

        return NotFittedError
    if name == "InvalidParameterError":
        return _invalid_parameter_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
