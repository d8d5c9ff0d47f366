"""Structured matrix scaling (Berta, Holzmüller, Jordan & Bach, 2026) of logits."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._base import LogitOutputMixin, PostHocCalibrator
from ._maps import _LogitMap, effective_rows
from ._objective import minimize_from_identity, nll_and_logit_gradient
from ._temperature import fit_temperature, mix_with_uniform, uniform_mixture_weight

__all__ = ["CalibratedStructuredMatrixScaling"]


def structured_penalty_strengths(
    n_samples: int,
    n_classes: int,
    *,
    lambda_intercept: float,
    lambda_diagonal: float,
    lambda_off_diagonal: float,
    rho: float,
    tau: float,
) -> tuple[float, float, float]:
    """Ridge strengths ``(lambda_b, lambda_d, lambda_o)`` of structured matrix scaling.

    ``lambda_b = lambda_intercept k**rho / n**tau``, ``lambda_d = lambda_diagonal k**rho /
    n**tau`` and ``lambda_o = lambda_off_diagonal (k (k - 1))**rho / n**tau`` for ``n``
    calibration rows and ``k`` classes.
    """
    scale = 1.0 / float(n_samples) ** tau
    per_class = float(n_classes) ** rho * scale
    per_pair = float(n_classes * (n_classes - 1)) ** rho * scale
    return lambda_intercept * per_class, lambda_diagonal * per_class, lambda_off_diagonal * per_pair


class _StructuredMatrixScalingMap(_LogitMap):
    """``z -> (I + D) z' + b`` on the ts-mix logits ``z'``, with a structured ridge penalty.

    ``z' = log((1 - w) softmax(z / T) + w / k)``: temperature scaling with the uniform
    mixture of weight ``w = 1 / (n + 1)``. The loss of ``(D, b)`` is the mean NLL plus
    ``lambda_b ||b||^2 + lambda_d sum_i D_ii^2 + lambda_o sum_{i != j} D_ij^2``, which
    vanishes at the identity (``D = 0``, ``b = 0``) the solver starts from.
    """

    def __init__(
        self,
        lambda_intercept: float = 1.0,
        lambda_diagonal: float = 1.0,
        lambda_off_diagonal: float = 1.0,
        rho: float = 1.0,
        tau: float = 1.0,
    ):
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.lambda_off_diagonal = lambda_off_diagonal
        self.rho = rho
        self.tau = tau

    def _scaled(self, logits: np.ndarray) -> np.ndarray:
        """The ts-mix logits ``z'`` (log-probabilities) of ``logits``."""
        return mix_with_uniform(logits / self.temperature_, self.mixture_weight_)

    def objective(self, scaled: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None):
        """Penalised NLL of ``params = [vec(I + D), b]`` and its gradient, on ``z'``."""
        n_classes = scaled.shape[1]
        lam_b, lam_d, lam_o = structured_penalty_strengths(
            effective_rows(scaled.shape[0], sample_weight),
            n_classes,
            lambda_intercept=self.lambda_intercept,
            lambda_diagonal=self.lambda_diagonal,
            lambda_off_diagonal=self.lambda_off_diagonal,
            rho=self.rho,
            tau=self.tau,
        )
        identity = np.eye(n_classes)
        # Ridge weight of every entry of D: lambda_d on the diagonal, lambda_o elsewhere.
        weights = np.where(identity == 1.0, lam_d, lam_o)
        n_coef = n_classes * n_classes

        def fun(params):
            coef = params[:n_coef].reshape(n_classes, n_classes)
            intercept = params[n_coef:]
            loss, grad = nll_and_logit_gradient(scaled @ coef.T + intercept, y, sample_weight)
            delta = coef - identity
            loss += float(np.sum(weights * delta**2) + lam_b * np.sum(intercept**2))
            grad_coef = grad.T @ scaled + 2.0 * weights * delta
            grad_intercept = grad.sum(axis=0) + 2.0 * lam_b * intercept
            return loss, np.concatenate([grad_coef.ravel(), grad_intercept])

        return fun

    def fit(self, logits, y, sample_weight=None):
        n_classes = logits.shape[1]
        self.temperature_ = fit_temperature(logits, y, sample_weight)
        self.mixture_weight_ = uniform_mixture_weight(effective_rows(len(y), sample_weight))
        scaled = self._scaled(logits)
        identity = np.concatenate([np.eye(n_classes).ravel(), np.zeros(n_classes)])
        params = minimize_from_identity(
            self.objective(scaled, y, sample_weight), identity, what="Structured matrix scaling"
        )
        self.coef_ = params[: n_classes**2].reshape(n_classes, n_classes)
        self.intercept_ = params[n_classes**2 :]
        return self

    def transform(self, logits):
        return self._scaled(logits) @ self.coef_.T + self.intercept_

    def n_parameters(self) -> int:
        """The temperature, and the entries of ``D`` and ``b`` that no penalty holds.

        A positive ``lambda_*`` with ``tau > 0`` gives a ridge penalty that grows as the
        calibration rows get fewer and keeps its group close to the ts-mix output, so
        that group does not count.
        """
        k = self.intercept_.size
        groups = [
            (self.lambda_intercept, k),
            (self.lambda_diagonal, k),
            (self.lambda_off_diagonal, k * (k - 1)),
        ]
        return 1 + sum(size for strength, size in groups if strength == 0 or self.tau == 0)


class CalibratedStructuredMatrixScaling(LogitOutputMixin, PostHocCalibrator):
    """Structured matrix scaling: ts-mix, then a ridge-regularised affine map of the logits.

    Structured matrix scaling (SMS; Berta, Holzmüller, Jordan & Bach, 2026) calibrates in
    two steps, both fitted on data the estimator was not fitted on:

    1. temperature scaling with a uniform mixture ("ts-mix"): a temperature ``T`` is
       fitted by NLL on the estimator's logits ``z`` (as in
       :class:`CalibratedTemperature`), and the probabilities are mixed with the uniform
       distribution at weight ``w = 1 / (n + 1)`` for ``n`` calibration rows,
       ``z' = log((1 - w) softmax(z / T) + w / k)``;
    2. an affine map of these logits, ``(I + D) z' + b`` with a full ``(k, k)`` matrix
       ``D`` and an intercept ``b``, fitted by the mean NLL plus separate ridge penalties
       on the intercept, the diagonal and the off-diagonal of ``D`` (see Notes).

    The penalties shrink the map towards the ts-mix output, which is what lets the
    ``k (k + 1)`` parameters be fitted on small calibration sets. L-BFGS starts at the
    identity (``D = 0``, ``b = 0``), where the penalty vanishes, and never returns a
    worse point, so the penalised NLL on the calibration data never exceeds that of the
    ts-mix output. The predicted class may change. ``z`` and the modes (held-out split,
    ``cv`` cross-fitting, :class:`sklearn.frozen.FrozenEstimator`) are those of
    :class:`CalibratedTemperature`.

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
    lambda_intercept : float, default=1.0
        Base strength of the ridge penalty on the intercept ``b``.
    lambda_diagonal : float, default=1.0
        Base strength of the ridge penalty on the diagonal of ``D``.
    lambda_off_diagonal : float, default=1.0
        Base strength of the ridge penalty on the off-diagonal entries of ``D``.
    rho : float, default=1.0
        Exponent of the number of classes in the penalty strengths (of ``k`` for the
        intercept and diagonal, of ``k (k - 1)`` for the off-diagonal).
    tau : float, default=1.0
        Exponent of the number of calibration rows ``n`` by which the penalty strengths
        are divided.

    Attributes
    ----------
    temperature_ : float
        The fitted temperature of step 1; with cross-fitting, the mean of
        ``temperatures_`` (prediction uses each fold's own temperature).
    temperatures_ : ndarray of shape (n_pairs,)
        One temperature per calibrated estimator (one unless ``cv`` is given).
    mixture_weight_ : float
        Weight ``1 / (n + 1)`` of the uniform distribution in step 1; with
        cross-fitting, the mean over the pairs (each uses its own).
    classes_ : ndarray of shape (n_classes,)
        Class labels: those of ``y``, or the frozen estimator's ``classes_``.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; each ``.calibrator`` has
        ``temperature_`` (float), ``mixture_weight_`` (float), ``coef_`` (``I + D``, of
        shape (n_classes, n_classes)) and ``intercept_`` (``b``, of shape (n_classes,)).
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    CalibratedTemperature : Step 1 alone (with its default ``guard="mixture"``).
    CalibratedVectorScaling : A per-class scale and bias on the logits, unpenalised.
    CalibratedMatrixScaling : A full matrix on the log-probabilities with the ODIR
        penalty (off-diagonal and intercept only), without the temperature step.

    Notes
    -----
    For ``n`` calibration rows and ``k`` classes, ``(D, b)`` minimise

    ``mean_m [-log softmax((I + D) z'_m + b)[y_m]] + lambda_b * sum_j b_j**2
    + lambda_d * sum_i D_ii**2 + lambda_o * sum_{i != j} D_ij**2``

    with ``lambda_b = lambda_intercept * k**rho / n**tau``,
    ``lambda_d = lambda_diagonal * k**rho / n**tau`` and
    ``lambda_o = lambda_off_diagonal * (k (k - 1))**rho / n**tau``. With
    ``sample_weight`` the mean NLL is weighted (weights normalised to sum to one) and
    ``n`` in the penalty strengths and in ``w = 1 / (n + 1)`` is Kish's effective number
    of rows ``(sum w)**2 / sum w**2``, so only the ratios of the weights matter:
    all-equal weights of any scale give the unweighted map, zero weights act as removed
    rows (see :meth:`fit`). Prediction applies the same transform, with
    ``T``, ``w``, ``D`` and ``b`` fixed, to new logits.

    The defaults (all ``lambda_*`` 1, ``rho = tau = 1``) are those of the authors'
    reference implementation (``SMSCalibrator`` of the ``probmetrics`` package with its
    ridge penalty and BFGS solver), which this class follows.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): classes absent from the calibration rows keep the model's
    probability; the temperature counts as 1 parameter, and
    a group of ``D`` and ``b`` counts only when its ``lambda_*`` is 0 (or ``tau`` is 0), as
    the penalty of the others grows as the rows get fewer (by default 1 parameter in
    all; ``1 + k (k + 1)`` with every ``lambda_*`` 0), so with fewer calibration rows ``n``
    the map is mixed with the model at weight ``1 / (n + 1)``; no probability is below 1e-15.

    The uniform mixture keeps every probability of the ts-mix output at least ``w / k``,
    so after step 1 an error on new data costs at most ``log(k (n + 1))`` nats, even on
    calibration data the estimator separates perfectly (where ``T`` goes to its lower
    bound and ``fit`` warns, as :class:`CalibratedTemperature` does). Step 2 may sharpen
    that output a little; its penalty keeps ``I + D`` close to the identity (on
    perfectly separated blobs the worst error costs 1.1 to 1.25 times that bound, where
    plain temperature scaling costs hundreds of nats).

    References
    ----------
    Berta, Holzmüller, Jordan & Bach, "Structured matrix scaling for multi-class
    calibration", AISTATS 2026.

    Berta, Holzmüller, Jordan & Bach, "Rethinking Early Stopping: Refine, Then
    Calibrate", 2025 (the uniform mixture of step 1).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedStructuredMatrixScaling
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedStructuredMatrixScaling(LogisticRegression(max_iter=1000), random_state=0)
    >>> clf.fit(X, y).calibrated_classifiers_[0].calibrator.coef_.shape
    (3, 3)
    >>> bool(clf.temperature_ > 0)
    True
    """

    _parameter_constraints: dict = {
        **PostHocCalibrator._parameter_constraints,
        "lambda_intercept": [Interval(Real, 0, None, closed="left")],
        "lambda_diagonal": [Interval(Real, 0, None, closed="left")],
        "lambda_off_diagonal": [Interval(Real, 0, None, closed="left")],
        "rho": [Interval(Real, 0, None, closed="left")],
        "tau": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        estimator=None,
        *,
        validation_fraction=0.2,
        cv=None,
        random_state=None,
        n_jobs=None,
        lambda_intercept=1.0,
        lambda_diagonal=1.0,
        lambda_off_diagonal=1.0,
        rho=1.0,
        tau=1.0,
    ):
        super().__init__(
            estimator,
            validation_fraction=validation_fraction,
            cv=cv,
            random_state=random_state,
            n_jobs=n_jobs,
        )
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.lambda_off_diagonal = lambda_off_diagonal
        self.rho = rho
        self.tau = tau

    def _make_calibrator(self):
        return _StructuredMatrixScalingMap(
            lambda_intercept=self.lambda_intercept,
            lambda_diagonal=self.lambda_diagonal,
            lambda_off_diagonal=self.lambda_off_diagonal,
            rho=self.rho,
            tau=self.tau,
        )

    def _summarize(self):
        self.temperatures_ = np.array(self._map_attributes("temperature_", 1.0))
        self.temperature_ = float(self.temperatures_.mean())
        self.mixture_weight_ = float(np.mean(self._map_attributes("mixture_weight_", 0.0)))
