"""The cross-fitted ensemble on bad or awkward input: the cases of the reliability review
of 8e13b82 (``reliability-8e13b82.md``, §4) that gave a silently wrong answer, an unclear
error or a raw traceback, each with the correct result or the full text of its error.

Members are quick scikit-learn models (and the recommended model with 5 epochs), on a
few hundred rows.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    PredefinedSplit,
    RepeatedStratifiedKFold,
    ShuffleSplit,
)
from sklearn.naive_bayes import GaussianNB

from nescal_sklearn.calibration import CalibratedTemperature, out_of_fold_logits
from nescal_sklearn.ensemble import CrossFitClassifier


def _data(n=200, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    score = X[:, 0] + 0.5 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


def _members():
    """Two quick members whose fits do not depend on the scale of the weights."""
    return [("nb", GaussianNB()), ("smooth", GaussianNB(var_smoothing=0.5))]


# -- cv that is not a partition (N84-N87, N107) ---------------------------------------------


def _partition_message(cv, n_parts: int, problems: str) -> str:
    return (
        f"cv={cv!r} does not split the rows into a partition: its {n_parts} test parts "
        f"{problems}. Cross-fitting needs every row in exactly one test part, which holds "
        "it out of one fold model and gives it one out-of-fold prediction: use KFold, "
        "StratifiedKFold, GroupKFold or StratifiedGroupKFold, or an int."
    )


NOT_PARTITIONS = [
    (
        ShuffleSplit(5, test_size=0.2, random_state=0),
        5,
        "leave 64 of the 200 rows in no test part and put 52 rows in two or more",
    ),
    (
        RepeatedStratifiedKFold(n_splits=2, n_repeats=2, random_state=0),
        4,
        "put 200 rows in two or more",
    ),
    (
        PredefinedSplit(np.r_[-np.ones(50, int), np.arange(150) % 3]),
        3,
        "leave 50 of the 200 rows in no test part",
    ),
]


@pytest.mark.parametrize(("cv", "n_parts", "problems"), NOT_PARTITIONS)
def test_a_cv_that_is_not_a_partition_is_refused_by_the_ensemble(cv, n_parts, problems):
    X, y = _data()
    message = _partition_message(cv, n_parts, problems)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CrossFitClassifier([("lr", LogisticRegression())], cv=cv).fit(X, y)


@pytest.mark.parametrize(("cv", "n_parts", "problems"), NOT_PARTITIONS)
def test_a_cv_that_is_not_a_partition_is_refused_by_the_calibrators(cv, n_parts, problems):
    X, y = _data()
    message = _partition_message(cv, n_parts, problems)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CalibratedTemperature(LogisticRegression(), cv=cv).fit(X, y)


def test_out_of_fold_logits_never_reads_rows_no_fold_held_out():
    X, y = _data()
    folds = list(ShuffleSplit(3, test_size=0.2, random_state=0).split(X))
    fitted = [[LogisticRegression().fit(X[train], y[train])] for train, _ in folds]
    message = _partition_message(
        None, 3, "leave 97 of the 200 rows in no test part and put 15 rows in two or more"
    )
    message = message.replace("cv=None", "cv")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        out_of_fold_logits(fitted, X, folds, np.array([0, 1]))


# -- the scale of the weights (N54, N123) ----------------------------------------------------


@pytest.mark.parametrize("calibration", ["temperature", "sms", "auto"])
@pytest.mark.parametrize("scale", ["1/n", 1e-3, 7.0])
def test_all_equal_weights_give_the_unweighted_ensemble(calibration, scale):
    # N54, N123: weights 1/n counted as one calibration row (ts-mix at 0.5, another map).
    X, y = _data(300, n_classes=3)
    X_new, _ = _data(1000, n_classes=3, seed=1)
    weights = np.full(300, 1 / 300 if scale == "1/n" else scale)
    plain = CrossFitClassifier(_members(), calibration=calibration, random_state=0).fit(X, y)
    scaled = CrossFitClassifier(_members(), calibration=calibration, random_state=0)
    scaled.fit(X, y, sample_weight=weights)
    assert scaled.calibration_ == plain.calibration_
    assert np.max(np.abs(scaled.predict_proba(X_new) - plain.predict_proba(X_new))) <= 1e-3
    assert np.max(np.abs(scaled.oof_proba_ - plain.oof_proba_)) <= 1e-3
