"""Ensembles: networks returning several members' logits (n, k, C), end to end.

References are computed independently: member by member with a single-model
computation, or in numpy.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import softmax
from sklearn.datasets import load_iris, load_wine
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler
from torch import nn

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.estimator._net import NeSCalNet
from nescal_sklearn.graph import build_knn_graph, neighbourhood_from_model
from nescal_sklearn.losses import NeSCalLoss, get_loss
from nescal_sklearn.nn import ensemble_logits, expand_member_graph, flatten_members
from nescal_sklearn.penalties import NeighbourhoodSmoothing

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


class ToyEnsemble(nn.Module):
    """k separate two-layer MLPs; the head's input is (n, k, hidden)."""

    embedding_layer_name = "head"

    def __init__(self, n_features: int, n_classes: int, k: int = 3, hidden: int = 8) -> None:
        super().__init__()
        self.k = k
        self.body = nn.ModuleList(nn.Linear(n_features, hidden) for _ in range(k))
        self.head = _PerMemberHead(k, hidden, n_classes)

    def forward(self, x):
        hidden = torch.stack([torch.relu(layer(x)) for layer in self.body], dim=1)
        return self.head(hidden)


class _PerMemberHead(nn.Module):
    def __init__(self, k, hidden, n_classes):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(hidden, n_classes) for _ in range(k))

    def forward(self, h):
        return torch.stack([layer(h[:, m]) for m, layer in enumerate(self.layers)], dim=1)


def _data(n_classes=3):
    X, y = (load_iris if n_classes == 3 else load_wine)(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


def test_ensemble_logits_is_log_mean_probability():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 4, 3)) * 3
    expected = softmax(logits, axis=-1).mean(axis=1)
    got = torch.softmax(ensemble_logits(torch.as_tensor(logits)), dim=-1).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    two_d = torch.randn(4, 3)
    assert ensemble_logits(two_d) is two_d
    with pytest.raises(ValueError, match="n_members"):
        ensemble_logits(torch.zeros(2, 3, 4, 5))


def test_expanded_graph_links_each_member_to_its_own_rows():
    rng = np.random.default_rng(1)
    neighbors = torch.as_tensor(rng.integers(0, 20, size=(20, 4)))
    per_member = torch.as_tensor(rng.integers(0, 20, size=(3, 20, 4)))
    shared = expand_member_graph(neighbors, 3)
    separate = expand_member_graph(per_member, 3)
    for i in range(20):
        for m in range(3):
            assert shared[i * 3 + m].tolist() == [j * 3 + m for j in neighbors[i].tolist()]
            assert separate[i * 3 + m].tolist() == [j * 3 + m for j in per_member[m, i].tolist()]
    with pytest.raises(ValueError, match="n_members=2"):
        expand_member_graph(per_member, 2)


def test_member_penalty_is_the_mean_of_each_members_penalty():
    """Smoothing member rows = averaging k single-model penalties on the same graph."""
    rng = np.random.default_rng(2)
    n, k, C, K = 30, 3, 4, 5
    graph = torch.as_tensor(
        np.stack([rng.permutation(np.delete(np.arange(n), i))[:K] for i in range(n)])
    )
    cache = torch.log_softmax(torch.as_tensor(rng.normal(size=(n, k, C)), dtype=torch.float32), -1)
    logits = torch.as_tensor(rng.normal(size=(8, k, C)), dtype=torch.float32)
    rows = torch.as_tensor(rng.choice(n, 8, replace=False))
    target = torch.as_tensor(rng.integers(0, C, 8))
    members = NeighbourhoodSmoothing(expand_member_graph(graph, k), cache.reshape(n * k, C))
    flat, flat_target, flat_rows, _ = flatten_members(logits, target, rows)
    together = members(flat, flat_rows, flat_target, update_cache=False)
    alone = [
        NeighbourhoodSmoothing(graph, cache[:, m].clone())(
            logits[:, m], rows, target, update_cache=False
        )
        for m in range(k)
    ]
    torch.testing.assert_close(together, torch.stack(alone).mean())


@pytest.mark.parametrize("member_graph", ["shared", "per_member"])
def test_graph_of_an_ensemble(member_graph):
    X, _ = _data()
    torch.manual_seed(0)
    module = ToyEnsemble(4, 3, k=3)
    found = neighbourhood_from_model(
        module, torch.as_tensor(X), 5, member_graph=member_graph, random_state=0
    )
    assert found.n_members == 3
    assert found.neighbors.shape == (150 * 3, 5)
    with torch.no_grad():
        hidden = torch.stack([torch.relu(layer(torch.as_tensor(X))) for layer in module.body], 1)
        expected_lp = torch.log_softmax(module(torch.as_tensor(X)), -1).reshape(-1, 3)
    torch.testing.assert_close(found.log_probs, expected_lp)
    if member_graph == "shared":
        reference = [np.asarray(build_knn_graph(hidden.reshape(150, -1).numpy(), 5))] * 3
    else:
        reference = [np.asarray(build_knn_graph(hidden[:, m].numpy(), 5)) for m in range(3)]
    got = found.neighbors.numpy()
    for m in range(3):
        # integer indices: the same forward on the same 150 rows, then the same search
        np.testing.assert_array_equal(np.sort(got[m::3], 1), np.sort(reference[m] * 3 + m, 1))


def test_per_member_graph_needs_member_slices():
    net = nn.Sequential(nn.Linear(4, 7), _Stack3())
    with pytest.raises(ValueError, match="multiple of the 3 members"):
        neighbourhood_from_model(
            net, torch.randn(20, 4), 3, embedding_layer="0", member_graph="per_member"
        )
    with pytest.raises(ValueError, match="member_graph"):
        neighbourhood_from_model(net, torch.randn(20, 4), 3, member_graph="each")


class _Stack3(nn.Module):
    def forward(self, h):
        return torch.stack([h[:, :3], h[:, 1:4], h[:, 2:5]], dim=1)


def test_training_loss_is_the_mean_of_member_losses():
    net = NeSCalNet(
        module=ToyEnsemble,
        module__n_features=4,
        module__n_classes=3,
        criterion=nn.CrossEntropyLoss,
        training_loss=get_loss("ce"),
    ).initialize()
    net.history.new_epoch()
    net.history.new_batch()
    logits = torch.randn(6, 3, 3)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    X = {"X": torch.zeros(6, 4), "index": torch.arange(6)}
    got = net.get_loss(logits, y, X=X, training=True)
    expected = torch.stack([F.cross_entropy(logits[:, m], y) for m in range(3)]).mean()
    torch.testing.assert_close(got, expected)
    # validation: the ensemble's NLL
    net.module_.eval()
    valid = net.get_loss(net.infer(torch.as_tensor(_data()[0][:6])), y, training=False)
    with torch.no_grad():
        probs = torch.softmax(net.module_(torch.as_tensor(_data()[0][:6])), -1).mean(1)
    torch.testing.assert_close(valid, F.nll_loss(probs.log(), y))


@pytest.mark.determinism
def test_estimator_with_an_ensemble_module():
    X, y = _data()
    clf = NeSCalClassifier(
        NeSCalLoss(warmup=3, n_neighbors=5),
        module=ToyEnsemble,
        max_epochs=8,
        batch_size=32,
        random_state=0,
    ).fit(X, y)
    assert clf.penalty_status_ == "penalised"
    with torch.no_grad():
        members = torch.softmax(clf.module_(torch.as_tensor(X)), -1).numpy()
    np.testing.assert_allclose(clf.predict_proba(X), members.mean(1), atol=1e-6)
    # labels: each row's top two classes are >= 2.8e-4 apart, the two paths 6e-8
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[members.mean(1).argmax(1)])
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))


def test_early_stopping_watches_the_ensemble_nll():
    X, y = _data(n_classes=2)
    rng = np.random.default_rng(0)
    val = rng.random(len(y)) < 0.3
    clf = NeSCalClassifier("ce", module=ToyEnsemble, max_epochs=6, patience=3, random_state=0).fit(
        X[~val], y[~val], X_val=X[val], y_val=y[val]
    )
    best = clf.history_[clf.best_epoch_ - 1]["valid_nll"]
    assert best == pytest.approx(log_loss(y[val], clf.predict_proba(X[val])), rel=1e-4)
