"""The LoCal label target: each row smoothed towards its neighbourhood's class frequencies."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler
from torch import nn

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss

pytestmark = pytest.mark.numerical


def test_the_soft_target_is_the_neighbours_class_frequencies():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
    X = torch.randn(8, 3)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 0])
    spec = ExperimentalNeSCalLoss(n_neighbors=3, weight=1.0, warmup=0, target="labels")
    runtime = spec.build_runtime(net, X, start_epoch=0, max_epochs=5, random_state=0, y=y)
    runtime.set_epoch(0)
    rows = torch.tensor([0, 5])
    logits = torch.randn(2, 3)
    penalty = runtime.penalty(logits, rows, y[rows])
    neighbours = runtime.smoothing.neighbors[rows]
    # KL(q || p) with q the neighbours' one-hot labels averaged (0 log 0 = 0).
    q = torch.nn.functional.one_hot(y[neighbours], 3).double().mean(dim=1)
    log_p = torch.log_softmax(logits.double(), dim=1)
    kl = torch.where(q > 0, q * (torch.log(q.clamp_min(1e-300)) - log_p), 0.0).sum(dim=1)
    assert float(penalty) == pytest.approx(float(kl.mean()), rel=1e-4)
    # The label cache never changes: the batch's predictions are not written into it.
    before = runtime.smoothing.cache.log_probs.clone()
    runtime.penalty(torch.randn(2, 3), rows, y[rows])
    torch.testing.assert_close(runtime.smoothing.cache.log_probs, before)


def test_the_label_target_needs_the_labels():
    net = nn.Sequential(nn.Linear(3, 2))
    spec = ExperimentalNeSCalLoss(n_neighbors=2, warmup=0, target="labels")
    message = (
        "NeSCalLoss: target='labels' smooths towards the neighbours' labels, so build_runtime "
        "needs the rows' labels y."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        spec.build_runtime(net, torch.randn(5, 3), start_epoch=0, max_epochs=3)


def test_the_estimator_trains_with_the_label_target():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    common = dict(hidden_sizes=(16,), max_epochs=6, early_stopping=False, random_state=0)
    labels = NeSCalClassifier(ExperimentalNeSCalLoss(warmup=2, target="labels"), **common)
    predictions = NeSCalClassifier(ExperimentalNeSCalLoss(warmup=2), **common)
    a, b = labels.fit(X, y), predictions.fit(X, y)
    assert a.penalty_status_ == "penalised" and a.history_[-1, "train_penalty"] > 0
    assert not np.allclose(a.predict_proba(X), b.predict_proba(X))
