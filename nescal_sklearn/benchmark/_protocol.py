"""The evaluation protocol: stratified train/validation/test split, fit, post-hoc, metrics."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss
from sklearn.model_selection import train_test_split

from ..calibration import CalibratedTemperature
from ..estimator import NeSCalClassifier, make_tabular_pipeline
from ..metrics import expected_calibration_error

__all__ = ["Split", "stratified_split", "evaluate_proba", "FitResult", "fit_and_evaluate"]


@dataclass(frozen=True)
class Split:
    """Preprocessed arrays of a stratified train / validation / test split."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: np.ndarray


def stratified_split(X, y, *, seed: int, fractions=(0.6, 0.2, 0.2)) -> Split:
    """Split stratified by class, fit the tabular preprocessing on the training part only.

    Parameters
    ----------
    X : DataFrame or array-like
        Raw features (numeric and categorical columns).
    y : array-like
        Labels.
    seed : int
        Seed of the split.
    fractions : tuple of 3 floats, default=(0.6, 0.2, 0.2)
        Train, validation and test fractions (summing to 1).
    """
    train_f, val_f, test_f = fractions
    if not np.isclose(train_f + val_f + test_f, 1.0) or min(fractions) <= 0:
        raise ValueError(f"fractions must be 3 positive numbers summing to 1; got {fractions!r}.")
    y = np.asarray(y)
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=test_f, stratify=y, random_state=seed
    )
    X_train, X_val, y_train, y_val = train_test_split(
        X_rest, y_rest, test_size=val_f / (train_f + val_f), stratify=y_rest, random_state=seed
    )
    preprocess = make_tabular_pipeline(NeSCalClassifier())[:-1]
    to_array = np.asarray
    if not hasattr(X, "columns"):  # plain arrays: standardise only
        from sklearn.preprocessing import StandardScaler

        preprocess = StandardScaler()
    X_train = to_array(preprocess.fit_transform(X_train), dtype=np.float32)
    return Split(
        X_train=X_train,
        y_train=y_train,
        X_val=to_array(preprocess.transform(X_val), dtype=np.float32),
        y_val=y_val,
        X_test=to_array(preprocess.transform(X_test), dtype=np.float32),
        y_test=y_test,
        classes=np.unique(y),
    )


def evaluate_proba(y_true, proba: np.ndarray, classes: np.ndarray) -> dict[str, float]:
    """NLL, top-label ECE (15 bins), multiclass Brier and accuracy of ``proba``."""
    return {
        "nll": float(log_loss(y_true, proba, labels=classes)),
        "ece": float(expected_calibration_error(y_true, proba, labels=classes)),
        "brier": float(brier_score_loss(y_true, proba, labels=classes, scale_by_half=False)),
        "accuracy": float(accuracy_score(y_true, classes[np.argmax(proba, axis=1)])),
    }


@dataclass
class FitResult:
    """Test metrics of one fitted model, raw and after temperature scaling."""

    raw: dict[str, float]
    after_ts: dict[str, float]
    temperature: float
    fit_seconds: float
    extra: dict = field(default_factory=dict)
    estimator: object | None = None
    calibrated: object | None = None


def fit_and_evaluate(estimator, split: Split, *, keep_models: bool = False) -> FitResult:
    """Fit on the training part (early stopping on the validation part when the
    estimator is a :class:`NeSCalClassifier`), fit a temperature on the validation
    part, and evaluate both on the test part.
    """
    model = clone(estimator)
    start = time.perf_counter()
    if isinstance(model, NeSCalClassifier):
        model.fit(split.X_train, split.y_train, X_val=split.X_val, y_val=split.y_val)
    else:
        model.fit(split.X_train, split.y_train)
    seconds = time.perf_counter() - start
    calibrated = CalibratedTemperature(FrozenEstimator(model)).fit(split.X_val, split.y_val)
    extra: Mapping = {}
    if isinstance(model, NeSCalClassifier):
        extra = {"n_epochs": model.n_epochs_, "best_epoch": model.best_epoch_}
    return FitResult(
        raw=evaluate_proba(split.y_test, model.predict_proba(split.X_test), split.classes),
        after_ts=evaluate_proba(
            split.y_test, calibrated.predict_proba(split.X_test), split.classes
        ),
        temperature=float(calibrated.temperature_),
        fit_seconds=seconds,
        extra=dict(extra),
        estimator=model if keep_models else None,
        calibrated=calibrated if keep_models else None,
    )
