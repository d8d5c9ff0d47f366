"""Structured matrix scaling: agreement with the authors' probmetrics, and its own properties."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import nescal_sklearn
from nescal_sklearn.calibration import CalibratedStructuredMatrixScaling, CalibratedTemperature
from nescal_sklearn.calibration._maps import MIN_PROBABILITY
from nescal_sklearn.calibration._structured_matrix import structured_penalty_strengths

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


class LogitsAsFeatures(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose decision function is its input: calibrate given logits."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X):
        return np.asarray(X, dtype=np.float64)

    def predict(self, X):
        return self.classes_[np.argmax(X, axis=1)]


def _nll(y, proba):
    return float(-np.mean(np.log(proba[np.arange(y.size), y])))


def _map(clf):
    return clf.calibrated_classifiers_[0].calibrator


# -- agreement with probmetrics' SMSCalibrator (the authors' implementation) --------------

DATASETS = {
    "iris": load_iris,
    "wine": load_wine,
    "digits": load_digits,
    "breast_cancer": load_breast_cancer,
}


def _model(kind):
    if kind == "lr":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    return make_pipeline(StandardScaler(), MLPClassifier((32,), max_iter=300, random_state=0))


def _fit_cal_test(dataset, kind):
    """A model fitted on 40 % of ``dataset``; calibration and test parts of 30 % each."""
    X, y = DATASETS[dataset](return_X_y=True)
    X_fit, X_rest, y_fit, y_rest = train_test_split(X, y, test_size=0.6, stratify=y, random_state=0)
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = _model(kind).fit(X_fit, y_fit)
    return model, X_cal, y_cal, X_test, y_test


@pytest.mark.parametrize(
    "dataset, kind",
    [("iris", "lr"), ("wine", "mlp"), ("digits", "lr"), ("breast_cancer", "lr")],
)
def test_agrees_with_probmetrics(dataset, kind):
    calibrators = pytest.importorskip("probmetrics.calibrators")
    model, X_cal, y_cal, X_test, y_test = _fit_cal_test(dataset, kind)

    ours = CalibratedStructuredMatrixScaling(FrozenEstimator(model)).fit(X_cal, y_cal)
    reference = calibrators.get_calibrator("sms").fit(model.predict_proba(X_cal), y_cal)
    proba_ours = ours.predict_proba(X_test)
    proba_reference = reference.predict_proba(model.predict_proba(X_test))

    nll_ours, nll_reference = _nll(y_test, proba_ours), _nll(y_test, proba_reference)
    # Measured: relative NLL differences below 3e-4, probabilities within 3e-4.
    assert abs(nll_ours - nll_reference) <= 1e-2 * nll_reference
    assert np.max(np.abs(proba_ours - proba_reference)) < 1e-2
    # Step 1 is probmetrics' ts-mix: same temperature (it bisects on log 1/T).
    assert ours.temperature_ == pytest.approx(1.0 / reference.ts_.cal_.invtemp_, rel=1e-4)
    assert ours.mixture_weight_ == pytest.approx(1.0 / (y_cal.size + 1))

    # Our minimum is at least as low as probmetrics' (float32 torchmin BFGS) in our
    # objective, and a stationary point of it.
    fitted = _map(ours)
    logits = ours.calibrated_classifiers_[0].logits(X_cal)
    scaled = fitted._scaled(logits)
    objective = fitted.objective(scaled, y_cal, None)
    k = logits.shape[1]
    ours_params = np.concatenate([fitted.coef_.ravel(), fitted.intercept_])
    reference_w = reference.W_.astype(np.float64)
    reference_params = np.concatenate([reference_w[:, :k].ravel(), reference_w[:, k]])
    value, gradient = objective(ours_params)
    assert value <= objective(reference_params)[0] + 1e-12
    assert np.max(np.abs(gradient)) < 1e-6


# -- the objective, against an independent reference -------------------------------------


def _reference_sms(logits, y, sample_weight, lambdas=(1.0, 1.0, 1.0), rho=1.0, tau=1.0):
    """SMS written from its definition, minimised with finite-difference BFGS."""
    n, k = logits.shape
    weights = np.full(n, 1.0 / n) if sample_weight is None else sample_weight / sample_weight.sum()

    def nll(z):
        return float(weights @ (logsumexp(z, axis=1) - z[np.arange(n), y]))

    log_t = minimize_scalar(lambda s: nll(logits / np.exp(s)), bounds=(-10, 10), method="bounded").x
    # n: the rows, or Kish's effective number of rows (sum w)**2 / sum w**2.
    n_eff = (
        n if sample_weight is None else float(sample_weight.sum() ** 2 / np.sum(sample_weight**2))
    )
    w = 1.0 / (n_eff + 1)
    scaled = np.log((1 - w) * softmax(logits / np.exp(log_t), axis=1) + w / k)
    lam_b = lambdas[0] * k**rho / n_eff**tau
    lam_d = lambdas[1] * k**rho / n_eff**tau
    lam_o = lambdas[2] * (k * (k - 1)) ** rho / n_eff**tau

    def objective(params):
        delta, b = params[: k * k].reshape(k, k), params[k * k :]
        off = delta - np.diag(np.diag(delta))
        return (
            nll(scaled + scaled @ delta.T + b)
            + lam_b * np.sum(b**2)
            + lam_d * np.sum(np.diag(delta) ** 2)
            + lam_o * np.sum(off**2)
        )

    result = minimize(objective, np.zeros(k * (k + 1)), method="BFGS", options={"gtol": 1e-9})
    delta, b = result.x[: k * k].reshape(k, k), result.x[k * k :]
    return np.exp(log_t), np.eye(k) + delta, b, result.fun, objective


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "lambdas, rho, tau", [((1.0, 1.0, 1.0), 1.0, 1.0), ((0.3, 2.0, 0.05), 0.5, 0.5)]
)
def test_matches_independent_minimisation(weighted, lambdas, rho, tau):
    rng = np.random.default_rng(0)
    n, k = 40, 3
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 2.0 * np.eye(k)[y] * rng.uniform(0, 2, (n, 1))
    sample_weight = rng.uniform(0.2, 2.0, n) if weighted else None

    clf = CalibratedStructuredMatrixScaling(
        FrozenEstimator(LogitsAsFeatures().fit(logits, y)),
        lambda_intercept=lambdas[0],
        lambda_diagonal=lambdas[1],
        lambda_off_diagonal=lambdas[2],
        rho=rho,
        tau=tau,
    ).fit(logits, y, sample_weight=sample_weight)
    temperature, coef, intercept, ref_value, ref_objective = _reference_sms(
        logits, y, sample_weight, lambdas, rho, tau
    )
    fitted = _map(clf)
    assert clf.temperature_ == pytest.approx(temperature, rel=1e-6)
    ours = np.concatenate([(fitted.coef_ - np.eye(k)).ravel(), fitted.intercept_])
    assert ref_objective(ours) <= ref_value + 1e-10
    np.testing.assert_allclose(fitted.coef_, coef, atol=1e-4)
    np.testing.assert_allclose(fitted.intercept_, intercept, atol=1e-4)
    # Never worse than the identity (the ts-mix output), where the penalty vanishes.
    assert ref_objective(ours) <= ref_objective(np.zeros(k * (k + 1)))


def test_penalty_strengths():
    lam = structured_penalty_strengths(
        10, 3, lambda_intercept=1.0, lambda_diagonal=2.0, lambda_off_diagonal=3.0, rho=1.0, tau=1.0
    )
    assert lam == pytest.approx((3 / 10, 6 / 10, 3 * 6 / 10))
    lam = structured_penalty_strengths(
        16, 4, lambda_intercept=1.0, lambda_diagonal=1.0, lambda_off_diagonal=1.0, rho=0.5, tau=2.0
    )
    assert lam == pytest.approx((2 / 256, 2 / 256, np.sqrt(12) / 256))


def test_strong_penalty_is_ts_mix():
    model, X_cal, y_cal, X_test, _ = _fit_cal_test("iris", "lr")
    big = 1e9
    sms = CalibratedStructuredMatrixScaling(
        FrozenEstimator(model), lambda_intercept=big, lambda_diagonal=big, lambda_off_diagonal=big
    ).fit(X_cal, y_cal)
    ts_mix = CalibratedTemperature(FrozenEstimator(model), guard="mixture").fit(X_cal, y_cal)
    np.testing.assert_allclose(_map(sms).coef_, np.eye(3), atol=1e-6)
    np.testing.assert_allclose(_map(sms).intercept_, 0.0, atol=1e-6)
    np.testing.assert_allclose(sms.predict_proba(X_test), ts_mix.predict_proba(X_test), atol=1e-6)


# -- the estimator -------------------------------------------------------------------------


def test_attributes_modes_and_exports():
    assert nescal_sklearn.CalibratedStructuredMatrixScaling is CalibratedStructuredMatrixScaling
    assert "CalibratedStructuredMatrixScaling" in nescal_sklearn.__all__
    X, y = load_iris(return_X_y=True)
    clf = CalibratedStructuredMatrixScaling(LogisticRegression(max_iter=1000), random_state=0)
    clf.fit(X, y)
    fitted = _map(clf)
    assert fitted.coef_.shape == (3, 3) and fitted.intercept_.shape == (3,)
    assert clf.temperature_ == fitted.temperature_ > 0
    assert clf.mixture_weight_ == fitted.mixture_weight_ == pytest.approx(1 / (30 + 1))
    np.testing.assert_allclose(softmax(clf.decision_function(X), axis=1), clf.predict_proba(X))

    crossed = CalibratedStructuredMatrixScaling(
        LogisticRegression(max_iter=1000), cv=StratifiedKFold(3)
    ).fit(X, y)
    assert crossed.temperatures_.shape == (3,)
    assert crossed.temperature_ == pytest.approx(crossed.temperatures_.mean())
    np.testing.assert_allclose(crossed.predict_proba(X).sum(axis=1), 1.0)

    X, y = load_breast_cancer(return_X_y=True)
    binary = CalibratedStructuredMatrixScaling(
        make_pipeline(StandardScaler(), LogisticRegression()), random_state=0
    ).fit(X, y)
    scores = binary.decision_function(X[:5])
    proba = binary.predict_proba(X[:5])
    assert scores.shape == (5,)
    np.testing.assert_allclose(scores, np.log(proba[:, 1] / proba[:, 0]))


@pytest.mark.parametrize(
    "name", ["lambda_intercept", "lambda_diagonal", "lambda_off_diagonal", "rho", "tau"]
)
@pytest.mark.parametrize("value, shown", [(-1.0, "-1.0"), ("big", "'big'")])
def test_error_invalid_parameters(name, value, shown):
    X, y = load_iris(return_X_y=True)
    message = (
        f"The '{name}' parameter of CalibratedStructuredMatrixScaling must be a float in the "
        f"range [0.0, inf). Got {shown} instead."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        CalibratedStructuredMatrixScaling(**{name: value}).fit(X, y)


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_separable_calibration_data_keeps_errors_bounded(n_classes):
    # A frozen model that classifies every calibration row correctly: the temperature
    # goes to its lower bound, and only the uniform mixture of step 1 keeps an error on
    # new data from costing hundreds of nats.
    X, y = make_blobs(
        n_samples=500, centers=n_classes, center_box=(-10, 10), random_state=n_classes
    )
    model = LogisticRegression(max_iter=1000).fit(X[:400], y[:400])
    X_cal, y_cal = X[400:], y[400:]
    keep = model.predict(X_cal) == y_cal
    X_cal, y_cal = X_cal[keep], y_cal[keep]
    n = y_cal.size
    with pytest.warns(UserWarning, match="Every calibration row is already classified correctly"):
        sms = CalibratedStructuredMatrixScaling(FrozenEstimator(model)).fit(X_cal, y_cal)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        plain = CalibratedTemperature(FrozenEstimator(model), guard=None).fit(X_cal, y_cal)

    # Every test row labelled with a wrong class: each one is an error.
    X_test, y_wrong = X[:400], (y[:400] + 1) % n_classes
    cost = -np.log(sms.predict_proba(X_test)[np.arange(y_wrong.size), y_wrong])
    cost_plain = -np.log(plain.predict_proba(X_test)[np.arange(y_wrong.size), y_wrong])
    assert np.all(np.isfinite(cost))
    # A hard bound from the fitted map: z' lies in [L, 0]^k with L = log(w / k), so the
    # cost of class y is at most log k + max_j max_{z'} ((C_j - C_y) z' + b_j - b_y).
    fitted = _map(sms)
    low = np.log(fitted.mixture_weight_ / n_classes)
    diff_c = fitted.coef_[:, None, :] - fitted.coef_[None, :, :]
    diff_b = fitted.intercept_[:, None] - fitted.intercept_[None, :]
    bound = np.log(n_classes) + np.max(-low * np.clip(-diff_c, 0, None).sum(axis=2) + diff_b)
    assert cost.max() <= bound
    # Step 2 sharpens a little (diagonal of I + D about 1.05 to 1.1 here): measured worst
    # errors cost 1.1 to 1.25 times the ts-mix cap log(k (n + 1)), against the 34.5 nats of
    # the floor that every calibrated probability has, -log(MIN_PROBABILITY), which plain
    # temperature scaling reaches (without the floor, hundreds of nats).
    assert cost.max() <= 1.5 * np.log(n_classes * (n + 1))
    assert cost_plain.max() == pytest.approx(-np.log(MIN_PROBABILITY))
    assert cost_plain.max() > 5 * cost.max()


# -- scikit-learn's estimator checks -----------------------------------------------------


_KISH_ROWS = (
    "integer weights are not repeated rows here by design: the ts-mix weight 1/(n + 1) "
    "and the penalty strengths count Kish's effective rows (sum w)**2 / sum w**2, so that "
    "all-equal weights of any scale give the unweighted map (test_calibration_weights.py)"
)


@parametrize_with_checks(
    [CalibratedStructuredMatrixScaling(LogisticRegression())],
    expected_failed_checks=lambda estimator: {
        "check_sample_weight_equivalence_on_dense_data": _KISH_ROWS,
        "check_sample_weight_equivalence_on_sparse_data": _KISH_ROWS,
    },
)
# The checks fit on random labels: temperatures at the upper bound are expected there.
@pytest.mark.filterwarnings("ignore:The fitted temperature is degenerate:UserWarning")
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
