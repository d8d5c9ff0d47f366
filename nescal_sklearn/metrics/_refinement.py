"""Refinement log-loss: the log-loss that is left after the NLL-optimal temperature."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import check_classification_proba
from .logits import optimal_log_temperature

__all__ = ["PROBA_FLOOR", "refinement_log_loss"]

#: Probabilities are clipped to this floor before their logarithm is taken as logits (here,
#: and wherever the package turns a ``predict_proba`` into logits).
PROBA_FLOOR = 1e-12


def refinement_log_loss(
    y_true: Any, y_proba: Any, *, labels: Any = None, sample_weight: Any = None
) -> float:
    """Log-loss after temperature scaling fitted on the same rows (refinement error).

    ``min_T NLL(softmax(log(p) / T))``: the negative log-likelihood that remains once
    the temperature that is best *on these rows* has been applied. Berta, Holzmüller,
    Jordan & Bach (2025) split the log-loss into this refinement error and a
    calibration error, ``log_loss - refinement_log_loss`` (>= 0), which is what a
    temperature can remove. It is the criterion of
    ``NeSCalClassifier(early_stopping="refinement")``: choose the epoch that is best
    once it is temperature-scaled.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row.
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``; a 1-D array is the
        probability of the second class of a binary problem. Their logarithm, clipped
        at 1e-12, is taken as the logits.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_proba``; defaults to the sorted unique values
        of ``y_true`` and is required when ``y_true`` lacks a class.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weight of each row.

    Returns
    -------
    float
        In nats; never above ``log_loss`` of the same input (within the clipping).

    References
    ----------
    Berta, Holzmüller, Jordan & Bach, "Rethinking Early Stopping: Refine, Then
    Calibrate", 2025.

    Examples
    --------
    >>> from nescal_sklearn.metrics import log_loss, refinement_log_loss
    >>> y = [0, 0, 1, 1]
    >>> p = [[0.99, 0.01], [0.6, 0.4], [0.3, 0.7], [0.01, 0.99]]  # right, but overconfident
    >>> bool(refinement_log_loss(y, p) <= log_loss(y, p))
    True
    >>> q = [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]  # no temperature helps here
    >>> round(refinement_log_loss(y, q), 6) == round(log_loss(y, q), 6)
    True
    """
    checked = check_classification_proba(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    logits = np.log(np.clip(checked.proba, PROBA_FLOOR, 1.0))
    return optimal_log_temperature(logits, checked.y_index, checked.sample_weight).nll
