"""``CrossFitClassifier``: members cross-fitted on the same folds, weighted and calibrated
out of fold.

Every row trains and every row calibrates. :func:`~._schedule.fit_in_stages` fits the
members fold by fold within the time budget (:mod:`._budget`) through the fold layer
(:mod:`nescal_sklearn.model_selection`: folds, fold fits, out-of-fold logits); their
out-of-fold logits are weighed by the greedy selection (:func:`greedy_ensemble_weights`,
or one of its stricter rules) or stacked by a logistic regression (:func:`fit_stacker`),
and the calibration room chooses and fits one map on the ensemble's out-of-fold
logits (:func:`~nescal_sklearn.calibration.select_calibration`). With ``refit=True`` each
member is refitted on all rows as its fold models trained (:mod:`._refit`).
"""

from __future__ import annotations

import numbers
import os
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin
from sklearn.utils import _safe_indexing, check_random_state, indexable
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _routing_enabled,
    process_routing,
)
from sklearn.utils.metaestimators import _BaseComposition
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ..calibration import (
    CALIBRATIONS,
    calibrate_probabilities,
    fit_calibration,
    log_probabilities,
    select_calibration,
)
from ..estimator import prediction_threads
from ..metrics.logits import weighted_nll
from ..model_selection import (
    estimator_logits,
    make_folds,
    out_of_fold_logits,
    validated_sample_weight,
)
from ._budget import CLOCK, FIT_SHARE, REFIT_FIT_SHARE, TimeBudget
from ._greedy import GREEDY_RULES, greedy_ensemble_weights
from ._members import checked_labels, member_fit_params, relative_weights
from ._refit import refit_on_all_rows
from ._schedule import StagedFits, fit_in_stages, reissue, threads_per_fit
from ._stacker import fit_stacker, stacker_features, stacker_proba

__all__ = ["CrossFitClassifier"]


def _applies(name: str, n_classes: int) -> bool:
    kind = CALIBRATIONS[name][1]
    return kind == "any" or (kind == "binary") == (n_classes == 2)


@dataclass(frozen=True, kw_only=True)
class _Prepared:
    """What :meth:`CrossFitClassifier.fit` fits on, checked: the members, the rows,
    labels and weights, each member's ``fit`` parameters, the candidate maps, the folds,
    a seed per fold (None without ``random_state``) and the generator that drew them."""

    names: list[str]
    members: list
    X: Any
    y: np.ndarray
    classes: np.ndarray
    y_encoded: np.ndarray
    sample_weight: np.ndarray | None
    fit_params: list[dict]
    candidates: list[str]
    folds: list[tuple[np.ndarray, np.ndarray]]
    seeds: list[int] | None
    rng: np.random.RandomState


@dataclass(frozen=True)
class _OutOfFold:
    """The rows that weigh the members and choose the map: every row, or after a
    time-out the held-out rows of the finished folds (``rows``, sorted), re-indexed so
    that the test parts of ``parts`` index ``X``."""

    X: Any
    y: np.ndarray
    w: np.ndarray | None
    parts: list[tuple[np.ndarray, np.ndarray]]
    rows: np.ndarray | None = None

    def on_all_rows(self, values: np.ndarray, n_rows: int) -> np.ndarray:
        """``values`` of these rows on all ``n_rows`` training rows (NaN on the others)."""
        if self.rows is None:
            return values
        out = np.full((n_rows, values.shape[1]), np.nan)
        out[self.rows] = values
        return out


def _out_of_fold(staged: StagedFits, data: _Prepared) -> _OutOfFold:
    """The out-of-fold rows of the folds ``staged`` finished."""
    if not staged.timed_out:
        return _OutOfFold(
            data.X, data.y_encoded, data.sample_weight, [data.folds[f] for f in staged.folds]
        )
    rows = np.sort(np.concatenate([data.folds[f][1] for f in staged.folds]))
    none = np.empty(0, dtype=np.intp)  # the fold models are fitted already
    parts = [(none, np.searchsorted(rows, data.folds[f][1])) for f in staged.folds]
    w = None if data.sample_weight is None else data.sample_weight[rows]
    return _OutOfFold(_safe_indexing(data.X, rows), data.y_encoded[rows], w, parts, rows)


class CrossFitClassifier(ClassifierMixin, MetaEstimatorMixin, _BaseComposition, BaseEstimator):
    """Members cross-fitted on the same folds, weighted and calibrated out of fold.

    Every row trains and every row calibrates. The rows are split into ``cv`` stratified
    folds; each member is fitted once per fold on the other folds, and early-stops on the
    fold it did not train on when its ``fit`` takes ``X_val``/``y_val``
    (``NeSCalClassifier``, ``HistGradientBoostingClassifier(early_stopping=True)``). The
    members' out-of-fold probabilities, one per row from a model that never saw it, then:

    1. **weigh the members** by greedy ensemble selection with replacement (Caruana et
       al., 2004; AutoGluon's weighted ensemble): ``weights_``; or stack them
       (``weighting="stacker"``);
    2. **fit one calibration map** on the ensemble's out-of-fold logits of all
       rows, ``calibration="auto"`` choosing among no map, temperature scaling (mixed
       with the uniform distribution at ``1/(n + 1)``, probmetrics' ts-mix), quadratic
       scaling (binary) and structured matrix scaling (multiclass) by an inner
       cross-validation on those rows that prefers the simpler map unless a more complex
       one is better beyond one standard error (:func:`select_calibration`).

    Prediction averages the fold models of each member with ``weights_`` and applies the
    map to that average (with the stacker: averages each member's fold models, stacks
    them and applies the map).

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
        ``"sms"`` (structured matrix scaling) needs at least 3 classes. ``"auto"``
        chooses among the maps that apply the simplest within one standard error of the
        best (:func:`select_calibration`).
    ensemble_size : int, default=25
        Additions of the greedy ensemble selection (with one member, or with
        ``weighting="stacker"`` past the first fold's screening, unused).
    weighting : {"greedy", "best_prefix", "greedy_1se", "stacker"}, default="greedy"
        How the members' out-of-fold probabilities make the ensemble the map calibrates:

        - ``"greedy"``: the share of the ``ensemble_size`` greedy additions each member
          got (:func:`greedy_ensemble_weights`);
        - ``"best_prefix"``: the shares of the first ``k`` additions only, for the ``k``
          of lowest out-of-fold NLL (the earliest on ties; AutoGluon's ``use_best``);
        - ``"greedy_1se"``: the greedy additions, where a member not yet in the ensemble
          is added only if it lowers the ensemble's out-of-fold NLL by more than one
          standard error of the per-row differences (weighted by ``sample_weight``);
          otherwise the best member already in it is added;
        - ``"stacker"``: a multinomial logistic regression on the members' standardised
          out-of-fold logits (:func:`fit_stacker`, ``stacker_``), its ``C`` chosen among
          ``(0.01, 0.1, 1, 10)`` by an inner stratified cross-validation of the
          out-of-fold rows; the map is chosen and fitted on the stacker's held-out
          probabilities of that cross-validation, so it never sees a stacker's
          prediction of a row it trained on. Each member the stacker reads (every one
          kept) gets the weight ``1/k`` in ``weights_``, which ``refit`` and
          prediction read as "used".

        The screening of ``prune`` uses the greedy weights whatever the rule.
    n_jobs : int or None, default=None
        Member fits run in parallel through joblib (a dask cluster runs them with
        ``joblib.parallel_backend("dask")``). Members should use one thread each
        (``NeSCalClassifier``'s default ``n_threads=1``). Prediction runs the members
        one after another, a ``NeSCalClassifier``'s forward pass on
        ``joblib.effective_n_jobs(n_jobs)`` threads whatever its ``n_threads``
        (:func:`~nescal_sklearn.estimator.prediction_threads`); other members predict
        on their own threads (gradient boosting's OpenMP pool: every core).
    prune : bool, default=False
        Fit every member on the first fold first, weigh the members by the greedy
        selection (``weighting="greedy"``, whatever ``weighting`` is) on that fold's
        held-out rows, and drop a member of weight 0 there: it is not fitted on the
        other folds (and ``dropped_`` says so). With one member, unused. The
        recommended model (:func:`make_recommended_classifier`) prunes.
    refit : bool, default=False
        Serve one model per member instead of one per fold: after the cross-fitting,
        every member of positive weight is refitted on all rows for as long as its fold
        models trained (a ``NeSCalClassifier`` for the mean of their best epochs, its
        warm-up for the mean of theirs; gradient boosting for the mean of their
        iterations; any other member as it is), and predictions average these with
        ``weights_`` through the map chosen out of fold (AutoGluon's ``refit_full``).
        The fold models are not kept: a smaller model, ``K`` times faster to predict.
        Its held-out figures (``oof_proba_``, ``calibration_scores_``) are the
        cross-fitted model's.
    time_limit : float or None, default=None
        Wall-clock seconds for the whole fit, counted from the start of ``fit`` (the
        checks of the data and the start of joblib's workers count). The member fits
        take up to 90 % of it (65 % with ``refit=True``, whose refits take the next
        25 %). A member whose ``fit`` can stop on time (a ``time_limit`` parameter, as
        ``NeSCalClassifier`` has, or scikit-learn's ``HistGradientBoostingClassifier``,
        then trained in rounds of trees with ``warm_start``, the same trees given the
        time) gets the smaller of its own limit and its share of the time left; a fit
        whose share is too small (under a millisecond) or that would start after the
        deadline is not started, and counts as timed out (a fit that cannot stop on
        time, such as a random forest's, and starts just before the deadline, ends after
        it). Every member's first fold and every refit run whatever the time, so ``fit``
        never fails for lack of it: the model is the ensemble of the folds that
        finished, weighted and calibrated on their held-out rows, and ``fit`` warns when
        folds were left out (``timed_out_``). The clock is this machine's: the member
        fits must run on it (loky's or a local dask cluster's workers). None: no limit.
    early_stopping_rows : {"held_out", "own"}, default="held_out"
        The rows a member that early-stops stops on
        (:func:`~nescal_sklearn.model_selection.takes_validation_rows`). ``"held_out"``:
        its fold's held-out rows, whose out-of-fold predictions are then those of the
        epoch (or tree) that was best on them, a little optimistic; ``"own"``: rows it
        holds out of its fold's training part itself (a ``NeSCalClassifier``'s
        ``validation_fraction``, gradient boosting's), so that no out-of-fold prediction
        chose its own model, which trains on fewer rows.
    random_state : int, RandomState instance or None, default=None
        Seeds the folds, the inner cross-validation of the map, and every member's
        ``random_state`` (a different seed per fold).
    verbose : int, default=0
        With 1 or more, a line per member fit (member, fold, its seconds, the fits done,
        the time elapsed and an estimate of the time to go) and the first fold's
        weights; quiet by default.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features seen during ``fit``.
    estimators_ : list of list of estimators
        ``estimators_[f][m]``: member ``m`` fitted without fold ``f`` (of the folds in
        ``folds_``); None for a member dropped by ``prune``.
    folds_ : list of ndarray
        The held-out rows of each fold the model is made of.
    refitted_ : list of estimators or None
        With ``refit=True``: each member refitted on all rows (None for a member of
        weight 0), the models that predict; ``estimators_`` is then None.
    weights_ : ndarray of shape (n_members,)
        The members' weights (sum 1); with ``weighting="stacker"``, ``1/k`` on each of
        the ``k`` members the stacker reads.
    stacker_ : Pipeline or None
        With ``weighting="stacker"``: the stacker (``StandardScaler`` then
        ``LogisticRegression``, :func:`fit_stacker`) fitted on all out-of-fold rows, on
        the features :func:`stacker_features` makes of the used members'
        probabilities (in member order); None otherwise.
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
        ensemble's calibration on every training row. NaN on the rows of folds a
        ``time_limit`` left out.
    member_oof_nll_ : dict of str to float
        Each fitted member's out-of-fold NLL (uncalibrated).
    dropped_ : dict of str to str
        The members not fitted past the first fold, and why.
    fit_seconds_ : ndarray of shape (n_folds, n_members)
        Wall seconds of each member fit (NaN where none ran).
    timed_out_ : bool
        Whether ``time_limit`` left folds out.

    Notes
    -----
    **Rows that belong together stay in one fold.** When a row and its copy fall in
    different folds, the copy trains the fold model that predicts the row "out of
    fold": ``oof_proba_``, the member weights, early stopping and the map's choice then
    see in-sample predictions. ``fit(X, y, groups=g)`` keeps the rows of each group in
    one fold (``cv=int`` becomes ``StratifiedGroupKFold``; a splitter such as
    ``GroupKFold`` gets ``g``). Without ``groups``, ``cv=int`` takes the groups of exact
    duplicate rows of ``X`` (as ``fit`` receives it: the preprocessed matrix inside a
    pipeline), so copies share a fold; data without duplicates keeps its
    ``StratifiedKFold`` folds. This is the default rather than a warning because a
    warning leaves the answer wrong: with every row of 150 given twice (the review's
    case, ``reliability-8e13b82.md`` N44), the out-of-fold NLL was 0.07 against 0.54 on
    fresh rows; with copies in one fold it is 0.30 against 0.34, the fresh NLL of the
    rows fitted once (3 data seeds: fresh NLL 0.38-0.54 without, 0.34-0.36 with). Where
    duplicates are natural (3,000 rows of the dev set letter, 2.9 % of them in groups of
    copies), it changes little: out-of-fold NLL 0.464 -> 0.469, fresh 0.389 -> 0.388. When a
    splitter (or ``groups`` it ignores) still puts a group or copies in several test
    parts, ``fit`` warns once with their count. Data made of few distinct rows (5 or
    more rows per distinct row on average, a table of a few categorical columns) gets
    the plain stratified folds instead, as fresh rows repeat its rows, with a warning
    that says so (:func:`~nescal_sklearn.model_selection.make_folds`; the rule and its
    figures: ``docs/calibration.md``, "Copies of few distinct rows"). Group ids may be of
    any hashable kind (strings, floats, large or negative integers).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from nescal_sklearn.ensemble import CrossFitClassifier
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
        "ensemble_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "weighting": [StrOptions({*GREEDY_RULES, "stacker"})],
        "n_jobs": [None, numbers.Integral],
        "random_state": ["random_state"],
        "prune": ["boolean"],
        "refit": ["boolean"],
        "time_limit": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "early_stopping_rows": [StrOptions({"held_out", "own"})],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimators,
        *,
        cv=5,
        calibration="auto",
        ensemble_size=25,
        weighting="greedy",
        n_jobs=None,
        prune=False,
        refit=False,
        time_limit=None,
        early_stopping_rows="held_out",
        random_state=None,
        verbose=0,
    ):
        self.estimators = estimators
        self.cv = cv
        self.calibration = calibration
        self.ensemble_size = ensemble_size
        self.weighting = weighting
        self.n_jobs = n_jobs
        self.prune = prune
        self.refit = refit
        self.time_limit = time_limit
        self.early_stopping_rows = early_stopping_rows
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

    def fit(self, X, y, sample_weight=None, groups=None, *, started_at=None):
        """Cross-fit the members, weigh them and fit the calibration map out of fold.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows, in whatever form the members accept.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the rows: passed to every member's ``fit`` (a ``Pipeline``
            member's as ``<last step>__sample_weight``; a member that takes none is
            refused) and used by the member weights and the map. Only their ratios
            matter: they are rescaled to mean 1 first, so all-equal weights give the
            unweighted model, whatever they sum to.
        groups : array-like of shape (n_samples,) or None, default=None
            Group of each row, for rows that must stay in one fold (repeated
            measurements, or copies): ``cv=int`` then makes ``StratifiedGroupKFold``
            folds, and a splitter gets them (``GroupKFold``, ``StratifiedGroupKFold``).
            Without groups, exact duplicate rows are the groups of ``cv=int`` (see
            Notes).
        started_at : float or None, default=None
            The ``time.time()`` from which ``time_limit`` counts; None: the call of
            ``fit``. A pipeline passes the time its own ``fit`` started, so that its
            earlier steps (the preprocessing) count against the limit, as
            :func:`make_recommended_classifier`'s pipeline does.

        Returns
        -------
        self : CrossFitClassifier

        Raises
        ------
        ValueError
            When a class has no row in some fold's training part, a fold no positive
            weight, or ``cv`` does not split the rows into a partition; when
            ``time_limit`` leaves one held-out row (a ``cv`` of one-row test parts);
            when ``started_at`` is not a finite number of seconds up to now.
        TypeError
            When ``sample_weight`` is given and a member cannot take it.
        """
        start = CLOCK()  # the time budget counts every step from here
        if started_at is not None:
            number = isinstance(started_at, numbers.Real) and not isinstance(started_at, bool)
            if not number or not -np.inf < started_at <= start:
                raise ValueError(
                    f"started_at must be a time.time() up to now ({start}); got {started_at!r}."
                )
            start = float(started_at)
        self._validate_params()
        data = self._prepare(X, y, sample_weight, groups)
        staged = fit_in_stages(
            data.members,
            data.names,
            data.X,
            data.y,
            data.folds,
            fit_params=data.fit_params,
            seeds=[None] * len(data.folds) if data.seeds is None else data.seeds,
            n_jobs=self.n_jobs,
            budget=TimeBudget.of_fit(
                start, self.time_limit, REFIT_FIT_SHARE if self.refit else FIT_SHARE
            ),
            screen=self._screen(data) if self.prune else None,
            verbose=self.verbose,
            stop_on_test=self.early_stopping_rows == "held_out",
        )
        oof = _out_of_fold(staged, data)
        if oof.y.size < 2:
            raise ValueError(
                f"time_limit={self.time_limit} s ran out after {len(staged.folds)} of "
                f"{len(data.folds)} folds, whose one held-out row cannot weigh the members "
                "and choose a map; pass a longer time_limit, or a cv of larger test parts."
            )
        # the map is chosen by the end of the limit, or by the refits' end with refit=True
        share = FIT_SHARE if self.refit else 1.0
        deadline = None if self.time_limit is None else start + share * self.time_limit
        self._weigh_and_calibrate(staged, data, oof, deadline)
        self._set_fitted(staged, data)
        if self.refit:
            budget = TimeBudget.of_fit(start, self.time_limit, FIT_SHARE, needed=True)
            self.refitted_ = self._refit(data, budget)
            self.estimators_ = None
        if staged.timed_out:
            warnings.warn(
                f"CrossFitClassifier: time_limit={self.time_limit} s ran out after "
                f"{len(staged.folds)} of {len(data.folds)} folds; the model is the ensemble "
                f"of those folds, weighted and calibrated on their {oof.y.size} held-out "
                f"rows (oof_proba_ is NaN on the other {data.y_encoded.size - oof.y.size}). "
                "Pass a longer time_limit for every fold.",
                UserWarning,
                stacklevel=2,
            )
        return self

    def _prepare(self, X, y, sample_weight, groups) -> _Prepared:
        """The checked members, rows, labels, weights and folds, and the fold seeds."""
        names, members = self._checked_members()
        X, y = validate_data(self, X, y, skip_check_array=True)
        y = checked_labels(y)
        check_classification_targets(y)
        y = column_or_1d(y, warn=True)
        X, y = indexable(X, y)
        classes, y_encoded = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"CrossFitClassifier needs at least 2 classes in y; got {classes.tolist()!r}."
            )
        sample_weight = relative_weights(validated_sample_weight(sample_weight, y.shape[0]))
        groups = None if groups is None else column_or_1d(groups, input_name="groups")
        check_consistent_length(y, groups)
        fit_params = self._member_params(names, members, sample_weight, groups)
        candidates = self._candidates(classes.size)
        rng = check_random_state(self.random_state)
        folds = make_folds(
            self.cv, X, y_encoded, classes, groups=groups, sample_weight=sample_weight, rng=rng
        )
        seeds = (
            None
            if self.random_state is None
            else [int(s) for s in rng.randint(2**31 - 1, size=len(folds))]
        )
        return _Prepared(
            names=names,
            members=members,
            X=X,
            y=y,
            classes=classes,
            y_encoded=y_encoded,
            sample_weight=sample_weight,
            fit_params=fit_params,
            candidates=candidates,
            folds=folds,
            seeds=seeds,
            rng=rng,
        )

    def _weigh_and_calibrate(
        self, staged: StagedFits, data: _Prepared, oof: _OutOfFold, deadline: float | None
    ):
        """The members' weights (or stacker) and the map, chosen and fitted on the
        out-of-fold rows ``oof``: ``weights_``, ``stacker_``, ``calibration_``,
        ``calibration_scores_``, ``calibrator_``, ``oof_proba_`` and
        ``member_oof_nll_``. The map's choice leaves out a candidate that would end
        after ``deadline`` (:func:`select_calibration`)."""
        kept = [m for m, is_kept in enumerate(staged.kept) if is_kept]
        fitted = [[staged.models[f][m] for m in kept] for f in staged.folds]
        logits = out_of_fold_logits(fitted, oof.X, oof.parts, data.classes)
        probas = [softmax(z, axis=1) for z in logits]
        weights = np.zeros(len(data.members))
        self.stacker_ = None
        if self.weighting == "stacker":
            weights[kept] = 1.0 / len(kept)
            seed = data.rng.randint(2**31 - 1)
            self.stacker_, held_out = fit_stacker(probas, oof.y, oof.w, random_state=seed)
            ensemble = log_probabilities(held_out)
        else:
            weights[kept] = greedy_ensemble_weights(
                probas, oof.y, oof.w, self.ensemble_size, rule=self.weighting
            )
            ensemble = log_probabilities(np.einsum("m,mnc->nc", weights[kept], np.stack(probas)))
        name, scores, held_out = select_calibration(
            ensemble,
            oof.y,
            data.candidates,
            sample_weight=oof.w,
            random_state=data.rng.randint(2**31 - 1),
            deadline=deadline,
        )
        self.weights_ = weights
        self.calibration_ = name
        self.calibration_scores_ = scores
        self.calibrator_ = fit_calibration(name, ensemble, oof.y, oof.w)
        self.oof_proba_ = oof.on_all_rows(held_out, data.y_encoded.size)
        self.member_oof_nll_ = {
            data.names[m]: weighted_nll(log_softmax(z, axis=1), oof.y, oof.w)
            for m, z in zip(kept, logits, strict=True)
        }

    def _set_fitted(self, staged: StagedFits, data: _Prepared) -> None:
        """The fitted attributes of the cross-fitting itself."""
        self.classes_ = data.classes
        self.estimators_ = [
            [staged.models[f][m] if staged.kept[m] else None for m in range(len(data.members))]
            for f in staged.folds
        ]
        self.folds_ = [data.folds[f][1] for f in staged.folds]
        self.dropped_ = staged.dropped
        self.fit_seconds_ = staged.seconds
        self.timed_out_ = staged.timed_out
        self.refitted_ = None

    def _member_params(self, names, members, sample_weight, groups) -> list[dict]:
        """Each member's ``fit`` parameters: routed when scikit-learn's metadata routing
        is enabled, otherwise the weights (:func:`member_fit_params`)."""
        if not _routing_enabled():
            return member_fit_params(names, members, sample_weight)
        routed = process_routing(self, "fit", sample_weight=sample_weight, groups=groups)
        return [dict(routed[name].fit) for name in names]

    def get_metadata_routing(self) -> MetadataRouter:
        """Metadata routing of this ensemble (used when routing is enabled).

        The ensemble consumes ``sample_weight`` (member weights and map) and ``groups``
        (the folds) itself, and routes the metadata passed to its ``fit`` on to each
        member's ``fit``, as the member requested with ``set_fit_request``. See
        scikit-learn's metadata routing user guide.

        Returns
        -------
        routing : sklearn.utils.metadata_routing.MetadataRouter
            The routing information.

        Examples
        --------
        >>> import numpy as np
        >>> import sklearn
        >>> from sklearn.datasets import load_breast_cancer
        >>> from sklearn.naive_bayes import GaussianNB
        >>> from nescal_sklearn.ensemble import CrossFitClassifier
        >>> X, y = load_breast_cancer(return_X_y=True)
        >>> with sklearn.config_context(enable_metadata_routing=True):
        ...     member = GaussianNB().set_fit_request(sample_weight=True)
        ...     model = CrossFitClassifier([("nb", member)], cv=3, random_state=0)
        ...     model = model.fit(X, y, sample_weight=np.where(y == 1, 2.0, 1.0))
        >>> model.oof_proba_.shape
        (569, 2)
        """
        router = MetadataRouter(owner=self).add_self_request(self)
        for name, estimator in zip(*self._checked_members(), strict=True):
            router.add(
                **{name: estimator},
                method_mapping=MethodMapping().add(caller="fit", callee="fit"),
            )
        return router

    def _screen(self, data: _Prepared):
        """The screening of :func:`fit_in_stages`: the members' greedy weights on the
        first fold's held-out rows."""
        test = data.folds[0][1]

        def weights(models: list) -> np.ndarray:
            X_test = _safe_indexing(data.X, test)
            probas = [
                softmax(estimator_logits(model, X_test, data.classes.size)[0], axis=1)
                for model in models
            ]
            w = None if data.sample_weight is None else data.sample_weight[test]
            return greedy_ensemble_weights(probas, data.y_encoded[test], w, self.ensemble_size)

        return weights

    def _refit(self, data: _Prepared, budget: TimeBudget | None) -> list:
        """Each member of positive weight refitted on all rows (:func:`refit_on_all_rows`),
        in parallel; None for the others."""
        used = np.flatnonzero(self.weights_ > 0)
        seed = None if data.seeds is None else data.seeds[0]
        jobs = Parallel(n_jobs=self.n_jobs)(
            delayed(refit_on_all_rows)(
                data.members[m],
                [models[m] for models in self.estimators_],
                data.X,
                data.y,
                name=data.names[m],
                fit_params=data.fit_params[m],
                seed=seed,
                budget=budget,
                parent=os.getpid(),
                threads=threads_per_fit(min(effective_n_jobs(self.n_jobs), len(used))),
            )
            for m in used
        )
        refitted, registry = [None] * len(data.members), {}
        for m, (model, _, kept) in zip(used, jobs, strict=True):
            reissue(kept, registry)
            refitted[m] = model
        return refitted

    def _fold_probas(self, X) -> list[np.ndarray]:
        """Each fold's weighted ensemble of its member models' probabilities (one
        ensemble of the refitted members with ``refit=True``)."""
        used = np.flatnonzero(self.weights_ > 0)
        out = []
        groups = self.estimators_ if self.refitted_ is None else [self.refitted_]
        for models in groups:
            total = 0.0
            for m in used:
                logits = estimator_logits(models[m], X, self.classes_.size)[0]
                total = total + self.weights_[m] * softmax(logits, axis=1)
            out.append(total / self.weights_[used].sum())
        return out

    def _stacked_proba(self, X) -> np.ndarray:
        """The stacker's probabilities of the used members' probabilities, each averaged
        over its fold models (its refitted model with ``refit=True``)."""
        groups = self.estimators_ if self.refitted_ is None else [self.refitted_]
        n_classes = self.classes_.size
        probas = [
            np.mean(
                [
                    softmax(estimator_logits(models[m], X, n_classes)[0], axis=1)
                    for models in groups
                ],
                axis=0,
            )
            for m in np.flatnonzero(self.weights_ > 0)
        ]
        return stacker_proba(self.stacker_, stacker_features(probas), n_classes)

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities of the weighted (or stacked), cross-fitted ensemble.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "calibrator_")
        X = validate_data(self, X, reset=False, skip_check_array=True)
        with prediction_threads(effective_n_jobs(self.n_jobs)):  # members one at a time
            if getattr(self, "stacker_", None) is not None:
                proba = self._stacked_proba(X)
            else:
                proba = np.mean(self._fold_probas(X), axis=0)
        return calibrate_probabilities(self.calibrator_, proba)

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
