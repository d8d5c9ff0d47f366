"""The name maps of a benchmark configuration: metrics and post-hoc calibrators.

They are the only places where a configuration string becomes a function or a class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import entr
from sklearn.calibration import CalibratedClassifierCV
from sklearn.metrics import accuracy_score, roc_auc_score

from .. import calibration
from ..metrics import (
    brier_score_loss,
    classwise_calibration_error,
    expected_calibration_error,
    log_loss,
    maximum_calibration_error,
)
from ._external import ProbmetricsCalibrator

__all__ = [
    "CALIBRATORS",
    "METRICS",
    "N_BINS",
    "OOD_METRICS",
    "Metric",
    "label_metrics",
    "ood_metrics",
    "predictive_entropy",
]

#: Number of equal-width bins of every binned metric and of the reliability diagrams.
N_BINS = 15


@dataclass(frozen=True)
class Metric:
    """A metric of the benchmark: how to compute it and how to read it.

    ``function`` takes ``(y, proba, labels)`` for a metric of :data:`METRICS` and
    ``(proba_in, proba_out)`` for one of :data:`OOD_METRICS`.
    """

    label: str
    function: Callable[..., float]
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


#: Metric name -> :class:`Metric` of predictions against labels. Every one is recorded;
#: NLL is the one model selection uses.
METRICS: dict[str, Metric] = {
    "nll": Metric("NLL", _nll),
    "ece": Metric("ECE", _ece),
    "brier": Metric("Brier", _brier),
    "accuracy": Metric("Accuracy", _accuracy, greater_is_better=True),
    "classwise_ece": Metric("Classwise ECE", _classwise_ece),
    "mce": Metric("MCE", _mce),
}


def label_metrics(y, proba: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Every metric of :data:`METRICS` of ``proba`` (columns in the order of ``labels``)."""
    return {name: float(metric.function(y, proba, labels)) for name, metric in METRICS.items()}


def predictive_entropy(proba: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of ``proba``; ``0 log 0`` counts as 0.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.benchmark._registry import predictive_entropy
    >>> predictive_entropy(np.array([[1.0, 0.0], [0.5, 0.5]])).round(4)
    array([0.    , 0.6931])
    """
    return entr(np.asarray(proba, dtype=np.float64)).sum(axis=1)


def _entropy_auroc(proba_in, proba_out):
    labels = np.r_[np.zeros(len(proba_in)), np.ones(len(proba_out))]
    scores = np.r_[predictive_entropy(proba_in), predictive_entropy(proba_out)]
    return roc_auc_score(labels, scores)


def _ood_max_proba(proba_in, proba_out):
    return np.mean(np.max(proba_out, axis=1))


#: Metric name -> :class:`Metric` of telling in-distribution rows (the clean test rows)
#: from out-of-distribution rows, from the predicted probabilities of both.
OOD_METRICS: dict[str, Metric] = {
    "auroc": Metric("AUROC", _entropy_auroc, greater_is_better=True),
    "max_proba": Metric("max-probability", _ood_max_proba),
}


def ood_metrics(proba_in: np.ndarray, proba_out: np.ndarray) -> dict[str, float]:
    """Every metric of :data:`OOD_METRICS`: ``auroc`` is the AUROC of in- (0) against
    out-of-distribution (1) rows scored by predictive entropy, ``max_proba`` the mean
    largest probability on the out-of-distribution rows."""
    return {name: float(m.function(proba_in, proba_out)) for name, m in OOD_METRICS.items()}


#: Calibrator name in a configuration -> class of :mod:`nescal_sklearn.calibration`, or
#: (``probmetrics``, ``sklearn``) an external calibrator for side-by-side comparisons
#: (:mod:`._external`). Each is built as ``cls(FrozenEstimator(model), **params)``.
CALIBRATORS: dict[str, type] = {
    "temperature": calibration.CalibratedTemperature,
    "vector": calibration.CalibratedVectorScaling,
    "matrix": calibration.CalibratedMatrixScaling,
    "structured_matrix": calibration.CalibratedStructuredMatrixScaling,
    "isotonic": calibration.CalibratedIsotonic,
    "histogram": calibration.CalibratedHistogramBinning,
    "ensemble_temperature": calibration.CalibratedEnsembleTemperature,
    "probmetrics": ProbmetricsCalibrator,
    "sklearn": CalibratedClassifierCV,
}
