"""The name maps of a benchmark configuration: metrics and post-hoc calibrators.

They are the only places where a configuration string becomes a function or a class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.metrics import accuracy_score

from nescal_sklearn import calibration
from nescal_sklearn.metrics import (
    brier_score_loss,
    classwise_calibration_error,
    expected_calibration_error,
    log_loss,
    maximum_calibration_error,
    ood_aupr_in,
    ood_aupr_out,
    ood_auroc,
    ood_fpr_at_tpr,
)

from ._adapters import ProbmetricsCalibrator

#: Number of equal-width bins of every binned metric and of the reliability diagrams.
N_BINS = 15


@dataclass(frozen=True)
class Metric:
    """A metric of the benchmark: how to compute it and how to read it.

    ``function`` takes ``(y, proba, labels=labels)`` for a metric of :data:`METRICS` and
    ``(proba_in, proba_out)`` for one of :data:`OOD_METRICS`.
    """

    label: str
    function: Callable[..., float]
    greater_is_better: bool = False


def _accuracy(y, proba, *, labels):
    return accuracy_score(y, labels[np.argmax(proba, axis=1)])


#: Metric name -> :class:`Metric` of predictions against labels. Every one is recorded;
#: NLL is the one model selection uses.
METRICS: dict[str, Metric] = {
    "nll": Metric("NLL", log_loss),
    "ece": Metric("ECE", partial(expected_calibration_error, n_bins=N_BINS)),
    "brier": Metric("Brier", partial(brier_score_loss, scale_by_half=False)),
    "accuracy": Metric("Accuracy", _accuracy, greater_is_better=True),
    "classwise_ece": Metric("Classwise ECE", partial(classwise_calibration_error, n_bins=N_BINS)),
    "mce": Metric("MCE", partial(maximum_calibration_error, n_bins=N_BINS)),
}


def label_metrics(y, proba: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Every metric of :data:`METRICS` of ``proba`` (columns in the order of ``labels``)."""
    return {n: float(metric.function(y, proba, labels=labels)) for n, metric in METRICS.items()}


def _ood_max_proba(proba_in, proba_out):
    return float(np.mean(np.max(proba_out, axis=1)))


#: Metric name -> :class:`Metric` of telling in-distribution rows (the clean test rows)
#: from out-of-distribution rows, from the predicted probabilities of both. The unprefixed
#: ones score rows by predictive entropy (``auroc`` is the shift study's), the ``msp_`` ones
#: by the largest probability; ``max_proba`` is the mean largest probability on the
#: out-of-distribution rows (overconfidence there is the failure users see).
OOD_METRICS: dict[str, Metric] = {
    "auroc": Metric("AUROC", partial(ood_auroc, score="entropy"), greater_is_better=True),
    "aupr_in": Metric("AUPR-in", partial(ood_aupr_in, score="entropy"), greater_is_better=True),
    "aupr_out": Metric("AUPR-out", partial(ood_aupr_out, score="entropy"), greater_is_better=True),
    "fpr95": Metric("FPR@95%TPR", partial(ood_fpr_at_tpr, score="entropy")),
    "msp_auroc": Metric("MSP AUROC", partial(ood_auroc, score="max_proba"), greater_is_better=True),
    "msp_aupr_in": Metric(
        "MSP AUPR-in", partial(ood_aupr_in, score="max_proba"), greater_is_better=True
    ),
    "msp_aupr_out": Metric(
        "MSP AUPR-out", partial(ood_aupr_out, score="max_proba"), greater_is_better=True
    ),
    "msp_fpr95": Metric("MSP FPR@95%TPR", partial(ood_fpr_at_tpr, score="max_proba")),
    "max_proba": Metric("max-probability", _ood_max_proba),
}


def ood_metrics(proba_in: np.ndarray, proba_out: np.ndarray) -> dict[str, float]:
    """Every metric of :data:`OOD_METRICS` of in-distribution (``proba_in``) against
    out-of-distribution rows (``proba_out``)."""
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
