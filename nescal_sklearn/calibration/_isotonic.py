"""One-vs-rest isotonic calibration, wrapping scikit-learn's ``IsotonicRegression``."""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from ._base import PostHocCalibrator
from ._one_vs_rest import _OneVsRestMap

__all__ = ["CalibratedIsotonic"]


class _IsotonicMap(_OneVsRestMap):
    def _make_regressor(self):
        return IsotonicRegression(out_of_bounds="clip")

    def _n_levels(self, regressor) -> int:
        # The distinct levels of the fitted step function.
        return int(np.unique(regressor.y_thresholds_).size)


class CalibratedIsotonic(PostHocCalibrator):
    """One-vs-rest isotonic calibration, rows renormalised.

    For each class, :class:`sklearn.isotonic.IsotonicRegression` maps the estimator's
    predicted probability of that class (``softmax`` of its logits) to the observed
    frequency of the class on held-out data (Zadrozny & Elkan, 2002); the calibrated
    probabilities of a row are then divided by their sum (a row where every class got 0
    becomes uniform). With two classes one regression calibrates ``P(classes_[1])`` and
    ``P(classes_[0])`` is its complement. On its own calibration data this reproduces
    scikit-learn's ``CalibratedClassifierCV(method="isotonic")``; between calibration
    points the regression interpolates in probability space, where scikit-learn's uses
    the raw ``decision_function`` when there is one.

    Isotonic regression minimises squared error, not NLL, and gives probabilities of 0
    where a class was not observed (raised to 1e-15, so an error costs 34.5 nats); it
    may also change the predicted class.
    Modes (held-out split, ``cv`` cross-fitting, :class:`sklearn.frozen.FrozenEstimator`)
    as in :class:`CalibratedTemperature`. With ``sample_weight`` (see :meth:`fit`) each
    regression is weighted and rows of zero weight are left out: integer weights act as
    repeated rows, and only the ratios of the weights matter.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): classes absent from the calibration rows keep the model's
    probability; the map's parameters are the levels of
    its fitted step functions (summed over the classes), so when there are more than
    calibration rows ``n`` it is mixed with the model at weight ``1 / (n + 1)``; no probability is below 1e-15.

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
        The (fitted estimator, calibration map) pairs; each ``.calibrator.regressors_``
        lists the fitted ``IsotonicRegression`` objects (one per class, one for two
        classes).
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    sklearn.calibration.CalibratedClassifierCV : ``method="isotonic"``.
    CalibratedHistogramBinning : The piecewise-constant, fixed-bins counterpart.

    References
    ----------
    Zadrozny & Elkan, "Transforming classifier scores into accurate multiclass
    probability estimates", KDD 2002.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedIsotonic
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedIsotonic(LogisticRegression(max_iter=1000), random_state=0)
    >>> round(float(clf.fit(X, y).predict_proba(X[:1]).sum()), 6)
    1.0
    """

    def _make_calibrator(self):
        return _IsotonicMap()
