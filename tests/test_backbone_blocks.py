"""RealMLP's building blocks (front scale, parametric activation, PBLD and categorical
embeddings), the one-hot groups the estimator finds, and
the default MLP built with them."""

from __future__ import annotations

import io
import math
import pickle
import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris
from torch import nn

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.nn import (
    CategoricalEmbeddings,
    FrontScale,
    ParametricActivation,
    PBLDEmbeddings,
    TabularMLP,
)
from nescal_sklearn.preprocessing import one_hot_groups

torch.set_num_threads(1)


def n_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_front_scale_multiplies_each_column_by_its_learned_scale():
    layer = FrontScale(3)
    X = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]])
    torch.testing.assert_close(layer(X), X)  # starts as the identity
    with torch.no_grad():
        layer.scale.copy_(torch.tensor([2.0, 0.0, -1.0]))
    expected = torch.tensor([[2.0, 0.0, -3.0], [1.0, 0.0, 1.0]])
    torch.testing.assert_close(layer(X), expected)
    layer(X).sum().backward()
    torch.testing.assert_close(layer.scale.grad, X.sum(0))


def test_parametric_activation_interpolates_between_identity_and_activation():
    X = torch.tensor([[-2.0, -0.5, 0.0, 1.5]])
    layer = ParametricActivation(nn.ReLU(), 4)
    torch.testing.assert_close(layer(X), torch.relu(X))  # alpha = 1 at initialisation
    with torch.no_grad():
        layer.alpha.copy_(torch.tensor([0.0, 0.5, 2.0, -1.0]))
    # x + alpha * (relu(x) - x), unit by unit, worked by hand.
    expected = torch.tensor([[-2.0, -0.25, 0.0, 1.5]])
    torch.testing.assert_close(layer(X), expected)


def test_parametric_activation_gives_each_member_its_own_alpha():
    layer = ParametricActivation(nn.SELU(), 3, n_members=2)
    assert layer.alpha.shape == (2, 3)
    with torch.no_grad():
        layer.alpha[1].zero_()  # member 1 becomes the identity
    X = torch.randn(5, 2, 3)
    out = layer(X)
    torch.testing.assert_close(out[:, 0], torch.selu(X[:, 0]))
    torch.testing.assert_close(out[:, 1], X[:, 1])


def test_pbld_embeddings_match_a_loop_over_columns_and_frequencies():
    torch.manual_seed(0)
    layer = PBLDEmbeddings(2, d_embedding=3, n_frequencies=4, sigma=0.5)
    X = torch.randn(6, 2, dtype=torch.float64)
    layer = layer.double()
    out = layer(X)
    assert out.shape == (6, 2, 3)
    w, b = layer.frequencies.detach().numpy(), layer.phases.detach().numpy()
    W, c = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    x = X.numpy()
    for i in range(6):
        for j in range(2):
            periodic = [math.cos(2 * math.pi * x[i, j] * w[j, h] + b[j, h]) for h in range(4)]
            for k in range(2):
                value = sum(periodic[h] * W[j, h, k] for h in range(4)) + c[j, k]
                assert out[i, j, k].item() == pytest.approx(value, abs=1e-12)
            assert out[i, j, 2].item() == x[i, j]  # the raw value, last: a copy, so exact


def test_pbld_embeddings_initialisation_follows_realmlp():
    torch.manual_seed(0)
    layer = PBLDEmbeddings(200, d_embedding=4, n_frequencies=16, sigma=0.1)
    assert n_parameters(layer) == 200 * (2 * 16 + 17 * 3)
    assert layer.frequencies.std().item() == pytest.approx(0.1, rel=0.05)
    assert layer.phases.abs().max().item() <= math.pi
    assert layer.weight.abs().max().item() <= 1 / math.sqrt(16)


def test_pbld_embeddings_need_room_for_the_raw_value():
    with pytest.raises(
        ValueError, match=re.escape("d_embedding must be >= 2 for PBLD embeddings; got 1")
    ):
        PBLDEmbeddings(3, d_embedding=1)


def test_realmlp_style_network_has_the_documented_parameter_count():
    n_features, n_classes, embedded, k = 6, 3, [0, 2, 5], 2
    net = TabularMLP(
        n_features,
        n_classes,
        hidden_sizes=(8, 5),
        activation="selu",
        n_members=k,
        numeric_embedding="pbld",
        embedded_features=embedded,
        front_scale=True,
        parametric_activation=True,
    )
    m, d = len(embedded), 4  # pbld's default size
    w0 = m * d + (n_features - m)
    per_member = (w0 + 1) * 8 + (8 + 1) * 5 + (5 + 1) * n_classes
    expected = k * per_member + m * (32 + 17 * (d - 1)) + w0 + k * (8 + 5)
    assert n_parameters(net) == expected
    assert isinstance(net.front, FrontScale) and net.front.scale.shape == (w0,)
    assert net(torch.randn(4, n_features)).shape == (4, k, n_classes)


def test_front_scale_sees_the_embedded_input_and_parametric_activations_wrap_each_layer():
    torch.manual_seed(0)
    net = TabularMLP(
        4,
        2,
        hidden_sizes=(5, 5),
        numeric_embedding="pbld",
        embedded_features=[1],
        front_scale=True,
        parametric_activation=True,
    )
    seen = []
    net.front.register_forward_hook(lambda _m, args, _out: seen.append(args[0].detach()))
    X = torch.randn(3, 4)
    net(X)
    expected = torch.cat([net.embedding(X[:, [1]]).flatten(1), X[:, [0, 2, 3]]], dim=1)
    torch.testing.assert_close(seen[0], expected)
    acts = [layer for layer in net.layers if isinstance(layer, ParametricActivation)]
    assert len(acts) == 2 and all(isinstance(a.activation, nn.ReLU) for a in acts)


def test_without_the_new_options_the_network_is_unchanged():
    torch.manual_seed(0)
    plain = TabularMLP(4, 2, hidden_sizes=(5,))
    assert plain.front is None
    assert [type(layer) for layer in plain.layers] == [nn.Linear, nn.ReLU, nn.Dropout, nn.Linear]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"numeric_embedding": "pbld", "numeric_embedding_dim": 1},
            "numeric_embedding_dim must be >= 2 with numeric_embedding='pbld'",
        ),
        (
            {"numeric_embedding": "plr"},
            "numeric_embedding must be None, 'periodic' or 'pbld'; got 'plr'.",
        ),
        ({"activation": "swish"}, "activation must be one of"),
    ],
)
def test_bad_options_are_rejected_with_their_name(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        TabularMLP(4, 2, hidden_sizes=(3,), **kwargs)


@pytest.mark.determinism
def test_realmlp_style_network_survives_pickle_torch_save_and_state_dict():
    torch.manual_seed(0)
    options = dict(
        hidden_sizes=(6,),
        n_members=2,
        numeric_embedding="pbld",
        embedded_features=[3, 0],
        front_scale=True,
        parametric_activation=True,
    )
    net = TabularMLP(5, 3, **options).eval()
    X = torch.randn(7, 5)
    expected = net(X)
    buffer = io.BytesIO()
    torch.save(net, buffer)
    buffer.seek(0)
    for restored in (pickle.loads(pickle.dumps(net)), torch.load(buffer, weights_only=False)):
        torch.testing.assert_close(restored(X), expected, atol=0, rtol=0)
    rebuilt = TabularMLP(5, 3, **options).eval()
    rebuilt.load_state_dict(net.state_dict())
    torch.testing.assert_close(rebuilt(X), expected, atol=0, rtol=0)


def test_classifier_trains_the_realmlp_style_backbone():
    X, y = load_iris(return_X_y=True)
    X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NeSCalClassifier(
            "ce",
            activation="selu",
            hidden_sizes=(16,),
            max_epochs=30,
            lr=3e-3,
            batch_size=32,
            random_state=0,
            module_kwargs={
                "numeric_embedding": "pbld",
                "front_scale": True,
                "parametric_activation": True,
            },
        ).fit(X, y)
    assert isinstance(clf.module_.embedding, PBLDEmbeddings)
    assert clf.module_.embedded_index.tolist() == [0, 1, 2, 3]
    # Training moved the new parameters away from their initial values.
    assert not torch.allclose(clf.module_.front.scale, torch.ones(16))
    assert clf.score(X, y) > 0.9


# ----------------------------------------------------------------- categorical embeddings
def test_categorical_embeddings_look_up_each_groups_table_row():
    torch.manual_seed(0)
    layer = CategoricalEmbeddings([3, 2], d_embedding=4)
    assert layer.weight.shape == (5, 4)
    X = torch.tensor([[0.0, 0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    out = layer(X)
    # Row 0: category 2 of group 0 (table row 2), category 0 of group 1 (row 3).
    torch.testing.assert_close(out[0], torch.cat([layer.weight[2], layer.weight[3]]))
    # Row 1: category 0 of group 0; group 1 all zero (unseen category) -> zeros.
    torch.testing.assert_close(out[1], torch.cat([layer.weight[0], torch.zeros(4)]))
    with pytest.raises(ValueError, match=re.escape("group_sizes must be a non-empty sequence")):
        CategoricalEmbeddings([])


def test_one_hot_groups_finds_the_encoders_columns_and_nothing_else():
    rng = np.random.default_rng(0)
    n = 60
    codes_a = np.arange(n) % 4  # every category present
    codes_b = rng.integers(0, 3, n)
    one_hot = lambda codes, k: np.eye(k)[codes]  # noqa: E731
    flag = (rng.random(n) < 0.5).astype(float)  # a binary column, not a group
    X = np.column_stack(
        [
            rng.normal(size=n),
            one_hot(codes_a, 4),
            flag,
            one_hot(codes_b, 3),
            rng.normal(size=n),
            1 - flag,
        ]
    )
    assert one_hot_groups(X) == [[1, 2, 3, 4], [6, 7, 8]]
    assert one_hot_groups(X, min_size=4) == [[1, 2, 3, 4]]
    # flag and 1 - flag side by side are a two-column group.
    assert one_hot_groups(np.column_stack([flag, 1 - flag])) == [[0, 1]]
    assert one_hot_groups(rng.normal(size=(5, 3))) == []


def test_network_embeds_categorical_groups_between_numeric_embeddings_and_the_rest():
    torch.manual_seed(0)
    net = TabularMLP(
        7,
        2,
        hidden_sizes=(5,),
        numeric_embedding="pbld",
        embedded_features=[0],
        categorical_groups=[[2, 3, 4]],
        categorical_embedding_dim=3,
    )
    seen = []
    net.layers[0].register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    X = torch.randn(4, 7)
    net(X)
    expected = torch.cat(
        [net.embedding(X[:, [0]]).flatten(1), net.categorical(X[:, [2, 3, 4]]), X[:, [1, 5, 6]]],
        dim=1,
    )
    torch.testing.assert_close(seen[0], expected)
    assert net.layers[0].in_features == 4 + 3 + 3
    with pytest.raises(ValueError, match=re.escape("with [0] repeated")):
        TabularMLP(
            7, 2, numeric_embedding="pbld", embedded_features=[0], categorical_groups=[[0, 1]]
        )
    with pytest.raises(ValueError, match=re.escape("in [0, 7); got [6, 7]")):
        TabularMLP(7, 2, categorical_groups=[[6, 7]])


def test_classifier_embeds_only_large_categorical_features():
    import pandas as pd

    from nescal_sklearn import make_tabular_pipeline

    rng = np.random.default_rng(0)
    n = 400
    city = rng.integers(0, 12, n)
    colour = rng.integers(0, 3, n)
    x = rng.normal(size=n)
    y = ((city % 3 == 0) ^ (x > 0)).astype(int)
    frame = pd.DataFrame(
        {"x": x, "city": [f"c{c}" for c in city], "colour": [f"k{c}" for c in colour]}
    )
    pipe = make_tabular_pipeline(
        NeSCalClassifier(
            "ce",
            module_kwargs={"categorical_embedding": True},
            hidden_sizes=(32,),
            max_epochs=60,
            batch_size=32,
            lr=1e-2,
            random_state=0,
        )
    ).fit(frame, y)
    clf = pipe[-1]
    assert [len(g) for g in clf.column_layout_.groups] == [12, 3]
    assert clf.column_layout_ == pipe[0].column_layout_  # guessed right from the values
    assert isinstance(clf.module_.categorical, CategoricalEmbeddings)
    assert clf.module_.categorical.weight.shape == (12, 8)  # colour (3) stays one-hot
    assert pipe.score(frame, y) > 0.8
    plain = NeSCalClassifier("ce", max_epochs=1, hidden_sizes=(4,)).fit(frame[["x"]], y)
    assert plain.column_layout_ is None and plain.module_.categorical is None


def test_a_declared_layout_is_used_where_the_guess_misreads_it():
    """A drop="first" encoding has no run of columns summing to 1: the values show no
    group, the declared layout does."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 11, 300)
    one_hot = np.eye(11)[codes][:, 1:]  # drop="first": 10 columns, the first category dropped
    X = np.column_stack([rng.normal(size=300), one_hot]).astype(np.float32)
    y = (codes % 2).astype(int)
    groups = [list(range(1, 11))]
    common = dict(
        loss="ce",
        module_kwargs={"categorical_embedding": True},
        hidden_sizes=(8,),
        max_epochs=2,
        random_state=0,
    )
    guessed = NeSCalClassifier(**common).fit(X, y)
    assert guessed.column_layout_.groups == () and guessed.module_.categorical is None
    declared = NeSCalClassifier(**common, categorical_features=groups).fit(X, y)
    assert declared.column_layout_.groups == (tuple(range(1, 11)),)
    assert declared.column_layout_.numeric == (0,)
    assert declared.module_.categorical.weight.shape == (10, 8)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "categorical_features must be a sequence of one-hot groups, each a non-empty "
            "sequence of distinct column indices in [0, 11) that no other group holds; got "
            "[[1, 2], [2, 3]]."
        ),
    ):
        NeSCalClassifier(**{**common, "categorical_features": [[1, 2], [2, 3]]}).fit(X, y)
