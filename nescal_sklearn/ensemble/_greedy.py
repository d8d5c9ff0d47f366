"""Greedy ensemble selection with replacement (Caruana et al., 2004), and two stricter
rules on the same additions: the best prefix (AutoGluon's ``use_best``) and a gate of one
standard error before a member gets its first weight."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..calibration import log_probabilities
from ..metrics.logits import weighted_nll

__all__ = ["GREEDY_RULES", "greedy_ensemble_weights"]

#: The rules of :func:`greedy_ensemble_weights`: which additions give the weights.
GREEDY_RULES = ("greedy", "best_prefix", "greedy_1se")


def greedy_ensemble_weights(
    probas: Sequence[np.ndarray],
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    size: int = 25,
    *,
    rule: str = "greedy",
) -> np.ndarray:
    """Member weights by greedy ensemble selection with replacement (Caruana et al., 2004).

    Start from an empty ensemble; ``size`` times, add the member (again, if it is the
    best choice) whose addition gives the lowest NLL of the averaged probabilities on
    the rows ``y``. The weight of a member is the share of the additions it got. Ties go
    to the earlier member. ``rule`` says which additions count:

    * ``"greedy"``: all ``size`` of them;
    * ``"best_prefix"``: the first ``k`` only, for the ``k`` whose ensemble has the
      lowest NLL (the earliest ``k`` of those within a relative ``1e-12`` of the
      lowest, for rounding): AutoGluon's ``use_best``, so that additions that made the
      ensemble worse are left out;
    * ``"greedy_1se"``: a member not yet in the ensemble may be added only when its
      addition lowers the ensemble's NLL by more than one standard error; otherwise
      the best member already in it is added (the first addition is the single best
      member). With ``d_i`` the NLL of row ``i`` under the ensemble before the
      addition minus its NLL after, and ``w_i`` the sample weights (all 1 without),
      the gain is the weighted mean ``d = sum(w_i d_i) / sum(w_i)`` and its standard
      error ``sqrt(sum(w_i (d_i - d)^2) / sum(w_i)) / sqrt(n_eff)``, with Kish's
      effective number of rows ``n_eff = sum(w_i)^2 / sum(w_i^2)`` (``n`` without
      weights): the member passes when ``d`` exceeds that error. This is the rule of
      :func:`~nescal_sklearn.calibration.select_calibration`, which keeps the simpler
      map unless a more complex one is better beyond one standard error.

    Parameters
    ----------
    probas : sequence of ndarray of shape (n_samples, n_classes)
        Each member's (out-of-fold) probabilities.
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    sample_weight : ndarray or None, default=None
        Weights of the NLL (and of the mean gain and its standard error).
    size : int, default=25
        Number of additions (AutoGluon's default ensemble size).
    rule : {"greedy", "best_prefix", "greedy_1se"}, default="greedy"
        Which additions give the weights (see above).

    Returns
    -------
    ndarray of shape (n_members,)
        Non-negative weights summing to 1.

    Raises
    ------
    ValueError
        When ``rule`` is not one of :data:`GREEDY_RULES`.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.ensemble import greedy_ensemble_weights
    >>> y = np.array([0, 1, 1, 0])
    >>> good = np.array([[0.8, 0.2], [0.3, 0.7], [0.2, 0.8], [0.7, 0.3]])
    >>> bad = good[:, ::-1]
    >>> greedy_ensemble_weights([bad, good], y, size=5).tolist()
    [0.0, 1.0]

    Two members that are right on one row each: their even mix is best, and an odd
    number of additions cannot make it, so the best prefix stops at two.

    >>> y = np.array([0, 0])
    >>> a = np.array([[0.9, 0.1], [0.1, 0.9]])
    >>> greedy_ensemble_weights([a, a[:, ::-1]], y, size=3).tolist()
    [0.6666666666666666, 0.3333333333333333]
    >>> greedy_ensemble_weights([a, a[:, ::-1]], y, size=3, rule="best_prefix").tolist()
    [0.5, 0.5]
    """
    if rule not in GREEDY_RULES:
        raise ValueError(f"rule must be one of {GREEDY_RULES}; got {rule!r}.")
    if len(probas) == 1:
        return np.ones(1)
    order, nlls = _additions(probas, y, sample_weight, size, gated=rule == "greedy_1se")
    if rule == "best_prefix":
        lowest = min(nlls)
        order = order[: 1 + next(k for k, nll in enumerate(nlls) if nll <= lowest * (1 + 1e-12))]
    return np.bincount(order, minlength=len(probas)) / len(order)


def _additions(
    probas: Sequence[np.ndarray],
    y: np.ndarray,
    sample_weight: np.ndarray | None,
    size: int,
    gated: bool,
) -> tuple[list[int], list[float]]:
    """The member of each greedy addition and the ensemble's NLL after it; ``gated``:
    a member's first addition must pass :func:`_passes`."""
    order, nlls = [], []
    total = np.zeros_like(probas[0])
    for step in range(size):
        scores = [
            weighted_nll(log_probabilities((total + p) / (step + 1)), y, sample_weight)
            for p in probas
        ]
        if gated and order:
            scores = [
                score
                if m in order or _passes(total / step, (total + p) / (step + 1), y, sample_weight)
                else np.inf
                for m, (score, p) in enumerate(zip(scores, probas, strict=True))
            ]
        best = int(np.argmin(scores))
        order.append(best)
        nlls.append(scores[best])
        total = total + probas[best]
    return order, nlls


def _passes(
    before: np.ndarray, after: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None
) -> bool:
    """Whether ``after`` lowers the per-row NLL of ``before`` by more than one standard
    error of the (weighted) mean difference (the formula: :func:`greedy_ensemble_weights`)."""
    rows = np.arange(y.size)
    diff = log_probabilities(after)[rows, y] - log_probabilities(before)[rows, y]
    w = np.ones(y.size) if sample_weight is None else sample_weight
    mean = np.average(diff, weights=w)
    se = np.sqrt(np.average((diff - mean) ** 2, weights=w))
    se /= np.sqrt(max(w.sum() ** 2 / np.sum(w**2), 1.0))
    return bool(mean > se)
