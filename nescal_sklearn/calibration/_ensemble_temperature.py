"""Ensemble temperature scaling (Zhang, Kailkura & Han, 2020, "Mix-n-Match")."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import softmax

from ..metrics.logits import normalised_weights
from ._base import ArgmaxPreservingMixin, PostHocCalibrator
from ._maps import _CalibrationMap
from ._temperature import fit_temperature

__all__ = ["CalibratedEnsembleTemperature"]


class _EnsembleTemperatureMap(_CalibrationMap):
    """``w1 softmax(z / T) + w2 softmax(z) + w3 / k`` with ``w`` on the simplex."""

    def _components(self, logits: np.ndarray) -> np.ndarray:
        n_classes = logits.shape[1]
        return np.stack(
            [
                softmax(logits / self.temperature_, axis=1),
                softmax(logits, axis=1),
                np.full(logits.shape, 1.0 / n_classes),
            ]
        )

    def fit(self, logits, y, sample_weight=None):
        self.temperature_ = fit_temperature(logits, y, sample_weight)
        # Probability each component gives the true class: shape (n_samples, 3).
        true_proba = self._components(logits)[:, np.arange(y.size), y].T
        # Uniform 1/n without weights, w / sum(w) with: all-ones weights give the same.
        weights = normalised_weights(y.size, sample_weight)
        tiny = np.finfo(np.float64).tiny

        def nll(w):
            mixture = np.maximum(true_proba @ w, tiny)
            return -(weights @ np.log(mixture)), -(true_proba / mixture[:, None]).T @ weights

        start = np.array([1.0, 0.0, 0.0])  # plain temperature scaling
        result = minimize(
            nll,
            start,
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * 3,
            constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": np.ones_like}],
            options={"ftol": 1e-12, "maxiter": 500},
        )
        mix = np.clip(np.nan_to_num(result.x, nan=0.0), 0.0, None)
        if mix.sum() > 0:
            mix = mix / mix.sum()
        self.weights_ = mix if mix.sum() > 0 and nll(mix)[0] <= nll(start)[0] else start
        return self

    def predict_proba(self, logits):
        return np.tensordot(self.weights_, self._components(logits), axes=1)

    def n_parameters(self) -> int:
        return 3  # the temperature and two free weights on the simplex


class CalibratedEnsembleTemperature(ArgmaxPreservingMixin, PostHocCalibrator):
    """Ensemble temperature scaling: temperature-scaled, raw and uniform probabilities mixed.

    Calibrated probabilities are ``w1 * softmax(z / T) + w2 * softmax(z) + w3 / k``
    ("Mix-n-Match", Zhang, Kailkura & Han, 2020): first ``T`` is fitted by NLL exactly as
    in :class:`CalibratedTemperature`, then the weights ``w`` on the probability simplex
    by NLL (SLSQP from ``w = (1, 0, 0)``, plain temperature scaling, never returning a
    worse point). So the NLL on the calibration data is never above temperature scaling's,
    and every component ranks the classes as ``z`` does: the predicted class is the
    estimator's. Logits ``z`` and the modes (held-out split, ``cv`` cross-fitting,
    :class:`sklearn.frozen.FrozenEstimator`) are those of :class:`CalibratedTemperature`.
    With ``sample_weight`` (see :meth:`fit`) both ``T`` and ``w`` minimise the weighted
    mean NLL: integer weights act as repeated rows, zero weights as removed ones, and
    only the ratios of the weights matter.

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
    temperature_ : float
        The fitted temperature; with cross-fitting, the mean of ``temperatures_``.
    temperatures_ : ndarray of shape (n_pairs,)
        One temperature per calibrated estimator.
    weights_ : ndarray of shape (3,)
        Weights of the temperature-scaled, raw and uniform components; with
        cross-fitting, their mean over the folds (prediction uses each fold's own).
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; each ``.calibrator`` has
        ``temperature_`` and ``weights_``.
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    CalibratedTemperature : The first component alone.

    Notes
    -----
    ``T`` is fitted by :class:`CalibratedTemperature`'s search, with its warnings: when
    ``T`` is degenerate (at the lower bound because every calibration row is classified
    correctly, at the upper bound because the estimator does no better than uniform on
    the calibration rows) ``fit`` warns, and accepts the data as
    :class:`CalibratedTemperature` does. The mixture weights then decide how much the
    degenerate component counts.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): classes absent from the calibration rows keep the
    model's probability (``predict`` then follows ``predict_proba``), one class left
    calibrates nothing (``temperature_`` 1, ``weights_`` (1, 0, 0)); the map has 3
    parameters (``T`` and two free weights), so with fewer than 3 calibration rows it is
    mixed with the model at weight ``1 / (n + 1)``; no probability is below 1e-15.

    References
    ----------
    Zhang, Kailkhura & Han, "Mix-n-Match: Ensemble and Compositional Methods for
    Uncertainty Calibration in Deep Learning", ICML 2020.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedEnsembleTemperature
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedEnsembleTemperature(LogisticRegression(max_iter=1000), random_state=0)
    >>> float(clf.fit(X, y).weights_.sum())
    1.0
    """

    def _make_calibrator(self):
        return _EnsembleTemperatureMap()

    def _summarize(self):
        self.temperatures_ = np.array(self._map_attributes("temperature_", 1.0))
        self.temperature_ = float(self.temperatures_.mean())
        self.weights_ = np.mean(self._map_attributes("weights_", np.array([1.0, 0.0, 0.0])), axis=0)
