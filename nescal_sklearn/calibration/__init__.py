"""Post-hoc calibrators as scikit-learn meta-estimators (temperature scaling and friends)."""

from ._crossfit import (
    CALIBRATIONS,
    CrossFitClassifier,
    greedy_ensemble_weights,
    select_calibration,
    takes_validation_rows,
)
from ._ensemble_temperature import CalibratedEnsembleTemperature
from ._histogram import CalibratedHistogramBinning
from ._isotonic import CalibratedIsotonic
from ._quadratic import CalibratedQuadraticScaling
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
    "CrossFitClassifier",
    "CALIBRATIONS",
    "greedy_ensemble_weights",
    "select_calibration",
    "takes_validation_rows",
]
