"""What a cross-fitted ensemble gives each member's ``fit``: its labels' type checked, and
``sample_weight`` routed to every member or refused as ``VotingClassifier`` refuses it."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import has_fit_parameter

__all__ = ["checked_labels", "member_fit_params", "relative_weights"]


def checked_labels(y):
    """``y``, with labels of one type: object labels that are all numbers (or all
    booleans) become a numeric (boolean) array; a mix of types is refused by name.

    Raises
    ------
    ValueError
        When ``y`` mixes label types (numbers and strings, or ``None`` among them).
    """
    values = np.asarray(y)
    if values.dtype != object:
        return y
    kinds = {
        "number" if isinstance(v, numbers.Number) and not isinstance(v, bool) else type(v).__name__
        for v in values.ravel().tolist()
    }
    if len(kinds) > 1 or kinds & {"NoneType"}:
        raise ValueError(
            f"y must hold labels of one type (all numbers or all strings); got a mix of "
            f"{sorted(kinds)}. Convert the labels to one type, e.g. y.astype(str)."
        )
    if kinds <= {"number", "bool"}:
        return np.asarray(values.tolist())
    return y


def relative_weights(sample_weight: np.ndarray | None) -> np.ndarray | None:
    """``sample_weight`` rescaled to mean 1: only the ratios of the weights matter.

    Members get them so (all-equal weights become ones, whatever they sum to: a
    gradient-boosting member's ``min_hessian_to_split`` and a logistic regression's
    ``C`` see the scale of the weights); all-ones weights are returned unchanged.

    Raises
    ------
    ValueError
        When every weight is zero.
    """
    if sample_weight is None:
        return None
    total = float(np.sum(sample_weight))
    if not total > 0:
        raise ValueError(
            "sample_weight is zero on every row; at least one row needs a positive weight."
        )
    return sample_weight * (sample_weight.size / total)


def _weight_parameter(member) -> str | None:
    """The ``fit`` parameter that takes ``member``'s sample weights, or None: its own
    ``sample_weight``, or a ``Pipeline``'s ``<last step>__sample_weight``."""
    if has_fit_parameter(member, "sample_weight"):
        return "sample_weight"
    if isinstance(member, Pipeline) and member.steps:
        name, last = member.steps[-1]
        if last not in (None, "passthrough") and has_fit_parameter(last, "sample_weight"):
            return f"{name}__sample_weight"
    return None


def member_fit_params(
    names: Sequence[str], members: Sequence, sample_weight: np.ndarray | None
) -> list[dict]:
    """Each member's ``fit`` parameters without metadata routing: the weights, when given.

    A member gets ``sample_weight`` when its ``fit`` takes it; a ``Pipeline`` gets it as
    ``<last step>__sample_weight`` when its final estimator takes it.

    Raises
    ------
    TypeError
        For a member that takes no weights, as :class:`~sklearn.ensemble.VotingClassifier`
        does.
    """
    if sample_weight is None:
        return [{} for _ in members]
    params = []
    for name, member in zip(names, members, strict=True):
        parameter = _weight_parameter(member)
        if parameter is None:
            raise TypeError(
                f"Underlying estimator {type(member).__name__} does not support sample "
                f"weights. estimators: {name!r} cannot be fitted on sample_weight, while the "
                "other members, the member weights and the map use them: remove the "
                "member, or fit without sample_weight."
            )
        params.append({parameter: sample_weight})
    return params
