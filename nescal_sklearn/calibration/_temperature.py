"""Temperature scaling (Guo et al., 2017): one temperature for all classes."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import log_softmax
from sklearn.utils._param_validation import StrOptions

from ..metrics._logits import LOG_TEMPERATURE_BOUNDS, optimal_log_temperature
from ._base import ArgmaxPreservingMixin, LogitOutputMixin, PostHocCalibrator, _LogitMap

__all__ = ["CalibratedTemperature", "fit_temperature", "mix_with_uniform", "uniform_mixture_weight"]

#: A fitted log(T) this close to the upper bound counts as "at the bound" (T above 2.2e4).
BOUND_TOLERANCE = 1e-3


def _upper_bound_reason(y: np.ndarray) -> str:
    """Why the NLL of a calibration set can keep falling as the temperature grows."""
    if y.size == 1:
        return "There is a single calibration row, and one row cannot calibrate a temperature"
    if np.unique(y).size == 1:
        return (
            "Every calibration row has the same class, and a temperature fitted on one class "
            "says nothing about the others"
        )
    return "On the calibration rows the estimator's logits do no better than a uniform prediction"


def fit_temperature(
    logits: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None
) -> float:
    """Temperature minimising the NLL of ``softmax(logits / T)``, by a bounded search on log T.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
        Uncalibrated logits.
    y : ndarray of shape (n_samples,)
        Label-encoded targets, integers in ``[0, n_classes)``.
    sample_weight : ndarray of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    float
        The fitted temperature.

    Raises
    ------
    RuntimeError
        If :func:`scipy.optimize.minimize_scalar` reports a failure.

    Warns
    -----
    UserWarning
        When the temperature is degenerate, at either bound of the search: near the
        lower bound when every calibration row is already classified correctly (the NLL
        keeps falling as ``T`` goes to 0), at the upper bound when the NLL keeps falling
        as ``T`` grows (predictions become uniform), as with one calibration row, a
        single-class calibration set or an estimator no better than uniform on it.
    """

    if len(y) and np.all(np.argmax(logits, axis=1) == y):
        warnings.warn(
            "Every calibration row is already classified correctly, so the NLL keeps "
            "falling as the temperature goes to 0 and the fitted temperature is "
            "degenerate (near the lower bound): predictions become almost one-hot, so "
            "a single error on new data costs a large NLL (CalibratedTemperature's "
            "default guard='mixture' bounds that cost at log(n_classes * (n + 1)) for n "
            "calibration rows). Use more calibration rows (validation_fraction, cv) or "
            "keep the uncalibrated model.",
            UserWarning,
            stacklevel=3,
        )
    result = optimal_log_temperature(logits, y, sample_weight)
    if not result.success or not np.isfinite(result.nll):
        raise RuntimeError(
            "Temperature scaling failed to find a temperature: "
            f"scipy.optimize.minimize_scalar reports {result.message!r}."
        )
    if result.log_temperature >= LOG_TEMPERATURE_BOUNDS[1] - BOUND_TOLERANCE:
        n_classes = logits.shape[1]
        warnings.warn(
            "The fitted temperature is degenerate (at the upper bound of the search, "
            f"T = {result.temperature:.3g}): the NLL keeps falling as the temperature grows, "
            "so the temperature-scaled predictions are almost uniform "
            f"(1/{n_classes} for every class). {_upper_bound_reason(y)}. Calibrate on more "
            "rows with every class represented (validation_fraction, cv, or more "
            "calibration data for a FrozenEstimator), or check that the estimator suits "
            "the calibration data.",
            UserWarning,
            stacklevel=3,
        )
    return result.temperature


def uniform_mixture_weight(n_samples: float) -> float:
    """Weight ``1 / (n + 1)`` of the uniform distribution in the ``"mixture"`` guard.

    It is the Laplace-rule floor on an error rate estimated from ``n`` rows: ``n``
    calibration rows cannot tell an error rate below about ``1 / (n + 1)`` from zero,
    so no calibrated probability should claim more certainty than that.
    """
    return 1.0 / (n_samples + 1.0)


def mix_with_uniform(logits: np.ndarray, weight: float) -> np.ndarray:
    """Logits of ``(1 - weight) * softmax(logits) + weight / k``, computed in log space.

    The result is a log-probability vector (its softmax is the mixture itself); every
    class keeps a probability of at least ``weight / k``, and the order of the classes
    in each row is unchanged.
    """
    if weight == 0.0:
        return logits
    n_classes = logits.shape[1]
    return np.logaddexp(np.log1p(-weight) + log_softmax(logits, axis=1), np.log(weight / n_classes))


class _TemperatureMap(_LogitMap):
    """``z -> z / T``, then (``guard="mixture"``) mixed with the uniform distribution."""

    def __init__(self, guard: str | None = "mixture") -> None:
        self.guard = guard

    def fit(self, logits, y, sample_weight=None):
        self.temperature_ = fit_temperature(logits, y, sample_weight)
        # n counts the calibration rows; weights count as repetitions (sum of weights).
        n = len(y) if sample_weight is None else float(np.sum(sample_weight))
        self.mixture_weight_ = uniform_mixture_weight(n) if self.guard == "mixture" else 0.0
        return self

    def transform(self, logits):
        return mix_with_uniform(logits / self.temperature_, self.mixture_weight_)


class CalibratedTemperature(ArgmaxPreservingMixin, LogitOutputMixin, PostHocCalibrator):
    """Temperature scaling: calibrate a classifier by dividing its logits by one temperature.

    The temperature ``T`` minimises the negative log-likelihood of ``softmax(z / T)`` on
    data the estimator was not fitted on, where ``z`` are the estimator's logits: its
    ``decision_function`` when that gives one score per class (for two classes, the 1-D
    score is taken as the logit of ``classes_[1]``, i.e. ``z = [0, d]``), otherwise the
    logarithm of its ``predict_proba`` clipped at 1e-12. The search is a bounded 1-D
    minimisation over ``log T`` in [-10, 10]. Dividing by ``T > 0`` never changes the
    predicted class.

    Three modes decide which data fit the estimator and which fit ``T``:

    * ``cv=None`` (default): a stratified held-out split inside ``fit`` keeps
      ``validation_fraction`` of every class for ``T``; a clone of the estimator is fitted
      on the rest.
    * ``cv`` given: cross-fitting as in scikit-learn's
      ``CalibratedClassifierCV(ensemble=True)``; one (clone, ``T``) pair per fold and
      ``predict_proba`` averages the pairs' calibrated probabilities.
    * estimator wrapped in :class:`sklearn.frozen.FrozenEstimator`: it is not refitted
      and all of ``X, y`` fit ``T``; classes absent from ``y`` keep their column.

    Parameters
    ----------
    estimator : estimator instance, default=None
        The classifier to calibrate; it needs ``fit`` and ``decision_function`` or
        ``predict_proba``. ``None`` means ``LogisticRegression()``. Wrap an already
        fitted classifier in :class:`sklearn.frozen.FrozenEstimator` to calibrate it
        without refitting.
    validation_fraction : float, default=0.2
        Share of each class held out for calibration when ``cv=None`` (rounded, with at
        least one sample of every class on each side). Ignored with ``cv`` or a frozen
        estimator.
    cv : int, cross-validation generator or iterable, default=None
        ``None`` fits on a held-out split; otherwise the folds of a cross-fitting, as
        accepted by :func:`sklearn.model_selection.check_cv` (an int means
        ``StratifiedKFold``). Must be ``None`` with a frozen estimator.
    random_state : int, RandomState instance or None, default=None
        Seeds the held-out split. Ignored with ``cv`` or a frozen estimator.
    guard : {"mixture"} or None, default="mixture"
        ``"mixture"``: the temperature-scaled probabilities are mixed with the uniform
        distribution at weight ``1 / (n + 1)`` for ``n`` calibration rows (the sum of
        ``sample_weight`` when given), ``(1 - w) * softmax(z / T) + w / k`` (the "ts-mix" of Berta et al., 2025).
        ``n`` rows cannot tell an error rate below about ``1 / (n + 1)`` from zero, so
        no probability falls below ``w / k`` and one error on new data costs at most
        ``log(k (n + 1))`` nats, even when the calibration rows are perfectly
        separated and ``T`` goes to 0. The predicted class never changes. ``None``:
        plain temperature scaling, ``softmax(z / T)``.

    Attributes
    ----------
    temperature_ : float
        The fitted temperature; with cross-fitting, the mean of ``temperatures_``
        (prediction uses each fold's own temperature).
    temperatures_ : ndarray of shape (n_pairs,)
        One temperature per calibrated estimator (one unless ``cv`` is given).
    mixture_weight_ : float
        Weight of the uniform distribution in the output (``1 / (n + 1)`` with
        ``guard="mixture"``, 0 with ``guard=None``); with cross-fitting, the mean over
        the pairs (each uses its own).
    classes_ : ndarray of shape (n_classes,)
        Class labels: those of ``y``, or the frozen estimator's ``classes_``.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; ``.estimator`` and
        ``.calibrator.temperature_`` of each are public.
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    sklearn.calibration.CalibratedClassifierCV : ``method="temperature"`` fits the same
        temperature (parameterised by its inverse).

    Notes
    -----
    The guard matters on small or separable calibration sets. On the dev suite's wdbc
    (114 validation rows, all classified correctly on one seed) plain temperature
    scaling drove ``T`` to its lower bound and multiplied the test NLL by about six;
    with the guard the same model's calibrated test NLL is bounded as above. The
    guard's own cost elsewhere is at most ``-log(1 - w)`` nats per row.

    The temperature is degenerate when the NLL has no interior minimum on the
    calibration data, and ``fit`` then warns (``UserWarning``) with the reason:

    * every calibration row already classified correctly: ``T`` goes to the lower bound
      and predictions become almost one-hot;
    * the estimator no better than a uniform prediction on the calibration rows, as with
      a single calibration row, or rows of a single class, whose class it scores below
      average: ``T`` goes to the upper bound (about 2.2e4) and predictions become almost
      uniform.

    A calibration set of one row or of one class is accepted, not refused: a temperature
    fitted on one class is biased towards that class's confidence but never changes the
    predicted class, so the model does not collapse (as maps with per-class parameters
    do, which warn then), and the warnings above fire on the degenerate result itself,
    whatever its cause. The held-out split calibrates on rows of every class, so such a
    set comes from a frozen estimator's calibration data or a custom ``cv``.

    References
    ----------
    Guo, Pleiss, Sun & Weinberger, "On Calibration of Modern Neural Networks", ICML 2017.

    Berta, Holzmüller, Jordan & Bach, "Rethinking Early Stopping: Refine, Then
    Calibrate", 2025 (the uniform mixture of ``guard="mixture"``).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import CalibratedTemperature
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CalibratedTemperature(LogisticRegression(max_iter=1000), random_state=0)
    >>> clf.fit(X, y).predict_proba(X[:2]).shape
    (2, 3)
    >>> bool(clf.temperature_ > 0)
    True
    """

    # One shared temperature: a single-class calibration set does not collapse it (its
    # degenerate cases warn in fit_temperature).
    _collapses_on_one_class = False

    _parameter_constraints: dict = {
        **PostHocCalibrator._parameter_constraints,
        "guard": [StrOptions({"mixture"}), None],
    }

    def __init__(
        self,
        estimator=None,
        *,
        validation_fraction=0.2,
        cv=None,
        random_state=None,
        guard="mixture",
    ):
        super().__init__(
            estimator, validation_fraction=validation_fraction, cv=cv, random_state=random_state
        )
        self.guard = guard

    def _make_calibrator(self):
        return _TemperatureMap(self.guard)

    def _summarize(self):
        pairs = self.calibrated_classifiers_
        self.temperatures_ = np.array([pair.calibrator.temperature_ for pair in pairs])
        self.temperature_ = float(self.temperatures_.mean())
        self.mixture_weight_ = float(np.mean([pair.calibrator.mixture_weight_ for pair in pairs]))
