"""Small and incomplete calibration sets: the rules every calibrator follows.

* a class absent from the calibration rows keeps the model's own probability;
* a map with more parameters than calibration rows is mixed with the model at 1/(n + 1);
* no calibrated probability is exactly 0 or 1 (none below MIN_PROBABILITY).

The cases are those of the reliability review of ed7ab4a (SW4: T057, T071-T074, T079,
T082, T083; T063, T078).
"""

from __future__ import annotations

import pickle
import re
import warnings
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression

from nescal_sklearn.calibration import (
    CalibratedEnsembleTemperature,
    CalibratedHistogramBinning,
    CalibratedIsotonic,
    CalibratedMatrixScaling,
    CalibratedStructuredMatrixScaling,
    CalibratedTemperature,
    CalibratedVectorScaling,
)
from nescal_sklearn.calibration._maps import (
    MIN_PROBABILITY,
    ModelMixture,
    PresentClassesMap,
    floor_probabilities,
)

CALIBRATORS = [
    CalibratedTemperature,
    CalibratedVectorScaling,
    CalibratedMatrixScaling,
    CalibratedStructuredMatrixScaling,
    CalibratedIsotonic,
    CalibratedHistogramBinning,
    CalibratedEnsembleTemperature,
]
LOGIT_OUTPUT = [
    CalibratedTemperature,
    CalibratedVectorScaling,
    CalibratedMatrixScaling,
    CalibratedStructuredMatrixScaling,
]
PARAMETRIC = [
    CalibratedTemperature,
    CalibratedVectorScaling,
    CalibratedMatrixScaling,
    CalibratedStructuredMatrixScaling,
    CalibratedEnsembleTemperature,
]


def _ids(classes):
    return [cls.__name__ for cls in classes]


def _absent_message(name: str, absent: list, classes: list, single=None) -> str:
    message = (
        f"{name}: the calibration rows hold no row of classes {absent!r} (of {classes!r}); "
        "those classes keep the model's own probability and the map calibrates the other "
        "classes only."
    )
    if single is not None:
        message += (
            f" With the single class {single!r} left, nothing is calibrated: the calibrated "
            "probabilities are the model's own."
        )
    return message + " Calibrate on rows of every class to calibrate them all."


def _mixture_message(name: str, n_parameters: int, n_rows: int) -> str:
    weight = 1.0 / (n_rows + 1)
    return (
        f"{name}: the calibration map learned {n_parameters} parameters from {n_rows} "
        "calibration rows, more parameters than rows, so its probabilities are mixed with "
        f"the model's own at weight 1/(n + 1) = {weight:.3g}: no calibrated probability "
        f"falls below {weight:.3g} times the model's. Calibrate on more rows than the map "
        "has parameters to use the map alone."
    )


@cache
def _blobs(n_classes: int):
    """Overlapping Gaussian blobs, a frozen logistic regression fitted on the first third,
    calibration rows and new rows (the review's r4 data for four classes)."""
    rng = np.random.default_rng(0)
    angles = 2 * np.pi * np.arange(n_classes) / n_classes
    centres = 2.5 * np.column_stack([np.cos(angles), np.sin(angles)])
    if n_classes == 4:
        centres = np.array([[0, 0], [3, 0], [0, 3], [3, 3]])
    X = np.vstack([c + rng.normal(size=(150, 2)) for c in centres])
    y = np.repeat(np.arange(n_classes), 150)
    order = rng.permutation(y.size)
    X, y = X[order], y[order]
    third = y.size // 3
    model = LogisticRegression(max_iter=1000).fit(X[:third], y[:third])
    return model, X[third : 2 * third], y[third : 2 * third], X[2 * third :], y[2 * third :]


def _nll(y, proba) -> float:
    return float(-np.mean(np.log(proba[np.arange(y.size), y])))


# -- a class absent from the calibration rows keeps the model's probability ----------------


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_absent_classes_keep_the_models_probability(calibrator, data):
    n_classes = data.draw(st.sampled_from([3, 4, 5]), label="n_classes")
    model, X_cal, y_cal, X_new, _ = _blobs(n_classes)
    absent = data.draw(
        st.lists(
            st.sampled_from(range(n_classes)), min_size=1, max_size=n_classes - 1, unique=True
        ),
        label="absent",
    )
    n_rows = data.draw(st.integers(1, 60), label="n_rows")
    keep = np.flatnonzero(~np.isin(y_cal, absent))[:n_rows]
    present = np.unique(y_cal[keep])
    missing = sorted(set(range(n_classes)) - set(present.tolist()))
    with warnings.catch_warnings():
        # The rule's own warning is tested below; degenerate temperatures or small
        # calibration sets may add theirs.
        warnings.simplefilter("ignore", UserWarning)
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal[keep], y_cal[keep])
    proba, reference = fitted.predict_proba(X_new), model.predict_proba(X_new)
    # The calibrator recomputes the model's probabilities as the softmax of its
    # decision_function, which agrees with LogisticRegression.predict_proba to a few ulp.
    np.testing.assert_allclose(proba[:, missing], reference[:, missing], rtol=1e-12, atol=0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(np.isfinite(proba))
    assert np.all(proba > 0) and np.all(proba < 1)
    np.testing.assert_array_equal(fitted.calibrated_classifiers_[0].absent_classes, missing)


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_calibrating_without_a_class_does_not_erase_it(calibrator):
    # The review's r4 case: calibration rows of classes 0-2 only, for a 4-class model.
    model, X_cal, y_cal, X_new, y_new = _blobs(4)
    without = y_cal != 3
    message = _absent_message(calibrator.__name__, [3], [0, 1, 2, 3])
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$") as caught:
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal[without], y_cal[without])
    assert len(caught) == 1
    raw = model.predict_proba(X_new)
    proba = fitted.predict_proba(X_new)
    np.testing.assert_allclose(proba[:, 3], raw[:, 3], rtol=1e-12)
    # Class 3 is predicted for the rows the model predicts it for (36 of 41 here; none
    # after vector scaling, isotonic regression or histogram binning before the rule).
    class_3 = y_new == 3
    assert np.sum(proba.argmax(axis=1)[class_3] == 3) == np.sum(raw.argmax(axis=1)[class_3] == 3)
    nll_raw, nll_absent = _nll(y_new, raw), _nll(y_new, proba)
    if calibrator in PARAMETRIC:
        # Measured: 0.370 uncalibrated; 0.370 to 0.387 (6.8 to 12.1 before the rule).
        assert nll_absent <= 1.1 * nll_raw
    else:
        # Isotonic regression and histogram binning put probabilities at the floor on
        # this data even with every class present (NLL 1.25 and 1.41): the absent class
        # must not make them worse (measured 0.81 and 0.83; 93.5 before the rule).
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            complete = calibrator(FrozenEstimator(model)).fit(X_cal, y_cal)
        assert nll_absent <= 1.1 * _nll(y_new, complete.predict_proba(X_new))


@pytest.mark.parametrize("calibrator", LOGIT_OUTPUT, ids=_ids(LOGIT_OUTPUT))
def test_decision_function_of_a_partial_calibration_gives_its_probabilities(calibrator):
    model, X_cal, y_cal, X_new, _ = _blobs(4)
    keep = y_cal != 1
    with pytest.warns(UserWarning, match=re.escape("hold no row of classes [1]")):
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal[keep], y_cal[keep])
    assert isinstance(fitted.calibrated_classifiers_[0].calibrator, PresentClassesMap)
    np.testing.assert_allclose(
        softmax(fitted.decision_function(X_new), axis=1), fitted.predict_proba(X_new), atol=1e-12
    )


def test_predict_follows_the_probabilities_when_a_class_is_absent():
    # Temperature scaling of the present classes can move one of them above or below an
    # absent class, so predict is then the argmax of predict_proba, not the model's own.
    model, X_cal, y_cal, X_new, _ = _blobs(4)
    keep = y_cal != 0
    with pytest.warns(UserWarning, match=re.escape("hold no row of classes [0]")):
        fitted = CalibratedTemperature(FrozenEstimator(model), guard=None).fit(
            X_cal[keep], y_cal[keep]
        )
    # labels: with a class absent, predict is the argmax of this same predict_proba
    np.testing.assert_array_equal(
        fitted.predict(X_new), fitted.classes_[fitted.predict_proba(X_new).argmax(axis=1)]
    )


@pytest.mark.parametrize("calibrator", [CalibratedTemperature, CalibratedStructuredMatrixScaling])
def test_temperature_of_a_single_class_is_one(calibrator):
    model, X_cal, y_cal, X_new, _ = _blobs(3)
    message = _absent_message(calibrator.__name__, [0, 1], [0, 1, 2], single=2)
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal[y_cal == 2], y_cal[y_cal == 2])
    assert fitted.temperature_ == 1.0 and fitted.mixture_weight_ == 0.0
    np.testing.assert_allclose(fitted.predict_proba(X_new), model.predict_proba(X_new))


def test_single_class_of_ensemble_temperature_is_the_model():
    model, X_cal, y_cal, X_new, _ = _blobs(3)
    with pytest.warns(UserWarning, match=re.escape("With the single class 1 left")):
        fitted = CalibratedEnsembleTemperature(FrozenEstimator(model)).fit(
            X_cal[y_cal == 1], y_cal[y_cal == 1]
        )
    assert fitted.temperature_ == 1.0
    np.testing.assert_array_equal(fitted.weights_, [1.0, 0.0, 0.0])
    np.testing.assert_allclose(fitted.predict_proba(X_new), model.predict_proba(X_new))


def test_absent_classes_of_cross_fitting_splits_are_named_once():
    _, X, y, _, _ = _blobs(3)
    test_0 = np.flatnonzero(y != 2)[:40]  # no row of class 2
    rest = np.setdiff1d(np.arange(y.size), test_0)  # two parts of every class
    tests = (test_0, rest[::2], rest[1::2])  # a partition, as cross-fitting needs
    splits = [(np.setdiff1d(np.arange(y.size), test), test) for test in tests]
    message = (
        "CalibratedVectorScaling: the calibration rows of the cross-fitting splits hold no "
        "row of classes [2] in split 0 (of [0, 1, 2]); those classes keep the model's own "
        "probability and the map calibrates the other classes only. Calibrate on rows of "
        "every class to calibrate them all."
    )
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$") as caught:
        fitted = CalibratedVectorScaling(LogisticRegression(), cv=splits).fit(X, y)
    assert len(caught) == 1
    first, *others = fitted.calibrated_classifiers_
    np.testing.assert_array_equal(first.absent_classes, [2])
    assert all(pair.absent_classes.size == 0 for pair in others)


@pytest.mark.determinism
@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_a_partial_calibration_survives_pickling(calibrator):
    model, X_cal, y_cal, X_new, _ = _blobs(4)
    keep = np.flatnonzero(y_cal != 2)[:5]  # absent class and, for most maps, too few rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal[keep], y_cal[keep])
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X_new), fitted.predict_proba(X_new))


# -- a map with more parameters than rows is mixed with the model ------------------------


def test_two_rows_do_not_give_probabilities_of_1e_minus_101():
    # T079: matrix scaling of a 4-class model on 2 rows (of classes 1 and 3 here).
    model, X_cal, y_cal, X_new, _ = _blobs(4)
    rows = [int(np.flatnonzero(y_cal == 1)[0]), int(np.flatnonzero(y_cal == 3)[0])]
    with pytest.warns(UserWarning) as caught:
        fitted = CalibratedMatrixScaling(FrozenEstimator(model)).fit(X_cal[rows], y_cal[rows])
    assert [str(w.message) for w in caught] == [
        _absent_message("CalibratedMatrixScaling", [0, 2], [0, 1, 2, 3]),
        _mixture_message("CalibratedMatrixScaling", 6, 2),  # W (2 x 2) and b (2)
    ]
    raw, proba = model.predict_proba(X_new), fitted.predict_proba(X_new)
    # No probability below a third of the model's (1e-101 before): an error costs at most
    # log(3) more than the model's.
    assert np.all(proba >= raw / 3 * (1 - 1e-12))


@pytest.mark.parametrize(
    ("calibrator", "n_rows", "n_parameters"),
    [(CalibratedMatrixScaling, 2, 6), (CalibratedVectorScaling, 3, 6)],
)
def test_a_few_rows_of_a_few_classes_cost_at_most_log_n_plus_one(calibrator, n_rows, n_parameters):
    # T082 (matrix scaling, 2 rows of classes 0-1) and T083 (vector scaling, 3 rows of
    # classes 0-2): test NLL 19.0 and 12.6 before, against 0.37 uncalibrated.
    model, X_cal, y_cal, X_new, y_new = _blobs(4)
    rows = [int(np.flatnonzero(y_cal == k)[0]) for k in range(n_rows)]
    absent = list(range(n_rows, 4))
    with pytest.warns(UserWarning) as caught:
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal[rows], y_cal[rows])
    assert [str(w.message) for w in caught] == [
        _absent_message(calibrator.__name__, absent, [0, 1, 2, 3]),
        _mixture_message(calibrator.__name__, n_parameters, n_rows),
    ]
    raw, proba = model.predict_proba(X_new), fitted.predict_proba(X_new)
    cost = -np.log(proba[np.arange(y_new.size), y_new])
    raw_cost = -np.log(raw[np.arange(y_new.size), y_new])
    assert np.all(cost <= raw_cost + np.log(n_rows + 1) + 1e-9)


def test_mixture_is_the_map_and_the_model_at_one_over_n_plus_one():
    model, X_cal, y_cal, X_new, _ = _blobs(3)
    rows = np.concatenate([np.flatnonzero(y_cal == k)[:3] for k in range(3)])  # 9 rows
    with pytest.warns(
        UserWarning, match=re.escape(_mixture_message("CalibratedMatrixScaling", 12, 9))
    ):
        fitted = CalibratedMatrixScaling(FrozenEstimator(model)).fit(X_cal[rows], y_cal[rows])
    mixture = fitted.calibrated_classifiers_[0].calibrator
    assert isinstance(mixture, ModelMixture)
    assert mixture.model_weight_ == 1 / 10 and mixture.n_parameters_ == 12
    assert mixture.coef_.shape == (3, 3)  # the map's fitted attributes read through
    logits = model.decision_function(X_new)
    expected = 0.9 * mixture.map_.predict_proba(logits) + 0.1 * softmax(logits, axis=1)
    np.testing.assert_allclose(fitted.predict_proba(X_new), expected, rtol=1e-14)
    np.testing.assert_allclose(
        softmax(fitted.decision_function(X_new), axis=1), expected, rtol=1e-12
    )


@pytest.mark.parametrize(
    ("calibrator", "params", "n_parameters"),
    [
        (CalibratedTemperature, {}, 1),
        (CalibratedEnsembleTemperature, {}, 3),
        (CalibratedVectorScaling, {}, 8),
        (CalibratedMatrixScaling, {}, 20),
        (CalibratedStructuredMatrixScaling, {}, 1),
        (CalibratedStructuredMatrixScaling, {"lambda_off_diagonal": 0.0}, 13),
        (CalibratedStructuredMatrixScaling, {"tau": 0.0}, 21),
        (CalibratedHistogramBinning, {"n_bins": 5}, 20),
    ],
)
def test_parameters_that_count_against_the_rows(calibrator, params, n_parameters):
    model, X_cal, y_cal, _, _ = _blobs(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = calibrator(FrozenEstimator(model), **params).fit(X_cal, y_cal)
    assert fitted.calibrated_classifiers_[0].calibrator.n_parameters() == n_parameters


def test_isotonic_counts_the_levels_of_its_step_functions():
    from nescal_sklearn.calibration._isotonic import _IsotonicMap

    # Binary: one regression of P(class 1), whose pooled fit is 0, 1/2, 1/2, 1: 3 levels.
    score = np.array([0.1, 0.2, 0.3, 0.4])
    logits = np.column_stack([np.zeros(4), np.log(score / (1 - score))])
    fitted = _IsotonicMap().fit(logits, np.array([0, 1, 0, 1]))
    np.testing.assert_allclose(fitted.regressors_[0].predict(score), [0, 0.5, 0.5, 1])
    assert fitted.n_parameters() == 3


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_enough_rows_leave_the_map_alone(calibrator):
    # 150 rows of 3 classes: every map has fewer parameters, no rule applies, and the
    # probabilities are the map's own, bit for bit, where none is below the floor.
    model, X_cal, y_cal, X_new, _ = _blobs(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal, y_cal)
    pair = fitted.calibrated_classifiers_[0]
    assert not isinstance(pair.calibrator, (ModelMixture, PresentClassesMap))
    direct = pair.calibrator.predict_proba(pair.logits(X_new))
    above = direct.min(axis=1) >= MIN_PROBABILITY
    if calibrator in PARAMETRIC:
        # Isotonic regression and histogram binning give 0 to some class of most rows.
        assert above.sum() >= 100
    proba = fitted.predict_proba(X_new)
    # exact: rows above the floor are the map's own output, untouched
    np.testing.assert_array_equal(proba[above], direct[above])
    # exact: predict_proba applies this same floor_probabilities to the same rows
    np.testing.assert_array_equal(proba[~above], floor_probabilities(direct[~above]))


# One row of each class, each classified correctly: the temperature of step 1 is degenerate.
@pytest.mark.filterwarnings("ignore:Every calibration row is already classified:UserWarning")
def test_unpenalised_structured_matrix_scaling_on_four_rows():
    # T063: with every lambda 0 the affine step fitted on 4 rows gave exact zeros.
    model, X_cal, y_cal, X_new, _ = _blobs(4)
    rows = [int(np.flatnonzero(y_cal == k)[0]) for k in range(4)]
    zero = {"lambda_intercept": 0.0, "lambda_diagonal": 0.0, "lambda_off_diagonal": 0.0}
    message = _mixture_message("CalibratedStructuredMatrixScaling", 21, 4)
    with pytest.warns(UserWarning, match=re.escape(message)):
        fitted = CalibratedStructuredMatrixScaling(FrozenEstimator(model), **zero)
        fitted.fit(X_cal[rows], y_cal[rows])
    raw, proba = model.predict_proba(X_new), fitted.predict_proba(X_new)
    assert np.all(proba >= raw / 5 * (1 - 1e-12))


def test_histogram_with_more_bins_than_rows():
    # T078: n_bins=10000 on 100 rows gave probabilities of exactly 0 and 1.
    model, X_cal, y_cal, X_new, _ = _blobs(4)
    message = _mixture_message("CalibratedHistogramBinning", 40000, 100)
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
        fitted = CalibratedHistogramBinning(FrozenEstimator(model), n_bins=10000)
        fitted.fit(X_cal[:100], y_cal[:100])
    raw, proba = model.predict_proba(X_new), fitted.predict_proba(X_new)
    assert np.all(proba >= raw / 101 * (1 - 1e-12))
    assert np.all(proba < 1)


def test_weights_count_effective_rows_for_the_mixture():
    # Only the ratios of the weights count: 5 rows of weight 2 are 5 rows (Kish), not 10.
    model, X_cal, y_cal, X_new, _ = _blobs(3)
    rows = np.concatenate([np.flatnonzero(y_cal == k)[:2] for k in range(3)])[:5]
    with pytest.warns(
        UserWarning, match=re.escape(_mixture_message("CalibratedMatrixScaling", 12, 5))
    ):
        weighted = CalibratedMatrixScaling(FrozenEstimator(model)).fit(
            X_cal[rows], y_cal[rows], sample_weight=np.full(5, 2.0)
        )
    with pytest.warns(
        UserWarning, match=re.escape(_mixture_message("CalibratedMatrixScaling", 12, 5))
    ):
        plain = CalibratedMatrixScaling(FrozenEstimator(model)).fit(X_cal[rows], y_cal[rows])
    np.testing.assert_allclose(
        weighted.predict_proba(X_new), plain.predict_proba(X_new), rtol=1e-5, atol=1e-7
    )


# -- no probability is exactly 0 or 1 ------------------------------------------------------


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
@pytest.mark.parametrize("scale", [1.0, 1e3, 1e6])
def test_no_probability_is_exactly_zero_or_one(calibrator, scale):
    # Far-away rows saturate the model's own softmax (exact 0 and 1 from scale 1e3 on);
    # isotonic regression and histogram binning give 0 and 1 for ordinary rows too.
    model, X_cal, y_cal, X_new, _ = _blobs(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal, y_cal)
    proba = fitted.predict_proba(np.vstack([X_new, scale * X_new]))
    assert proba.min() >= MIN_PROBABILITY and proba.max() <= 1 - MIN_PROBABILITY
    assert np.all(proba > 0) and np.all(proba < 1)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_floor_keeps_the_order_and_the_sum():
    proba = np.array([[1.0, 0.0, 0.0], [0.6, 0.4, 1e-20], [0.2, 0.3, 0.5]])
    floored = floor_probabilities(proba)
    np.testing.assert_array_equal(floored[2], proba[2])  # nothing below the floor
    np.testing.assert_array_equal(floored[0, 1:], MIN_PROBABILITY)
    assert floored[0, 0] == 1.0 - 2 * MIN_PROBABILITY
    assert floored[1, 2] == MIN_PROBABILITY
    np.testing.assert_allclose(floored[1, :2], proba[1, :2] * (1 - MIN_PROBABILITY), rtol=1e-15)
    np.testing.assert_allclose(floored.sum(axis=1), 1.0, rtol=0, atol=1e-15)
