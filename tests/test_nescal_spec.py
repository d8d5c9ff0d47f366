"""NeSCalLoss is a stateless spec; the per-fit state is one NeSCalRuntime it builds."""

from __future__ import annotations

import math
import pickle
import re

import pytest
import torch
from sklearn.base import clone
from torch import nn

from nescal_sklearn import graph, penalties
from nescal_sklearn.graph import neighbourhood_from_model
from nescal_sklearn.losses import LabelSmoothingLoss, NeSCalLoss, get_loss
from nescal_sklearn.losses._nescal import CHOICES
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
from nescal_sklearn.penalties import NeighbourhoodSmoothing, NeSCalRuntime


def _net(n_features=3, n_classes=2, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_features, 8), nn.ReLU(), nn.Linear(8, n_classes))


def test_spec_and_penalties_layer_share_the_default_divergence():
    import inspect

    default = inspect.signature(NeighbourhoodSmoothing).parameters["divergence"].default
    assert NeSCalLoss().divergence == default == "soft_target"


def test_calling_the_spec_is_the_base_loss():
    logits, target = torch.randn(5, 3), torch.tensor([0, 1, 2, 0, 1])
    torch.testing.assert_close(
        NeSCalLoss()(logits, target), torch.nn.functional.cross_entropy(logits, target)
    )
    smoothed = NeSCalLoss(base_loss=LabelSmoothingLoss(epsilon=0.2))
    torch.testing.assert_close(
        smoothed(logits, target), LabelSmoothingLoss(epsilon=0.2)(logits, target)
    )


def test_build_runtime_leaves_the_spec_untouched_and_clones_cleanly():
    spec = ExperimentalNeSCalLoss(n_neighbors=3, weight=0.7, warmup=0, schedule="cosine")
    before = dict(vars(spec))
    runtime = spec.build_runtime(_net(), torch.randn(20, 3), start_epoch=4, max_epochs=14)
    assert vars(spec) == before
    assert isinstance(runtime, NeSCalRuntime)
    assert (runtime.weight, runtime.schedule, runtime.start_epoch, runtime.end_epoch) == (
        0.7,
        "cosine",
        4,
        14,
    )
    assert runtime.smoothing.neighbors.shape == (20, 3)
    assert clone(spec).get_params() == spec.get_params()
    assert len(pickle.dumps(spec)) < 1000  # settings only


def test_runtime_graph_is_the_model_neighbourhood():
    net, X = _net(), torch.randn(30, 3)
    spec = ExperimentalNeSCalLoss(n_neighbors=4, warmup=0, adaptive="density")
    runtime = spec.build_runtime(net, X, start_epoch=0, max_epochs=5, random_state=0)
    found = neighbourhood_from_model(net, X, 4, random_state=0, return_similarities=True)
    torch.testing.assert_close(runtime.smoothing.neighbors, found.neighbors)
    torch.testing.assert_close(runtime.smoothing.cache.log_probs, found.log_probs)
    assert runtime.smoothing.row_weights is not None and runtime.smoothing.adaptive == "density"


def test_runtime_schedule_and_penalty_by_hand():
    spec = NeSCalLoss(n_neighbors=1, weight=2.0, warmup=0)
    runtime = spec.build_runtime(_net(), torch.randn(2, 3), start_epoch=3, max_epochs=5)
    runtime.smoothing = NeighbourhoodSmoothing(
        torch.tensor([[1], [0]]), torch.log(torch.tensor([[0.9, 0.1], [0.6, 0.4]]))
    )
    assert runtime.set_epoch(2) == 0.0 and runtime.current_weight == 0.0
    assert runtime.set_epoch(3) == 2.0
    logits = torch.zeros(1, 2)
    penalty = runtime.penalty(logits, torch.tensor([0]))
    value = spec(logits, torch.tensor([0])) + runtime.current_weight * penalty
    # CE(uniform, class 0) + 2 * KL((0.6, 0.4) || (0.5, 0.5))
    kl = 0.6 * math.log(1.2) + 0.4 * math.log(0.8)
    assert float(value) == pytest.approx(math.log(2) + 2 * kl, rel=1e-6)
    assert float(penalty) == pytest.approx(kl, rel=1e-5)  # float32
    torch.testing.assert_close(runtime.smoothing.cache.log_probs[0].exp(), torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize(("param", "allowed"), list(CHOICES.items()), ids=list(CHOICES))
def test_allowed_values_come_from_the_layer_that_implements_them(param, allowed):
    layer_constants = [*vars(penalties).values(), *vars(graph).values()]
    assert any(allowed is constant for constant in layer_constants)
    # The supported settings are NeSCalLoss's; the others ExperimentalNeSCalLoss's.
    cls = NeSCalLoss if param in NeSCalLoss().get_params() else ExperimentalNeSCalLoss
    message = f"{cls.__name__}: {param} must be one of {list(allowed)}; got 'nope'."
    with pytest.raises(ValueError, match=re.escape(message)):
        cls(**{param: "nope"}).validate()
    for value in allowed:
        spec = cls(**{param: value})
        if param == "adaptive" and value == "density":
            spec.set_params(graph="knn")
        spec.validate()


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"n_neighbors": 0}, ValueError, "NeSCalLoss: n_neighbors must be an int >= 1; got 0."),
        ({"n_neighbors": 2.5}, TypeError, "NeSCalLoss: n_neighbors must be an int >= 1; got 2.5."),
        (
            {"warmup_patience": 0},
            ValueError,
            "ExperimentalNeSCalLoss: warmup_patience must be an int >= 1; got 0.",
        ),
        (
            {"n_components": 0},
            ValueError,
            "ExperimentalNeSCalLoss: n_components must be None or an int >= 1; got 0.",
        ),
        ({"weight": -1.0}, ValueError, "NeSCalLoss: weight must be >= 0.0; got -1.0."),
        (
            {"warmup": 1.5},
            ValueError,
            "NeSCalLoss: warmup as a float is a fraction of max_epochs and must be in [0, 1); got 1.5.",
        ),
        ({"warmup": -1}, ValueError, "NeSCalLoss: warmup must be >= 0 epochs; got -1."),
        (
            {"warmup": "soon"},
            TypeError,
            "NeSCalLoss: warmup must be an int number of epochs, a float fraction in [0, 1) or 'auto'; got 'soon'.",
        ),
        (
            {"base_loss": "nescal"},
            ValueError,
            "NeSCalLoss: base_loss cannot itself be a neighbour loss; got NeSCalLoss().",
        ),
    ],
)
def test_validate_names_the_parameter_and_the_value(params, error, message):
    cls = ExperimentalNeSCalLoss if message.startswith("Experimental") else NeSCalLoss
    with pytest.raises(error, match=re.escape(message)):
        cls(**params).validate()


def test_the_supported_spec_has_six_settings_and_the_rest_are_experimental():
    """The ablation found the other settings inert, or never measured them: they are
    fixed on NeSCalLoss, at the values ExperimentalNeSCalLoss defaults to."""
    supported = NeSCalLoss().get_params()
    assert sorted(supported) == [
        "base_loss",
        "divergence",
        "graph",
        "n_neighbors",
        "warmup",
        "weight",
    ]
    experimental = ExperimentalNeSCalLoss().get_params()
    assert set(supported) < set(experimental)
    for name, value in experimental.items():
        assert getattr(NeSCalLoss(), name) == value, name
    assert get_loss("nescal_experimental").get_params() == experimental


def test_runtime_refuses_a_cosine_schedule_without_room_to_decay():
    smoothing = NeighbourhoodSmoothing(torch.tensor([[1], [0]]), torch.zeros(2, 2))
    message = "end_epoch must be an integer greater than start_epoch=5 for schedule='cosine'; got end_epoch=5."
    with pytest.raises(ValueError, match=re.escape(message)):
        NeSCalRuntime(smoothing, weight=1.0, schedule="cosine", start_epoch=5, end_epoch=5)


def test_nested_base_loss_parameters_reach_a_named_base_loss():
    spec = NeSCalLoss(base_loss="label_smoothing").set_params(base_loss__epsilon=0.2)
    assert isinstance(spec.base_loss, LabelSmoothingLoss) and spec.base_loss.epsilon == 0.2
    spec = NeSCalLoss().set_params(base_loss="focal", base_loss__gamma=1.0)
    assert spec.base_loss.gamma == 1.0 and spec.get_params()["base_loss__gamma"] == 1.0
