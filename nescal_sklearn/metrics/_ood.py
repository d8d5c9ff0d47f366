"""Out-of-distribution detection from predicted probabilities: how well a model's
uncertainty tells rows of no class (positive) from in-distribution rows (numpy and
scikit-learn only)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import entr
from sklearn.metrics import average_precision_score, roc_auc_score

__all__ = [
    "OOD_SCORES",
    "ood_aupr_in",
    "ood_aupr_out",
    "ood_auroc",
    "ood_fpr_at_tpr",
    "predictive_entropy",
]


def predictive_entropy(proba: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of ``proba``; ``0 log 0`` counts as 0.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.metrics import predictive_entropy
    >>> predictive_entropy(np.array([[1.0, 0.0], [0.5, 0.5]])).round(4)
    array([0.    , 0.6931])
    """
    return entr(np.asarray(proba, dtype=np.float64)).sum(axis=1)


def _ood_labels(proba_in, proba_out) -> np.ndarray:
    return np.r_[np.zeros(len(proba_in)), np.ones(len(proba_out))]


#: OOD score name -> how "out of distribution" each row looks (higher: more): the
#: predictive entropy, or minus the largest probability (the max-probability baseline).
OOD_SCORES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "entropy": predictive_entropy,
    "max_proba": lambda proba: -np.max(np.asarray(proba, dtype=np.float64), axis=1),
}


def _scores(score: str, proba_in, proba_out) -> np.ndarray:
    return np.r_[OOD_SCORES[score](proba_in), OOD_SCORES[score](proba_out)]


def ood_auroc(proba_in, proba_out, score: str = "entropy") -> float:
    """AUROC of telling out-of-distribution rows (positive) from in-distribution ones by
    the OOD ``score`` (``"entropy"`` or ``"max_proba"``, see :data:`OOD_SCORES`).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.metrics import ood_auroc
    >>> ood_auroc(np.array([[0.9, 0.1], [0.6, 0.4]]), np.array([[0.5, 0.5], [0.7, 0.3]]))
    0.75
    """
    return float(
        roc_auc_score(_ood_labels(proba_in, proba_out), _scores(score, proba_in, proba_out))
    )


def ood_aupr_in(proba_in, proba_out, score: str = "entropy") -> float:
    """Average precision with the in-distribution rows positive, ranked by minus the OOD
    ``score`` (the confidence)."""
    labels = 1.0 - _ood_labels(proba_in, proba_out)
    return float(average_precision_score(labels, -_scores(score, proba_in, proba_out)))


def ood_aupr_out(proba_in, proba_out, score: str = "entropy") -> float:
    """Average precision with the out-of-distribution rows positive, ranked by the OOD
    ``score``."""
    labels = _ood_labels(proba_in, proba_out)
    return float(average_precision_score(labels, _scores(score, proba_in, proba_out)))


def ood_fpr_at_tpr(proba_in, proba_out, score: str = "entropy", tpr: float = 0.95) -> float:
    """FPR at ``tpr`` TPR: the share of out-of-distribution rows still accepted as
    in-distribution when the threshold on the OOD ``score`` accepts (at least) ``tpr``
    of the in-distribution rows, at the strictest such threshold.

    With in-distribution scores sorted increasingly, ``s_1 <= ... <= s_n``, the threshold
    is ``t = s_k`` with ``k = ceil(tpr * n)``: the ``k`` rows scoring at most ``t`` are
    accepted; the result is the share of out-of-distribution rows scoring at most ``t``
    (the first point of the ROC curve, in-distribution positive, at or above ``tpr``).

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.metrics import ood_fpr_at_tpr
    >>> p_in = np.array([[0.9, 0.1]] * 19 + [[0.55, 0.45]])   # 95 % of them confident
    >>> p_out = np.array([[0.95, 0.05], [0.6, 0.4], [0.5, 0.5], [0.9, 0.1]])
    >>> ood_fpr_at_tpr(p_in, p_out, score="max_proba")   # threshold: max-proba >= 0.9
    0.5
    """
    s_in = np.sort(OOD_SCORES[score](proba_in))
    s_out = OOD_SCORES[score](proba_out)
    k = int(np.ceil(tpr * len(s_in) - 1e-9))
    threshold = s_in[max(k, 1) - 1]
    return float(np.mean(s_out <= threshold))
