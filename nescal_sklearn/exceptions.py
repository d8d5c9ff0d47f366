"""Exceptions raised by nescal_sklearn."""

from __future__ import annotations

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

__all__ = ["NeSCalError", "NotFittedError"]


class NeSCalError(Exception):
    """Base class of every error nescal_sklearn raises on its own account."""


class NotFittedError(NeSCalError, _SklearnNotFittedError):
    """Raised when a fitted attribute is needed before ``fit``.

    Inherits from :class:`sklearn.exceptions.NotFittedError`, so code that catches
    scikit-learn's error catches this one too.
    """
