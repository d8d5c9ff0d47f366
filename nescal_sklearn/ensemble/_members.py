"""What a cross-fitted ensemble gives each member's ``fit``: its labels' type checked, and
``sample_weight`` routed to every member or refused as ``VotingClassifier`` refuses it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._params import label_kinds
from ..model_selection import weight_parameter

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
    kinds = label_kinds(values, "y")
    if kinds and kinds <= {"number", "bool"}:
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


def member_fit_params(
    names: Sequence[str], members: Sequence, sample_weight: np.ndarray | None
) -> list[dict]:
    """Each member's ``fit`` parameters without metadata routing: the weights, when given.

    A member gets ``sample_weight`` when its ``fit`` takes it; a ``Pipeline`` gets it as
    ``<last step>__sample_weight`` when its final estimator takes it
    (:func:`~nescal_sklearn.model_selection.weight_parameter`, the calibrators' rule too).

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
        parameter = weight_parameter(member)
        if parameter is None:
            raise TypeError(
                f"Underlying estimator {type(member).__name__} does not support sample "
                f"weights. estimators: {name!r} cannot be fitted on sample_weight, while the "
                "other members, the member weights and the map use them: remove the "
                "member, or fit without sample_weight."
            )
        params.append({parameter: sample_weight})
    return params
