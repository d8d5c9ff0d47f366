"""Measure fitted models: every stage (raw, each calibrator) on the validation and test
rows, the test reliability bins, and every evaluation condition (a condition that
refits, on the stages of its own fit)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from nescal_sklearn.metrics import log_loss, reliability_curve

from ._conditions import Condition, ConditionContext, ConditionSkipped, condition_rng
from ._data import Split
from ._registry import N_BINS, label_metrics


def aligned_proba(model, X, classes: np.ndarray) -> np.ndarray:
    """``predict_proba`` with one column per class of the whole dataset (0 for unseen ones).

    Always float64, rows renormalised: scikit-learn's ``log_loss`` clips probabilities
    at the machine epsilon of their dtype, which for a float32 model (pytabkit's, or a
    scikit-learn model fitted on float32 features) is 1.2e-7, and would cap each
    confident error at 15.9 nats instead of the 36 of every other stage; float32 rows
    then sum to 1 only within ~1e-7, which the float64 metrics would warn about.
    """
    raw = model.predict_proba(X)
    proba = np.asarray(raw, dtype=np.float64)
    if np.asarray(raw).dtype != np.float64:
        proba = proba / proba.sum(axis=1, keepdims=True)
    model_classes = np.asarray(model.classes_)
    if len(model_classes) == len(classes) and np.array_equal(model_classes, classes):
        return proba
    out = np.zeros((len(X), len(classes)))
    out[:, np.searchsorted(classes, model_classes)] = proba
    return out


def reliability_bins(y, proba, classes) -> dict:
    """Top-label bins (equal width, :data:`N_BINS`): counts, mean confidence, accuracy."""

    curve = reliability_curve(y, proba, labels=classes, n_bins=N_BINS)

    def listed(values):
        return [None if not np.isfinite(v) else float(v) for v in values]

    return {
        "counts": [int(c) for c in curve.counts],
        "confidence": listed(curve.confidence),
        "accuracy": listed(curve.accuracy),
    }


def evaluate_stages(
    stages: Mapping[str, object],
    split: Split,
    conditions: tuple[Condition, ...],
    seed: int,
    context: ConditionContext | None = None,
) -> dict:
    """The ``validation``, ``test``, ``reliability``, ``conditions`` and
    ``skipped_conditions`` parts of a record.

    Parameters
    ----------
    stages : mapping
        ``"raw"`` (the fitted model) and each fitted calibrator, by name.
    split : Split
        The fit's split.
    conditions : tuple of Condition
        Evaluation conditions: each builds its rows from ``context`` with
        :func:`condition_rng` of ``seed`` and its ``stream`` (its name, or a corruption's
        family), once for every stage. Conditions that refit (:class:`HeldOutClass`) are
        left to :func:`evaluate_refit`.
    seed : int
        The fit's seed.
    context : ConditionContext or None, default=None
        What the conditions see; None: the split alone (no dataset name, the default
        data folder).

    Returns
    -------
    dict
        ``validation[stage]["nll"]``, ``test[stage][metric]``, ``reliability[stage]``,
        ``conditions[name][stage][metric]`` and ``skipped_conditions[name]`` (the reason
        a condition did not apply).
    """
    classes = split.classes
    validation, test, reliability, proba_test = {}, {}, {}, {}
    for name, fitted in stages.items():
        proba_val = aligned_proba(fitted, split.X_val, classes)
        proba_test[name] = aligned_proba(fitted, split.X_test, classes)
        validation[name] = {"nll": float(log_loss(split.y_val, proba_val, labels=classes))}
        test[name] = label_metrics(split.y_test, proba_test[name], classes)
        reliability[name] = reliability_bins(split.y_test, proba_test[name], classes)
    context = ConditionContext(split) if context is None else context
    built: list[tuple[Condition, np.ndarray]] = []
    skipped: dict[str, str] = {}
    for condition in conditions:
        if condition.refits:
            continue
        try:
            built.append(
                (condition, condition.apply(context, condition_rng(seed, condition.stream)))
            )
        except ConditionSkipped as exc:
            skipped[condition.name] = str(exc)
    measured: dict[str, dict] = {condition.name: {} for condition, _ in built}
    if built:  # one prediction per stage for the rows of every condition
        stacked = np.concatenate([rows for _, rows in built])
        ends = np.cumsum([len(rows) for _, rows in built])
        for name, fitted in stages.items():
            parts = np.split(aligned_proba(fitted, stacked, classes), ends[:-1])
            for (condition, _), proba in zip(built, parts, strict=True):
                measured[condition.name][name] = condition.score(
                    split.y_test, proba_test[name], proba, classes
                )
    return {
        "validation": validation,
        "test": test,
        "reliability": reliability,
        "conditions": measured,
        "skipped_conditions": skipped,
    }


def evaluate_refit(
    condition: Condition,
    stages: Mapping[str, object],
    reduced: Split,
    context: ConditionContext,
    seed: int,
) -> dict:
    """``conditions[name]`` of a condition that refits: each stage fitted on ``reduced``
    (:meth:`HeldOutClass.refit_split`), scored on ``reduced``'s test rows
    (in-distribution) against the condition's rows."""
    rows = condition.apply(context, condition_rng(seed, condition.stream))
    classes = reduced.classes
    return {
        name: condition.score(
            reduced.y_test,
            aligned_proba(fitted, reduced.X_test, classes),
            aligned_proba(fitted, rows, classes),
            classes,
        )
        for name, fitted in stages.items()
    }
