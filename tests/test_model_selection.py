"""The fold layer (``nescal_sklearn.model_selection``) that the calibrators' ``cv`` mode and
the cross-fitted ensemble share: the same folds, the same checks before any fit, and the
same rule for which parameter takes the weights.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, check_cv
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from nescal_sklearn.calibration import CalibratedTemperature
from nescal_sklearn.ensemble import CrossFitClassifier
from nescal_sklearn.model_selection import make_folds, seeded, weight_parameter


def _data(n=200, seed=0, flip=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)
    noisy = rng.random(n) < flip
    return X, np.where(noisy, 1 - y, y)


class RecordingClassifier(LogisticRegression):
    """Logistic regression that keeps the rows and weights its ``fit`` received."""

    def fit(self, X, y, sample_weight=None):
        self.seen_X_ = np.asarray(X)
        self.seen_sample_weight_ = sample_weight
        return super().fit(X, y, sample_weight=sample_weight)


def _pipeline():
    return make_pipeline(FunctionTransformer(), RecordingClassifier())


def test_a_pipeline_member_and_a_pipeline_calibrator_get_the_same_weights():
    X, y = _data()
    weights = np.where(np.arange(200) % 2 == 0, 0.5, 1.5)  # mean 1: the ensemble keeps them
    cv = StratifiedKFold(3)
    folds = list(cv.split(X, y))
    ensemble = CrossFitClassifier([("lr", _pipeline())], cv=cv, random_state=0)
    ensemble.fit(X, y, sample_weight=weights)
    calibrator = CalibratedTemperature(_pipeline(), cv=cv).fit(X, y, sample_weight=weights)
    members = [models[0][-1] for models in ensemble.estimators_]
    calibrated = [pair.estimator[-1] for pair in calibrator.calibrated_classifiers_]
    for (train, _), member, inner in zip(folds, members, calibrated, strict=True):
        for model in (member, inner):
            np.testing.assert_array_equal(model.seen_X_, X[train])
            np.testing.assert_array_equal(model.seen_sample_weight_, weights[train])


def test_the_held_out_mode_gives_a_pipeline_the_weights_of_its_training_rows():
    X, y = _data()
    weights = np.where(np.arange(200) % 2 == 0, 0.5, 1.5)
    calibrator = CalibratedTemperature(_pipeline(), random_state=0)
    calibrator.fit(X, y, sample_weight=weights)
    (pair,) = calibrator.calibrated_classifiers_
    seen = pair.estimator[-1]
    rows = [int(np.flatnonzero((X == row).all(axis=1))[0]) for row in seen.seen_X_]
    assert 100 < len(rows) < 200
    np.testing.assert_array_equal(seen.seen_sample_weight_, weights[rows])


def test_weight_parameter_names_the_parameter_that_takes_the_weights():
    assert weight_parameter(LogisticRegression()) == "sample_weight"
    assert weight_parameter(_pipeline()) == "recordingclassifier__sample_weight"
    assert weight_parameter(make_pipeline(FunctionTransformer(), KNeighborsClassifier())) is None
    assert weight_parameter(KNeighborsClassifier()) is None


def test_seeded_sets_every_random_state_nested_ones_too():
    model = make_pipeline(FunctionTransformer(), RandomForestClassifier(random_state=1))
    assert seeded(model, 7) is model
    assert model[-1].random_state == 7
    assert seeded(LogisticRegression(random_state=3), None).random_state == 3


def test_an_int_cv_without_copies_keeps_the_folds_of_check_cv_or_of_the_seed():
    X, y = _data()
    classes = np.array([0, 1])
    plain = make_folds(5, X, y, classes)
    for (train, test), (ref_train, ref_test) in zip(
        plain, check_cv(5, y, classifier=True).split(X, y), strict=True
    ):
        np.testing.assert_array_equal(train, ref_train)
        np.testing.assert_array_equal(test, ref_test)
    shuffled = make_folds(5, X, y, classes, rng=np.random.RandomState(0))
    seed = np.random.RandomState(0).randint(2**31 - 1)
    reference = StratifiedKFold(5, shuffle=True, random_state=seed).split(X, y)
    for (_, test), (_, ref_test) in zip(shuffled, reference, strict=True):
        np.testing.assert_array_equal(test, ref_test)


# -- the calibrators' cv mode keeps copies of a row in one fold ------------------------------


def _copies_per_training_part(calibrator, n_distinct: int) -> set[int]:
    """How often each distinct row is among each fold model's training rows."""
    counts = set()
    for pair in calibrator.calibrated_classifiers_:
        _, seen = np.unique(pair.estimator.seen_X_, axis=0, return_counts=True)
        counts |= set(seen.tolist())
        counts |= {0} if seen.size < n_distinct else set()
    return counts


def test_the_calibrators_cv_keeps_copies_of_a_row_in_one_fold():
    X, y = _data(100)
    doubled_X, doubled_y = np.vstack([X, X]), np.r_[y, y]
    calibrator = CalibratedTemperature(RecordingClassifier(), cv=5, random_state=0)
    calibrator.fit(doubled_X, doubled_y)
    # every distinct row trains a fold model with both of its copies, or not at all
    assert _copies_per_training_part(calibrator, 100) == {0, 2}


def test_the_calibrators_out_of_fold_probabilities_are_held_out_for_copies():
    # A 1-nearest-neighbour model repeats the label of a copy it trained on: with copies
    # in other folds, every out-of-fold prediction would be right (accuracy 1.0 on labels
    # of which 30 % are flipped at random).
    X, y = _data(150, seed=3, flip=0.3)
    doubled_X, doubled_y = np.vstack([X, X]), np.r_[y, y]
    calibrator = CalibratedTemperature(KNeighborsClassifier(1), cv=5, random_state=0)
    # held out, a 1-NN model's probabilities of 0 or 1 are right 55 % of the time
    with pytest.warns(UserWarning, match="^The fitted temperature is degenerate"):
        calibrator.fit(doubled_X, doubled_y)
    oof = np.argmax(calibrator.oof_proba_, axis=1)
    np.testing.assert_array_equal(oof[:150], oof[150:])  # a copy is predicted as its row
    fresh_X, fresh_y = _data(2000, seed=4, flip=0.3)
    fresh = KNeighborsClassifier(1).fit(X, y).score(fresh_X, fresh_y)
    assert abs(np.mean(oof == doubled_y) - fresh) < 0.1  # near fresh rows, far from 1.0


def test_a_few_natural_copies_keep_them_together_without_a_word():
    X, y = _data(300)
    X[1], y[1] = X[0], y[0]  # one pair of copies among 300 rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = CrossFitClassifier([("lr", LogisticRegression())], random_state=0).fit(X, y)
    test = next(test for test in model.folds_ if 0 in test)
    assert 1 in test
