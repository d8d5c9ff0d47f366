"""Calibration metrics: reliability curve, ECE family, local CE, NLL, refinement NLL, Brier (numpy).

Also a debiased L2 calibration error and class-stratified bootstrap intervals of any
metric (and bands of reliability curves).

``log_loss`` (NLL, mean negative log-likelihood of the true class, in nats) and
``brier_score_loss`` are scikit-learn's own functions, re-exported unchanged. For
multiclass input ``brier_score_loss`` is the sum over classes of the squared error,
averaged over rows (range [0, 2]); for binary input its default
``scale_by_half="auto"`` halves that to the usual [0, 1] score, so pass
``scale_by_half=False`` for the sum-over-classes convention in every case. Both sort
``labels``, whereas the binned metrics here take ``labels`` in column order:
``estimator.classes_`` is sorted, so it is right for all of them.

Examples
--------
>>> from nescal_sklearn.metrics import brier_score_loss, expected_calibration_error
>>> y_true = [0, 1, 1, 2]
>>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
>>> round(expected_calibration_error(y_true, y_proba, n_bins=5), 6)
0.15
>>> round(brier_score_loss(y_true, y_proba), 6)  # (.06 + .26 + .86 + .06) / 4
0.31
>>> round(brier_score_loss([0, 1], [0.2, 0.6]), 6)  # binary, halved: (.04 + .16) / 2
0.1
>>> round(brier_score_loss([0, 1], [0.2, 0.6], scale_by_half=False), 6)
0.2
"""

from sklearn.metrics import brier_score_loss, log_loss

from ._binning import ReliabilityCurve, classwise_reliability_curves, reliability_curve
from ._bootstrap import (
    BootstrapInterval,
    ReliabilityBand,
    bootstrap_ci,
    bootstrap_reliability_band,
)
from ._calibration_error import (
    classwise_calibration_error,
    ece_from_curve,
    expected_calibration_error,
    maximum_calibration_error,
)
from ._debiased import debiased_calibration_error
from ._local import local_calibration_error
from ._ood import ood_aupr_in, ood_aupr_out, ood_auroc, ood_fpr_at_tpr, predictive_entropy
from ._refinement import PROBA_FLOOR, refinement_log_loss

__all__ = [
    "PROBA_FLOOR",
    "BootstrapInterval",
    "ReliabilityBand",
    "ReliabilityCurve",
    "bootstrap_ci",
    "bootstrap_reliability_band",
    "brier_score_loss",
    "classwise_calibration_error",
    "classwise_reliability_curves",
    "debiased_calibration_error",
    "ece_from_curve",
    "expected_calibration_error",
    "local_calibration_error",
    "log_loss",
    "maximum_calibration_error",
    "ood_aupr_in",
    "ood_aupr_out",
    "ood_auroc",
    "ood_fpr_at_tpr",
    "predictive_entropy",
    "refinement_log_loss",
    "reliability_curve",
]
