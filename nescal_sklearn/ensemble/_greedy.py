"""Greedy ensemble selection with replacement (Caruana et al., 2004)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..calibration import log_probabilities
from ..metrics.logits import weighted_nll

__all__ = ["greedy_ensemble_weights"]


def greedy_ensemble_weights(
    probas: Sequence[np.ndarray],
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    size: int = 25,
) -> np.ndarray:
    """Member weights by greedy ensemble selection with replacement (Caruana et al., 2004).

    Start from an empty ensemble; ``size`` times, add the member (again, if it is the
    best choice) whose addition gives the lowest NLL of the averaged probabilities on
    the rows ``y``. The weight of a member is the share of the additions it got. Ties go
    to the earlier member.

    Parameters
    ----------
    probas : sequence of ndarray of shape (n_samples, n_classes)
        Each member's (out-of-fold) probabilities.
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    sample_weight : ndarray or None, default=None
        Weights of the NLL.
    size : int, default=25
        Number of additions (AutoGluon's default ensemble size).

    Returns
    -------
    ndarray of shape (n_members,)
        Non-negative weights summing to 1.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.ensemble import greedy_ensemble_weights
    >>> y = np.array([0, 1, 1, 0])
    >>> good = np.array([[0.8, 0.2], [0.3, 0.7], [0.2, 0.8], [0.7, 0.3]])
    >>> bad = good[:, ::-1]
    >>> greedy_ensemble_weights([bad, good], y, size=5).tolist()
    [0.0, 1.0]
    """
    if len(probas) == 1:
        return np.ones(1)
    counts = np.zeros(len(probas))
    total = np.zeros_like(probas[0])
    for step in range(size):
        scores = [
            weighted_nll(log_probabilities((total + p) / (step + 1)), y, sample_weight)
            for p in probas
        ]
        best = int(np.argmin(scores))
        counts[best] += 1
        total = total + probas[best]
    return counts / size
