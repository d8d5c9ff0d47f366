"""Quadratic scaling of a binary classifier's logit (CalArena's best binary map)."""

from __future__ import annotations

import numpy as np

from ._base import LogitOutputMixin, PostHocCalibrator
from ._maps import _LogitMap
from ._objective import minimize_from_identity, nll_and_logit_gradient

__all__ = ["CalibratedQuadraticScaling"]


class _QuadraticScalingMap(_LogitMap):
    """``z -> b + a z + c z**2`` on the binary logit ``z = logit_1 - logit_0``."""

    def fit(self, logits, y, sample_weight=None):
        if logits.shape[1] != 2:
            raise ValueError(
                "CalibratedQuadraticScaling calibrates binary classifiers (the logit of one "
                f"class against the other); got {logits.shape[1]} classes. Use "
                "CalibratedStructuredMatrixScaling or CalibratedTemperature for several "
                "classes."
            )
        z = logits[:, 1] - logits[:, 0]
        features = np.column_stack([np.ones_like(z), z, z * z])

        def objective(params):
            out = features @ params
            loss, grad = nll_and_logit_gradient(
                np.column_stack([np.zeros_like(out), out]), y, sample_weight
            )
            return loss, features.T @ grad[:, 1]

        identity = np.array([0.0, 1.0, 0.0])
        self.intercept_, self.coef_, self.quadratic_ = minimize_from_identity(
            objective, identity, what="Quadratic scaling"
        )
        return self

    def transform(self, logits):
        z = logits[:, 1] - logits[:, 0]
        out = self.intercept_ + self.coef_ * z + self.quadratic_ * z * z
        return np.column_stack([np.zeros_like(out), out])

    def n_parameters(self) -> int:
        return 3


class CalibratedQuadraticScaling(LogitOutputMixin, PostHocCalibrator):
    """Quadratic scaling: the binary logit ``z`` becomes ``b + a z + c z**2``, fitted by NLL.

    A logistic regression on ``(1, z, z**2)``, where ``z`` is the estimator's logit of
    ``classes_[1]`` against ``classes_[0]`` (unregularised, as probmetrics'
    ``BinaryLogisticCalibrator(type="quadratic")``). Platt scaling is the case ``c = 0``,
    temperature scaling ``b = c = 0``. CalArena (arXiv 2605.30188) ranks it first among
    post-hoc maps on binary tabular tasks. L-BFGS starts at the identity (``a = 1``,
    ``b = c = 0``) and never returns a worse point, so the NLL on the calibration rows
    never rises. The map is not monotone when ``c != 0``: far beyond the calibration
    rows' logits it can reverse the prediction, which the mixture rule for small
    calibration sets and a selection on held-out rows
    (:class:`CrossFitClassifier(calibration="auto") <CrossFitClassifier>`) guard against.
    Binary only; modes (held-out split, ``cv``, frozen) as in :class:`CalibratedTemperature`.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): the map has 3 parameters, so with fewer than 3
    calibration rows it is mixed with the model at weight ``1 / (n + 1)``; no probability
    is below 1e-15.

    Parameters
    ----------
    estimator : estimator instance, default=None
        The binary classifier to calibrate; it needs ``fit`` and ``decision_function`` or
        ``predict_proba``. ``None`` means ``LogisticRegression()``.
    validation_fraction : float, default=0.2
        Share of each class held out for calibration when ``cv=None``.
    cv : int, cross-validation generator or iterable, default=None
        ``None`` fits on a held-out split; otherwise the folds of a cross-fitting.
    random_state : int, RandomState instance or None, default=None
        Seeds the held-out split.
    n_jobs : int or None, default=None
        With ``cv`` only: the fold models' parallel fits, as in :class:`PostHocCalibrator`.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        Class labels.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; each ``.calibrator`` has
        ``intercept_`` (b), ``coef_`` (a) and ``quadratic_`` (c).
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.

    Raises
    ------
    ValueError
        In ``fit``, when ``y`` has more than two classes.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedQuadraticScaling
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = CalibratedQuadraticScaling(LogisticRegression(max_iter=5000), random_state=0)
    >>> clf.fit(X, y).predict_proba(X[:2]).shape
    (2, 2)
    """

    def _make_calibrator(self):
        return _QuadraticScalingMap()
