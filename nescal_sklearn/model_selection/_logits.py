"""Logits of fitted classifiers, and each row's logits from the fold model that held it out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from ..metrics import PROBA_FLOOR
from ._splits import check_partition

__all__ = ["estimator_logits", "out_of_fold_logits"]


def _scores_to_logits(scores, response_method: str, n_classes: int) -> np.ndarray | None:
    """Bring a response to logits of shape (n, n_classes); ``None`` if the shape does not fit."""
    scores = np.asarray(scores, dtype=np.float64)
    if response_method == "predict_proba":
        if scores.ndim == 2 and scores.shape[1] == n_classes:
            return np.log(np.clip(scores, PROBA_FLOOR, 1.0))
        return None
    if n_classes == 2 and (scores.ndim == 1 or (scores.ndim == 2 and scores.shape[1] == 1)):
        # scikit-learn's binary decision_function is the logit of classes_[1].
        decision = scores.reshape(-1)
        return np.column_stack([np.zeros_like(decision), decision])
    if scores.ndim == 2 and scores.shape[1] == n_classes:
        return scores
    return None


def estimator_logits(
    estimator, X, n_classes: int, response_method: str | None = None
) -> tuple[np.ndarray, str]:
    """Logits of a fitted classifier on ``X``, and the response method they came from.

    ``decision_function`` is preferred when it has one column per class (or is the 1-D
    binary score, the logit of ``classes_[1]``); otherwise the logarithm of the
    ``predict_proba`` clipped at 1e-12.

    Parameters
    ----------
    estimator : fitted classifier
        Has ``decision_function`` or ``predict_proba``.
    X : array-like
        Rows, as the estimator takes them.
    n_classes : int
        Number of classes (columns of the logits).
    response_method : {"decision_function", "predict_proba"} or None, default=None
        Use this method only; ``None`` tries ``decision_function`` first.

    Returns
    -------
    logits : ndarray of shape (n_samples, n_classes)
    response_method : str

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.model_selection import estimator_logits
    >>> X, y = load_iris(return_X_y=True)
    >>> logits, method = estimator_logits(LogisticRegression().fit(X, y), X[:2], 3)
    >>> logits.shape, method
    ((2, 3), 'decision_function')
    """
    if response_method is None:
        candidates = [m for m in ("decision_function", "predict_proba") if hasattr(estimator, m)]
    else:
        candidates = [response_method]
    for method in candidates:
        logits = _scores_to_logits(getattr(estimator, method)(X), method, n_classes)
        if logits is not None:
            return logits, method
    raise ValueError(
        f"{type(estimator).__name__} gives neither a decision_function of shape (n_samples,) "
        f"or (n_samples, {n_classes}) nor a predict_proba of shape (n_samples, {n_classes}) "
        f"for its {n_classes} classes; tried {candidates}."
    )


def out_of_fold_logits(
    fitted: Sequence[Sequence], X, folds, classes: np.ndarray
) -> list[np.ndarray]:
    """Each member's logits on the rows of the folds it did not train on.

    Parameters
    ----------
    fitted : sequence of sequence of fitted estimators
        ``fitted[f][m]``: member ``m`` fitted on fold ``f``'s training rows
        (:func:`fit_on_fold`), on folds that :func:`make_folds` checked.
    X : array-like of shape (n_samples, n_features)
    folds : sequence of (train, test) index arrays
        Their test parts must partition the rows: every row in exactly one
        (:func:`check_partition`).
    classes : ndarray of shape (n_classes,)
        The classes of the logits' columns.

    Returns
    -------
    list of ndarray of shape (n_samples, n_classes)
        One per member: row ``i`` holds the logits of the fold model that held row ``i``
        out.

    Raises
    ------
    ValueError
        When the test parts of ``folds`` are not a partition of the rows.
    """
    n_members = len(fitted[0])
    n_samples = _num_samples(X)
    check_partition(folds, n_samples)
    out = [np.empty((n_samples, classes.size)) for _ in range(n_members)]
    for f, (_, test) in enumerate(folds):
        for m, model in enumerate(fitted[f]):
            out[m][test] = estimator_logits(model, _safe_indexing(X, test), classes.size)[0]
    return out
