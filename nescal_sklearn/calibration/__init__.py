"""Post-hoc calibrators as scikit-learn meta-estimators (temperature scaling and friends),
and the calibration maps a cross-fitted ensemble chooses from."""

from ._ensemble_temperature import CalibratedEnsembleTemperature
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
    "fit_calibration",
    "log_probabilities",
    "select_calibration",
]
