"""Every bad input of the reliability log (review of f94bad7, part A), one case per row.

The review fed ``NeSCalClassifier`` (table A1, cases E01-E99), the post-hoc calibrators
(A2, T01-T54) and the calibration metrics (A3, M01-M56) bad and edge inputs, and rated
each outcome. Each case below builds the input its row describes and pins the verdict
the package gives *now*:

* ``Raises``: the exception type (exactly) and a fragment of the message that names the
  parameter or argument and the bad value, so a clear message that turns unclear fails;
* ``Returns``: a legitimate edge input; the result must be valid (probabilities of the
  expected shape, finite, rows summing to 1, or a finite number in range);
* either may list warnings that must be raised: the rows the log found silently wrong
  now warn (or raise).

The ids are the log's. Models are tiny (3 epochs, 8 hidden units) and fitted models are
shared through one lazily-built context per table, so the file runs in seconds.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import torch
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.utils._param_validation import InvalidParameterError

from nescal_sklearn import NeSCalClassifier, PenaltyInactiveWarning, calibration, exceptions
from nescal_sklearn.metrics import (
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_curve,
)
from nescal_sklearn.scorers import get_scorer

# -- what a case expects ---------------------------------------------------------------


@dataclass(frozen=True)
class Raises:
    """The call raises exactly ``error`` with ``fragment`` in its message."""

    error: type[BaseException]
    fragment: str
    warns: tuple[tuple[type[Warning], str], ...] = ()
    param: str | None = None


def Param(error: type[BaseException], param: str, fragment: str, **kwargs) -> Raises:
    """The call raises exactly ``error``, a ParameterError whose ``param`` is ``param``."""
    return Raises(error, fragment, param=param, **kwargs)


@dataclass(frozen=True)
class Returns:
    """The call returns a valid result: probabilities of ``shape``, or a number in ``bounds``."""

    shape: tuple[int, int] | None = None
    bounds: tuple[float, float] = (0.0, 1.0)
    warns: tuple[tuple[type[Warning], str], ...] = ()


@dataclass(frozen=True)
class Case:
    id: str
    what: str
    action: Callable[[Any], Any]
    expect: Raises | Returns


def _params(cases: list[Case]):
    return [pytest.param(case, id=case.id) for case in cases]


def _check_result(result, expect: Returns) -> None:
    if isinstance(result, np.ndarray) and result.ndim == 2:
        assert result.shape == expect.shape
        assert np.all(np.isfinite(result))
        assert np.all((result >= 0) & (result <= 1))
        np.testing.assert_allclose(result.sum(axis=1), 1.0, rtol=1e-5)
    else:
        value = float(result)
        assert np.isfinite(value)
        assert expect.bounds[0] <= value <= expect.bounds[1]


def _run(case: Case, ctx) -> None:
    expect = case.expect
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if isinstance(expect, Raises):
            with pytest.raises(expect.error, match=re.escape(expect.fragment)) as info:
                case.action(ctx)
            assert type(info.value) is expect.error, f"raised {type(info.value).__name__}"
            if expect.param is not None:
                assert info.value.param == expect.param
        else:
            result = case.action(ctx)
    messages = [f"{w.category.__name__}: {w.message}" for w in caught]
    for category, fragment in expect.warns:
        assert any(
            issubclass(w.category, category) and fragment in str(w.message) for w in caught
        ), f"no {category.__name__} containing {fragment!r}; got {messages}"
    # Nothing else may warn (a new degenerate-fit warning on an "ok" row is a regression),
    # except the penalty notice: whether early stopping keeps a penalised epoch of a
    # 3-epoch fit depends on training dynamics, not on the input.
    unexpected = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if issubclass(w.category, UserWarning)
        and not issubclass(w.category, PenaltyInactiveWarning)
        and not any(
            issubclass(w.category, category) and fragment in str(w.message)
            for category, fragment in expect.warns
        )
    ]
    assert not unexpected, f"unexpected warnings: {unexpected}"
    if isinstance(expect, Returns):
        _check_result(result, expect)


# == A1. NeSCalClassifier ===============================================================
# Base estimator NeSCalClassifier(hidden_sizes=(8,), max_epochs=3, batch_size=32,
# random_state=0), with loss__warmup=1, loss__n_neighbors=3 where the graph must be
# built; data 60 x 4, 3 classes.

N_ROWS, N_FEATURES, N_CLASSES = 60, 4, 3


def nescal(**params) -> NeSCalClassifier:
    return NeSCalClassifier(
        hidden_sizes=(8,), max_epochs=3, batch_size=32, random_state=0
    ).set_params(**params)


def graph(**params) -> NeSCalClassifier:
    """The base estimator with a graph built after one warm-up epoch."""
    return nescal(**{"loss__warmup": 1, "loss__n_neighbors": 3, **params})


def experimental(**params) -> NeSCalClassifier:
    """:func:`graph` with ``loss="nescal_experimental"``, for its experimental settings."""
    return graph(**{"loss": "nescal_experimental", **params})


class EstimatorContext:
    @cached_property
    def X(self) -> np.ndarray:
        rng = np.random.RandomState(0)
        X = rng.randn(N_ROWS, N_FEATURES).astype(np.float32)
        X[:, 0] += self.y
        return X

    @cached_property
    def y(self) -> np.ndarray:
        return np.arange(N_ROWS) % N_CLASSES

    @cached_property
    def fitted(self) -> NeSCalClassifier:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return graph().fit(self.X, self.y)

    def with_value(self, value, row=0, col=0) -> np.ndarray:
        X = self.X.astype(np.float64)
        X[row, col] = value
        return X

    def fit(self, estimator, X=None, y=None, **fit_params):
        return estimator.fit(self.X if X is None else X, self.y if y is None else y, **fit_params)

    def proba(self, estimator, X=None, y=None, **fit_params) -> np.ndarray:
        """Fit, then the probabilities on the training rows (for the validity checks)."""
        X = self.X if X is None else X
        return self.fit(estimator, X, y, **fit_params).predict_proba(X)


def _five_rows(ctx):
    return ctx.X[:5], np.array([0, 0, 1, 1, 2])


def _one_row_of_class_2(ctx):
    keep = (ctx.y != 2) | (np.arange(N_ROWS) == 2)
    return ctx.X[keep], ctx.y[keep]


def _x_with_a(ctx) -> np.ndarray:
    X = ctx.X.astype(object)
    X[0, 0] = "a"
    return X


def _string_column_frame(ctx):
    frame = pd.DataFrame(ctx.X, columns=list("abcd"))
    frame["d"] = "u"
    return frame


def _mixed_labels(ctx):
    return [0 if label == 0 else "a" for label in ctx.y]


def _classes_and_predictions(ctx):
    model = ctx.fit(graph(), y=np.array(_mixed_labels(ctx)))
    assert model.classes_.tolist() == ["0", "a"]
    assert set(model.predict(ctx.X).tolist()) <= {"0", "a"}
    return model.predict_proba(ctx.X)


def _y_val_unseen(ctx):
    y_val = ctx.y[:12].copy()
    y_val[0] = 7
    return ctx.fit(graph(), X_val=ctx.X[:12], y_val=y_val)


def _device_cuda(ctx):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: device='cuda' is not a bad input")
    return ctx.fit(graph(device="cuda"))


NOT_FITTED = (
    "This NeSCalClassifier instance is not fitted yet. Call 'fit' with appropriate "
    "arguments before using this estimator."
)
NAN_X = "Input X contains NaN."
INF_X = "Input X contains infinity or a value too large for dtype('float32')."
PROBA = (N_ROWS, N_CLASSES)


def _invalid(name: str, constraint: str, got: str) -> Raises:
    return Param(
        exceptions.InvalidParameterError,
        name,
        f"The {name!r} parameter of NeSCalClassifier must be {constraint}. Got {got} instead.",
    )


def _hidden(got: str) -> Raises:
    return Param(
        exceptions.ParameterError,
        "hidden_sizes",
        "hidden_sizes must be a sequence of ints >= 1 (the width of each hidden layer; () for "
        f"none); got {got}.",
    )


# fmt: off
A1_CASES = [
    Case("E01", "fit X with NaN (nescal)", lambda c: c.fit(graph(), c.with_value(np.nan)),
         Raises(ValueError, NAN_X)),
    Case("E02", "fit X with +inf (nescal)", lambda c: c.fit(graph(), c.with_value(np.inf)),
         Raises(ValueError, INF_X)),
    Case("E03", "fit X with NaN (loss='ce')",
         lambda c: c.fit(nescal(loss="ce"), c.with_value(np.nan)), Raises(ValueError, NAN_X)),
    Case("E04", "predict_proba X with NaN on a fitted model",
         lambda c: c.fitted.predict_proba(c.with_value(np.nan)), Raises(ValueError, NAN_X)),
    Case("E05", "predict_proba X with inf on a fitted model",
         lambda c: c.fitted.predict_proba(c.with_value(np.inf)), Raises(ValueError, INF_X)),
    Case("E06", "fit object/string X",
         lambda c: c.fit(graph(), _x_with_a(c)),
         Raises(ValueError, "could not convert string to float: 'a'")),
    Case("E07", "fit a DataFrame with a string column (no preprocessing)",
         lambda c: c.fit(graph(), _string_column_frame(c)),
         Raises(ValueError, "could not convert string to float: 'u'")),
    Case("E08", "fit 1-D X", lambda c: c.fit(graph(), c.X[:, 0]),
         Raises(ValueError, "Expected 2D array, got 1D array instead")),
    Case("E09", "fit empty X (0 rows)",
         lambda c: c.fit(graph(), np.empty((0, N_FEATURES)), np.empty(0, dtype=int)),
         Raises(ValueError, "Found array with 0 sample(s) (shape=(0, 4)) while a minimum of 2 "
                "is required by NeSCalClassifier.")),
    Case("E10", "fit X with 0 features (60, 0)", lambda c: c.fit(graph(), np.empty((N_ROWS, 0))),
         Raises(ValueError, "Found array with 0 feature(s) (shape=(60, 0)) while a minimum of 1 "
                "is required by NeSCalClassifier.")),
    Case("E11", "fit single-class y", lambda c: c.fit(graph(), y=np.zeros(N_ROWS, dtype=int)),
         Raises(ValueError, "NeSCalClassifier needs samples of at least 2 classes in y; got 1 "
                "class: 0.")),
    Case("E12", "score() with a y label unseen in fit",
         lambda c: c.fitted.score(c.X, np.where(c.y == 2, 9, c.y)), Returns()),
    Case("E13", "predict with 5 features instead of 4",
         lambda c: c.fitted.predict(np.zeros((3, 5))),
         Raises(ValueError, "X has 5 features, but NeSCalClassifier is expecting 4 features as "
                "input.")),
    Case("E14", "predict with 3 features instead of 4",
         lambda c: c.fitted.predict(np.zeros((3, 3))),
         Raises(ValueError, "X has 3 features, but NeSCalClassifier is expecting 4 features as "
                "input.")),
    Case("E15", "fit multi-output y (60, 2)",
         lambda c: c.fit(graph(), y=np.column_stack([c.y, c.y])),
         Raises(ValueError, "y should be a 1d array, got an array of shape (60, 2) instead.")),
    Case("E16", "fit continuous y", lambda c: c.fit(graph(), y=np.linspace(0, 1, N_ROWS)),
         Raises(ValueError, "Unknown label type: continuous.")),
    Case("E17", "fit y with NaN",
         lambda c: c.fit(graph(), y=np.where(np.arange(N_ROWS) == 0, np.nan, c.y)),
         Raises(ValueError, "Input y contains NaN.")),
    Case("E18", "loss__n_neighbors=100 > rows", lambda c: c.fit(graph(loss__n_neighbors=100)),
         Param(exceptions.ParameterError, "loss__n_neighbors", "loss__n_neighbors=100 needs at least 101 training rows; got 48 "
                "after holding out validation_fraction=0.2.")),
    Case("E19", "loss__n_neighbors=47 with 48 training rows",
         lambda c: c.proba(graph(loss__n_neighbors=47)), Returns(PROBA)),
    Case("E20", "loss__n_neighbors=0", lambda c: c.fit(graph(loss__n_neighbors=0)),
         Param(exceptions.ParameterError, "loss__n_neighbors", "NeSCalLoss: n_neighbors must be an int >= 1; got 0.")),
    Case("E21", "loss__n_neighbors=-3", lambda c: c.fit(graph(loss__n_neighbors=-3)),
         Param(exceptions.ParameterError, "loss__n_neighbors", "NeSCalLoss: n_neighbors must be an int >= 1; got -3.")),
    Case("E22", "loss__n_neighbors=3.0", lambda c: c.fit(graph(loss__n_neighbors=3.0)),
         Param(exceptions.ParameterTypeError, "loss__n_neighbors", "NeSCalLoss: n_neighbors must be an int >= 1; got 3.0.")),
    Case("E23", "loss__n_neighbors=2.5", lambda c: c.fit(graph(loss__n_neighbors=2.5)),
         Param(exceptions.ParameterTypeError, "loss__n_neighbors", "NeSCalLoss: n_neighbors must be an int >= 1; got 2.5.")),
    Case("E24", "loss__n_neighbors=np.int64(3)",
         lambda c: c.proba(graph(loss__n_neighbors=np.int64(3))), Returns(PROBA)),
    Case("E25", "loss__weight=-1", lambda c: c.fit(graph(loss__weight=-1)),
         Param(exceptions.ParameterError, "loss__weight", "NeSCalLoss: weight must be >= 0.0; got -1")),
    Case("E26", "loss__weight=nan", lambda c: c.fit(graph(loss__weight=np.nan)),
         Param(exceptions.ParameterError, "loss__weight", "NeSCalLoss: weight must be >= 0.0; got nan.")),
    Case("E27", "loss__weight=inf", lambda c: c.fit(graph(loss__weight=np.inf)),
         Param(exceptions.ParameterError, "loss__weight", "NeSCalLoss: weight must be finite; got inf.")),
    Case("E28", "loss__weight='1.0' (string)", lambda c: c.fit(graph(loss__weight="1.0")),
         Param(exceptions.ParameterTypeError, "loss__weight", "NeSCalLoss: weight must be a real number; got str '1.0'.")),
    Case("E29", "loss='nescall' (unknown name)", lambda c: c.fit(nescal(loss="nescall")),
         Param(exceptions.ParameterError, "loss", "Unknown loss 'nescall': expected a TrainingLoss object or one of")),
    Case("E30", "loss=42 (wrong type)", lambda c: c.fit(nescal(loss=42)),
         Param(exceptions.InvalidParameterError, "loss", "The 'loss' parameter of NeSCalClassifier must be an "
                "instance of")),
    Case("E31", "set_params(foo=1)", lambda c: nescal().set_params(foo=1),
         Raises(ValueError, "Invalid parameter 'foo' for estimator NeSCalClassifier")),
    Case("E32", "set_params(loss__foo=1)", lambda c: nescal().set_params(loss__foo=1),
         Raises(ValueError, "Invalid parameter 'foo' for NeSCalLoss; valid parameters are")),
    Case("E33", "set_params(loss__foo=1) with loss='ce'",
         lambda c: nescal(loss="ce").set_params(loss__foo=1),
         Raises(ValueError, "Invalid parameter 'foo' for CrossEntropyLoss; valid parameters "
                "are [].")),
    Case("E34", "NeSCalClassifier(foo=1)", lambda c: NeSCalClassifier(foo=1),
         Raises(TypeError, "got an unexpected keyword argument 'foo'")),
    Case("E35", "fit float16 X", lambda c: c.proba(graph(), c.X.astype(np.float16)),
         Returns(PROBA)),
    Case("E36", "fit int X", lambda c: c.proba(graph(), np.round(3 * c.X).astype(int)),
         Returns(PROBA)),
    Case("E37", "fit scipy.sparse CSR X",
         lambda c: c.fit(graph(), scipy.sparse.csr_matrix(c.X)),
         Raises(TypeError, "Sparse data was passed for X, but dense data is required.")),
    Case("E38", "5 rows, 3 classes, early stopping", lambda c: c.fit(graph(), *_five_rows(c)),
         Raises(ValueError, "needs at least 2 rows of every class; class 2 has 1. Pass "
                "early_stopping=False, X_val and y_val, or more data.")),
    Case("E39", "5 rows, 3 classes, early_stopping=False, loss__n_neighbors=3",
         lambda c: c.proba(graph(early_stopping=False), *_five_rows(c)), Returns((5, 3))),
    Case("E40", "5 rows, early_stopping=False, default n_neighbors=10",
         lambda c: c.fit(nescal(loss__warmup=1, early_stopping=False), *_five_rows(c)),
         Param(exceptions.ParameterError, "loss__n_neighbors", "loss__n_neighbors=10 needs at least 11 training rows; got 5.")),
    Case("E41", "all rows identical", lambda c: c.proba(graph(), np.ones_like(c.X)),
         Returns(PROBA)),
    Case("E42", "all rows identical, graph_method='approximate'",
         lambda c: c.proba(experimental(loss__graph_method="approximate"), np.ones_like(c.X)),
         Returns(PROBA)),
    Case("E43", "1 row of class 2, early stopping",
         lambda c: c.fit(graph(), *_one_row_of_class_2(c)),
         Raises(ValueError, "needs at least 2 rows of every class; class 2 has 1.")),
    Case("E44", "1 row of class 2, early_stopping=False",
         lambda c: c.proba(graph(early_stopping=False), *_one_row_of_class_2(c)),
         Returns((41, 3))),
    Case("E45", "max_epochs=0", lambda c: c.fit(graph(max_epochs=0)),
         _invalid("max_epochs", "None or an int in the range [1, inf)", "0")),
    Case("E46", "batch_size=1000 > 60 rows", lambda c: c.proba(graph(batch_size=1000)),
         Returns(PROBA)),
    # E47, E48 and E94 were silently plain cross-entropy (P3): now refused in fit.
    Case("E47", "loss__warmup=50 > max_epochs=3", lambda c: c.fit(graph(loss__warmup=50)),
         Param(exceptions.ParameterError, "loss__warmup", "loss__warmup=50 ends the warm-up at epoch 51, after")),
    Case("E48", "loss__warmup=3 == max_epochs=3", lambda c: c.fit(graph(loss__warmup=3)),
         Param(exceptions.ParameterError, "loss__warmup", "loss__warmup=3 ends the warm-up at epoch 4, after")),
    Case("E49", "loss__warmup=0.99 (fraction), max_epochs=3",
         lambda c: c.proba(graph(loss__warmup=0.99)), Returns(PROBA)),
    Case("E50", "loss__warmup=-1", lambda c: c.fit(graph(loss__warmup=-1)),
         Param(exceptions.ParameterError, "loss__warmup", "NeSCalLoss: warmup must be >= 0 epochs; got -1.")),
    Case("E51", "loss__warmup=1.5", lambda c: c.fit(graph(loss__warmup=1.5)),
         Param(exceptions.ParameterError, "loss__warmup", "NeSCalLoss: warmup as a float is a fraction of max_epochs and must "
                "be in [0, 1); got 1.5.")),
    # E52-E55, E91, E92: hidden_sizes entries were not validated (P4).
    Case("E52", "hidden_sizes=(0,)", lambda c: c.fit(graph(hidden_sizes=(0,))), _hidden("[0]")),
    Case("E53", "hidden_sizes=(-4,)", lambda c: c.fit(graph(hidden_sizes=(-4,))),
         _hidden("[-4]")),
    Case("E54", "hidden_sizes=('a',)", lambda c: c.fit(graph(hidden_sizes=("a",))),
         _hidden("['a']")),
    Case("E55", "hidden_sizes=(2.7,)", lambda c: c.fit(graph(hidden_sizes=(2.7,))),
         _hidden("[2.7]")),
    Case("E56", "hidden_sizes=8 (scalar)", lambda c: c.fit(graph(hidden_sizes=8)),
         _invalid("hidden_sizes", "None or an array-like", "8")),
    Case("E57", "hidden_sizes=() (no hidden layer)", lambda c: c.proba(graph(hidden_sizes=())),
         Returns(PROBA)),
    Case("E58", "lr=nan", lambda c: c.fit(graph(lr=np.nan)),
         _invalid("lr", "None or a float in the range (0.0, inf)", "nan")),
    Case("E59", "lr=inf", lambda c: c.fit(graph(lr=np.inf)),
         _invalid("lr", "None or a float in the range (0.0, inf)", "inf")),
    Case("E60", "dropout=1.0", lambda c: c.fit(graph(dropout=1.0)),
         _invalid("dropout", "None or a float in the range [0.0, 1.0)", "1.0")),
    Case("E61", "device='tpu'", lambda c: c.fit(graph(device="tpu")),
         Param(exceptions.ParameterError, "device", "device='tpu' is not a torch device; expected a device string such "
                "as 'cpu', 'cuda' or 'cuda:1'")),
    Case("E62", "device='cuda' without CUDA", _device_cuda,
         Param(exceptions.ParameterError, "device", "device='cuda' was requested but CUDA is not available.")),
    Case("E63", "mixup=nan", lambda c: c.fit(graph(mixup=np.nan)),
         _invalid("mixup", "a float in the range [0.0, inf)", "nan")),
    Case("E64", "validation_fraction=0.99", lambda c: c.fit(graph(validation_fraction=0.99)),
         Raises(ValueError, "early_stopping='nll' with validation_fraction=0.99 splits the 60 "
                "rows into 0 training and 60 validation rows")),
    Case("E65", "X_val given, y_val missing", lambda c: c.fit(graph(), X_val=c.X[:12]),
         Raises(ValueError, "X_val and y_val must be passed together; got only one of them.")),
    Case("E66", "X_val with 3 features",
         lambda c: c.fit(graph(), X_val=c.X[:12, :3], y_val=c.y[:12]),
         Raises(ValueError, "X has 3 features, but NeSCalClassifier is expecting 4 features as "
                "input.")),
    Case("E67", "y_val with an unseen label", _y_val_unseen,
         Raises(ValueError, "y_val contains labels not seen in y: [7]; classes are [0, 1, 2].")),
    Case("E68", "X_val with NaN",
         lambda c: c.fit(graph(), X_val=c.with_value(np.nan)[:12], y_val=c.y[:12]),
         Raises(ValueError, NAN_X)),
    Case("E69", "loss__reduction='pca', n_components=50 > 8 embedding dimensions",
         lambda c: c.fit(experimental(loss__reduction="pca", loss__n_components=50)),
         Raises(ValueError, "n_components=50 is out of range for reduction='pca': it must be "
                "between 1 and min(n_samples, n_features) = 8.")),
    Case("E70", "loss__reduction='umap'", lambda c: c.proba(experimental(loss__reduction="umap")),
         Returns(PROBA)),
    Case("E71", "loss__divergence='kl' (unknown)", lambda c: c.fit(graph(loss__divergence="kl")),
         Param(exceptions.ParameterError, "loss__divergence", "NeSCalLoss: divergence must be one of")),
    Case("E72", "loss__target_temperature=0",
         lambda c: c.fit(experimental(loss__target_temperature=0)),
         Param(exceptions.ParameterError, "loss__target_temperature", "ExperimentalNeSCalLoss: target_temperature must be > 0.0; got 0.")),
    Case("E73", "loss__base_loss='nescal'", lambda c: c.fit(graph(loss__base_loss="nescal")),
         Param(exceptions.ParameterError, "loss__base_loss", "NeSCalLoss: base_loss cannot itself be a neighbour loss")),
    Case("E74", "loss='focal', loss__gamma=-1",
         lambda c: c.fit(nescal(loss="focal", loss__gamma=-1)),
         Param(exceptions.ParameterError, "loss__gamma", "FocalLoss: gamma must be >= 0; got -1.")),
    Case("E75", "loss='label_smoothing', loss__epsilon=1.5",
         lambda c: c.fit(nescal(loss="label_smoothing", loss__epsilon=1.5)),
         Param(exceptions.ParameterError, "loss__epsilon", "LabelSmoothingLoss: epsilon must be >= 0 and <= 1; got 1.5.")),
    Case("E76", "predict before fit", lambda c: nescal().predict(c.X),
         Raises(NotFittedError, NOT_FITTED)),
    Case("E77", "string labels y",
         lambda c: c.proba(graph(), y=np.array(["a", "b", "c"])[c.y]), Returns(PROBA)),
    # E78: finite, but saturated at exactly 0/1 from a garbage epoch: now warned about
    # (review of ed7ab4a, E151).
    Case("E78", "huge values in X (1e30)", lambda c: c.proba(graph(), c.X * 1e30),
         Returns(PROBA, warns=((UserWarning, "NeSCalClassifier returned a degenerate model: "
                                "the epoch early stopping kept (epoch 1) has a validation NLL"),))),
    Case("E79", "float64 values overflowing float32 (1e40)",
         lambda c: c.fit(graph(), c.X.astype(np.float64) * 1e40), Raises(ValueError, INF_X)),
    Case("E80", "loss__n_neighbors=True", lambda c: c.fit(graph(loss__n_neighbors=True)),
         Param(exceptions.ParameterTypeError, "loss__n_neighbors", "NeSCalLoss: n_neighbors must be an int >= 1; got True.")),
    Case("E81", "warmup='auto' with early_stopping=False",
         lambda c: c.proba(nescal(loss__n_neighbors=3, early_stopping=False)),
         Returns(PROBA, warns=((UserWarning, "loss__warmup='auto' ends the warm-up where the "
                                "validation NLL stops improving, but early_stopping=False"),))),
    Case("E82", "patience=0", lambda c: c.fit(graph(patience=0)),
         _invalid("patience", "None, an int in the range [1, inf) or an instance of 'bool' or an instance of 'numpy.bool'", "0")),
    Case("E83", "max_epochs=2.0", lambda c: c.fit(graph(max_epochs=2.0)),
         _invalid("max_epochs", "None or an int in the range [1, inf)", "2.0")),
    Case("E84", "batch_size=0", lambda c: c.fit(graph(batch_size=0)),
         _invalid("batch_size", "None, an int in the range [1, inf) or a str among {'auto'}", "0")),
    Case("E85", "graph='random', n_neighbors=47 (48 training rows)",
         lambda c: c.proba(graph(loss__graph="random", loss__n_neighbors=47)), Returns(PROBA)),
    Case("E86", "adaptive='density' with graph='random'",
         lambda c: c.fit(experimental(loss__graph="random", loss__adaptive="density")),
         Param(exceptions.ParameterError, "loss__adaptive", "ExperimentalNeSCalLoss: adaptive='density' weighs rows by their similarity to "
                "kNN neighbours and needs graph='knn'; got graph='random'.")),
    Case("E87", "y as a list mixing int and str",
         lambda c: c.proba(graph(), y=_mixed_labels(c)), Returns((N_ROWS, 2))),
    Case("E88", "X with 1 row", lambda c: c.fit(graph(), c.X[:1], c.y[:1]),
         Raises(ValueError, "Found array with 1 sample(s) (shape=(1, 4)) while a minimum of 2 is "
                "required by NeSCalClassifier.")),
    Case("E89", "3-D X", lambda c: c.fit(graph(), c.X[:, :, None]),
         Raises(ValueError, "Found array with dim 3, while dim <= 2 is required by "
                "NeSCalClassifier.")),
    Case("E90", "complex X", lambda c: c.fit(graph(), c.X.astype(np.complex128)),
         Raises(ValueError, "Complex data not supported")),
    Case("E91", "hidden_sizes=(0,) with loss='ce'",
         lambda c: c.fit(nescal(loss="ce", hidden_sizes=(0,))), _hidden("[0]")),
    Case("E92", "hidden_sizes=(8, 0, 8) with loss='ce'",
         lambda c: c.fit(nescal(loss="ce", hidden_sizes=(8, 0, 8))), _hidden("[8, 0, 8]")),
    Case("E93", "y mixing int and str: classes_ and predict dtype", _classes_and_predictions,
         Returns((N_ROWS, 2))),
    Case("E94", "warmup=50 > max_epochs=3 with loss__weight=2 (was identical to 'ce')",
         lambda c: c.fit(graph(loss__warmup=50, loss__weight=2.0)),
         Param(exceptions.ParameterError, "loss__warmup", "loss__warmup=50 ends the warm-up at epoch 51, after")),
    Case("E95", "module_kwargs={'bogus': 1}", lambda c: c.fit(graph(module_kwargs={"bogus": 1})),
         Raises(TypeError, "TabularMLP.__init__() got an unexpected keyword argument 'bogus'")),
    Case("E96", "embedding_layer='nope'", lambda c: c.fit(graph(embedding_layer="nope")),
         Raises(ValueError, "embedding_layer='nope' is not a submodule of TabularMLP; available "
                "names:")),
    Case("E97", "loss__n_components=0 with reduction='pca'",
         lambda c: c.fit(experimental(loss__reduction="pca", loss__n_components=0)),
         Param(exceptions.ParameterError, "loss__n_components", "ExperimentalNeSCalLoss: n_components must be None or an int >= 1; got 0.")),
    Case("E98", "loss__graph_method='approx' (typo)",
         lambda c: c.fit(experimental(loss__graph_method="approx")),
         Param(exceptions.ParameterError, "loss__graph_method", "ExperimentalNeSCalLoss: graph_method must be one of ['auto', 'exact', "
                "'approximate']; got 'approx'.")),
    Case("E99", "loss__warmup='Auto' (case)", lambda c: c.fit(graph(loss__warmup="Auto")),
         Param(exceptions.ParameterTypeError, "loss__warmup", "NeSCalLoss: warmup must be an int "
               "number of epochs, a float fraction in [0, 1) or 'auto'; got 'Auto'.")),
]
# fmt: on


@pytest.fixture(scope="module")
def estimator_context():
    return EstimatorContext()


@pytest.mark.parametrize("case", _params(A1_CASES))
def test_estimator_bad_inputs(case, estimator_context):
    _run(case, estimator_context)


# == A2. Post-hoc calibrators ===========================================================
# CalibratedTemperature (CT) unless named; LR = LogisticRegression(max_iter=200);
# Frozen = FrozenEstimator(fitted NeSCalClassifier, the A1 base estimator with a graph);
# data 80 x 4, 4 classes.

CAL_ROWS, CAL_CLASSES = 80, 4
CAL_PROBA = (CAL_ROWS, CAL_CLASSES)


def ct(estimator=None, **params) -> calibration.CalibratedTemperature:
    estimator = LogisticRegression(max_iter=200) if estimator is None else estimator
    return calibration.CalibratedTemperature(estimator, random_state=0, **params)


def lr() -> LogisticRegression:
    return LogisticRegression(max_iter=200)


class CalibratorContext:
    @cached_property
    def y(self) -> np.ndarray:
        return np.arange(CAL_ROWS) % CAL_CLASSES

    @cached_property
    def X(self) -> np.ndarray:
        X = np.random.RandomState(0).randn(CAL_ROWS, N_FEATURES)
        X[:, 0] += self.y
        return X

    @cached_property
    def model(self) -> NeSCalClassifier:
        """The NeSCal model that ``frozen`` wraps, fitted on the calibration data."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return graph().fit(self.X, self.y)

    @property
    def frozen(self) -> FrozenEstimator:
        return FrozenEstimator(self.model)

    @cached_property
    def fitted(self) -> calibration.CalibratedTemperature:
        return ct(lr()).fit(self.X, self.y)

    @cached_property
    def fitted_frozen(self) -> calibration.CalibratedTemperature:
        return ct(self.frozen).fit(self.X, self.y)

    def with_value(self, value) -> np.ndarray:
        X = self.X.copy()
        X[0, 0] = value
        return X

    def proba(self, calibrator, X=None, y=None, **fit_params) -> np.ndarray:
        """Fit, then the probabilities on all calibration rows (for the validity checks)."""
        X = self.X if X is None else X
        return calibrator.fit(X, self.y if y is None else y, **fit_params).predict_proba(X)

    @cached_property
    def margin(self) -> np.ndarray:
        """The frozen model's logit of each row's true class minus the row's mean logit."""
        logits = self.model.decision_function(self.X)
        return logits[np.arange(CAL_ROWS), self.y] - logits.mean(axis=1)

    @property
    def below_average(self) -> np.ndarray:
        return self.margin < 0

    def one_class_scored_high(self) -> tuple[np.ndarray, np.ndarray]:
        """All rows of the class the model ranks best on average among those it sometimes
        gets wrong: the NLL optimum of a temperature on them is interior (no warning)."""
        correct = self.model.predict(self.X) == self.y
        candidates = [
            label
            for label in range(CAL_CLASSES)
            if not correct[self.y == label].all() and self.margin[self.y == label].mean() > 0
        ]
        assert candidates, "the frozen model ranks no class above average: retune the fixture"
        label = max(candidates, key=lambda label: self.margin[self.y == label].mean())
        return self.X[self.y == label], self.y[self.y == label]

    def one_class_scored_low(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows of a single class, all scored below average: the NLL optimum is T = inf."""
        label = np.bincount(self.y[self.below_average], minlength=CAL_CLASSES).argmax()
        rows = self.below_average & (self.y == label)
        return self.X[rows], self.y[rows]

    def one_row_scored_low(self) -> tuple[np.ndarray, np.ndarray]:
        row = int(np.flatnonzero(self.below_average)[0])
        return self.X[row : row + 1], self.y[row : row + 1]


def _separable(n_per_class: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.repeat(np.arange(n_classes), n_per_class)
    X = np.random.RandomState(1).randn(y.size, N_FEATURES)
    X[np.arange(y.size), y] += 20.0
    return X, y


def _ct_separable(n_per_class: int, n_classes: int) -> np.ndarray:
    X, y = _separable(n_per_class, n_classes)
    return ct(lr()).fit(X, y).predict_proba(X)


def _one_row_of_class_3(ctx) -> tuple[np.ndarray, np.ndarray]:
    keep = (ctx.y != 3) | (np.arange(CAL_ROWS) == 3)
    return ctx.X[keep], ctx.y[keep]


def _cal_class_only(ctx, label=0) -> tuple[np.ndarray, np.ndarray]:
    rows = ctx.y == label
    return ctx.X[rows], ctx.y[rows]


def _frozen_fit_proba(ctx, calibrator, X, y) -> np.ndarray:
    return calibrator.fit(X, y).predict_proba(ctx.X)


UPPER_BOUND = "The fitted temperature is degenerate (at the upper bound of the search"
LOWER_BOUND = "Every calibration row is already classified correctly, so the NLL keeps falling"
ABSENT = (
    "those classes keep the model's own probability and the map calibrates the other classes only"
)
MIX = "more parameters than rows, so its probabilities are mixed with the model's own"
ONE_CLASS = "nothing is calibrated: the calibrated probabilities are the model's own"


def _cal_invalid(name: str, constraint: str, got: str, owner="CalibratedTemperature") -> Raises:
    return Raises(
        InvalidParameterError,
        f"The {name!r} parameter of {owner} must be {constraint}. Got {got} instead.",
    )


# fmt: off
A2_CASES = [
    Case("T01", "CT(LR) fit X with NaN", lambda c: ct(lr()).fit(c.with_value(np.nan), c.y),
         Raises(ValueError, NAN_X)),
    Case("T02", "CT(Frozen) fit X with NaN",
         lambda c: ct(c.frozen).fit(c.with_value(np.nan), c.y), Raises(ValueError, NAN_X)),
    Case("T03", "CT(Frozen) fit X with inf",
         lambda c: ct(c.frozen).fit(c.with_value(np.inf), c.y), Raises(ValueError, INF_X)),
    Case("T04", "fitted CT predict_proba X with NaN",
         lambda c: c.fitted.predict_proba(c.with_value(np.nan)), Raises(ValueError, NAN_X)),
    Case("T05", "CT(LR) fit string X",
         lambda c: ct(lr()).fit(_x_with_a(c), c.y),
         Raises(ValueError, "could not convert string to float: 'a'")),
    Case("T06", "CT(LR) fit 1-D X", lambda c: ct(lr()).fit(c.X[:, 0], c.y),
         Raises(ValueError, "Expected 2D array, got 1D array instead")),
    Case("T07", "fitted CT predict 1-D X", lambda c: c.fitted.predict(c.X[:, 0]),
         Raises(ValueError, "Expected 2D array, got 1D array instead")),
    # T08 said "got 0 class: []" (P9): now it names the empty input.
    Case("T08", "CT(LR) fit empty X",
         lambda c: ct(lr()).fit(np.empty((0, N_FEATURES)), np.empty(0)),
         Raises(ValueError, "CalibratedTemperature cannot be fitted on empty input: X and y "
                "have 0 rows (samples).")),
    Case("T09", "CT(Frozen) fit empty X",
         lambda c: ct(c.frozen).fit(np.empty((0, N_FEATURES)), np.empty(0)),
         Raises(ValueError, "CalibratedTemperature cannot be fitted on empty input: X and y "
                "have 0 rows (samples).")),
    Case("T10", "CT(LR) fit X with 0 features",
         lambda c: ct(lr()).fit(np.empty((CAL_ROWS, 0)), c.y),
         Raises(ValueError, "Found array with 0 feature(s) (shape=(64, 0)) while a minimum of 1 "
                "is required by LogisticRegression.")),
    Case("T11", "CT(LR) single-class y", lambda c: ct(lr()).fit(c.X, np.zeros(CAL_ROWS, int)),
         Raises(ValueError, "CalibratedTemperature needs at least 2 classes in y to fit its "
                "estimator; got 1 class: [0].")),
    # T12 and T53 went silently to T = e^10 (P6): now they warn.
    Case("T12", "CT(Frozen) calibration y of one class only",
         lambda c: _frozen_fit_proba(c, ct(c.frozen), *c.one_class_scored_low()),
         Returns(CAL_PROBA, warns=((UserWarning, ONE_CLASS),))),
    Case("T13", "CT(Frozen) calibration y with a label unseen by the estimator",
         lambda c: ct(c.frozen).fit(c.X, np.where(c.y == 3, 9, c.y)),
         Raises(ValueError, "y contains label(s) [9] that the frozen estimator was not fitted "
                "on; its classes_ are [0, 1, 2, 3].")),
    Case("T14", "fitted CT score with an unseen label",
         lambda c: c.fitted.score(c.X, np.where(c.y == 3, 9, c.y)), Returns()),
    Case("T15", "fitted CT predict with 3 features", lambda c: c.fitted.predict(c.X[:, :3]),
         Raises(ValueError, "X has 3 features, but CalibratedTemperature is expecting 4 features "
                "as input.")),
    Case("T16", "CT(Frozen) predict with 8 features",
         lambda c: c.fitted_frozen.predict(np.hstack([c.X, c.X])),
         Raises(ValueError, "X has 8 features, but CalibratedTemperature is expecting 4 features "
                "as input.")),
    Case("T17", "CT multi-output y", lambda c: ct(lr()).fit(c.X, np.column_stack([c.y, c.y])),
         Raises(ValueError, "y should be a 1d array, got an array of shape (80, 2) instead.")),
    Case("T18", "CT continuous y", lambda c: ct(lr()).fit(c.X, np.linspace(0, 1, CAL_ROWS)),
         Raises(ValueError, "Unknown label type: continuous.")),
    Case("T19", "CT validation_fraction=0",
         lambda c: ct(lr(), validation_fraction=0).fit(c.X, c.y),
         _cal_invalid("validation_fraction", "a float in the range (0.0, 1.0)", "0")),
    Case("T20", "CT validation_fraction=1.5",
         lambda c: ct(lr(), validation_fraction=1.5).fit(c.X, c.y),
         _cal_invalid("validation_fraction", "a float in the range (0.0, 1.0)", "1.5")),
    Case("T21", "CT validation_fraction=nan",
         lambda c: ct(lr(), validation_fraction=np.nan).fit(c.X, c.y),
         _cal_invalid("validation_fraction", "a float in the range (0.0, 1.0)", "nan")),
    Case("T22", "CT cv=1", lambda c: ct(lr(), cv=1).fit(c.X, c.y),
         Raises(InvalidParameterError, "The 'cv' parameter of CalibratedTemperature must be an "
                "int in the range [2, inf)")),
    Case("T23", "CT cv=100 (> rows)", lambda c: ct(lr(), cv=100).fit(c.X, c.y),
         Raises(ValueError, "Cannot have number of splits n_splits=100 greater than the number "
                "of samples: n_samples=80.")),
    Case("T24", "CT sample_weight negative",
         lambda c: ct(lr()).fit(c.X, c.y, sample_weight=np.r_[-1.0, np.ones(CAL_ROWS - 1)]),
         Raises(ValueError, "sample_weight has negative values; weights must be non-negative.")),
    Case("T25", "CT sample_weight NaN",
         lambda c: ct(lr()).fit(c.X, c.y, sample_weight=np.r_[np.nan, np.ones(CAL_ROWS - 1)]),
         Raises(ValueError, "Input sample_weight contains NaN.")),
    Case("T26", "CT sample_weight of the wrong length",
         lambda c: ct(lr()).fit(c.X, c.y, sample_weight=np.ones(CAL_ROWS - 1)),
         Raises(ValueError, "sample_weight has shape (79,); expected (80,), one weight per "
                "sample.")),
    Case("T27", "CT sample_weight all zeros",
         lambda c: ct(lr()).fit(c.X, c.y, sample_weight=np.zeros(CAL_ROWS)),
         Raises(ValueError, "Sample weights must contain at least one non-zero number.")),
    Case("T28", "CT sample_weight inf",
         lambda c: ct(lr()).fit(c.X, c.y, sample_weight=np.r_[np.inf, np.ones(CAL_ROWS - 1)]),
         Raises(ValueError, "Input sample_weight contains infinity")),
    Case("T29", "CT(LR) sparse X",
         lambda c: ct(lr()).fit(scipy.sparse.csr_matrix(c.X), c.y).predict_proba(
             scipy.sparse.csr_matrix(c.X)), Returns(CAL_PROBA)),
    Case("T30", "CT(Frozen) sparse X",
         lambda c: ct(c.frozen).fit(scipy.sparse.csr_matrix(c.X), c.y),
         Raises(TypeError, "Sparse data was passed for X, but dense data is required.")),
    Case("T31", "CT(LR) float16 X", lambda c: c.proba(ct(lr()), c.X.astype(np.float16)),
         Returns(CAL_PROBA)),
    Case("T32", "CT(LR) int X", lambda c: c.proba(ct(lr()), np.round(3 * c.X).astype(int)),
         Returns(CAL_PROBA)),
    Case("T33", "CT(LR) 5 rows, 3 classes",
         lambda c: ct(lr()).fit(c.X[:5], np.array([0, 0, 1, 1, 2])),
         Raises(ValueError, "Class 2 has only 1 sample in y; the held-out split "
                "(validation_fraction=0.2) needs at least 2 samples of every class")),
    Case("T34", "CT(LR) 6 rows, 3 classes (2 per class)", lambda c: _ct_separable(2, 3),
         Returns((6, 3), warns=((UserWarning, LOWER_BOUND),))),
    # T35: identical rows give LR constant logits, no better than uniform: now it says so.
    Case("T35", "CT(LR) all rows identical",
         lambda c: c.proba(ct(lr()), np.ones_like(c.X)),
         Returns(CAL_PROBA, warns=((UserWarning, UPPER_BOUND),))),
    Case("T36", "CT(LR) 1 row of a class",
         lambda c: ct(lr()).fit(*_one_row_of_class_3(c)),
         Raises(ValueError, "Class 3 has only 1 sample in y; the held-out split")),
    Case("T37", "CT set_params(foo=1)", lambda c: ct(lr()).set_params(foo=1),
         Raises(ValueError, "Invalid parameter 'foo' for estimator CalibratedTemperature")),
    Case("T38", "CT estimator=LinearRegression", lambda c: ct(LinearRegression()).fit(c.X, c.y),
         Raises(InvalidParameterError, "The 'estimator' parameter of CalibratedTemperature must "
                "be an object implementing 'fit' and 'predict_proba'")),
    Case("T39", "CT estimator='lr' (string)", lambda c: ct("lr").fit(c.X, c.y),
         Raises(InvalidParameterError, "The 'estimator' parameter of CalibratedTemperature must "
                "be an object implementing 'fit' and 'predict_proba'")),
    Case("T40", "CT(FrozenEstimator(unfitted NeSCal))",
         lambda c: ct(FrozenEstimator(graph())).fit(c.X, c.y),
         Raises(NotFittedError, "The NeSCalClassifier inside the FrozenEstimator is not fitted; "
                "fit it before freezing it, or pass it unfrozen")),
    Case("T41", "CT(Frozen) with cv=3", lambda c: ct(c.frozen, cv=3).fit(c.X, c.y),
         Raises(ValueError, "cv=3 cannot be used with a FrozenEstimator: a frozen estimator is "
                "never refitted")),
    Case("T42", "CT predict before fit", lambda c: ct(lr()).predict(c.X),
         Raises(NotFittedError, "This CalibratedTemperature instance is not fitted yet.")),
    Case("T43", "CT, every calibration row correct (separable)", lambda c: _ct_separable(20, 2),
         Returns((40, 2), warns=((UserWarning, LOWER_BOUND),))),
    Case("T44", "CT(Frozen), y with NaN",
         lambda c: ct(c.frozen).fit(c.X, np.where(np.arange(CAL_ROWS) == 0, np.nan, c.y)),
         Raises(ValueError, "Input y contains NaN.")),
    Case("T45", "CalibratedHistogramBinning n_bins=0",
         lambda c: calibration.CalibratedHistogramBinning(lr(), n_bins=0).fit(c.X, c.y),
         _cal_invalid("n_bins", "an int in the range [1, inf)", "0",
                      owner="CalibratedHistogramBinning")),
    Case("T46", "CalibratedHistogramBinning n_bins=10000 (> rows)",
         lambda c: c.proba(
             calibration.CalibratedHistogramBinning(lr(), n_bins=10000, random_state=0)),
         Returns(CAL_PROBA, warns=((UserWarning, MIX),))),
    Case("T47", "CalibratedVectorScaling reg_lambda=-1 (no such parameter)",
         lambda c: calibration.CalibratedVectorScaling(lr(), reg_lambda=-1),
         Raises(TypeError, "got an unexpected keyword argument 'reg_lambda'")),
    Case("T48", "CalibratedMatrixScaling reg_mu=nan",
         lambda c: calibration.CalibratedMatrixScaling(lr(), reg_mu=np.nan).fit(c.X, c.y),
         _cal_invalid("reg_mu", "a float in the range [0.0, inf)", "nan",
                      owner="CalibratedMatrixScaling")),
    # T49 was rated ok, but the isotonic map then predicts the one class for every row.
    Case("T49", "CalibratedIsotonic(Frozen), calibration y of one class",
         lambda c: _frozen_fit_proba(
             c, calibration.CalibratedIsotonic(c.frozen), *_cal_class_only(c)),
         Returns(CAL_PROBA, warns=((UserWarning, ONE_CLASS),))),
    Case("T50", "CalibratedEnsembleTemperature(Frozen), calibration y of one class",
         lambda c: _frozen_fit_proba(
             c, calibration.CalibratedEnsembleTemperature(c.frozen), *c.one_class_scored_high()),
         Returns(CAL_PROBA, warns=((UserWarning, ONE_CLASS),))),
    Case("T51", "CalibratedMatrixScaling(Frozen), 2 calibration rows",
         lambda c: _frozen_fit_proba(
             c, calibration.CalibratedMatrixScaling(c.frozen), c.X[:2], c.y[:2]),
         Returns(CAL_PROBA, warns=((UserWarning, ABSENT), (UserWarning, MIX)))),
    Case("T52", "CalibratedVectorScaling(Frozen), X with NaN",
         lambda c: calibration.CalibratedVectorScaling(c.frozen).fit(c.with_value(np.nan), c.y),
         Raises(ValueError, NAN_X)),
    Case("T53", "CT(Frozen), 1 calibration row",
         lambda c: _frozen_fit_proba(c, ct(c.frozen), *c.one_row_scored_low()),
         Returns(CAL_PROBA, warns=((UserWarning, ONE_CLASS),))),
    Case("T54", "CT(Frozen), string labels for an estimator with int classes",
         lambda c: ct(c.frozen).fit(c.X, c.y.astype(str)),
         Raises(ValueError, "y contains label(s) ['0', '1', '2', '3'] that the frozen estimator "
                "was not fitted on; its classes_ are [0, 1, 2, 3].")),
]
# fmt: on


@pytest.fixture(scope="module")
def calibrator_context():
    return CalibratorContext()


@pytest.mark.parametrize("case", _params(A2_CASES))
def test_calibrator_bad_inputs(case, calibrator_context):
    _run(case, calibrator_context)


# == A3. Metrics ========================================================================
# expected/classwise/maximum_calibration_error, reliability_curve and the scorers, on
# 6 rows of 3 classes.

Y_TRUE = np.array([0, 1, 2, 0, 1, 2])
Y_PROBA = np.array(
    [
        [0.7, 0.2, 0.1],
        [0.2, 0.6, 0.2],
        [0.1, 0.3, 0.6],
        [0.4, 0.4, 0.2],
        [0.5, 0.3, 0.2],
        [0.2, 0.2, 0.6],
    ]
)
Y_BINARY = np.array([0, 1, 1, 0, 1, 0])
ece = expected_calibration_error


def _with(value, row=2, col=0) -> np.ndarray:
    proba = Y_PROBA.copy()
    proba[row, col] = value
    return proba


def _rows_summing_to(total: float) -> np.ndarray:
    """``Y_PROBA`` with row 0 replaced by one summing exactly to ``total``."""
    proba = Y_PROBA.copy()
    proba[0] = {0.5: [0.25, 0.125, 0.125], 0.9: [0.5, 0.25, 0.15], 1.1: [0.5, 0.5, 0.1]}[total]
    return proba


NEGATIVE = np.vstack([[-0.1, 0.9, 0.2], Y_PROBA[1:]])  # row 0 still sums to 1
RAGGED = [list(row) for row in Y_PROBA]
RAGGED[2] = [0.4, 0.6]


def _samples(first: int, second: int) -> str:
    return f"y_true and y_proba must have the same number of samples; got {first} and {second}."


def _columns(classes: str, n: int) -> str:
    return f"y_true contains the classes {classes} but y_proba has probabilities for {n} classes."


def _n_bins(got: str) -> Raises:
    return Raises(ValueError, f"n_bins must be an integer >= 1; got {got}.")


def _row_sum(total: str) -> Raises:
    return Raises(
        ValueError,
        f"Each row of y_proba must sum to 1 (relative tolerance 1e-06); row 0 sums to {total}.",
    )


def _range(low: str, high: str) -> Raises:
    return Raises(
        ValueError, f"y_proba must hold probabilities in [0, 1]; got values from {low} to {high}."
    )


# fmt: off
A3_CASES = [
    Case("M01", "ece valid baseline", lambda c: ece(Y_TRUE, Y_PROBA), Returns()),
    Case("M02", "ece rows summing to 0.9", lambda c: ece(Y_TRUE, _rows_summing_to(0.9)),
         _row_sum("0.9")),
    Case("M03", "ece rows summing to 1 + 1e-7 (within tolerance)",
         lambda c: ece(Y_TRUE, Y_PROBA * (1 + 1e-7)), Returns()),
    Case("M04", "ece un-normalised scores (log-probabilities)",
         lambda c: ece(Y_TRUE, np.log(Y_PROBA)),
         Raises(ValueError, "y_proba must hold probabilities in [0, 1]; got values from "
                "-2.3025850929940455 to -0.35667494393873245.")),
    Case("M05", "ece negative probability (row still sums to 1)",
         lambda c: ece(Y_TRUE, NEGATIVE), _range("-0.1", "0.9")),
    Case("M06", "ece NaN in y_proba", lambda c: ece(Y_TRUE, _with(np.nan)),
         Raises(ValueError, "y_proba must not contain NaN or infinity; got nan in row 2.")),
    Case("M07", "ece inf in y_proba", lambda c: ece(Y_TRUE, _with(np.inf)),
         Raises(ValueError, "y_proba must not contain NaN or infinity; got inf in row 2.")),
    Case("M08", "ece y_proba 5 rows, y_true 6", lambda c: ece(Y_TRUE, Y_PROBA[:5]),
         Raises(ValueError, _samples(6, 5))),
    Case("M09", "ece y_proba 4 columns, y_true 3 classes",
         lambda c: ece(Y_TRUE, np.hstack([Y_PROBA * 0.5, np.full((6, 1), 0.5)])),
         Raises(ValueError, _columns("[0, 1, 2]", 4))),
    Case("M10", "ece y_proba 2 columns, y_true 3 classes",
         lambda c: ece(Y_TRUE, np.full((6, 2), 0.5)), Raises(ValueError, _columns("[0, 1, 2]", 2))),
    Case("M11", "ece n_bins=0", lambda c: ece(Y_TRUE, Y_PROBA, n_bins=0), _n_bins("0")),
    Case("M12", "ece n_bins=-5", lambda c: ece(Y_TRUE, Y_PROBA, n_bins=-5), _n_bins("-5")),
    Case("M13", "ece n_bins=2.5", lambda c: ece(Y_TRUE, Y_PROBA, n_bins=2.5), _n_bins("2.5")),
    Case("M14", "ece n_bins='10'", lambda c: ece(Y_TRUE, Y_PROBA, n_bins="10"), _n_bins("'10'")),
    Case("M15", "ece n_bins=True", lambda c: ece(Y_TRUE, Y_PROBA, n_bins=True), _n_bins("True")),
    Case("M16", "ece n_bins=np.int64(5)", lambda c: ece(Y_TRUE, Y_PROBA, n_bins=np.int64(5)),
         Returns()),
    Case("M17", "ece n_bins=10**6 (>> rows)", lambda c: ece(Y_TRUE, Y_PROBA, n_bins=10**6),
         Returns()),
    Case("M18", "ece n_bins=10.0", lambda c: ece(Y_TRUE, Y_PROBA, n_bins=10.0), _n_bins("10.0")),
    Case("M19", "ece strategy='quantil'", lambda c: ece(Y_TRUE, Y_PROBA, strategy="quantil"),
         Raises(ValueError, "strategy must be 'uniform' or 'quantile'; got 'quantil'.")),
    Case("M20", "ece strategy='quantile', n_bins=100 > rows",
         lambda c: ece(Y_TRUE, Y_PROBA, strategy="quantile", n_bins=100), Returns()),
    Case("M21", "ece empty y_true and y_proba", lambda c: ece([], np.empty((0, 3))),
         Raises(ValueError, "y_true must not be empty; got 0 samples.")),
    Case("M22", "ece y_true 2-D (6, 3) one-hot", lambda c: ece(np.eye(3)[Y_TRUE], Y_PROBA),
         Raises(ValueError, "y_true must be 1-D of shape (n_samples,); got an array of shape "
                "(6, 3).")),
    Case("M23", "ece continuous y_true",
         lambda c: ece([0.0, 0.1, 1.0, 1.2, 2.0, 2.0], Y_PROBA),
         Raises(ValueError, _columns("[0.0, 0.1, 1.0, 1.2, 2.0]", 3))),
    Case("M24", "ece y_true with NaN", lambda c: ece([0, 1, 2, 0, np.nan, 2], Y_PROBA),
         Raises(ValueError, "y_true must not contain NaN; got NaN at index 4.")),
    Case("M25", "ece y_true label not in labels",
         lambda c: ece([0, 1, 2, 0, 1, 7], Y_PROBA, labels=[0, 1, 2]),
         Raises(ValueError, "y_true contains classes that are not in labels: [7]; expected every "
                "value of y_true to be one of labels=[0, 1, 2].")),
    Case("M26", "ece y_true missing a class, no labels",
         lambda c: ece([0, 1, 0, 0, 1, 1], Y_PROBA), Raises(ValueError, _columns("[0, 1]", 3))),
    Case("M27", "ece duplicate labels", lambda c: ece(Y_TRUE, Y_PROBA, labels=[0, 1, 1]),
         Raises(ValueError, "labels must not contain duplicates; got [0, 1, 1].")),
    Case("M28", "ece labels of the wrong length", lambda c: ece(Y_TRUE, Y_PROBA, labels=[0, 1]),
         Raises(ValueError, "labels has 2 classes [0, 1] but y_proba has probabilities for 3 "
                "classes.")),
    Case("M29", "ece string labels, int y_true",
         lambda c: ece(Y_TRUE, Y_PROBA, labels=["a", "b", "c"]),
         Raises(ValueError, "y_true contains classes that are not in labels: [0, 1, 2]; expected "
                "every value of y_true to be one of labels=['a', 'b', 'c'].")),
    Case("M30", "ece negative sample_weight",
         lambda c: ece(Y_TRUE, Y_PROBA, sample_weight=[1, 1, -1, 1, 1, 1]),
         Raises(ValueError, "sample_weight must be finite and non-negative; got -1.0 at index "
                "2.")),
    Case("M31", "ece NaN sample_weight",
         lambda c: ece(Y_TRUE, Y_PROBA, sample_weight=[1, 1, np.nan, 1, 1, 1]),
         Raises(ValueError, "sample_weight must be finite and non-negative; got nan at index "
                "2.")),
    Case("M32", "ece sample_weight of the wrong length",
         lambda c: ece(Y_TRUE, Y_PROBA, sample_weight=[1, 1]),
         Raises(ValueError, "sample_weight must be 1-D of length 6 (one weight per sample); got "
                "shape (2,).")),
    Case("M33", "ece sample_weight all zero",
         lambda c: ece(Y_TRUE, Y_PROBA, sample_weight=np.zeros(6)),
         Raises(ValueError, "sample_weight must have a positive sum; got 0.0.")),
    Case("M34", "ece kind=5 (not a class)", lambda c: ece(Y_TRUE, Y_PROBA, kind=5),
         Raises(ValueError, "kind must be 'top_label' or one of the classes [0, 1, 2]; got 5.")),
    Case("M35", "ece kind='top' (typo)", lambda c: ece(Y_TRUE, Y_PROBA, kind="top"),
         Raises(ValueError, "kind must be 'top_label' or one of the classes [0, 1, 2]; got "
                "'top'.")),
    Case("M36", "ece 1-D y_proba for a 3-class y_true", lambda c: ece(Y_TRUE, Y_PROBA[:, 0]),
         Raises(ValueError, _columns("[0, 1, 2]", 2))),
    Case("M37", "ece 1-D binary y_proba > 1",
         lambda c: ece(Y_BINARY, [0.2, 0.9, 1.3, 0.4, 0.6, 0.3]), _range("0.2", "1.3")),
    Case("M38", "ece 3-D y_proba", lambda c: ece(Y_TRUE, Y_PROBA[:, :, None]),
         Raises(ValueError, "y_proba must be of shape (n_samples,), (n_samples, 1) or "
                "(n_samples, n_classes); got shape (6, 3, 1).")),
    Case("M39", "ece y_proba of strings", lambda c: ece(Y_TRUE, Y_PROBA.astype(str)),
         Raises(ValueError, "y_proba must hold numbers; got an array of dtype <U")),
    # M40 and M56 gave numpy's messages (P9): now they name the argument and the problem.
    Case("M40", "ece y_proba as a list of ragged rows", lambda c: ece(Y_TRUE, RAGGED),
         Raises(ValueError, "y_proba must be an array of shape (n_samples,) or (n_samples, "
                "n_classes); its rows differ in length: row 0 has 3 values and row 2 has 2.")),
    Case("M41", "ece float32 y_proba summing to 1 within 1e-5",
         lambda c: ece(Y_TRUE, (Y_PROBA * (1 + 5e-6)).astype(np.float32)), Returns()),
    Case("M42", "ece bool y_proba (binary)", lambda c: ece(Y_BINARY, Y_BINARY.astype(bool)),
         Returns()),
    Case("M43", "classwise ECE, rows summing to 0.5",
         lambda c: classwise_calibration_error(Y_TRUE, _rows_summing_to(0.5)), _row_sum("0.5")),
    Case("M44", "classwise ECE, n_bins=0",
         lambda c: classwise_calibration_error(Y_TRUE, Y_PROBA, n_bins=0), _n_bins("0")),
    Case("M45", "classwise ECE, shape mismatch",
         lambda c: classwise_calibration_error(Y_TRUE[:4], Y_PROBA),
         Raises(ValueError, _samples(4, 6))),
    Case("M46", "MCE, NaN in y_proba", lambda c: maximum_calibration_error(Y_TRUE, _with(np.nan)),
         Raises(ValueError, "y_proba must not contain NaN or infinity; got nan in row 2.")),
    Case("M47", "MCE, negative probability",
         lambda c: maximum_calibration_error(Y_TRUE, NEGATIVE), _range("-0.1", "0.9")),
    Case("M48", "MCE, n_bins=None",
         lambda c: maximum_calibration_error(Y_TRUE, Y_PROBA, n_bins=None), _n_bins("None")),
    Case("M49", "reliability_curve, rows summing to 1.1",
         lambda c: reliability_curve(Y_TRUE, _rows_summing_to(1.1)), _row_sum("1.1")),
    Case("M50", "reliability_curve, n_bins=0",
         lambda c: reliability_curve(Y_TRUE, Y_PROBA, n_bins=0), _n_bins("0")),
    Case("M51", "reliability_curve, shape mismatch",
         lambda c: reliability_curve(Y_TRUE, Y_PROBA[:3]), Raises(ValueError, _samples(6, 3))),
    Case("M52", "get_scorer('neg_expected_calibration_errr') (typo)",
         lambda c: get_scorer("neg_expected_calibration_errr"),
         Raises(ValueError, "'neg_expected_calibration_errr' is not a valid scoring value. Use "
                "one of nescal_sklearn's scorers")),
    Case("M53", "ece binary y_proba of shape (n, 1) > 1",
         lambda c: ece(Y_BINARY, np.array([[0.2], [0.9], [1.5], [0.4], [0.6], [0.3]])),
         _range("0.2", "1.5")),
    Case("M54", "ece with a pandas Series y_true and a DataFrame y_proba",
         lambda c: ece(pd.Series(Y_TRUE), pd.DataFrame(Y_PROBA)), Returns()),
    Case("M55", "ece 2-D labels", lambda c: ece(Y_TRUE, Y_PROBA, labels=[[0, 1, 2]]),
         Raises(ValueError, "labels must be 1-D; got an array of shape (1, 3).")),
    Case("M56", "ece object y_true mixing str and int, with labels",
         lambda c: ece(np.array([0, "1", 2, 0, 1, 2], dtype=object), Y_PROBA, labels=[0, 1, 2]),
         Raises(ValueError, "y_true mixes label types that cannot be compared: int and str "
                "labels (e.g. 0 and '1'). Use one type for every label of y_true and labels.")),
]
# fmt: on


@pytest.mark.parametrize("case", _params(A3_CASES))
def test_metric_bad_inputs(case):
    _run(case, None)


def test_every_row_of_the_log_has_a_case():
    for prefix, cases, n_rows in (("E", A1_CASES, 99), ("T", A2_CASES, 54), ("M", A3_CASES, 56)):
        assert [case.id for case in cases] == [f"{prefix}{i:02d}" for i in range(1, n_rows + 1)]
