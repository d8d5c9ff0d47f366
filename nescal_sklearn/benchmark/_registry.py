"""The two small name maps of the benchmark configuration: metrics and post-hoc calibrators.

They are the only places where a configuration string becomes a function or a class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss

from ..metrics import (
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
)

__all__ = ["METRICS", "CALIBRATORS", "Metric", "available_calibrators", "calibrator_class"]

#: Number of equal-width bins of every binned metric and of the reliability diagrams.
N_BINS = 15


@dataclass(frozen=True)
class Metric:
    """A test metric of the benchmark: how to compute it and how to read it."""

    label: str
    function: Callable[[np.ndarray, np.ndarray, np.ndarray], float]
    greater_is_better: bool = False


def _nll(y, proba, labels):
    return log_loss(y, proba, labels=labels)


def _ece(y, proba, labels):
    return expected_calibration_error(y, proba, labels=labels, n_bins=N_BINS)


def _classwise_ece(y, proba, labels):
    return classwise_calibration_error(y, proba, labels=labels, n_bins=N_BINS)


def _mce(y, proba, labels):
    return maximum_calibration_error(y, proba, labels=labels, n_bins=N_BINS)


def _brier(y, proba, labels):
    return brier_score_loss(y, proba, labels=labels, scale_by_half=False)


def _accuracy(y, proba, labels):
    return accuracy_score(y, labels[np.argmax(proba, axis=1)])


#: Metric name -> :class:`Metric`. NLL is always computed (model selection uses it).
METRICS: dict[str, Metric] = {
    "nll": Metric("NLL", _nll),
    "ece": Metric("ECE", _ece),
    "brier": Metric("Brier", _brier),
    "accuracy": Metric("Accuracy", _accuracy, greater_is_better=True),
    "classwise_ece": Metric("Classwise ECE", _classwise_ece),
    "mce": Metric("MCE", _mce),
}

#: Calibrator name in a configuration -> class name in :mod:`nescal_sklearn.calibration`.
CALIBRATORS: dict[str, str] = {
    "temperature": "CalibratedTemperature",
    "vector": "CalibratedVectorScaling",
    "matrix": "CalibratedMatrixScaling",
    "isotonic": "CalibratedIsotonic",
    "histogram": "CalibratedHistogramBinning",
    "ensemble_temperature": "CalibratedEnsembleTemperature",
}


def calibrator_class(name: str) -> type | None:
    """Return the calibrator class registered as ``name``, or None if this install lacks it.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._registry import calibrator_class
    >>> calibrator_class("temperature").__name__
    'CalibratedTemperature'
    """
    from .. import calibration

    return getattr(calibration, CALIBRATORS[name], None)


def available_calibrators() -> list[str]:
    """Calibrator names whose class exists in :mod:`nescal_sklearn.calibration`."""
    return [name for name in CALIBRATORS if calibrator_class(name) is not None]
