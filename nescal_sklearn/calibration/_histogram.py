"""One-vs-rest histogram binning with equal-mass bins (Zadrozny & Elkan, 2001)."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval

from ._base import PostHocCalibrator
from ._one_vs_rest import _OneVsRestMap

__all__ = ["CalibratedHistogramBinning"]


class _EqualMassHistogram:
    """Piecewise-constant regressor: equal-(weight-)mass bins, each predicting its mean target.

    Bins are runs of distinct scores: a distinct score goes to bin
    ``floor(n_bins * (mass below it + half its own mass) / total mass)``, so tied scores
    never straddle two bins and integer weights act exactly like repeated samples. Bins
    left empty by ties are merged away, so every bin holds data. Edges are midpoints
    between the last score of a bin and the first of the next.
    """

    def __init__(self, n_bins: int):
        self.n_bins = n_bins

    def fit(self, score, target, sample_weight=None):
        weight = np.ones_like(score) if sample_weight is None else sample_weight
        order = np.argsort(score, kind="stable")
        score, target, weight = score[order], target[order], weight[order]
        values, first = np.unique(score, return_index=True)
        value_weight = np.add.reduceat(weight, first)
        value_target = np.add.reduceat(weight * target, first)
        mass_mid = np.cumsum(value_weight) - value_weight / 2.0
        bin_of_value = np.minimum(
            (self.n_bins * mass_mid / value_weight.sum()).astype(np.intp), self.n_bins - 1
        )
        starts = np.flatnonzero(np.diff(bin_of_value)) + 1
        self.bin_edges_ = (values[starts - 1] + values[starts]) / 2.0
        bin_index = np.searchsorted(self.bin_edges_, values, side="right")
        self.bin_values_ = np.bincount(bin_index, weights=value_target) / np.bincount(
            bin_index, weights=value_weight
        )
        return self

    def predict(self, score):
        return self.bin_values_[np.searchsorted(self.bin_edges_, score, side="right")]


class _HistogramMap(_OneVsRestMap):
    def __init__(self, n_bins: int):
        self.n_bins = n_bins

    def _make_regressor(self):
        return _EqualMassHistogram(self.n_bins)

    def _n_levels(self, regressor) -> int:
        # The bins asked for, not those that ties leave: rounding that splits a tie must
        # not decide whether the map counts as underdetermined.
        return self.n_bins


class CalibratedHistogramBinning(PostHocCalibrator):
    """One-vs-rest histogram binning with equal-mass bins, rows renormalised.

    For each class, the estimator's predicted probability of that class (``softmax`` of
    its logits) is cut into ``n_bins`` bins holding equal shares of the (weighted)
    held-out samples, and every prediction falling into a bin is replaced by the observed
    frequency of the class in that bin (Zadrozny & Elkan, 2001); calibrated rows are then
    divided by their sum (a row where every class got 0 becomes uniform). With two classes
    one histogram calibrates ``P(classes_[1])`` and ``P(classes_[0])`` is its complement.
    Tied scores always share a bin, so heavy ties give fewer bins.

    Histogram binning does not minimise NLL, gives probabilities of 0 or 1 for bins where
    the class is never or always observed (raised to 1e-15 or lowered to 1 minus it, so
    an error costs 34.5 nats), and may change the predicted class. Modes (held-out split, ``cv``
    cross-fitting, :class:`sklearn.frozen.FrozenEstimator`) as in
    :class:`CalibratedTemperature`. With ``sample_weight`` (see :meth:`fit`) the bins
    hold equal shares of the weight, each predicts the weighted frequency of its class,
    and rows of zero weight are left out: integer weights act as repeated rows, and
    only the ratios of the weights matter.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): classes absent from the calibration rows keep the model's
    probability; the map has ``n_bins`` parameters per
    calibrated class (``k n_bins``; ``n_bins`` for two classes), so with fewer calibration
    rows ``n`` it is mixed with the model at weight ``1 / (n + 1)``; no probability is below 1e-15.

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
    n_bins : int, default=15
        Number of equal-mass bins per class (fewer when scores are tied).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; each ``.calibrator.regressors_``
        lists one histogram per class (one for two classes) with ``bin_edges_`` and
        ``bin_values_``.
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    CalibratedIsotonic : Bins chosen by isotonic regression instead of fixed mass.

    References
    ----------
    Zadrozny & Elkan, "Obtaining calibrated probability estimates from decision trees and
    naive Bayesian classifiers", ICML 2001.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedHistogramBinning
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedHistogramBinning(LogisticRegression(max_iter=1000), n_bins=5)
    >>> clf.fit(X, y).predict_proba(X[:1]).shape
    (1, 3)
    """

    _parameter_constraints: dict = {
        **PostHocCalibrator._parameter_constraints,
        "n_bins": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        estimator=None,
        *,
        validation_fraction=0.2,
        cv=None,
        random_state=None,
        n_jobs=None,
        n_bins=15,
    ):
        super().__init__(
            estimator,
            validation_fraction=validation_fraction,
            cv=cv,
            random_state=random_state,
            n_jobs=n_jobs,
        )
        self.n_bins = n_bins

    def _make_calibrator(self):
        return _HistogramMap(n_bins=self.n_bins)
