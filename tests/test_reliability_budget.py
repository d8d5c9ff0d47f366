"""The time budget and the refit of ``CrossFitClassifier`` on the cases of the reliability
review of b2ed419 (``reliability-b2ed419.md``, §4a and §4c: B08, B16, B17, B23, B32, P15,
and the warnings of worker processes) that gave an unclear error or a silently wrong
answer, each with the correct result or the full text of its error.

No test depends on the machine's speed: the members that take time sleep a fixed time,
and every limit either cannot be met whatever the speed (the time of the members that
cannot stop exceeds the deadline) or is far from binding.
"""

from __future__ import annotations

import re
import time
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.ensemble import CrossFitClassifier
from nescal_sklearn.exceptions import ParameterError


class Slow(ClassifierMixin, BaseEstimator):
    """A logistic regression whose fit takes ``seconds`` more, and cannot stop sooner."""

    def __init__(self, seconds=0.5):
        self.seconds = seconds

    def fit(self, X, y):
        time.sleep(self.seconds)
        self.model_ = LogisticRegression().fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)


class FailsOnMoreRows(Slow):
    """:class:`Slow` without the wait, whose fit fails from ``rows`` rows on (as a refit on
    all rows can where the folds' fits did not)."""

    def __init__(self, rows=100, parameter=False):
        super().__init__(seconds=0.0)
        self.rows = rows
        self.parameter = parameter

    def fit(self, X, y):
        if len(X) >= self.rows:
            message = f"{len(X)} rows are more than {self.rows}."
            raise ParameterError("rows", message) if self.parameter else ValueError(message)
        return super().fit(X, y)


def _net(**params):
    return NeSCalClassifier(hidden_sizes=(16,), random_state=0, **params)


def _timed_out(limit, finished, n_folds, held_out, n_rows):
    return re.escape(
        f"CrossFitClassifier: time_limit={limit} s ran out after {finished} of {n_folds} "
        f"folds; the model is the ensemble of those folds, weighted and calibrated on their "
        f"{held_out} held-out rows (oof_proba_ is NaN on the other {n_rows - held_out}). "
        "Pass a longer time_limit for every fold."
    )


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(return_X_y=True)


# -- a share too small is not started; the fit never fails for lack of time (B08, B17, B23) --


def test_a_network_whose_share_ran_out_is_not_started_and_the_fit_keeps_its_folds(cancer):
    """B17: an untimed member of 0.5 s per fit leaves the network no time after the first
    fold. At b2ed419 the whole fit raised: the network's later folds got max_time=0.0
    ("The 'max_time' parameter of NeSCalClassifier must be ... Got 0.0 instead."), or,
    where the first fits took long, "ran out before every member was fitted on one fold".
    Now those fits are not started, and the model is the first fold's."""
    X, y = cancer
    # The deadline is at 0.9 x 2 s = 1.8 s; the four later fits of "slow" are expected
    # to take 4 x 0.5 s = 2 s > 1.8 s, so no time is left for the network's later folds,
    # however fast the machine is.
    members = [("nn", _net(max_epochs=3)), ("slow", Slow(seconds=0.5))]
    model = CrossFitClassifier(members, cv=5, random_state=0, time_limit=2.0)
    with pytest.warns(UserWarning) as record:
        model.fit(X, y)
    held_out = model.folds_[0].size
    assert len(model.folds_) == 1 and model.timed_out_
    assert np.isfinite(model.fit_seconds_[0]).all() and np.isnan(model.fit_seconds_[1:, 0]).all()
    messages = [str(w.message) for w in record if "time_limit" in str(w.message)]
    assert len(messages) == 1
    assert re.fullmatch(_timed_out(2.0, 1, 5, held_out, len(y)), messages[0])
    proba = model.predict_proba(X[:7])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_a_limit_too_short_for_any_fit_still_gives_the_first_folds_model(cancer):
    """B07, B08, B23: at b2ed419 a limit shorter than the first fold raised ("ran out
    before every member was fitted on one fold", or the max_time=0.0 error for a
    network). Every member's first fold runs whatever the time (a network for at least a
    millisecond: one epoch), and the model is made of it."""
    X, y = cancer
    model = CrossFitClassifier(
        [("nn", _net(max_epochs=50, patience=False)), ("lr", LogisticRegression(max_iter=5000))],
        cv=3,
        random_state=0,
        time_limit=1e-9,
    )
    with pytest.warns(UserWarning) as record:
        model.fit(X, y)
    assert len(model.folds_) == 1
    messages = [str(w.message) for w in record if "time_limit" in str(w.message)]
    assert messages == [messages[0]]
    assert re.fullmatch(_timed_out(1e-09, 1, 3, model.folds_[0].size, len(y)), messages[0])
    network = model.estimators_[0][0]
    assert network.time_limit == 1e-3 and network.stopped_on_time_ and network.n_epochs_ == 1
    assert np.isfinite(model.predict_proba(X)).all()


# -- a member's own time limit (B32) ------------------------------------------------------


def test_a_member_keeps_its_own_time_limit_where_it_is_smaller_than_its_share(cancer):
    """B32 (``n6_member_max_time_overridden.py``): a network capped at 0.2 s trained 1.5 to
    2.5 s per fold under time_limit=30, its own limit replaced by its share. Now each
    fold keeps the smaller of the two."""
    X, y = cancer
    net = _net(max_epochs=100_000, patience=False, time_limit=0.2)
    model = CrossFitClassifier(
        [("nn", net), ("lr", LogisticRegression(max_iter=5000))],
        cv=3,
        random_state=0,
        time_limit=60.0,
    ).fit(X, y)
    networks = [models[0] for models in model.estimators_]
    assert [network.time_limit for network in networks] == [0.2, 0.2, 0.2]
    assert all(network.stopped_on_time_ for network in networks)
    assert not model.timed_out_


# -- few held-out rows after a time-out (B16) -----------------------------------------------


def test_a_time_out_that_leaves_two_held_out_rows_gives_a_model():
    """B16: a time-out after the first of 5 folds of 10 rows leaves 2 held-out rows, one
    per class. At b2ed419 the map's inner split raised scikit-learn's "n_splits=2 cannot
    be greater than the number of members in each class."."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(10, 3)), np.arange(10) % 2
    members = [("slow", Slow(seconds=1.0)), ("lr", LogisticRegression())]
    model = CrossFitClassifier(members, cv=5, random_state=0, time_limit=1.0)
    with pytest.warns(UserWarning, match=_timed_out(1.0, 1, 5, 2, 10)):
        model.fit(X, y)
    assert np.isfinite(model.oof_proba_).sum(axis=1).tolist().count(2) == 2
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_a_time_out_that_leaves_one_held_out_row_names_it():
    """At b2ed419 one held-out row gave a map chosen on uninitialised memory (a finite
    oof_proba_ of garbage, a NaN score); now a clear error."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(10, 3)), np.arange(10) % 2
    members = [("slow", Slow(seconds=1.0)), ("lr", LogisticRegression())]
    model = CrossFitClassifier(members, cv=KFold(10), random_state=0, time_limit=1.0)
    message = (
        "time_limit=1.0 s ran out after 1 of 10 folds, whose one held-out row cannot weigh "
        "the members and choose a map; pass a longer time_limit, or a cv of larger test "
        "parts."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        model.fit(X, y)


# -- warnings raised in worker processes ------------------------------------------------------


@pytest.mark.parametrize("refit", [False, True])
def test_warnings_of_member_fits_in_worker_processes_reach_the_user(cancer, refit):
    """At b2ed419, with n_jobs=2 the warnings of the member fits stayed in loky's
    workers, so the same fit warned or not by n_jobs; now each reaches the caller, at the
    place it was raised, as without workers."""
    X, y = cancer
    member = [("lr", LogisticRegression(max_iter=2))]
    seen = {}
    for n_jobs in (None, 2):
        model = CrossFitClassifier(member, cv=3, n_jobs=n_jobs, random_state=0, refit=refit)
        with pytest.warns(ConvergenceWarning) as record:
            model.fit(X, y)
        seen[n_jobs] = [
            (str(w.message), w.filename, w.lineno)
            for w in record
            if issubclass(w.category, ConvergenceWarning)
        ]
    assert len(seen[2]) == 3 + refit  # one per fold, and the refit's
    assert seen[2] == seen[None]
    assert seen[2][0][0].startswith("lbfgs failed to converge after 2 iteration(s)")


# -- the refit: the epochs its folds had, and errors that say it is the refit (P15) ---------


def test_the_refit_trains_the_epochs_its_folds_had_under_max_row_epochs():
    """P15: max_row_epochs=600 gives the folds' 240 training rows 3 epochs and all 300
    rows 2; with a fixed warm-up of 2 epochs, at b2ed419 the refit raised "loss__warmup=2
    ends the warm-up at epoch 3, after the last of the 2 epochs that max_row_epochs=600
    leaves for 300 training rows" after the cross-fitting (and with the default warm-up
    it trained fewer epochs than its folds, P15b). The refit now trains the mean of the
    folds' best epochs."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int)
    net = _net(max_row_epochs=600).set_params(loss__warmup=2)
    cross = CrossFitClassifier([("nn", net)], cv=5, random_state=0).fit(X, y)
    lean = CrossFitClassifier([("nn", net)], cv=5, random_state=0, refit=True).fit(X, y)
    best = [models[0].best_epoch_ for models in cross.estimators_]
    assert all(models[0].n_epochs_ == 3 for models in cross.estimators_)
    refitted = lean.refitted_[0]
    assert refitted.n_epochs_ == max(1, round(np.mean(best)))
    assert refitted.max_row_epochs is None and refitted.early_stopping is False


@pytest.mark.parametrize("parameter", [False, True])
def test_an_error_of_the_refit_says_it_is_the_refit(cancer, parameter):
    X, y = cancer
    member = FailsOnMoreRows(rows=len(y), parameter=parameter)
    model = CrossFitClassifier([("odd", member)], cv=3, random_state=0, refit=True)
    message = (
        f"refit=True: refitting member 'odd' on all {len(y)} rows failed, after its fold "
        f"models were fitted: {len(y)} rows are more than {len(y)}."
    )
    with pytest.raises(ParameterError if parameter else ValueError) as caught:
        model.fit(X, y)
    assert str(caught.value) == message
    if parameter:
        assert caught.value.param == "odd__rows"


# -- the recommended pipeline's limit counts its preprocessing ------------------------------


class SlowScaler(BaseEstimator):
    """A transformer whose fit takes ``seconds`` (a slow preprocessing step)."""

    def __init__(self, seconds=1.5):
        self.seconds = seconds

    def fit(self, X, y=None):
        time.sleep(self.seconds)
        return self

    def transform(self, X):
        return np.asarray(X, dtype=float)

    def fit_transform(self, X, y=None):
        return self.fit(X, y).transform(X)


def test_the_recommended_pipeline_s_limit_counts_its_preprocessing(cancer):
    from sklearn.pipeline import Pipeline

    from nescal_sklearn.ensemble import make_recommended_classifier

    X, y = cancer
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    model = make_recommended_classifier(random_state=0, time_limit=1.0).set_params(
        preprocess=SlowScaler(1.5), classifier__estimators=[("lr", LogisticRegression())]
    )
    plain = Pipeline(clone(model).steps)
    # 1.5 s of preprocessing pass the 1 s: the first fold only (it always runs)
    with pytest.warns(UserWarning, match=_timed_out(1.0, 1, 5, 114, 569)):
        model.fit(X, y)
    # the same steps in a plain Pipeline: the limit counts from the classifier's fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(plain.fit(X, y)[-1].folds_) == 5
    # another last step gets no started_at
    other = clone(model).set_params(preprocess="passthrough", classifier=LogisticRegression())
    assert other.fit(X, y).score(X, y) > 0.9


@pytest.mark.parametrize("started_at", ["in an hour", float("nan"), -np.inf, True, "now"])
def test_started_at_in_the_future_or_not_a_time_is_refused(cancer, started_at):
    X, y = cancer
    if started_at == "in an hour":  # read when the test runs, not when it is collected
        started_at = time.time() + 3600
    model = CrossFitClassifier([("lr", LogisticRegression())], time_limit=10.0)
    with pytest.raises(ValueError, match=r"started_at must be a time.time\(\) up to now"):
        model.fit(X, y, started_at=started_at)
