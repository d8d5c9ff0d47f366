"""Input checks shared by every calibration metric (private to the metrics room)."""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

from .._params import plain

TOP_LABEL = "top_label"
STRATEGIES = ("uniform", "quantile")
# Rows of ``y_proba`` must sum to 1 within this relative tolerance (float64 input); lower
# precisions get sqrt(machine epsilon) instead (3.5e-4 for float32), as in scikit-learn.
ROW_SUM_RTOL = 1e-6


class CheckedProba(NamedTuple):
    """Validated classification inputs in one canonical form."""

    y_index: np.ndarray  # (n,) int: column of y_proba holding each row's true class
    proba: np.ndarray  # (n, C) float64
    labels: np.ndarray  # (C,) the class of each column
    sample_weight: np.ndarray  # (n,) float64, non-negative, positive sum


def check_n_bins(n_bins: Any) -> int:
    """Return ``n_bins`` as an int, or raise if it is not an integer >= 1."""
    if (
        isinstance(n_bins, bool | np.bool_)
        or not isinstance(n_bins, numbers.Integral)
        or n_bins < 1
    ):
        raise ValueError(f"n_bins must be an integer >= 1; got {plain(n_bins)!r}.")
    return int(n_bins)


def check_strategy(strategy: Any) -> str:
    """Return ``strategy`` or raise if it is not one of :data:`STRATEGIES`."""
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ValueError(f"strategy must be 'uniform' or 'quantile'; got {plain(strategy)!r}.")
    return strategy


def resolve_kind(kind: Any, labels: np.ndarray) -> int | None:
    """Map ``kind`` to a column index, or ``None`` for the top label."""
    if isinstance(kind, str) and kind == TOP_LABEL:
        return None
    for index, label in enumerate(labels.tolist()):
        if bool(label == kind):
            return index
    raise ValueError(
        f"kind must be 'top_label' or one of the classes {labels.tolist()}; got {plain(kind)!r}."
    )


def check_classification_proba(
    y_true: Any,
    y_proba: Any,
    *,
    labels: Any = None,
    sample_weight: Any = None,
) -> CheckedProba:
    """Validate ``y_true``/``y_proba``/``labels``/``sample_weight`` together.

    ``y_proba`` of shape ``(n,)`` or ``(n, 1)`` holds the probability of the second
    class of a binary problem and is expanded to ``(n, 2)``.
    """
    y_true = _check_y_true(y_true)
    proba = _check_y_proba(y_proba)
    if proba.shape[0] != y_true.shape[0]:
        raise ValueError(
            "y_true and y_proba must have the same number of samples; "
            f"got {y_true.shape[0]} and {proba.shape[0]}."
        )
    if proba.shape[1] == 1:
        proba = np.hstack([1.0 - proba, proba])
    n_columns = proba.shape[1]

    if labels is None:
        labels = np.unique(y_true)
        if labels.shape[0] != n_columns:
            raise ValueError(
                f"y_true contains the classes {labels.tolist()} but y_proba has "
                f"probabilities for {n_columns} classes. Pass the full, ordered list of "
                "classes through the labels argument (e.g. labels=estimator.classes_)."
            )
    else:
        labels = _check_labels(labels)
        if labels.shape[0] != n_columns:
            raise ValueError(
                f"labels has {labels.shape[0]} classes {labels.tolist()} but y_proba has "
                f"probabilities for {n_columns} classes."
            )
    y_index = _encode(y_true, labels)
    weights = _check_sample_weight(sample_weight, y_true.shape[0])
    return CheckedProba(y_index, proba, labels, weights)


def _row_lengths(rows: Any) -> list[int] | None:
    """Length of each row of a nested sequence, or ``None`` if it is not one."""
    try:
        if any(isinstance(row, str | bytes) for row in rows):
            return None
        return [len(row) for row in rows]
    except TypeError:
        return None


def _ragged_message(name: str, rows: Any, expected: str) -> str:
    lengths = _row_lengths(rows)
    if lengths is None or len(set(lengths)) < 2:
        return (
            f"{name} must be an array of shape {expected}; its nested entries differ in "
            "length, so they do not form a rectangular array."
        )
    first = lengths[0]
    other = next(index for index, length in enumerate(lengths) if length != first)
    values = "value" if first == 1 else "values"
    return (
        f"{name} must be an array of shape {expected}; its rows differ in length: "
        f"row 0 has {first} {values} and row {other} has {lengths[other]}."
    )


def _check_same_type(name: str, values: np.ndarray) -> None:
    """Raise if an object array mixes labels that cannot be compared (e.g. str and int)."""
    if values.dtype != object:
        return
    try:
        np.unique(values)
    except TypeError:
        examples: dict[str, Any] = {}
        for value in values.tolist():
            examples.setdefault(type(plain(value)).__name__, value)
        kinds = sorted(examples)
        shown = " and ".join(repr(plain(examples[kind])) for kind in kinds)
        raise ValueError(
            f"{name} mixes label types that cannot be compared: {' and '.join(kinds)} "
            f"labels (e.g. {shown}). Use one type for every label of y_true and labels."
        ) from None


def _check_y_true(y_true: Any) -> np.ndarray:
    try:
        y_true = np.asarray(y_true)
    except ValueError:
        raise ValueError(_ragged_message("y_true", y_true, "(n_samples,)")) from None
    if y_true.ndim == 2 and y_true.shape[1] == 1:
        y_true = y_true[:, 0]
    if y_true.ndim != 1:
        raise ValueError(
            f"y_true must be 1-D of shape (n_samples,); got an array of shape {y_true.shape}."
        )
    if y_true.shape[0] == 0:
        raise ValueError("y_true must not be empty; got 0 samples.")
    if y_true.dtype.kind in "fc":
        nan_rows = np.flatnonzero(np.isnan(y_true))
        if nan_rows.size:
            raise ValueError(f"y_true must not contain NaN; got NaN at index {nan_rows[0]}.")
    _check_same_type("y_true", y_true)
    return y_true


def _check_y_proba(y_proba: Any) -> np.ndarray:
    try:
        raw = np.asarray(y_proba)
    except ValueError:  # numpy refuses nested sequences of unequal lengths
        raise ValueError(
            _ragged_message("y_proba", y_proba, "(n_samples,) or (n_samples, n_classes)")
        ) from None
    if raw.dtype == object and raw.ndim == 1 and len(set(_row_lengths(raw) or [])) > 1:
        raise ValueError(_ragged_message("y_proba", raw, "(n_samples,) or (n_samples, n_classes)"))
    if raw.dtype.kind not in "biuf":
        raise ValueError(f"y_proba must hold numbers; got an array of dtype {raw.dtype}.")
    if raw.ndim not in (1, 2) or (raw.ndim == 2 and raw.shape[1] == 0):
        raise ValueError(
            "y_proba must be of shape (n_samples,), (n_samples, 1) or "
            f"(n_samples, n_classes); got shape {raw.shape}."
        )
    rtol = ROW_SUM_RTOL
    if raw.dtype.kind == "f":
        rtol = max(rtol, float(np.sqrt(np.finfo(raw.dtype).eps)))
    proba = raw.astype(np.float64, copy=False).reshape(raw.shape[0], -1)
    bad = ~np.isfinite(proba)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"y_proba must not contain NaN or infinity; got {proba[row, col]} in row {row}."
        )
    if proba.size and (proba.min() < 0 or proba.max() > 1):
        raise ValueError(
            "y_proba must hold probabilities in [0, 1]; "
            f"got values from {float(proba.min())!r} to {float(proba.max())!r}."
        )
    if proba.shape[1] > 1:
        errors = np.abs(proba.sum(axis=1) - 1.0)
        worst = int(np.argmax(errors)) if errors.size else 0
        if errors.size and errors[worst] > rtol:
            raise ValueError(
                f"Each row of y_proba must sum to 1 (relative tolerance {rtol:.2g}); "
                f"row {worst} sums to {float(proba[worst].sum())!r}."
            )
    return proba


def _check_labels(labels: Any) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D; got an array of shape {labels.shape}.")
    if labels.shape[0] < 2:
        raise ValueError(f"labels must hold at least 2 classes; got {labels.tolist()}.")
    _check_same_type("labels", labels)
    if np.unique(labels).shape[0] != labels.shape[0]:
        raise ValueError(f"labels must not contain duplicates; got {labels.tolist()}.")
    return labels


def _encode(y_true: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Column index of each ``y_true`` value in ``labels`` (which keeps its order)."""
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    try:
        pos = np.clip(np.searchsorted(sorted_labels, y_true), 0, labels.shape[0] - 1)
        found = np.asarray(sorted_labels[pos] == y_true, dtype=bool)
    except TypeError:  # e.g. string labels compared with integer targets
        pos = np.zeros(y_true.shape[0], dtype=np.intp)
        found = np.zeros(y_true.shape[0], dtype=bool)
    if not found.all():
        unknown = np.unique(y_true[~found]).tolist()
        raise ValueError(
            f"y_true contains classes that are not in labels: {unknown}; "
            f"expected every value of y_true to be one of labels={labels.tolist()}."
        )
    return order[pos]


def _check_sample_weight(sample_weight: Any, n_samples: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n_samples)
    weights = np.asarray(sample_weight)
    if weights.ndim != 1 or weights.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight must be 1-D of length {n_samples} (one weight per sample); "
            f"got shape {weights.shape}."
        )
    if weights.dtype.kind not in "biuf":
        raise ValueError(f"sample_weight must hold numbers; got an array of dtype {weights.dtype}.")
    weights = weights.astype(np.float64)
    bad = ~np.isfinite(weights) | (weights < 0)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"sample_weight must be finite and non-negative; got {weights[index]} at index {index}."
        )
    if weights.sum() <= 0:
        raise ValueError(f"sample_weight must have a positive sum; got {weights.sum()}.")
    return weights
