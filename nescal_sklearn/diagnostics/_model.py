"""What the diagnostics read from a fitted ``NeSCalClassifier`` (or a Pipeline ending in one).

Rows go through the Pipeline's earlier steps, then are validated exactly as
``NeSCalClassifier`` validates them before its network (``validate_data`` to
float32, ``reset=False``); the estimator and graph rooms are imported only here,
when an estimator is passed, so the array paths need no torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = [
    "model_classes",
    "model_embeddings",
    "model_logits",
    "model_proba",
    "training_epsilon",
]


def _final_step(estimator: Any, X: Any) -> tuple[Any, Any]:
    """The fitted ``NeSCalClassifier`` and ``X`` transformed by the steps before it."""
    from sklearn.pipeline import Pipeline

    from ..estimator import NeSCalClassifier

    is_pipeline = isinstance(estimator, Pipeline)
    final = estimator[-1] if is_pipeline else estimator
    if not isinstance(final, NeSCalClassifier):
        got = type(estimator).__name__
        if is_pipeline:
            got += f" ending in {type(final).__name__}"
        raise TypeError(
            "estimator must be a fitted NeSCalClassifier or a Pipeline ending in one "
            f"(or None, with arrays); got {got}."
        )
    check_is_fitted(final)
    if is_pipeline and len(estimator) > 1 and X is not None:
        X = estimator[:-1].transform(X)
    return final, X


def model_classes(estimator: Any) -> np.ndarray:
    """``classes_`` of the fitted network."""
    final, _ = _final_step(estimator, None)
    return final.classes_


def model_proba(estimator: Any, X: Any) -> np.ndarray:
    """``predict_proba`` of the fitted network on ``X`` (float64)."""
    final, X = _final_step(estimator, X)
    return final.predict_proba(X)


def model_logits(estimator: Any, X: Any) -> np.ndarray:
    """The logits (n_samples, n_classes); for two classes ``[0, z₁ - z₀]`` (same gaps)."""
    final, X = _final_step(estimator, X)
    logits = final.decision_function(X)
    if logits.ndim == 1:
        logits = np.column_stack([np.zeros_like(logits), logits])
    return logits


def model_embeddings(estimator: Any, X: Any) -> np.ndarray:
    """The network's embedding of ``X``: the input of its ``embedding_layer`` (float32).

    The same layer and the same forward pass as NeSCal's graph
    (:func:`~nescal_sklearn.graph.embed_rows` on ``module_``).
    """
    import torch

    from ..graph import embed_rows

    final, X = _final_step(estimator, X)
    rows = validate_data(final, X, dtype=np.float32, reset=False)
    if not rows.flags.writeable:
        rows = rows.copy()
    embeddings, _ = embed_rows(
        final.module_, torch.as_tensor(rows), embedding_layer=final.embedding_layer
    )
    return embeddings.cpu().numpy()


def training_epsilon(estimator: Any) -> tuple[float | None, str]:
    """The label-smoothing ``epsilon`` the estimator was trained with, and its loss's name.

    ``loss_`` is a :class:`~nescal_sklearn.losses.LabelSmoothingLoss`, or a
    :class:`~nescal_sklearn.losses.NeSCalLoss` whose base loss is one; None otherwise.
    """
    from ..losses import LabelSmoothingLoss, NeSCalLoss

    final, _ = _final_step(estimator, None)
    loss = final.loss_
    if isinstance(loss, NeSCalLoss):
        base = loss.base()
        if isinstance(base, LabelSmoothingLoss):
            return float(base.epsilon), f"{type(loss).__name__}(base_loss={base!r})"
        return None, f"{type(loss).__name__}(base_loss={loss.base_loss!r})"
    if isinstance(loss, LabelSmoothingLoss):
        return float(loss.epsilon), repr(loss)
    return None, repr(loss)
