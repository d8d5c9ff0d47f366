"""Small data sets and toy classifiers shared by the calibration tests."""

from __future__ import annotations

import numpy as np
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_is_fitted


def make_data(n_classes: int = 3, n_samples: int = 300, random_state: int = 0):
    """A small, overlapping classification problem (so calibration has work to do)."""
    return make_classification(
        n_samples=n_samples,
        n_features=6,
        n_informative=4,
        n_redundant=0,
        n_classes=n_classes,
        n_clusters_per_class=1,
        class_sep=0.8,
        random_state=random_state,
    )


def fitted_and_calibration_split(estimator=None, n_classes: int = 3, random_state: int = 0):
    """Fit ``estimator`` (default logistic regression) on half the data; return the rest."""
    X, y = make_data(n_classes=n_classes, random_state=random_state)
    X_fit, X_cal, y_fit, y_cal = train_test_split(
        X, y, test_size=0.5, stratify=y, random_state=random_state
    )
    estimator = LogisticRegression() if estimator is None else estimator
    return clone(estimator).fit(X_fit, y_fit), X_cal, y_cal


class ScaledLogitClassifier(ClassifierMixin, BaseEstimator):
    """Logistic regression whose logits are multiplied by ``scale`` (>1: overconfident)."""

    def __init__(self, scale: float = 5.0):
        self.scale = scale

    def fit(self, X, y):
        self.model_ = LogisticRegression().fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def decision_function(self, X):
        check_is_fitted(self)
        return self.scale * self.model_.decision_function(X)

    def predict_proba(self, X):
        scores = self.decision_function(X)
        if scores.ndim == 1:
            scores = np.column_stack([np.zeros_like(scores), scores])
        return softmax(scores, axis=1)

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class ProbaOnlyClassifier(ClassifierMixin, BaseEstimator):
    """Logistic regression that only exposes ``predict_proba`` (no ``decision_function``)."""

    def __init__(self, C: float = 1.0):
        self.C = C

    def fit(self, X, y, sample_weight=None):
        self.model_ = LogisticRegression(C=self.C).fit(X, y, sample_weight=sample_weight)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        check_is_fitted(self)
        return self.model_.predict_proba(X)

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def nll(y_encoded: np.ndarray, proba: np.ndarray) -> float:
    """Mean negative log-likelihood of label-encoded ``y_encoded`` under ``proba``."""
    return float(-np.mean(np.log(proba[np.arange(y_encoded.size), y_encoded])))
