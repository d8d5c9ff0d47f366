"""Fits that do not depend on the number of threads (review of ed7ab4a, section 4).

``numeric_embedding="periodic"`` fits differed between ``n_threads=1`` and ``2`` by up to
2.3e-7 in probability. The periodic embedding itself is thread-independent; the drift
came from Intel MKL's matrix products of 5 to 11 rows, whose summation order depends on
the thread count: the weight gradient of a 10-class output layer is one. Layers of fewer
than ``NARROW_LAYER`` outputs therefore take their gradients on one thread, and the
network runs batches of fewer rows on one thread.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler
from torch import nn

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.nn import TabularMLP
from nescal_sklearn.nn._layers import NARROW_LAYER, one_thread
from nescal_sklearn.nn._mlp import _NarrowLinear, _NarrowMemberLinear


def _threads(n: int):
    """A context with torch on ``n`` threads."""

    class _Threads:
        def __enter__(self):
            self.previous = torch.get_num_threads()
            torch.set_num_threads(n)

        def __exit__(self, *exc):
            torch.set_num_threads(self.previous)

    return _Threads()


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return StandardScaler().fit_transform(X[:300]), y[:300]


@pytest.mark.parametrize("numeric_embedding", ["periodic", "pbld", None])
def test_fit_is_identical_across_thread_counts(digits, numeric_embedding):
    X, y = digits
    probas = []
    for n_threads in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # warm-up without a graph
            clf = NeSCalClassifier(
                "ce",
                module_kwargs={"numeric_embedding": numeric_embedding},
                hidden_sizes=(16,),
                max_epochs=3,
                random_state=0,
                n_threads=n_threads,
            ).fit(X, y)
        probas.append(clf.predict_proba(X))
    np.testing.assert_array_equal(probas[0], probas[1])


def test_predictions_on_a_few_rows_are_identical_across_thread_counts(digits):
    X, y = digits
    clf = NeSCalClassifier("ce", hidden_sizes=(64, 64), max_epochs=2, random_state=0).fit(X, y)
    for rows in (1, 5, 7, 11, NARROW_LAYER - 1):
        one = clf.set_params(n_threads=1).predict_proba(X[:rows])
        two = clf.set_params(n_threads=2).predict_proba(X[:rows])
        np.testing.assert_array_equal(one, two)


def test_narrow_layers_are_the_output_layer_of_few_classes():
    many = TabularMLP(8, NARROW_LAYER, hidden_sizes=(32, 4))
    assert [type(layer) for layer in many.layers if hasattr(layer, "weight")] == [
        nn.Linear,
        _NarrowLinear,
        nn.Linear,
    ]
    ensemble = TabularMLP(8, 10, hidden_sizes=(32,), n_members=3)
    assert type(ensemble.layers[-1]) is _NarrowMemberLinear
    assert (
        isinstance(ensemble.layers[-1], nn.Module) and ensemble.embedding_layer_name == "layers.3"
    )


@pytest.mark.parametrize("n_threads", [1, 2])
def test_narrow_layer_has_the_values_and_gradients_of_nn_linear_on_one_thread(n_threads):
    torch.manual_seed(0)
    plain = nn.Linear(32, 10)
    narrow = _NarrowLinear(32, 10)
    narrow.load_state_dict(plain.state_dict())
    X = torch.randn(256, 32)

    def gradients(layer, threads):
        inputs = X.clone().requires_grad_(True)
        layer.zero_grad()
        with _threads(threads):
            out = layer(inputs)
            (out * torch.linspace(-1, 1, 10)).sum().backward()
        return out.detach(), inputs.grad, layer.weight.grad.clone(), layer.bias.grad.clone()

    reference = gradients(plain, 1)
    for expected, got in zip(reference, gradients(narrow, n_threads), strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_frozen_parameters_get_no_gradient():
    layer = _NarrowLinear(6, 3)
    layer.weight.requires_grad_(False)
    X = torch.randn(20, 6, requires_grad=True)
    layer(X).sum().backward()
    assert layer.weight.grad is None
    assert layer.bias.grad is not None and X.grad is not None
    with torch.no_grad():
        assert layer(X).grad_fn is None


def test_hooks_of_the_output_layer_see_each_call_once():
    # NeSCal reads the penultimate representation with a hook on the output layer.
    module = TabularMLP(5, 3, hidden_sizes=(8,))
    seen = []
    output_layer = module.get_submodule(module.embedding_layer_name)
    output_layer.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    module(torch.randn(40, 5)).sum().backward()
    assert len(seen) == 1 and seen[0].shape == (40, 8) and seen[0].grad_fn is not None


def test_network_pickles_and_keeps_its_parameter_names():
    module = TabularMLP(5, 3, hidden_sizes=(8,), numeric_embedding="periodic").eval()
    restored = pickle.loads(pickle.dumps(module))
    X = torch.randn(4, 5)
    torch.testing.assert_close(restored(X), module(X), rtol=0, atol=0)
    assert "layers.3.weight" in dict(module.named_parameters())


def test_one_thread_restores_the_thread_count_after_an_error():
    with _threads(2):
        with pytest.raises(RuntimeError, match="^inside$"), one_thread():
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
        assert torch.get_num_threads() == 2
