"""Tests of CalibratedTemperature: agreement with scikit-learn, modes, API contract, errors."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pandas as pd
import pytest
from _calibration_helpers import (
    ProbaOnlyClassifier,
    ScaledLogitClassifier,
    fitted_and_calibration_split,
    make_data,
    nll,
)
from scipy.optimize import OptimizeResult
from scipy.special import softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from nescal_sklearn.calibration import CalibratedTemperature
from nescal_sklearn.calibration._maps import MIN_PROBABILITY
from nescal_sklearn.exceptions import NotFittedError
from nescal_sklearn.metrics import logits as logits_module

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


def _sklearn_inverse_temperature(estimator, X_cal, y_cal) -> float:
    sk = CalibratedClassifierCV(FrozenEstimator(estimator), method="temperature")
    sk.fit(X_cal, y_cal)
    (calibrator,) = sk.calibrated_classifiers_[0].calibrators
    return float(calibrator.beta_)  # scikit-learn stores beta = 1 / T


# -- agreement with scikit-learn's temperature scaling -----------------------------------


def test_temperature_matches_sklearn_multiclass():
    lr, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=3.0))
    ours = CalibratedTemperature(FrozenEstimator(lr), guard=None).fit(X_cal, y_cal)
    reference = 1.0 / _sklearn_inverse_temperature(lr, X_cal, y_cal)
    assert ours.response_method_ == "decision_function"
    assert abs(ours.temperature_ - reference) / reference < 1e-2
    assert abs(ours.temperature_ - reference) / reference < 1e-6  # measured: ~1e-8


def test_temperature_matches_sklearn_binary_decision_function():
    # scikit-learn turns the binary score d into logits (-d, d), we into (0, d), so its
    # fitted inverse temperature is that of the logit 2d: T_ours = 1 / (2 * beta).
    lr, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=3.0), n_classes=2)
    ours = CalibratedTemperature(FrozenEstimator(lr), guard=None).fit(X_cal, y_cal)
    beta = _sklearn_inverse_temperature(lr, X_cal, y_cal)
    reference = 1.0 / (2.0 * beta)
    assert abs(ours.temperature_ - reference) / reference < 1e-2
    assert abs(ours.temperature_ - reference) / reference < 1e-6
    sk = CalibratedClassifierCV(FrozenEstimator(lr), method="temperature").fit(X_cal, y_cal)
    np.testing.assert_allclose(ours.predict_proba(X_cal), sk.predict_proba(X_cal), atol=1e-8)


def test_temperature_matches_sklearn_binary_predict_proba():
    nb, X_cal, y_cal = fitted_and_calibration_split(GaussianNB(), n_classes=2)
    ours = CalibratedTemperature(FrozenEstimator(nb), guard=None).fit(X_cal, y_cal)
    reference = 1.0 / _sklearn_inverse_temperature(nb, X_cal, y_cal)
    assert ours.response_method_ == "predict_proba"
    assert abs(ours.temperature_ - reference) / reference < 1e-2


# -- what temperature scaling must do ----------------------------------------------------


@pytest.mark.parametrize("n_classes", [2, 3])
def test_held_in_nll_does_not_rise(n_classes):
    lr, X_cal, y_cal = fitted_and_calibration_split(n_classes=n_classes)
    before = nll(y_cal, lr.predict_proba(X_cal))
    after = nll(
        y_cal,
        CalibratedTemperature(FrozenEstimator(lr), guard=None)
        .fit(X_cal, y_cal)
        .predict_proba(X_cal),
    )
    assert after <= before + 1e-10


@pytest.mark.parametrize(("scale", "hotter"), [(5.0, True), (0.2, False)])
def test_overconfident_model_gets_temperature_above_one(scale, hotter):
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=scale))
    temperature = CalibratedTemperature(FrozenEstimator(model)).fit(X_cal, y_cal).temperature_
    assert (temperature > 1.0) is hotter


def test_predict_is_the_estimators_own_in_frozen_mode():
    lr, X_cal, y_cal = fitted_and_calibration_split()
    calibrated = CalibratedTemperature(FrozenEstimator(lr)).fit(X_cal, y_cal)
    X, _ = make_data(random_state=1)
    # labels: predict is the wrapped estimator's own (ArgmaxPreservingMixin)
    np.testing.assert_array_equal(calibrated.predict(X), lr.predict(X))
    # labels: a positive temperature keeps each row's order of logits, so its argmax
    np.testing.assert_array_equal(np.argmax(calibrated.predict_proba(X), axis=1), lr.predict(X))


def test_predict_is_the_estimators_own_in_held_out_mode():
    X, y = make_data()
    calibrated = CalibratedTemperature(LogisticRegression(), random_state=0).fit(X, y)
    (pair,) = calibrated.calibrated_classifiers_
    # labels: predict is the wrapped estimator's own (ArgmaxPreservingMixin)
    np.testing.assert_array_equal(calibrated.predict(X), pair.estimator.predict(X))


def test_temperature_one_reproduces_the_estimator():
    lr, X_cal, y_cal = fitted_and_calibration_split()
    calibrated = CalibratedTemperature(FrozenEstimator(lr), guard=None).fit(X_cal, y_cal)
    pair = calibrated.calibrated_classifiers_[0]
    np.testing.assert_allclose(softmax(pair.logits(X_cal), axis=1), lr.predict_proba(X_cal))
    np.testing.assert_allclose(
        calibrated.decision_function(X_cal), lr.decision_function(X_cal) / calibrated.temperature_
    )


# -- the guard: a temperature that never multiplies the NLL on separable rows --------------


def test_mixture_guard_is_ts_mixed_with_uniform_at_one_over_n_plus_one():
    lr, X_cal, y_cal = fitted_and_calibration_split()
    plain = CalibratedTemperature(FrozenEstimator(lr), guard=None).fit(X_cal, y_cal)
    guarded = CalibratedTemperature(FrozenEstimator(lr), guard="mixture").fit(X_cal, y_cal)
    weight = 1.0 / (len(y_cal) + 1)
    # exact: the same solve; the guard only mixes in the uniform afterwards
    assert guarded.temperature_ == plain.temperature_
    assert guarded.mixture_weight_ == pytest.approx(weight, rel=1e-12)
    assert plain.mixture_weight_ == 0.0
    X, _ = make_data(random_state=1)
    expected = (1 - weight) * plain.predict_proba(X) + weight / 3
    np.testing.assert_allclose(guarded.predict_proba(X), expected, rtol=1e-10, atol=1e-15)
    # labels: predict is the wrapped estimator's own (ArgmaxPreservingMixin)
    np.testing.assert_array_equal(guarded.predict(X), lr.predict(X))


def _bootstrap_reference(logits, y, seed, n_bootstrap=100):
    """log T by a grid-free scipy solve on each resample, written out independently."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    def log_t(z, labels):
        def nll_at(s):
            return -log_softmax(z * np.exp(-s), axis=1)[np.arange(len(labels)), labels].mean()

        return minimize_scalar(
            nll_at, bounds=(-10, 10), method="bounded", options={"xatol": 1e-10}
        ).x

    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_bootstrap):
        rows = rng.choice(len(y), size=len(y), replace=True)
        draws.append(log_t(logits[rows], y[rows]))
    fitted = log_t(logits, y)
    spread = np.std(draws, ddof=1)
    return fitted, np.sign(fitted) * max(0.0, abs(fitted) - spread), spread


@pytest.mark.parametrize(("scale", "seed"), [(5.0, 0), (0.3, 7)])
def test_shrinkage_soft_thresholds_log_t_by_its_bootstrap_spread(scale, seed):
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=scale))
    calibrated = CalibratedTemperature(FrozenEstimator(model), random_state=seed)
    calibrated.fit(X_cal, y_cal)
    logits = calibrated.calibrated_classifiers_[0].logits(X_cal)
    fitted, shrunk, spread = _bootstrap_reference(logits, y_cal, seed)
    pair = calibrated.calibrated_classifiers_[0].calibrator
    assert np.log(calibrated.fitted_temperature_) == pytest.approx(fitted, abs=1e-6)
    assert pair.standard_error_ == pytest.approx(spread, rel=1e-4)
    assert np.log(calibrated.temperature_) == pytest.approx(shrunk, abs=1e-4)
    # A clearly miscalibrated model keeps most of its temperature, on the same side of 1.
    assert 0 < abs(np.log(calibrated.temperature_)) < abs(fitted)
    assert (calibrated.temperature_ > 1) == (scale > 1)


@pytest.mark.determinism
def test_shrinkage_is_deterministic_and_seeded_by_random_state():
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=3.0))
    first = CalibratedTemperature(FrozenEstimator(model)).fit(X_cal, y_cal).temperature_
    again = CalibratedTemperature(FrozenEstimator(model)).fit(X_cal, y_cal).temperature_
    seeded = CalibratedTemperature(FrozenEstimator(model), random_state=5).fit(X_cal, y_cal)
    assert first == again  # random_state=None: the bootstrap still uses seed 0
    assert seeded.temperature_ != first and seeded.fitted_temperature_ < first * 10


def _separable_case():
    """A sharp model whose calibration rows are all correct, and test rows with errors."""
    X, y = make_data(n_classes=2, n_samples=600, random_state=3)
    model = ScaledLogitClassifier(scale=2.0).fit(X[:300], y[:300])
    rest_X, rest_y = X[300:], y[300:]
    correct = model.predict(rest_X) == rest_y
    X_cal, y_cal = rest_X[correct][:60], rest_y[correct][:60]
    return model, X_cal, y_cal, rest_X[150:], rest_y[150:]


def test_separable_calibration_rows_do_not_blow_up_the_test_nll():
    model, X_cal, y_cal, X_test, y_test = _separable_case()
    raw = nll(y_test, model.predict_proba(X_test))
    assert (model.predict(X_test) != y_test).mean() > 0.05  # errors on the test rows
    with pytest.warns(UserWarning, match="already classified correctly"):
        plain = CalibratedTemperature(FrozenEstimator(model), guard=None).fit(X_cal, y_cal)
    with pytest.warns(UserWarning, match="already classified correctly"):
        guarded = CalibratedTemperature(FrozenEstimator(model), guard="mixture").fit(X_cal, y_cal)
    with pytest.warns(UserWarning, match="already classified correctly"):
        shrunk = CalibratedTemperature(FrozenEstimator(model)).fit(X_cal, y_cal)
    plain_nll = nll(y_test, plain.predict_proba(X_test))
    guarded_nll = nll(y_test, guarded.predict_proba(X_test))
    # The default shrinkage: resamples of separable rows are separable too, the bootstrap
    # spread of log T is large, and T returns to 1: the uncalibrated model, exactly.
    # exact: the same solve; shrinkage acts on its result
    assert shrunk.fitted_temperature_ == plain.temperature_
    assert shrunk.temperature_ == 1.0
    np.testing.assert_allclose(shrunk.predict_proba(X_test), model.predict_proba(X_test))
    # Unguarded, T goes to its lower bound: one-hot predictions, and every error costs the
    # most that any calibrated probability can, -log(MIN_PROBABILITY) = 34.5 nats (without
    # that floor, up to 372 nats here, and exact zeros).
    assert plain.temperature_ < 1e-3
    errors = plain.predict(X_test) != y_test
    true_class = plain.predict_proba(X_test)[np.arange(y_test.size), y_test]
    np.testing.assert_array_equal(true_class[errors], MIN_PROBABILITY)
    assert plain_nll > 10 * raw  # measured: 0.45 -> 6.9
    # Guarded, an error costs at most log(k (n + 1)).
    bound = np.log(2 * (len(y_cal) + 1))
    errors = (guarded.predict(X_test) != y_test).mean()
    assert guarded_nll <= errors * bound + (1 - errors) * -np.log1p(-1 / (len(y_cal) + 1))
    assert guarded_nll < plain_nll / 5  # measured: 0.97 against 6.9


# -- modes -------------------------------------------------------------------------------


@pytest.mark.determinism
def test_held_out_split_is_stratified_and_reproducible():
    X, y = make_data(n_samples=100)
    first = CalibratedTemperature(validation_fraction=0.3, random_state=0).fit(X, y)
    second = CalibratedTemperature(validation_fraction=0.3, random_state=0).fit(X, y)
    assert first.temperature_ == second.temperature_
    train, test = first._held_out_split(np.unique(y, return_inverse=True)[1])
    assert np.intersect1d(train, test).size == 0 and train.size + test.size == 100
    np.testing.assert_array_equal(np.bincount(y[test]), np.round(0.3 * np.bincount(y)))


def test_held_out_split_keeps_every_class_on_both_sides():
    X, y = make_data(n_samples=60)
    y[:2] = 3  # a class with two samples: one goes to each side
    calibrated = CalibratedTemperature(validation_fraction=0.05, random_state=0).fit(X, y)
    train, test = calibrated._held_out_split(np.unique(y, return_inverse=True)[1])
    assert set(y[train]) == set(y[test]) == {0, 1, 2, 3}


def test_cross_fitting_averages_the_folds():
    X, y = make_data()
    calibrated = CalibratedTemperature(cv=3).fit(X, y)
    assert len(calibrated.calibrated_classifiers_) == 3
    assert calibrated.temperatures_.shape == (3,)
    assert calibrated.temperature_ == pytest.approx(calibrated.temperatures_.mean())
    folds = [pair.predict_proba(X) for pair in calibrated.calibrated_classifiers_]
    np.testing.assert_allclose(calibrated.predict_proba(X), np.mean(folds, axis=0))
    # labels: predict takes the argmax of this same np.mean over the folds
    np.testing.assert_array_equal(
        calibrated.predict(X), calibrated.classes_[np.argmax(np.mean(folds, axis=0), axis=1)]
    )


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("mode", ["held_out", "cv", "frozen"])
def test_softmax_of_decision_function_is_predict_proba(mode, n_classes):
    X, y = make_data(n_classes=n_classes)
    if mode == "frozen":
        calibrated = CalibratedTemperature(FrozenEstimator(LogisticRegression().fit(X, y)))
    else:
        calibrated = CalibratedTemperature(cv=3 if mode == "cv" else None, random_state=0)
    proba = calibrated.fit(X, y).predict_proba(X)
    scores = calibrated.decision_function(X)
    if n_classes == 2:
        assert scores.shape == (X.shape[0],)
        scores = np.column_stack([np.zeros_like(scores), scores])
    np.testing.assert_allclose(softmax(scores, axis=1), proba, atol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_frozen_mode_with_a_class_missing_from_calibration_data():
    lr, X_cal, y_cal = fitted_and_calibration_split()
    keep = y_cal != 2
    calibrated = CalibratedTemperature(FrozenEstimator(lr)).fit(X_cal[keep], y_cal[keep])
    proba = calibrated.predict_proba(X_cal)
    assert proba.shape == (X_cal.shape[0], 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(calibrated.classes_, [0, 1, 2])


def test_proba_only_estimator_is_calibrated_on_log_probabilities():
    X, y = make_data()
    calibrated = CalibratedTemperature(ProbaOnlyClassifier(), random_state=0).fit(X, y)
    assert calibrated.response_method_ == "predict_proba"
    (pair,) = calibrated.calibrated_classifiers_
    np.testing.assert_allclose(pair.logits(X), np.log(pair.estimator.predict_proba(X)))


# -- sample weights ----------------------------------------------------------------------


def test_integer_sample_weight_equals_repetition():
    # The temperature is that of the repeated rows; the mixture counts Kish's effective
    # rows (sum w)**2 / sum w**2, not the repetitions.
    lr, X_cal, y_cal = fitted_and_calibration_split()
    weights = np.arange(X_cal.shape[0]) % 3
    for guard in (None, "mixture"):
        weighted = CalibratedTemperature(FrozenEstimator(lr), guard=guard).fit(
            X_cal, y_cal, sample_weight=weights
        )
        repeated = CalibratedTemperature(FrozenEstimator(lr), guard=guard).fit(
            np.repeat(X_cal, weights, axis=0), np.repeat(y_cal, weights)
        )
        assert weighted.temperature_ == pytest.approx(repeated.temperature_, rel=1e-6)
    n_eff = weights.sum() ** 2 / np.sum(weights**2)
    assert weighted.mixture_weight_ == pytest.approx(1.0 / (n_eff + 1.0), rel=1e-12)
    assert repeated.mixture_weight_ == pytest.approx(1.0 / (weights.sum() + 1.0), rel=1e-12)


@pytest.mark.parametrize("guard", ["shrinkage", "mixture", None])
@pytest.mark.parametrize("scale", ["1/n", 1e-3, 7.0])
def test_all_equal_weights_of_any_scale_are_the_unweighted_temperature(guard, scale):
    # N123: weights 1/n used to count as one row, mixing with the uniform at 0.5.
    lr, X_cal, y_cal = fitted_and_calibration_split()
    weights = np.full(y_cal.size, 1.0 / y_cal.size if scale == "1/n" else scale)
    plain = CalibratedTemperature(FrozenEstimator(lr), guard=guard).fit(X_cal, y_cal)
    weighted = CalibratedTemperature(FrozenEstimator(lr), guard=guard)
    weighted.fit(X_cal, y_cal, sample_weight=weights)
    assert weighted.mixture_weight_ == plain.mixture_weight_
    assert weighted.temperature_ == pytest.approx(plain.temperature_, rel=1e-6)
    assert np.max(np.abs(weighted.predict_proba(X_cal) - plain.predict_proba(X_cal))) <= 1e-6


def test_sample_weight_reaches_the_estimator():
    X, y = make_data()
    weights = np.where(y == 0, 5.0, 1.0)
    weighted = CalibratedTemperature(random_state=0).fit(X, y, sample_weight=weights)
    plain = CalibratedTemperature(random_state=0).fit(X, y)
    (w_pair,), (p_pair,) = weighted.calibrated_classifiers_, plain.calibrated_classifiers_
    assert not np.allclose(w_pair.estimator.coef_, p_pair.estimator.coef_)


def test_sample_weight_warns_when_the_estimator_cannot_take_it():
    X, y = make_data()
    # A Pipeline gets them when its final step takes them; this one's does not.
    calibrated = CalibratedTemperature(make_pipeline(StandardScaler(), KNeighborsClassifier()))
    message = (
        "Pipeline.fit does not accept sample_weight; the weights are used for the calibration only."
    )
    with pytest.warns(UserWarning, match=re.escape(message)):
        calibrated.fit(X, y, sample_weight=np.ones(y.size))


# -- data types and composition ----------------------------------------------------------


def test_string_labels():
    X, y = make_data()
    labels = np.array(["cat", "dog", "emu"], dtype=object)[y]
    calibrated = CalibratedTemperature(random_state=0).fit(X, labels)
    np.testing.assert_array_equal(calibrated.classes_, ["cat", "dog", "emu"])
    assert set(calibrated.predict(X)) <= {"cat", "dog", "emu"}
    frozen = CalibratedTemperature(FrozenEstimator(LogisticRegression().fit(X, labels)))
    assert frozen.fit(X, labels).predict_proba(X).shape == (X.shape[0], 3)


def test_pandas_input():
    X, y = make_data()
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    calibrated = CalibratedTemperature(random_state=0).fit(frame, pd.Series(y))
    np.testing.assert_array_equal(calibrated.feature_names_in_, frame.columns)
    assert calibrated.n_features_in_ == X.shape[1]
    np.testing.assert_allclose(
        calibrated.predict_proba(frame),
        CalibratedTemperature(random_state=0).fit(X, y).predict_proba(X),
    )


def test_as_a_pipeline_step():
    X, y = make_data()
    pipeline = make_pipeline(StandardScaler(), CalibratedTemperature(random_state=0)).fit(X, y)
    scaled = StandardScaler().fit_transform(X)
    alone = CalibratedTemperature(random_state=0).fit(scaled, y)
    np.testing.assert_allclose(pipeline.predict_proba(X), alone.predict_proba(scaled))
    # labels of the same scaled rows: StandardScaler's same arithmetic in both
    np.testing.assert_array_equal(pipeline.predict(X), alone.predict(scaled))


def test_wrapping_a_pipeline():
    X, y = make_data()
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    calibrated = CalibratedTemperature(
        make_pipeline(StandardScaler(), LogisticRegression()), random_state=0
    ).fit(frame, y)
    assert calibrated.response_method_ == "decision_function"
    (pair,) = calibrated.calibrated_classifiers_
    # labels: predict is the wrapped estimator's own (ArgmaxPreservingMixin)
    np.testing.assert_array_equal(calibrated.predict(frame), pair.estimator.predict(frame))
    np.testing.assert_allclose(calibrated.predict_proba(frame).sum(axis=1), 1.0)


def test_grid_search_over_nested_parameters():
    X, y = make_data()
    search = GridSearchCV(
        CalibratedTemperature(LogisticRegression(), random_state=0),
        {"estimator__C": [0.1, 1.0], "validation_fraction": [0.2, 0.3]},
        scoring="neg_log_loss",
        cv=2,
    ).fit(X, y)
    assert set(search.best_params_) == {"estimator__C", "validation_fraction"}


@pytest.mark.determinism
@pytest.mark.parametrize("cv", [None, 3])
def test_pickle_round_trip(cv):
    X, y = make_data()
    calibrated = CalibratedTemperature(cv=cv, random_state=0).fit(X, y)
    restored = pickle.loads(pickle.dumps(calibrated))
    np.testing.assert_array_equal(restored.predict_proba(X), calibrated.predict_proba(X))


# -- errors ------------------------------------------------------------------------------


def test_not_fitted_error_is_sklearns():
    import nescal_sklearn

    assert NotFittedError is SklearnNotFittedError
    assert nescal_sklearn.NotFittedError is SklearnNotFittedError
    message = (
        "This CalibratedTemperature instance is not fitted yet. Call 'fit' with appropriate "
        "arguments before using this estimator."
    )
    for method in ("predict_proba", "predict", "decision_function"):
        with pytest.raises(SklearnNotFittedError, match=f"^{re.escape(message)}$"):
            getattr(CalibratedTemperature(), method)(np.zeros((2, 3)))


def test_error_class_with_a_single_sample():
    X, y = make_data(n_samples=60)
    y[0] = 7
    message = (
        "Class 7 has only 1 sample in y; the held-out split (validation_fraction=0.2) needs "
        "at least 2 samples of every class, one to fit the estimator and one to calibrate "
        "it. Pass more data, cv=None with a FrozenEstimator and calibration data of your "
        "own, or a cv splitter."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedTemperature().fit(X, y)


def test_error_single_class():
    X, _ = make_data(n_samples=20)
    message = (
        "CalibratedTemperature needs at least 2 classes in y to fit its estimator; "
        "got 1 class: ['a']."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedTemperature().fit(X, np.full(20, "a"))


def test_error_cv_with_frozen_estimator():
    lr, X_cal, y_cal = fitted_and_calibration_split()
    message = (
        "cv=3 cannot be used with a FrozenEstimator: a frozen estimator is never refitted, "
        "so all of X, y calibrate it. Pass cv=None."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedTemperature(FrozenEstimator(lr), cv=3).fit(X_cal, y_cal)
    with pytest.raises(ValueError, match=re.escape(message)):  # a plain 3, not np.int64(3)
        CalibratedTemperature(FrozenEstimator(lr), cv=np.int64(3)).fit(X_cal, y_cal)


def test_error_label_unknown_to_frozen_estimator():
    lr, X_cal, y_cal = fitted_and_calibration_split()
    y_cal = y_cal.copy()
    y_cal[0] = 9
    message = "y contains label(s) [9] that the frozen estimator was not fitted on; its classes_ are [0, 1, 2]."
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedTemperature(FrozenEstimator(lr)).fit(X_cal, y_cal)


def test_error_unfitted_frozen_estimator():
    X, y = make_data(n_samples=30)
    message = (
        "The LogisticRegression inside the FrozenEstimator is not fitted; fit it before "
        "freezing it, or pass it unfrozen to let CalibratedTemperature fit it."
    )
    with pytest.raises(SklearnNotFittedError, match=f"^{re.escape(message)}$"):
        CalibratedTemperature(FrozenEstimator(LogisticRegression())).fit(X, y)


def test_error_class_missing_from_a_training_part():
    X, y = make_data(n_samples=90)
    # Three folds that partition the rows: the first holds out every row of class 0.
    zero, other = np.flatnonzero(y == 0), np.flatnonzero(y != 0)
    half, rest = other[::2], other[1::2]
    splits = [(other, zero), (np.r_[zero, rest], half), (np.r_[zero, half], rest)]

    class Unfittable(LogisticRegression):
        def fit(self, X, y, sample_weight=None):
            raise AssertionError("a fold model was fitted")

    message = (
        f"Class 0 has {zero.size} rows in y, and cv (the (train, test) pairs given) holds all "
        f"{zero.size} of its rows out of the training part of fold 0, so that fold's models "
        "would never see class 0: every class needs rows in every fold's training part. "
        "Give each class at least 2 rows (cv=int stratifies the folds, so a class of 2 or "
        "more rows is in every training part), use a cv that keeps rows of every class in "
        "each training part, or drop the class."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):  # before any fit
        CalibratedTemperature(Unfittable(), cv=splits).fit(X, y)


def test_error_response_of_the_wrong_shape():
    X, y = make_data(n_classes=4, n_samples=80)
    message = (
        "SVC gives neither a decision_function of shape (n_samples,) or (n_samples, 4) nor a "
        "predict_proba of shape (n_samples, 4) for its 4 classes; tried ['decision_function']."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedTemperature(SVC(decision_function_shape="ovo")).fit(X, y)


def test_error_solver_failure(monkeypatch):
    def failing_minimize_scalar(*args, **kwargs):
        return OptimizeResult(
            x=0.0, fun=1.0, success=False, message="Maximum number of function calls reached."
        )

    monkeypatch.setattr(logits_module, "minimize_scalar", failing_minimize_scalar)
    lr, X_cal, y_cal = fitted_and_calibration_split()
    message = (
        "Temperature scaling failed to find a temperature: scipy.optimize.minimize_scalar "
        "reports 'Maximum number of function calls reached.'."
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        CalibratedTemperature(FrozenEstimator(lr)).fit(X_cal, y_cal)


@pytest.mark.parametrize(
    ("sample_weight", "message"),
    [
        (-np.ones(150), "sample_weight has negative values; weights must be non-negative."),
        (np.ones(149), "sample_weight has shape (149,); expected (150,), one weight per sample."),
        (
            np.zeros(150),
            "sample_weight sums to zero on the calibration part; at least one calibration "
            "sample needs a positive weight.",
        ),
    ],
)
def test_error_bad_sample_weight(sample_weight, message):
    lr, X_cal, y_cal = fitted_and_calibration_split()
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedTemperature(FrozenEstimator(lr)).fit(X_cal, y_cal, sample_weight=sample_weight)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"validation_fraction": 1.5},
            "The 'validation_fraction' parameter of CalibratedTemperature must be a float in "
            "the range (0.0, 1.0). Got 1.5 instead.",
        ),
        (
            {"cv": 1},
            "The 'cv' parameter of CalibratedTemperature must be an int in the range "
            "[2, inf), an object implementing 'split' and 'get_n_splits', an iterable or "
            "None. Got 1 instead.",
        ),
        (
            {"estimator": StandardScaler()},
            "The 'estimator' parameter of CalibratedTemperature must be an object implementing "
            "'fit' and 'predict_proba', an object implementing 'fit' and 'decision_function' "
            "or None. Got StandardScaler() instead.",
        ),
    ],
)
def test_error_invalid_parameters(params, message):
    X, y = make_data(n_samples=30)
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedTemperature(**params).fit(X, y)


# -- scikit-learn's estimator checks -----------------------------------------------------


@parametrize_with_checks(
    [
        CalibratedTemperature(LogisticRegression()),
        CalibratedTemperature(LogisticRegression(), cv=StratifiedKFold(3)),
    ]
)
# The checks fit on random labels: temperatures at the upper bound are expected there.
@pytest.mark.filterwarnings("ignore:The fitted temperature is degenerate:UserWarning")
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_perfectly_separated_calibration_data_warns():
    import re
    import warnings as _warnings

    from nescal_sklearn.calibration._temperature import fit_temperature

    logits = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 0.0]])
    with pytest.warns(
        UserWarning,
        match=re.escape(
            "Every calibration row is already classified correctly, so the NLL keeps "
            "falling as the temperature goes to 0"
        ),
    ):
        temperature = fit_temperature(logits, np.array([0, 1, 0]))
    assert temperature < 0.05  # the degenerate optimum the warning is about
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")
        fit_temperature(logits, np.array([0, 1, 1]))  # one error: an interior optimum


def _upper_bound_message(n_classes: int, reason: str) -> str:
    return (
        "The fitted temperature is degenerate (at the upper bound of the search, "
        "T = 2.2e+04): the NLL keeps falling as the temperature grows, so the "
        f"temperature-scaled predictions are almost uniform (1/{n_classes} for every "
        f"class). {reason}. Calibrate on more rows with every class represented "
        "(validation_fraction, cv, or more calibration data for a FrozenEstimator), or "
        "check that the estimator suits the calibration data."
    )


@pytest.mark.parametrize(
    ("logits", "y", "reason"),
    [
        (
            [[2.0, 0.0, 1.0]],
            [1],
            "There is a single calibration row, and one row cannot calibrate a temperature",
        ),
        (
            [[2.0, 0.0, 1.0], [1.0, 0.5, 3.0], [0.0, -1.0, 2.0]],
            [1, 1, 1],
            "Every calibration row has the same class, and a temperature fitted on one "
            "class says nothing about the others",
        ),
        (
            [[2.0, 0.0, 1.0], [0.0, 3.0, 1.0], [1.0, 2.0, 0.0]],
            [1, 2, 2],
            "On the calibration rows the estimator's logits do no better than a uniform prediction",
        ),
    ],
    ids=["one-row", "one-class", "worse-than-uniform"],
)
def test_temperature_at_the_upper_bound_warns(logits, y, reason):
    from nescal_sklearn.calibration._temperature import fit_temperature

    message = _upper_bound_message(3, reason)
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
        temperature = fit_temperature(np.array(logits), np.array(y))
    assert temperature > 2e4  # the degenerate optimum the warning is about


def test_frozen_estimator_on_a_row_it_gets_wrong_keeps_the_model():
    lr, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=3.0))
    logits = lr.decision_function(X_cal)
    # A row whose true class gets less than the mean logit: fitted on it alone, T would go
    # to its upper bound (uniform predictions). One row holds one class, and the other
    # classes keep the model's probabilities, so nothing is calibrated, with any guard.
    row = int(np.flatnonzero(logits[np.arange(y_cal.size), y_cal] < logits.mean(axis=1))[0])
    label = int(y_cal[row])
    absent = [c for c in range(3) if c != label]
    message = (
        f"CalibratedTemperature: the calibration rows hold no row of classes {absent!r} (of "
        "[0, 1, 2]); those classes keep the model's own probability and the map calibrates "
        f"the other classes only. With the single class {label} left, nothing is calibrated: "
        "the calibrated probabilities are the model's own. Calibrate on rows of every class "
        "to calibrate them all."
    )
    for guard in (None, "shrinkage", "mixture"):
        with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
            calibrated = CalibratedTemperature(FrozenEstimator(lr), guard=guard).fit(
                X_cal[row : row + 1], y_cal[row : row + 1]
            )
        assert calibrated.temperature_ == 1.0
        np.testing.assert_allclose(calibrated.predict_proba(X_cal), lr.predict_proba(X_cal))


def test_no_bound_warning_and_same_temperature_on_ordinary_data():
    import warnings as _warnings

    lr, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=3.0))
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")
        calibrated = CalibratedTemperature(FrozenEstimator(lr), guard=None).fit(X_cal, y_cal)
        temperature = calibrated.temperature_
    reference = 1.0 / _sklearn_inverse_temperature(lr, X_cal, y_cal)
    assert abs(temperature - reference) / reference < 1e-6


def test_error_empty_input():
    message = (
        "CalibratedTemperature cannot be fitted on empty input: X and y have 0 rows (samples)."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CalibratedTemperature(LogisticRegression()).fit(np.empty((0, 4)), np.empty(0))
