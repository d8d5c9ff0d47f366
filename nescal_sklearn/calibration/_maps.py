"""Calibration maps, and the three rules that every map follows whatever it fits.

A calibration map turns an estimator's logits ``(n_samples, n_classes)`` into calibrated
probabilities. :func:`fit_map` fits one on calibration rows under the rules that
:class:`~nescal_sklearn.calibration._base.PostHocCalibrator` documents for every
calibrator:

* classes absent from the calibration rows keep the model's own probability, and the
  map calibrates the distribution over the present classes only
  (:class:`PresentClassesMap`);
* a map fitted on fewer calibration rows ``n`` than it has parameters is mixed with the
  model's own probabilities at weight ``1 / (n + 1)`` (:class:`ModelMixture`); with
  weights, ``n`` is Kish's effective number of rows (:func:`effective_rows`), never the
  sum of the weights, so the scale of the weights does not matter;
* no calibrated probability is below :data:`MIN_PROBABILITY` (:func:`floor_probabilities`),
  so none is exactly 0 or exactly 1.

Each rule leaves a map fitted on adequate data (every class present, at least as many
rows as parameters, probabilities above the floor) exactly as it is.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import log_softmax, logsumexp, softmax

__all__ = [
    "MIN_PROBABILITY",
    "ModelMixture",
    "PresentClassesMap",
    "calibrate_probabilities",
    "fit_map",
    "fit_present_classes",
    "floor_probabilities",
    "log_probabilities",
]

#: No calibrated probability is below this. A row's largest probability is then at most
#: ``1 - MIN_PROBABILITY``, which float64 tells from 1 (its spacing below 1 is 1.1e-16),
#: so no probability is exactly 0 or 1, and an error costs at most 34.5 nats.
MIN_PROBABILITY = 1e-15


class _CalibrationMap:
    """A fitted map from an estimator's logits to calibrated probabilities."""

    def fit(self, logits: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None):
        raise NotImplementedError

    def predict_proba(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def n_parameters(self) -> int:
        """Number of parameters the fitted map learned from its calibration rows."""
        raise NotImplementedError


class _LogitMap(_CalibrationMap):
    """A calibration map whose output is a logit vector: probabilities are its softmax."""

    def transform(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predict_proba(self, logits: np.ndarray) -> np.ndarray:
        return softmax(self.transform(logits), axis=1)


def effective_rows(n_rows: int, sample_weight: np.ndarray | None) -> float:
    """``n``, the number of calibration rows the maps count: ``n_rows`` without weights,
    Kish's effective number of rows ``(sum w)**2 / sum w**2`` with them.

    It depends on the ratios of the weights only: all-equal weights count ``n_rows``
    (exactly, whatever they sum to), rows of zero weight count as absent, and uneven
    weights count fewer rows than there are. Computed on the weights over their largest,
    so tiny weights do not underflow; 0 when no weight is positive.
    """
    if sample_weight is None:
        return float(n_rows)
    largest = float(np.max(sample_weight)) if sample_weight.size else 0.0
    if not largest > 0:
        return 0.0
    relative = sample_weight / largest
    return float(np.sum(relative) ** 2 / np.sum(relative**2))


def calibration_rows(y: np.ndarray, sample_weight: np.ndarray | None) -> float:
    """``n``: the calibration rows, or their effective number (:func:`effective_rows`)."""
    return effective_rows(y.size, sample_weight)


def floor_probabilities(proba: np.ndarray) -> np.ndarray:
    """``proba`` with every probability below :data:`MIN_PROBABILITY` raised to it.

    In a row that has such probabilities, the others are scaled down by one common
    factor so that the row still sums to one: the order of the classes is kept, and no
    probability is exactly 0 or 1. Rows without one are returned as they are.
    """
    low = proba < MIN_PROBABILITY
    rows = np.any(low, axis=1)
    if not np.any(rows):
        return proba
    floored = np.array(proba, dtype=np.float64)
    part, part_low = floored[rows], low[rows]
    kept = 1.0 - MIN_PROBABILITY * part_low.sum(axis=1)
    high = np.where(part_low, 0.0, part).sum(axis=1)
    floored[rows] = np.where(part_low, MIN_PROBABILITY, part * (kept / high)[:, None])
    return floored


def log_probabilities(proba: np.ndarray) -> np.ndarray:
    """``log(proba)``, finite: a probability of 0 counts as 1e-300. The logits of an
    averaged probability (a softmax gives ``proba`` back)."""
    return np.log(np.clip(proba, 1e-300, None))


def calibrate_probabilities(calibrator: _CalibrationMap, proba: np.ndarray) -> np.ndarray:
    """A fitted map applied to probabilities (an average of models'), read as the logits
    :func:`log_probabilities`; floored by :func:`floor_probabilities`."""
    return floor_probabilities(calibrator.predict_proba(log_probabilities(proba)))


class _Wrapper(_LogitMap):
    """A map around another one, whose fitted attributes (``temperature_``, ``coef_``,
    ...) read through to it."""

    map_: _CalibrationMap | None

    def __getattr__(self, name: str):
        inner = self.__dict__.get("map_")
        if inner is not None and name.endswith("_") and not name.startswith("__"):
            return getattr(inner, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class ModelMixture(_Wrapper):
    """``(1 - w) map(z) + w softmax(z)``: a map mixed with the model's own probabilities.

    Parameters
    ----------
    fitted_map : _CalibrationMap
        The map fitted on ``n_rows`` calibration rows.
    n_rows : float
        The calibration rows ``n`` (their effective number, when weighted:
        :func:`effective_rows`).
    n_parameters : int
        The parameters the map learned from them, more than ``n_rows``.
    """

    def __init__(self, fitted_map: _CalibrationMap, n_rows: float, n_parameters: int):
        self.map_ = fitted_map
        self.n_rows_ = n_rows
        self.n_parameters_ = n_parameters
        self.model_weight_ = 1.0 / (n_rows + 1.0)

    def predict_proba(self, logits):
        weight = self.model_weight_
        return (1.0 - weight) * self.map_.predict_proba(logits) + weight * softmax(logits, axis=1)

    def transform(self, logits):
        weight = self.model_weight_
        return np.logaddexp(
            np.log1p(-weight) + log_softmax(self.map_.transform(logits), axis=1),
            np.log(weight) + log_softmax(logits, axis=1),
        )


def fit_map(
    make_map: Callable[[], _CalibrationMap],
    logits: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
) -> _CalibrationMap:
    """A new map fitted on the calibration rows, mixed with the model when underdetermined.

    The map is the one ``make_map`` builds, fitted on ``logits`` and ``y``; when it
    learned more parameters than there are calibration rows ``n``
    (:func:`calibration_rows`), it is returned inside a :class:`ModelMixture` of weight
    ``1 / (n + 1)``.
    """
    fitted = make_map().fit(logits, y, sample_weight)
    n_rows = calibration_rows(y, sample_weight)
    n_parameters = fitted.n_parameters()
    if n_rows < n_parameters:
        return ModelMixture(fitted, n_rows, n_parameters)
    return fitted


class PresentClassesMap(_Wrapper):
    """A map of the classes present in the calibration rows; the others keep the model's.

    With ``p = softmax(z)`` the model's probabilities and ``P`` the present classes, the
    calibrated probabilities are ``p_j`` for every absent class ``j`` and
    ``(sum_{i in P} p_i) * map(z_P)`` for the present ones: the map, fitted on the
    present classes' logits ``z_P`` (:func:`fit_present_classes`), calibrates the model's
    distribution over ``P`` and the mass that the absent classes leave is shared out by
    it. With a single present class there is nothing to calibrate: ``map_`` is None and
    the probabilities are the model's own.

    Parameters
    ----------
    fitted_map : _CalibrationMap or None
        The map fitted on the present classes (None for a single one).
    present : ndarray of shape (n_present,)
        Indices of the present classes, sorted.
    n_classes : int
        Number of classes of the model.
    """

    def __init__(self, fitted_map: _CalibrationMap | None, present: np.ndarray, n_classes: int):
        self.map_ = fitted_map
        self.present_ = np.asarray(present, dtype=np.intp)
        self.absent_ = np.setdiff1d(np.arange(n_classes), self.present_)

    def predict_proba(self, logits):
        proba = softmax(logits, axis=1)
        if self.map_ is None:
            return proba
        present = proba[:, self.present_]
        proba[:, self.present_] = present.sum(axis=1, keepdims=True) * self.map_.predict_proba(
            logits[:, self.present_]
        )
        return proba

    def transform(self, logits):
        log_proba = log_softmax(logits, axis=1)
        if self.map_ is None:
            return log_proba
        present_mass = logsumexp(log_proba[:, self.present_], axis=1, keepdims=True)
        calibrated = log_softmax(self.map_.transform(logits[:, self.present_]), axis=1)
        log_proba[:, self.present_] = present_mass + calibrated
        return log_proba


def fit_present_classes(
    make_map: Callable[[], _CalibrationMap],
    present: np.ndarray,
    logits: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
) -> PresentClassesMap:
    """A :class:`PresentClassesMap` whose map is fitted (:func:`fit_map`) on the rows of
    the ``present`` classes, with the logits of those classes only."""
    # Rows of absent classes can only be rows of zero weight: they do not count.
    keep = np.isin(y, present)
    fitted = None
    if present.size > 1:
        encoded = np.searchsorted(present, y[keep])
        weights = None if sample_weight is None else sample_weight[keep]
        fitted = fit_map(make_map, logits[keep][:, present], encoded, weights)
    return PresentClassesMap(fitted, present, logits.shape[1])
