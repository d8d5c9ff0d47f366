"""``check_params`` raises a ParameterError naming the parameter, as ``get_params`` spells it.

Every bad parameter of ``NeSCalClassifier`` (its own, scikit-learn's declared constraints,
its loss's, nested ones) comes out as a :class:`~nescal_sklearn.exceptions.ParameterError`
whose ``param`` a caller can use without reading the message; the messages are the ones
the estimator always gave.
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError as SklearnInvalidParameterError

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.exceptions import (
    InvalidParameterError,
    NeSCalError,
    ParameterError,
    ParameterTypeError,
)
from nescal_sklearn.losses import LabelSmoothingLoss, NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss

CASES = [
    pytest.param(
        dict(max_epochs=0),
        InvalidParameterError,
        "max_epochs",
        "The 'max_epochs' parameter of NeSCalClassifier must be None or an int in the range "
        "[1, inf). Got 0 instead.",
        id="constraint",
    ),
    pytest.param(
        dict(n_threads=True),
        ParameterTypeError,
        "n_threads",
        "n_threads must be an int, not a bool; got True.",
        id="bool-for-int",
    ),
    pytest.param(
        dict(hidden_sizes=(8, 0)),
        ParameterError,
        "hidden_sizes",
        "hidden_sizes must be a sequence of ints >= 1 (the width of each hidden layer; () for "
        "none); got [8, 0].",
        id="hidden_sizes",
    ),
    pytest.param(
        dict(freeze=[]),
        ParameterError,
        "freeze",
        "freeze=[] freezes nothing; pass freeze=None, or patterns of the parts to freeze.",
        id="freeze",
    ),
    pytest.param(
        dict(unfreeze_at=2),
        ParameterError,
        "unfreeze_at",
        "unfreeze_at=2 unfreezes the parameters that freeze freezes, but freeze=None; pass "
        "freeze patterns too.",
        id="unfreeze_at",
    ),
    pytest.param(
        dict(freeze=["layers.0*"], unfreeze_lr=0.1),
        ParameterError,
        "unfreeze_lr",
        "unfreeze_lr=0.1 is the learning rate from unfreeze_at on, but unfreeze_at=None; "
        "pass unfreeze_at too.",
        id="unfreeze_lr",
    ),
    pytest.param(
        dict(loss="nescall"),
        ParameterError,
        "loss",
        "Unknown loss 'nescall': expected a TrainingLoss object or one of ['ce', 'flsd53', "
        "'focal', 'label_smoothing', 'mbls', 'mdca', 'mmce', 'nescal', "
        "'nescal_experimental', 'savuc'].",
        id="loss-name",
    ),
    pytest.param(
        dict(loss__weight=-1),
        ParameterError,
        "loss__weight",
        "NeSCalLoss: weight must be >= 0.0; got -1.",
        id="loss-value",
    ),
    pytest.param(
        dict(loss__n_neighbors=2.5),
        ParameterTypeError,
        "loss__n_neighbors",
        "NeSCalLoss: n_neighbors must be an int >= 1; got 2.5.",
        id="loss-type",
    ),
    pytest.param(
        dict(max_epochs=3, loss__warmup=3),
        ParameterError,
        "loss__warmup",
        "loss__warmup=3 ends the warm-up at epoch 4, after the last of max_epochs=3: the "
        "neighbour graph would never be built. Pass a shorter warmup, a fraction in [0, 1), "
        "or more max_epochs.",
        id="loss-warmup",
    ),
    pytest.param(
        dict(loss=NeSCalLoss(base_loss=LabelSmoothingLoss(epsilon=2.0))),
        ParameterError,
        "loss__base_loss__epsilon",
        "LabelSmoothingLoss: epsilon must be >= 0 and <= 1; got 2.0.",
        id="nested-base-loss",
    ),
    pytest.param(
        dict(loss=NeSCalLoss(base_loss="smoothing")),
        ParameterError,
        "loss__base_loss",
        "Unknown loss 'smoothing': expected a TrainingLoss object or one of ['ce', 'flsd53', "
        "'focal', 'label_smoothing', 'mbls', 'mdca', 'mmce', 'nescal', "
        "'nescal_experimental', 'savuc'].",
        id="base-loss-name",
    ),
    pytest.param(
        dict(loss=ExperimentalNeSCalLoss(cache="never")),
        ParameterError,
        "loss__cache",
        "ExperimentalNeSCalLoss: cache must be one of ['batch', 'frozen', 'epoch']; got 'never'.",
        id="experimental-choice",
    ),
]


@pytest.mark.parametrize(("params", "error", "param", "message"), CASES)
def test_check_params_names_the_parameter(params, error, param, message):
    estimator = NeSCalClassifier().set_params(**params)
    with pytest.raises(ParameterError, match=f"^{re.escape(message)}$") as info:
        estimator.check_params()
    assert type(info.value) is error
    assert info.value.param == param
    assert param in estimator.get_params(deep=True)


def test_the_error_classes_are_the_errors_callers_catch():
    with pytest.raises(SklearnInvalidParameterError) as info:
        NeSCalClassifier(max_epochs=0).check_params()
    caught = info.value
    assert isinstance(caught, ParameterError) and isinstance(caught, NeSCalError)
    assert isinstance(caught, ValueError) and isinstance(caught, TypeError)
    with pytest.raises(TypeError):  # a type error stays a TypeError
        NeSCalClassifier().set_params(loss__n_neighbors=2.5).check_params()
    with pytest.raises(ValueError):
        NeSCalClassifier().set_params(loss__n_neighbors=0).check_params()


def test_the_constraints_are_checked_in_scikit_learns_order_with_its_message():
    estimator = NeSCalClassifier(max_epochs=0, batch_size=0, lr=-1.0)
    with pytest.raises(SklearnInvalidParameterError) as theirs:
        estimator._validate_params()
    with pytest.raises(InvalidParameterError) as ours:
        estimator.check_params()
    assert str(ours.value) == str(theirs.value)
    assert ours.value.param == "batch_size"  # get_params order, as scikit-learn's


def test_fit_names_the_parameter_when_the_data_decides():
    X = np.random.default_rng(0).normal(size=(8, 3))
    y = np.arange(8) % 2
    estimator = NeSCalClassifier(max_epochs=2, early_stopping=False).set_params(loss__n_neighbors=9)
    message = "loss__n_neighbors=9 needs at least 10 training rows; got 8."
    with pytest.raises(ParameterError, match=f"^{re.escape(message)}$") as info:
        estimator.fit(X, y)
    assert info.value.param == "loss__n_neighbors"
    with pytest.raises(ParameterError) as info:
        NeSCalClassifier(max_epochs=2, device="tpu").fit(X, y)
    assert info.value.param == "device"


@pytest.mark.parametrize(
    ("params", "param", "value", "context"),
    [
        (dict(max_epochs=0), "max_epochs", 0, {}),
        (dict(loss__n_neighbors=2.5), "loss__n_neighbors", 2.5, {}),
        (dict(max_epochs=3, loss__warmup=3), "loss__warmup", 3, {"max_epochs": 3}),
        (dict(max_epochs=4, loss__warmup=10), "loss__warmup", 10, {"max_epochs": 4}),
    ],
)
def test_the_error_carries_the_values_its_message_names(params, param, value, context):
    """A caller builds its own message from the fields (the lab says where max_epochs
    comes from), never by rewriting the library's text."""
    with pytest.raises(ParameterError) as info:
        NeSCalClassifier().set_params(**params).check_params()
    assert (info.value.param, info.value.value, info.value.context) == (param, value, context)
    for name, shown in {param: value, **context}.items():
        assert f"{name.removeprefix('loss__')}" in str(info.value) and repr(shown) in str(
            info.value
        )


def test_a_nested_error_names_its_context_as_the_owner_spells_it():
    error = ParameterError("warmup", "m", value=5, context={"max_epochs": 3}).nested("loss")
    assert (error.param, error.value, error.context) == ("loss__warmup", 5, {"loss__max_epochs": 3})


@pytest.mark.parametrize("error", [ParameterError, ParameterTypeError, InvalidParameterError])
def test_errors_survive_pickling(error):
    """A fit in a joblib worker sends its error back pickled."""
    raised = error("loss__warmup", "a message", value=7, context={"max_epochs": 3})
    again = pickle.loads(pickle.dumps(raised))
    assert type(again) is error
    assert (again.param, str(again)) == ("loss__warmup", "a message")
    assert (again.value, again.context) == (7, {"max_epochs": 3})
