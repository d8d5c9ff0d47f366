"""The calibration maps a cross-fitted ensemble chooses from, and the choice out of fold.

:data:`CALIBRATIONS` names the candidate maps, built from the map classes themselves;
:func:`select_calibration` picks one by an inner cross-validation on out-of-fold logits
(preferring the simpler map within one standard error), and :func:`fit_calibration`
fits the chosen one on all of them.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from ..model_selection import inner_split
from ._maps import _CalibrationMap, _LogitMap, fit_map, floor_probabilities
from ._objective import SolverPastDeadline, solve_until
from ._quadratic import _QuadraticScalingMap
from ._structured_matrix import _StructuredMatrixScalingMap
from ._temperature import _TemperatureMap

__all__ = ["CALIBRATIONS", "fit_calibration", "select_calibration"]


class _IdentityMap(_LogitMap):
    """The map that changes nothing (the uncalibrated ensemble)."""

    def fit(self, logits, y, sample_weight=None):
        return self

    def transform(self, logits):
        return logits

    def n_parameters(self) -> int:
        return 0


#: Calibration maps by name, in order of complexity (the selection prefers the earlier
#: of two maps that tie within noise): name -> (map factory, classes it applies to).
CALIBRATIONS: dict[str, tuple[Callable[[], _CalibrationMap], str]] = {
    "identity": (_IdentityMap, "any"),
    # ts-mix: temperature scaling mixed with the uniform distribution at 1/(n + 1), so
    # that a near-separable calibration set cannot make one test error cost everything.
    "temperature": (partial(_TemperatureMap, "mixture"), "any"),
    # Mixed with the model at 1/(m + 1) for m rows of the rarer class, so that a bump
    # fitted around a few rows of a rare class cannot collapse fresh rows' probabilities.
    "quadratic": (partial(_QuadraticScalingMap, "mixture"), "binary"),
    "sms": (_StructuredMatrixScalingMap, "multiclass"),
}


def fit_calibration(
    name: str, logits: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None
) -> _CalibrationMap:
    """The map ``name`` of :data:`CALIBRATIONS` fitted on ``logits`` and ``y``.

    Parameters
    ----------
    name : str
        A key of :data:`CALIBRATIONS`.
    logits : ndarray of shape (n_samples, n_classes)
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    sample_weight : ndarray or None, default=None

    Returns
    -------
    object
        The fitted map: ``predict_proba(logits)`` gives calibrated probabilities.
    """
    return fit_map(CALIBRATIONS[name][0], logits, y, sample_weight)


def _held_out(name, logits, y, sample_weight, splits, deadline) -> np.ndarray | None:
    """The map ``name``'s held-out probabilities over ``splits``; None when ``deadline``
    (see :func:`select_calibration`) leaves it out."""
    proba, longest = np.empty_like(logits), 0.0
    for i, (train, test) in enumerate(splits):
        start = time.time()
        # this part, the later ones and the fit on all rows (about one part more)
        if deadline is not None and start + longest * (len(splits) - i + 1) > deadline:
            return None
        w = None if sample_weight is None else sample_weight[train]
        with warnings.catch_warnings(), solve_until(deadline):
            warnings.simplefilter("ignore")  # a part's map may warn; only the choice counts
            try:
                fitted = fit_calibration(name, logits[train], y[train], w)
            except SolverPastDeadline:
                return None
        proba[test] = floor_probabilities(fitted.predict_proba(logits[test]))
        longest = max(longest, time.time() - start)
    return proba


def select_calibration(
    logits: np.ndarray,
    y: np.ndarray,
    candidates: Sequence[str],
    *,
    sample_weight: np.ndarray | None = None,
    n_splits: int = 5,
    random_state=None,
    deadline: float | None = None,
) -> tuple[str, dict[str, float], np.ndarray]:
    """Choose a calibration map by cross-validation on the rows, preferring simple maps.

    Every candidate map is fitted on ``n_splits - 1`` parts of the rows and scored by its
    NLL on the part it did not see. The choice is the simplest candidate (in the order
    given: identity, then temperature, then quadratic or structured matrix scaling) whose
    mean held-out NLL is within one standard error of the best candidate's: the standard
    error of the paired, per-row difference to the best. A map is chosen over a simpler
    one only when the held-out rows say it is better beyond that noise; with
    ``"identity"`` among the candidates, the choice is never worse than no calibration
    beyond it.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
        The (out-of-fold) logits to calibrate.
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    candidates : sequence of str
        Names in :data:`CALIBRATIONS`, simplest first.
    sample_weight : ndarray or None, default=None
        Weights of the maps' NLL and of the scores.
    n_splits : int, default=5
        Parts of the inner cross-validation (stratified, shuffled).
    random_state : int, RandomState instance or None, default=None
        Seeds the inner split.
    deadline : float or None, default=None
        On ``time.time``'s clock (a ``CrossFitClassifier`` time budget's): a candidate
        after the first is left out, with every later one, as soon as its parts still to
        fit and its fit on all rows, each at its longest part's time so far, would end
        after the deadline, or its solver passes the deadline within a part (one part of
        structured matrix scaling took 12.4 s on fashion-mnist's 45,000 rows, most took
        0.5 to 3 s). None: every candidate.

    Returns
    -------
    name : str
        The chosen map.
    scores : dict of str to float
        Each candidate's mean held-out NLL (those ``deadline`` left out are absent).
    held_out_proba : ndarray of shape (n_samples, n_classes)
        The chosen map's held-out probabilities: each row calibrated by the map fitted
        without it.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.calibration import select_calibration
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 400)
    >>> logits = np.column_stack([np.zeros(400), 6.0 * (y - 0.5) + rng.normal(0, 3, 400)])
    >>> name, scores, proba = select_calibration(
    ...     logits, y, ["identity", "temperature"], random_state=0
    ... )
    >>> name, proba.shape
    ('temperature', (400, 2))
    """
    splits = inner_split(y, random_state, n_splits)
    weights = np.ones(y.size) if sample_weight is None else sample_weight
    losses, held_out = {}, {}
    for name in candidates:
        proba = _held_out(name, logits, y, sample_weight, splits, None if not losses else deadline)
        if proba is None:
            break
        held_out[name] = proba
        losses[name] = -np.log(proba[np.arange(y.size), y])
    candidates = list(losses)
    mean = {name: float(np.average(loss, weights=weights)) for name, loss in losses.items()}
    best = min(mean, key=mean.get)
    for name in candidates:  # simplest first
        diff = losses[name] - losses[best]
        se = np.sqrt(np.average((diff - np.average(diff, weights=weights)) ** 2, weights=weights))
        se /= np.sqrt(max(weights.sum() ** 2 / np.sum(weights**2), 1.0))
        if mean[name] - mean[best] <= se:
            return name, mean, held_out[name]
    return best, mean, held_out[best]  # pragma: no cover - best always qualifies
