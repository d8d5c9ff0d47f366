"""Exceptions raised by nescal_sklearn."""

from __future__ import annotations

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

__all__ = ["NeSCalError", "NotFittedError", "PenaltyInactiveWarning"]


class NeSCalError(Exception):
    """Base class of every error nescal_sklearn raises on its own account."""


class NotFittedError(NeSCalError, _SklearnNotFittedError):
    """Raised when a fitted attribute is needed before ``fit``.

    Inherits from :class:`sklearn.exceptions.NotFittedError`, so code that catches
    scikit-learn's error catches this one too.
    """


class PenaltyInactiveWarning(UserWarning):
    """``NeSCalClassifier`` returned a model that the smoothing penalty never trained.

    Raised at the end of ``fit`` when a neighbour loss (NeSCal) ends up as plain
    base-loss training: the warm-up never ended, so no graph was built, or early
    stopping restored an epoch from before the graph. The fitted attribute
    ``penalty_status_`` records which (``"no_graph"`` or ``"warmup_checkpoint"``).
    """
