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

from nescal_sklearn.calibration import CalibratedTemperature, out_of_fold_logits
from nescal_sklearn.ensemble import CrossFitClassifier


def _data(n=200, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    score = X[:, 0] + 0.5 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


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
