"""early_stopping="refinement": stop on the validation NLL after the best temperature."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from scipy.special import softmax
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.metrics import log_loss, refinement_log_loss

SETTINGS = dict(hidden_sizes=(32,), max_epochs=40, batch_size=32, lr=3e-3, patience=5)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(
        n_samples=500,
        n_features=10,
        n_informative=6,
        n_classes=3,
        class_sep=0.8,
        flip_y=0.05,
        random_state=0,
    )
    X = StandardScaler().fit_transform(X).astype(np.float32)
    X_train, X_val, y_train, y_val = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=0
    )
    return X_train, y_train, X_val, y_val


def _fit(data, **params):
    X_train, y_train, X_val, y_val = data
    clf = NeSCalClassifier(**{"loss": "ce", **SETTINGS, **params}, random_state=0)
    return clf.fit(X_train, y_train, X_val=X_val, y_val=y_val)


def _val_logits(clf, X_val):
    with torch.no_grad():
        return clf.module_(torch.as_tensor(X_val)).numpy().astype(np.float64)


def test_history_logs_both_curves_and_refined_is_the_metric(data):
    clf = _fit(data, early_stopping="refinement")
    _, _, X_val, y_val = data
    raw = np.array(clf.history_[:, "valid_nll"])
    refined = np.array(clf.history_[:, "valid_refined_nll"])
    temperatures = np.array(clf.history_[:, "valid_temperature"])
    assert len(raw) == len(refined) == len(temperatures) == clf.n_epochs_
    assert np.all(refined <= raw + 1e-6)  # the temperature never makes it worse
    # The restored epoch's logged value is the refinement loss of the returned model
    # on the validation rows, computed independently from its probabilities.
    proba = softmax(_val_logits(clf, X_val), axis=1)
    assert refined[clf.best_epoch_ - 1] == pytest.approx(
        refinement_log_loss(y_val, proba), rel=1e-4
    )
    assert raw[clf.best_epoch_ - 1] == pytest.approx(log_loss(y_val, proba), rel=1e-4)
    # ... and its logged temperature is the NLL-optimal one on those rows.
    t = temperatures[clf.best_epoch_ - 1]
    assert log_loss(y_val, softmax(np.log(proba) / t, axis=1)) == pytest.approx(
        refined[clf.best_epoch_ - 1], rel=1e-4
    )


@pytest.mark.parametrize(
    ("criterion", "key"), [("nll", "valid_nll"), ("refinement", "valid_refined_nll")]
)
def test_the_restored_epoch_is_best_on_its_criterion(data, criterion, key):
    clf = _fit(data, early_stopping=criterion)
    curve = np.array(clf.history_[:, key])
    best = curve[clf.best_epoch_ - 1]
    assert best <= curve.min() * (1 + 1e-4)  # skorch's relative improvement threshold
    # Stopped by patience: no epoch after the best improved on it by the threshold.
    if clf.n_epochs_ < SETTINGS["max_epochs"]:
        assert clf.n_epochs_ - clf.best_epoch_ == SETTINGS["patience"]


def test_refinement_trains_at_least_to_the_nll_optimum_here(data):
    # The raw NLL turns up (over-confidence) before the refinement loss does: the
    # reason for the criterion. On this problem the refinement run goes further.
    by_nll = _fit(data, early_stopping="nll")
    by_refinement = _fit(data, early_stopping="refinement")
    assert by_refinement.best_epoch_ >= by_nll.best_epoch_
    # Identical training up to the nll run's stop (same seed, same batches).
    common = by_nll.n_epochs_
    np.testing.assert_allclose(
        by_nll.history_[:common, "train_loss"], by_refinement.history_[:common, "train_loss"]
    )


def test_true_is_nll(data):
    a = _fit(data, early_stopping=True, max_epochs=8)
    b = _fit(data, early_stopping="nll", max_epochs=8)
    assert a.best_epoch_ == b.best_epoch_
    # exact: early_stopping=True means 'nll', so the same fit twice
    np.testing.assert_array_equal(a.history_[:, "valid_nll"], b.history_[:, "valid_nll"])
    c = _fit(data, early_stopping=np.True_, max_epochs=8)
    assert c.best_epoch_ == b.best_epoch_


def test_auto_warmup_ends_on_the_same_criterion(data):
    clf = _fit(data, loss="nescal", early_stopping="refinement", lr=1e-2, hidden_sizes=(64,))
    refined = np.array(clf.history_[:, "valid_refined_nll"])
    restored = [h["warmup_restored_epoch"] for h in clf.history_ if "warmup_restored_epoch" in h]
    assert clf.graph_epoch_ is not None and len(restored) == 1
    warmup = refined[: clf.graph_epoch_ - 1]
    # The auto warm-up restored the epoch with the lowest refined loss of the warm-up.
    assert restored[0] == int(np.argmin(warmup)) + 1


def test_bad_criterion_names_the_parameter():
    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises(InvalidParameterError, match=re.escape("'early_stopping' parameter")):
        NeSCalClassifier(early_stopping="refine").fit(X, y)
