"""A stacker of members: a regularised multinomial logistic regression on their
out-of-fold logits (AutoGluon's ``best_quality`` stacks its models on out-of-fold
predictions), its strength chosen by an inner cross-validation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from ..calibration import log_probabilities
from ..metrics.logits import weighted_nll
from ..model_selection import inner_split

__all__ = ["FLOOR", "STACKER_CS", "fit_stacker", "stacker_features", "stacker_proba"]

#: The floor of the members' probabilities before their logarithm (the calibration maps'
#: floor): every logit the stacker reads is within about 35 nats of the row's others.
FLOOR = 1e-15

#: The inverse regularisation strengths (scikit-learn's ``C``, on the weighted sum of
#: the rows' losses) the inner cross-validation chooses from, strongest first.
STACKER_CS = (0.01, 0.1, 1.0, 10.0)


def stacker_features(probas: Sequence[np.ndarray]) -> np.ndarray:
    """The stacker's input: each member's logits, side by side in member order.

    A member's logits are the logarithms of its probabilities clipped at :data:`FLOOR`
    (so within about 35 nats of 0), centred on each row: one column per member with two classes (the logit of
    the second class, ``log p1 - log p0``), one per class with more.

    Parameters
    ----------
    probas : sequence of ndarray of shape (n_samples, n_classes)
        Each member's probabilities.

    Returns
    -------
    ndarray of shape (n_samples, n_members * n_columns)
    """
    columns = []
    for proba in probas:
        logp = np.log(np.clip(proba, FLOOR, 1.0))
        columns.append(
            logp[:, 1:] - logp[:, :1]
            if logp.shape[1] == 2
            else logp - logp.mean(axis=1, keepdims=True)
        )
    return np.hstack(columns)


def stacker_proba(stacker, features: np.ndarray, n_classes: int) -> np.ndarray:
    """The fitted ``stacker``'s probabilities of all ``n_classes`` classes (0 for a
    class it never saw)."""
    proba = np.zeros((features.shape[0], n_classes))
    proba[:, stacker.classes_] = stacker.predict_proba(features)
    return proba


def fit_stacker(
    probas: Sequence[np.ndarray],
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    *,
    n_splits: int = 5,
    random_state=None,
) -> tuple[Pipeline, np.ndarray]:
    """A logistic regression on the members' logits, and its held-out probabilities.

    The features are :func:`stacker_features`, standardised (weighted by
    ``sample_weight``): the L2 penalty then costs the same for the same change of the
    logits whatever a member's spread, so a member of wide but uninformative logits is
    not cheaper to lean on than an informative one. Each strength of :data:`STACKER_CS` is
    fitted on ``n_splits - 1`` parts of the rows (stratified, shuffled) and predicts the
    part it did not see; the strength of lowest (weighted) held-out NLL is refitted on
    all rows. Its held-out probabilities are what a map may be fitted on: no row's is
    predicted by a stacker that trained on it (the choice of one of four strengths on
    those rows is the only optimism, as in
    :func:`~nescal_sklearn.calibration.select_calibration`).

    Parameters
    ----------
    probas : sequence of ndarray of shape (n_samples, n_classes)
        Each member's out-of-fold probabilities.
    y : ndarray of shape (n_samples,)
        Label-encoded targets.
    sample_weight : ndarray or None, default=None
        Weights of the fits and of the held-out NLL.
    n_splits : int, default=5
        Parts of the inner cross-validation.
    random_state : int, RandomState instance or None, default=None
        Seeds the inner split.

    Returns
    -------
    stacker : Pipeline
        ``StandardScaler`` then ``LogisticRegression``, fitted on all rows (a prior-only
        ``DummyClassifier`` when they hold one class).
    held_out_proba : ndarray of shape (n_samples, n_classes)
        Each row's probabilities from the chosen strength's fit without it.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.ensemble import fit_stacker
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 300)
    >>> p = np.clip(0.5 + 0.3 * (2 * y - 1) + rng.normal(0, 0.1, 300), 0.05, 0.95)
    >>> useful, noise = np.column_stack([1 - p, p]), rng.dirichlet([1, 1], 300)
    >>> stacker, held_out = fit_stacker([useful, noise], y, random_state=0)
    >>> coef = stacker[-1].coef_[0]  # standardised: one per member
    >>> held_out.shape, abs(coef[1]) < 0.1 * abs(coef[0])
    ((300, 2), np.True_)
    """
    features = stacker_features(probas)
    n_classes = probas[0].shape[1]
    splits = inner_split(y, random_state, n_splits)
    held_out, scores = {}, {}
    for C in STACKER_CS:
        proba = np.empty((y.size, n_classes))
        for train, test in splits:
            w = None if sample_weight is None else sample_weight[train]
            fitted = _fit(C, features[train], y[train], w)
            proba[test] = stacker_proba(fitted, features[test], n_classes)
        held_out[C] = proba
        scores[C] = weighted_nll(log_probabilities(proba), y, sample_weight)
    best = min(scores, key=scores.get)  # the stronger regularisation on a tie
    return _fit(best, features, y, sample_weight), held_out[best]


def _fit(C: float, features: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None):
    """A logistic regression of strength ``C`` (the class prior, when ``y`` holds one
    class: a part of a few held-out rows left after a time-out)."""
    if np.unique(y).size < 2:
        return DummyClassifier(strategy="prior").fit(features, y, sample_weight)
    stacker = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000))
    weights = {"standardscaler__sample_weight": sample_weight}
    return stacker.fit(features, y, logisticregression__sample_weight=sample_weight, **weights)
