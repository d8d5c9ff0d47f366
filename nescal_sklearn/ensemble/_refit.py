"""Refitting a cross-fitted member on all rows, with what its fold models chose.

A cross-fitted ensemble serves ``K`` models per member. :func:`refit_on_all_rows` trains
one model per member instead, on every row, for as long as its fold models trained out
of fold (AutoGluon's ``refit_full``). Each member answers for its own refit: a member
with a ``refit_params(fold_models)`` method (``NeSCalClassifier``) gives the parameters
itself; :data:`REFIT_ADAPTERS` answers for scikit-learn's gradient boosting (the mean of
its fold models' iterations, without early stopping); any other member is refitted as
it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.utils.validation import _num_samples

from ..exceptions import ParameterError
from ..model_selection import seeded
from ._budget import TimeBudget, fit_of
from ._schedule import cores, kept_warnings

__all__ = ["REFIT_ADAPTERS", "refit_on_all_rows", "refit_params"]


def _hgb_refit_params(fold_models: list) -> dict:
    iterations = np.mean([model.n_iter_ for model in fold_models])
    return {"early_stopping": False, "max_iter": max(1, int(round(float(iterations))))}


#: ``refit_params`` for estimators that have no such method: class -> function of the
#: fold models.
REFIT_ADAPTERS: dict[type, Callable[[list], dict]] = {
    HistGradientBoostingClassifier: _hgb_refit_params,
}


def refit_params(member, fold_models: list) -> dict:
    """The parameters under which ``member`` trains on all rows as its fold models did.

    Parameters
    ----------
    member : estimator
        The unfitted member.
    fold_models : list of estimators
        The member fitted on each fold.

    Returns
    -------
    dict
        For ``set_params``: the member's own ``refit_params(fold_models)``, or its
        adapter's in :data:`REFIT_ADAPTERS`; empty for a member of another kind.
    """
    if hasattr(member, "refit_params"):
        return member.refit_params(fold_models)
    for kind, adapter in REFIT_ADAPTERS.items():
        if isinstance(member, kind):
            return adapter(fold_models)
    return {}


def refit_on_all_rows(
    member,
    fold_models: list,
    X,
    y,
    *,
    name: str,
    fit_params: dict,
    seed,
    budget: TimeBudget | None,
    parent: int,
    threads: int | None = None,
):
    """``member`` refitted on all rows under :func:`refit_params`; ``(model, seconds,
    warnings kept in a worker)`` (:func:`~._schedule.kept_warnings`).

    With a ``budget`` (one the model ``needed``: a refit always starts), a member that
    stops on time gets the time left to its deadline (:meth:`TimeBudget.started`). An error of the refit says that it is the refit of
    member ``name`` (:func:`_refit_error`). ``threads`` bounds the refit's
    OpenMP pool (:func:`~._schedule.cores`, :func:`~._schedule.threads_per_fit`).
    """
    estimator = seeded(clone(member).set_params(**refit_params(member, fold_models)), seed)
    with kept_warnings(parent) as kept:
        if budget is not None:
            estimator = budget.started(estimator)
        estimator, fit = fit_of(estimator)
        start = time.perf_counter()
        try:
            with cores(threads):
                model = fit(estimator, X, y, **fit_params)
        except Exception as exc:
            raise _refit_error(exc, name, _num_samples(X)) from exc
    return model, time.perf_counter() - start, kept


def _refit_error(exc: Exception, name: str, n_rows: int) -> Exception:
    """``exc``, raised by the refit of member ``name``, with a message that says so: of
    the same class where one can be made from a message (a :class:`ParameterError`
    names the member's parameter, ``<name>__<param>``), a ``RuntimeError`` otherwise."""
    message = (
        f"refit=True: refitting member {name!r} on all {n_rows} rows failed, after its fold "
        f"models were fitted: {exc}"
    )
    if isinstance(exc, ParameterError):
        return type(exc)(f"{name}__{exc.param}", message)
    try:
        return type(exc)(message)
    except Exception:
        return RuntimeError(message)
