"""Ctrl-C is honoured at any moment of a fit, told apart from the package's own stops.

Each test delivers a real SIGINT (Python's default handler turns it into
``KeyboardInterrupt``) at a chosen point of the fit, through a hook on the code that runs
there rather than a timer, so the point is the same on any machine: before the first
epoch, in the first batch, in the middle of an epoch, in the validation pass, while the
neighbour graph is built, between the members of a cross-fitted ensemble, and in a
worker process. At b2ed419 an interrupt before the first epoch's end was swallowed by
skorch, whose ``EarlyStopping(load_best=True).on_train_end`` then raised ``IndexError``
on the empty history (the runner recorded a failed fit and went on).
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import NotFittedError

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.ensemble import CrossFitClassifier
from nescal_sklearn.estimator._callbacks import BuildNeighbourhood
from nescal_sklearn.estimator._net import NeSCalNet

X, Y = make_classification(300, 6, n_informative=4, random_state=0)
IN_EPOCH = r"NeSCalClassifier\.fit: training interrupted in epoch {}$"


@pytest.fixture(autouse=True)
def default_sigint():
    """Python's own Ctrl-C handler, even when the suite runs as a background job."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def interrupt_on_call(monkeypatch, owner, name: str, call: int) -> list:
    """Replace ``owner.name`` by a wrapper that sends SIGINT on its ``call``-th call
    (1-based), before the original runs; return the list of calls seen."""
    original = getattr(owner, name)
    calls = []

    def hooked(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            ctrl_c()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, hooked)
    return calls


def net(**params) -> NeSCalClassifier:
    return NeSCalClassifier(**{"max_epochs": 6, "batch_size": 64, "random_state": 0, **params})


# 300 rows, 20 % held out for early stopping: 240 training rows, 4 batches of 64 an epoch
@pytest.mark.parametrize(
    "hook, call, epoch",
    [
        ("on_train_begin", 1, None),  # before the first epoch (outside skorch's loop)
        ("get_split_datasets", 1, 0),  # in skorch's loop, before the first epoch begins
        ("train_step_single", 1, 1),  # the first batch: the history holds no finished epoch
        ("train_step_single", 6, 2),  # the middle of the second epoch
        ("validation_step", 1, 1),  # the first validation pass
    ],
)
def test_a_ctrl_c_at_any_point_of_a_network_fit_leaves_fit(monkeypatch, hook, call, epoch):
    clf = net(loss="ce")
    clf.fit(X, Y)  # a fitted model first: an interrupted fit must not leave it in place
    if hook == "on_train_begin":
        interrupt_on_call(monkeypatch, NeSCalNet, "notify", call)
        expected = None
    else:
        interrupt_on_call(monkeypatch, NeSCalNet, hook, call)
        expected = IN_EPOCH.format(epoch)
    with pytest.raises(KeyboardInterrupt, match=expected) as raised:
        clf.fit(X, Y)
    assert not isinstance(raised.value.__context__, IndexError)
    with pytest.raises(NotFittedError):
        clf.predict_proba(X)


def test_a_ctrl_c_while_the_neighbour_graph_is_built_leaves_fit(monkeypatch):
    clf = net().set_params(loss__warmup=2)
    interrupt_on_call(monkeypatch, BuildNeighbourhood, "on_epoch_begin", 3)  # the graph epoch
    with pytest.raises(KeyboardInterrupt, match=IN_EPOCH.format(3)):
        clf.fit(X, Y)


def test_patience_and_time_still_end_training_as_planned():
    """The package's own stops keep using skorch's way out (not mistaken for a Ctrl-C)."""
    patient = net(loss="ce", max_epochs=200, patience=2, lr=0.05).fit(X, Y)
    assert patient.n_epochs_ == patient.best_epoch_ + 2 < 200
    timed = net(loss="ce", max_epochs=10_000, patience=False)
    timed.set_params(**{_time_parameter(timed): 1.0}).fit(X, Y)
    assert timed.stopped_on_time_ and len(timed.history_) < 10_000


def _time_parameter(clf) -> str:
    return "time_limit" if "time_limit" in clf.get_params() else "max_time"


class InterruptedBoosting(HistGradientBoostingClassifier):
    """A member whose fit ends with a Ctrl-C: the moment between two member fits."""

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight=sample_weight)
        ctrl_c()
        return self


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_ctrl_c_between_member_fits_or_in_a_worker_leaves_the_ensemble_fit(n_jobs):
    members = [
        ("nescal", net(loss="ce", max_epochs=3)),
        ("boosting", InterruptedBoosting(max_iter=5)),
    ]
    model = CrossFitClassifier(members, cv=3, n_jobs=n_jobs, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y)
    with pytest.raises(NotFittedError):
        model.predict_proba(X)


def test_a_ctrl_c_in_a_network_member_leaves_the_ensemble_fit(monkeypatch):
    interrupt_on_call(monkeypatch, NeSCalNet, "train_step_single", 1)
    model = CrossFitClassifier([("nescal", net(loss="ce"))], cv=3, random_state=0)
    with pytest.raises(KeyboardInterrupt, match=IN_EPOCH.format(1)):
        model.fit(X, Y)
    assert np.isfinite(X).all()  # nothing of the input was touched on the way out
