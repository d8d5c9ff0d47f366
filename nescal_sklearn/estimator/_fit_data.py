"""Preparing a fit's data, as one pure step: validate, encode, weigh, split, lay out.

:func:`prepare_fit_data` reads the fit's settings (:class:`FitSettings`) and the data
passed to ``fit`` and returns one frozen :class:`FitData`. It sets nothing on the estimator: the
estimator assigns its fitted attributes only once training has succeeded.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_consistent_length,
    column_or_1d,
    validate_data,
)

from .._params import label_kinds, plain
from ..preprocessing import ColumnLayout
from ._settings import FitSettings

__all__ = ["FitData", "largest_abs", "prepare_fit_data"]


@dataclass(frozen=True)
class FitData:
    """What a fit trains and stops on, ready for the network.

    Attributes
    ----------
    classes : ndarray
        The class labels (sorted), as ``classes_``.
    n_features_in : int
        Columns of ``X``.
    feature_names_in : ndarray of str or None
        Column names of a DataFrame ``X`` with string names.
    X_train, y_train : ndarray
        Training rows (float32) and their encoded labels (int64, indices into ``classes``).
    w_train : ndarray or None
        Training weights scaled to mean 1 (float32); None when they are all equal.
    X_valid, y_valid, w_valid : ndarray or None
        The rows early stopping watches (None without early stopping); ``w_valid`` is
        None when they are all equal.
    held_out : bool
        Whether the validation rows were held out of ``X`` (not passed as ``X_val``).
    layout : ColumnLayout or None
        The column layout the network's options use (declared, or guessed when
        ``categorical_features=None``); None when nothing needs one.
    """

    classes: np.ndarray
    n_features_in: int
    feature_names_in: np.ndarray | None
    X_train: np.ndarray
    y_train: np.ndarray
    w_train: np.ndarray | None
    X_valid: np.ndarray | None
    y_valid: np.ndarray | None
    w_valid: np.ndarray | None
    held_out: bool
    layout: ColumnLayout | None


def _row_weights(
    sample_weight, X, y, class_weights: Mapping | None, name: str
) -> np.ndarray | None:
    """``sample_weight`` times the class weights of ``y`` (None when neither is given)."""
    weights = None
    if sample_weight is not None:
        try:
            weights = _check_sample_weight(
                sample_weight, X, dtype=np.float64, ensure_non_negative=True
            )
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if not np.all(np.isfinite(weights)):
            raise ValueError(f"{name} must be finite; got a non-finite weight.")
    if class_weights is not None:
        per_class = np.array([class_weights[label] for label in y.tolist()], dtype=np.float64)
        weights = per_class if weights is None else weights * per_class
    if weights is not None and not weights.sum() > 0:
        raise ValueError(
            f"{name} sums to zero (times class_weight): sample weights must contain at "
            "least one non-zero number."
        )
    return weights


def _class_weights(class_weight, y: np.ndarray, classes: np.ndarray) -> dict | None:
    """``class_weight`` as ``{label: weight}`` ("balanced" computed on ``y``)."""
    if class_weight is None:
        return None
    labels = classes.tolist()
    if class_weight == "balanced":
        counts = np.array([np.sum(y == label) for label in classes])
        return dict(zip(labels, len(y) / (len(labels) * counts), strict=True))
    unknown = [k for k in class_weight if k not in set(labels)]
    if unknown:
        raise ValueError(
            f"class_weight has labels that are not classes of y: "
            f"{[plain(k) for k in unknown]!r}; classes are {labels!r}."
        )
    for label, value in class_weight.items():
        if isinstance(value, bool) or not (
            isinstance(value, numbers.Real) and np.isfinite(value) and value >= 0
        ):
            raise ValueError(
                f"class_weight[{plain(label)!r}] must be a finite number >= 0; got {value!r}."
            )
    return {label: float(class_weight.get(label, 1.0)) for label in labels}


#: Row numbers an error message lists before it abbreviates.
ROWS_SHOWN = 20


def _rows(indices: np.ndarray) -> str:
    """Row numbers of ``X`` for a message: the first :data:`ROWS_SHOWN`, then a count."""
    shown = ", ".join(str(int(i)) for i in np.sort(indices)[:ROWS_SHOWN])
    more = f", ... ({len(indices)} rows)" if len(indices) > ROWS_SHOWN else ""
    return f"[{shown}{more}]"


def _check_split_weights(
    settings: FitSettings, weights: np.ndarray, train: np.ndarray, valid: np.ndarray
) -> None:
    """Refuse a split that leaves every training row, or every held-out row, at weight 0.

    ``weights`` is positive somewhere (checked before the split), so one side at most
    can be all zero.
    """
    criterion = settings.early_stopping
    held_out = (
        f"early_stopping={criterion!r} holds out for validation "
        f"(validation_fraction={settings.validation_fraction})"
    )
    if not weights[train].sum() > 0:
        positive = _rows(valid[weights[valid] > 0])
        raise ValueError(
            f"sample_weight (times class_weight) is zero on every one of the {len(train)} "
            f"training rows: its positive weights are all on rows {positive}, which "
            f"{held_out}, so nothing would be learnt. Give some other rows a "
            "positive weight, pass the validation rows as X_val and y_val, or "
            "early_stopping=False."
        )
    if not weights[valid].sum() > 0:
        raise ValueError(
            f"early_stopping={criterion!r} watches the {settings.criterion.words} "
            f"weighted by sample_weight (times class_weight) on the {len(valid)} rows it "
            f"holds out (validation_fraction={settings.validation_fraction}): rows "
            f"{_rows(valid)}. sample_weight is zero on every one of them, so that NLL is "
            "undefined (0/0). Give some of these rows a positive weight, pass X_val and "
            "y_val, or early_stopping=False."
        )


def _training_weights(weights: np.ndarray | None) -> np.ndarray | None:
    """Training-row weights scaled to mean 1, as float32; None when they are all equal.

    Equal positive weights are the unweighted objective exactly, so they take its code
    path. The weights sum to more than 0 (checked before).
    """
    if weights is None or np.all(weights == weights[0]):
        return None
    return (weights / weights.mean()).astype(np.float32)


def _validation_weights(weights: np.ndarray | None) -> np.ndarray | None:
    """Validation-row weights; None when they are all equal (they sum to more than 0)."""
    if weights is None or np.all(weights == weights[0]):
        return None
    return weights


def _split(
    settings: FitSettings, y: np.ndarray, classes: np.ndarray, rng
) -> tuple[np.ndarray, np.ndarray]:
    """The training and validation row numbers: ``validation_fraction`` of the rows held
    out, stratified by class."""
    criterion = settings.early_stopping
    fraction = settings.validation_fraction
    counts = np.bincount(y, minlength=len(classes))
    n_valid = int(np.ceil(fraction * len(y)))
    if counts.min() < 2:
        raise ValueError(
            f"early_stopping={criterion!r} holds out validation_fraction={fraction} "
            "of the rows stratified by class, which needs at least 2 rows of every class; "
            f"class {plain(classes[int(counts.argmin())])!r} has {int(counts.min())}. "
            "Pass early_stopping=False, X_val and y_val, or more data."
        )
    if n_valid < len(classes) or len(y) - n_valid < len(classes):
        raise ValueError(
            f"early_stopping={criterion!r} with validation_fraction={fraction} "
            f"splits the {len(y)} rows into {len(y) - n_valid} training and {n_valid} "
            f"validation rows; each side needs at least one row of each of the "
            f"{len(classes)} classes. Pass early_stopping=False, X_val and y_val, "
            "or a different validation_fraction."
        )
    # Splitting the row numbers draws the same rows as splitting X itself.
    train, valid = train_test_split(
        np.arange(len(y)), test_size=n_valid, stratify=y, random_state=rng
    )
    return train, valid


def _validation_rows(estimator, X_val, y_val, sample_weight_val, *, classes, encoder, class_w):
    """``X_val``, ``y_val`` and their weights, checked under their own names."""
    try:
        X_valid = validate_data(estimator, X_val, dtype=np.float32, reset=False)
    except ValueError as exc:
        raise ValueError(f"X_val: {exc}") from None
    y_val = column_or_1d(y_val, warn=True)
    try:
        check_consistent_length(X_valid, y_val)
    except ValueError:
        raise ValueError(
            f"X_val and y_val must have the same number of rows; got {len(X_valid)} and "
            f"{len(y_val)}."
        ) from None
    label_kinds(y_val, "y_val")
    unknown = np.setdiff1d(y_val, classes)
    if len(unknown):
        raise ValueError(
            f"y_val contains labels not seen in y: {unknown.tolist()!r}; classes are "
            f"{classes.tolist()!r}."
        )
    w_valid = _row_weights(sample_weight_val, X_valid, y_val, class_w, "sample_weight_val")
    return X_valid, encoder.transform(y_val).astype(np.int64), w_valid


def _layout(settings: FitSettings, X_train: np.ndarray) -> ColumnLayout | None:
    """The declared layout; else the guessed one, when the network needs one."""
    declared = settings.categorical_features
    n_features = X_train.shape[1]
    if isinstance(declared, ColumnLayout):
        if declared.n_features != n_features:
            raise ValueError(
                f"categorical_features is the ColumnLayout of {declared.n_features} columns, "
                f"but X has {n_features}."
            )
        return declared
    if declared is not None:
        return ColumnLayout.from_groups(n_features, declared)
    return ColumnLayout.guess(X_train) if settings.needs_layout else None


def prepare_fit_data(
    estimator,
    settings: FitSettings,
    X,
    y,
    *,
    sample_weight=None,
    X_val=None,
    y_val=None,
    sample_weight_val=None,
    rng: np.random.RandomState | None = None,
) -> FitData:
    """Validate and prepare the data of one fit; nothing is set on ``estimator``.

    Parameters
    ----------
    estimator : NeSCalClassifier
        Used for scikit-learn's input validation (its name and tags in messages); a
        scratch copy receives what ``validate_data`` records.
    settings : FitSettings
        The fit's settings (``early_stopping``, ``validation_fraction``,
        ``class_weight``, ``categorical_features``, ``needs_layout``).
    X, y, sample_weight, X_val, y_val, sample_weight_val
        As passed to ``fit``.
    rng : RandomState
        Draws the validation split.

    Returns
    -------
    FitData
    """
    scratch = type(estimator).__new__(type(estimator))
    scratch.__dict__.update(estimator.get_params(deep=False))
    X, y = validate_data(scratch, X, y, dtype=np.float32, ensure_min_samples=2)
    label_kinds(np.asarray(y), "y")
    check_classification_targets(y)
    encoder = LabelEncoder().fit(y)
    classes = encoder.classes_
    if len(classes) < 2:
        raise ValueError(
            "NeSCalClassifier needs samples of at least 2 classes in y; got 1 class: "
            f"{plain(classes[0])!r}."
        )
    y_enc = encoder.transform(y).astype(np.int64)
    class_w = _class_weights(settings.class_weight, y, classes)
    weights = _row_weights(sample_weight, X, y, class_w, "sample_weight")
    if weights is not None and np.unique(y_enc[weights > 0]).size < 2:
        label = plain(classes[y_enc[weights > 0][0]])
        raise ValueError(
            "NeSCalClassifier needs samples of at least 2 classes with a positive weight; "
            f"sample_weight (times class_weight) leaves only class {label!r}."
        )
    criterion = settings.early_stopping
    if (X_val is None) != (y_val is None):
        raise ValueError("X_val and y_val must be passed together; got only one of them.")
    if sample_weight_val is not None and X_val is None:
        raise ValueError(
            "sample_weight_val weighs the rows of X_val; it was passed without X_val and y_val."
        )
    if X_val is not None and not criterion:
        raise ValueError(
            "X_val and y_val are passed to fit while at the same time early_stopping is "
            "False: they would be ignored. Pass early_stopping='nll' (or 'refinement') to "
            "stop on them, or leave them out."
        )
    if X_val is not None:
        X_valid, y_valid, w_valid = _validation_rows(
            scratch,
            X_val,
            y_val,
            sample_weight_val,
            classes=classes,
            encoder=encoder,
            class_w=class_w,
        )
        X_train, y_train, w_train = X, y_enc, weights
    elif criterion:
        train, valid = _split(settings, y_enc, classes, rng)
        if weights is not None:
            _check_split_weights(settings, weights, train, valid)
        X_train, X_valid, y_train, y_valid = X[train], X[valid], y_enc[train], y_enc[valid]
        w_train, w_valid = (None, None) if weights is None else (weights[train], weights[valid])
    else:
        X_train, y_train, w_train = X, y_enc, weights
        X_valid = y_valid = w_valid = None
    w_train = _training_weights(w_train)
    w_valid = _validation_weights(w_valid)
    layout = _layout(settings, X_train)
    return FitData(
        classes=classes,
        n_features_in=scratch.n_features_in_,
        feature_names_in=getattr(scratch, "feature_names_in_", None),
        X_train=np.ascontiguousarray(X_train, dtype=np.float32),
        y_train=y_train,
        w_train=w_train,
        X_valid=None if X_valid is None else np.ascontiguousarray(X_valid, dtype=np.float32),
        y_valid=y_valid,
        w_valid=w_valid,
        held_out=X_val is None and X_valid is not None,
        layout=layout,
    )


def largest_abs(X: np.ndarray) -> float:
    """The largest absolute value of ``X`` (0 for an empty array), for messages."""
    return float(np.abs(X).max()) if X.size else 0.0
