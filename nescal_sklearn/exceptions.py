"""Exceptions raised by nescal_sklearn."""

from __future__ import annotations

from sklearn.exceptions import NotFittedError

__all__ = ["NeSCalError", "NotFittedError", "ParameterError", "PenaltyInactiveWarning"]

# ``NotFittedError`` is scikit-learn's own class, re-exported: every estimator and
# calibrator of nescal_sklearn raises it (through ``check_is_fitted``) when used before
# ``fit``, so one ``except sklearn.exceptions.NotFittedError`` catches them all.


class NeSCalError(Exception):
    """Base class of every error nescal_sklearn raises on its own account."""


class PenaltyInactiveWarning(UserWarning):
    """``NeSCalClassifier`` returned a model that the smoothing penalty never trained.

    Raised at the end of ``fit`` when a neighbour loss (NeSCal) ends up as plain
    base-loss training: the warm-up never ended, so no graph was built, or early
    stopping restored an epoch from before the graph. The fitted attribute
    ``penalty_status_`` records which (``"no_graph"`` or ``"warmup_checkpoint"``).
    """


class ParameterError(NeSCalError, ValueError):
    """A parameter of an estimator (or of its loss) has a value it cannot take.

    Raised by ``NeSCalClassifier.check_params`` (and so by ``fit``) before any data is
    read. It is a ``ValueError``, so ``except ValueError`` still catches it, and it
    carries the parameter's name as ``get_params`` spells it, so a caller (a benchmark
    configuration, a grid search) can point at the setting to change without reading
    the message.

    Parameters
    ----------
    param : str
        The parameter, as in ``get_params(deep=True)``: ``"max_epochs"``,
        ``"loss__warmup"``.
    message : str
        What is wrong, naming the parameter and the value.

    Examples
    --------
    >>> from nescal_sklearn.exceptions import ParameterError
    >>> error = ParameterError("max_epochs", "max_epochs must be >= 1; got 0.")
    >>> error.param, isinstance(error, ValueError)
    ('max_epochs', True)
    """

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param
