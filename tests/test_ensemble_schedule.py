"""CrossFitClassifier's staged fits: the first fold first, members of no weight dropped,
a wall-clock budget, progress lines (``ensemble/_schedule.py``)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nescal_sklearn.ensemble import CrossFitClassifier


def _lr():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


class Backwards(ClassifierMixin, BaseEstimator):
    """A logistic regression whose probabilities are reversed: never worth any weight."""

    def fit(self, X, y):
        self.model_ = _lr().fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)[:, ::-1]


class Slow(ClassifierMixin, BaseEstimator):
    """A logistic regression that takes ``seconds`` to fit, and cannot stop sooner."""

    def __init__(self, seconds=0.3):
        self.seconds = seconds

    def _took(self) -> float:
        return self.seconds

    def fit(self, X, y):
        self.started_ = time.perf_counter()
        self.took_ = self._took()
        time.sleep(self.took_)
        self.model_ = _lr().fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)


class Stoppable(Slow):
    """:class:`Slow`, but it stops after ``time_limit`` seconds, as NeSCalClassifier can."""

    def __init__(self, seconds=0.3, time_limit=None):
        super().__init__(seconds)
        self.time_limit = time_limit

    def _took(self) -> float:
        return self.seconds if self.time_limit is None else min(self.seconds, self.time_limit)


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(return_X_y=True)


def test_a_member_of_no_weight_on_the_first_fold_is_fitted_once(cancer):
    X, y = cancer
    model = CrossFitClassifier(
        [("lr", _lr()), ("bad", Backwards())], cv=4, random_state=0, prune=True
    )
    model.fit(X, y)
    assert model.dropped_ == {
        "bad": "weight 0 in the greedy selection on the first fold's held-out rows"
    }
    assert model.weights_.tolist() == [1.0, 0.0]
    assert [models[1] is None for models in model.estimators_] == [True] * 4
    assert np.isfinite(model.fit_seconds_[0]).all() and np.isnan(model.fit_seconds_[1:, 1]).all()
    # The same ensemble as the good member alone: the same folds, seeds and weights.
    alone = CrossFitClassifier([("lr", _lr())], cv=4, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), alone.predict_proba(X))
    # Without pruning (the default), the bad member is fitted on every fold, at weight 0.
    unpruned = CrossFitClassifier([("lr", _lr()), ("bad", Backwards())], cv=4, random_state=0)
    unpruned.fit(X, y)
    assert unpruned.dropped_ == {} and all(m[1] is not None for m in unpruned.estimators_)


def test_the_time_limit_keeps_the_folds_that_finished(cancer):
    X, y = cancer
    # Fits of 1 s on one worker, 90 % of 3 s for them: on an idle machine the fits start
    # at 0 and 1 s; the third, at 2 s, would end at 3 s, after the deadline at 2.7 s.
    model = CrossFitClassifier([("slow", Slow(seconds=1.0))], cv=5, random_state=0, time_limit=3.0)
    start = time.perf_counter()
    with pytest.warns(UserWarning, match=r"time_limit=3\.0 s ran out after") as caught:
        model.fit(X, y)
    elapsed = time.perf_counter() - start
    # The rule, whatever the machine's load: a fit that cannot stop starts only when its
    # member's mean fit so far (1 s) lets it end by the deadline, so every kept fit after
    # the first ended by then, and one more would not have.
    starts = [models[0].started_ - start for models in model.estimators_]
    n = len(starts)
    assert f"ran out after {n} of 5 folds" in str(caught[0].message) and 1 <= n <= 2
    assert n == 1 or max(starts) + 1.0 <= 0.9 * 3.0 * 1.02  # its sleep, a little over 1 s
    # No fit overruns the deadline but the first, needed one; then the weights and map.
    assert elapsed < max(0.9 * 3.0, starts[0] + 1.0) + 1.0
    assert model.timed_out_ and len(model.estimators_) == len(model.folds_) == n
    held_out = np.concatenate(model.folds_)
    assert np.isfinite(model.oof_proba_[held_out]).all()
    assert np.isnan(np.delete(model.oof_proba_, held_out, axis=0)).all()
    proba = model.predict_proba(X[:5])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_a_member_that_stops_on_time_gets_its_share_of_the_budget(cancer):
    X, y = cancer
    # 5 folds on one worker: the first fold's fit, then four more, each at most a fifth
    # of the 90 % of the time limit that the fits may take.
    model = CrossFitClassifier(
        [("slow", Stoppable(seconds=5.0))], cv=5, random_state=0, time_limit=3.0
    ).fit(X, y)
    took = [models[0].took_ for models in model.estimators_]
    assert len(took) == 5 and not model.timed_out_
    assert took[0] == pytest.approx(0.9 * 3.0 / 5, rel=0.1)
    assert sum(took) <= 0.9 * 3.0 * 1.05


def test_verbose_prints_a_line_per_fit_and_is_quiet_by_default(cancer, capsys):
    X, y = cancer
    members = [("lr", _lr()), ("bad", Backwards())]
    CrossFitClassifier(members, cv=3, random_state=0, prune=True).fit(X, y)
    assert capsys.readouterr().out == ""
    CrossFitClassifier(members, cv=3, random_state=0, prune=True, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    pattern = (
        r"\[CrossFitClassifier\] (lr|bad) on fold (\d)/3: \d+\.\d s; (\d) of (\d) fits, "
        r"\d+ s elapsed, about \d+ s to go"
    )
    fits = [re.fullmatch(pattern, line) for line in lines if "on fold" in line]
    assert all(fits) and len(fits) == 4
    assert [int(match.group(3)) for match in fits] == [1, 2, 3, 4]
    assert [int(match.group(4)) for match in fits] == [6, 6, 4, 4]
    assert lines[2] == "[CrossFitClassifier] first fold's weights: lr 1.00, bad 0.00; dropping bad"


def test_without_a_screen_a_worker_starts_a_later_fold_before_the_first_fold_ends(cancer):
    from joblib import parallel_config

    X, y = cancer
    # Two threads: one fits "slow" on the first fold (1 s); the other fits "bad" there,
    # then, with no screen to wait for, "slow" on the second fold. With the screen
    # (prune=True) the later folds wait for it: no fit of a member it may drop ("bad").
    members = [("slow", Slow(seconds=1.0)), ("bad", Backwards())]
    with parallel_config(backend="threading"):
        queue = CrossFitClassifier(members, cv=3, random_state=0, n_jobs=2).fit(X, y)
        staged = CrossFitClassifier(members, cv=3, random_state=0, n_jobs=2, prune=True)
        staged.fit(X, y)
    for model in (queue, staged):
        first, second = model.estimators_[0][0], model.estimators_[1][0]
        assert (second.started_ < first.started_ + first.took_) == (model is queue)
    assert staged.dropped_ == {
        "bad": "weight 0 in the greedy selection on the first fold's held-out rows"
    }
    # the same ensembles as fitted on one worker, fold after fold
    for prune, model in ((False, queue), (True, staged)):
        alone = CrossFitClassifier(members, cv=3, random_state=0, prune=prune).fit(X, y)
        np.testing.assert_array_equal(model.predict_proba(X), alone.predict_proba(X))


# -- gradient boosting on time -------------------------------------------------------------


@pytest.mark.parametrize("first", [1, 10, "its trees"])
def test_boosting_on_time_given_the_time_grows_the_trees_of_one_fit(first, monkeypatch):
    from sklearn.datasets import load_digits
    from sklearn.ensemble import HistGradientBoostingClassifier

    from nescal_sklearn.ensemble import _budget

    X, y = load_digits(return_X_y=True)
    train, test = np.arange(len(y)) % 4 != 0, np.arange(len(y)) % 4 == 0
    rows = dict(X_val=X[test], y_val=y[test])  # as CrossFitClassifier's folds give them
    params = dict(early_stopping=True, max_features=0.8, random_state=3)  # feature sampling
    one = HistGradientBoostingClassifier(**params).fit(X[train], y[train], **rows)
    assert one.n_iter_ < one.max_iter  # early stopping ended it
    # "its trees": the first round ends at the tree where early stopping ends one fit, so
    # only the rule on the scores (not the round's own end) stops it there
    monkeypatch.setattr(_budget, "FIRST_TREES", one.n_iter_ if first == "its trees" else first)
    member = HistGradientBoostingClassifier(**params)
    rounds = _budget.OnTime(member, 1e9).fit(clone(member), X[train], y[train], **rows)
    assert rounds.n_iter_ == one.n_iter_
    assert rounds.get_params() == one.get_params()  # warm_start and max_iter given back
    # the same trees, their leaf values summed in the same order: equal probabilities
    np.testing.assert_array_equal(rounds.predict_proba(X), one.predict_proba(X))


def test_boosting_on_time_adds_no_tree_after_its_seconds():
    from sklearn.datasets import make_classification
    from sklearn.ensemble import HistGradientBoostingClassifier

    from nescal_sklearn.ensemble._budget import OnTime

    X, y = make_classification(20_000, 20, n_informative=10, n_classes=3, random_state=0)
    member = HistGradientBoostingClassifier(early_stopping=False, max_iter=100_000)
    start = time.perf_counter()
    model = OnTime(member, 1.0).fit(clone(member), X, y)
    took = time.perf_counter() - start
    # trees until the time ran out (100,000 would take minutes); a round is planned at
    # the pace of the trees so far, so it ends about on time: half a second of slack for
    # a busy machine's pace changing between rounds
    assert 10 <= model.n_iter_ < 100_000 and took < 1.5
    np.testing.assert_allclose(model.predict_proba(X[:3]).sum(axis=1), 1.0)


def test_a_boosting_member_keeps_the_time_limit(cancer):
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = cancer
    X = np.repeat(X, 10, axis=0) + np.random.default_rng(0).normal(0, 1e-3, (len(X) * 10, 30))
    y = np.repeat(y, 10)
    # 100,000 trees each fold would take minutes: on time, the 3 folds share 90 % of 4 s
    slow = HistGradientBoostingClassifier(early_stopping=False, max_iter=100_000)
    model = CrossFitClassifier([("hgb", slow)], cv=3, random_state=0, time_limit=4.0)
    start = time.perf_counter()
    model.fit(X, y)
    elapsed = time.perf_counter() - start
    assert not model.timed_out_ and elapsed < 4.0 * 1.05 + 0.5
    assert all(m[0].n_iter_ < 100_000 for m in model.estimators_)


# -- refit: one model per member ----------------------------------------------------------


def test_refit_serves_one_model_per_member_trained_as_its_fold_models(cancer):
    from sklearn.ensemble import HistGradientBoostingClassifier

    from nescal_sklearn.calibration import calibrate_probabilities

    X, y = cancer
    members = [("lr", _lr()), ("hgb", HistGradientBoostingClassifier(early_stopping=True))]
    cross = CrossFitClassifier(members, cv=3, random_state=0, prune=False).fit(X, y)
    lean = CrossFitClassifier(members, cv=3, random_state=0, prune=False, refit=True).fit(X, y)
    assert lean.estimators_ is None and cross.refitted_ is None
    np.testing.assert_array_equal(lean.weights_, cross.weights_)
    np.testing.assert_array_equal(lean.oof_proba_, cross.oof_proba_)
    lr, hgb = lean.refitted_
    # Gradient boosting: all rows, no early stopping, the mean of the folds' iterations.
    iterations = [models[1].n_iter_ for models in cross.estimators_]
    assert not hgb.early_stopping and hgb.n_iter_ == round(np.mean(iterations))
    # Trained on all rows: the same models as scikit-learn's fitted on every row (neither
    # draws a random number here: lbfgs, and boosting without early stopping or feature
    # subsampling), so one code path twice, bit for bit.
    alone = HistGradientBoostingClassifier(early_stopping=False, max_iter=hgb.n_iter_).fit(X, y)
    np.testing.assert_array_equal(hgb.predict_proba(X), alone.predict_proba(X))
    np.testing.assert_array_equal(lr[-1].coef_, _lr().fit(X, y)[-1].coef_)
    # Predictions: the map chosen out of fold, on the weighted refitted members.
    mean = lean.weights_[0] * lr.predict_proba(X[:9]) + lean.weights_[1] * hgb.predict_proba(X[:9])
    np.testing.assert_allclose(
        lean.predict_proba(X[:9]),
        calibrate_probabilities(lean.calibrator_, mean / lean.weights_.sum()),
        rtol=1e-9,
    )


class Counting(ClassifierMixin, BaseEstimator):
    """A logistic regression that records the rows it was fitted on."""

    def fit(self, X, y):
        self.n_rows_ = len(X)
        self.model_ = _lr().fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)


def test_refit_trains_each_member_of_weight_on_every_row(cancer):
    X, y = cancer
    members = [("a", Counting()), ("bad", Backwards())]
    cross = CrossFitClassifier(members, cv=4, random_state=0).fit(X, y)
    lean = CrossFitClassifier(members, cv=4, random_state=0, refit=True).fit(X, y)
    # the fold models trained without their fold; the refitted model on all 569 rows
    assert [models[0].n_rows_ for models in cross.estimators_] == [
        len(X) - len(test) for test in cross.folds_
    ]
    assert lean.weights_.tolist() == [1.0, 0.0]
    assert lean.refitted_[0].n_rows_ == len(X) and lean.refitted_[1] is None


def test_refit_with_a_time_limit_leaves_the_refits_their_share(cancer):
    X, y = cancer
    # Fits of 1 s on one worker, 65 % of 3 s for the cross-fitting (the refits take the
    # next 25 %): the first fold's fit ends at 1 s; the second would end at 2 s, after the
    # deadline at 1.95 s, so it does not start (without refit=True, 2.7 s: two folds).
    model = CrossFitClassifier(
        [("slow", Slow(seconds=1.0))], cv=5, random_state=0, time_limit=3.0, refit=True
    )
    start = time.perf_counter()
    with pytest.warns(UserWarning, match=r"time_limit=3\.0 s ran out after 1 of 5 folds"):
        model.fit(X, y)
    assert model.timed_out_ and model.estimators_ is None and len(model.folds_) == 1
    # The refit runs once the cross-fitting has stopped, and ends within the limit.
    (refitted,) = model.refitted_
    assert refitted.started_ - start >= 1.0
    assert refitted.started_ + 1.0 - start < 3.0
    held_out = np.concatenate(model.folds_)
    assert np.isnan(np.delete(model.oof_proba_, held_out, axis=0)).all()
    # the member is refitted on every row, the rows of the folds left out included
    np.testing.assert_array_equal(refitted.model_[-1].coef_, _lr().fit(X, y)[-1].coef_)
    np.testing.assert_allclose(model.predict_proba(X[:5]).sum(axis=1), 1.0)


def test_refit_trains_a_nescal_member_for_the_mean_of_its_best_epochs():
    from types import SimpleNamespace

    from nescal_sklearn import NeSCalClassifier, NeSCalLoss

    member = NeSCalClassifier(patience=10)

    def fold(best, graph, status):
        return SimpleNamespace(
            best_epoch_=best,
            n_epochs_=best + 10,
            loss_=NeSCalLoss(),
            graph_epoch_=graph,
            penalty_status_=status,
        )

    # Two of three fold models kept a penalised epoch: the warm-up is the mean of theirs.
    folds = [fold(20, 9, "penalised"), fold(31, 12, "penalised"), fold(6, 8, "warmup_checkpoint")]
    params = member.refit_params(folds)
    assert params["early_stopping"] is False and params["time_limit"] is None
    assert params["max_epochs"] == 19  # (20 + 31 + 6) / 3
    assert params["loss"].warmup == 10 and params["loss"].uses_neighbours  # (8 + 11) / 2
    # Most kept a warm-up epoch: the base loss trains the refit.
    folds = [fold(5, 9, "warmup_checkpoint"), fold(6, None, "no_graph"), fold(20, 9, "penalised")]
    params = member.refit_params(folds)
    assert params["max_epochs"] == 10 and not params["loss"].uses_neighbours
