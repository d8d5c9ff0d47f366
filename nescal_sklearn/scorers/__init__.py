"""scikit-learn scorers for calibration (ECE family, debiased CE, refinement log-loss, LCE).

Each is a :class:`CalibrationScorer`: it calls ``estimator.predict_proba`` and returns
minus the metric, passing the fitted estimator's ``classes_`` as ``labels``, so a
cross-validation fold that lacks a class is still scored. Use the objects directly as
``scoring=`` (alone or in a dict of scorers), their names through :func:`get_scorer`,
or build one over another metric or binning with :class:`CalibrationScorer`.
``neg_local_calibration_error`` is a :class:`LocalCalibrationScorer`, which also passes
the scored rows ``X``, standardised, as the feature space of the neighbourhoods.

scikit-learn resolves a ``scoring="..."`` string with its own registry only, so
``GridSearchCV(model, grid, scoring="neg_expected_calibration_error")`` raises
``ValueError``. Two ways work: pass the scorer object, or look its name up with
:func:`get_scorer`::

    GridSearchCV(model, grid, scoring=neg_expected_calibration_error)  # the object
    GridSearchCV(model, grid, scoring=get_scorer("neg_expected_calibration_error"))  # by name

Examples
--------
>>> from sklearn.datasets import load_iris
>>> from sklearn.linear_model import LogisticRegression
>>> from sklearn.model_selection import GridSearchCV
>>> from nescal_sklearn.scorers import neg_expected_calibration_error
>>> X, y = load_iris(return_X_y=True)
>>> search = GridSearchCV(
...     LogisticRegression(max_iter=1000), {"C": [0.1, 1.0]},
...     scoring=neg_expected_calibration_error, cv=3,
... ).fit(X, y)
>>> bool(search.best_score_ <= 0)
True
"""

from ._scorers import (
    CalibrationScorer,
    LocalCalibrationScorer,
    get_scorer,
    get_scorer_names,
    neg_classwise_calibration_error,
    neg_debiased_calibration_error,
    neg_expected_calibration_error,
    neg_local_calibration_error,
    neg_maximum_calibration_error,
    neg_refinement_log_loss,
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
