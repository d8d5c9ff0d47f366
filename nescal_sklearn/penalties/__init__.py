"""Pure-PyTorch NeSCal pieces: the Jensen–Shannon neighbourhood penalty and its parts.

Nothing here imports scikit-learn or skorch, so the penalty can sit beside
cross-entropy in any plain PyTorch training loop; the estimator composes the
same objects.
"""

from ._cache import PredictionCache
from ._divergence import js_divergence, neighbourhood_penalty
from ._random_graph import random_graph
from ._schedule import penalty_weight
from ._smoothing import ADAPTIVE, DIVERGENCES, NeighbourhoodSmoothing
from ._soft_target import soft_target_penalty

__all__ = [
    "ADAPTIVE",
    "DIVERGENCES",
    "NeighbourhoodSmoothing",
    "PredictionCache",
    "js_divergence",
    "neighbourhood_penalty",
    "penalty_weight",
    "random_graph",
    "soft_target_penalty",
]
