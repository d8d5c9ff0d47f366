"""Tests of nescal_sklearn.scorers, end to end inside scikit-learn's model selection."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import sklearn
import sklearn.metrics
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import check_scoring
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_validate
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nescal_sklearn.metrics import (
    classwise_calibration_error,
    debiased_calibration_error,
    expected_calibration_error,
    log_loss,
    maximum_calibration_error,
    refinement_log_loss,
)
from nescal_sklearn.scorers import (
    CalibrationScorer,
    get_scorer,
    get_scorer_names,
    neg_classwise_calibration_error,
    neg_debiased_calibration_error,
    neg_expected_calibration_error,
    neg_maximum_calibration_error,
    neg_refinement_log_loss,
)

OURS = {
    "neg_expected_calibration_error": (neg_expected_calibration_error, expected_calibration_error),
    "neg_classwise_calibration_error": (
        neg_classwise_calibration_error,
        classwise_calibration_error,
    ),
    "neg_maximum_calibration_error": (neg_maximum_calibration_error, maximum_calibration_error),
    "neg_refinement_log_loss": (neg_refinement_log_loss, refinement_log_loss),
    "neg_debiased_calibration_error": (neg_debiased_calibration_error, debiased_calibration_error),
}


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


@pytest.fixture(scope="module")
def breast_cancer():
    return load_breast_cancer(return_X_y=True)


def _model(C=1.0):
    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000))


def test_grid_search_binary_matches_metric_by_hand(breast_cancer):
    X, y = breast_cancer
    cv = KFold(3, shuffle=True, random_state=0)
    grid = {"logisticregression__C": [0.01, 1.0]}
    search = GridSearchCV(_model(), grid, scoring=neg_expected_calibration_error, cv=cv)
    search.fit(X, y)
    for i, params in enumerate(search.cv_results_["params"]):
        for k, (train, test) in enumerate(cv.split(X, y)):
            model = clone(_model()).set_params(**params).fit(X[train], y[train])
            by_hand = -expected_calibration_error(y[test], model.predict_proba(X[test]))
            assert search.cv_results_[f"split{k}_test_score"][i] == pytest.approx(by_hand)
    assert search.best_score_ <= 0


def test_grid_search_with_name_through_get_scorer(iris):
    X, y = iris
    search = GridSearchCV(
        _model(),
        {"logisticregression__C": [0.1, 10.0]},
        scoring=get_scorer("neg_classwise_calibration_error"),
        cv=StratifiedKFold(3),
    ).fit(X, y)
    assert np.all(search.cv_results_["mean_test_score"] <= 0)


def test_cross_validate_multimetric_matches_metrics_by_hand(iris):
    X, y = iris
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    scoring = {
        "ece": neg_expected_calibration_error,
        "cw": neg_classwise_calibration_error,
        "mce": neg_maximum_calibration_error,
        "nll": "neg_log_loss",
    }
    result = cross_validate(_model(), X, y, cv=cv, scoring=scoring, return_estimator=True)
    for k, (_, test) in enumerate(cv.split(X, y)):
        proba = result["estimator"][k].predict_proba(X[test])
        assert result["test_ece"][k] == pytest.approx(-expected_calibration_error(y[test], proba))
        assert result["test_cw"][k] == pytest.approx(-classwise_calibration_error(y[test], proba))
        assert result["test_mce"][k] == pytest.approx(-maximum_calibration_error(y[test], proba))
        assert result["test_nll"][k] == pytest.approx(-log_loss(y[test], proba))


def test_fold_missing_a_class_uses_estimator_classes(iris):
    X, y = iris
    train = np.arange(150)
    test = np.flatnonzero(y < 2)[::5]  # classes 0 and 1 only
    result = cross_validate(
        _model(),
        X,
        y,
        cv=[(train, test)],
        scoring=neg_expected_calibration_error,
        return_estimator=True,
    )
    proba = result["estimator"][0].predict_proba(X[test])
    by_hand = -expected_calibration_error(y[test], proba, labels=[0, 1, 2])
    assert result["test_score"][0] == pytest.approx(by_hand)


@pytest.mark.parametrize("name", sorted(OURS))
def test_binary_fold_with_a_single_class(breast_cancer, name):
    X, y = breast_cancer
    scorer, metric = OURS[name]
    model = _model().fit(X, y)
    only_positive = np.flatnonzero(y == 1)[:40]
    proba = model.predict_proba(X[only_positive])
    by_hand = -metric(y[only_positive], proba, labels=model.classes_)
    assert scorer(model, X[only_positive], y[only_positive]) == pytest.approx(by_hand)


def test_string_classes(breast_cancer):
    X, y = breast_cancer
    y_str = np.where(y == 1, "benign", "malignant")
    model = _model().fit(X, y_str)
    by_hand = -classwise_calibration_error(y_str, model.predict_proba(X))
    assert neg_classwise_calibration_error(model, X, y_str) == pytest.approx(by_hand)


def test_sample_weight_is_passed_on(iris):
    X, y = iris
    model = _model().fit(X, y)
    weights = np.random.default_rng(0).uniform(0.1, 2.0, size=y.shape[0])
    by_hand = -expected_calibration_error(y, model.predict_proba(X), sample_weight=weights)
    scored = neg_expected_calibration_error(model, X, y, sample_weight=weights)
    assert scored == pytest.approx(by_hand)


@pytest.mark.parametrize("name", sorted(OURS))
def test_get_scorer_returns_a_copy_of_ours(iris, name):
    X, y = iris
    scorer = get_scorer(name)
    assert scorer is not OURS[name][0]
    model = _model().fit(X, y)
    assert scorer(model, X, y) == pytest.approx(OURS[name][0](model, X, y))
    assert repr(scorer) == f"CalibrationScorer({OURS[name][1].__name__})"


def test_get_scorer_falls_back_to_sklearn():
    assert repr(get_scorer("neg_log_loss")) == repr(sklearn.metrics.get_scorer("neg_log_loss"))
    assert get_scorer(None) is None
    assert get_scorer(neg_expected_calibration_error) is neg_expected_calibration_error


def test_get_scorer_unknown_name():
    message = (
        "'neg_ece' is not a valid scoring value. Use one of nescal_sklearn's scorers "
        "['neg_classwise_calibration_error', 'neg_debiased_calibration_error', "
        "'neg_expected_calibration_error', 'neg_local_calibration_error', "
        "'neg_maximum_calibration_error', 'neg_refinement_log_loss'] or a name from "
        "sklearn.metrics.get_scorer_names()."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        get_scorer("neg_ece")


def test_names_are_ours_only():
    assert set(OURS) <= set(get_scorer_names())
    assert "neg_log_loss" in get_scorer_names()
    assert not set(OURS) & set(sklearn.metrics.get_scorer_names())


@pytest.mark.determinism
def test_scorers_pickle(iris):
    X, y = iris
    model = _model().fit(X, y)
    for scorer, _ in OURS.values():
        restored = pickle.loads(pickle.dumps(scorer))
        assert restored(model, X, y) == pytest.approx(scorer(model, X, y))


def test_get_scorer_unknown_numpy_string_name_prints_plainly():
    with pytest.raises(ValueError, match=f"^{re.escape(repr('neg_ece'))} is not a valid"):
        get_scorer(np.str_("neg_ece"))


def test_scorers_are_our_own_class_not_sklearns():
    for scorer, metric in OURS.values():
        assert type(scorer) is CalibrationScorer
        assert scorer.metric is metric and scorer.metric_params == {}
        assert all(not cls.__module__.startswith("sklearn") for cls in type(scorer).__mro__)


def test_check_scoring_accepts_ours_alone_and_in_a_dict(iris):
    X, y = iris
    model = _model().fit(X, y)
    assert check_scoring(model, scoring=neg_expected_calibration_error) is (
        neg_expected_calibration_error
    )
    multi = check_scoring(model, scoring={"ece": neg_expected_calibration_error, "acc": "accuracy"})
    scores = multi(model, X, y)
    assert scores["ece"] == -expected_calibration_error(y, model.predict_proba(X))


def test_multimetric_sample_weight_without_routing(iris):
    # scikit-learn's multi-metric scorer passes sample_weight on to the scorers that
    # take it (without metadata routing), as permutation_importance does.
    X, y = iris
    model = _model().fit(X, y)
    weights = np.random.default_rng(1).uniform(0.1, 2.0, size=y.shape[0])
    multi = check_scoring(model, scoring={"ece": neg_expected_calibration_error, "acc": "accuracy"})
    scores = multi(model, X, y, sample_weight=weights)
    by_hand = -expected_calibration_error(y, model.predict_proba(X), sample_weight=weights)
    assert scores["ece"] == by_hand


def test_score_equals_the_metric_of_predict_proba_exactly(breast_cancer):
    # GaussianNB's binary rows do not sum to exactly 1; the scorer scores the two
    # columns predict_proba returns, as a call of the metric by hand does.
    X, y = breast_cancer
    model = GaussianNB().fit(X, y)
    proba = model.predict_proba(X)
    for scorer, metric in OURS.values():
        assert scorer(model, X, y) == -metric(y, proba, labels=model.classes_)


def test_calibration_scorer_with_metric_params(iris):
    X, y = iris
    model = _model().fit(X, y)
    scorer = CalibrationScorer(expected_calibration_error, n_bins=5, strategy="quantile")
    assert (
        repr(scorer)
        == "CalibrationScorer(expected_calibration_error, n_bins=5, strategy='quantile')"
    )
    by_hand = -expected_calibration_error(y, model.predict_proba(X), n_bins=5, strategy="quantile")
    assert scorer(model, X, y) == by_hand
    assert CalibrationScorer(log_loss)(model, X, y) == pytest.approx(
        -log_loss(y, model.predict_proba(X))
    )


def test_multimetric_grid_search_refits_on_ours(iris):
    X, y = iris
    scoring = {"ece": neg_expected_calibration_error, "nll": "neg_log_loss"}
    search = GridSearchCV(
        _model(), {"logisticregression__C": [0.01, 10.0]}, scoring=scoring, refit="ece", cv=3
    ).fit(X, y)
    best = int(np.argmax(search.cv_results_["mean_test_ece"]))
    assert search.best_index_ == best
    assert search.best_score_ == search.cv_results_["mean_test_ece"][best]


def test_metadata_routing_of_sample_weight(iris):
    X, y = iris
    weights = np.random.default_rng(2).uniform(0.1, 2.0, size=y.shape[0])
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = get_scorer("neg_expected_calibration_error").set_score_request(sample_weight=True)
        model = LogisticRegression(max_iter=1000).set_fit_request(sample_weight=False)
        result = cross_validate(
            model,
            X,
            y,
            cv=cv,
            scoring={"ece": scorer},
            params={"sample_weight": weights},
            return_estimator=True,
        )
    for k, (_, test) in enumerate(cv.split(X, y)):
        proba = result["estimator"][k].predict_proba(X[test])
        by_hand = -expected_calibration_error(y[test], proba, sample_weight=weights[test])
        assert result["test_ece"][k] == by_hand


def test_set_score_request_needs_routing():
    message = (
        "This method is only available when metadata routing is enabled. You can enable "
        "it using sklearn.set_config(enable_metadata_routing=True)."
    )
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        get_scorer("neg_expected_calibration_error").set_score_request(sample_weight=True)


def test_estimator_without_predict_proba(iris):
    X, y = iris
    message = (
        "CalibrationScorer(expected_calibration_error) needs an estimator with a "
        "predict_proba method; got LinearRegression, which has none."
    )
    with pytest.raises(AttributeError, match=f"^{re.escape(message)}$"):
        neg_expected_calibration_error(LinearRegression().fit(X, y), X, y)


# ------------------------------------------------------- debiased calibration error scorer


def test_grid_search_debiased_matches_metric_by_hand(iris):
    X, y = iris
    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    grid = {"logisticregression__C": [0.01, 1.0, 100.0]}
    search = GridSearchCV(_model(), grid, scoring=neg_debiased_calibration_error, cv=cv)
    search.fit(X, y)
    for i, params in enumerate(search.cv_results_["params"]):
        for k, (train, test) in enumerate(cv.split(X, y)):
            model = clone(_model()).set_params(**params).fit(X[train], y[train])
            proba = model.predict_proba(X[test])
            by_hand = -debiased_calibration_error(y[test], proba, labels=model.classes_)
            assert search.cv_results_[f"split{k}_test_score"][i] == pytest.approx(by_hand)
    assert np.all(search.cv_results_["mean_test_score"] <= 0)
    best = int(np.argmax(search.cv_results_["mean_test_score"]))
    assert search.best_params_ == search.cv_results_["params"][best]


def test_grid_search_debiased_by_name_with_squared_variant(breast_cancer):
    X, y = breast_cancer
    cv = KFold(3, shuffle=True, random_state=0)
    squared = CalibrationScorer(debiased_calibration_error, squared=True, n_bins=10)
    search = GridSearchCV(
        _model(),
        {"logisticregression__C": [0.01, 1.0]},
        scoring={"l2": get_scorer("neg_debiased_calibration_error"), "sq": squared},
        refit="l2",
        cv=cv,
    ).fit(X, y)
    for k, (train, test) in enumerate(cv.split(X, y)):
        model = clone(_model()).set_params(**search.cv_results_["params"][0])
        proba = model.fit(X[train], y[train]).predict_proba(X[test])
        by_hand = -debiased_calibration_error(y[test], proba, squared=True, n_bins=10)
        assert search.cv_results_[f"split{k}_test_sq"][0] == pytest.approx(by_hand)
    assert search.best_index_ == int(np.argmax(search.cv_results_["mean_test_l2"]))


def test_sklearn_does_not_know_our_names_so_pass_the_object_or_get_scorer(iris):
    # What docs/metrics.md and the scorers docstring say: a plain string fails.
    X, y = iris
    with pytest.raises(ValueError, match="The 'scoring' parameter of GridSearchCV"):
        GridSearchCV(
            _model(), {"logisticregression__C": [1.0]}, scoring="neg_expected_calibration_error"
        ).fit(X, y)
    by_object = GridSearchCV(
        _model(), {"logisticregression__C": [1.0]}, scoring=neg_expected_calibration_error, cv=3
    ).fit(X, y)
    by_name = GridSearchCV(
        _model(),
        {"logisticregression__C": [1.0]},
        scoring=get_scorer("neg_expected_calibration_error"),
        cv=3,
    ).fit(X, y)
    assert by_object.best_score_ == by_name.best_score_
