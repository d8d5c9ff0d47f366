"""scikit-learn scorers over the calibration metrics, and a ``get_scorer`` that knows them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.metrics import get_scorer_names as _sklearn_get_scorer_names
from sklearn.metrics import log_loss, make_scorer

from ..metrics import (
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
)

__all__ = [
    "get_scorer",
    "get_scorer_names",
    "neg_classwise_calibration_error",
    "neg_expected_calibration_error",
    "neg_maximum_calibration_error",
]

# The class ``make_scorer`` returns for a ``response_method`` scorer (sklearn's private
# ``_Scorer``); found through the public function rather than imported by name.
_MakeScorerType = type(make_scorer(log_loss, response_method="predict_proba"))


class _ClassAwareProbaScorer(_MakeScorerType):
    """``make_scorer``'s scorer that also passes ``labels=estimator.classes_``.

    A test fold that lacks a class then still lines up with the columns of
    ``predict_proba``.
    """

    def _score(self, method_caller, estimator, X, y_true, **kwargs):
        classes = getattr(estimator, "classes_", None)
        if classes is not None and "labels" not in kwargs and "labels" not in self._kwargs:
            kwargs["labels"] = classes
        return super()._score(method_caller, estimator, X, y_true, **kwargs)


def _make_calibration_scorer(metric: Callable[..., float]) -> Any:
    scorer = make_scorer(metric, greater_is_better=False, response_method="predict_proba")
    scorer.__class__ = _ClassAwareProbaScorer
    scorer.__doc__ = (
        f"Scorer returning minus :func:`nescal_sklearn.metrics.{metric.__name__}` of "
        "``estimator.predict_proba(X)`` (default bins), with ``labels=estimator.classes_``; "
        "call as ``scorer(estimator, X, y, sample_weight=None)``."
    )
    return scorer


#: Minus the top-label ECE (15 uniform bins) of ``predict_proba``; higher is better.
neg_expected_calibration_error = _make_calibration_scorer(expected_calibration_error)
#: Minus the classwise ECE (15 uniform bins) of ``predict_proba``; higher is better.
neg_classwise_calibration_error = _make_calibration_scorer(classwise_calibration_error)
#: Minus the top-label MCE (15 uniform bins) of ``predict_proba``; higher is better.
neg_maximum_calibration_error = _make_calibration_scorer(maximum_calibration_error)

_SCORERS = MappingProxyType(
    {
        "neg_classwise_calibration_error": neg_classwise_calibration_error,
        "neg_expected_calibration_error": neg_expected_calibration_error,
        "neg_maximum_calibration_error": neg_maximum_calibration_error,
    }
)


def get_scorer(scoring: str | Callable | None) -> Callable | None:
    """Get a scorer by name: ours first, then :func:`sklearn.metrics.get_scorer`.

    Parameters
    ----------
    scoring : str, callable or None
        ``"neg_expected_calibration_error"``, ``"neg_classwise_calibration_error"``,
        ``"neg_maximum_calibration_error"`` or any name scikit-learn knows. A
        callable or None is returned unchanged.

    Returns
    -------
    scorer : callable or None
        A copy of the named scorer, usable as ``scoring=`` in ``GridSearchCV``,
        ``cross_validate`` (alone or in a dict) and the like.

    Raises
    ------
    ValueError
        If the name is neither ours nor scikit-learn's.

    See Also
    --------
    get_scorer_names : Every name this function accepts.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import cross_val_score
    >>> from nescal_sklearn.scorers import get_scorer
    >>> X, y = load_iris(return_X_y=True)
    >>> scores = cross_val_score(
    ...     LogisticRegression(max_iter=1000), X, y, cv=3,
    ...     scoring=get_scorer("neg_expected_calibration_error"),
    ... )
    >>> bool(all(scores <= 0))
    True
    >>> get_scorer("accuracy")
    make_scorer(accuracy_score, response_method='predict')
    """
    if isinstance(scoring, str) and scoring in _SCORERS:
        return copy.deepcopy(_SCORERS[scoring])
    try:
        return _sklearn_get_scorer(scoring)
    except ValueError as exc:
        if not isinstance(scoring, str):
            raise
        raise ValueError(
            f"{scoring!r} is not a valid scoring value. Use one of nescal_sklearn's scorers "
            f"{sorted(_SCORERS)} or a name from sklearn.metrics.get_scorer_names()."
        ) from exc


def get_scorer_names() -> list[str]:
    """Names accepted by :func:`get_scorer`: ours and scikit-learn's, sorted.

    Returns
    -------
    names : list of str

    Examples
    --------
    >>> from nescal_sklearn.scorers import get_scorer_names
    >>> "neg_expected_calibration_error" in get_scorer_names()
    True
    >>> "neg_log_loss" in get_scorer_names()
    True
    """
    return sorted(set(_SCORERS) | set(_sklearn_get_scorer_names()))
