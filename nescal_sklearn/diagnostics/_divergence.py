"""Per-pair quantities in float64 numpy: confidence gap, TV, Jensen–Shannon, Fisher quadratic."""

from __future__ import annotations

import numpy as np

__all__ = [
    "confidence_gap",
    "fisher_quadratic",
    "jensen_shannon",
    "l2_distance",
    "relative_distance",
    "total_variation",
]

#: Below this |r| = |p_c - q_c| / (p_c + q_c), the per-class JS term is summed as a series.
_SERIES_CUTOFF = 0.05
#: Coefficients 1 / (n (2n - 1)), n = 1..8, of h(r) = Σ_n r^{2n} / (n (2n - 1)). At
#: |r| < 0.05 the first omitted term is below 1e-20 of the first.
_SERIES = np.array([1.0 / (n * (2 * n - 1)) for n in range(1, 9)])


def _h(r: np.ndarray) -> np.ndarray:
    """``(1 + r) log(1 + r) + (1 - r) log(1 - r)`` for ``r`` in [-1, 1], without cancellation.

    Every term of its series ``r² + r⁴/6 + r⁶/15 + …`` is non-negative, so small
    ``|r|`` is summed from the series (Horner) and only larger ``|r|`` uses the
    logarithms, where the cancellation of the two linear terms costs no precision.
    """
    r = np.abs(r)
    out = np.empty_like(r)
    small = r < _SERIES_CUTOFF
    r2 = r[small] ** 2
    acc = np.full_like(r2, _SERIES[-1])
    for coefficient in _SERIES[-2::-1]:
        acc = acc * r2 + coefficient
    out[small] = acc * r2
    big = r[~small]
    with np.errstate(divide="ignore", invalid="ignore"):
        minus = np.where(big < 1.0, (1.0 - big) * np.log1p(-big), 0.0)
    out[~small] = (1.0 + big) * np.log1p(big) + minus
    return out


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise ``JS(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m)``, ``m = (p + q) / 2``, in nats.

    With ``s = p + q`` and ``r = (p - q) / s`` per class,
    ``JS = ¼ Σ_c s_c h(r_c)`` where ``h(r) = (1 + r) log(1 + r) + (1 - r) log(1 - r)``
    is a sum of non-negative terms (see :func:`_h`): no cancellation between
    classes, none within a class, so near-equal distributions keep full relative
    precision (``JS ≈ ⅛ Σ δ²/m`` for tiny ``δ = p - q``). Classes with
    ``p_c = q_c = 0`` contribute 0.
    """
    s = p + q
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(s > 0, (p - q) / s, 0.0)
    return 0.25 * np.sum(s * _h(r), axis=-1)


def total_variation(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise ``½ Σ_c |p_c - q_c|``."""
    return 0.5 * np.sum(np.abs(p - q), axis=-1)


def l2_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise Euclidean distance ``‖p - q‖₂``."""
    return np.sqrt(np.sum((p - q) ** 2, axis=-1))


def confidence_gap(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise ``|max_c p_c - max_c q_c|``."""
    return np.abs(p.max(axis=-1) - q.max(axis=-1))


def fisher_quadratic(p: np.ndarray, q: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Row-wise ``⅛ Σ_c (p_c - q_c)² / base_c``; NaN where ``base_c = 0 < |p_c - q_c|``.

    Classes with ``base_c = 0`` and ``p_c = q_c`` contribute 0.
    """
    delta2 = (p - q) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(base > 0, delta2 / base, np.where(delta2 > 0, np.nan, 0.0))
    return 0.125 * np.sum(terms, axis=-1)


def relative_distance(p: np.ndarray, q: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Row-wise ``max_c |p_c - q_c| / base_c``; ``inf`` where ``base_c = 0 < |p_c - q_c|``."""
    delta = np.abs(p - q)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(base > 0, delta / base, np.where(delta > 0, np.inf, 0.0))
    return np.max(terms, axis=-1)
