"""scikit-learn scorers over the calibration metrics, and a ``get_scorer`` that knows them."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import numpy as np
from sklearn import get_config
from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.metrics import get_scorer_names as _sklearn_get_scorer_names
from sklearn.utils.metadata_routing import UNCHANGED, MetadataRequest

from ..metrics import (
    classwise_calibration_error,
    debiased_calibration_error,
    expected_calibration_error,
    local_calibration_error,
    maximum_calibration_error,
    refinement_log_loss,
)

__all__ = [
    "CalibrationScorer",
    "LocalCalibrationScorer",
    "get_scorer",
    "get_scorer_names",
    "neg_classwise_calibration_error",
    "neg_debiased_calibration_error",
    "neg_expected_calibration_error",
    "neg_local_calibration_error",
    "neg_maximum_calibration_error",
    "neg_refinement_log_loss",
]


class CalibrationScorer:
    """Scorer: minus a calibration metric of ``estimator.predict_proba(X)``.

    Calling ``scorer(estimator, X, y_true, sample_weight=None)`` returns
    ``-metric(y_true, estimator.predict_proba(X), labels=estimator.classes_,
    sample_weight=sample_weight, **metric_params)``, so higher is better, as
    scikit-learn's model selection expects. Passing ``labels=estimator.classes_``
    keeps the columns of ``predict_proba`` lined up with the classes when a test fold
    lacks a class. Usable wherever scikit-learn takes a scorer: ``scoring=`` of
    ``GridSearchCV`` or ``cross_validate`` (alone or as a value of a dict of
    scorers), with a ``Pipeline`` as the estimator.

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_proba, *, labels=None, sample_weight=None, **metric_params)``
        returning a float, lower is better, e.g.
        :func:`nescal_sklearn.metrics.expected_calibration_error`.
    **metric_params : dict
        Further keyword arguments of ``metric`` (``n_bins``, ``strategy``, ...).
        ``labels``, if given here, replaces ``estimator.classes_``.

    See Also
    --------
    get_scorer : The ready-made scorers of this module by name.
    sklearn.metrics.make_scorer : scikit-learn's general scorer factory.

    Notes
    -----
    With metadata routing enabled (``sklearn.set_config(enable_metadata_routing=True)``),
    request the sample weights with ``scorer.set_score_request(sample_weight=True)``
    as for scikit-learn's scorers.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import cross_validate
    >>> from nescal_sklearn.metrics import expected_calibration_error
    >>> from nescal_sklearn.scorers import CalibrationScorer
    >>> scorer = CalibrationScorer(expected_calibration_error, n_bins=10)
    >>> scorer
    CalibrationScorer(expected_calibration_error, n_bins=10)
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> by_hand = -expected_calibration_error(y, model.predict_proba(X), n_bins=10)
    >>> bool(scorer(model, X, y) == by_hand)  # exact: the scorer makes this same call
    True
    >>> scores = cross_validate(
    ...     LogisticRegression(max_iter=1000), X, y, cv=3,
    ...     scoring={"ece": scorer, "accuracy": "accuracy"},
    ... )
    >>> bool(all(scores["test_ece"] <= 0))
    True
    """

    def __init__(self, metric: Callable[..., float], **metric_params: Any) -> None:
        self.metric = metric
        self.metric_params = metric_params
        self._sample_weight_request = None  # metadata routing: not requested

    def __call__(self, estimator: Any, X: Any, y_true: Any, sample_weight: Any = None) -> float:
        """Minus ``metric`` of ``estimator.predict_proba(X)`` against ``y_true``.

        Parameters
        ----------
        estimator : fitted classifier
            Needs ``predict_proba``; its ``classes_``, when present, become ``labels``.
        X : array-like of shape (n_samples, n_features)
            Rows to score, in whatever form ``estimator`` accepts.
        y_true : array-like of shape (n_samples,)
            True classes.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each row, passed to ``metric``.

        Returns
        -------
        score : float
            ``-metric(...)``: at most 0 for an error metric, higher is better.
        """
        if not hasattr(estimator, "predict_proba"):
            raise AttributeError(
                f"{self!r} needs an estimator with a predict_proba method; "
                f"got {type(estimator).__name__}, which has none."
            )
        params = self._metric_arguments(estimator, X, sample_weight)
        return -self.metric(y_true, estimator.predict_proba(X), **params)

    def _metric_arguments(self, estimator: Any, X: Any, sample_weight: Any) -> dict[str, Any]:
        """The keyword arguments of ``metric`` for scoring ``estimator`` on ``X``."""
        params = dict(self.metric_params)
        classes = getattr(estimator, "classes_", None)
        if classes is not None:
            params.setdefault("labels", classes)
        if sample_weight is not None:
            params["sample_weight"] = sample_weight
        return params

    def __repr__(self) -> str:
        name = getattr(self.metric, "__name__", None) or repr(self.metric)
        params = "".join(f", {key}={value!r}" for key, value in self.metric_params.items())
        return f"{type(self).__name__}({name}{params})"

    # -- scikit-learn's scorer protocol for sample weights ------------------------------

    def set_score_request(self, *, sample_weight: Any = UNCHANGED) -> CalibrationScorer:
        """Request ``sample_weight`` under metadata routing, as scikit-learn's scorers do.

        Parameters
        ----------
        sample_weight : bool, str or None, default=sklearn.utils.metadata_routing.UNCHANGED
            ``True``: pass the routed ``sample_weight`` on; ``False``: do not; ``None``:
            raise if one is routed (the default); a string: the alias to route.

        Returns
        -------
        self : CalibrationScorer

        Raises
        ------
        RuntimeError
            If metadata routing is not enabled.
        """
        if not get_config()["enable_metadata_routing"]:
            raise RuntimeError(
                "This method is only available when metadata routing is enabled. You can "
                "enable it using sklearn.set_config(enable_metadata_routing=True)."
            )
        if sample_weight is not UNCHANGED:
            self._sample_weight_request = sample_weight
        return self

    def get_metadata_routing(self) -> MetadataRequest:
        """The metadata this scorer requests: ``sample_weight`` as set by `set_score_request`.

        Returns
        -------
        request : sklearn.utils.metadata_routing.MetadataRequest
        """
        request = MetadataRequest(owner=self)
        request.score.add_request(param="sample_weight", alias=self._sample_weight_request)
        return request

    def _accept_sample_weight(self) -> bool:
        # scikit-learn's multi-metric scorer asks every scorer this (without metadata
        # routing) before passing ``sample_weight`` on.
        try:
            return "sample_weight" in inspect.signature(self.metric).parameters
        except (TypeError, ValueError):  # no introspectable signature
            return True


class LocalCalibrationScorer(CalibrationScorer):
    """Scorer: minus a local calibration metric, its neighbourhoods taken in the space of ``X``.

    Like :class:`CalibrationScorer`, with one more argument for ``metric``: the
    scored rows ``X`` themselves, standardised column by column (zero mean, unit
    standard deviation over the scored rows; a constant column is 0), as its
    ``features``. The neighbourhoods are thus measured in the input space, not in
    any model's embedding, so every model of a search is judged on the same
    neighbourhoods of the same rows. ``X`` must be a dense array of numbers (it is
    converted with ``np.asarray(X, dtype=float)``): put the scorer on a pipeline
    whose input is already numeric.

    Parameters
    ----------
    metric : callable, default=local_calibration_error
        ``metric(y_true, y_proba, features, *, labels=None, sample_weight=None,
        **metric_params)`` returning a float, lower is better.
    **metric_params : dict
        Further keyword arguments of ``metric`` (``n_neighbors``, ``n_bins``,
        ``reduction``, ...), except ``features``, which comes from ``X``.

    See Also
    --------
    nescal_sklearn.metrics.local_calibration_error : The default metric.
    CalibrationScorer : The scorer of the metrics that need no features.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import cross_val_score
    >>> from nescal_sklearn.scorers import LocalCalibrationScorer
    >>> scorer = LocalCalibrationScorer(n_neighbors=10, reduction="max")
    >>> scorer
    LocalCalibrationScorer(local_calibration_error, n_neighbors=10, reduction='max')
    >>> X, y = load_iris(return_X_y=True)
    >>> scores = cross_val_score(LogisticRegression(max_iter=1000), X, y, cv=3, scoring=scorer)
    >>> bool(all(scores <= 0))
    True
    """

    def __init__(
        self, metric: Callable[..., float] = local_calibration_error, **metric_params: Any
    ) -> None:
        if "features" in metric_params:
            raise TypeError(
                f"{type(self).__name__} takes the features from the scored rows X; "
                "do not pass features."
            )
        super().__init__(metric, **metric_params)

    def _metric_arguments(self, estimator: Any, X: Any, sample_weight: Any) -> dict[str, Any]:
        params = super()._metric_arguments(estimator, X, sample_weight)
        params["features"] = self._standardised(X)
        return params

    def _standardised(self, X: Any) -> np.ndarray:
        """``X`` as floats, each column at zero mean and unit standard deviation."""
        try:
            rows = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"{self!r} measures the neighbourhoods in the space of the scored rows X, "
                "so X must hold numbers only; it could not be converted to a float array."
            ) from None
        bad = ~np.isfinite(rows)
        if bad.any():
            index = np.argwhere(bad)[0]
            raise ValueError(
                f"{self!r} measures the neighbourhoods in the space of the scored rows X, "
                f"so X must be finite; got {rows[tuple(index)]} in row {index[0]}."
            )
        constant = np.ptp(rows, axis=0) == 0
        spread = np.where(constant, 1.0, rows.std(axis=0))
        return np.where(constant, 0.0, (rows - rows.mean(axis=0)) / spread)


#: Minus the top-label ECE (15 uniform bins) of ``predict_proba``; higher is better.
neg_expected_calibration_error = CalibrationScorer(expected_calibration_error)
#: Minus the classwise ECE (15 uniform bins) of ``predict_proba``; higher is better.
neg_classwise_calibration_error = CalibrationScorer(classwise_calibration_error)
#: Minus the top-label MCE (15 uniform bins) of ``predict_proba``; higher is better.
neg_maximum_calibration_error = CalibrationScorer(maximum_calibration_error)
#: Minus :func:`~nescal_sklearn.metrics.debiased_calibration_error` (top-label debiased L2
#: error, 15 equal-mass bins) of ``predict_proba``; higher is better.
neg_debiased_calibration_error = CalibrationScorer(debiased_calibration_error)
#: Minus :func:`~nescal_sklearn.metrics.refinement_log_loss` (log-loss after the best temperature).
neg_refinement_log_loss = CalibrationScorer(refinement_log_loss)
#: Minus :func:`~nescal_sklearn.metrics.local_calibration_error` (20 neighbours, 15 bins) in the
#: space of the standardised scored rows ``X``; higher is better.
neg_local_calibration_error = LocalCalibrationScorer(local_calibration_error)

_SCORERS = MappingProxyType(
    {
        "neg_classwise_calibration_error": neg_classwise_calibration_error,
        "neg_debiased_calibration_error": neg_debiased_calibration_error,
        "neg_expected_calibration_error": neg_expected_calibration_error,
        "neg_local_calibration_error": neg_local_calibration_error,
        "neg_maximum_calibration_error": neg_maximum_calibration_error,
        "neg_refinement_log_loss": neg_refinement_log_loss,
    }
)


def get_scorer(scoring: str | Callable | None) -> Callable | None:
    """Get a scorer by name: ours first, then :func:`sklearn.metrics.get_scorer`.

    scikit-learn's own ``scoring="..."`` strings only know scikit-learn's names, so
    ``GridSearchCV(..., scoring="neg_expected_calibration_error")`` raises; pass
    ``scoring=get_scorer("neg_expected_calibration_error")`` (or the scorer object)
    instead.

    Parameters
    ----------
    scoring : str, callable or None
        ``"neg_expected_calibration_error"``, ``"neg_classwise_calibration_error"``,
        ``"neg_maximum_calibration_error"``, ``"neg_debiased_calibration_error"``,
        ``"neg_refinement_log_loss"``, ``"neg_local_calibration_error"`` or any name
        scikit-learn knows. A callable or None is returned unchanged.

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
            f"{str(scoring)!r} is not a valid scoring value. Use one of nescal_sklearn's scorers "
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
