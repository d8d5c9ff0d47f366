"""The penalty weight λ(t): constant or cosine-decayed after a start epoch."""

from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["penalty_weight", "SCHEDULES"]

#: Accepted values of ``schedule`` in :func:`penalty_weight`.
SCHEDULES = ("constant", "cosine")


def penalty_weight(
    epoch: int,
    *,
    weight: float,
    schedule: str = "constant",
    start_epoch: int = 0,
    end_epoch: int | None = None,
) -> float:
    """Weight λ of the smoothing penalty at ``epoch``.

    Parameters
    ----------
    epoch : int
        Current epoch (any origin, as long as ``start_epoch``/``end_epoch`` share it).
    weight : float
        Peak weight, ``>= 0``.
    schedule : {"constant", "cosine"}, default="constant"
        ``"constant"``: ``weight`` from ``start_epoch`` on (``end_epoch`` is ignored).
        ``"cosine"``: ``weight · ½ (1 + cos(π (epoch − start) / (end − start)))``
        from ``start_epoch`` to ``end_epoch``, reaching 0 at ``end_epoch`` and
        staying 0 after it.
    start_epoch : int, default=0
        First epoch with a non-zero weight (0 before it), e.g. the end of warm-up.
    end_epoch : int or None, default=None
        End of the cosine decay; required, and ``> start_epoch``, for ``"cosine"``.

    Returns
    -------
    float

    Examples
    --------
    >>> from nescal_sklearn.penalties import penalty_weight
    >>> penalty_weight(3, weight=0.5, start_epoch=5)
    0.0
    >>> penalty_weight(5, weight=0.5, start_epoch=5)
    0.5
    >>> penalty_weight(10, weight=1.0, schedule="cosine", start_epoch=5, end_epoch=15)
    0.5
    """
    if isinstance(weight, bool) or not isinstance(weight, Real) or not weight >= 0:
        raise ValueError(f"weight must be a non-negative number; got weight={weight!r}.")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be 'constant' or 'cosine'; got schedule={schedule!r}.")
    if schedule == "cosine" and (
        end_epoch is None
        or isinstance(end_epoch, bool)
        or not isinstance(end_epoch, Integral)
        or end_epoch <= start_epoch
    ):
        raise ValueError(
            f"end_epoch must be an integer greater than start_epoch={start_epoch!r} for "
            f"schedule='cosine'; got end_epoch={end_epoch!r}."
        )
    if epoch < start_epoch:
        return 0.0
    if schedule == "constant":
        return float(weight)
    if epoch >= end_epoch:
        return 0.0
    progress = (epoch - start_epoch) / (end_epoch - start_epoch)
    return float(weight) * 0.5 * (1.0 + math.cos(math.pi * progress))
