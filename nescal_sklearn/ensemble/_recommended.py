"""``make_recommended_classifier``: cross-fitted NeSCal networks and gradient boosting,
calibrated out of fold."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.pipeline import Pipeline

from ..estimator import NeSCalClassifier
from ..preprocessing import make_tabular_preprocessor
from ._crossfit import CrossFitClassifier

__all__ = ["RECOMMENDED", "make_recommended_classifier"]

#: What the recommended model is, as measured by the out-of-fold study
#: (``docs/oof_ensembles.md``): the NeSCal members' recipe and settings, and the number
#: of folds.
RECOMMENDED: Mapping[str, Any] = MappingProxyType(
    {
        "recipe": "2026-12-04",
        "member_params": MappingProxyType({"patience": 10}),
        "folds": 5,
    }
)


def make_recommended_classifier(
    random_state: int | None = None, n_jobs: int | None = None
) -> Pipeline:
    """The package's recommended model: cross-fitted networks calibrated out of fold.

    Every training row trains and every row calibrates. The returned (unfitted)
    scikit-learn pipeline preprocesses a raw table (numeric and categorical columns,
    missing values: :func:`~nescal_sklearn.make_tabular_preprocessor`), then fits a
    :class:`~nescal_sklearn.ensemble.CrossFitClassifier`: ``NeSCalClassifier`` members
    and ``HistGradientBoostingClassifier(early_stopping=True)`` members cross-fitted on 5 folds, each early-stopping on the fold
    it did not train on, weighted by greedy ensemble selection on their out-of-fold
    predictions, and calibrated by one map chosen out of fold among none, temperature
    scaling, quadratic scaling (binary) and structured matrix scaling (multiclass).
    ``docs/oof_ensembles.md`` gives the study that chose these settings and what it
    measured against gradient boosting, LightGBM and RealMLP.

    ``fit`` takes a pandas DataFrame, a NumPy array or a list of rows (see
    :func:`~nescal_sklearn.make_tabular_preprocessor`); weights and groups go to the
    classifier step: ``fit(X, y, classifier__sample_weight=w, classifier__groups=g)``
    (rows of one group, and exact duplicate rows, stay in one fold: see
    :class:`~nescal_sklearn.ensemble.CrossFitClassifier`).

    Parameters
    ----------
    random_state : int or None, default=None
        Seeds the folds, the members and the map's selection: an int gives identical
        fits (at the same thread count).
    n_jobs : int or None, default=None
        Member fits in parallel (joblib; each member trains on one thread). With
        ``n_jobs=2`` on two cores the fit takes about half the serial time.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``"preprocess"`` and ``"classifier"`` (the ``CrossFitClassifier``); after
        ``fit``, ``[-1].oof_proba_`` holds every training row's out-of-fold calibrated
        probabilities, ``[-1].weights_`` the members' weights and ``[-1].calibration_``
        the map chosen.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.datasets import load_breast_cancer
    >>> from nescal_sklearn.ensemble import make_recommended_classifier
    >>> X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    >>> model = make_recommended_classifier(random_state=0)
    >>> _ = model.set_params(  # a quick example: 5 epochs, the penalty from the third
    ...     classifier__nescal__max_epochs=5, classifier__nescal__loss__warmup=2
    ... )
    >>> model.fit(X, y).predict_proba(X.iloc[:2]).shape
    (2, 2)
    """
    members = [
        (
            "nescal",
            NeSCalClassifier(recipe=RECOMMENDED["recipe"], **RECOMMENDED["member_params"]),
        ),
        ("hgb", HistGradientBoostingClassifier(early_stopping=True)),
    ]
    return Pipeline(
        [
            ("preprocess", make_tabular_preprocessor()),
            (
                "classifier",
                CrossFitClassifier(
                    members,
                    cv=RECOMMENDED["folds"],
                    calibration="auto",
                    n_jobs=n_jobs,
                    random_state=random_state,
                ),
            ),
        ]
    )
