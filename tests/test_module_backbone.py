"""The default network's backbones: packed ensemble members and periodic numeric embeddings."""

from __future__ import annotations

import io
import pickle
import re

import pytest
import torch
from rtdl_num_embeddings import PeriodicEmbeddings
from torch import nn

from nescal_sklearn.nn import MemberLinear, TabularMLP, build_module

torch.set_num_threads(1)


def copy_member_into(single: TabularMLP, packed: TabularMLP, member: int) -> None:
    """Give ``single``'s nn.Linear layers the weights of one member of ``packed``."""
    for mine, theirs in zip(single.layers, packed.layers, strict=True):
        if isinstance(mine, nn.Linear):
            mine.weight.data.copy_(theirs.weight.data[member].T)
            mine.bias.data.copy_(theirs.bias.data[member])


def capture_input(module: nn.Module) -> tuple[list[torch.Tensor], object]:
    seen: list[torch.Tensor] = []
    handle = module.register_forward_pre_hook(lambda _, args: seen.append(args[0].detach()))
    return seen, handle


def test_member_linear_equals_separate_linear_layers():
    torch.manual_seed(0)
    layer = MemberLinear(5, 3, n_members=4)
    assert layer.weight.shape == (4, 5, 3) and layer.bias.shape == (4, 3)
    X = torch.randn(7, 4, 5)
    out = layer(X)
    assert out.shape == (7, 4, 3)
    for j in range(4):
        linear = nn.Linear(5, 3)
        linear.weight.data.copy_(layer.weight.data[j].T)
        linear.bias.data.copy_(layer.bias.data[j])
        torch.testing.assert_close(out[:, j], linear(X[:, j]), atol=1e-6, rtol=0)
    # Without bias: a plain product, member by member.
    no_bias = MemberLinear(5, 3, n_members=4, bias=False)
    assert no_bias.bias is None
    expected = torch.stack([X[:, j] @ no_bias.weight.data[j] for j in range(4)], dim=1)
    torch.testing.assert_close(no_bias(X), expected, atol=1e-6, rtol=0)
    assert repr(layer) == "MemberLinear(in_features=5, out_features=3, n_members=4, bias=True)"


def test_member_linear_accepts_a_broadcast_input():
    torch.manual_seed(0)
    layer = MemberLinear(6, 2, n_members=3)
    row = torch.randn(4, 6)
    out = layer(row.unsqueeze(1).expand(-1, 3, -1))
    for j in range(3):
        torch.testing.assert_close(out[:, j], row @ layer.weight.data[j] + layer.bias.data[j])


def test_member_linear_members_are_initialised_independently_like_nn_linear():
    torch.manual_seed(0)
    layer = MemberLinear(64, 32, n_members=3)
    bound = 1 / 64**0.5
    for tensor in (layer.weight, layer.bias):
        assert tensor.abs().max() <= bound
        assert tensor.abs().max() > 0.9 * bound  # uniform on the whole interval, not shrunk
    for j in range(3):
        for i in range(j):
            assert not torch.equal(layer.weight[i], layer.weight[j])
            assert not torch.equal(layer.bias[i], layer.bias[j])


def test_member_linear_rejects_a_wrong_input_shape():
    layer = MemberLinear(5, 3, n_members=4)
    message = (
        "MemberLinear expects input of shape (n, n_members, in_features) = (n, 4, 5); "
        "got (7, 2, 5)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        layer(torch.zeros(7, 2, 5))


def test_single_member_network_keeps_the_old_parameter_names_and_shape():
    net = TabularMLP(6, 3, hidden_sizes=(8, 4))
    expected = [
        "layers.0.weight",
        "layers.0.bias",  # Linear(6, 8), then ReLU, Dropout
        "layers.3.weight",
        "layers.3.bias",  # Linear(8, 4), then ReLU, Dropout
        "layers.6.weight",
        "layers.6.bias",  # Linear(4, 3): the output layer
    ]
    assert list(net.state_dict()) == expected
    assert [tuple(net.state_dict()[k].shape) for k in expected] == [
        (8, 6),
        (8,),
        (4, 8),
        (4,),
        (3, 4),
        (3,),
    ]
    assert [type(net.layers[i]) for i in (0, 3, 6)] == [nn.Linear] * 3
    assert net(torch.zeros(5, 6)).shape == (5, 3)
    assert net.embedding_layer_name == "layers.6"


@pytest.mark.determinism
def test_network_pickled_before_the_new_options_still_loads_and_predicts():
    torch.manual_seed(0)
    net = TabularMLP(6, 3, hidden_sizes=(8,)).eval()
    X = torch.randn(5, 6)
    expected = net(X)
    # The state of a TabularMLP pickled by the previous version: no new attributes.
    del net.__dict__["n_members"], net.__dict__["embedding"]
    restored = pickle.loads(pickle.dumps(net))
    torch.testing.assert_close(restored(X), expected, atol=0, rtol=0)


def test_members_equal_separately_built_single_networks():
    torch.manual_seed(0)
    packed = TabularMLP(6, 3, hidden_sizes=(8, 5), n_members=3, activation="gelu").eval()
    assert [type(packed.layers[i]) for i in (0, 3, 6)] == [MemberLinear] * 3
    X = torch.randn(10, 6)
    out = packed(X)
    assert out.shape == (10, 3, 3)
    for j in range(3):
        single = TabularMLP(6, 3, hidden_sizes=(8, 5), activation="gelu").eval()
        copy_member_into(single, packed, j)
        torch.testing.assert_close(out[:, j], single(X), atol=1e-6, rtol=0)


def test_members_without_hidden_layers_are_linear_models():
    torch.manual_seed(0)
    packed = TabularMLP(4, 2, hidden_sizes=(), n_members=2)
    X = torch.randn(3, 4)
    layer = packed.layers[0]
    expected = torch.stack([X @ layer.weight[j] + layer.bias[j] for j in (0, 1)], dim=1)
    torch.testing.assert_close(packed(X), expected)
    assert packed.embedding_layer_name == "layers.0"


def test_gradient_of_one_member_leaves_the_others_untouched():
    torch.manual_seed(0)
    packed = TabularMLP(6, 3, hidden_sizes=(8,), n_members=2, dropout=0.0)
    packed(torch.randn(10, 6))[:, 0].sum().backward()
    for name, parameter in packed.named_parameters():
        assert parameter.grad[0].abs().sum() > 0, name
        assert torch.count_nonzero(parameter.grad[1]) == 0, name


def test_periodic_embedding_feeds_embedded_columns_then_the_others_unchanged():
    torch.manual_seed(0)
    embedded, d = [3, 0], 4
    net = TabularMLP(
        5,
        2,
        hidden_sizes=(7,),
        numeric_embedding="periodic",
        embedded_features=embedded,
        numeric_embedding_dim=d,
    ).eval()
    assert isinstance(net.embedding, PeriodicEmbeddings)
    assert net.layers[0].in_features == 2 * d + 3
    X = torch.randn(6, 5)
    seen, handle = capture_input(net.layers[0])
    out = net(X)
    handle.remove()
    assert out.shape == (6, 2)
    first_input = seen[0]
    reference = net.embedding(X[:, embedded]).reshape(6, 2 * d)  # column 3 first, then 0
    # exact: the same embedding module on the same 6 rows; then copies of the raw columns
    torch.testing.assert_close(first_input[:, : 2 * d], reference, atol=0, rtol=0)
    torch.testing.assert_close(first_input[:, 2 * d :], X[:, [1, 2, 4]], atol=0, rtol=0)
    # A passed-through column reaches the MLP raw: changing it moves only that input column.
    X2 = X.clone()
    X2[:, 4] += 1.0
    seen2, handle = capture_input(net.layers[0])
    net(X2)
    handle.remove()
    torch.testing.assert_close(seen2[0][:, -1], X2[:, 4])
    # exact: the same embedding of the unchanged columns, computed the same way
    torch.testing.assert_close(seen2[0][:, :-1], first_input[:, :-1], atol=0, rtol=0)


def test_periodic_embedding_of_every_column_is_shared_by_the_members():
    torch.manual_seed(0)
    net = TabularMLP(
        3, 2, hidden_sizes=(4,), n_members=3, numeric_embedding="periodic", numeric_embedding_dim=5
    ).eval()
    X = torch.randn(6, 3)
    seen, handle = capture_input(net.layers[0])
    assert net(X).shape == (6, 3, 2)
    handle.remove()
    reference = net.embedding(X).reshape(6, 15)
    assert seen[0].shape == (6, 3, 15)
    for j in range(3):
        # exact: the members get copies (expand) of this one embedding call on the same rows
        torch.testing.assert_close(seen[0][:, j], reference, atol=0, rtol=0)
    assert sum(isinstance(m, PeriodicEmbeddings) for m in net.modules()) == 1


def test_empty_embedded_features_means_the_raw_input():
    torch.manual_seed(0)
    net = TabularMLP(4, 2, hidden_sizes=(3,), numeric_embedding="periodic", embedded_features=[])
    assert net.embedding is None
    assert not any(isinstance(m, PeriodicEmbeddings) for m in net.modules())
    expected = ["layers.0.weight", "layers.0.bias", "layers.3.weight", "layers.3.bias"]
    assert list(net.state_dict()) == expected
    X = torch.randn(5, 4)
    seen, handle = capture_input(net.layers[0])
    net(X)
    handle.remove()
    torch.testing.assert_close(seen[0], X, atol=0, rtol=0)


@pytest.mark.parametrize("n_members", [1, 3])
def test_embedding_layer_name_is_the_output_layer_fed_the_penultimate_activations(n_members):
    net = TabularMLP(
        5,
        4,
        hidden_sizes=(9, 6),
        n_members=n_members,
        numeric_embedding="periodic",
        embedded_features=[1],
    )
    layer = dict(net.named_modules())[net.embedding_layer_name]
    assert layer is net.layers[-1]
    seen, handle = capture_input(layer)
    net(torch.randn(8, 5))
    handle.remove()
    expected_shape = (8, 6) if n_members == 1 else (8, n_members, 6)
    assert seen[0].shape == expected_shape
    with pytest.raises(AttributeError):
        net.embedding_layer_name = "layers.0"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_members": 0}, "n_members must be an int >= 1; got 0."),
        ({"n_members": 2.0}, "n_members must be an int >= 1; got 2.0."),
        ({"n_members": True}, "n_members must be an int >= 1; got True."),
        (
            {"numeric_embedding": "linear"},
            "numeric_embedding must be None, 'periodic' or 'pbld'; got 'linear'.",
        ),
        (
            {"numeric_embedding": "periodic", "numeric_embedding_dim": 0},
            "numeric_embedding_dim must be an int >= 1; got 0.",
        ),
        (
            {"numeric_embedding": "periodic", "embedded_features": [0, 4]},
            "embedded_features must hold column indices in [0, 4) (n_features=4); got [0, 4] "
            "with invalid entries [4].",
        ),
        (
            {"numeric_embedding": "periodic", "embedded_features": [-1]},
            "embedded_features must hold column indices in [0, 4) (n_features=4); got [-1] "
            "with invalid entries [-1].",
        ),
        (
            {"numeric_embedding": "periodic", "embedded_features": [1.0]},
            "embedded_features must hold column indices in [0, 4) (n_features=4); got [1.0] "
            "with invalid entries [1.0].",
        ),
        (
            {"numeric_embedding": "periodic", "embedded_features": [2, 1, 2]},
            "embedded_features must not repeat a column; got [2, 1, 2] with [2] repeated.",
        ),
        (
            {"numeric_embedding": "periodic", "embedded_features": 2},
            "embedded_features must be None or a sequence of column indices; got 2.",
        ),
    ],
)
def test_bad_backbone_arguments_are_rejected_with_their_name(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        TabularMLP(4, 2, hidden_sizes=(3,), **kwargs)


def test_member_linear_rejects_bad_sizes():
    with pytest.raises(ValueError, match=re.escape("n_members must be an int >= 1; got 0.")):
        MemberLinear(3, 2, n_members=0)
    with pytest.raises(ValueError, match=re.escape("in_features must be an int >= 1; got -1.")):
        MemberLinear(-1, 2, n_members=2)


def test_build_module_passes_the_backbone_options_through():
    net = build_module(
        None,
        None,
        n_features=4,
        n_classes=3,
        mlp_kwargs={
            "hidden_sizes": (5,),
            "n_members": 2,
            "numeric_embedding": "periodic",
            "embedded_features": [0],
            "numeric_embedding_dim": 3,
        },
    )
    assert isinstance(net.layers[0], MemberLinear) and net.layers[0].in_features == 3 + 3
    assert net(torch.zeros(2, 4)).shape == (2, 2, 3)


@pytest.mark.determinism
def test_pickle_and_torch_save_round_trip_of_a_periodic_ensemble():
    torch.manual_seed(0)
    net = TabularMLP(
        5,
        3,
        hidden_sizes=(6,),
        n_members=2,
        numeric_embedding="periodic",
        embedded_features=[4, 1],
        numeric_embedding_dim=3,
    ).eval()
    X = torch.randn(7, 5)
    expected = net(X)
    by_pickle = pickle.loads(pickle.dumps(net))
    buffer = io.BytesIO()
    torch.save(net, buffer)
    buffer.seek(0)
    by_torch = torch.load(buffer, weights_only=False)
    for restored in (by_pickle, by_torch):
        torch.testing.assert_close(restored(X), expected, atol=0, rtol=0)
    # The state_dict alone rebuilds it too: the column indices are constructor arguments.
    rebuilt = TabularMLP(
        5,
        3,
        hidden_sizes=(6,),
        n_members=2,
        numeric_embedding="periodic",
        embedded_features=[4, 1],
        numeric_embedding_dim=3,
    ).eval()
    rebuilt.load_state_dict(net.state_dict())
    torch.testing.assert_close(rebuilt(X), expected, atol=0, rtol=0)
