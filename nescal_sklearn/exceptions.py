"""Exceptions raised by nescal_sklearn."""

from __future__ import annotations

from sklearn.exceptions import NotFittedError

__all__ = ["NeSCalError", "NotFittedError", "PenaltyInactiveWarning"]

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
