"""Refitting a cross-fitted member on all rows, with what its fold models chose.

A cross-fitted ensemble serves ``K`` models per member. :func:`refit_on_all_rows` trains
one model per member instead, on every row, for as long as its fold models trained out
of fold (AutoGluon's ``refit_full``): a ``NeSCalClassifier`` for the mean of its fold
models' best epochs (its warm-up, when the penalty trained the epochs kept, for the mean
of theirs), scikit-learn's gradient boosting for the mean of their iterations, without
early stopping; any other member as it is.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier

from ..estimator import NeSCalClassifier
from ..model_selection import seeded

__all__ = ["refit_on_all_rows", "refit_params"]


def _mean_int(values) -> int:
    return max(1, int(round(float(np.mean(values)))))


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
        For ``set_params``; empty for a member of another kind.
    """
    if isinstance(member, NeSCalClassifier):
        epochs = [m.best_epoch_ or m.n_epochs_ for m in fold_models]
        params = {"early_stopping": False, "max_epochs": _mean_int(epochs), "max_time": None}
        first = fold_models[0]
        if first.loss_.uses_neighbours:
            graphs = [m.graph_epoch_ for m in fold_models]
            penalised = [m.penalty_status_ == "penalised" for m in fold_models]
            if sum(penalised) * 2 > len(fold_models):  # most fold models kept a penalised epoch
                warmup = _mean_int([g - 1 for g, p in zip(graphs, penalised, strict=True) if p])
                loss = clone(first.loss_).set_params(warmup=min(warmup, params["max_epochs"] - 1))
                params["loss"] = loss
            else:  # the epochs kept were the warm-up's: the base loss trained them
                params["loss"] = first.loss_.base()
        return params
    if isinstance(member, HistGradientBoostingClassifier):
        return {"early_stopping": False, "max_iter": _mean_int([m.n_iter_ for m in fold_models])}
    return {}


def refit_on_all_rows(member, fold_models: list, X, y, fit_params: dict, seed, deadline):
    """``member`` refitted on all rows under :func:`refit_params`; ``(model, seconds)``.

    With a ``deadline`` (``time.time()``), a member with a ``max_time`` parameter gets the
    time left to it.
    """
    estimator = seeded(clone(member).set_params(**refit_params(member, fold_models)), seed)
    if deadline is not None and "max_time" in estimator.get_params(deep=False):
        estimator.set_params(max_time=max(deadline - time.time(), 1e-3))
    start = time.perf_counter()
    model = estimator.fit(X, y, **fit_params)
    return model, time.perf_counter() - start
