"""NeSCalClassifier(freeze=..., unfreeze_at=..., unfreeze_lr=...): frozen parts of any module."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.estimator._freeze import resolve_frozen
from nescal_sklearn.exceptions import PenaltyInactiveWarning


class EncoderHead(nn.Module):
    """An encoder with BatchNorm and Dropout (whose train mode would change it), and a head."""

    def __init__(self, n_features: int, n_classes: int, width: int = 24):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(n_features, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Dropout(0.5)
        )
        self.head = nn.Linear(width, n_classes)

    def forward(self, X):
        return self.head(self.encoder(X))


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return (X[:600] / 16.0).astype(np.float32), y[:600]


def _module(seed: int = 0) -> EncoderHead:
    torch.manual_seed(seed)
    return EncoderHead(64, 10)


def _fit(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PenaltyInactiveWarning)
        return NeSCalClassifier(**{"max_epochs": 4, "random_state": 0, **params}).fit(X, y)


def _state(module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_frozen_encoder_is_exactly_unchanged_and_the_head_trains(digits):
    X, y = digits
    module = _module()
    before = _state(module)
    clf = _fit(X, y, module=module, freeze=["encoder*"], embedding_layer="head")
    after = clf.module_.state_dict()
    # Weights and BatchNorm running statistics alike: the encoder was in eval mode.
    for key, value in before.items():
        if key.startswith("encoder"):
            assert torch.equal(after[key], value), key
    assert not torch.equal(after["head.weight"], before["head.weight"])
    assert clf.penalty_status_ is not None


def test_frozen_parameters_never_reach_the_optimizer(digits, monkeypatch):
    X, y = digits
    seen = []
    original = torch.optim.AdamW.__init__

    def recording_init(self, params, *args, **kwargs):
        params = list(params)
        seen.append(params)
        original(self, params, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "__init__", recording_init)
    module = _module()
    _fit(X, y, module=module, loss="ce", freeze=["encoder.0.*"], max_epochs=2)
    tensors = []
    for entry in seen[0]:  # parameters, (name, parameter) pairs or parameter groups
        for item in entry["params"] if isinstance(entry, dict) else [entry]:
            tensors.append(item[1] if isinstance(item, tuple) else item)
    # encoder.0 (Linear 64->24) is out; BatchNorm (24,), (24,) and head (10, 24), (10,) are in.
    assert sorted(tuple(t.shape) for t in tensors) == sorted([(24,), (24,), (10, 24), (10,)])


def test_frozen_dropout_and_batchnorm_stay_in_eval_mode_while_training(digits):
    X, y = digits
    modes = []

    class Spy(EncoderHead):
        def forward(self, X):
            out = super().forward(X)  # the modes each part ran in
            if self.training:
                modes.append((self.encoder.training, self.head.training))
            return out

    torch.manual_seed(0)
    _fit(X, y, module=Spy(64, 10), loss="ce", freeze=["encoder"], max_epochs=2)
    assert modes and all(mode == (False, True) for mode in modes)


def test_unfreeze_at_trains_everything_from_that_epoch_at_its_own_lr(digits):
    X, y = digits
    module = _module()
    before = _state(module)
    clf = _fit(X, y, module=module, loss="ce", freeze=["encoder*"], unfreeze_at=3, unfreeze_lr=1e-4)
    after = clf.module_.state_dict()
    assert not torch.equal(after["encoder.0.weight"], before["encoder.0.weight"])
    unfrozen = [i + 1 for i, row in enumerate(clf.history_) if row.get("unfrozen")]
    assert unfrozen == [3]
    # The fitted module is trainable again as a whole (frozen is for training only).
    assert all(p.requires_grad for p in clf.module_.parameters())


def test_unfreeze_lr_is_the_new_groups_learning_rate(digits, monkeypatch):
    X, y = digits
    groups = []
    original = torch.optim.Optimizer.add_param_group

    def recording(self, group):
        groups.append(dict(group))
        return original(self, group)

    monkeypatch.setattr(torch.optim.Optimizer, "add_param_group", recording)
    _fit(X, y, module=_module(), loss="ce", freeze=["encoder*"], unfreeze_at=2, unfreeze_lr=3e-5)
    added = [g for g in groups if len(g["params"]) == 4]  # encoder: Linear w, b + BatchNorm w, b
    assert added and added[-1]["lr"] == 3e-5


def test_parameter_name_patterns_and_module_patterns_resolve_alike():
    module = _module()
    by_module = resolve_frozen(module, ["encoder"])
    by_parameter = resolve_frozen(module, ["encoder.*"])
    assert by_module.parameters == by_parameter.parameters
    assert "encoder" in by_module.modules and "encoder.1" in by_parameter.modules
    assert "head" not in by_module.modules
    only_bias = resolve_frozen(module, ["*.bias"])
    assert only_bias.parameters == {"encoder.0.bias", "encoder.1.bias", "head.bias"}
    assert only_bias.modules == ()  # no module has all of its parameters frozen


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"freeze": ["nope*"]}, ValueError, "freeze pattern 'nope*' matches no parameter"),
        ({"freeze": ["*"]}, ValueError, "freeze=['*'] freezes every parameter of EncoderHead"),
        (
            {"unfreeze_at": 2},
            ValueError,
            "unfreeze_at=2 unfreezes the parameters that freeze freezes, but freeze=None",
        ),
        (
            {"freeze": ["encoder*"], "unfreeze_lr": 1e-4},
            ValueError,
            "unfreeze_lr=0.0001 is the learning rate from unfreeze_at on, but unfreeze_at=None",
        ),
        (
            {"freeze": ["encoder*"], "unfreeze_at": 9},
            ValueError,
            "unfreeze_at=9 is after the last of max_epochs=4",
        ),
        ({"freeze": [""]}, ValueError, "freeze must hold non-empty strings"),
        ({"freeze": "encoder*"}, ValueError, "The 'freeze' parameter of NeSCalClassifier"),
    ],
)
def test_bad_freeze_settings_raise_naming_the_value(digits, params, error, message):
    X, y = digits
    with pytest.raises(error, match=re.escape(message)):
        _fit(X[:100], y[:100], module=_module(), **params)


def test_lr_schedule_applies_to_the_first_groups_and_the_unfrozen_group_keeps_its_lr(
    digits, monkeypatch
):
    from nescal_sklearn.estimator._schedule import EpochLRSchedule

    X, y = digits
    seen = []
    original = EpochLRSchedule.on_epoch_begin

    def recording(self, net, **kwargs):
        original(self, net, **kwargs)
        seen.append([group["lr"] for group in net.optimizer_.param_groups])

    monkeypatch.setattr(EpochLRSchedule, "on_epoch_begin", recording)
    clf = _fit(
        X,
        y,
        module=_module(),
        loss="ce",
        freeze=["encoder*"],
        unfreeze_at=3,
        unfreeze_lr=3e-5,
        lr=1e-3,
        lr_schedule="cosine",
        max_epochs=4,
    )
    expected = [1e-3 * 0.5 * (1 + math.cos(math.pi * e / 4)) for e in range(4)]
    np.testing.assert_allclose(clf.history_[:, "event_lr"], expected, rtol=1e-6)
    np.testing.assert_allclose([lrs[0] for lrs in seen], expected, rtol=1e-6)
    # The encoder's group joins at epoch 3 (1-based) and keeps unfreeze_lr, unscheduled.
    assert [len(lrs) for lrs in seen] == [1, 1, 2, 2]
    assert [lrs[1] for lrs in seen[2:]] == [3e-5, 3e-5]
