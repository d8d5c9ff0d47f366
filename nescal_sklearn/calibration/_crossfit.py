"""Cross-fitting: every row trains, every row calibrates.

The rows are split into ``K`` folds. Each member estimator is fitted ``K`` times, on all
folds but one, and early-stops on the fold it did not train on when its ``fit`` takes
``X_val``/``y_val`` (``NeSCalClassifier``, ``HistGradientBoostingClassifier`` with
``early_stopping=True``). Its predictions on the held-out folds are *out of fold*: one per
row, none from a model that trained on the row. These out-of-fold predictions then weigh
the members (greedy ensemble selection with replacement, Caruana et al., 2004) and fit
one calibration map on all rows, chosen by an inner cross-validation when asked.

The functions here are shared by :class:`CrossFitClassifier` and the ``cv`` mode of every
post-hoc calibrator (:class:`~nescal_sklearn.calibration.PostHocCalibrator`).
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from joblib import Parallel, delayed
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.model_selection import StratifiedKFold, check_cv
from sklearn.utils import _safe_indexing, check_random_state, indexable
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import _BaseComposition
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_method_params,
    check_is_fitted,
    column_or_1d,
    has_fit_parameter,
    validate_data,
)

from ..metrics.logits import weighted_nll
from ._base import _estimator_logits, _validated_sample_weight
from ._maps import (
    _LogitMap,
    calibrate_probabilities,
    fit_map,
    floor_probabilities,
    log_probabilities,
)
from ._quadratic import _QuadraticScalingMap
from ._structured_matrix import CalibratedStructuredMatrixScaling
from ._temperature import CalibratedTemperature

__all__ = [
    "CALIBRATIONS",
    "CrossFitClassifier",
    "cross_fit",
    "greedy_ensemble_weights",
    "out_of_fold_logits",
    "select_calibration",
]


class _IdentityMap(_LogitMap):
    """The map that changes nothing (the uncalibrated ensemble)."""

    def fit(self, logits, y, sample_weight=None):
        return self

    def transform(self, logits):
        return logits

    def n_parameters(self) -> int:
        return 0


#: Calibration maps by name, in order of complexity (the selection prefers the earlier
#: of two maps that tie within noise): name -> (map factory, classes it applies to).
CALIBRATIONS: dict[str, tuple[Callable[[], object], str]] = {
    "identity": (_IdentityMap, "any"),
    # ts-mix: temperature scaling mixed with the uniform distribution at 1/(n + 1), so
    # that a near-separable calibration set cannot make one test error cost everything.
    "temperature": (lambda: CalibratedTemperature(guard="mixture")._make_calibrator(), "any"),
    "quadratic": (_QuadraticScalingMap, "binary"),
    "sms": (lambda: CalibratedStructuredMatrixScaling()._make_calibrator(), "multiclass"),
}


def _applies(name: str, n_classes: int) -> bool:
    kind = CALIBRATIONS[name][1]
    return kind == "any" or (kind == "binary") == (n_classes == 2)


def takes_validation_rows(estimator) -> bool:
    """Whether ``estimator.fit`` early-stops on ``X_val``/``y_val`` it is given.

    True when ``fit`` takes ``X_val`` and ``y_val`` and the estimator's ``early_stopping``
    (if it has one) is not False or ``"auto"`` (scikit-learn's gradient boosting only
    stops early on them with ``early_stopping=True``, or on more than 10,000 rows).
    """
    try:
        accepted = inspect.signature(estimator.fit).parameters
    except (TypeError, ValueError):
        return False
    if "X_val" not in accepted or "y_val" not in accepted:
        return False
    early = estimator.get_params(deep=False).get("early_stopping", True)
    return early is not False and not (isinstance(early, str) and early == "auto")


def _seeded(estimator, seed: int | None):
    """``estimator`` with every ``random_state`` parameter (nested ones too) set to ``seed``."""
    if seed is None:
        return estimator
    names = [
        name
        for name in estimator.get_params(deep=True)
        if name == "random_state" or name.endswith("__random_state")
    ]
    return estimator.set_params(**dict.fromkeys(names, seed)) if names else estimator


def _fit_member(estimator, X, y, train, test, fit_params: dict, seed):
    """Fit one member on the rows ``train``; early stopping on ``test`` when it can."""
    estimator = _seeded(clone(estimator), seed)
    kwargs = _check_method_params(X, params=fit_params, indices=train)
    if takes_validation_rows(estimator):
        kwargs.update(X_val=_safe_indexing(X, test), y_val=y[test])
        weights = fit_params.get("sample_weight")
        if (
            weights is not None
            and "sample_weight_val" in inspect.signature(estimator.fit).parameters
        ):
            kwargs["sample_weight_val"] = _safe_indexing(weights, test)
    return estimator.fit(_safe_indexing(X, train), y[train], **kwargs)


def cross_fit(
    members: Sequence,
    X,
    y: np.ndarray,
    folds: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    fit_params: Sequence[dict] | None = None,
    seeds: Sequence[int | None] | None = None,
    n_jobs: int | None = None,
    verbose: int = 0,
) -> list[list]:
    """Fit every member on every fold's training rows, in parallel through joblib.

    Parameters
    ----------
    members : sequence of estimators
        Unfitted estimators; each is cloned once per fold.
    X : array-like of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels (as the members should see them).
    folds : sequence of (train, test) index arrays
        The test parts are held out of the fit and given as ``X_val``/``y_val`` to the
        members whose ``fit`` early-stops on them (:func:`takes_validation_rows`).
    fit_params : sequence of dict or None, default=None
        One dict per member: further parameters of its ``fit``, sliced to each fold's
        training rows when they have one entry per row (``sample_weight``; its held-out
        rows' part goes to ``sample_weight_val`` where ``fit`` takes that).
    seeds : sequence of int or None, default=None
        One seed per fold, set as every ``random_state`` parameter of the fold's clones
        (so the folds' models differ as bagged models do); None leaves them.
    n_jobs : int or None, default=None
        Parallel fits (joblib; ``None`` is one unless a ``joblib.parallel_backend``
        context says otherwise, e.g. a dask cluster's ``"dask"`` backend).
    verbose : int, default=0
        joblib's progress messages.

    Returns
    -------
    list of list of estimators
        ``fitted[f][m]``: member ``m`` fitted on fold ``f``'s training rows.
    """
    seeds = [None] * len(folds) if seeds is None else list(seeds)
    fit_params = [{} for _ in members] if fit_params is None else list(fit_params)
    jobs = [(f, m) for f in range(len(folds)) for m in range(len(members))]
    fitted = Parallel(n_jobs=n_jobs, verbose=verbose)(
        delayed(_fit_member)(members[m], X, y, *folds[f], fit_params[m], seeds[f]) for f, m in jobs
    )
    out: list[list] = [[None] * len(members) for _ in folds]
    for (f, m), model in zip(jobs, fitted, strict=True):
        out[f][m] = model
    return out


def out_of_fold_logits(
    fitted: Sequence[Sequence], X, folds, classes: np.ndarray
) -> list[np.ndarray]:
    """Each member's logits on the rows of the folds it did not train on.

    Returns one ``(n_samples, n_classes)`` array per member: row ``i`` holds the logits
    of the fold model that held row ``i`` out.
    """
    n_members = len(fitted[0])
    n_samples = sum(len(test) for _, test in folds)
    out = [np.empty((n_samples, classes.size)) for _ in range(n_members)]
    for f, (_, test) in enumerate(folds):
        for m, model in enumerate(fitted[f]):
            _check_classes(model, classes, f)
            out[m][test] = _estimator_logits(model, _safe_indexing(X, test), classes.size)[0]
    return out


def _check_classes(model, classes: np.ndarray, fold: int) -> None:
    learned = np.asarray(model.classes_)
    if learned.shape != classes.shape or np.any(learned != classes):
        raise ValueError(
            f"{type(model).__name__} fitted without the rows of fold {fold} learned the "
            f"classes {learned.tolist()!r}, but y has {classes.tolist()!r}: every class "
            "needs rows in every fold's training part. Use fewer folds, or more rows of "
            "the rare classes."
        )


def greedy_ensemble_weights(
    probas: Sequence[np.ndarray],
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    size: int = 25,
) -> np.ndarray:
    """Member weights by greedy ensemble selection with replacement (Caruana et al., 2004).

    Start from an empty ensemble; ``size`` times, add the member (again, if it is the
    best choice) whose addition gives the lowest NLL of the averaged probabilities on
    the rows ``y``. The weight of a member is the share of the additions it got. Ties go
    to the earlier member.

    Parameters
    ----------
    probas : sequence of ndarray of shape (n_samples, n_classes)
        Each member's (out-of-fold) probabilities.
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    sample_weight : ndarray or None, default=None
        Weights of the NLL.
    size : int, default=25
        Number of additions (AutoGluon's default ensemble size).

    Returns
    -------
    ndarray of shape (n_members,)
        Non-negative weights summing to 1.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 1, 1, 0])
    >>> good = np.array([[0.8, 0.2], [0.3, 0.7], [0.2, 0.8], [0.7, 0.3]])
    >>> bad = good[:, ::-1]
    >>> greedy_ensemble_weights([bad, good], y, size=5).tolist()
    [0.0, 1.0]
    """
    if len(probas) == 1:
        return np.ones(1)
    counts = np.zeros(len(probas))
    total = np.zeros_like(probas[0])
    for step in range(size):
        scores = [
            weighted_nll(log_probabilities((total + p) / (step + 1)), y, sample_weight)
            for p in probas
        ]
        best = int(np.argmin(scores))
        counts[best] += 1
        total = total + probas[best]
    return counts / size


def select_calibration(
    logits: np.ndarray,
    y: np.ndarray,
    candidates: Sequence[str],
    *,
    sample_weight: np.ndarray | None = None,
    n_splits: int = 5,
    random_state=None,
) -> tuple[str, dict[str, float], np.ndarray]:
    """Choose a calibration map by cross-validation on the rows, preferring simple maps.

    Every candidate map is fitted on ``n_splits - 1`` parts of the rows and scored by its
    NLL on the part it did not see. The choice is the simplest candidate (in the order
    given: identity, then temperature, then quadratic or structured matrix scaling) whose
    mean held-out NLL is within one standard error of the best candidate's: the standard
    error of the paired, per-row difference to the best. A map is chosen over a simpler
    one only when the held-out rows say it is better beyond that noise; with
    ``"identity"`` among the candidates, the choice is never worse than no calibration
    beyond it.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
        The (out-of-fold) logits to calibrate.
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    candidates : sequence of str
        Names in :data:`CALIBRATIONS`, simplest first.
    sample_weight : ndarray or None, default=None
        Weights of the maps' NLL and of the scores.
    n_splits : int, default=5
        Parts of the inner cross-validation (stratified, shuffled).
    random_state : int, RandomState instance or None, default=None
        Seeds the inner split.

    Returns
    -------
    name : str
        The chosen map.
    scores : dict of str to float
        Each candidate's mean held-out NLL.
    held_out_proba : ndarray of shape (n_samples, n_classes)
        The chosen map's held-out probabilities: each row calibrated by the map fitted
        without it.
    """
    n_classes = logits.shape[1]
    counts = np.bincount(y, minlength=n_classes)
    n_splits = int(max(2, min(n_splits, counts[counts > 0].min())))
    splitter = StratifiedKFold(n_splits, shuffle=True, random_state=random_state)
    weights = np.ones(y.size) if sample_weight is None else sample_weight
    losses, held_out = {}, {}
    for name in candidates:
        proba = np.empty_like(logits)
        for train, test in splitter.split(logits, y):
            w = None if sample_weight is None else sample_weight[train]
            with warnings.catch_warnings():  # a part's map may warn; only the choice counts
                warnings.simplefilter("ignore")
                fitted = fit_map(CALIBRATIONS[name][0], logits[train], y[train], w)
            proba[test] = floor_probabilities(fitted.predict_proba(logits[test]))
        held_out[name] = proba
        losses[name] = -np.log(proba[np.arange(y.size), y])
    mean = {name: float(np.average(loss, weights=weights)) for name, loss in losses.items()}
    best = min(mean, key=mean.get)
    for name in candidates:  # simplest first
        diff = losses[name] - losses[best]
        se = np.sqrt(np.average((diff - np.average(diff, weights=weights)) ** 2, weights=weights))
        se /= np.sqrt(max(weights.sum() ** 2 / np.sum(weights**2), 1.0))
        if mean[name] - mean[best] <= se:
            return name, mean, held_out[name]
    return best, mean, held_out[best]  # pragma: no cover - best always qualifies


class CrossFitClassifier(ClassifierMixin, MetaEstimatorMixin, _BaseComposition, BaseEstimator):
    """Members cross-fitted on the same folds, weighted and calibrated out of fold.

    Every row trains and every row calibrates. The rows are split into ``cv`` stratified
    folds; each member is fitted once per fold on the other folds, and early-stops on the
    fold it did not train on when its ``fit`` takes ``X_val``/``y_val``
    (``NeSCalClassifier``, ``HistGradientBoostingClassifier(early_stopping=True)``). The
    members' out-of-fold probabilities, one per row from a model that never saw it, then:

    1. **weigh the members** by greedy ensemble selection with replacement (Caruana et
       al., 2004; AutoGluon's weighted ensemble): ``weights_``;
    2. **fit one calibration map** on the weighted ensemble's out-of-fold logits of all
       rows, ``calibration="auto"`` choosing among no map, temperature scaling (mixed
       with the uniform distribution at ``1/(n + 1)``, probmetrics' ts-mix), quadratic
       scaling (binary) and structured matrix scaling (multiclass) by an inner
       cross-validation on those rows that prefers the simpler map unless a more complex
       one is better beyond one standard error (:func:`select_calibration`).

    Prediction averages the fold models of each member with ``weights_`` and applies the
    map: to the average of the folds' weighted predictions (``map_on="ensemble"``), or to
    each fold's, then averages (``map_on="folds"``).

    The out-of-fold rows that early-stop a fold model also calibrate it: the map sees
    predictions of the epoch chosen on those rows, which is slightly optimistic; the
    inner cross-validation of the map is not.

    Parameters
    ----------
    estimators : list of (str, estimator)
        The members, by name (as in :class:`~sklearn.ensemble.VotingClassifier`); nested
        parameters are ``<name>__<param>``. Each needs ``fit`` and ``decision_function``
        or ``predict_proba``.
    cv : int or cross-validation splitter, default=5
        Folds: an int is ``StratifiedKFold(cv, shuffle=True, random_state=random_state)``.
    calibration : {"auto", "identity", "temperature", "quadratic", "sms"}, default="auto"
        The map fitted on the out-of-fold ensemble; ``"quadratic"`` is binary only,
        ``"sms"`` (structured matrix scaling) needs at least 3 classes.
    map_on : {"ensemble", "folds"}, default="ensemble"
        Whether the map calibrates the average of the fold models' predictions or each
        fold model's before averaging.
    ensemble_size : int, default=25
        Additions of the greedy ensemble selection (with one member, unused).
    n_jobs : int or None, default=None
        Member fits run in parallel through joblib (a dask cluster runs them with
        ``joblib.parallel_backend("dask")``). Members should use one thread each
        (``NeSCalClassifier``'s default ``n_threads=1``).
    random_state : int, RandomState instance or None, default=None
        Seeds the folds, the inner cross-validation of the map, and every member's
        ``random_state`` (a different seed per fold).
    verbose : int, default=0
        joblib's progress messages for the member fits.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features seen during ``fit``.
    estimators_ : list of list of estimators
        ``estimators_[f][m]``: member ``m`` fitted without fold ``f``.
    weights_ : ndarray of shape (n_members,)
        The members' weights (sum 1).
    calibration_ : str
        The map chosen (or given).
    calibration_scores_ : dict of str to float
        Held-out NLL of each candidate map in the inner cross-validation.
    calibrator_ : object
        The map fitted on all out-of-fold rows.
    oof_proba_ : ndarray of shape (n_samples, n_classes)
        The calibrated ensemble's out-of-fold probabilities of the training rows: each
        row's from fold models that did not train on it, calibrated by a map fitted
        without it (the inner cross-validation). Score them with any metric to check the
        ensemble's calibration on every training row.
    member_oof_nll_ : dict of str to float
        Each member's out-of-fold NLL (uncalibrated).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from nescal_sklearn.calibration import CrossFitClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = CrossFitClassifier(
    ...     [("lr", make_pipeline(StandardScaler(), LogisticRegression())),
    ...      ("hgb", HistGradientBoostingClassifier(early_stopping=True))],
    ...     cv=3, random_state=0,
    ... ).fit(X, y)
    >>> model.weights_.sum(), model.oof_proba_.shape
    (np.float64(1.0), (569, 2))
    """

    _parameter_constraints: dict = {
        "estimators": [list, None],
        "cv": ["cv_object"],
        "calibration": [StrOptions({"auto", *CALIBRATIONS})],
        "map_on": [StrOptions({"ensemble", "folds"})],
        "ensemble_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_jobs": [None, numbers.Integral],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimators,
        *,
        cv=5,
        calibration="auto",
        map_on="ensemble",
        ensemble_size=25,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimators = estimators
        self.cv = cv
        self.calibration = calibration
        self.map_on = map_on
        self.ensemble_size = ensemble_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def get_params(self, deep=True):
        """Parameters of this estimator, and of each member as ``<name>__<param>``."""
        return self._get_params("estimators", deep=deep)

    def set_params(self, **params):
        """Set parameters; ``<name>__<param>`` reaches a member."""
        self._set_params("estimators", **params)
        return self

    def _checked_members(self) -> tuple[list[str], list]:
        members = self.estimators
        if not members or not all(
            isinstance(m, tuple | list) and len(m) == 2 and isinstance(m[0], str) for m in members
        ):
            raise ValueError(
                f"estimators must be a non-empty list of (name, estimator) pairs; got {members!r}."
            )
        names = [name for name, _ in members]
        self._validate_names(names)
        for name, estimator in members:
            if not hasattr(estimator, "fit") or not (
                hasattr(estimator, "predict_proba") or hasattr(estimator, "decision_function")
            ):
                raise ValueError(
                    f"estimators: {name!r} must have fit and predict_proba or "
                    f"decision_function; got {estimator!r}."
                )
        return names, [estimator for _, estimator in members]

    def _candidates(self, n_classes: int) -> list[str]:
        if self.calibration == "auto":
            return [name for name in CALIBRATIONS if _applies(name, n_classes)]
        if not _applies(self.calibration, n_classes):
            raise ValueError(
                f"calibration={self.calibration!r} does not apply to {n_classes} classes "
                f"({'binary only' if CALIBRATIONS[self.calibration][1] == 'binary' else 'three or more classes'}); "
                "pass calibration='auto' or 'temperature'."
            )
        return [self.calibration]

    def fit(self, X, y, sample_weight=None):
        """Cross-fit the members, weigh them and fit the calibration map out of fold.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows, in whatever form the members accept.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the rows: passed to the members' ``fit`` and used by the weights
            and the map.

        Returns
        -------
        self : CrossFitClassifier
        """
        self._validate_params()
        names, members = self._checked_members()
        X, y = validate_data(self, X, y, skip_check_array=True)
        check_classification_targets(y)
        y = column_or_1d(y, warn=True)
        X, y = indexable(X, y)
        classes, y_encoded = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"CrossFitClassifier needs at least 2 classes in y; got {classes.tolist()!r}."
            )
        sample_weight = _validated_sample_weight(sample_weight, y.shape[0])
        candidates = self._candidates(classes.size)
        rng = check_random_state(self.random_state)
        cv = self.cv
        if isinstance(cv, numbers.Integral):
            cv = StratifiedKFold(int(cv), shuffle=True, random_state=rng.randint(2**31 - 1))
        folds = list(check_cv(cv, y_encoded, classifier=True).split(X, y_encoded))
        seeds = (
            None
            if self.random_state is None
            else [int(s) for s in rng.randint(2**31 - 1, size=len(folds))]
        )
        fit_params = [
            {"sample_weight": sample_weight}
            if sample_weight is not None and has_fit_parameter(member, "sample_weight")
            else {}
            for member in members
        ]
        fitted = cross_fit(
            members,
            X,
            y,
            folds,
            fit_params=fit_params,
            seeds=seeds,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )
        logits = out_of_fold_logits(fitted, X, folds, classes)
        probas = [softmax(z, axis=1) for z in logits]
        weights = greedy_ensemble_weights(probas, y_encoded, sample_weight, self.ensemble_size)
        ensemble = log_probabilities(np.einsum("m,mnc->nc", weights, np.stack(probas)))
        name, scores, held_out = select_calibration(
            ensemble,
            y_encoded,
            candidates,
            sample_weight=sample_weight,
            random_state=rng.randint(2**31 - 1),
        )
        self.classes_ = classes
        self.estimators_ = fitted
        self.folds_ = [test for _, test in folds]
        self.weights_ = weights
        self.calibration_ = name
        self.calibration_scores_ = scores
        self.calibrator_ = fit_map(CALIBRATIONS[name][0], ensemble, y_encoded, sample_weight)
        self.oof_proba_ = held_out
        self.member_oof_nll_ = {
            member: weighted_nll(log_softmax(z, axis=1), y_encoded, sample_weight)
            for member, z in zip(names, logits, strict=True)
        }
        return self

    def _fold_probas(self, X) -> list[np.ndarray]:
        """Each fold's weighted ensemble of its member models' probabilities."""
        used = np.flatnonzero(self.weights_ > 0)
        out = []
        for models in self.estimators_:
            total = 0.0
            for m in used:
                logits = _estimator_logits(models[m], X, self.classes_.size)[0]
                total = total + self.weights_[m] * softmax(logits, axis=1)
            out.append(total / self.weights_[used].sum())
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities of the weighted, cross-fitted ensemble.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "calibrator_")
        X = validate_data(self, X, reset=False, skip_check_array=True)
        folds = self._fold_probas(X)

        if self.map_on == "ensemble":
            return calibrate_probabilities(self.calibrator_, np.mean(folds, axis=0))
        return floor_probabilities(
            np.mean([calibrate_probabilities(self.calibrator_, p) for p in folds], axis=0)
        )

    def predict(self, X) -> np.ndarray:
        """The class of highest calibrated probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
