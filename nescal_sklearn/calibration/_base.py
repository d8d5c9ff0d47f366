"""Shared machinery of the post-hoc calibrators: held-out, cross-fitted and frozen modes.

Every calibrator is a scikit-learn meta-estimator built on :class:`PostHocCalibrator`.
A subclass only says which *calibration map* it fits (:meth:`_make_calibrator`); the base
class decides which data the wrapped estimator is fitted on and which data the map is
fitted on:

* default (``cv=None``): a stratified held-out split inside ``fit``;
* ``cv`` given: cross-fitting, one (estimator, map) pair per fold, probabilities averaged;
* estimator wrapped in :class:`sklearn.frozen.FrozenEstimator`: no refit, all of ``X, y``
  fits the map.

A calibration map turns the estimator's logits (``n_samples, n_classes``) into calibrated
probabilities; maps whose output is itself a logit vector derive from :class:`_LogitMap`.
Every map is fitted under the same three rules for small or incomplete calibration sets
(absent classes, fewer rows than parameters, no probability of exactly 0 or 1): they live
in :mod:`._maps` and apply here, in :meth:`PostHocCalibrator._calibrate` and
:meth:`_CalibratedClassifier.predict_proba`, to every calibrator alike.

``sample_weight`` reaches both: the map of every calibrator fits on the weights of its
calibration rows, and the wrapped estimator's ``fit`` gets those of its training rows,
when it accepts them (routing disabled, the default) or as it requested them with
``set_fit_request`` (scikit-learn's metadata routing enabled; :meth:`get_metadata_routing`).
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, _fit_context, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils import _safe_indexing, check_random_state, get_tags, indexable
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _routing_enabled,
    process_routing,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_method_params,
    _num_features,
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from .._params import plain
from ..model_selection import (
    estimator_logits,
    fit_on_fold,
    inner_split,
    make_folds,
    out_of_fold_logits,
    validated_sample_weight,
    weight_parameter,
)
from ._maps import (
    ModelMixture,
    PresentClassesMap,
    _CalibrationMap,
    fit_map,
    fit_present_classes,
    floor_probabilities,
)

__all__ = ["PostHocCalibrator"]


class _CalibratedClassifier:
    """A fitted estimator chained with the calibration map fitted on its logits.

    Parameters
    ----------
    estimator : estimator instance
        The fitted (or frozen) classifier.
    calibrator : _CalibrationMap
        The map fitted on the estimator's logits for held-out data.
    response_method : {"decision_function", "predict_proba"}
        Where the logits come from.
    n_classes : int
        Number of classes.
    """

    def __init__(
        self, estimator, calibrator: _CalibrationMap, response_method: str, n_classes: int
    ):
        self.estimator = estimator
        self.calibrator = calibrator
        self.response_method = response_method
        self.n_classes = n_classes

    @property
    def absent_classes(self) -> np.ndarray:
        """Indices of the classes absent from the calibration rows (they keep the model's
        probability)."""
        if isinstance(self.calibrator, PresentClassesMap):
            return self.calibrator.absent_
        return np.empty(0, dtype=np.intp)

    def logits(self, X) -> np.ndarray:
        return estimator_logits(self.estimator, X, self.n_classes, self.response_method)[0]

    def predict_proba(self, X) -> np.ndarray:
        return floor_probabilities(self.calibrator.predict_proba(self.logits(X)))

    def decision_function(self, X) -> np.ndarray:
        return self.calibrator.transform(self.logits(X))

    def __repr__(self) -> str:
        return (
            f"_CalibratedClassifier(estimator={self.estimator!r}, "
            f"calibrator={type(self.calibrator).__name__}, "
            f"response_method={self.response_method!r})"
        )


def _plain_number(value: float) -> int | float:
    """``value`` as an int when it is one (a count of rows), for messages."""
    return int(value) if float(value).is_integer() else float(value)


def _model_mixture(calibrator: _CalibrationMap) -> ModelMixture | None:
    """The :class:`ModelMixture` a pair's map was put in, if any (also inside the map of
    the present classes)."""
    if isinstance(calibrator, PresentClassesMap):
        calibrator = calibrator.map_
    return calibrator if isinstance(calibrator, ModelMixture) else None


def _encode_labels(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Indices of ``y`` in ``classes``; a ``ValueError`` names labels that are not there."""
    uniques, inverse = np.unique(y, return_inverse=True)
    lookup = {label: index for index, label in enumerate(classes.tolist())}
    unknown = [label for label in uniques.tolist() if label not in lookup]
    if unknown:
        raise ValueError(
            f"y contains label(s) {unknown!r} that the frozen estimator was not fitted on; "
            f"its classes_ are {classes.tolist()!r}."
        )
    return np.array([lookup[label] for label in uniques.tolist()], dtype=np.intp)[inverse]


class PostHocCalibrator(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Base class of the post-hoc calibrators (not for direct use).

    Subclasses implement :meth:`_make_calibrator`, returning an unfitted calibration map
    built from their own hyperparameters, and may implement :meth:`_summarize` to expose
    the fitted map parameters as attributes of the estimator.

    Parameters
    ----------
    estimator : estimator instance, default=None
        The classifier to calibrate; it needs ``fit`` and ``decision_function`` or
        ``predict_proba``. ``None`` means ``LogisticRegression()``. Wrap an already
        fitted classifier in :class:`sklearn.frozen.FrozenEstimator` to calibrate it
        without refitting.
    validation_fraction : float, default=0.2
        Share of each class held out for calibration when ``cv=None`` (at least one
        sample of every class goes to each side). Ignored with ``cv`` or a frozen
        estimator.
    cv : int, cross-validation generator or iterable, default=None
        ``None`` fits on a held-out split; otherwise the folds of a cross-fitting, as
        accepted by :func:`sklearn.model_selection.check_cv`: an int means
        ``StratifiedKFold``, or, when ``X`` has exact duplicate rows,
        ``StratifiedGroupKFold`` folds that keep copies of a row in one fold, as
        :class:`~nescal_sklearn.ensemble.CrossFitClassifier` makes them
        (:func:`~nescal_sklearn.model_selection.make_folds`). Must be ``None`` with a
        frozen estimator.
    random_state : int, RandomState instance or None, default=None
        Seeds the held-out split, or with ``cv`` the inner split that holds
        ``oof_proba_`` out of each fold's map. Ignored with a frozen estimator.
    n_jobs : int or None, default=None
        With ``cv``: the fold models are fitted in parallel through joblib (``None``: one
        at a time, unless a ``joblib.parallel_backend`` context, such as a dask
        cluster's, says otherwise).

    Notes
    -----
    With ``cv``, an estimator whose ``fit`` takes ``X_val``/``y_val`` and early-stops on
    them (``NeSCalClassifier``, ``HistGradientBoostingClassifier(early_stopping=True)``)
    early-stops each fold model on the fold it did not train on, instead of holding out
    rows of its own. With ``cv`` each fold's map is fitted on the fold's held-out rows and
    applied to its own model, and the calibrated probabilities of the fold pairs are
    averaged (scikit-learn's ``CalibratedClassifierCV(ensemble=True)``). ``oof_proba_``
    then holds every row's calibrated probabilities held out for both the model and the
    map: from the fold model that did not train on the row, through a map fitted on the
    fold's other held-out rows (an inner split, seeded by ``random_state``), so that it
    scores the calibration honestly. The folds are checked before any fit: they must
    split the rows into a partition, hold rows of every class in every training part
    and (with ``sample_weight``) a positive weight in every part; copies of a row that
    a given splitter puts in several test parts (which would make ``oof_proba_`` and
    the folds' maps see in-sample predictions) are counted in a warning.

    ``fit`` refuses empty input. Small or incomplete calibration sets are accepted, and
    three rules, the same for every calibrator, keep them from making the model much
    worse; ``fit`` warns (``UserWarning``, once per rule and fit) when the first two
    apply. Rows of zero ``sample_weight`` do not count as calibration rows.

    * **A class absent from the calibration rows keeps the model's own probability.**
      A map cannot learn anything about a class it has no row of, and left to itself it
      learns that the class never occurs (vector and matrix scaling, isotonic regression
      and histogram binning drive it to probability 0). So for every row the absent
      classes ``A`` get the model's probabilities ``p_A`` (``softmax`` of its logits), and
      the map, fitted on the model's distribution over the present classes only (their
      logits, renormalised by the softmax), shares out the remaining mass
      ``1 - sum(p_A)`` among them. With a single present class (one row, or rows of one
      class) there is nothing to calibrate, and the calibrated probabilities are the
      model's own. The held-out split always calibrates on rows of every class, so
      absent classes come from a frozen estimator's calibration data or a ``cv``.
      Temperature-type maps follow the rule too, so the predicted class can then change
      (between a present and an absent class) and ``predict`` follows ``predict_proba``.
    * **A map with more parameters than calibration rows is mixed with the model.**
      When the map learned more parameters than there are calibration rows ``n`` (Kish's
      effective number ``(sum w)**2 / sum w**2`` when weighted), its probabilities
      are ``(1 - w) map + w p`` with the model's ``p`` and ``w = 1 / (n + 1)``, as the
      ts-mix of :class:`CalibratedTemperature`'s ``guard="mixture"`` mixes with the
      uniform distribution: ``n`` rows cannot tell a probability below about
      ``1 / (n + 1)`` of the model's from zero, so no calibrated probability falls below
      ``w`` times the model's, and an error costs at most ``log(n + 1)`` nats more than
      the model's. Each calibrator's docstring gives its number of parameters; a map
      fitted on at least as many rows is left exactly as it is.
    * **No calibrated probability is exactly 0 or 1.** Probabilities below 1e-15 are
      raised to it, and the others of their row scaled down by a common factor so that
      the row sums to one (rows without one are left exactly as they are). An error
      then costs at most 34.5 nats; ``decision_function`` is not floored.

    ``fit(X, y, sample_weight)`` weighs the calibration map (every calibrator) and the
    estimator's ``fit``. With scikit-learn's metadata routing enabled
    (``sklearn.set_config(enable_metadata_routing=True)``) the estimator gets the
    weights only as it requested them (``estimator.set_fit_request(sample_weight=True)``,
    or ``False`` to fit it unweighted), and a calibrator inside a ``Pipeline`` or
    ``GridSearchCV`` gets them when it requested them in turn
    (``calibrator.set_fit_request(sample_weight=True)``); see
    :meth:`get_metadata_routing`.
    """

    _parameter_constraints: dict = {
        "estimator": [
            HasMethods(["fit", "predict_proba"]),
            HasMethods(["fit", "decision_function"]),
            None,
        ],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "cv": ["cv_object"],
        "random_state": ["random_state"],
        "n_jobs": [None, Integral],
    }

    def __init__(
        self,
        estimator=None,
        *,
        validation_fraction=0.2,
        cv=None,
        random_state=None,
        n_jobs=None,
    ):
        self.estimator = estimator
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.random_state = random_state
        self.n_jobs = n_jobs

    # -- hooks for subclasses ----------------------------------------------------------

    def _make_calibrator(self) -> _CalibrationMap:
        raise NotImplementedError

    def _summarize(self) -> None:
        """Set summary attributes from ``calibrated_classifiers_`` (default: none)."""

    def _map_attributes(self, name: str, identity) -> list:
        """The fitted attribute ``name`` of every pair's map; ``identity``, its value for
        the map that changes nothing, for a pair whose calibration rows held a single
        class (no map is fitted there: the pair predicts the model's own probabilities)."""
        values = []
        for pair in self.calibrated_classifiers_:
            calibrator = pair.calibrator
            unfitted = isinstance(calibrator, PresentClassesMap) and calibrator.map_ is None
            values.append(identity if unfitted else getattr(calibrator, name))
        return values

    # -- fitting -----------------------------------------------------------------------

    def _get_estimator(self):
        return LogisticRegression() if self.estimator is None else self.estimator

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the estimator (unless frozen) and the calibration map.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, in whatever form the wrapped estimator accepts.
        y : array-like of shape (n_samples,)
            Target labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights; ``None`` weighs every sample equally. The
            calibration map always uses them (those of its calibration rows), and only
            their ratios matter: all-equal weights of any scale fit the unweighted map,
            zero weights that of the data without those rows, and where a map counts
            its rows it counts Kish's effective number ``(sum w)**2 / sum w**2``. The
            estimator gets those of its training rows (not with a frozen estimator):
            with metadata routing disabled (scikit-learn's default) whenever its ``fit``
            accepts ``sample_weight`` (otherwise ``fit`` warns), with routing enabled
            (``sklearn.set_config(enable_metadata_routing=True)``) as it requested with
            ``estimator.set_fit_request(sample_weight=...)``.
        **fit_params : dict
            Further parameters of the estimator's ``fit``, split along with the rows;
            with routing enabled, any metadata the estimator's ``fit`` or the ``cv``
            splitter's ``split`` requested. Unused with a frozen estimator.

        Returns
        -------
        self : object
            The fitted calibrator.

        Raises
        ------
        sklearn.exceptions.UnsetMetadataPassedError
            With routing enabled, when ``sample_weight`` is passed and the estimator's
            ``fit`` accepts it, but the estimator was not told whether to receive it
            (``set_fit_request``).
        """
        X, y = validate_data(self, X, y, skip_check_array=True)
        check_classification_targets(y)
        y = column_or_1d(y, warn=True)
        X, y = indexable(X, y)
        check_consistent_length(X, y)
        if y.shape[0] == 0:
            raise ValueError(
                f"{type(self).__name__} cannot be fitted on empty input: X and y have 0 rows "
                "(samples)."
            )
        sample_weight = validated_sample_weight(sample_weight, y.shape[0])

        estimator = self._get_estimator()
        frozen = isinstance(estimator, FrozenEstimator)
        if _routing_enabled():
            routed = process_routing(self, "fit", sample_weight=sample_weight, **fit_params)
            estimator_params, split_params = routed.estimator.fit, routed.splitter.split
        else:
            estimator_params, split_params = {}, {}
            if not frozen:
                estimator_params = self._unrouted_fit_params(estimator, sample_weight, fit_params)
        if frozen:
            pairs = self._fit_frozen(estimator, X, y, sample_weight)
        else:
            pairs = self._fit_refitted(
                estimator, X, y, sample_weight, estimator_params, split_params
            )
        self._warn_about_small_calibration_sets(pairs)
        self.calibrated_classifiers_ = pairs
        self.response_method_ = pairs[0].response_method
        self._summarize()
        return self

    def _fit_frozen(self, estimator, X, y, sample_weight) -> list[_CalibratedClassifier]:
        if self.cv is not None:
            raise ValueError(
                f"cv={plain(self.cv)!r} cannot be used with a FrozenEstimator: a frozen "
                "estimator is never refitted, so all of X, y calibrate it. Pass cv=None."
            )
        try:
            check_is_fitted(estimator)
        except NotFittedError:
            raise NotFittedError(
                f"The {type(estimator.estimator).__name__} inside the FrozenEstimator is not "
                f"fitted; fit it before freezing it, or pass it unfrozen to let "
                f"{type(self).__name__} fit it."
            ) from None
        self.classes_ = np.asarray(estimator.classes_)
        y_encoded = _encode_labels(y, self.classes_)
        return [self._calibrate(estimator, X, y_encoded, sample_weight, None)]

    @staticmethod
    def _unrouted_fit_params(estimator, sample_weight, fit_params) -> dict:
        """The estimator's ``fit`` parameters without metadata routing: ``fit_params``, and
        ``sample_weight`` where its ``fit`` takes it (a ``Pipeline``'s final step's,
        :func:`~nescal_sklearn.model_selection.weight_parameter`); a warning says when it
        does not."""
        params = dict(fit_params)
        if sample_weight is None:
            return params
        parameter = weight_parameter(estimator)
        if parameter is not None:
            params[parameter] = sample_weight
        else:
            warnings.warn(
                f"{type(estimator).__name__}.fit does not accept sample_weight; the weights "
                "are used for the calibration only.",
                UserWarning,
                stacklevel=4,
            )
        return params

    def get_metadata_routing(self) -> MetadataRouter:
        """Metadata routing of this calibrator (used when routing is enabled).

        The calibrator consumes ``sample_weight`` itself (for the calibration map) and
        routes the metadata passed to its ``fit`` on to the estimator's ``fit``, as the
        estimator requested with ``set_fit_request``, and to the ``cv`` splitter's
        ``split``. See scikit-learn's metadata routing user guide.

        Returns
        -------
        routing : sklearn.utils.metadata_routing.MetadataRouter
            The routing information.

        Examples
        --------
        >>> import numpy as np
        >>> import sklearn
        >>> from sklearn.datasets import load_iris
        >>> from sklearn.linear_model import LogisticRegression
        >>> from nescal_sklearn.calibration import CalibratedTemperature
        >>> X, y = load_iris(return_X_y=True)
        >>> weights = np.where(y == 0, 2.0, 1.0)
        >>> with sklearn.config_context(enable_metadata_routing=True):
        ...     model = LogisticRegression(max_iter=1000).set_fit_request(sample_weight=True)
        ...     calibrated = CalibratedTemperature(model, random_state=0)
        ...     calibrated = calibrated.fit(X, y, sample_weight=weights)
        >>> calibrated.predict_proba(X[:1]).shape
        (1, 3)
        """
        return (
            MetadataRouter(owner=self)
            .add_self_request(self)
            .add(
                estimator=self._get_estimator(),
                method_mapping=MethodMapping().add(caller="fit", callee="fit"),
            )
            .add(
                splitter=self.cv,
                method_mapping=MethodMapping().add(caller="fit", callee="split"),
            )
        )

    def _fit_refitted(
        self, estimator, X, y, sample_weight, estimator_params, split_params
    ) -> list[_CalibratedClassifier]:
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes in y to fit its estimator; "
                f"got {self.classes_.size} class: {self.classes_.tolist()!r}."
            )
        if self.cv is None:
            train, test = self._held_out_split(y_encoded)
            fit_params = _check_method_params(X, params=estimator_params, indices=train)
            fitted = clone(estimator).fit(_safe_indexing(X, train), y[train], **fit_params)
            weights = None if sample_weight is None else sample_weight[test]
            return [
                self._calibrate(fitted, _safe_indexing(X, test), y_encoded[test], weights, None)
            ]
        folds = make_folds(
            self.cv,
            X,
            y_encoded,
            self.classes_,
            groups=split_params.get("groups"),
            sample_weight=sample_weight,
        )
        fitted = Parallel(n_jobs=self.n_jobs)(
            delayed(fit_on_fold)(estimator, X, y, train, test, fit_params=estimator_params)
            for train, test in folds
        )
        logits = out_of_fold_logits([[model] for model in fitted], X, folds, self.classes_)[0]
        rng = check_random_state(self.random_state)
        pairs, response_method = [], None
        self.oof_proba_ = np.empty_like(logits)
        for model, (_, test) in zip(fitted, folds, strict=True):
            weights = None if sample_weight is None else sample_weight[test]
            pair = self._calibrate(
                model, _safe_indexing(X, test), y_encoded[test], weights, response_method
            )
            response_method = pair.response_method
            pairs.append(pair)
            self.oof_proba_[test] = self._held_out_proba(
                logits[test], y_encoded[test], weights, rng.randint(2**31 - 1)
            )
        return pairs

    def _held_out_proba(self, logits, y_encoded, sample_weight, seed: int) -> np.ndarray:
        """Each row's calibrated probabilities from a map fitted without it: the map is
        fitted on the other parts of an inner split of the rows (:func:`inner_split`).
        Rows that no map can be fitted without (a part whose other rows weigh nothing)
        keep the model's own probabilities."""
        proba = softmax(logits, axis=1)
        for train, test in inner_split(y_encoded, seed):
            weights = None if sample_weight is None else sample_weight[train]
            if weights is not None and not weights.sum() > 0:
                continue
            with warnings.catch_warnings():  # the maps of the parts warn like the fold's
                warnings.simplefilter("ignore")
                fitted = self._fit_map(logits[train], y_encoded[train], weights)
            proba[test] = fitted.predict_proba(logits[test])
        return floor_probabilities(proba)

    def _held_out_split(self, y_encoded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stratified (fit, calibration) indices with every class on both sides."""
        counts = np.bincount(y_encoded, minlength=self.classes_.size)
        if np.any(counts < 2):
            rare = int(np.flatnonzero(counts < 2)[0])
            raise ValueError(
                f"Class {self.classes_[rare].item()!r} has only {counts[rare]} sample in y; "
                f"the held-out split (validation_fraction={self.validation_fraction}) needs "
                "at least 2 samples of every class, one to fit the estimator and one to "
                "calibrate it. Pass more data, cv=None with a FrozenEstimator and calibration "
                "data of your own, or a cv splitter."
            )
        rng = check_random_state(self.random_state)
        held_out = []
        for label, count in enumerate(counts):
            members = rng.permutation(np.flatnonzero(y_encoded == label))
            n_held_out = math.floor(self.validation_fraction * count + 0.5)
            held_out.append(members[: min(max(n_held_out, 1), count - 1)])
        test = np.sort(np.concatenate(held_out))
        train = np.setdiff1d(np.arange(y_encoded.size), test, assume_unique=True)
        return train, test

    def _calibrate(self, fitted, X, y_encoded, sample_weight, response_method):
        n_classes = self.classes_.size
        logits, response_method = estimator_logits(fitted, X, n_classes, response_method)
        calibrator = self._fit_map(logits, y_encoded, sample_weight)
        return _CalibratedClassifier(fitted, calibrator, response_method, n_classes)

    def _fit_map(self, logits, y_encoded, sample_weight) -> _CalibrationMap:
        """The calibration map fitted on ``logits``, under the rules of every calibrator."""
        if sample_weight is not None and not sample_weight.sum() > 0:
            raise ValueError(
                "sample_weight sums to zero on the calibration part; at least one "
                "calibration sample needs a positive weight."
            )
        # Rows of zero weight count as absent: the map does not see them.
        weighted = y_encoded if sample_weight is None else y_encoded[sample_weight > 0]
        present = np.unique(weighted)
        if present.size < self.classes_.size:
            return fit_present_classes(
                self._make_calibrator, present, logits, y_encoded, sample_weight
            )
        return fit_map(self._make_calibrator, logits, y_encoded, sample_weight)

    def _warn_about_small_calibration_sets(self, pairs: list[_CalibratedClassifier]) -> None:
        """One warning per fit for each rule that changed a map (absent classes, too few
        rows for the map's parameters), naming what it applied to."""
        name = type(self).__name__
        classes = self.classes_.tolist()
        absent = [pair.absent_classes for pair in pairs]
        parts = [i for i, missing in enumerate(absent) if missing.size]
        if parts:
            if len(pairs) == 1:
                where = "the calibration rows hold no row of classes"
                what = repr(self.classes_[absent[0]].tolist())
            else:
                where = "the calibration rows of the cross-fitting splits hold no row of classes"
                what = ", ".join(
                    f"{self.classes_[absent[i]].tolist()!r} in split {i}" for i in parts
                )
            single = [i for i in parts if pairs[i].calibrator.map_ is None]
            nothing = ""
            if single:
                left = self.classes_[pairs[single[0]].calibrator.present_].tolist()
                nothing = (
                    f" With the single class {plain(left[0])!r} left, nothing is calibrated: "
                    "the calibrated probabilities are the model's own."
                    if len(pairs) == 1
                    else f" Splits {single} hold a single class, so nothing is calibrated "
                    "there: their probabilities are the model's own."
                )
            warnings.warn(
                f"{name}: {where} {what} (of {classes!r}); those classes keep the model's "
                "own probability and the map calibrates the other classes only."
                f"{nothing} Calibrate on rows of every class to calibrate them all.",
                UserWarning,
                stacklevel=4,
            )
        mixed = [(i, _model_mixture(pair.calibrator)) for i, pair in enumerate(pairs)]
        mixed = [(i, mixture) for i, mixture in mixed if mixture is not None]
        if mixed:
            i, mixture = mixed[0]
            where = "" if len(pairs) == 1 else f" (split {i}; {len(mixed)} of {len(pairs)} splits)"
            n_rows = _plain_number(mixture.n_rows_)
            warnings.warn(
                f"{name}: the calibration map learned {mixture.n_parameters_} parameters from "
                f"{n_rows} calibration rows{where}, more parameters than rows, so its "
                f"probabilities are mixed with the model's own at weight 1/(n + 1) = "
                f"{mixture.model_weight_:.3g}: no calibrated probability falls below "
                f"{mixture.model_weight_:.3g} times the model's. Calibrate on more rows than "
                "the map has parameters to use the map alone.",
                UserWarning,
                stacklevel=4,
            )

    # -- prediction --------------------------------------------------------------------

    def _validated_X(self, X):
        check_is_fitted(self)
        try:
            _num_features(X)
        except TypeError:
            # No feature axis (1-D or text input): the wrapped estimator judges it.
            return X
        return validate_data(self, X, reset=False, skip_check_array=True)

    def _mean_proba(self, X) -> np.ndarray:
        probas = [pair.predict_proba(X) for pair in self.calibrated_classifiers_]
        return np.mean(probas, axis=0) if len(probas) > 1 else probas[0]

    def predict_proba(self, X):
        """Calibrated class probabilities, averaged over the cross-fitted pairs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples, in whatever form the wrapped estimator accepts.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities of the classes in ``classes_``; rows sum to 1.
        """
        return self._mean_proba(self._validated_X(X))

    def predict(self, X):
        """Class with the highest calibrated probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples, in whatever form the wrapped estimator accepts.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Predicted labels, taken from ``classes_``.
        """
        proba = self._mean_proba(self._validated_X(X))
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self._get_estimator())
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.input_tags.allow_nan = inner.input_tags.allow_nan
        return tags


class ArgmaxPreservingMixin:
    """For maps that never change the top class: ``predict`` is the estimator's own.

    With a single calibrated estimator (held-out or frozen mode) ``predict`` returns
    exactly the wrapped estimator's ``predict``; with cross-fitting, or when classes were
    absent from the calibration rows (whose probabilities the map then does not scale
    with the others), the class with the highest (averaged) calibrated probability.
    """

    def predict(self, X):
        """Predicted labels: the wrapped estimator's own when only one is calibrated.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples, in whatever form the wrapped estimator accepts.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Predicted labels, taken from ``classes_``.
        """
        pairs = getattr(self, "calibrated_classifiers_", ())
        if len(pairs) == 1 and not pairs[0].absent_classes.size:
            X = self._validated_X(X)
            return pairs[0].estimator.predict(X)
        return super().predict(X)


class LogitOutputMixin:
    """For maps whose output is a logit vector: adds ``decision_function``."""

    def decision_function(self, X):
        """Calibrated logits: ``softmax`` of them is ``predict_proba``.

        With a single calibrated estimator these are the calibration map's output (for
        temperature scaling, the estimator's logits divided by the temperature); with
        cross-fitting, the logarithm of the averaged calibrated probabilities. They are
        not floored: where ``predict_proba`` raises a probability to 1e-15 (see
        :class:`PostHocCalibrator`), their softmax is below it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples, in whatever form the wrapped estimator accepts.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes) or (n_samples,)
            Calibrated logits; for two classes, the logit of ``classes_[1]`` against
            ``classes_[0]`` (positive means ``classes_[1]``), as scikit-learn does.
        """
        X = self._validated_X(X)
        if len(self.calibrated_classifiers_) == 1:
            scores = self.calibrated_classifiers_[0].decision_function(X)
        else:
            scores = np.log(np.clip(self._mean_proba(X), np.finfo(np.float64).tiny, None))
        if self.classes_.size == 2:
            return scores[:, 1] - scores[:, 0]
        return scores
