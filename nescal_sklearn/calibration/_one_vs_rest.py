"""One-vs-rest calibration of each class's predicted probability, then renormalisation.

Shared by isotonic regression and histogram binning: a 1-D regressor per class maps the
uncalibrated probability of that class to the observed frequency of the class. With two
classes a single regressor calibrates ``P(classes_[1])`` and the other column is its
complement, as in scikit-learn's ``CalibratedClassifierCV``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from ._maps import _CalibrationMap


class _OneVsRestMap(_CalibrationMap):
    """Calibrate each column of ``softmax(logits)`` against the one-vs-rest target."""

    def _make_regressor(self):
        """An unfitted 1-D regressor with ``fit(x, target, sample_weight)`` and ``predict(x)``."""
        raise NotImplementedError

    def _n_levels(self, regressor) -> int:
        """Number of values the fitted 1-D regressor learned from the calibration rows."""
        raise NotImplementedError

    def n_parameters(self) -> int:
        return sum(self._n_levels(regressor) for regressor in self.regressors_)

    @staticmethod
    def _calibrated_columns(n_classes: int) -> list[int]:
        return [1] if n_classes == 2 else list(range(n_classes))

    def fit(self, logits, y, sample_weight=None):
        proba = softmax(logits, axis=1)
        if sample_weight is not None:
            # Zero weights act as removed samples (they must not move bin edges).
            keep = sample_weight > 0
            proba, y, sample_weight = proba[keep], y[keep], sample_weight[keep]
        self.regressors_ = [
            self._make_regressor().fit(proba[:, c], (y == c).astype(np.float64), sample_weight)
            for c in self._calibrated_columns(logits.shape[1])
        ]
        return self

    def predict_proba(self, logits):
        proba = softmax(logits, axis=1)
        n_classes = proba.shape[1]
        columns = self._calibrated_columns(n_classes)
        calibrated = np.column_stack(
            [
                np.clip(reg.predict(proba[:, c]), 0.0, 1.0)
                for reg, c in zip(self.regressors_, columns, strict=True)
            ]
        )
        if n_classes == 2:
            return np.column_stack([1.0 - calibrated[:, 0], calibrated[:, 0]])
        total = calibrated.sum(axis=1, keepdims=True)
        uniform = np.full_like(calibrated, 1.0 / n_classes)
        # Rows where every class got probability 0 fall back to the uniform distribution.
        return np.divide(calibrated, total, out=uniform, where=total > 0)
