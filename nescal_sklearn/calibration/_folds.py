"""The fold layer: members fitted on folds, and their out-of-fold logits.

The rows are split into ``K`` folds. Each member estimator is fitted ``K`` times, on all
folds but one, and early-stops on the fold it did not train on when its ``fit`` takes
``X_val``/``y_val`` (:func:`takes_validation_rows`). Its predictions on the held-out folds
are *out of fold*: one per row, none from a model that trained on the row.

This module is the leaf that both the ``cv`` mode of every post-hoc calibrator
(:class:`~nescal_sklearn.calibration.PostHocCalibrator`) and the cross-fitted ensemble
(:class:`~nescal_sklearn.ensemble.CrossFitClassifier`) build on. It imports nothing of the
calibrators.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import (
    _check_method_params,
    _num_samples,
    check_array,
    column_or_1d,
)

from ._maps import PROBA_FLOOR

__all__ = [
    "check_fold_classes",
    "check_partition",
    "cross_fit",
    "estimator_logits",
    "fit_on_fold",
    "inner_split",
    "out_of_fold_logits",
    "takes_validation_rows",
    "validated_sample_weight",
]


def _scores_to_logits(scores, response_method: str, n_classes: int) -> np.ndarray | None:
    """Bring a response to logits of shape (n, n_classes); ``None`` if the shape does not fit."""
    scores = np.asarray(scores, dtype=np.float64)
    if response_method == "predict_proba":
        if scores.ndim == 2 and scores.shape[1] == n_classes:
            return np.log(np.clip(scores, PROBA_FLOOR, 1.0))
        return None
    if n_classes == 2 and (scores.ndim == 1 or (scores.ndim == 2 and scores.shape[1] == 1)):
        # scikit-learn's binary decision_function is the logit of classes_[1].
        decision = scores.reshape(-1)
        return np.column_stack([np.zeros_like(decision), decision])
    if scores.ndim == 2 and scores.shape[1] == n_classes:
        return scores
    return None


def estimator_logits(
    estimator, X, n_classes: int, response_method: str | None = None
) -> tuple[np.ndarray, str]:
    """Logits of a fitted classifier on ``X``, and the response method they came from.

    ``decision_function`` is preferred when it has one column per class (or is the 1-D
    binary score, the logit of ``classes_[1]``); otherwise the logarithm of the
    ``predict_proba`` clipped at 1e-12.

    Parameters
    ----------
    estimator : fitted classifier
        Has ``decision_function`` or ``predict_proba``.
    X : array-like
        Rows, as the estimator takes them.
    n_classes : int
        Number of classes (columns of the logits).
    response_method : {"decision_function", "predict_proba"} or None, default=None
        Use this method only; ``None`` tries ``decision_function`` first.

    Returns
    -------
    logits : ndarray of shape (n_samples, n_classes)
    response_method : str

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.calibration import estimator_logits
    >>> X, y = load_iris(return_X_y=True)
    >>> logits, method = estimator_logits(LogisticRegression().fit(X, y), X[:2], 3)
    >>> logits.shape, method
    ((2, 3), 'decision_function')
    """
    if response_method is None:
        candidates = [m for m in ("decision_function", "predict_proba") if hasattr(estimator, m)]
    else:
        candidates = [response_method]
    for method in candidates:
        logits = _scores_to_logits(getattr(estimator, method)(X), method, n_classes)
        if logits is not None:
            return logits, method
    raise ValueError(
        f"{type(estimator).__name__} gives neither a decision_function of shape (n_samples,) "
        f"or (n_samples, {n_classes}) nor a predict_proba of shape (n_samples, {n_classes}) "
        f"for its {n_classes} classes; tried {candidates}."
    )


def validated_sample_weight(sample_weight, n_samples: int) -> np.ndarray | None:
    """``sample_weight`` as a float64 vector of ``n_samples`` non-negative weights, or None.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,) or None
    n_samples : int

    Returns
    -------
    ndarray of shape (n_samples,) or None

    Raises
    ------
    ValueError
        For a wrong shape, a negative, NaN or infinite weight.
    """
    if sample_weight is None:
        return None
    sample_weight = check_array(
        sample_weight, ensure_2d=False, dtype=np.float64, input_name="sample_weight"
    )
    sample_weight = column_or_1d(sample_weight, input_name="sample_weight")
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight has shape {sample_weight.shape}; expected ({n_samples},), "
            "one weight per sample."
        )
    if np.any(sample_weight < 0):
        raise ValueError("sample_weight has negative values; weights must be non-negative.")
    return sample_weight


def takes_validation_rows(estimator) -> bool:
    """Whether ``estimator.fit`` early-stops on ``X_val``/``y_val`` it is given.

    True when ``fit`` takes ``X_val`` and ``y_val`` and the estimator's ``early_stopping``
    (if it has one) is not False or ``"auto"`` (scikit-learn's gradient boosting only
    stops early on them with ``early_stopping=True``, or on more than 10,000 rows).

    Parameters
    ----------
    estimator : estimator instance

    Returns
    -------
    bool

    Examples
    --------
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from nescal_sklearn.calibration import takes_validation_rows
    >>> takes_validation_rows(HistGradientBoostingClassifier(early_stopping=True))
    True
    >>> takes_validation_rows(HistGradientBoostingClassifier())  # early_stopping="auto"
    False
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


def fit_on_fold(
    estimator, X, y: np.ndarray, train, test, *, fit_params: dict | None = None, seed=None
):
    """A clone of ``estimator`` fitted on the rows ``train``, early-stopping on ``test``.

    The held-out rows ``test`` go to ``fit`` as ``X_val``/``y_val`` when it early-stops on
    them (:func:`takes_validation_rows`), with their ``sample_weight`` as
    ``sample_weight_val`` where ``fit`` takes that.

    Parameters
    ----------
    estimator : estimator instance
        Unfitted; it is cloned.
    X : array-like of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    train, test : ndarray of int
        The fold's training and held-out rows.
    fit_params : dict or None, default=None
        Further ``fit`` parameters, sliced to ``train`` when they have one entry per row.
    seed : int or None, default=None
        Set as every ``random_state`` parameter of the clone (nested ones too).

    Returns
    -------
    estimator
        The fitted clone.
    """
    estimator = _seeded(clone(estimator), seed)
    fit_params = {} if fit_params is None else fit_params
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
        delayed(fit_on_fold)(members[m], X, y, *folds[f], fit_params=fit_params[m], seed=seeds[f])
        for f, m in jobs
    )
    out: list[list] = [[None] * len(members) for _ in folds]
    for (f, m), model in zip(jobs, fitted, strict=True):
        out[f][m] = model
    return out


def check_fold_classes(model, classes: np.ndarray, fold: int | None) -> None:
    """Raise a ``ValueError`` unless ``model``, fitted without the rows of fold ``fold``
    (``None``: without the held-out rows of a single split), learned exactly ``classes``."""
    learned = np.asarray(model.classes_)
    if learned.shape != classes.shape or np.any(learned != classes):
        rows = "the held-out rows" if fold is None else f"the rows of fold {fold}"
        raise ValueError(
            f"{type(model).__name__} fitted without {rows} learned the "
            f"classes {learned.tolist()!r}, but y has {classes.tolist()!r}: every class "
            "needs rows in every fold's training part. Use fewer folds, or more rows of "
            "the rare classes."
        )


def check_partition(folds: Sequence[tuple], n_samples: int, cv=None) -> None:
    """Raise a ``ValueError`` unless the test parts of ``folds`` hold every row exactly once.

    Cross-fitting gives each row one out-of-fold prediction, from the fold model that
    held it out; a row in no test part would have none, a row in several would have
    several. ``ShuffleSplit``, ``RepeatedStratifiedKFold`` and a ``PredefinedSplit``
    with unassigned rows are not partitions.

    Parameters
    ----------
    folds : sequence of (train, test) index arrays
    n_samples : int
        Number of rows.
    cv : object, default=None
        The splitter that made ``folds``, named in the message.

    Raises
    ------
    ValueError
        Naming ``cv`` and how many rows are in no test part, in several, or outside
        the data, or a fold that trains on rows it holds out.
    """
    tests = [np.asarray(test, dtype=np.intp).reshape(-1) for _, test in folds]
    every = np.concatenate(tests) if tests else np.empty(0, dtype=np.intp)
    outside = every[(every < 0) | (every >= n_samples)]
    counts = np.bincount(every[(every >= 0) & (every < n_samples)], minlength=n_samples)
    problems = []
    if outside.size:
        problems.append(
            f"name {np.unique(outside).size} rows that X does not have "
            f"(e.g. {int(outside[0])}; X has {n_samples} rows)"
        )
    if np.any(counts == 0):
        problems.append(f"leave {int(np.sum(counts == 0))} of the {n_samples} rows in no test part")
    if np.any(counts > 1):
        problems.append(f"put {int(np.sum(counts > 1))} rows in two or more")
    for f, ((train, _), test) in enumerate(zip(folds, tests, strict=True)):
        both = np.intersect1d(np.asarray(train, dtype=np.intp), test).size
        if both:
            problems.append(f"fold {f} trains on {both} of the rows it holds out")
            break
    if problems:
        named = "cv" if cv is None else f"cv={cv!r}"
        raise ValueError(
            f"{named} does not split the rows into a partition: its {len(folds)} test parts "
            f"{' and '.join(problems)}. Cross-fitting needs every row in exactly one test "
            "part, which holds it out of one fold model and gives it one out-of-fold "
            "prediction: use KFold, StratifiedKFold, GroupKFold or StratifiedGroupKFold, "
            "or an int."
        )


def inner_split(y: np.ndarray, random_state, n_splits: int = 5) -> list[tuple]:
    """A stratified, shuffled split of rows into ``n_splits`` parts, for maps fitted on all
    parts but one (fewer parts when a class has fewer rows; not stratified when no class
    has two rows; none for a single row).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    random_state : int, RandomState instance or None
        Seeds the shuffle.
    n_splits : int, default=5
        The most parts: at least 2, at most the rows of the rarest class present.

    Returns
    -------
    list of (train, test) index arrays
    """
    if y.size < 2:
        return []
    counts = np.bincount(y)
    if counts.max() < 2:  # a time-out's few held-out rows, one of each class
        splitter = KFold(min(n_splits, y.size), shuffle=True, random_state=random_state)
        return list(splitter.split(y))
    n_splits = int(max(2, min(n_splits, counts[counts > 0].min())))
    with warnings.catch_warnings():  # a class of fewer rows than parts: scikit-learn warns
        warnings.simplefilter("ignore", UserWarning)
        splitter = StratifiedKFold(n_splits, shuffle=True, random_state=random_state)
        return list(splitter.split(np.zeros(y.size), y))


def out_of_fold_logits(
    fitted: Sequence[Sequence], X, folds, classes: np.ndarray
) -> list[np.ndarray]:
    """Each member's logits on the rows of the folds it did not train on.

    Parameters
    ----------
    fitted : sequence of sequence of fitted estimators
        ``fitted[f][m]``, as :func:`cross_fit` returns.
    X : array-like of shape (n_samples, n_features)
    folds : sequence of (train, test) index arrays
        Their test parts must partition the rows: every row in exactly one
        (:func:`check_partition`).
    classes : ndarray of shape (n_classes,)
        The classes every fold model must have learned.

    Returns
    -------
    list of ndarray of shape (n_samples, n_classes)
        One per member: row ``i`` holds the logits of the fold model that held row ``i``
        out.

    Raises
    ------
    ValueError
        When the test parts of ``folds`` are not a partition of the rows.
    """
    n_members = len(fitted[0])
    n_samples = _num_samples(X)
    check_partition(folds, n_samples)
    out = [np.empty((n_samples, classes.size)) for _ in range(n_members)]
    for f, (_, test) in enumerate(folds):
        for m, model in enumerate(fitted[f]):
            check_fold_classes(model, classes, f)
            out[m][test] = estimator_logits(model, _safe_indexing(X, test), classes.size)[0]
    return out
