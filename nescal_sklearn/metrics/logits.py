"""Negative log-likelihood of logits and its NLL-optimal temperature (numpy and scipy only).

A public module of the metrics room for the rooms above it (and for users who work on
logits rather than probabilities).

The one place that solves the 1-D temperature problem: the refinement loss of this
room, the refinement stopping criterion of the estimator and the post-hoc
:class:`~nescal_sklearn.calibration.CalibratedTemperature` all call
:func:`optimal_log_temperature`. Targets ``y`` are label-encoded (integers in
``[0, n_classes)``), logits of shape ``(n_samples, n_classes)``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar

__all__ = [
    "LOG_TEMPERATURE_BOUNDS",
    "OptimalTemperature",
    "normalised_weights",
    "optimal_log_temperature",
    "shifted_exp",
    "weighted_nll",
]

#: Bounds of the 1-D search over log(T): T between about 4.5e-5 and 2.2e4.
LOG_TEMPERATURE_BOUNDS = (-10.0, 10.0)


def normalised_weights(n_samples: int, sample_weight: np.ndarray | None) -> np.ndarray:
    """Weights summing to 1 (uniform when ``sample_weight`` is None)."""
    if sample_weight is None:
        return np.full(n_samples, 1.0 / n_samples)
    return sample_weight / sample_weight.sum()


def shifted_exp(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``exp(logits - row max)``, its row sums and the row max: a stable logsumexp.

    Computed on the transpose: numpy reduces a row of a few classes slowly (``max(axis=1)``
    took 0.3 ms on 7,800 rows of 2 logits, against 0.01 ms over the columns), and the
    temperature search runs this about 25 times an epoch.
    """
    columns = np.ascontiguousarray(logits.T)
    row_max = columns.max(axis=0)
    exp = np.exp(columns - row_max)
    return exp.T, exp.sum(axis=0), row_max


def weighted_nll(
    logits: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None
) -> float:
    """Mean (weighted) negative log-likelihood of ``softmax(logits)``, computed with logsumexp."""
    _, sums, row_max = shifted_exp(logits)
    true_logit = logits[np.arange(len(y)), y]
    losses = np.log(sums) + row_max - true_logit
    return float(normalised_weights(logits.shape[0], sample_weight) @ losses)


class OptimalTemperature:
    """Result of :func:`optimal_log_temperature`: ``log_temperature``, ``nll``, ``success``,
    ``message`` (the solver's)."""

    __slots__ = ("log_temperature", "nll", "success", "message")

    def __init__(self, log_temperature: float, nll: float, success: bool, message: str):
        self.log_temperature = log_temperature
        self.nll = nll
        self.success = success
        self.message = message

    @property
    def temperature(self) -> float:
        return float(np.exp(self.log_temperature))


def optimal_log_temperature(
    logits: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None
) -> OptimalTemperature:
    """The temperature minimising the NLL of ``softmax(logits / T)``: bounded search on log T.

    ``minimize_scalar(method="bounded")`` over :data:`LOG_TEMPERATURE_BOUNDS`; the NLL
    at ``T = 1`` competes too, so the returned NLL is never above the unscaled one.
    No warning is raised here for degenerate temperatures (at a bound): callers that
    fit a calibrator decide what to say.
    """

    def nll(log_temperature: float) -> float:
        return weighted_nll(logits * np.exp(-log_temperature), y, sample_weight)

    result = minimize_scalar(
        nll, bounds=LOG_TEMPERATURE_BOUNDS, method="bounded", options={"xatol": 1e-10}
    )
    best, value = float(result.x), float(result.fun)
    unscaled = nll(0.0)
    if unscaled < value:
        best, value = 0.0, unscaled
    return OptimalTemperature(best, value, bool(result.success), str(result.message))
