"""A faster member epoch (issue 41): cheaper dropout masks behind the recipe of 2026-12-06,
and the pure speed-ups of the skorch net (batches indexed by numpy, fused AdamW, the
validation pass in inference mode), which change no fit (tests/test_golden.py)."""

from __future__ import annotations

import copy
import pickle
import re

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris, make_classification
from skorch.dataset import Dataset
from torch import nn
from torch.utils.data import BatchSampler, RandomSampler

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.estimator._net import RowBatches, RowsDataset
from nescal_sklearn.nn import FastDropout, TabularMLP

torch.set_num_threads(1)


def _bits(seed: int, n: int) -> np.ndarray:
    """The 16-bit draws a FastDropout with this seed makes first: an independent reading of
    numpy's SFC64 stream."""
    return np.random.SFC64(seed).random_raw(-(-n // 4)).view(np.uint16)[:n]


@pytest.mark.parametrize("relu", [False, True])
def test_fast_dropout_drops_where_the_bits_fall_below_p_and_scales_the_rest(relu):
    x = torch.randn(300, 40)
    out = FastDropout(0.25, seed=7, relu=relu)(x)
    kept = torch.from_numpy(_bits(7, x.numel()) >= 16384).view(x.shape)  # 0.25 * 2**16
    expected = (x.clamp_min(0) if relu else x) * kept / 0.75
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=0)
    assert abs(1 - kept.float().mean().item() - 0.25) < 0.01


def test_fast_dropout_gradient_is_that_of_relu_times_the_mask():
    torch.manual_seed(0)
    linear = nn.Linear(6, 50)
    x = torch.randn(200, 6)
    layer = FastDropout(0.3, seed=3, relu=True)
    out = layer(linear(x))
    grad = torch.randn_like(out)
    (ours,) = torch.autograd.grad(out, linear.weight, grad)
    kept = torch.from_numpy(_bits(3, out.numel()) >= round(0.3 * 65536)).view(out.shape)
    reference = torch.relu(linear(x)) * kept / 0.7
    (theirs,) = torch.autograd.grad(reference, linear.weight, grad)
    torch.testing.assert_close(ours, theirs)


def test_fast_dropout_leaves_a_tensor_it_does_not_own_untouched():
    x = torch.randn(20, 5)
    before = x.clone()
    FastDropout(0.5, seed=0, relu=True)(x)
    torch.testing.assert_close(x, before, rtol=0, atol=0)


def test_fast_dropout_is_the_identity_or_relu_in_eval_mode_and_pickles_without_its_buffer():
    layer = FastDropout(0.5, seed=0, relu=True)
    layer(torch.randn(1000, 100))
    x = torch.randn(4, 3)
    torch.testing.assert_close(layer.eval()(x), torch.relu(x))
    torch.testing.assert_close(FastDropout(0.5, seed=0).eval()(x), x)
    assert len(pickle.dumps(layer)) < 5_000  # the 100,000-unit mask buffer stays out
    twin = copy.deepcopy(layer.train())
    y = torch.randn(8, 8)
    torch.testing.assert_close(twin(y), layer(y))  # the generator's state is copied


def test_fast_dropout_refuses_a_probability_of_one():
    with pytest.raises(ValueError, match=re.escape("FastDropout's p must be in [0, 1); got 1.0.")):
        FastDropout(1.0, seed=0)
    with pytest.raises(ValueError, match="dropout_masks must be 'torch' or 'fast'; got 'numpy'."):
        TabularMLP(3, 2, dropout_masks="numpy")


def test_fast_masks_keep_the_initial_weights_and_every_layer_index():
    torch.manual_seed(0)
    plain = TabularMLP(5, 3, hidden_sizes=(16, 8))
    torch.manual_seed(0)
    fast = TabularMLP(5, 3, hidden_sizes=(16, 8), dropout_masks="fast")
    assert list(plain.state_dict()) == list(fast.state_dict())
    for key, value in plain.state_dict().items():
        torch.testing.assert_close(fast.state_dict()[key], value, rtol=0, atol=0)
    assert [type(m).__name__ for m in fast.layers] == [
        "Linear", "FastDropout", "Identity", "Linear", "FastDropout", "Identity", "Linear"
    ]  # fmt: skip
    gelu = TabularMLP(5, 3, hidden_sizes=(16,), activation="gelu", dropout_masks="fast")
    assert [type(m).__name__ for m in gelu.layers] == ["Linear", "GELU", "FastDropout", "Linear"]


def test_the_recipe_of_2026_12_06_is_2026_12_04_with_fast_masks():
    X, y = load_iris(return_X_y=True)
    X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    fit = dict(max_epochs=4, hidden_sizes=(16,), random_state=0)
    old = NeSCalClassifier("ce", recipe="2026-12-04", **fit).fit(X, y)
    torch_masks = NeSCalClassifier("ce", dropout_masks="torch", **fit).fit(X, y)
    fast = NeSCalClassifier("ce", **fit).fit(X, y)
    assert fast.recipe_ == "2026-12-06" and fast.params_["dropout_masks"] == "fast"
    np.testing.assert_array_equal(torch_masks.predict_proba(X), old.predict_proba(X))
    assert np.abs(fast.predict_proba(X) - old.predict_proba(X)).max() > 1e-4  # other masks
    assert old.params_["dropout_masks"] == "torch"


def test_rows_dataset_gives_skorchs_batches():
    X, y = make_classification(50, n_features=4, random_state=0)
    X = X.astype(np.float32)
    rows = [7, 3, 3, 49, 0]
    for features in (X, {"X": X, "index": np.arange(50)}):
        ours, theirs = RowsDataset(features, y)[rows], Dataset(features, y)[rows]
        if isinstance(features, dict):
            assert ours[0].keys() == theirs[0].keys()
            for key in features:
                np.testing.assert_array_equal(ours[0][key], theirs[0][key])
        else:
            np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])
    tensors = RowsDataset(torch.as_tensor(X), torch.as_tensor(y))  # skorch's own indexing
    torch.testing.assert_close(tensors[rows][0], torch.as_tensor(X[rows]))


@pytest.mark.parametrize("n_rows, batch_size", [(1000, 64), (7, 10), (128, 32)])
def test_row_batches_are_torchs_random_sampler_batches_drawn_the_same_way(n_rows, batch_size):
    torch.manual_seed(3)
    theirs = list(BatchSampler(RandomSampler(range(n_rows)), batch_size, drop_last=False))
    after_theirs = torch.rand(3)
    torch.manual_seed(3)
    batches = RowBatches(n_rows, batch_size, shuffle=True)
    ours = [batch.tolist() for batch in batches]
    assert ours == theirs and len(batches) == len(theirs)
    torch.testing.assert_close(torch.rand(3), after_theirs)  # the same draws were made
    in_order = [batch.tolist() for batch in RowBatches(n_rows, batch_size, shuffle=False)]
    assert in_order == list(BatchSampler(range(n_rows), batch_size, drop_last=False))
