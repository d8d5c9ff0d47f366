"""NeSCalClassifier.fit(sample_weight=...) and class_weight, end to end."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.datasets import load_iris, make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_sample_weight

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.exceptions import PenaltyInactiveWarning
from nescal_sklearn.losses import NeSCalLoss
from nescal_sklearn.metrics import refinement_log_loss

FAST = dict(hidden_sizes=(16,), max_epochs=6, random_state=0)
GRAPH = NeSCalLoss(warmup=2, n_neighbors=5)


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), y


def _fit(X, y, **kwargs):
    params = {**FAST, **{k: v for k, v in kwargs.items() if k in NeSCalClassifier().get_params()}}
    fit_params = {k: v for k, v in kwargs.items() if k not in params}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PenaltyInactiveWarning)
        return NeSCalClassifier(**params).fit(X, y, **fit_params)


@pytest.mark.parametrize("loss", ["ce", GRAPH, "mmce", "label_smoothing"])
@pytest.mark.parametrize("weight", [1.0, 3.5])
def test_constant_weights_are_exactly_the_unweighted_fit(iris, loss, weight):
    X, y = iris
    plain = _fit(X, y, loss=loss)
    weighted = _fit(X, y, loss=loss, sample_weight=np.full(len(y), weight))
    # exact: equal weights take the unweighted code path (_training_weights is None)
    np.testing.assert_array_equal(plain.predict_proba(X), weighted.predict_proba(X))
    assert plain.history_[:, "valid_nll"] == weighted.history_[:, "valid_nll"]


def test_balanced_class_weight_is_the_balanced_sample_weight(iris):
    X, y = iris
    rows = np.r_[0:50, 50:70, 100:150]  # imbalanced: 50 / 20 / 50
    by_class = _fit(X[rows], y[rows], loss=GRAPH, class_weight="balanced")
    by_row = _fit(
        X[rows], y[rows], loss=GRAPH, sample_weight=compute_sample_weight("balanced", y[rows])
    )
    # exact: class_weight='balanced' becomes these same row weights, so the same fit
    np.testing.assert_array_equal(by_class.predict_proba(X), by_row.predict_proba(X))


def test_dict_class_weight_multiplies_sample_weight(iris):
    X, y = iris
    rng = np.random.default_rng(0)
    sw = rng.uniform(0.5, 2.0, len(y))
    combined = _fit(X, y, class_weight={0: 2.0, 2: 0.5}, sample_weight=sw)
    expected = sw * np.select([y == 0, y == 2], [2.0, 0.5], 1.0)
    by_row = _fit(X, y, sample_weight=expected)
    # exact: sw * class weight, one product per row on both sides: the same weights
    np.testing.assert_array_equal(combined.predict_proba(X), by_row.predict_proba(X))


def test_weights_change_the_fit(iris):
    X, y = iris
    settings = dict(loss=GRAPH, early_stopping=False, max_epochs=15, lr=1e-2)
    plain = _fit(X, y, **settings)
    weighted = _fit(X, y, **settings, sample_weight=np.where(y == 1, 10.0, 1.0))
    assert weighted.predict_proba(X)[:, 1].mean() > plain.predict_proba(X)[:, 1].mean() + 0.05


@pytest.mark.parametrize("loss", ["ce", NeSCalLoss(warmup=5, n_neighbors=5)])
def test_integer_weights_match_repeated_rows_in_expectation(loss):
    """Weight 3 on class 1 against class-1 rows repeated three times, same number of steps.

    Measured (3 seeds each, CE, max over rows of the seed-mean probability): weighted vs
    repeated 0.032, unweighted vs repeated 0.35, seed-to-seed std of a row 0.006-0.008.
    """
    X, y = make_classification(
        300, 5, n_informative=3, n_redundant=0, class_sep=0.5, random_state=0
    )
    X = X.astype(np.float32)
    w = np.where(y == 1, 3, 1)
    X_rep, y_rep = np.repeat(X, w, axis=0), np.repeat(y, w)
    epochs = 20
    steps_epochs = int(epochs * len(y_rep) / len(y))  # as many optimiser steps as repeated
    common = dict(loss=loss, hidden_sizes=(), early_stopping=False, lr=1e-2, batch_size=32)

    def mean_proba(X_fit, y_fit, max_epochs, sample_weight=None):
        probas = []
        for seed in range(3):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = NeSCalClassifier(**common, max_epochs=max_epochs, random_state=seed)
                model.fit(X_fit, y_fit, sample_weight=sample_weight)
            probas.append(model.predict_proba(X)[:, 1])
        return np.mean(probas, axis=0)

    repeated = mean_proba(X_rep, y_rep, epochs)
    weighted = mean_proba(X, y, steps_epochs, w)
    unweighted = mean_proba(X, y, steps_epochs)
    assert np.abs(weighted - repeated).max() < 0.06
    assert abs(weighted.mean() - repeated.mean()) < 0.015
    assert np.abs(unweighted - repeated).max() > 0.2  # the test can tell them apart


@pytest.mark.parametrize("criterion", ["nll", "refinement"])
def test_early_stopping_watches_the_weighted_validation_nll(iris, criterion):
    X, y = iris
    rng = np.random.default_rng(1)
    train, valid = np.arange(0, 150, 2), np.arange(1, 150, 2)
    w_val = rng.uniform(0.1, 3.0, len(valid))
    clf = _fit(
        X[train],
        y[train],
        early_stopping=criterion,
        max_epochs=8,
        X_val=X[valid],
        y_val=y[valid],
        sample_weight_val=w_val,
    )
    best = clf.best_epoch_ - 1
    proba = clf.predict_proba(X[valid])
    expected = log_loss(y[valid], proba, sample_weight=w_val)
    assert clf.history_[best, "valid_nll"] == pytest.approx(expected, rel=1e-5)
    refined = refinement_log_loss(y[valid], proba, sample_weight=w_val)
    assert clf.history_[best, "valid_refined_nll"] == pytest.approx(refined, rel=1e-4)
    unweighted = log_loss(y[valid], proba)
    assert abs(unweighted - expected) > 1e-4  # the weights did matter


def test_held_out_rows_keep_their_weights(iris):
    X, y = iris
    sw = np.where(np.arange(len(y)) % 3 == 0, 4.0, 1.0)
    clf = _fit(X, y, sample_weight=sw, max_epochs=3)
    assert np.isfinite(clf.history_[:, "valid_nll"]).all()


@pytest.mark.parametrize("mixup", [0.0, 0.4])
def test_weighted_nescal_and_mixup_fit(iris, mixup):
    X, y = iris
    clf = _fit(X, y, loss=GRAPH, mixup=mixup, sample_weight=np.linspace(0.1, 2.0, len(y)))
    assert clf.graph_epoch_ == 3
    np.testing.assert_allclose(clf.predict_proba(X).sum(1), 1.0, rtol=1e-6)


def test_routing_through_pipeline_and_grid_search(iris):
    X, y = iris
    sw = np.where(y == 2, 3.0, 1.0)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = (
            NeSCalClassifier(**FAST)
            .set_fit_request(sample_weight=True)
            .set_score_request(sample_weight=True)
        )
        pipe = make_pipeline(StandardScaler().set_fit_request(sample_weight=False), clf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PenaltyInactiveWarning)
            routed = pipe.fit(X, y, sample_weight=sw)
            search = GridSearchCV(pipe, {"nescalclassifier__lr": [1e-3]}, cv=2).fit(
                X, y, sample_weight=sw
            )
    direct = _fit(StandardScaler().fit_transform(X), y, sample_weight=sw)
    np.testing.assert_allclose(
        routed.predict_proba(X),
        direct.predict_proba(StandardScaler().fit(X).transform(X)),
        rtol=1e-5,
        atol=1e-6,
    )
    # The scores were computed (a routing error would leave them NaN with a warning).
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_legacy_pipeline_step_parameter(iris):
    X, y = iris
    sw = np.where(y == 2, 3.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PenaltyInactiveWarning)
        pipe = make_pipeline(NeSCalClassifier(**FAST)).fit(X, y, nescalclassifier__sample_weight=sw)
    # exact: the pipeline hands the estimator these same weights: the same fit
    np.testing.assert_array_equal(
        pipe.predict_proba(X), _fit(X, y, sample_weight=sw).predict_proba(X)
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sample_weight": -np.ones(150)}, "sample_weight: Negative values in data passed to"),
        (
            {"sample_weight": np.ones(5)},
            "sample_weight: sample_weight.shape == (5,), expected (150,)",
        ),
        ({"sample_weight": np.zeros(150)}, "sample_weight: Sample weights must contain at least"),
        (
            {"class_weight": {0: 0.0, 1: 0.0, 2: 0.0}},
            "sample_weight sums to zero (times class_weight): sample weights must contain",
        ),
        (
            {"sample_weight": np.r_[np.ones(50), np.zeros(100)]},
            "needs samples of at least 2 classes with a positive weight; sample_weight (times "
            "class_weight) leaves only class 0.",
        ),
        (
            {"class_weight": {0: 1.0, 7: 2.0}},
            "class_weight has labels that are not classes of y: [7]",
        ),
        ({"class_weight": {0: -1.0}}, "class_weight[0] must be a finite number >= 0; got -1.0."),
        (
            {"sample_weight_val": np.ones(3)},
            "sample_weight_val weighs the rows of X_val; it was passed without X_val and y_val.",
        ),
    ],
)
def test_bad_weights_raise_naming_the_value(iris, kwargs, message):
    X, y = iris
    with pytest.raises(ValueError, match=re.escape(message)):
        _fit(X, y, **kwargs)
