"""Calibrators of other libraries, for side-by-side comparisons in the benchmark.

They are benchmark extras, not part of :mod:`nescal_sklearn.calibration`:

* :class:`ProbmetricsCalibrator` (registered as ``"probmetrics"``) wraps a calibrator of
  `probmetrics <https://github.com/dholzmueller/probmetrics>`_
  (``probmetrics.calibrators.get_calibrator``), the post-hoc calibration that
  RealMLP and TabArena use; probmetrics is imported only when one is fitted.
* scikit-learn's own :class:`~sklearn.calibration.CalibratedClassifierCV` is registered
  as ``"sklearn"`` (``method="temperature"``, ``"sigmoid"`` or ``"isotonic"``); it needs
  no adapter, only :func:`calibrator_summary` to read its fitted temperatures.

Like the package's calibrators, each wraps ``FrozenEstimator(model)`` and is fitted on
the validation rows.
"""

from __future__ import annotations

import ast
import functools
import inspect

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted

__all__ = ["ProbmetricsCalibrator", "calibrator_summary", "probmetrics_methods"]

#: How to install the optional packages of the benchmark's external calibrators.
INSTALL_HINT = 'pip install -e ".[bench]"'


def _import_probmetrics_calibrators():
    """``probmetrics.calibrators``, or an ImportError saying how to install it."""
    try:
        import probmetrics.calibrators as calibrators
    except ImportError as exc:
        raise ImportError(
            "the 'probmetrics' calibrator needs the probmetrics package, which is not "
            f"installed ({exc}); install it with `pip install probmetrics` or with the "
            f"benchmark extras, `{INSTALL_HINT}`"
        ) from exc
    return calibrators


@functools.lru_cache(maxsize=1)
def probmetrics_methods() -> tuple[str, ...]:
    """The ``calibration_method`` names that the installed probmetrics accepts.

    Read from the source of ``probmetrics.calibrators.get_calibrator`` (its
    ``calibration_method == "..."`` and ``calibration_method in [...]`` branches), since
    probmetrics keeps no list of them; empty when that source cannot be read.

    Raises
    ------
    ImportError
        If probmetrics is not installed.
    """
    calibrators = _import_probmetrics_calibrators()
    try:
        tree = ast.parse(inspect.getsource(calibrators.get_calibrator).lstrip())
    except (OSError, TypeError, SyntaxError):
        return ()
    names: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name)):
            continue
        if node.left.id != "calibration_method":
            continue
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.Eq):
                values = [right]
            elif isinstance(op, ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
                values = right.elts
            else:
                continue
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    if value.value not in names:
                        names.append(value.value)
    return tuple(names)


def _probabilities(proba) -> np.ndarray:
    """``proba`` as float64 rows in [0, 1] that sum to 1 (probmetrics checks to 1e-6,
    which float32 predictions may miss)."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim == 1:  # one probability per row: that of the second class
        proba = np.column_stack([1.0 - proba, proba])
    proba = np.clip(proba, 0.0, 1.0)
    return proba / proba.sum(axis=1, keepdims=True)


class ProbmetricsCalibrator(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Post-hoc calibration of a fitted classifier by a probmetrics calibrator.

    ``fit(X, y)`` fits ``probmetrics.calibrators.get_calibrator(method)`` on the
    estimator's ``predict_proba(X)`` and the labels encoded as column indices of its
    ``classes_``; ``predict_proba`` returns that calibrator's output on the estimator's
    probabilities. Probabilities always have one column per class, two for a binary
    problem, as probmetrics expects.

    Parameters
    ----------
    estimator : estimator
        An already fitted classifier with ``predict_proba`` and ``classes_``, typically
        ``FrozenEstimator(model)``; it is never refitted.
    method : str, default="ts-mix"
        A ``calibration_method`` of probmetrics' ``get_calibrator``: ``"ts-mix"``
        (temperature scaling, then a mixture with the uniform distribution of weight
        ``1 / (n + 1)``, RealMLP's default), ``"temp-scaling"`` (plain temperature
        scaling), ``"sms"``, ``"svs"``, ``"logistic"``, ``"platt"``, ``"isotonic"``, ...
        (see :func:`probmetrics_methods`). Some need further packages (``"beta"``:
        betacal, ``"ivap"``: venn-abers), which probmetrics asks for when fitted.

    Attributes
    ----------
    calibrator_ : probmetrics Calibrator
        The fitted probmetrics calibrator.
    classes_ : ndarray of shape (n_classes,)
        The estimator's classes.
    temperature_ : float
        The fitted temperature (``1 / invtemp_`` of probmetrics), for the temperature
        scaling methods only.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("probmetrics")
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import LogisticRegression
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=500).fit(X[::2], y[::2])
    >>> calibrated = ProbmetricsCalibrator(FrozenEstimator(model), method="temp-scaling")
    >>> calibrated.fit(X[1::2], y[1::2]).predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["predict_proba"])],
        "method": [str],
    }

    def __init__(self, estimator, *, method: str = "ts-mix") -> None:
        self.estimator = estimator
        self.method = method

    @classmethod
    def check_dependencies(cls) -> None:
        """Raise ImportError, saying how to install it, when probmetrics is missing."""
        _import_probmetrics_calibrators()

    def _validate_params(self) -> None:
        super()._validate_params()
        if not self.method:
            raise ValueError(
                "The 'method' parameter of ProbmetricsCalibrator must be a non-empty string "
                "naming a probmetrics calibration method. Got '' instead."
            )
        known = probmetrics_methods()
        if known and self.method not in known:
            raise ValueError(
                f"The 'method' parameter of ProbmetricsCalibrator must be a calibration "
                f"method of probmetrics' get_calibrator, one of {list(known)}. Got "
                f"{self.method!r} instead."
            )

    def fit(self, X, y):
        """Fit the probmetrics calibrator on the estimator's probabilities of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Calibration rows.
        y : array-like of shape (n_samples,)
            Their labels, each one of the estimator's ``classes_``.

        Returns
        -------
        self : ProbmetricsCalibrator
        """
        self._validate_params()
        calibrators = _import_probmetrics_calibrators()
        classes = np.asarray(self.estimator.classes_)
        y = np.asarray(y)
        encoded = np.searchsorted(classes, y)
        inside = encoded < len(classes)
        if not np.all(inside) or not np.array_equal(classes[encoded[inside]], y[inside]):
            unknown = sorted(set(y.tolist()) - set(classes.tolist()))
            raise ValueError(
                f"y has labels {unknown} that the estimator was not fitted on; its classes "
                f"are {classes.tolist()}"
            )
        proba = _probabilities(self.estimator.predict_proba(X))
        try:
            calibrator = calibrators.get_calibrator(self.method)
        except ValueError as exc:  # a method probmetrics does not know
            raise ValueError(
                f"The 'method' parameter of ProbmetricsCalibrator must be a calibration method "
                f"of probmetrics, one of {list(probmetrics_methods())}. Got {self.method!r} "
                f"instead ({exc})."
            ) from None
        self.calibrator_ = calibrator.fit(proba, encoded.astype(np.int64))
        self.classes_ = classes
        if hasattr(self.estimator, "n_features_in_"):
            self.n_features_in_ = self.estimator.n_features_in_
        inner = getattr(self.calibrator_, "cal_", self.calibrator_)  # "-mix": a wrapper
        inverse = getattr(inner, "invtemp_", None)
        if inverse is not None:
            self.temperature_ = 1.0 / float(inverse)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities, one column per class of ``classes_``."""
        check_is_fitted(self, "calibrator_")
        proba = self.calibrator_.predict_proba(_probabilities(self.estimator.predict_proba(X)))
        return _probabilities(proba)

    def predict(self, X) -> np.ndarray:
        """The class of highest calibrated probability."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def calibrator_summary(calibrated) -> dict:
    """Fitted temperatures of a calibrator, for a record's ``calibrators`` section.

    ``temperature_`` / ``temperatures_`` of the package's calibrators and of
    :class:`ProbmetricsCalibrator`; for a ``CalibratedClassifierCV`` with
    ``method="temperature"``, the temperature ``1 / beta_`` of each of its fitted
    calibrators (one when it wraps a ``FrozenEstimator``). Other calibrators give ``{}``.
    """
    out = {}
    for name in ("temperature_", "temperatures_"):
        value = getattr(calibrated, name, None)
        if value is not None:
            out[name.rstrip("_")] = np.asarray(value, dtype=float).tolist()
    pairs = getattr(calibrated, "calibrated_classifiers_", None)
    if not out and pairs and getattr(calibrated, "method", None) == "temperature":
        betas = [
            float(np.asarray(c.beta_).reshape(-1)[0])
            for pair in pairs
            for c in getattr(pair, "calibrators", [])
            if hasattr(c, "beta_")
        ]
        if betas:
            temperatures = [1.0 / beta for beta in betas]
            out["temperature"] = temperatures[0] if len(temperatures) == 1 else temperatures
    return out
