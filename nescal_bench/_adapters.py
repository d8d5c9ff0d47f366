"""Models and calibrators of other libraries, for side-by-side comparisons in the benchmark.

* :class:`LightGBMClassifier`, a scikit-learn classifier around
  `LightGBM <https://lightgbm.readthedocs.io>`_ that stops early on the validation rows
  the benchmark passes to every method (``fit(X, y, X_val=..., y_val=...)``), so that
  gradient boosting is compared on the same footing as ``NeSCalClassifier``.
* :class:`ProbmetricsCalibrator` (registered as ``"probmetrics"``) wraps a calibrator of
  `probmetrics <https://github.com/dholzmueller/probmetrics>`_
  (``probmetrics.calibrators.get_calibrator``), the post-hoc calibration that RealMLP and
  TabArena use. scikit-learn's :class:`~sklearn.calibration.CalibratedClassifierCV` is
  registered as ``"sklearn"`` and needs no adapter, only :func:`calibrator_summary` to
  read its fitted temperatures.

``lightgbm`` and ``probmetrics`` are imported only when used; without them, that raises
an ImportError saying how to install them. (``TabMModule`` is the library's:
``nescal_sklearn.nn.TabMModule``.)
"""

from __future__ import annotations

import importlib
import inspect
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data


def _import(module: str, user: str, extra: str = "bench"):
    """``module``, or an ImportError saying that ``user`` needs its package and how to
    install it (with the project's ``extra``)."""
    package = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{user} needs the {package} package, which is not installed ({exc}); install it "
            f'with `pip install {package}` or with the benchmark extras, `pip install -e ".[{extra}]"`'
        ) from exc


def _encode(classes: np.ndarray, y, message: str) -> np.ndarray:
    """``y`` as column indices of ``classes``; for a label not in them, a ValueError of
    ``message`` formatted with the unknown labels and the classes."""
    y = np.asarray(y)
    encoded = np.searchsorted(classes, y)
    inside = encoded < len(classes)
    if not np.all(inside) or not np.array_equal(classes[encoded[inside]], y[inside]):
        unknown = sorted(set(y.tolist()) - set(classes.tolist()))
        raise ValueError(message.format(unknown, classes.tolist()))
    return encoded


class LightGBMClassifier(ClassifierMixin, BaseEstimator):
    """LightGBM gradient boosting that stops early on the given validation rows.

    ``fit(X, y, X_val=..., y_val=...)`` trains up to ``n_estimators`` trees with
    LightGBM's own classifier (binary objective for two classes, multiclass softmax
    otherwise, as LightGBM chooses), watching the log-loss (``binary_logloss`` or
    ``multi_logloss``) on ``(X_val, y_val)``, and stops when it has not improved for
    ``early_stopping_rounds`` rounds. Predictions use the trees up to the best round.
    Without validation rows (or with ``early_stopping_rounds=None``) all
    ``n_estimators`` trees are trained and used. The benchmark runner passes the same
    validation rows to every method, so no rows are split off here.

    Parameters
    ----------
    n_estimators : int, default=1000
        Maximum number of boosting rounds (trees per class for multiclass).
    learning_rate : float, default=0.05
        Shrinkage of each tree.
    num_leaves : int, default=31
        Maximum number of leaves per tree (LightGBM's default).
    min_child_samples : int, default=20
        Minimum number of rows in a leaf (LightGBM's default).
    subsample : float, default=1.0
        Fraction of the rows each tree is grown on (LightGBM's default, 1.0: all rows).
        Below 1, rows are redrawn at every round (LightGBM's ``subsample_freq=1``;
        LightGBM itself ignores ``subsample`` unless ``subsample_freq > 0``).
    colsample_bytree : float, default=1.0
        Fraction of the columns each tree may use (LightGBM's default).
    early_stopping_rounds : int or None, default=50
        Stop when the validation log-loss has not improved for this many rounds.
        None: no early stopping, even with validation rows.
    n_threads : int or None, default=None
        Threads LightGBM uses (its ``n_jobs``). None means 1 thread, except in the
        benchmark runner, which sets it to the fit's thread budget (``n_threads`` is
        one of its ``THREAD_PARAMS``). LightGBM's own default, all cores, would
        oversubscribe the machine when fits run side by side.
    random_state : int, RandomState instance or None, default=None
        Seed of LightGBM's random draws (row and column subsampling). The benchmark
        sets it from the run's seed.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    model_ : lightgbm.LGBMClassifier
        The fitted LightGBM classifier (trained on the labels encoded as
        ``0 .. n_classes - 1``).
    booster_ : lightgbm.Booster
        Its booster. After early stopping LightGBM keeps the trees up to the best
        round only.
    best_iteration_ : int
        Number of rounds used for predictions: the round of lowest validation
        log-loss with early stopping, else the number of rounds trained.
    n_iter_ : int
        Number of rounds trained (with early stopping, ``best_iteration_`` plus the
        rounds without improvement that stopped it, at most ``n_estimators``).
    n_features_in_ : int
        Number of features seen in ``fit``.

    See Also
    --------
    sklearn.ensemble.HistGradientBoostingClassifier : scikit-learn's histogram
        gradient boosting, which the benchmark also gives the validation rows.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("lightgbm")
    >>> from nescal_bench import LightGBMClassifier
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = LightGBMClassifier(random_state=0)
    >>> model = model.fit(X[:300], y[:300], X_val=X[300:450], y_val=y[300:450])
    >>> model.best_iteration_ < model.n_iter_ < model.n_estimators
    True
    >>> model.predict_proba(X[450:452]).shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "num_leaves": [Interval(Integral, 2, None, closed="left")],
        "min_child_samples": [Interval(Integral, 1, None, closed="left")],
        "subsample": [Interval(Real, 0, 1, closed="right")],
        "colsample_bytree": [Interval(Real, 0, 1, closed="right")],
        "early_stopping_rounds": [Interval(Integral, 1, None, closed="left"), None],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        n_estimators: int = 1000,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        min_child_samples: int = 20,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        early_stopping_rounds: int | None = 50,
        n_threads: int | None = None,
        random_state=None,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.early_stopping_rounds = early_stopping_rounds
        self.n_threads = n_threads
        self.random_state = random_state

    @classmethod
    def check_dependencies(cls) -> None:
        """Raise ImportError, saying how to install it, when lightgbm is missing."""
        _import("lightgbm", "LightGBMClassifier")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # LightGBM routes missing values itself
        return tags

    def fit(self, X, y, X_val=None, y_val=None, sample_weight=None):
        """Train the trees, stopping early on ``(X_val, y_val)`` when given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows (missing values allowed).
        y : array-like of shape (n_samples,)
            Their labels.
        X_val : array-like of shape (n_val, n_features) or None, default=None
            Validation rows for early stopping; pass them with ``y_val``.
        y_val : array-like of shape (n_val,) or None, default=None
            Their labels, each one of the labels of ``y``.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the training rows (the validation log-loss is unweighted).

        Returns
        -------
        self : LightGBMClassifier
        """
        self._validate_params()
        if (X_val is None) != (y_val is None):
            raise ValueError(
                "X_val and y_val must be given together (validation rows for early "
                f"stopping); got X_val={'None' if X_val is None else 'an array'} and "
                f"y_val={'None' if y_val is None else 'an array'}."
            )
        lightgbm = _import("lightgbm", "LightGBMClassifier")
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan")
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                "LightGBMClassifier needs at least 2 classes in y; got 1 class: "
                f"{self.classes_.tolist()}."
            )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
        metric = "binary_logloss" if len(self.classes_) == 2 else "multi_logloss"
        own = ("early_stopping_rounds", "n_threads")  # the others are LightGBM's, same names
        same = {k: v for k, v in self.get_params().items() if k not in own}
        model = lightgbm.LGBMClassifier(
            **same,
            subsample_freq=1 if self.subsample < 1 else 0,
            metric=metric,
            verbose=-1,
            n_jobs=1 if self.n_threads is None else self.n_threads,
        )
        stops = X_val is not None and self.early_stopping_rounds is not None
        fit_params: dict = {"sample_weight": sample_weight}
        if stops:
            X_val = validate_data(self, X_val, reset=False, ensure_all_finite="allow-nan")
            y_val = _encode(
                self.classes_,
                y_val,
                "y_val has labels {} that are not in y; the classes of y are {}",
            )
            # lightgbm >= 4.7 deprecates eval_set for eval_X / eval_y.
            if "eval_X" in inspect.signature(lightgbm.LGBMModel.fit).parameters:
                fit_params.update(eval_X=(X_val,), eval_y=(y_val,))
            else:
                fit_params["eval_set"] = [(X_val, y_val)]
            fit_params["callbacks"] = [
                lightgbm.early_stopping(self.early_stopping_rounds, verbose=False),
                lightgbm.log_evaluation(0),
            ]
        model.fit(X, encoded, **fit_params)
        self.model_ = model
        self.booster_ = model.booster_
        if stops:  # the booster keeps the trees up to the best round only
            self.n_iter_ = len(next(iter(model.evals_result_.values()))[metric])
            self.best_iteration_ = int(self.booster_.best_iteration)
        else:
            self.n_iter_ = self.best_iteration_ = int(self.booster_.current_iteration())
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities from the trees up to ``best_iteration_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to predict.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            One column per class of ``classes_``; rows sum to 1.
        """
        check_is_fitted(self, "booster_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan")
        proba = np.asarray(
            self.booster_.predict(X, num_iteration=self.best_iteration_), dtype=np.float64
        )
        if proba.ndim == 1:  # binary: the probability of the second class
            proba = np.column_stack([1.0 - proba, proba])
        return proba

    def predict(self, X) -> np.ndarray:
        """The class of highest probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to predict.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        check_is_fitted(self, "booster_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def _probabilities(proba) -> np.ndarray:
    """``proba`` as float64 rows in [0, 1] that sum to 1 (probmetrics checks to 1e-6,
    which float32 predictions may miss)."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim == 1:  # one probability per row: that of the second class
        proba = np.column_stack([1.0 - proba, proba])
    proba = np.clip(proba, 0.0, 1.0)
    return proba / proba.sum(axis=1, keepdims=True)


class ProbmetricsCalibrator(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Post-hoc calibration of a fitted classifier by a probmetrics calibrator.

    ``fit(X, y)`` fits ``probmetrics.calibrators.get_calibrator(method)`` on the
    estimator's ``predict_proba(X)`` and the labels encoded as column indices of its
    ``classes_``; ``predict_proba`` returns that calibrator's output on the estimator's
    probabilities. Probabilities always have one column per class, two for a binary
    problem, as probmetrics expects.

    Parameters
    ----------
    estimator : estimator
        An already fitted classifier with ``predict_proba`` and ``classes_``, typically
        ``FrozenEstimator(model)``; it is never refitted.
    method : str, default="ts-mix"
        A ``calibration_method`` of probmetrics' ``get_calibrator``: ``"ts-mix"``
        (temperature scaling, then a mixture with the uniform distribution of weight
        ``1 / (n + 1)``, RealMLP's default), ``"temp-scaling"`` (plain temperature
        scaling), ``"sms"``, ``"svs"``, ``"logistic"``, ``"platt"``, ``"isotonic"``, ...
        (any name ``get_calibrator`` accepts). Some need further packages (``"beta"``:
        betacal, ``"ivap"``: venn-abers), which probmetrics asks for when fitted.

    Attributes
    ----------
    calibrator_ : probmetrics Calibrator
        The fitted probmetrics calibrator.
    classes_ : ndarray of shape (n_classes,)
        The estimator's classes.
    temperature_ : float
        The fitted temperature (``1 / invtemp_`` of probmetrics), for the temperature
        scaling methods only.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("probmetrics")
    >>> from nescal_bench import ProbmetricsCalibrator
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import LogisticRegression
    >>> X, y = load_iris(return_X_y=True)
    >>> model = LogisticRegression(max_iter=500).fit(X[::2], y[::2])
    >>> calibrated = ProbmetricsCalibrator(FrozenEstimator(model), method="temp-scaling")
    >>> calibrated.fit(X[1::2], y[1::2]).predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {"estimator": [HasMethods(["predict_proba"])], "method": [str]}

    def __init__(self, estimator, *, method: str = "ts-mix") -> None:
        self.estimator = estimator
        self.method = method

    @classmethod
    def check_dependencies(cls) -> None:
        """Raise ImportError, saying how to install it, when probmetrics is missing."""
        _import("probmetrics.calibrators", "the 'probmetrics' calibrator")

    def _validate_params(self) -> None:
        super()._validate_params()
        if not self.method:
            raise ValueError(
                "The 'method' parameter of ProbmetricsCalibrator must be a non-empty string "
                "naming a probmetrics calibration method. Got '' instead."
            )
        calibrators = _import("probmetrics.calibrators", "the 'probmetrics' calibrator")
        try:  # probmetrics' own check of the name (no fit)
            calibrators.get_calibrator(self.method)
        except ValueError as exc:
            raise ValueError(
                "The 'method' parameter of ProbmetricsCalibrator must be a calibration method "
                f"of probmetrics' get_calibrator. Got {self.method!r} instead ({exc})."
            ) from None

    def fit(self, X, y):
        """Fit the probmetrics calibrator on the estimator's probabilities of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Calibration rows.
        y : array-like of shape (n_samples,)
            Their labels, each one of the estimator's ``classes_``.

        Returns
        -------
        self : ProbmetricsCalibrator
        """
        self._validate_params()
        calibrators = _import("probmetrics.calibrators", "the 'probmetrics' calibrator")
        classes = np.asarray(self.estimator.classes_)
        encoded = _encode(
            classes, y, "y has labels {} that the estimator was not fitted on; its classes are {}"
        )
        proba = _probabilities(self.estimator.predict_proba(X))
        calibrator = calibrators.get_calibrator(self.method)
        self.calibrator_ = calibrator.fit(proba, encoded.astype(np.int64))
        self.classes_ = classes
        if hasattr(self.estimator, "n_features_in_"):
            self.n_features_in_ = self.estimator.n_features_in_
        inner = getattr(self.calibrator_, "cal_", self.calibrator_)  # "-mix": a wrapper
        inverse = getattr(inner, "invtemp_", None)
        if inverse is not None:
            self.temperature_ = 1.0 / float(inverse)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities, one column per class of ``classes_``."""
        check_is_fitted(self, "calibrator_")
        proba = self.calibrator_.predict_proba(_probabilities(self.estimator.predict_proba(X)))
        return _probabilities(proba)

    def predict(self, X) -> np.ndarray:
        """The class of highest calibrated probability."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def calibrator_summary(calibrated) -> dict:
    """Fitted temperatures of a calibrator, for a record's ``calibrators`` section.

    ``temperature_`` / ``temperatures_`` of the package's calibrators and of
    :class:`ProbmetricsCalibrator`; for a ``CalibratedClassifierCV`` with
    ``method="temperature"``, the temperature ``1 / beta_`` of each of its fitted
    calibrators (one when it wraps a ``FrozenEstimator``). Other calibrators give ``{}``.
    """
    out = {}
    for name in ("temperature_", "temperatures_"):
        value = getattr(calibrated, name, None)
        if value is not None:
            out[name.rstrip("_")] = np.asarray(value, dtype=float).tolist()
    pairs = getattr(calibrated, "calibrated_classifiers_", None)
    if not out and pairs and getattr(calibrated, "method", None) == "temperature":
        betas = [
            float(np.asarray(c.beta_).reshape(-1)[0])
            for pair in pairs
            for c in getattr(pair, "calibrators", [])
            if hasattr(c, "beta_")
        ]
        if betas:
            temperatures = [1.0 / beta for beta in betas]
            out["temperature"] = temperatures[0] if len(temperatures) == 1 else temperatures
    return out
