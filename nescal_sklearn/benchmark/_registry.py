"""The name maps of a benchmark configuration: metrics and post-hoc calibrators.

They are the only places where a configuration string becomes a function or a class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import entr
from sklearn.calibration import CalibratedClassifierCV
from sklearn.metrics import accuracy_score, average_precision_score, roc_auc_score

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
    "OOD_SCORES",
    "Metric",
    "label_metrics",
    "ood_aupr_in",
    "ood_aupr_out",
    "ood_auroc",
    "ood_fpr_at_tpr",
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


def _ood_labels(proba_in, proba_out) -> np.ndarray:
    return np.r_[np.zeros(len(proba_in)), np.ones(len(proba_out))]


#: OOD score name -> how "out of distribution" each row looks (higher: more): the
#: predictive entropy, or minus the largest probability (the max-probability baseline).
OOD_SCORES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "entropy": predictive_entropy,
    "max_proba": lambda proba: -np.max(np.asarray(proba, dtype=np.float64), axis=1),
}


def _scores(score: str, proba_in, proba_out) -> np.ndarray:
    return np.r_[OOD_SCORES[score](proba_in), OOD_SCORES[score](proba_out)]


def ood_auroc(proba_in, proba_out, score: str = "entropy") -> float:
    """AUROC of telling out-of-distribution rows (positive) from in-distribution ones by
    the OOD ``score`` (``"entropy"`` or ``"max_proba"``, see :data:`OOD_SCORES`).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.benchmark._registry import ood_auroc
    >>> ood_auroc(np.array([[0.9, 0.1], [0.6, 0.4]]), np.array([[0.5, 0.5], [0.7, 0.3]]))
    0.75
    """
    return float(
        roc_auc_score(_ood_labels(proba_in, proba_out), _scores(score, proba_in, proba_out))
    )


def ood_aupr_in(proba_in, proba_out, score: str = "entropy") -> float:
    """Average precision with the in-distribution rows positive, ranked by minus the OOD
    ``score`` (the confidence)."""
    labels = 1.0 - _ood_labels(proba_in, proba_out)
    return float(average_precision_score(labels, -_scores(score, proba_in, proba_out)))


def ood_aupr_out(proba_in, proba_out, score: str = "entropy") -> float:
    """Average precision with the out-of-distribution rows positive, ranked by the OOD
    ``score``."""
    labels = _ood_labels(proba_in, proba_out)
    return float(average_precision_score(labels, _scores(score, proba_in, proba_out)))


def ood_fpr_at_tpr(proba_in, proba_out, score: str = "entropy", tpr: float = 0.95) -> float:
    """FPR at ``tpr`` TPR: the share of out-of-distribution rows still accepted as
    in-distribution when the threshold on the OOD ``score`` accepts (at least) ``tpr``
    of the in-distribution rows, at the strictest such threshold.

    With in-distribution scores sorted increasingly, ``s_1 <= ... <= s_n``, the threshold
    is ``t = s_k`` with ``k = ceil(tpr * n)``: the ``k`` rows scoring at most ``t`` are
    accepted; the result is the share of out-of-distribution rows scoring at most ``t``
    (the first point of the ROC curve, in-distribution positive, at or above ``tpr``).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.benchmark._registry import ood_fpr_at_tpr
    >>> p_in = np.array([[0.9, 0.1]] * 19 + [[0.55, 0.45]])   # 95 % of them confident
    >>> p_out = np.array([[0.95, 0.05], [0.6, 0.4], [0.5, 0.5], [0.9, 0.1]])
    >>> ood_fpr_at_tpr(p_in, p_out, score="max_proba")   # threshold: max-proba >= 0.9
    0.5
    """
    s_in = np.sort(OOD_SCORES[score](proba_in))
    s_out = OOD_SCORES[score](proba_out)
    k = int(np.ceil(tpr * len(s_in) - 1e-9))
    threshold = s_in[max(k, 1) - 1]
    return float(np.mean(s_out <= threshold))


def _ood_max_proba(proba_in, proba_out):
    return float(np.mean(np.max(proba_out, axis=1)))


def _detection(function, score):
    return lambda proba_in, proba_out: function(proba_in, proba_out, score)


#: Metric name -> :class:`Metric` of telling in-distribution rows (the clean test rows)
#: from out-of-distribution rows, from the predicted probabilities of both. The unprefixed
#: ones score rows by predictive entropy (``auroc`` is the shift study's), the ``msp_`` ones
#: by the largest probability; ``max_proba`` is the mean largest probability on the
#: out-of-distribution rows (overconfidence there is the failure users see).
OOD_METRICS: dict[str, Metric] = {
    "auroc": Metric("AUROC", _detection(ood_auroc, "entropy"), greater_is_better=True),
    "aupr_in": Metric("AUPR-in", _detection(ood_aupr_in, "entropy"), greater_is_better=True),
    "aupr_out": Metric("AUPR-out", _detection(ood_aupr_out, "entropy"), greater_is_better=True),
    "fpr95": Metric("FPR@95%TPR", _detection(ood_fpr_at_tpr, "entropy")),
    "msp_auroc": Metric("MSP AUROC", _detection(ood_auroc, "max_proba"), greater_is_better=True),
    "msp_aupr_in": Metric(
        "MSP AUPR-in", _detection(ood_aupr_in, "max_proba"), greater_is_better=True
    ),
    "msp_aupr_out": Metric(
        "MSP AUPR-out", _detection(ood_aupr_out, "max_proba"), greater_is_better=True
    ),
    "msp_fpr95": Metric("MSP FPR@95%TPR", _detection(ood_fpr_at_tpr, "max_proba")),
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
