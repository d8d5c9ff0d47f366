"""TabMModule: TabM's members' logits for NeSCalClassifier (``tabm`` imported lazily)."""

from __future__ import annotations

import re
import sys

import pytest
import torch

from nescal_sklearn.nn import TabMModule

torch.set_num_threads(1)


def _n_params(module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize(
    ("params", "shape"),
    [
        ({}, (6, 32, 3)),
        ({"k": 4, "d_block": 16, "n_blocks": 1}, (6, 4, 3)),
        ({"k": 2, "d_block": 8, "arch_type": "tabm-mini"}, (6, 2, 3)),
        ({"k": 3, "d_block": 8, "arch_type": "tabm-packed"}, (6, 3, 3)),
        ({"k": 5, "d_block": 8, "numeric_embedding": "periodic"}, (6, 5, 3)),
    ],
)
def test_tabm_shapes_and_members(params, shape):
    pytest.importorskip("tabm")
    torch.manual_seed(0)
    module = TabMModule(4, 3, **params).eval()
    logits = module(torch.randn(6, 4))
    assert logits.shape == shape
    assert module.k == shape[1]
    # Members differ from the start (per-member scalings or weights).
    assert not torch.allclose(logits[:, 0], logits[:, 1])
    torch.testing.assert_close(module(torch.ones(6, 4)), module(torch.ones(6, 4)))


def test_tabm_binary_has_two_logits():
    pytest.importorskip("tabm")
    assert TabMModule(3, 2, k=2, d_block=4)(torch.zeros(5, 3)).shape == (5, 2, 2)


@pytest.mark.parametrize(
    ("arch_type", "expected"),
    [
        # n_features=3, k=4, two blocks of width 5, 2 classes; output layer: one
        # (5 x 2) weight and 2 biases per member = 4 * 12 = 48.
        # BatchEnsemble: shared weight, per-member r (in), s (out) and bias (out).
        ("tabm", (15 + 4 * 3 + 4 * 5 + 4 * 5) + (25 + 3 * 4 * 5) + 48),
        # One per-member scaling of the input (no bias), then a shared MLP.
        ("tabm-mini", 4 * 3 + (15 + 5) + (25 + 5) + 48),
        # k independent MLPs.
        ("tabm-packed", 4 * (15 + 5) + 4 * (25 + 5) + 48),
    ],
)
def test_tabm_parameter_count(arch_type, expected):
    pytest.importorskip("tabm")
    module = TabMModule(3, 2, k=4, n_blocks=2, d_block=5, arch_type=arch_type)
    assert _n_params(module) == expected


def test_tabm_default_depth_and_periodic_embedding():
    pytest.importorskip("tabm")
    plain = TabMModule(3, 2, k=2, d_block=4)
    embedded = TabMModule(3, 2, k=2, d_block=4, numeric_embedding="periodic")
    assert len(plain.tabm.backbone.blocks) == 3
    assert len(embedded.tabm.backbone.blocks) == 2
    # PeriodicEmbeddings(3, lite=False): 48 frequencies per column, then a per-column
    # linear map 96 -> 24 with bias; the first block then reads 3 * 24 columns.
    assert _n_params(embedded.tabm.num_module) == 3 * (48 + 96 * 24 + 24)
    assert embedded.tabm.backbone.blocks[0][0].in_features == 3 * 24


def test_tabm_backward_trains_every_member():
    pytest.importorskip("tabm")
    torch.manual_seed(0)
    module = TabMModule(4, 3, k=3, d_block=8, n_blocks=2)
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))
    logits = module(x)
    # Train loss: mean over members of each member's cross-entropy.
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.repeat_interleave(3))
    loss.backward()
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None, name
    # Every member's output weights get their own gradient.
    grad = module.tabm.output.weight.grad
    assert grad.shape[0] == 3 and all(grad[j].abs().sum() > 0 for j in range(3))


@pytest.mark.parametrize("arch_type", ["tabm", "tabm-mini", "tabm-packed"])
def test_tabm_embedding_layer_input(arch_type):
    pytest.importorskip("tabm")
    module = TabMModule(4, 3, k=3, d_block=7, n_blocks=2, arch_type=arch_type)
    layer = dict(module.named_modules())[module.embedding_layer_name]
    seen = {}
    pre = layer.register_forward_pre_hook(lambda m, args: seen.setdefault("input", args[0]))
    post = layer.register_forward_hook(lambda m, args, out: seen.setdefault("output", out))
    try:
        logits = module(torch.randn(5, 4))
    finally:
        pre.remove()
        post.remove()
    assert seen["input"].shape == (5, 3, 7)
    # It is the output layer: its output is the module's.
    assert seen["output"] is logits


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_features": 0}, "n_features must be an int >= 1; got 0."),
        ({"n_classes": 1}, "n_classes must be an int >= 2; got 1."),
        ({"k": 0}, "k must be an int >= 1; got 0."),
        ({"k": 2.0}, "k must be an int >= 1; got 2.0."),
        ({"n_blocks": 0}, "n_blocks must be an int >= 1; got 0."),
        ({"d_block": True}, "d_block must be an int >= 1; got True."),
        ({"dropout": 1.0}, "dropout must be a float in [0, 1); got 1.0."),
        (
            {"arch_type": "mlp"},
            "arch_type must be one of ['tabm', 'tabm-mini', 'tabm-packed']; got 'mlp'.",
        ),
        (
            {"numeric_embedding": "piecewise"},
            "numeric_embedding must be None or 'periodic'; got 'piecewise'.",
        ),
    ],
)
def test_tabm_bad_arguments(params, message):
    arguments = {"n_features": 3, "n_classes": 2, "k": 2, "d_block": 4, **params}
    with pytest.raises(ValueError, match=re.escape(message)):
        TabMModule(**arguments)


def test_tabm_bad_input_shape():
    pytest.importorskip("tabm")
    module = TabMModule(3, 2, k=2, d_block=4)
    with pytest.raises(
        ValueError, match=re.escape("TabMModule expects input of shape (n, 3); got (5, 4).")
    ):
        module(torch.zeros(5, 4))


def test_tabm_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tabm", None)
    with pytest.raises(ImportError, match=re.escape("install it with `pip install tabm`")):
        TabMModule(3, 2)
