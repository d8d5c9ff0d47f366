"""Vector scaling and matrix (Dirichlet, ODIR-regularised) scaling of logits."""

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.special import log_softmax
from sklearn.utils._param_validation import Interval

from ._base import LogitOutputMixin, PostHocCalibrator
from ._maps import _LogitMap
from ._objective import minimize_from_identity, nll_and_logit_gradient

__all__ = ["CalibratedVectorScaling", "CalibratedMatrixScaling"]


class _VectorScalingMap(_LogitMap):
    """``z -> scale * z + bias``, one scale and one bias per class."""

    def fit(self, logits, y, sample_weight=None):
        n_classes = logits.shape[1]

        def objective(params):
            scale, bias = params[:n_classes], params[n_classes:]
            loss, grad = nll_and_logit_gradient(logits * scale + bias, y, sample_weight)
            return loss, np.concatenate([(grad * logits).sum(axis=0), grad.sum(axis=0)])

        identity = np.concatenate([np.ones(n_classes), np.zeros(n_classes)])
        params = minimize_from_identity(objective, identity, what="Vector scaling")
        self.scale_, self.bias_ = params[:n_classes], params[n_classes:]
        return self

    def transform(self, logits):
        return logits * self.scale_ + self.bias_

    def n_parameters(self) -> int:
        return 2 * self.scale_.size


class _MatrixScalingMap(_LogitMap):
    """``z -> W log_softmax(z) + b`` with the ODIR penalty of Kull et al. (2019).

    The loss is ``NLL + reg_lambda / (k (k - 1)) * sum_{i != j} W_ij^2
    + reg_mu / k * sum_j b_j^2``: off-diagonal and intercept regularisation, which
    vanishes at the identity map (``W = I``, ``b = 0``) the solver starts from.
    """

    def __init__(self, reg_lambda: float, reg_mu: float):
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu

    def fit(self, logits, y, sample_weight=None):
        log_proba = log_softmax(logits, axis=1)
        n_classes = logits.shape[1]
        off_diagonal = ~np.eye(n_classes, dtype=bool)
        lam = self.reg_lambda / (n_classes * (n_classes - 1))
        mu = self.reg_mu / n_classes

        def objective(params):
            coef = params[: n_classes**2].reshape(n_classes, n_classes)
            intercept = params[n_classes**2 :]
            loss, grad = nll_and_logit_gradient(log_proba @ coef.T + intercept, y, sample_weight)
            off = coef * off_diagonal
            loss += lam * np.sum(off**2) + mu * np.sum(intercept**2)
            grad_coef = grad.T @ log_proba + 2.0 * lam * off
            grad_intercept = grad.sum(axis=0) + 2.0 * mu * intercept
            return loss, np.concatenate([grad_coef.ravel(), grad_intercept])

        identity = np.concatenate([np.eye(n_classes).ravel(), np.zeros(n_classes)])
        params = minimize_from_identity(objective, identity, what="Matrix scaling")
        self.coef_ = params[: n_classes**2].reshape(n_classes, n_classes)
        self.intercept_ = params[n_classes**2 :]
        return self

    def transform(self, logits):
        return log_softmax(logits, axis=1) @ self.coef_.T + self.intercept_

    def n_parameters(self) -> int:
        # ODIR's penalties do not grow as the rows get fewer: every parameter counts.
        return self.coef_.size + self.intercept_.size


class CalibratedVectorScaling(LogitOutputMixin, PostHocCalibrator):
    """Vector scaling: a per-class scale and bias on the logits, fitted by NLL.

    Calibrated logits are ``scale * z + bias`` (element-wise, one scale and one bias per
    class; Guo et al., 2017), fitted with L-BFGS on held-out data from the identity
    (``scale = 1``, ``bias = 0``). The solver never returns a point worse than the
    identity, so the NLL on the calibration data never rises. Unlike temperature scaling,
    vector scaling can change the predicted class. ``z`` and the modes (held-out split,
    ``cv`` cross-fitting, :class:`sklearn.frozen.FrozenEstimator`) are those of
    :class:`CalibratedTemperature`. With ``sample_weight`` (see :meth:`fit`) the NLL is
    the weighted mean over the calibration rows: integer weights act as repeated rows,
    zero weights as removed ones, and only the ratios of the weights matter.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): classes absent from the calibration rows keep the model's
    probability; the map has ``2 k`` parameters for ``k`` classes (a scale and a bias per
    class), so with fewer calibration rows ``n`` it is mixed with the model at weight
    ``1 / (n + 1)``; no probability is below 1e-15.

    Parameters
    ----------
    estimator : estimator instance, default=None
        The classifier to calibrate; it needs ``fit`` and ``decision_function`` or
        ``predict_proba``. ``None`` means ``LogisticRegression()``. Wrap an already
        fitted classifier in :class:`sklearn.frozen.FrozenEstimator` to calibrate it
        without refitting.
    validation_fraction : float, default=0.2
        Share of each class held out for calibration when ``cv=None``. Ignored with
        ``cv`` or a frozen estimator.
    cv : int, cross-validation generator or iterable, default=None
        ``None`` fits on a held-out split; otherwise the folds of a cross-fitting (an int
        means ``StratifiedKFold``). Must be ``None`` with a frozen estimator.
    random_state : int, RandomState instance or None, default=None
        Seeds the held-out split, or with ``cv`` the inner split that holds
        ``oof_proba_`` out of each fold's map. Ignored with a frozen estimator.
    n_jobs : int or None, default=None
        With ``cv`` only: the fold models' parallel fits, as in :class:`PostHocCalibrator`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; each ``.calibrator`` has
        ``scale_`` and ``bias_`` of shape (n_classes,).
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    CalibratedTemperature : One shared scale, no bias; never changes the predicted class.
    CalibratedMatrixScaling : A full matrix on the log-probabilities.

    References
    ----------
    Guo, Pleiss, Sun & Weinberger, "On Calibration of Modern Neural Networks", ICML 2017.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedVectorScaling
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedVectorScaling(LogisticRegression(max_iter=1000), random_state=0)
    >>> clf.fit(X, y).calibrated_classifiers_[0].calibrator.scale_.shape
    (3,)
    """

    def _make_calibrator(self):
        return _VectorScalingMap()


class CalibratedMatrixScaling(LogitOutputMixin, PostHocCalibrator):
    """Matrix scaling of log-probabilities with ODIR regularisation (Dirichlet calibration).

    Calibrated logits are ``W @ log p + b``, where ``log p`` are the estimator's
    log-probabilities (``log_softmax`` of its logits), ``W`` a full ``(k, k)`` matrix and
    ``b`` an intercept: Dirichlet calibration (Kull et al., 2019). The loss is the mean
    NLL plus the ODIR penalty
    ``reg_lambda / (k (k - 1)) * sum_{i != j} W_ij**2 + reg_mu / k * sum_j b_j**2``,
    which pulls ``W`` towards a diagonal matrix and ``b`` towards zero. L-BFGS starts at
    the identity (``W = I``, ``b = 0``), where the penalty vanishes and the model is left
    unchanged, and never returns a worse point, so the NLL on the calibration data never
    rises. The predicted class may change. Modes as in :class:`CalibratedTemperature`.
    With ``sample_weight`` (see :meth:`fit`) the NLL is the weighted mean over the
    calibration rows (the penalty does not depend on their number): integer weights act
    as repeated rows, zero weights as removed ones, and only the ratios of the weights
    matter.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): classes absent from the calibration rows keep the model's
    probability; the map has ``k (k + 1)`` parameters for ``k`` classes (``W`` and ``b``;
    the ODIR penalty, whose strength does not grow as the rows get fewer, does not
    change the count), so with fewer calibration rows ``n`` it is mixed with the model at
    weight ``1 / (n + 1)``; no probability is below 1e-15.

    Parameters
    ----------
    estimator : estimator instance, default=None
        The classifier to calibrate; it needs ``fit`` and ``decision_function`` or
        ``predict_proba``. ``None`` means ``LogisticRegression()``. Wrap an already
        fitted classifier in :class:`sklearn.frozen.FrozenEstimator` to calibrate it
        without refitting.
    validation_fraction : float, default=0.2
        Share of each class held out for calibration when ``cv=None``. Ignored with
        ``cv`` or a frozen estimator.
    cv : int, cross-validation generator or iterable, default=None
        ``None`` fits on a held-out split; otherwise the folds of a cross-fitting (an int
        means ``StratifiedKFold``). Must be ``None`` with a frozen estimator.
    random_state : int, RandomState instance or None, default=None
        Seeds the held-out split, or with ``cv`` the inner split that holds
        ``oof_proba_`` out of each fold's map. Ignored with a frozen estimator.
    n_jobs : int or None, default=None
        With ``cv`` only: the fold models' parallel fits, as in :class:`PostHocCalibrator`.
    reg_lambda : float, default=1e-3
        Weight of the off-diagonal penalty on ``W``.
    reg_mu : float, default=1e-3
        Weight of the intercept penalty on ``b``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; each ``.calibrator`` has
        ``coef_`` of shape (n_classes, n_classes) and ``intercept_`` of shape
        (n_classes,).
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    CalibratedVectorScaling : Diagonal scaling of the logits.

    References
    ----------
    Kull, Perello-Nieto, Kängsepp, Silva Filho, Song & Flach, "Beyond temperature
    scaling: Obtaining well-calibrated multiclass probabilities with Dirichlet
    calibration", NeurIPS 2019.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedMatrixScaling
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedMatrixScaling(LogisticRegression(max_iter=1000), reg_lambda=1e-2)
    >>> clf.fit(X, y).calibrated_classifiers_[0].calibrator.coef_.shape
    (3, 3)
    """

    _parameter_constraints: dict = {
        **PostHocCalibrator._parameter_constraints,
        "reg_lambda": [Interval(Real, 0, None, closed="left")],
        "reg_mu": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        estimator=None,
        *,
        validation_fraction=0.2,
        cv=None,
        random_state=None,
        n_jobs=None,
        reg_lambda=1e-3,
        reg_mu=1e-3,
    ):
        super().__init__(
            estimator,
            validation_fraction=validation_fraction,
            cv=cv,
            random_state=random_state,
            n_jobs=n_jobs,
        )
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu

    def _make_calibrator(self):
        return _MatrixScalingMap(reg_lambda=self.reg_lambda, reg_mu=self.reg_mu)
