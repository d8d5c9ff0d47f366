"""Temperature scaling (Guo et al., 2017): one temperature for all classes."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from scipy.special import log_softmax
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions

from ..metrics.logits import LOG_TEMPERATURE_BOUNDS, optimal_log_temperature
from ._base import ArgmaxPreservingMixin, LogitOutputMixin, PostHocCalibrator
from ._maps import _LogitMap, effective_rows

__all__ = [
    "CalibratedTemperature",
    "bootstrap_resample",
    "fit_temperature",
    "mix_with_uniform",
    "shrunk_log_temperature",
    "uniform_mixture_weight",
]

#: Bootstrap resamples behind ``guard="shrinkage"``.
N_BOOTSTRAP = 100

#: A fitted log(T) this close to the upper bound counts as "at the bound" (T above 2.2e4).
BOUND_TOLERANCE = 1e-3

#: Integer sample weights up to this total are bootstrapped draw by draw, exactly as the
#: repeated rows would be; larger totals and other weights draw multinomial counts.
MAX_EXPLICIT_DRAWS = 10**6


def _weighted_rows(y: np.ndarray, sample_weight: np.ndarray | None) -> np.ndarray:
    """Mask (or full slice) of the rows that count: those of positive weight."""
    return np.ones(y.shape, dtype=bool) if sample_weight is None else sample_weight > 0


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
        Non-negative sample weights of the weighted NLL; rows of zero weight count as
        absent (also for the warnings below).

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

    rows = _weighted_rows(y, sample_weight)
    if np.any(rows) and np.all(np.argmax(logits[rows], axis=1) == y[rows]):
        warnings.warn(
            "Every calibration row is already classified correctly, so the NLL keeps "
            "falling as the temperature goes to 0 and the fitted temperature is "
            "degenerate (near the lower bound): predictions become almost one-hot, so "
            "a single error on new data costs a large NLL (CalibratedTemperature's "
            "default guard='shrinkage' returns such a temperature to 1, and "
            "guard='mixture' bounds that cost at log(n_classes * (n + 1)) for n "
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
            f"(1/{n_classes} for every class). {_upper_bound_reason(y[rows])}. Calibrate on more "
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


def bootstrap_resample(
    logits: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One bootstrap resample of the calibration rows: ``(logits, y, counts)``.

    With weights, the resample draws as many rows as the calibration rows count
    (Kish's effective number ``n_eff = (sum w)**2 / sum w**2``, rounded, at least 1),
    each row with probability proportional to its weight: the weights rescaled to sum
    to ``n_eff`` say how often each row is drawn on average. Only the ratios of the
    weights matter.

    * No weights: ``n`` rows drawn uniformly (``rng.integers(0, n, size=n)``); ``counts``
      is None.
    * Weights that, rescaled to sum to ``n_eff``, are integers (all-equal weights of any
      scale become ones, ones and zeros stay so) summing to at most
      :data:`MAX_EXPLICIT_DRAWS`: the draws are those of the unweighted resample of the
      rows repeated that many times, mapped back to the rows they repeat. All-equal
      weights give the unweighted resample, zero weights the resample without those
      rows. ``counts`` is None.
    * Other weights: multinomial counts of the distinct rows (``counts``), with the
      same distribution.
    """
    n = len(y)
    if sample_weight is None:
        rows = rng.integers(0, n, size=n)
        return logits[rows], y[rows], None
    total = float(np.sum(sample_weight))
    n_effective = effective_rows(n, sample_weight)
    repeats = sample_weight * (n_effective / total)
    rounded = np.round(repeats)
    size = int(rounded.sum())
    if 1 <= size <= MAX_EXPLICIT_DRAWS and np.allclose(repeats, rounded, rtol=0.0, atol=1e-9):
        draws = rng.integers(0, size, size=size)
        rows = np.searchsorted(np.cumsum(rounded), draws, side="right")
        return logits[rows], y[rows], None
    counts = rng.multinomial(max(1, round(n_effective)), sample_weight / total)
    drawn = counts > 0
    return logits[drawn], y[drawn], counts[drawn].astype(np.float64)


def shrunk_log_temperature(
    logits: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
    log_temperature: float,
    rng: np.random.Generator,
    n_bootstrap: int = N_BOOTSTRAP,
) -> tuple[float, float]:
    """``log T`` soft-thresholded by its bootstrap standard error; returns it and the error.

    The calibration rows are resampled with replacement ``n_bootstrap`` times (see
    :func:`bootstrap_resample`: with ``sample_weight``, as many draws as the rows' Kish
    effective number, each picking a row with probability proportional to its weight),
    ``log T`` is refitted on each
    resample, and the fitted ``log T`` moves towards 0 (``T = 1``, the uncalibrated
    model) by that standard deviation ``s``: ``sign(log T) * max(0, |log T| - s)``.
    Only the part of the temperature that the calibration data support beyond one
    standard error is applied; a temperature within one standard error of 1 is
    dropped altogether. A few errors that decide the temperature show as resamples
    with and without them, hence a large ``s``.
    """
    draws = np.empty(n_bootstrap)
    for b in range(n_bootstrap):
        resample = bootstrap_resample(logits, y, sample_weight, rng)
        draws[b] = optimal_log_temperature(*resample).log_temperature
    spread = float(np.std(draws, ddof=1))
    return float(np.sign(log_temperature) * max(0.0, abs(log_temperature) - spread)), spread


def _degenerate(logits, y, sample_weight, log_temperature: float) -> bool:
    """No finite NLL optimum: every (weighted) row already correct, so the NLL keeps
    falling as ``T`` goes to 0, or the fit at the upper bound of the search."""
    rows = _weighted_rows(y, sample_weight)
    all_correct = bool(np.all(np.argmax(logits[rows], axis=1) == y[rows]))
    return all_correct or log_temperature >= LOG_TEMPERATURE_BOUNDS[1] - BOUND_TOLERANCE


class _TemperatureMap(_LogitMap):
    """``z -> z / T``; ``guard="mixture"`` mixes the result with the uniform distribution,
    ``guard="shrinkage"`` shrinks ``log T`` towards 0 by its bootstrap standard error."""

    def __init__(self, guard: str | None = "shrinkage", seed: int = 0) -> None:
        self.guard = guard
        self.seed = seed

    def fit(self, logits, y, sample_weight=None):
        temperature = fit_temperature(logits, y, sample_weight)
        self.fitted_temperature_ = temperature
        self.standard_error_ = None
        if self.guard == "shrinkage":
            log_t = np.log(temperature)
            if _degenerate(logits, y, sample_weight, log_t):
                # No finite optimum (e.g. every row already correct): nothing to shrink
                # from, and no evidence for any particular temperature: T = 1.
                log_t, self.standard_error_ = 0.0, float("inf")
            else:
                log_t, self.standard_error_ = shrunk_log_temperature(
                    logits, y, sample_weight, log_t, np.random.default_rng(self.seed)
                )
            temperature = float(np.exp(log_t))
        self.temperature_ = temperature
        # n counts the calibration rows; with weights, their effective number (Kish).
        n = effective_rows(len(y), sample_weight)
        self.mixture_weight_ = uniform_mixture_weight(n) if self.guard == "mixture" else 0.0
        return self

    def transform(self, logits):
        return mix_with_uniform(logits / self.temperature_, self.mixture_weight_)

    def n_parameters(self) -> int:
        return 1


class CalibratedTemperature(ArgmaxPreservingMixin, LogitOutputMixin, PostHocCalibrator):
    """Temperature scaling: calibrate a classifier by dividing its logits by one temperature.

    The temperature ``T`` minimises the negative log-likelihood of ``softmax(z / T)`` on
    data the estimator was not fitted on, where ``z`` are the estimator's logits: its
    ``decision_function`` when that gives one score per class (for two classes, the 1-D
    score is taken as the logit of ``classes_[1]``, i.e. ``z = [0, d]``), otherwise the
    logarithm of its ``predict_proba`` clipped at 1e-12. The search is a bounded 1-D
    minimisation over ``log T`` in [-10, 10]. Dividing by ``T > 0`` never changes the
    predicted class (unless classes are absent from the calibration rows, see Notes).

    Three modes decide which data fit the estimator and which fit ``T``:

    * ``cv=None`` (default): a stratified held-out split inside ``fit`` keeps
      ``validation_fraction`` of every class for ``T``; a clone of the estimator is fitted
      on the rest.
    * ``cv`` given: cross-fitting as in scikit-learn's
      ``CalibratedClassifierCV(ensemble=True)``; one (clone, ``T``) pair per fold and
      ``predict_proba`` averages the pairs' calibrated probabilities.
    * estimator wrapped in :class:`sklearn.frozen.FrozenEstimator`: it is not refitted
      and all of ``X, y`` fit ``T``; classes absent from ``y`` keep the model's
      probability (see Notes).

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
        Seeds the held-out split (ignored with ``cv`` or a frozen estimator) and the
        bootstrap of ``guard="shrinkage"`` (0 when None).
    n_jobs : int or None, default=None
        With ``cv`` only: the fold models' parallel fits, as in :class:`PostHocCalibrator`.
    guard : {"shrinkage", "mixture"} or None, default="shrinkage"
        Protection against a temperature that the calibration rows do not support,
        which on small or easy calibration sets (a few errors, or none) can make the
        calibrated model much worse than the uncalibrated one on new data.

        * ``"shrinkage"``: ``log T`` is soft-thresholded towards 0 (``T = 1``, the
          uncalibrated model) by its bootstrap standard error ``s`` over the
          calibration rows (100 resamples): ``sign(log T) max(0, |log T| - s)``. Only
          the part of the temperature that the data support beyond one standard error
          is applied, so a noisy temperature is damped. A degenerate fit without a
          finite optimum (every calibration row already correct, so the NLL keeps
          falling as ``T`` goes to 0; or the fit at the upper bound of the search)
          has nothing to shrink and gives ``T = 1``. The bootstrap is seeded by
          ``random_state`` (0 when it is None), so the fit is a deterministic
          function of its data.
        * ``"mixture"``: plain temperature scaling whose output is mixed with the
          uniform distribution at weight ``w = 1 / (n + 1)`` for ``n`` calibration
          rows (Kish's effective number ``(sum w)**2 / sum w**2`` with
          ``sample_weight``),
          ``(1 - w) softmax(z / T) + w / k`` (the "ts-mix" of Berta et al., 2025). An
          error on new data then costs at most ``log(k (n + 1))`` nats, but every row
          pays up to ``-log(1 - w)``, which is a large share of a very low NLL.
        * ``None``: plain temperature scaling, ``softmax(z / T)``.

        The predicted class never changes.

    Attributes
    ----------
    temperature_ : float
        The fitted temperature; with cross-fitting, the mean of ``temperatures_``
        (prediction uses each fold's own temperature).
    temperatures_ : ndarray of shape (n_pairs,)
        One temperature per calibrated estimator (one unless ``cv`` is given).
    fitted_temperature_ : float
        The NLL-optimal temperature before the guard (equal to ``temperature_`` unless
        ``guard="shrinkage"``); with cross-fitting, the mean over the pairs.
    mixture_weight_ : float
        Weight of the uniform distribution in the output (``1 / (n + 1)`` with
        ``guard="mixture"``, else 0); with cross-fitting, the mean over the pairs (each
        uses its own).
    classes_ : ndarray of shape (n_classes,)
        Class labels: those of ``y``, or the frozen estimator's ``classes_``.
    calibrated_classifiers_ : list of _CalibratedClassifier
        The (fitted estimator, calibration map) pairs; ``.estimator`` and
        ``.calibrator.temperature_`` of each are public.
    response_method_ : {"decision_function", "predict_proba"}
        The estimator response the logits were taken from.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during ``fit``, when ``X`` had string column names.

    See Also
    --------
    sklearn.calibration.CalibratedClassifierCV : ``method="temperature"`` fits the same
        temperature (parameterised by its inverse).

    Notes
    -----
    ``sample_weight`` (see :meth:`fit`) weighs the calibration rows, and only the ratios
    of the weights matter: ``T`` minimises the weighted mean NLL, and where the guards
    count rows they count Kish's effective number of rows ``n = (sum w)**2 / sum w**2``,
    never the sum of the weights: ``guard="mixture"`` takes it for ``n``, and each
    bootstrap resample of ``guard="shrinkage"`` draws that many rows (rounded), each
    with probability proportional to its weight. So all-equal weights of any scale
    (ones, ``1/n``, 7) fit the unweighted temperature, and zero weights that of the data
    without those rows. A weight says how much a row counts, not how many rows it
    stands for: integer weights are not repeated rows for the guards (weights 1 and 3
    count fewer effective rows than their sum); repeat the rows to count repetitions.

    The default guard was chosen on the search seeds of the dev suite, by how often each
    guard made a fit's test NLL more than 5 % worse than the uncalibrated model's; the
    measurement is in ``docs/refine_then_calibrate.md``.

    The temperature is degenerate when the NLL has no interior minimum on the
    calibration data, and ``fit`` then warns (``UserWarning``) with the reason:

    * every calibration row already classified correctly: ``T`` goes to the lower bound
      and predictions become almost one-hot;
    * the estimator no better than a uniform prediction on the calibration rows: ``T``
      goes to the upper bound (about 2.2e4) and predictions become almost uniform.

    Small or incomplete calibration sets follow the rules of every calibrator (see
    :class:`PostHocCalibrator`): classes absent from the calibration rows keep the
    model's probability and ``T`` is fitted on the model's distribution over the present
    classes (then the predicted class can change between a present and an absent class,
    and ``predict`` follows ``predict_proba``); a calibration set of one row or of one
    class calibrates nothing (``temperature_`` 1, the model's own probabilities); no
    probability is below 1e-15. The map has 1 parameter, so the mixture with the model
    applies only to fewer than 1 effective calibration row (a single row of positive
    weight is 1).

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

    _parameter_constraints: dict = {
        **PostHocCalibrator._parameter_constraints,
        "guard": [StrOptions({"shrinkage", "mixture"}), None],
    }

    def __init__(
        self,
        estimator=None,
        *,
        validation_fraction=0.2,
        cv=None,
        random_state=None,
        n_jobs=None,
        guard="shrinkage",
    ):
        super().__init__(
            estimator,
            validation_fraction=validation_fraction,
            cv=cv,
            random_state=random_state,
            n_jobs=n_jobs,
        )
        self.guard = guard

    def _make_calibrator(self):
        return _TemperatureMap(self.guard, seed=_bootstrap_seed(self.random_state))

    def _summarize(self):
        self.temperatures_ = np.array(self._map_attributes("temperature_", 1.0))
        self.temperature_ = float(self.temperatures_.mean())
        self.mixture_weight_ = float(np.mean(self._map_attributes("mixture_weight_", 0.0)))
        self.fitted_temperature_ = float(np.mean(self._map_attributes("fitted_temperature_", 1.0)))


def _bootstrap_seed(random_state) -> int:
    """The bootstrap seed of ``guard="shrinkage"``: an int as given, 0 for None, a draw
    from a ``RandomState``."""
    if random_state is None:
        return 0
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
