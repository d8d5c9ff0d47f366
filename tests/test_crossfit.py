"""Cross-fitting: every row trains and calibrates (CrossFitClassifier, the calibrators' cv mode).

Each behaviour is checked against an independent computation: the folds' models refitted
by hand, the greedy weights of a hand-worked case, the out-of-fold rows recomputed, the
selection rule applied by hand to the scores it reports.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _thread_spy import ThreadSpy
from scipy.special import softmax
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris, make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.calibration import (
    CalibratedQuadraticScaling,
    CalibratedTemperature,
    select_calibration,
)
from nescal_sklearn.calibration._temperature import fit_temperature
from nescal_sklearn.ensemble import CrossFitClassifier, greedy_ensemble_weights
from nescal_sklearn.model_selection import inner_split, takes_validation_rows

pytestmark = pytest.mark.numerical


def _lr():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(return_X_y=True)


# -- greedy ensemble selection ------------------------------------------------------------


def test_greedy_weights_follow_the_hand_worked_steps():
    # Two rows of class 0. Member a: p(0) = 0.9 and 0.2; member b: 0.3 and 0.9.
    y = np.array([0, 0])
    a = np.array([[0.9, 0.1], [0.2, 0.8]])
    b = np.array([[0.3, 0.7], [0.9, 0.1]])
    c = np.array([[0.5, 0.5], [0.5, 0.5]])
    # Step 1: NLL a = -(ln .9 + ln .2)/2 = 0.857, b = 0.655, c = 0.693 -> b.
    # Step 2: (b + a)/2 = (.6, .55) -> 0.555; (b + b) -> 0.655; (b + c)/2 = (.4, .7) -> 0.637 -> a.
    # Step 3: (a + b + a)/3 = (.7, .433) -> 0.596; (a + b + b)/3 = (.5, .667) -> 0.549;
    #         (a + b + c)/3 = (.567, .533) -> 0.599 -> b. Weights 1/3 a, 2/3 b.
    weights = greedy_ensemble_weights([a, b, c], y, size=3)
    np.testing.assert_allclose(weights, [1 / 3, 2 / 3, 0.0])
    assert greedy_ensemble_weights([a], y, size=3).tolist() == [1.0]


# -- the calibration choice ---------------------------------------------------------------


def test_the_choice_is_the_simplest_map_within_one_standard_error():
    X, y = make_classification(600, 6, n_informative=4, random_state=0)
    # Overconfident logits: temperature scaling must pay off beyond noise.
    logits = np.column_stack([np.zeros(600), 4.0 * (X[:, 0] + X[:, 1])])
    name, scores, held_out = select_calibration(
        logits, y, ["identity", "temperature", "quadratic"], random_state=0
    )
    assert set(scores) == {"identity", "temperature", "quadratic"}
    assert scores[name] - min(scores.values()) >= 0
    assert name != "identity" and scores["identity"] > scores[name]
    np.testing.assert_allclose(held_out.sum(axis=1), 1.0)
    # The held-out probabilities are the chosen map's on rows it was not fitted on.
    assert log_loss(y, held_out) == pytest.approx(scores[name], rel=1e-9)


def test_calibrated_logits_keep_identity_when_no_map_helps():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    p = np.where(y == 1, 0.7, 0.3)  # calibrated already: P(y = 1 | p) = p
    noise = rng.random(500) < 0.3
    y = np.where(noise, 1 - y, y)
    logits = np.column_stack([np.zeros(500), np.log(p / (1 - p))])
    name, scores, _ = select_calibration(
        logits, y, ["identity", "temperature", "quadratic"], random_state=0
    )
    assert name == "identity"


def test_a_deadline_leaves_out_the_candidates_that_would_end_after_it():
    import time

    X, y = make_classification(600, 6, n_informative=4, random_state=0)
    logits = np.column_stack([np.zeros(600), 4.0 * (X[:, 0] + X[:, 1])])
    candidates = ["identity", "temperature", "quadratic"]
    given = select_calibration(logits, y, candidates, random_state=0, deadline=time.time() + 600)
    free = select_calibration(logits, y, candidates, random_state=0)
    assert given[:2] == free[:2]  # time enough: the choice without a deadline
    # passed already: the first candidate only (every choice needs one), in its own parts
    name, scores, held_out = select_calibration(
        logits, y, candidates, random_state=0, deadline=time.time()
    )
    assert name == "identity" and list(scores) == ["identity"]
    np.testing.assert_allclose(scores["identity"], free[1]["identity"])


def test_a_solver_that_passes_the_deadline_within_a_part_leaves_its_map_out(monkeypatch):
    import time

    from nescal_sklearn.calibration._structured_matrix import _StructuredMatrixScalingMap

    objective = _StructuredMatrixScalingMap.objective

    def slow(self, *args):  # each evaluation 0.1 s: a part takes about 4 s
        fun = objective(self, *args)
        return lambda params: time.sleep(0.1) or fun(params)

    monkeypatch.setattr(_StructuredMatrixScalingMap, "objective", slow)
    X, y = load_iris(return_X_y=True)
    logits = 3.0 * (X - X.mean(axis=0))[:, [0, 2, 3]]
    candidates = ["identity", "temperature", "sms"]
    start = time.time()
    name, scores, _ = select_calibration(logits, y, candidates, random_state=0, deadline=start + 1)
    assert list(scores) == ["identity", "temperature"] and name in scores
    assert time.time() - start < 1.5  # the solver stopped at the deadline, not its end


# -- CrossFitClassifier -------------------------------------------------------------------


def test_members_are_fitted_on_the_folds_and_the_out_of_fold_rows_are_theirs(cancer):
    X, y = cancer
    model = CrossFitClassifier([("lr", _lr())], cv=3, calibration="identity", random_state=0)
    model.fit(X, y)
    assert len(model.estimators_) == 3 and len(model.folds_) == 3
    assert sorted(np.concatenate(model.folds_).tolist()) == list(range(len(y)))
    for test, (fitted,) in zip(model.folds_, model.estimators_, strict=True):
        train = np.setdiff1d(np.arange(len(y)), test)
        by_hand = clone(_lr()).fit(X[train], y[train])
        np.testing.assert_allclose(
            fitted.predict_proba(X[test]), by_hand.predict_proba(X[test]), rtol=1e-6, atol=1e-9
        )
    # With one member and no map, prediction is the mean of the fold models' probabilities.
    mean = np.mean([m.predict_proba(X[:5]) for (m,) in model.estimators_], axis=0)
    np.testing.assert_allclose(model.predict_proba(X[:5]), mean, rtol=1e-9)
    assert model.weights_.tolist() == [1.0] and model.calibration_ == "identity"


def test_two_members_are_weighted_and_the_map_is_chosen_out_of_fold(cancer):
    X, y = cancer
    model = CrossFitClassifier(
        [("lr", _lr()), ("hgb", HistGradientBoostingClassifier(early_stopping=True))],
        cv=4,
        random_state=0,
    ).fit(X, y)
    assert model.weights_.shape == (2,) and model.weights_.sum() == pytest.approx(1.0)
    assert set(model.member_oof_nll_) == {"lr", "hgb"}
    assert model.calibration_ in {"identity", "temperature", "quadratic"}
    assert set(model.calibration_scores_) == {"identity", "temperature", "quadratic"}
    # oof_proba_ scores every training row with models and a map that never saw it.
    assert model.oof_proba_.shape == (len(y), 2)
    assert log_loss(y, model.oof_proba_) == pytest.approx(
        model.calibration_scores_[model.calibration_], rel=1e-9
    )
    proba = model.predict_proba(X[:10])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (proba > 0).all() and (proba < 1).all()


def test_members_early_stop_on_the_fold_they_did_not_train_on(cancer):
    X, y = cancer
    seen = []

    class Spy(HistGradientBoostingClassifier):
        def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None, sample_weight_val=None):
            seen.append((len(X), None if X_val is None else len(X_val)))
            return super().fit(X, y, sample_weight, X_val=X_val, y_val=y_val)

    CrossFitClassifier([("hgb", Spy(early_stopping=True))], cv=3, random_state=0).fit(X, y)
    assert sorted(seen) == sorted((len(y) - n, n) for n in (190, 190, 189))
    # early_stopping_rows="own": no held-out row is given; the member holds out its own
    seen.clear()
    own = CrossFitClassifier(
        [("hgb", Spy(early_stopping=True))], cv=3, random_state=0, early_stopping_rows="own"
    ).fit(X, y)
    assert sorted(seen) == sorted((len(y) - n, None) for n in (190, 190, 189))
    assert all(fold[0].validation_score_.size > 1 for fold in own.estimators_)  # stopped
    assert takes_validation_rows(NeSCalClassifier())
    assert not takes_validation_rows(HistGradientBoostingClassifier())  # "auto": by size
    assert not takes_validation_rows(LogisticRegression())


@pytest.mark.parametrize("refit", [False, True])
def test_network_members_predict_on_n_jobs_threads_one_after_another(cancer, refit):
    X, y = cancer
    X = StandardScaler().fit_transform(X)
    net = NeSCalClassifier(loss="ce", module=ThreadSpy, max_epochs=2, random_state=0)
    model = CrossFitClassifier(
        [("net", net)], cv=2, calibration="identity", refit=refit, random_state=0
    ).fit(X, y)
    n_networks = 1 if refit else 2  # one per fold, or the refitted one
    ThreadSpy.seen = []
    alone = model.predict_proba(X)  # n_jobs=None: one thread, the network's own
    assert ThreadSpy.seen == [1] * n_networks
    ThreadSpy.seen = []
    threaded = model.set_params(n_jobs=2).predict_proba(X)
    assert ThreadSpy.seen == [2] * n_networks
    # another thread count changes a linear layer's sums by float32 round-off (~1e-7)
    np.testing.assert_allclose(threaded, alone, rtol=1e-5, atol=1e-7)


@pytest.mark.determinism
def test_each_fold_gets_its_own_seed_and_a_fit_is_reproducible(cancer):
    X, y = cancer
    make = lambda: CrossFitClassifier(  # noqa: E731
        [("hgb", HistGradientBoostingClassifier(early_stopping=True))], cv=3, random_state=3
    )
    a, b = make().fit(X, y), make().fit(X, y)
    seeds = [m.random_state for (m,) in a.estimators_]
    assert len(set(seeds)) == 3
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_bad_settings_name_the_parameter():
    X, y = load_iris(return_X_y=True)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "calibration='quadratic' does not apply to 3 classes (binary only); pass "
            "calibration='auto' or 'temperature'."
        ),
    ):
        CrossFitClassifier([("lr", _lr())], calibration="quadratic").fit(X, y)
    with pytest.raises(
        ValueError,
        match=re.escape("estimators must be a non-empty list of (name, estimator) pairs; got []."),
    ):
        CrossFitClassifier([]).fit(X, y)
    with pytest.raises(ValueError, match=re.escape("estimators: 'x' must have fit and")):
        CrossFitClassifier([("x", StandardScaler())]).fit(X, y)


def test_nested_parameters_reach_the_members():
    model = CrossFitClassifier([("lr", LogisticRegression())])
    model.set_params(lr__C=0.5)
    assert model.get_params()["lr__C"] == 0.5


@pytest.mark.determinism
def test_members_run_in_parallel_through_joblib_on_a_local_dask_cluster(cancer):
    import distributed  # the dev extra's: a missing one fails here, never skips
    from joblib import parallel_backend

    X, y = cancer
    make = lambda: CrossFitClassifier([("lr", _lr())], cv=3, n_jobs=-1, random_state=0)  # noqa: E731
    serial = make().set_params(n_jobs=None).fit(X, y)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2) as client:
        with parallel_backend("dask"):
            model = make().fit(X, y)
        assert client.scheduler_info()["workers"]
    np.testing.assert_allclose(model.predict_proba(X), serial.predict_proba(X), rtol=1e-9)


# -- quadratic scaling --------------------------------------------------------------------


def test_quadratic_scaling_is_the_logistic_regression_on_one_z_and_z_squared():
    rng = np.random.default_rng(0)
    z = rng.normal(scale=3, size=800)
    y = (rng.random(800) < 1 / (1 + np.exp(-(0.3 + 0.5 * z - 0.05 * z * z)))).astype(int)
    model = CalibratedQuadraticScaling()._make_calibrator()
    model.fit(np.column_stack([np.zeros(800), z]), y)
    reference = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-10, max_iter=10_000)
    reference.fit(np.column_stack([np.ones(800), z, z * z]), y)
    np.testing.assert_allclose(
        [model.intercept_, model.coef_, model.quadratic_], reference.coef_[0], rtol=1e-4, atol=1e-6
    )
    with pytest.raises(ValueError, match="CalibratedQuadraticScaling calibrates binary"):
        model.fit(np.zeros((4, 3)), np.array([0, 1, 2, 0]))


def test_quadratic_scaling_is_mixed_with_the_model_at_one_over_the_rarer_class_rows():
    # N22: a bump fitted around the 5 positives sent fresh rows to P = 1e-15.
    rng = np.random.default_rng(0)
    z = rng.normal(scale=2, size=300)
    y = (rng.random(300) < 1 / (1 + np.exp(-(z - 3)))).astype(int)
    logits = np.column_stack([np.zeros(300), z])
    plain = CalibratedQuadraticScaling(guard=None)._make_calibrator().fit(logits, y)
    guarded = CalibratedQuadraticScaling()._make_calibrator().fit(logits, y)
    m = min(np.bincount(y))
    assert guarded.model_weight_ == 1.0 / (m + 1.0) and plain.model_weight_ == 0.0
    fresh = np.column_stack([np.zeros(50), np.linspace(-30, 30, 50)])
    model = softmax(fresh, axis=1)
    expected = (1 - guarded.model_weight_) * plain.predict_proba(fresh) + model / (m + 1.0)
    np.testing.assert_allclose(guarded.predict_proba(fresh), expected, rtol=1e-12)
    assert np.all(guarded.predict_proba(fresh) >= model / (m + 1.0) * (1 - 1e-12))
    # Weighted: m is the rarer class's effective number of rows, whatever the scale.
    weights = np.where(np.arange(300) % 2 == 0, 1.0, 3.0) * 1e-3
    weighted = CalibratedQuadraticScaling()._make_calibrator().fit(logits, y, weights)
    rare = y == np.argmin(np.bincount(y))
    n_eff = weights[rare].sum() ** 2 / np.sum(weights[rare] ** 2)
    assert weighted.model_weight_ == pytest.approx(1.0 / (n_eff + 1.0), rel=1e-12)


# -- the calibrators' cv mode -------------------------------------------------------------


def test_the_cv_modes_oof_proba_is_held_out_for_the_model_and_the_map(cancer):
    X, y = cancer
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    model = CalibratedTemperature(_lr(), cv=cv, guard=None, random_state=5).fit(X, y)
    assert model.oof_proba_.shape == (len(y), 2)
    rng = np.random.RandomState(5)  # one inner seed per fold, drawn in fold order
    for (train, test), pair in zip(cv.split(X, y), model.calibrated_classifiers_, strict=True):
        logits = np.log(clone(_lr()).fit(X[train], y[train]).predict_proba(X[test]))
        # The fold's map, which predict uses, is fitted on all of the fold's held-out rows.
        assert pair.calibrator.temperature_ == pytest.approx(
            fit_temperature(logits, y[test]), rel=1e-5
        )
        # Each out-of-fold row goes through a temperature fitted on the fold's other rows.
        for inner_train, inner_test in inner_split(y[test], rng.randint(2**31 - 1)):
            temperature = fit_temperature(logits[inner_train], y[test][inner_train])
            np.testing.assert_allclose(
                model.oof_proba_[test[inner_test]],
                softmax(logits[inner_test] / temperature, axis=1),
                rtol=1e-5,
                atol=2e-15,  # no calibrated probability is below 1e-15 (the floor)
            )


def test_the_retired_calibration_lowest_is_refused(cancer):
    # Measured as no help (docs/oof_ensembles.md, "Options retired"), so removed.
    X, y = cancer
    model = CrossFitClassifier([("lr", _lr())], cv=3, calibration="lowest")
    with pytest.raises(ValueError) as raised:
        model.fit(X, y)
    found = re.fullmatch(
        r"The 'calibration' parameter of CrossFitClassifier must be a str among "
        r"\{(.*)\}\. Got 'lowest' instead\.",
        str(raised.value),
    )
    assert found is not None, str(raised.value)
    options = sorted(found.group(1).split(", "))  # a set: its order varies
    assert options == ["'auto'", "'identity'", "'quadratic'", "'sms'", "'temperature'"]
