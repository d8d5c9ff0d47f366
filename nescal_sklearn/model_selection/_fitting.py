"""Fitting one estimator on one fold: its weights, its seed and its early-stopping rows.

:func:`fit_on_fold` clones an estimator, seeds it (:func:`seeded`) and fits it on a
fold's training rows, early-stopping on the fold's held-out rows when its ``fit`` takes
them (:func:`takes_validation_rows`). :func:`weight_parameter` is the one rule for which
``fit`` parameter takes the sample weights when scikit-learn's metadata routing is off;
whether a caller warns or raises when there is none is the caller's policy.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
from sklearn.base import clone
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import (
    _check_method_params,
    check_array,
    column_or_1d,
    has_fit_parameter,
)

__all__ = [
    "fit_on_fold",
    "seeded",
    "takes_validation_rows",
    "validated_sample_weight",
    "weight_parameter",
]


def validated_sample_weight(sample_weight, n_samples: int) -> np.ndarray | None:
    """``sample_weight`` as a float64 vector of ``n_samples`` non-negative weights, or None.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,) or None
    n_samples : int

    Returns
    -------
    ndarray of shape (n_samples,) or None

    Raises
    ------
    ValueError
        For a wrong shape, a negative, NaN or infinite weight.
    """
    if sample_weight is None:
        return None
    sample_weight = check_array(
        sample_weight, ensure_2d=False, dtype=np.float64, input_name="sample_weight"
    )
    sample_weight = column_or_1d(sample_weight, input_name="sample_weight")
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight has shape {sample_weight.shape}; expected ({n_samples},), "
            "one weight per sample."
        )
    if np.any(sample_weight < 0):
        raise ValueError("sample_weight has negative values; weights must be non-negative.")
    return sample_weight


def weight_parameter(estimator) -> str | None:
    """The ``fit`` parameter that takes ``estimator``'s sample weights, or None.

    Its own ``sample_weight``, or a ``Pipeline``'s ``<last step>__sample_weight`` when
    the final estimator takes them (without metadata routing, a ``Pipeline`` passes
    ``<step>__<param>`` on to that step).

    Parameters
    ----------
    estimator : estimator instance

    Returns
    -------
    str or None

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from nescal_sklearn.model_selection import weight_parameter
    >>> weight_parameter(make_pipeline(StandardScaler(), LogisticRegression()))
    'logisticregression__sample_weight'
    >>> weight_parameter(KNeighborsClassifier()) is None
    True
    """
    if has_fit_parameter(estimator, "sample_weight"):
        return "sample_weight"
    if isinstance(estimator, Pipeline) and estimator.steps:
        name, last = estimator.steps[-1]
        if last not in (None, "passthrough") and has_fit_parameter(last, "sample_weight"):
            return f"{name}__sample_weight"
    return None


def takes_validation_rows(estimator) -> bool:
    """Whether ``estimator.fit`` early-stops on ``X_val``/``y_val`` it is given.

    True when ``fit`` takes ``X_val`` and ``y_val`` and the estimator's ``early_stopping``
    (if it has one) is not False or ``"auto"`` (scikit-learn's gradient boosting only
    stops early on them with ``early_stopping=True``, or on more than 10,000 rows).

    Parameters
    ----------
    estimator : estimator instance

    Returns
    -------
    bool

    Examples
    --------
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from nescal_sklearn.model_selection import takes_validation_rows
    >>> takes_validation_rows(HistGradientBoostingClassifier(early_stopping=True))
    True
    >>> takes_validation_rows(HistGradientBoostingClassifier())  # early_stopping="auto"
    False
    """
    try:
        accepted = inspect.signature(estimator.fit).parameters
    except (TypeError, ValueError):
        return False
    if "X_val" not in accepted or "y_val" not in accepted:
        return False
    early = estimator.get_params(deep=False).get("early_stopping", True)
    return early is not False and not (isinstance(early, str) and early == "auto")


def seeded(estimator, seed: int | None):
    """``estimator`` with every ``random_state`` parameter (nested ones too) set to ``seed``.

    Parameters
    ----------
    estimator : estimator instance
        Changed in place (``set_params``) and returned.
    seed : int or None
        None leaves the estimator as it is.

    Returns
    -------
    estimator

    Examples
    --------
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from nescal_sklearn.model_selection import seeded
    >>> model = seeded(make_pipeline(RandomForestClassifier()), 7)
    >>> model[-1].random_state
    7
    """
    if seed is None:
        return estimator
    names = [name for name in estimator.get_params() if name.split("__")[-1] == "random_state"]
    return estimator.set_params(**dict.fromkeys(names, seed)) if names else estimator


def fit_on_fold(
    estimator,
    X,
    y: np.ndarray,
    train,
    test,
    *,
    fit_params: dict | None = None,
    seed=None,
    fit: Callable | None = None,
    stop_on_test: bool = True,
):
    """A clone of ``estimator`` fitted on the rows ``train``, early-stopping on ``test``.

    The held-out rows ``test`` go to ``fit`` as ``X_val``/``y_val`` when it early-stops on
    them (:func:`takes_validation_rows`) and ``stop_on_test``, with their
    ``sample_weight`` as ``sample_weight_val`` where ``fit`` takes that.

    Parameters
    ----------
    estimator : estimator instance
        Unfitted; it is cloned.
    X : array-like of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    train, test : ndarray of int
        The fold's training and held-out rows.
    fit_params : dict or None, default=None
        Further ``fit`` parameters, sliced to ``train`` when they have one entry per row.
    seed : int or None, default=None
        Set as every ``random_state`` parameter of the clone (:func:`seeded`).
    fit : callable or None, default=None
        Called as ``fit(clone, X_train, y_train, **kwargs)`` in place of
        ``clone.fit(X_train, y_train, **kwargs)``; it returns the fitted clone.
    stop_on_test : bool, default=True
        False: ``test`` is not given, and an early-stopping clone holds out rows of
        ``train`` of its own (its ``validation_fraction``).

    Returns
    -------
    estimator
        The fitted clone.
    """
    estimator = seeded(clone(estimator), seed)
    fit_params = {} if fit_params is None else fit_params
    kwargs = _check_method_params(X, params=fit_params, indices=train)
    if stop_on_test and takes_validation_rows(estimator):
        kwargs.update(X_val=_safe_indexing(X, test), y_val=y[test])
        weights = fit_params.get("sample_weight")
        if (
            weights is not None
            and "sample_weight_val" in inspect.signature(estimator.fit).parameters
        ):
            kwargs["sample_weight_val"] = _safe_indexing(weights, test)
    fit = type(estimator).fit if fit is None else fit
    return fit(estimator, _safe_indexing(X, train), y[train], **kwargs)
