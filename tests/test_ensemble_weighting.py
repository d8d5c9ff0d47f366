"""The member-weighting rules of CrossFitClassifier (issue 45): the best prefix of the
greedy additions, the one-standard-error gate, and the logistic-regression stacker.

The greedy rules are checked on hand-built probabilities whose NLLs and standard errors
the tests compute themselves with numpy; the stacker on small data sets, against the
members' out-of-fold probabilities rebuilt from the fold models.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import make_classification
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nescal_sklearn.ensemble import (
    CrossFitClassifier,
    greedy_ensemble_weights,
    stacker_features,
    stacker_proba,
)
from nescal_sklearn.model_selection import estimator_logits

pytestmark = pytest.mark.numerical


def _lr():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def _nll(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    return -np.log(proba[np.arange(y.size), y])


def _binary(p_true: np.ndarray) -> np.ndarray:
    """Probabilities of rows of class 0 whose true-class probability is ``p_true``."""
    return np.column_stack([p_true, 1 - p_true])


def _member_oof(model: CrossFitClassifier, X: np.ndarray) -> list[np.ndarray]:
    """Each member's out-of-fold probabilities, rebuilt from the fold models."""
    probas = []
    for m in range(len(model.estimators)):
        proba = np.empty((X.shape[0], model.classes_.size))
        for models, test in zip(model.estimators_, model.folds_, strict=True):
            proba[test] = softmax(estimator_logits(models[m], X[test], proba.shape[1])[0], axis=1)
        probas.append(proba)
    return probas


# -- best prefix ---------------------------------------------------------------------------


def test_best_prefix_keeps_the_additions_before_the_ensemble_got_worse():
    # Rows of class 0; a is right on rows 0-1, b on rows 2-3, c is uninformative.
    y = np.zeros(4, dtype=int)
    a = _binary(np.array([0.9, 0.9, 0.1, 0.1]))
    b = _binary(np.array([0.1, 0.1, 0.9, 0.9]))
    c = _binary(np.full(4, 0.3))
    # Additions: a (a and b tie, the earlier wins), then b (the 1:1 mix gives 0.5 on every
    # row), then a and b alternate: an odd count leaves the mix uneven, 13 a to 12 b.
    greedy = greedy_ensemble_weights([a, b, c], y, size=25)
    np.testing.assert_allclose(greedy, [13 / 25, 12 / 25, 0.0])
    best = greedy_ensemble_weights([a, b, c], y, size=25, rule="best_prefix")
    np.testing.assert_allclose(best, [0.5, 0.5, 0.0])
    # By hand: the 1:1 mix has NLL ln 2, the full 13:12 mix more, a alone more still.
    nll = {
        k: _nll(np.einsum("m,mnc->nc", w, np.stack([a, b, c])), y).mean()
        for k, w in {1: [1, 0, 0], 2: [0.5, 0.5, 0], 25: [0.52, 0.48, 0]}.items()
    }
    assert nll[2] == pytest.approx(np.log(2))
    assert nll[2] < nll[25] < nll[1]


def test_best_prefix_equals_greedy_when_every_addition_helps_or_ties():
    # The hand-worked case of tests/test_crossfit.py: NLL 0.655, 0.555, 0.549 falls.
    y = np.array([0, 0])
    a = np.array([[0.9, 0.1], [0.2, 0.8]])
    b = np.array([[0.3, 0.7], [0.9, 0.1]])
    c = np.array([[0.5, 0.5], [0.5, 0.5]])
    steps = [[0, 1, 0], [1, 1, 0], [1, 2, 0]]
    nll = [
        _nll(np.einsum("m,mnc->nc", np.divide(n, sum(n)), np.stack([a, b, c])), y).mean()
        for n in steps
    ]
    assert nll[0] > nll[1] > nll[2]
    for rule in ("greedy", "best_prefix"):
        np.testing.assert_allclose(
            greedy_ensemble_weights([a, b, c], y, size=3, rule=rule), [1 / 3, 2 / 3, 0.0]
        )
    # One member best on its own: every addition repeats it, the NLL stays; prefix 1.
    dominant = [_binary(np.full(2, 0.8)), _binary(np.full(2, 0.6))]
    assert greedy_ensemble_weights(dominant, y, size=25, rule="best_prefix").tolist() == [1, 0]
    assert greedy_ensemble_weights(dominant, y, size=25).tolist() == [1, 0]


# -- one standard error --------------------------------------------------------------------


def _gain_and_se(before, after, y, w):
    d = _nll(before, y) - _nll(after, y)
    mean = np.sum(w * d) / np.sum(w)
    sd = np.sqrt(np.sum(w * (d - mean) ** 2) / np.sum(w))
    return mean, sd / np.sqrt(np.sum(w) ** 2 / np.sum(w**2))


def test_one_se_gate_keeps_out_a_member_whose_gain_is_within_noise():
    # 40 rows of class 0. a gives the true class 0.7 everywhere; b 0.99 on half the rows
    # and 0.47 on the others: mixing it in helps on average, but by less than its noise.
    y = np.zeros(40, dtype=int)
    a = _binary(np.full(40, 0.7))
    b = _binary(np.where(np.arange(40) < 20, 0.99, 0.47))
    gain, se = _gain_and_se(a, (a + b) / 2, y, np.ones(40))
    assert 0 < gain < se  # about 0.005 against 0.029
    assert greedy_ensemble_weights([a, b], y)[1] > 0
    assert greedy_ensemble_weights([a, b], y, rule="greedy_1se").tolist() == [1, 0]
    # Weights 3 on the rows b helps: the weighted gain is beyond its weighted error.
    w = np.where(np.arange(40) < 20, 3.0, 1.0)
    gain, se = _gain_and_se(a, (a + b) / 2, y, w)
    assert gain > se
    assert greedy_ensemble_weights([a, b], y, w, rule="greedy_1se")[1] > 0


def test_one_se_gate_lets_a_clearly_useful_member_in():
    # a right on the first 20 rows, b on the last 20: their mix is better beyond noise.
    y = np.zeros(40, dtype=int)
    a = _binary(np.where(np.arange(40) < 20, 0.9, 0.3))
    b = _binary(np.where(np.arange(40) < 20, 0.3, 0.9))
    gain, se = _gain_and_se(a, (a + b) / 2, y, np.ones(40))
    assert gain > se
    gated = greedy_ensemble_weights([a, b], y, rule="greedy_1se")
    assert gated[1] > 0
    np.testing.assert_array_equal(gated, greedy_ensemble_weights([a, b], y))


def test_an_unknown_rule_is_refused():
    y = np.array([0, 1])
    with pytest.raises(ValueError, match=r"rule must be one of .*; got 'best'\."):
        greedy_ensemble_weights([np.eye(2), np.eye(2)], y, rule="best")


# -- the estimator's parameter -------------------------------------------------------------


@pytest.fixture(scope="module")
def three_classes():
    X, y = make_classification(
        900, 8, n_informative=5, n_classes=3, n_clusters_per_class=1, random_state=0
    )
    return train_test_split(X, y, test_size=300, random_state=0, stratify=y)


def _members(noise: bool = False):
    members = [("lr", _lr()), ("nb", GaussianNB())]
    return members + [("noise", DummyClassifier(strategy="stratified"))] if noise else members


def test_greedy_is_the_default_bit_for_bit(three_classes):
    X, X_test, y, _ = three_classes
    default = CrossFitClassifier(_members(), cv=3, random_state=0).fit(X, y)
    greedy = CrossFitClassifier(_members(), cv=3, random_state=0, weighting="greedy").fit(X, y)
    np.testing.assert_array_equal(default.weights_, greedy.weights_)
    np.testing.assert_array_equal(default.predict_proba(X_test), greedy.predict_proba(X_test))
    assert default.stacker_ is None


@pytest.mark.parametrize("rule", ["best_prefix", "greedy_1se"])
def test_the_greedy_rules_weigh_the_members_out_of_fold(three_classes, rule):
    X, _, y, _ = three_classes
    model = CrossFitClassifier(
        _members(noise=True), cv=3, random_state=0, weighting=rule, ensemble_size=10
    ).fit(X, y)
    expected = greedy_ensemble_weights(_member_oof(model, X), y, size=10, rule=rule)
    np.testing.assert_allclose(model.weights_, expected)


def test_an_unknown_weighting_is_refused_by_name(three_classes):
    X, _, y, _ = three_classes
    model = CrossFitClassifier(_members(), weighting="foo")
    with pytest.raises(ValueError, match=r"'weighting' parameter .* Got 'foo' instead"):
        model.fit(X, y)


# -- the stacker ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stacked(three_classes):
    X, _, y, _ = three_classes
    return CrossFitClassifier(_members(), cv=3, random_state=0, weighting="stacker").fit(X, y)


def test_the_stacker_predicts_probabilities_and_pickles(stacked, three_classes):
    _, X_test, _, _ = three_classes
    proba = stacked.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(stacked.weights_, [0.5, 0.5])
    # The stacker reads the two members' three centred logits each.
    assert stacked.stacker_.n_features_in_ == 6
    restored = pickle.loads(pickle.dumps(stacked))
    np.testing.assert_array_equal(restored.predict_proba(X_test), proba)


def test_the_map_sees_only_held_out_stacker_probabilities():
    # Labels independent of the features: the members' out-of-fold probabilities carry
    # no signal, and the stacker's 12 coefficients fit noise in sample. Its held-out
    # probabilities, which the map is chosen on, must show that: worse than in sample.
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 4)), rng.integers(0, 3, 300)
    model = CrossFitClassifier(
        _members(), cv=3, random_state=0, weighting="stacker", calibration="identity"
    ).fit(X, y)
    features = stacker_features(_member_oof(model, X))
    in_sample = _nll(stacker_proba(model.stacker_, features, 3), y).mean()
    held_out = _nll(model.oof_proba_, y).mean()
    assert model.calibration_scores_["identity"] == pytest.approx(held_out)
    # In sample the stacker beats the best constant (the class shares) on pure noise;
    # a map fitted on those probabilities would have held-out NLL equal to it.
    prior = -np.mean(np.log(np.bincount(y)[y] / y.size))
    assert in_sample < prior
    assert held_out > in_sample


def test_the_stacker_refits_reads_the_kept_members_and_takes_sample_weights(stacked, three_classes):
    X, X_test, y, _ = three_classes
    params = dict(cv=3, random_state=0, weighting="stacker")
    # prune drops the noise member on the first fold: weight 0, the stacker never reads it.
    pruned = CrossFitClassifier(_members(noise=True), prune=True, refit=True, **params)
    pruned.fit(X, y)
    assert set(pruned.dropped_) == {"noise"} and pruned.estimators_ is None
    np.testing.assert_array_equal(pruned.weights_, [0.5, 0.5, 0.0])
    assert pruned.refitted_[2] is None and pruned.stacker_.n_features_in_ == 6
    # The same folds give the kept members the same out-of-fold logits: the same stacker
    # as without the noise member; refitted members predict about as their fold models.
    np.testing.assert_allclose(pruned.stacker_[-1].coef_, stacked.stacker_[-1].coef_)
    proba = pruned.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.abs(proba - stacked.predict_proba(X_test)).mean() < 0.02
    # Equal weights are no weights; unequal ones change the stacker.
    plain = stacked  # the same parameters, no weights
    equal = CrossFitClassifier(_members(), **params).fit(X, y, sample_weight=np.full(y.size, 3.0))
    np.testing.assert_allclose(equal.predict_proba(X_test), plain.predict_proba(X_test), atol=1e-6)
    w = np.where(y == 0, 4.0, 1.0)
    weighted = CrossFitClassifier(_members(), **params).fit(X, y, sample_weight=w)
    assert not np.allclose(weighted.stacker_[-1].coef_, plain.stacker_[-1].coef_, atol=1e-3)
    assert weighted.predict_proba(X_test)[:, 0].mean() > plain.predict_proba(X_test)[:, 0].mean()


def test_the_stacker_ignores_a_noise_member():
    X, y = make_classification(
        3000, 8, n_informative=5, n_classes=3, n_clusters_per_class=1, random_state=0
    )
    X, X_test, y, y_test = train_test_split(X, y, test_size=1000, random_state=0, stratify=y)
    stacked = CrossFitClassifier(
        _members(noise=True), cv=3, random_state=0, weighting="stacker"
    ).fit(X, y)
    # Standardised coefficients (one per member and class, in member order): the noise
    # member's one-hot guesses get at most 0.2, 4 standard errors of the coefficient of a
    # feature unrelated to y at 2,000 rows (about 1 / sqrt(2000 * 0.2)), the members'
    # logits 1 or more.
    coef = np.abs(stacked.stacker_[-1].coef_)
    assert coef[:, 6:].max() < 0.2 < 1 < coef[:, :6].max()
    # Its test NLL is not worse than the best single member's (cross-fitted and
    # calibrated the same way) beyond 2 standard errors of the paired per-row difference
    # plus the expected excess of its fit, about p / (2 n) nats for p = 20 free
    # coefficients on n = 2,000 rows (0.005).
    singles = [CrossFitClassifier([m], cv=3, random_state=0).fit(X, y) for m in _members()]
    best = min((_nll(s.predict_proba(X_test), y_test) for s in singles), key=np.mean)
    diff = _nll(stacked.predict_proba(X_test), y_test) - best
    assert diff.mean() <= 2 * diff.std() / np.sqrt(diff.size) + 20 / (2 * 2000)
