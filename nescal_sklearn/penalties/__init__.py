"""Pure-PyTorch NeSCal pieces: the neighbourhood penalties, the cache, the schedule.

Nothing here imports scikit-learn or skorch, so the penalty can sit beside
cross-entropy in any plain PyTorch training loop; the estimator composes the
same objects. The per-fit state of a NeSCal run is one :class:`NeSCalRuntime`.
"""

from ._cache import PredictionCache
from ._divergence import AGGREGATIONS, js_divergence, neighbourhood_penalty
from ._runtime import CACHE_MODES, NeSCalRuntime
from ._schedule import SCHEDULES, penalty_weight
from ._smoothing import ADAPTIVE, DIVERGENCES, NeighbourhoodSmoothing
from ._soft_target import soft_target_penalty

__all__ = [
    "ADAPTIVE",
    "AGGREGATIONS",
    "CACHE_MODES",
    "DIVERGENCES",
    "NeSCalRuntime",
    "NeighbourhoodSmoothing",
    "PredictionCache",
    "js_divergence",
    "neighbourhood_penalty",
    "SCHEDULES",
    "penalty_weight",
    "soft_target_penalty",
]
