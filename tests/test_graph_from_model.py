"""neighbourhood_from_model: one eval-mode pass over the training rows, then the graph."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.neighbors import NearestNeighbors
from torch import nn

from nescal_sklearn.graph import (
    embed_rows,
    find_embedding_layer,
    neighbourhood_from_model,
    random_graph,
)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.5))
        self.head = nn.Linear(16, 3)
        self.unused = nn.Linear(2, 2)

    def forward(self, X):
        return self.head(self.body(X))


@pytest.fixture
def data():
    return torch.randn(60, 5, generator=torch.Generator().manual_seed(1))


def test_embeddings_are_the_eval_mode_input_of_the_layer(data):
    net = Net().train()
    embeddings, log_probs = embed_rows(net, data, embedding_layer="head", batch_size=7)
    assert net.training  # the mode is restored
    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(embeddings, net.body(data))
        torch.testing.assert_close(log_probs, torch.log_softmax(net(data), dim=1))


def test_knn_graph_matches_scikit_learn_on_the_embeddings(data):
    net = Net()
    found = neighbourhood_from_model(net, data, 6, embedding_layer="head")
    embeddings, _ = embed_rows(net, data, embedding_layer="head")
    reference = NearestNeighbors(n_neighbors=7, metric="cosine").fit(embeddings.numpy())
    expected = reference.kneighbors(embeddings.numpy(), return_distance=False)[:, 1:]
    agree = np.mean(
        [set(a) == set(b) for a, b in zip(found.neighbors.numpy(), expected, strict=True)]
    )
    assert agree > 0.95  # ties between equal distances may order differently
    assert found.neighbors.dtype == torch.int64 and found.similarities is None
    assert found.seconds > 0


def test_random_control_draws_the_seeded_random_graph(data):
    found = neighbourhood_from_model(
        Net(), data, 6, graph="random", embedding_layer="head", random_state=3
    )
    torch.testing.assert_close(found.neighbors, random_graph(60, 6, random_state=3))
    knn = neighbourhood_from_model(Net(), data, 6, embedding_layer="head", random_state=3).neighbors
    shared = np.mean(
        [len(set(a) & set(b)) for a, b in zip(found.neighbors.numpy(), knn.numpy(), strict=True)]
    )
    assert shared < 2  # about 6 * 6 / 59 by chance


def test_similarities_come_with_the_knn_graph_only(data):
    found = neighbourhood_from_model(
        Net(), data, 4, embedding_layer="head", return_similarities=True
    )
    assert found.similarities.shape == (60, 4)
    assert bool((found.similarities[:, :-1] >= found.similarities[:, 1:]).all())
    message = (
        "return_similarities=True needs graph='knn' (a random graph has no similarities); "
        "got graph='random'."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        neighbourhood_from_model(
            Net(), data, 4, graph="random", embedding_layer="head", return_similarities=True
        )


def test_errors_name_the_parameter(data):
    with pytest.raises(
        ValueError, match=re.escape("graph must be one of ['knn', 'random']; got graph='full'.")
    ):
        neighbourhood_from_model(Net(), data, 4, graph="full")
    message = (
        "the embedding layer 'unused' (Linear) was not called in the forward pass of Net; "
        "pass embedding_layer naming a layer the forward pass uses (None picks the last "
        "nn.Linear registered)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        neighbourhood_from_model(Net(), data, 4)
    with pytest.raises(
        ValueError, match=re.escape("embedding_layer='nope' is not a submodule of Net")
    ):
        find_embedding_layer(Net(), "nope")
