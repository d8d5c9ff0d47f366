"""Post-hoc calibrators as scikit-learn meta-estimators (temperature scaling and friends),
the calibration maps a cross-fitted ensemble chooses from, and the fold layer they share."""

from ._ensemble_temperature import CalibratedEnsembleTemperature
from ._folds import (
    check_partition,
    cross_fit,
    estimator_logits,
    fit_on_fold,
    out_of_fold_logits,
    takes_validation_rows,
    validated_sample_weight,
)
from ._histogram import CalibratedHistogramBinning
from ._isotonic import CalibratedIsotonic
from ._maps import calibrate_probabilities, log_probabilities
from ._quadratic import CalibratedQuadraticScaling
from ._select import CALIBRATIONS, fit_calibration, select_calibration
from ._structured_matrix import CalibratedStructuredMatrixScaling
from ._temperature import CalibratedTemperature
from ._vector_matrix import CalibratedMatrixScaling, CalibratedVectorScaling

__all__ = [
    "CalibratedTemperature",
    "CalibratedVectorScaling",
    "CalibratedMatrixScaling",
    "CalibratedStructuredMatrixScaling",
    "CalibratedIsotonic",
    "CalibratedHistogramBinning",
    "CalibratedEnsembleTemperature",
    "CalibratedQuadraticScaling",
    "CALIBRATIONS",
    "calibrate_probabilities",
    "check_partition",
    "cross_fit",
    "estimator_logits",
    "fit_calibration",
    "fit_on_fold",
    "log_probabilities",
    "out_of_fold_logits",
    "select_calibration",
    "takes_validation_rows",
    "validated_sample_weight",
]
