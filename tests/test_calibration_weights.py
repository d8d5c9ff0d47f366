"""Sample weights through every post-hoc calibrator, with and without metadata routing.

Only the ratios of the weights matter: all-equal weights of any scale must fit the
unweighted map, zero weights that of the data without those rows, and integer weights the
map of the repeated rows wherever the map does not count its rows; where it does (the
guards of temperature scaling, structured matrix scaling), it counts Kish's effective
number of rows ``(sum w)**2 / sum w**2``, never the sum of the weights. They
reach the wrapped estimator's ``fit`` (routing disabled: when it accepts them; enabled:
as it requested), and through ``Pipeline`` and ``GridSearchCV`` when routing is enabled.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import sklearn
from _calibration_helpers import (
    ProbaOnlyClassifier,
    ScaledLogitClassifier,
    fitted_and_calibration_split,
    make_data,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import expit
from sklearn.calibration import CalibratedClassifierCV
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, GroupKFold, StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nescal_sklearn.calibration import (
    CalibratedEnsembleTemperature,
    CalibratedHistogramBinning,
    CalibratedIsotonic,
    CalibratedMatrixScaling,
    CalibratedStructuredMatrixScaling,
    CalibratedTemperature,
    CalibratedVectorScaling,
)
from nescal_sklearn.calibration import _temperature as temperature_module
from nescal_sklearn.calibration._maps import ModelMixture
from nescal_sklearn.calibration._temperature import bootstrap_resample

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

CALIBRATORS = [
    CalibratedTemperature,
    CalibratedVectorScaling,
    CalibratedMatrixScaling,
    CalibratedStructuredMatrixScaling,
    CalibratedIsotonic,
    CalibratedHistogramBinning,
    CalibratedEnsembleTemperature,
]
#: Every calibrator with its defaults, and temperature scaling with each guard.
CASES = [(cls, {}) for cls in CALIBRATORS] + [
    (CalibratedTemperature, {"guard": None}),
    (CalibratedTemperature, {"guard": "mixture"}),
]
CASE_IDS = [cls.__name__ + "".join(f"-{k}={v}" for k, v in kw.items()) for cls, kw in CASES]
#: The maps that count their calibration rows (the mixture weight 1/(n + 1), SMS's
#: penalty strengths, the bootstrap of the shrinkage guard): Kish's n, not repetitions.
COUNTING = [
    (CalibratedTemperature, {}),
    (CalibratedTemperature, {"guard": "mixture"}),
    (CalibratedStructuredMatrixScaling, {}),
]
SCALE_FREE = [case for case in CASES if case not in COUNTING]
SCALE_FREE_IDS = [CASE_IDS[CASES.index(case)] for case in SCALE_FREE]
COUNTING_IDS = [CASE_IDS[CASES.index(case)] for case in COUNTING]
CALIBRATOR_IDS = [cls.__name__ for cls in CALIBRATORS]


class RecordingClassifier(LogisticRegression):
    """Logistic regression that keeps the rows, weights and ``tag`` its ``fit`` received."""

    def fit(self, X, y, sample_weight=None, tag=None):
        self.seen_X_ = np.asarray(X)
        self.seen_sample_weight_ = sample_weight
        self.seen_tag_ = tag
        return super().fit(X, y, sample_weight=sample_weight)


def _map_parameters(calibrated) -> np.ndarray:
    """Every fitted parameter of the (single) calibration map, flattened."""
    (pair,) = calibrated.calibrated_classifiers_
    cal = pair.calibrator
    names = [
        "temperature_",
        "fitted_temperature_",
        "mixture_weight_",
        "standard_error_",
        "scale_",
        "bias_",
        "coef_",
        "intercept_",
        "weights_",
    ]
    values = [
        np.ravel(getattr(cal, name)) for name in names if getattr(cal, name, None) is not None
    ]
    for regressor in getattr(cal, "regressors_", []):
        for name in ("X_thresholds_", "y_thresholds_", "bin_edges_", "bin_values_"):
            if hasattr(regressor, name):
                values.append(np.ravel(getattr(regressor, name)))
    assert values, f"no map parameters found on {type(cal).__name__}"
    return np.concatenate(values)


def _unguarded(cls) -> dict:
    """Keyword arguments that skip the shrinkage guard's 100 bootstrap refits, where the test
    is about the wrapped estimator or routing (the guard's weights are tested above)."""
    return {"guard": None} if cls is CalibratedTemperature else {}


def _row_indices(X_all: np.ndarray, X_part: np.ndarray) -> np.ndarray:
    """Indices in ``X_all`` of the rows of ``X_part`` (rows of ``X_all`` are distinct)."""
    lookup = {row.tobytes(): i for i, row in enumerate(np.asarray(X_all))}
    return np.array([lookup[row.tobytes()] for row in np.asarray(X_part)])


def _frozen_case():
    """A miscalibrated (over-confident) frozen model, its calibration rows and new rows."""
    model, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=2.0))
    X_new, _ = make_data(random_state=3)
    return model, X_cal, y_cal, X_new


#: Two code paths (weighted sums against repeated rows) round differently in float64
#: (~1e-15 relative); the solvers then stop within their own tolerance of the same
#: optimum (bounded Brent on the log-temperature; L-BFGS at gtol=1e-8): over five
#: OpenBLAS kernels the well-conditioned maps agreed within a fifth of this.
SAME_MAP_TOLERANCE = {"rtol": 1e-6, "atol": 1e-8}
#: Structured matrix scaling's regularised objective is flatter (smallest curvature
#: ~1e-3 here), so L-BFGS's gtol=1e-8 pins its parameters to ~1e-5 only: measured up to
#: 0.8 of SAME_MAP_TOLERANCE (1.1e-6 relative) on OpenBLAS's Haswell kernel.
MAP_TOLERANCE = {CalibratedStructuredMatrixScaling: {"rtol": 1e-5, "atol": 1e-7}}


def _calibration_nll(calibrated, X, y, weights=None) -> float:
    """The map's objective at its optimum: the (weighted) NLL of the calibration rows."""
    proba = calibrated.predict_proba(X)[np.arange(y.size), y]
    return float(np.average(-np.log(proba), weights=weights))


def _assert_same_map(fitted, reference, X_cal, y_cal, weights, X_new) -> None:
    """``fitted`` (on weights) and ``reference`` (on the rows the weights stand for) are
    the same calibration map, as far as float64 and the map's solver can tell."""
    if type(fitted) is CalibratedMatrixScaling:
        # Matrix scaling is not identifiable to solver precision: its log-probability
        # inputs are nearly collinear, so L-BFGS (gtol=1e-8) stops anywhere along a
        # direction of curvature ~1e-5, and its parameters and probabilities move by
        # ~1e-4 relative from one BLAS kernel to the next. What is determined is the
        # objective at the optimum (measured to 2e-8 relative over five OpenBLAS
        # kernels) and the predicted classes.
        assert _calibration_nll(fitted, X_cal, y_cal, weights) == pytest.approx(
            _calibration_nll(reference, X_cal, y_cal, weights), rel=1e-6
        )
        np.testing.assert_array_equal(fitted.predict(X_new), reference.predict(X_new))
        return
    tol = MAP_TOLERANCE.get(type(fitted), SAME_MAP_TOLERANCE)
    np.testing.assert_allclose(_map_parameters(fitted), _map_parameters(reference), **tol)
    np.testing.assert_allclose(fitted.predict_proba(X_new), reference.predict_proba(X_new), **tol)


# -- the calibration map: ones, integers, zeros -------------------------------------------


@pytest.mark.parametrize(("cls", "kwargs"), CASES, ids=CASE_IDS)
def test_all_ones_weights_give_exactly_the_unweighted_fit(cls, kwargs):
    model, X_cal, y_cal, X_new = _frozen_case()
    plain = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal)
    ones = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal, sample_weight=np.ones(150))
    # exact: weights of 1.0 multiply exactly and sum to n exactly: the unweighted arithmetic
    np.testing.assert_array_equal(_map_parameters(ones), _map_parameters(plain))
    np.testing.assert_array_equal(ones.predict_proba(X_new), plain.predict_proba(X_new))


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
@pytest.mark.parametrize("cv", [None, 3])
def test_all_ones_weights_give_exactly_the_unweighted_fit_when_refitting(cls, cv):
    X, y = make_data()
    plain = cls(LogisticRegression(), cv=cv, random_state=0).fit(X, y)
    ones = cls(LogisticRegression(), cv=cv, random_state=0)
    ones.fit(X, y, sample_weight=np.ones(300))
    # exact: weights of 1.0 multiply exactly and sum to n exactly: the unweighted arithmetic
    np.testing.assert_array_equal(ones.predict_proba(X), plain.predict_proba(X))


@pytest.mark.parametrize(("cls", "kwargs"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("scale", ["1/n", 1e-3, 7.0])
def test_all_equal_weights_of_any_scale_give_the_unweighted_fit(cls, kwargs, scale):
    # N54, N123: weights 1/n used to count as one row (ts-mix at 0.5).
    model, X_cal, y_cal, X_new = _frozen_case()
    weights = np.full(y_cal.size, 1.0 / y_cal.size if scale == "1/n" else scale)
    plain = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal)
    scaled = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal, sample_weight=weights)
    _assert_same_map(scaled, plain, X_cal, y_cal, None, X_new)
    assert np.max(np.abs(scaled.predict_proba(X_new) - plain.predict_proba(X_new))) <= 1e-3


@pytest.mark.parametrize(("cls", "kwargs"), COUNTING, ids=COUNTING_IDS)
def test_maps_that_count_rows_count_kishs_effective_rows(cls, kwargs):
    model, X_cal, y_cal, X_new = _frozen_case()
    weights = np.where(np.arange(y_cal.size) % 2 == 0, 1.0, 3.0)  # n_eff = 0.8 n
    weighted = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal, sample_weight=weights)
    n_eff = weights.sum() ** 2 / np.sum(weights**2)
    assert n_eff == pytest.approx(0.8 * y_cal.size)
    calibrator = weighted.calibrated_classifiers_[0].calibrator
    if kwargs.get("guard") == "mixture" or cls is CalibratedStructuredMatrixScaling:
        assert calibrator.mixture_weight_ == pytest.approx(1.0 / (n_eff + 1.0), rel=1e-12)
    # Scaling the weights changes nothing.
    scaled = cls(FrozenEstimator(model), **kwargs).fit(
        X_cal, y_cal, sample_weight=weights / weights.sum()
    )
    _assert_same_map(scaled, weighted, X_cal, y_cal, weights, X_new)


@pytest.mark.parametrize(("cls", "kwargs"), SCALE_FREE, ids=SCALE_FREE_IDS)
def test_integer_weights_fit_the_map_of_the_repeated_rows(cls, kwargs):
    model, X_cal, y_cal, X_new = _frozen_case()
    weights = np.arange(y_cal.size) % 4  # 0 to 3, zeros included
    weighted = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal, sample_weight=weights)
    repeated = cls(FrozenEstimator(model), **kwargs).fit(
        np.repeat(X_cal, weights, axis=0), np.repeat(y_cal, weights)
    )
    _assert_same_map(weighted, repeated, X_cal, y_cal, weights, X_new)
    # The weights matter: the unweighted map is another one.
    plain = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal)
    assert not np.allclose(
        plain.predict_proba(X_new), weighted.predict_proba(X_new), **SAME_MAP_TOLERANCE
    )


@pytest.mark.parametrize(("cls", "kwargs"), CASES, ids=CASE_IDS)
def test_zero_weights_equal_removing_the_rows(cls, kwargs):
    model, X_cal, y_cal, X_new = _frozen_case()
    keep = np.arange(y_cal.size) % 3 != 0
    weighted = cls(FrozenEstimator(model), **kwargs).fit(
        X_cal, y_cal, sample_weight=keep.astype(float)
    )
    removed = cls(FrozenEstimator(model), **kwargs).fit(X_cal[keep], y_cal[keep])
    _assert_same_map(weighted, removed, X_cal, y_cal, keep.astype(float), X_new)


@settings(max_examples=15, deadline=None)
@given(
    weights=arrays(np.int64, 60, elements=st.integers(0, 3)).filter(
        lambda w: np.unique(np.arange(60)[w > 0] % 3).size == 3
    )
)
def test_repetition_property_on_random_integer_weights(weights):
    # Rows i have class i % 3, so the filter keeps every class among the weighted rows.
    # The maps themselves are those of the repeated rows; the rule for maps with more
    # parameters than rows counts Kish's effective rows, not the repetitions.
    model, X_cal, y_cal, X_new = _repetition_property_data()
    for cls, kwargs in [(CalibratedHistogramBinning, {"n_bins": 5}), (CalibratedIsotonic, {})]:
        weighted = cls(FrozenEstimator(model), **kwargs).fit(X_cal, y_cal, sample_weight=weights)
        repeated = cls(FrozenEstimator(model), **kwargs).fit(
            np.repeat(X_cal, weights, axis=0), np.repeat(y_cal, weights)
        )
        (pair,) = weighted.calibrated_classifiers_
        (reference,) = repeated.calibrated_classifiers_
        logits = pair.logits(X_new)
        np.testing.assert_allclose(
            _unmixed(pair.calibrator).predict_proba(logits),
            _unmixed(reference.calibrator).predict_proba(logits),
            rtol=1e-12,
            atol=1e-12,
        )
        if isinstance(pair.calibrator, ModelMixture):
            n_eff = weights.sum() ** 2 / np.sum(weights.astype(float) ** 2)
            assert pair.calibrator.n_rows_ == pytest.approx(n_eff, rel=1e-12)


def _unmixed(calibrator):
    """The map inside a :class:`ModelMixture` (the map itself otherwise)."""
    return calibrator.map_ if isinstance(calibrator, ModelMixture) else calibrator


@cache
def _repetition_property_data():
    """A frozen model and 60 calibration rows whose row ``i`` has the class ``i % 3``."""
    model, X_cal, _, X_new = _frozen_case()
    return model, X_cal[:60], np.arange(60) % 3, X_new


# -- independent references for the weighted maps ------------------------------------------


@pytest.mark.filterwarnings("ignore:Since FrozenEstimator does not appear:UserWarning")
def test_weighted_temperature_agrees_with_scikit_learn():
    lr, X_cal, y_cal = fitted_and_calibration_split()
    weights = np.random.default_rng(0).uniform(0.1, 3.0, y_cal.size)
    ours = CalibratedTemperature(FrozenEstimator(lr), guard=None)
    ours.fit(X_cal, y_cal, sample_weight=weights)
    reference = CalibratedClassifierCV(FrozenEstimator(lr), method="temperature")
    reference.fit(X_cal, y_cal, sample_weight=weights)
    X_new, _ = make_data(random_state=3)
    np.testing.assert_allclose(
        ours.predict_proba(X_new), reference.predict_proba(X_new), rtol=1e-5, atol=1e-8
    )
    unweighted = CalibratedTemperature(FrozenEstimator(lr), guard=None).fit(X_cal, y_cal)
    assert ours.temperature_ != pytest.approx(unweighted.temperature_, rel=1e-3)


@pytest.mark.filterwarnings("ignore:Since FrozenEstimator does not appear:UserWarning")
def test_weighted_isotonic_agrees_with_scikit_learn():
    # A predict_proba-only model: scikit-learn then calibrates the same probabilities.
    model, X_cal, y_cal = fitted_and_calibration_split(ProbaOnlyClassifier())
    weights = np.random.default_rng(1).uniform(0.1, 3.0, y_cal.size)
    ours = CalibratedIsotonic(FrozenEstimator(model)).fit(X_cal, y_cal, sample_weight=weights)
    reference = CalibratedClassifierCV(FrozenEstimator(model), method="isotonic")
    reference.fit(X_cal, y_cal, sample_weight=weights)
    X_new, _ = make_data(random_state=4)
    np.testing.assert_allclose(ours.predict_proba(X_new), reference.predict_proba(X_new), atol=1e-9)
    unweighted = CalibratedIsotonic(FrozenEstimator(model)).fit(X_cal, y_cal)
    assert not np.allclose(ours.predict_proba(X_new), unweighted.predict_proba(X_new), atol=1e-3)


def test_weighted_binary_vector_scaling_is_weighted_platt_scaling():
    # Two classes, logits z = [0, d]: softmax(scale * z + bias) is sigmoid(a d + c), the
    # unpenalised logistic regression of y on d, fitted here by scikit-learn.
    lr, X_cal, y_cal = fitted_and_calibration_split(ScaledLogitClassifier(scale=3.0), n_classes=2)
    weights = np.random.default_rng(2).uniform(0.1, 3.0, y_cal.size)
    ours = CalibratedVectorScaling(FrozenEstimator(lr)).fit(X_cal, y_cal, sample_weight=weights)
    score = lr.decision_function(X_cal).reshape(-1, 1)
    platt = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)
    platt.fit(score, y_cal, sample_weight=weights)
    X_new, _ = make_data(n_classes=2, random_state=3)
    new_score = lr.decision_function(X_new)
    expected = expit(platt.coef_[0, 0] * new_score + platt.intercept_[0])
    np.testing.assert_allclose(ours.predict_proba(X_new)[:, 1], expected, rtol=1e-5, atol=1e-7)


def test_weighted_histogram_binning_by_hand():
    # Two classes, probabilities of class 1: 0.1, 0.2, 0.3, 0.4 with weights 3, 1, 1, 3
    # (total 8). Bin of a score: floor(2 * (mass below + half its own) / 8), so 0.1 -> 0,
    # 0.2 -> floor(2 * 3.5 / 8) = 0, 0.3 -> floor(2 * 4.5 / 8) = 1, 0.4 -> 1. Weighted
    # frequency of class 1: bin 0 (y = 0, 1) 1/4, bin 1 (y = 1, 1) 1; edge at 0.25.
    proba = np.array([0.1, 0.2, 0.3, 0.4])
    logits = np.column_stack([np.zeros(4), np.log(proba / (1 - proba))])
    y = np.array([0, 1, 1, 1])
    weights = np.array([3.0, 1.0, 1.0, 3.0])
    model = FrozenEstimator(_FixedLogits().fit(logits, y))
    calibrated = CalibratedHistogramBinning(model, n_bins=2)
    calibrated.fit(logits, y, sample_weight=weights)
    (histogram,) = calibrated.calibrated_classifiers_[0].calibrator.regressors_
    np.testing.assert_allclose(histogram.bin_edges_, [0.25])
    np.testing.assert_allclose(histogram.bin_values_, [0.25, 1.0])


class _FixedLogits(sklearn.base.ClassifierMixin, sklearn.base.BaseEstimator):
    """A 'classifier' whose logits are its input (for hand-worked maps)."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X):
        X = np.asarray(X)
        return X[:, 1] - X[:, 0]

    def predict(self, X):
        return self.classes_[(self.decision_function(X) > 0).astype(int)]


# -- what counts as the calibration rows: warnings follow the weighted rows ----------------


def test_single_class_warning_counts_only_weighted_rows():
    model, X_cal, y_cal, _ = _frozen_case()
    weights = (y_cal == 0).astype(float)
    n = int(weights.sum())
    assert n < y_cal.size
    message = (
        "CalibratedVectorScaling: the calibration rows hold no row of classes [1, 2] (of "
        "[0, 1, 2]); those classes keep the model's own probability and the map calibrates "
        "the other classes only. With the single class 0 left, nothing is calibrated: the "
        "calibrated probabilities are the model's own. Calibrate on rows of every class to "
        "calibrate them all."
    )
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
        CalibratedVectorScaling(FrozenEstimator(model)).fit(X_cal, y_cal, sample_weight=weights)


def test_all_correct_warning_counts_only_weighted_rows():
    model, X_cal, y_cal, _ = _frozen_case()
    correct = (model.predict(X_cal) == y_cal).astype(float)
    assert 0 < correct.sum() < y_cal.size
    with pytest.warns(UserWarning, match="Every calibration row is already classified correctly"):
        weighted = CalibratedTemperature(FrozenEstimator(model))
        weighted.fit(X_cal, y_cal, sample_weight=correct)
    # As for the removed rows: nothing to shrink from, T = 1.
    assert weighted.temperature_ == 1.0


# -- the shrinkage guard's bootstrap -------------------------------------------------------


def _logits_and_labels():
    model, X_cal, y_cal, _ = _frozen_case()
    return model.decision_function(X_cal), y_cal


@pytest.mark.parametrize("scale", [1.0, "1/n", 1e-3, 7.0])
def test_bootstrap_of_all_equal_weights_is_the_unweighted_resample(scale):
    logits, y = _logits_and_labels()
    weights = np.full(y.size, 1.0 / y.size if scale == "1/n" else scale)
    for seed in range(3):
        weighted = bootstrap_resample(logits, y, weights, np.random.default_rng(seed))
        plain = bootstrap_resample(logits, y, None, np.random.default_rng(seed))
        assert weighted[2] is None
        # pure indexing: the same draws pick the same rows
        np.testing.assert_array_equal(weighted[0], plain[0])
        np.testing.assert_array_equal(weighted[1], plain[1])


def test_bootstrap_of_zero_weights_is_the_resample_without_those_rows():
    logits, y = _logits_and_labels()
    keep = np.arange(y.size) % 3 != 0
    for seed in range(3):
        weighted = bootstrap_resample(logits, y, 2.5 * keep, np.random.default_rng(seed))
        removed = bootstrap_resample(logits[keep], y[keep], None, np.random.default_rng(seed))
        np.testing.assert_array_equal(weighted[0], removed[0])
        np.testing.assert_array_equal(weighted[1], removed[1])


def test_bootstrap_of_unweighted_rows_is_numpys_uniform_resample():
    logits, y = _logits_and_labels()
    resampled, labels, counts = bootstrap_resample(logits, y, None, np.random.default_rng(4))
    rows = np.random.default_rng(4).choice(y.size, size=y.size, replace=True)
    # pure indexing: the same draws pick the same rows
    np.testing.assert_array_equal(resampled, logits[rows])
    np.testing.assert_array_equal(labels, y[rows])
    assert counts is None


def test_bootstrap_of_real_weights_draws_rows_in_proportion_to_weight():
    logits = np.arange(8.0).reshape(4, 2)
    y = np.array([0, 1, 0, 1])
    weights = np.array([0.5, 1.5, 0.0, 2.0])  # Kish: 16 / 6.5 = 2.46 rows, 2 draws
    rng = np.random.default_rng(0)
    totals = np.zeros(4)
    n_resamples = 2000
    for _ in range(n_resamples):
        drawn_logits, drawn_y, counts = bootstrap_resample(logits, y, weights, rng)
        assert counts.sum() == 2.0
        rows = drawn_logits[:, 0].astype(int) // 2
        np.testing.assert_array_equal(drawn_y, y[rows])
        totals[rows] += counts
    # Expected counts 2 * w / sum(w) = w / 2; binomial standard error of the mean < 0.012.
    np.testing.assert_allclose(totals / n_resamples, weights / 2, atol=0.06)


def test_bootstrap_above_the_explicit_draw_limit_has_the_same_spread(monkeypatch):
    model, X_cal, y_cal, _ = _frozen_case()
    keep = np.arange(y_cal.size) % 3 != 0
    weights = 3.0 * keep  # rescaled to Kish's n: ones and zeros, drawn row by row
    explicit = CalibratedTemperature(FrozenEstimator(model), random_state=0)
    explicit.fit(X_cal, y_cal, sample_weight=weights)
    monkeypatch.setattr(temperature_module, "MAX_EXPLICIT_DRAWS", 0)
    counted = CalibratedTemperature(FrozenEstimator(model), random_state=0)
    counted.fit(X_cal, y_cal, sample_weight=weights)
    removed = CalibratedTemperature(FrozenEstimator(model), random_state=0)
    removed.fit(X_cal[keep], y_cal[keep])
    spread = [c.calibrated_classifiers_[0].calibrator.standard_error_ for c in (explicit, counted)]
    # Row by row, the resamples of the rows without the zero weights: the same spread ...
    assert spread[0] == removed.calibrated_classifiers_[0].calibrator.standard_error_
    # ... and multinomial counts, other draws, the same up to bootstrap noise (~10 %).
    assert spread[1] == pytest.approx(spread[0], rel=0.3)


# -- the wrapped estimator's weights, routing disabled ------------------------------------


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
@pytest.mark.parametrize("cv", [None, 3])
def test_weights_reach_the_estimator_and_the_map_without_routing(cls, cv):
    X, y = make_data()
    weights = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    tag = np.arange(y.size)
    calibrated = cls(RecordingClassifier(), cv=cv, random_state=0, **_unguarded(cls))
    calibrated.fit(X, y, sample_weight=weights, tag=tag)
    assert len(calibrated.calibrated_classifiers_) == (1 if cv is None else 3)
    for pair in calibrated.calibrated_classifiers_:
        train = _row_indices(X, pair.estimator.seen_X_)
        np.testing.assert_array_equal(pair.estimator.seen_sample_weight_, weights[train])
        np.testing.assert_array_equal(pair.estimator.seen_tag_, tag[train])
        # The map saw the weights of the other rows: refit it on them by hand.
        test = np.setdiff1d(np.arange(y.size), train)
        by_hand = cls(FrozenEstimator(pair.estimator), **_unguarded(cls)).fit(
            X[test], y[test], sample_weight=weights[test]
        )
        # exact: the same map fitted on the same rows and weights, one path twice
        np.testing.assert_array_equal(pair.predict_proba(X), by_hand.predict_proba(X))


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
def test_estimator_without_sample_weight_warns_and_the_map_still_uses_them(cls):
    X, y = make_data()
    weights = np.where(y == 0, 3.0, 1.0)
    # Unguarded: the shrinkage guard returns both temperatures to 1 on these 60 rows.
    kwargs = {"random_state": 0, **_unguarded(cls)}
    # A Pipeline whose final step takes no weights (one that does gets them).
    calibrated = cls(make_pipeline(StandardScaler(), KNeighborsClassifier(15)), **kwargs)
    message = (
        "Pipeline.fit does not accept sample_weight; the weights are used for the calibration only."
    )
    with pytest.warns(UserWarning, match=re.escape(message)):
        calibrated.fit(X, y, sample_weight=weights)
    plain = cls(make_pipeline(StandardScaler(), KNeighborsClassifier(15)), **kwargs).fit(X, y)
    # Same split, same estimator: only the map differs.
    # exact: the same estimator fitted on the same rows (its weights were dropped)
    np.testing.assert_array_equal(
        calibrated.calibrated_classifiers_[0].logits(X), plain.calibrated_classifiers_[0].logits(X)
    )
    assert not np.allclose(calibrated.predict_proba(X), plain.predict_proba(X))


# -- metadata routing ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
def test_routing_sends_requested_weights_to_the_estimator(cls):
    X, y = make_data()
    weights = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    unrouted = cls(RecordingClassifier(), random_state=0, **_unguarded(cls))
    unrouted.fit(X, y, sample_weight=weights)
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = RecordingClassifier().set_fit_request(sample_weight=True)
        routed = cls(estimator, random_state=0, **_unguarded(cls))
        routed.fit(X, y, sample_weight=weights)
    (pair,) = routed.calibrated_classifiers_
    train = _row_indices(X, pair.estimator.seen_X_)
    np.testing.assert_array_equal(pair.estimator.seen_sample_weight_, weights[train])
    # exact: routing delivers the same weights: the same fits, one path twice
    np.testing.assert_array_equal(routed.predict_proba(X), unrouted.predict_proba(X))


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
def test_routing_keeps_weights_from_an_estimator_that_declined_them(cls):
    X, y = make_data()
    weights = np.where(y == 1, 3.0, 1.0)
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = RecordingClassifier().set_fit_request(sample_weight=False)
        routed = cls(estimator, random_state=0, **_unguarded(cls))
        routed.fit(X, y, sample_weight=weights)
    (pair,) = routed.calibrated_classifiers_
    assert pair.estimator.seen_sample_weight_ is None
    # The map still consumed the weights of its rows.
    test = np.setdiff1d(np.arange(y.size), _row_indices(X, pair.estimator.seen_X_))
    by_hand = cls(FrozenEstimator(pair.estimator), **_unguarded(cls))
    by_hand.fit(X[test], y[test], sample_weight=weights[test])
    # exact: the same map on the same rows and weights, one path twice
    np.testing.assert_array_equal(routed.predict_proba(X), by_hand.predict_proba(X))


def _unset_message(owner: str, caller: str) -> str:
    return (
        f"[sample_weight] are passed but are not explicitly set as requested or not requested "
        f"for {owner}.fit, which is used within {caller}.fit. Call "
        f"`{owner}.set_fit_request({{metadata}}=True/False)` for each metadata you want to "
        "request/ignore."
    )


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
def test_routing_refuses_weights_the_estimator_was_not_told_about(cls):
    X, y = make_data()
    calibrated = cls(RecordingClassifier(), random_state=0, **_unguarded(cls))
    message = _unset_message("RecordingClassifier", cls.__name__)
    with sklearn.config_context(enable_metadata_routing=True):
        with pytest.raises(UnsetMetadataPassedError, match=re.escape(message)):
            calibrated.fit(X, y, sample_weight=np.ones(y.size))
        # Without weights there is nothing to route, so nothing to refuse.
        calibrated.fit(X, y)


def test_routing_with_a_frozen_estimator_weighs_the_map_only():
    model, X_cal, y_cal, X_new = _frozen_case()
    weights = np.arange(y_cal.size) % 4
    unrouted = CalibratedTemperature(FrozenEstimator(model)).fit(X_cal, y_cal, weights)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = CalibratedTemperature(FrozenEstimator(model)).fit(X_cal, y_cal, weights)
    # exact: routing delivers the same weights: the same fits, one path twice
    np.testing.assert_array_equal(routed.predict_proba(X_new), unrouted.predict_proba(X_new))


def test_routing_aliases_separate_weights_for_estimator_and_map():
    X, y = make_data()
    rng = np.random.default_rng(0)
    map_weights, model_weights = rng.uniform(0.5, 2.0, (2, y.size))
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = RecordingClassifier().set_fit_request(sample_weight="model_weight")
        calibrated = CalibratedTemperature(estimator, random_state=0, guard=None)
        calibrated.fit(X, y, sample_weight=map_weights, model_weight=model_weights)
    (pair,) = calibrated.calibrated_classifiers_
    train = _row_indices(X, pair.estimator.seen_X_)
    np.testing.assert_array_equal(pair.estimator.seen_sample_weight_, model_weights[train])
    test = np.setdiff1d(np.arange(y.size), train)
    by_hand = CalibratedTemperature(FrozenEstimator(pair.estimator), guard=None).fit(
        X[test], y[test], sample_weight=map_weights[test]
    )
    assert calibrated.temperature_ == by_hand.temperature_


def test_routing_sends_groups_to_the_cv_splitter():
    X, y = make_data()
    groups = np.arange(y.size) % 3
    with sklearn.config_context(enable_metadata_routing=True):
        calibrated = CalibratedTemperature(RecordingClassifier(), cv=GroupKFold(3), guard=None)
        calibrated.fit(X, y, groups=groups)
    held_out = []
    for pair in calibrated.calibrated_classifiers_:
        train = _row_indices(X, pair.estimator.seen_X_)
        (missing,) = np.setdiff1d(np.arange(3), np.unique(groups[train]))
        np.testing.assert_array_equal(np.sort(train), np.flatnonzero(groups != missing))
        held_out.append(missing)
    assert sorted(held_out) == [0, 1, 2]


def test_routing_refuses_metadata_nobody_requested():
    X, y = make_data()
    message = (
        "CalibratedTemperature.fit got unexpected argument(s) {'colour'}, which are not "
        "routed to any object."
    )
    with sklearn.config_context(enable_metadata_routing=True):
        with pytest.raises(TypeError, match=re.escape(message)):
            CalibratedTemperature(RecordingClassifier()).fit(X, y, colour=np.ones(y.size))


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
def test_routing_through_a_pipeline(cls):
    X, y = make_data()
    weights = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    with sklearn.config_context(enable_metadata_routing=True):
        calibrated = cls(
            RecordingClassifier().set_fit_request(sample_weight=True),
            random_state=0,
            **_unguarded(cls),
        ).set_fit_request(sample_weight=True)
        pipeline = make_pipeline(StandardScaler().set_fit_request(sample_weight=False), calibrated)
        pipeline.fit(X, y, sample_weight=weights)
    X_scaled = StandardScaler().fit_transform(X)
    direct = cls(RecordingClassifier(), random_state=0, **_unguarded(cls))
    direct.fit(X_scaled, y, sample_weight=weights)
    # exact: X_scaled is the pipeline's StandardScaler arithmetic; then the same fits
    np.testing.assert_array_equal(pipeline.predict_proba(X), direct.predict_proba(X_scaled))
    (pair,) = pipeline[-1].calibrated_classifiers_
    train = _row_indices(X_scaled, pair.estimator.seen_X_)
    np.testing.assert_array_equal(pair.estimator.seen_sample_weight_, weights[train])


def test_routing_through_a_pipeline_needs_the_calibrators_request():
    X, y = make_data()
    with sklearn.config_context(enable_metadata_routing=True):
        calibrated = CalibratedIsotonic(RecordingClassifier().set_fit_request(sample_weight=True))
        pipeline = make_pipeline(calibrated)
        with pytest.raises(
            UnsetMetadataPassedError,
            match=re.escape(_unset_message("CalibratedIsotonic", "Pipeline")),
        ):
            pipeline.fit(X, y, sample_weight=np.ones(y.size))


@pytest.mark.parametrize("cls", CALIBRATORS, ids=CALIBRATOR_IDS)
def test_routing_through_grid_search(cls):
    X, y = make_data()
    weights = np.random.default_rng(1).uniform(0.5, 2.0, y.size)
    grid = {"validation_fraction": [0.2, 0.3]}
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = RecordingClassifier().set_fit_request(sample_weight=True)
        calibrated = cls(estimator, random_state=0, **_unguarded(cls))
        calibrated.set_fit_request(sample_weight=True).set_score_request(sample_weight=True)
        search = GridSearchCV(calibrated, grid, cv=StratifiedKFold(3)).fit(
            X, y, sample_weight=weights
        )
    best = search.best_estimator_
    direct = cls(RecordingClassifier(), random_state=0, **_unguarded(cls), **search.best_params_)
    direct.fit(X, y, sample_weight=weights)
    # exact: the search's refit is this same fit, one path twice
    np.testing.assert_array_equal(best.predict_proba(X), direct.predict_proba(X))
    (pair,) = best.calibrated_classifiers_
    train = _row_indices(X, pair.estimator.seen_X_)
    np.testing.assert_array_equal(pair.estimator.seen_sample_weight_, weights[train])


def test_grid_search_weights_the_fits_and_the_scores_when_routing():
    # The weights reach the fold fits and the weighted accuracy of each fold: the
    # cross-validated score is the one computed by hand on the same folds.
    X, y = make_data()
    weights = np.random.default_rng(2).uniform(0.5, 2.0, y.size)
    folds = list(StratifiedKFold(3).split(X, y))
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = RecordingClassifier().set_fit_request(sample_weight=True)
        calibrated = CalibratedTemperature(estimator, random_state=0)
        calibrated.set_fit_request(sample_weight=True).set_score_request(sample_weight=True)
        search = GridSearchCV(calibrated, {"guard": [None]}, cv=folds).fit(
            X, y, sample_weight=weights
        )
    by_hand = []
    for train, test in folds:
        fitted = CalibratedTemperature(RecordingClassifier(), random_state=0, guard=None)
        fitted.fit(X[train], y[train], sample_weight=weights[train])
        correct = fitted.predict(X[test]) == y[test]
        by_hand.append(np.average(correct, weights=weights[test]))
    assert search.cv_results_["mean_test_score"][0] == pytest.approx(np.mean(by_hand), rel=1e-12)


def test_grid_search_passes_weights_without_routing():
    X, y = make_data()
    weights = np.random.default_rng(3).uniform(0.5, 2.0, y.size)
    search = GridSearchCV(
        CalibratedVectorScaling(RecordingClassifier(), random_state=0),
        {"validation_fraction": [0.2, 0.3]},
        cv=StratifiedKFold(3),
    ).fit(X, y, sample_weight=weights)
    direct = CalibratedVectorScaling(RecordingClassifier(), random_state=0, **search.best_params_)
    direct.fit(X, y, sample_weight=weights)
    # exact: the search's refit is this same fit, one path twice
    np.testing.assert_array_equal(search.best_estimator_.predict_proba(X), direct.predict_proba(X))
    (pair,) = search.best_estimator_.calibrated_classifiers_
    assert pair.estimator.seen_sample_weight_ is not None


def test_routing_object_lists_the_calibrator_the_estimator_and_the_splitter():
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = RecordingClassifier().set_fit_request(sample_weight=True)
        calibrated = CalibratedTemperature(estimator, cv=GroupKFold(2))
        routing = calibrated.get_metadata_routing()
    assert routing.consumes("fit", ["sample_weight", "tag"]) == {"sample_weight"}
    routed = routing.route_params(
        params={"sample_weight": np.ones(4), "groups": np.zeros(4)}, caller="fit"
    )
    assert set(routed.estimator.fit) == {"sample_weight"}
    assert set(routed.splitter.split) == {"groups"}


# -- the documented recipe ------------------------------------------------------------------


def test_documented_weights_and_routing_snippet_runs():
    docs = Path(__file__).resolve().parents[1] / "docs" / "calibration.md"
    section = docs.read_text().split("## Sample weights and metadata routing", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(docs), "exec"), namespace)
    search = namespace["search"]
    (pair,) = search.best_estimator_[-1].calibrated_classifiers_
    assert pair.estimator.coef_.shape == (3, 20)
    assert search.best_params_["calibratedtemperature__guard"] in {"shrinkage", "mixture"}
