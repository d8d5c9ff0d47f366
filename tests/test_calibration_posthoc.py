"""Properties every post-hoc calibrator shares, and cross-checks of each against a reference."""

from __future__ import annotations

import itertools
import pickle
import re
import warnings

import numpy as np
import pytest
from _calibration_helpers import (
    ProbaOnlyClassifier,
    ScaledLogitClassifier,
    fitted_and_calibration_split,
    make_data,
    nll,
)
from scipy.optimize import OptimizeResult
from scipy.special import log_softmax, softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from nescal_sklearn.calibration import (
    CalibratedEnsembleTemperature,
    CalibratedHistogramBinning,
    CalibratedIsotonic,
    CalibratedMatrixScaling,
    CalibratedTemperature,
    CalibratedVectorScaling,
)
from nescal_sklearn.calibration import _objective as objective_module
from nescal_sklearn.calibration._maps import MIN_PROBABILITY

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

CALIBRATORS = [
    CalibratedTemperature,
    CalibratedVectorScaling,
    CalibratedMatrixScaling,
    CalibratedIsotonic,
    CalibratedHistogramBinning,
    CalibratedEnsembleTemperature,
]
#: Start at the identity map and never return a worse point: held-in NLL cannot rise.
NLL_GUARANTEED = {
    CalibratedTemperature,
    CalibratedVectorScaling,
    CalibratedMatrixScaling,
    CalibratedEnsembleTemperature,
}
#: Every component ranks classes like the logits: the predicted class cannot change.
ARGMAX_PRESERVING = [CalibratedTemperature, CalibratedEnsembleTemperature]
WITH_DECISION_FUNCTION = {CalibratedTemperature, CalibratedVectorScaling, CalibratedMatrixScaling}


def _ids(classes):
    return [cls.__name__ for cls in classes]


# -- properties shared by every calibrator -----------------------------------------------


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_not_fitted_raises_sklearns_error(calibrator):
    message = (
        f"This {calibrator.__name__} instance is not fitted yet. Call 'fit' with appropriate "
        "arguments before using this estimator."
    )
    methods = ["predict_proba", "predict"]
    if calibrator in WITH_DECISION_FUNCTION:
        methods.append("decision_function")
    for method in methods:
        with pytest.raises(NotFittedError, match=f"^{re.escape(message)}$"):
            getattr(calibrator(), method)(np.zeros((2, 3)))


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_held_in_nll_does_not_rise(calibrator, n_classes, scale):
    model, X_cal, y_cal = fitted_and_calibration_split(
        ScaledLogitClassifier(scale=scale), n_classes=n_classes
    )
    before = nll(y_cal, model.predict_proba(X_cal))
    after = nll(y_cal, calibrator(FrozenEstimator(model)).fit(X_cal, y_cal).predict_proba(X_cal))
    # Isotonic regression and histogram binning fit frequencies, not NLL: no guarantee,
    # only a sanity bound (in practice they lower held-in NLL a lot: they overfit it).
    tolerance = 1e-9 if calibrator in NLL_GUARANTEED else 1e-2
    assert after <= before + tolerance


@pytest.mark.parametrize("calibrator", ARGMAX_PRESERVING, ids=_ids(ARGMAX_PRESERVING))
@pytest.mark.parametrize("n_classes", [2, 3])
def test_argmax_is_preserved(calibrator, n_classes):
    model, X_cal, y_cal = fitted_and_calibration_split(n_classes=n_classes)
    X_new, _ = make_data(n_classes=n_classes, random_state=5)
    frozen = calibrator(FrozenEstimator(model)).fit(X_cal, y_cal)
    # labels: predict is the model's own; the argmax of a monotone map is the same class
    np.testing.assert_array_equal(frozen.predict(X_new), model.predict(X_new))
    np.testing.assert_array_equal(
        np.argmax(frozen.predict_proba(X_new), axis=1), model.predict(X_new)
    )
    X, y = make_data(n_classes=n_classes)
    held_out = calibrator(random_state=0).fit(X, y)
    inner = held_out.calibrated_classifiers_[0].estimator
    # labels, as above
    np.testing.assert_array_equal(held_out.predict(X_new), inner.predict(X_new))
    np.testing.assert_array_equal(
        np.argmax(held_out.predict_proba(X_new), axis=1), inner.predict(X_new)
    )


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
@pytest.mark.parametrize("n_classes", [2, 4])
def test_class_absent_from_calibration_data(calibrator, n_classes):
    model, X_cal, y_cal = fitted_and_calibration_split(n_classes=n_classes)
    keep = y_cal != n_classes - 1
    # Every calibrator keeps the absent class's probability, and says so.
    message = (
        f"{calibrator.__name__}: the calibration rows hold no row of classes "
        f"[{n_classes - 1}] (of {list(range(n_classes))!r}); those classes keep the model's "
        "own probability and the map calibrates the other classes only."
    )
    if n_classes == 2:
        message += (
            " With the single class 0 left, nothing is calibrated: the calibrated "
            "probabilities are the model's own."
        )
    message += " Calibrate on rows of every class to calibrate them all."
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
            fitted = calibrator(FrozenEstimator(model)).fit(X_cal[keep], y_cal[keep])
        proba = fitted.predict_proba(X_cal)
    np.testing.assert_array_equal(fitted.classes_, np.arange(n_classes))
    assert proba.shape == (X_cal.shape[0], n_classes)
    assert np.all(np.isfinite(proba)) and np.all(proba >= 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_single_class_calibration_data(calibrator):
    model, X_cal, y_cal = fitted_and_calibration_split(n_classes=3)
    one_class = y_cal == 0
    # The two absent classes keep the model's probabilities, so the one left keeps its
    # own too: nothing is calibrated, and no calibrator collapses onto class 0.
    message = (
        f"{calibrator.__name__}: the calibration rows hold no row of classes [1, 2] (of "
        "[0, 1, 2]); those classes keep the model's own probability and the map calibrates "
        "the other classes only. With the single class 0 left, nothing is calibrated: the "
        "calibrated probabilities are the model's own. Calibrate on rows of every class to "
        "calibrate them all."
    )
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
        fitted = calibrator(FrozenEstimator(model)).fit(X_cal[one_class], y_cal[one_class])
    np.testing.assert_allclose(fitted.predict_proba(X_cal), model.predict_proba(X_cal))
    # labels: nothing is calibrated, so predict is the model's own
    np.testing.assert_array_equal(fitted.predict(X_cal), model.predict(X_cal))


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_error_empty_input(calibrator):
    message = f"{calibrator.__name__} cannot be fitted on empty input: X and y have 0 rows"
    for estimator in (LogisticRegression(), FrozenEstimator(fitted_and_calibration_split()[0])):
        with pytest.raises(ValueError, match=re.escape(message)):
            calibrator(estimator).fit(np.empty((0, 6)), np.empty(0))


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("cv", [None, 3])
def test_binary_and_multiclass_in_refit_modes(calibrator, n_classes, cv):
    X, y = make_data(n_classes=n_classes, n_samples=150)
    labels = np.array(["ant", "bee", "cow"])[y]
    fitted = calibrator(cv=cv, random_state=0).fit(X, labels)
    proba = fitted.predict_proba(X)
    assert len(fitted.calibrated_classifiers_) == (1 if cv is None else 3)
    assert proba.shape == (X.shape[0], n_classes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(fitted.classes_, np.unique(labels))
    assert set(fitted.predict(X)) <= set(labels)
    assert hasattr(fitted, "decision_function") is (calibrator in WITH_DECISION_FUNCTION)
    if calibrator in WITH_DECISION_FUNCTION:
        scores = fitted.decision_function(X)
        if n_classes == 2:
            scores = np.column_stack([np.zeros_like(scores), scores])
        np.testing.assert_allclose(softmax(scores, axis=1), proba, atol=1e-10)


@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_integer_sample_weight_equals_repetition(calibrator):
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=2.0))
    weights = np.arange(X_cal.shape[0]) % 3  # zero weights included
    # The bootstrap of CalibratedTemperature's default guard draws other rows from a
    # weighted set than from its repetition (same distribution, other draws): unguarded.
    kwargs = {"guard": None} if calibrator is CalibratedTemperature else {}
    weighted = calibrator(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal, sample_weight=weights)
    repeated = calibrator(FrozenEstimator(model), **kwargs).fit(
        np.repeat(X_cal, weights, axis=0), np.repeat(y_cal, weights)
    )
    X_new, _ = make_data(random_state=3)
    # Matrix scaling is ill-conditioned (log-probability features are nearly collinear):
    # L-BFGS stops within ~1e-6 of the optimum, at a point that depends on rounding.
    atol = 1e-5 if calibrator is CalibratedMatrixScaling else 1e-8
    np.testing.assert_allclose(
        weighted.predict_proba(X_new), repeated.predict_proba(X_new), rtol=1e-5, atol=atol
    )


@pytest.mark.determinism
@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=_ids(CALIBRATORS))
def test_pickle_round_trip(calibrator):
    X, y = make_data(n_samples=150)
    fitted = calibrator(random_state=0).fit(X, y)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), fitted.predict(X))


# -- cross-checks against references -----------------------------------------------------


def test_isotonic_matches_sklearn_binary_on_calibration_data():
    model, X_cal, y_cal = fitted_and_calibration_split(n_classes=2)
    ours = CalibratedIsotonic(FrozenEstimator(model)).fit(X_cal, y_cal)
    sk = CalibratedClassifierCV(FrozenEstimator(model), method="isotonic").fit(X_cal, y_cal)
    # scikit-learn interpolates in decision_function space, we in probability space:
    # identical at the calibration points, close in between.
    np.testing.assert_allclose(ours.predict_proba(X_cal), sk.predict_proba(X_cal), atol=1e-12)
    X_new, _ = make_data(n_classes=2, random_state=4)
    np.testing.assert_allclose(ours.predict_proba(X_new), sk.predict_proba(X_new), atol=0.05)


def test_isotonic_matches_sklearn_multiclass_predict_proba():
    model, X_cal, y_cal = fitted_and_calibration_split(ProbaOnlyClassifier(), n_classes=3)
    ours = CalibratedIsotonic(FrozenEstimator(model)).fit(X_cal, y_cal)
    sk = CalibratedClassifierCV(FrozenEstimator(model), method="isotonic").fit(X_cal, y_cal)
    X_new, _ = make_data(random_state=4)
    np.testing.assert_allclose(ours.predict_proba(X_new), sk.predict_proba(X_new), atol=1e-9)


def test_histogram_bins_have_equal_mass_and_observed_frequencies():
    model, X_cal, y_cal = fitted_and_calibration_split(n_classes=2)  # 150 distinct scores
    fitted = CalibratedHistogramBinning(FrozenEstimator(model), n_bins=5).fit(X_cal, y_cal)
    (histogram,) = fitted.calibrated_classifiers_[0].calibrator.regressors_
    score = model.predict_proba(X_cal)[:, 1]
    expected = [chunk.mean() for chunk in np.array_split(y_cal[np.argsort(score)], 5)]
    assert histogram.bin_edges_.size == 4
    np.testing.assert_allclose(histogram.bin_values_, expected)
    # A bin's frequency of 0 (or 1) comes out as MIN_PROBABILITY (or 1 minus it).
    expected = np.clip(expected, MIN_PROBABILITY, 1.0 - MIN_PROBABILITY)
    np.testing.assert_allclose(
        fitted.predict_proba(X_cal)[:, 1], np.repeat(expected, 30)[np.argsort(np.argsort(score))]
    )


def test_histogram_ties_share_a_bin():
    from nescal_sklearn.calibration._histogram import _EqualMassHistogram

    score = np.array([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.3, 0.4, 0.5])
    target = np.array([0, 0, 1, 0, 0, 1, 0, 1, 1, 1], dtype=float)
    histogram = _EqualMassHistogram(n_bins=5).fit(score, target)
    # The six tied scores form one bin (merging the bins they would straddle).
    np.testing.assert_allclose(histogram.bin_values_[0], 2 / 6)
    assert np.all(np.isfinite(histogram.bin_values_))
    np.testing.assert_allclose(histogram.predict(np.array([0.1, 0.5])), [2 / 6, 1.0])


def test_vector_scaling_binary_is_logistic_regression_on_the_score():
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(3.0), n_classes=2)
    ours = CalibratedVectorScaling(FrozenEstimator(model)).fit(X_cal, y_cal)
    score = model.decision_function(X_cal).reshape(-1, 1)
    platt = LogisticRegression(C=np.inf, tol=1e-10).fit(score, y_cal)
    np.testing.assert_allclose(ours.predict_proba(X_cal), platt.predict_proba(score), atol=1e-5)


def test_unregularised_matrix_scaling_is_logistic_regression_on_log_probabilities():
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(2.0))
    ours = CalibratedMatrixScaling(FrozenEstimator(model), reg_lambda=0.0, reg_mu=0.0)
    ours.fit(X_cal, y_cal)
    features = log_softmax(model.decision_function(X_cal), axis=1)
    multinomial = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(features, y_cal)
    np.testing.assert_allclose(
        ours.predict_proba(X_cal), multinomial.predict_proba(features), atol=1e-4
    )


def test_matrix_scaling_regularisation_shrinks_off_diagonal_and_intercept():
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(2.0))

    def fitted_map(reg):
        fitted = CalibratedMatrixScaling(FrozenEstimator(model), reg_lambda=reg, reg_mu=reg)
        return fitted.fit(X_cal, y_cal).calibrated_classifiers_[0].calibrator

    weak, strong = fitted_map(1e-4), fitted_map(10.0)
    off = ~np.eye(3, dtype=bool)
    assert np.abs(strong.coef_[off]).sum() < np.abs(weak.coef_[off]).sum()
    assert np.abs(strong.intercept_).sum() < np.abs(weak.intercept_).sum()


def test_ensemble_temperature_weights_are_the_simplex_optimum():
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(5.0))
    fitted = CalibratedEnsembleTemperature(FrozenEstimator(model)).fit(X_cal, y_cal)
    plain = CalibratedTemperature(FrozenEstimator(model), guard=None).fit(X_cal, y_cal)
    assert fitted.temperature_ == pytest.approx(plain.temperature_)
    assert fitted.weights_.sum() == pytest.approx(1.0) and np.all(fitted.weights_ >= 0)
    # No point of a fine simplex grid does better than the fitted weights.
    calibrator = fitted.calibrated_classifiers_[0].calibrator
    components = calibrator._components(model.decision_function(X_cal))
    grid = np.linspace(0.0, 1.0, 41)
    best_on_grid = min(
        nll(y_cal, np.tensordot([a, b, 1 - a - b], components, axes=1))
        for a, b in itertools.product(grid, grid)
        if a + b <= 1 + 1e-12
    )
    assert nll(y_cal, fitted.predict_proba(X_cal)) <= best_on_grid + 1e-9


# -- parameters and errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("calibrator", "params", "message"),
    [
        (
            CalibratedHistogramBinning,
            {"n_bins": 0},
            "The 'n_bins' parameter of CalibratedHistogramBinning must be an int in the range "
            "[1, inf). Got 0 instead.",
        ),
        (
            CalibratedMatrixScaling,
            {"reg_lambda": -1.0},
            "The 'reg_lambda' parameter of CalibratedMatrixScaling must be a float in the "
            "range [0.0, inf). Got -1.0 instead.",
        ),
        (
            CalibratedMatrixScaling,
            {"reg_mu": "big"},
            "The 'reg_mu' parameter of CalibratedMatrixScaling must be a float in the range "
            "[0.0, inf). Got 'big' instead.",
        ),
    ],
)
def test_error_invalid_parameters(calibrator, params, message):
    X, y = make_data(n_samples=30)
    with pytest.raises(ValueError, match=re.escape(message)):
        calibrator(**params).fit(X, y)


@pytest.mark.parametrize(
    ("calibrator", "what"),
    [(CalibratedVectorScaling, "Vector scaling"), (CalibratedMatrixScaling, "Matrix scaling")],
)
def test_convergence_warning(monkeypatch, calibrator, what):
    def stalled_minimize(fun, x0, **kwargs):
        return OptimizeResult(
            x=x0,
            fun=fun(x0)[0],
            status=1,
            nit=5000,
            message="STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT",
        )

    monkeypatch.setattr(objective_module, "minimize", stalled_minimize)
    model, X_cal, y_cal = fitted_and_calibration_split()
    message = (
        f"{what}: L-BFGS-B stopped after 5000 iterations without converging "
        "(STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT)."
    )
    with pytest.warns(ConvergenceWarning, match=re.escape(message)):
        calibrator(FrozenEstimator(model)).fit(X_cal, y_cal)


# -- scikit-learn's estimator checks -----------------------------------------------------

_SEPARABLE_FOLDS = (
    "the check calibrates on 15 random samples that the estimator separates perfectly, "
    "where the NLL has no finite minimiser (the unpenalised diagonal of W diverges), so "
    "where L-BFGS stops depends on rounding; weights are exact in the objective, see "
    "test_integer_sample_weight_equals_repetition"
)


_KISH_ROWS = (
    "the check calibrates on a few rows, where the map has more parameters (bins) than "
    "rows and is mixed with the model at 1/(n + 1); n counts Kish's effective rows "
    "(sum w)**2 / sum w**2, not repetitions, so that all-equal weights of any scale give "
    "the unweighted map; the map itself is that of the repeated rows, see "
    "test_calibration_weights.py"
)


def _expected_failed_checks(estimator):
    if isinstance(estimator, CalibratedMatrixScaling):
        return {
            "check_sample_weight_equivalence_on_dense_data": _SEPARABLE_FOLDS,
            "check_sample_weight_equivalence_on_sparse_data": _SEPARABLE_FOLDS,
        }
    if isinstance(estimator, CalibratedHistogramBinning):
        return {
            "check_sample_weight_equivalence_on_dense_data": _KISH_ROWS,
            "check_sample_weight_equivalence_on_sparse_data": _KISH_ROWS,
        }
    return {}


@parametrize_with_checks(
    [cls(LogisticRegression()) for cls in CALIBRATORS if cls is not CalibratedTemperature],
    expected_failed_checks=_expected_failed_checks,
)
# The checks fit on random labels: temperatures at the upper bound are expected there.
@pytest.mark.filterwarnings("ignore:The fitted temperature is degenerate:UserWarning")
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
