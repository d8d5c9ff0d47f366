"""Cross-fitted ensembles: ``CrossFitClassifier`` and the package's recommended model."""

from ._crossfit import CrossFitClassifier
from ._greedy import greedy_ensemble_weights
from ._recommended import (
    LATEST_RECOMMENDED,
    RECOMMENDED_RECIPES,
    RecommendedRecipe,
    get_recommended_recipe,
    make_recommended_classifier,
)
from ._stacker import fit_stacker, stacker_features, stacker_proba

__all__ = [
    "CrossFitClassifier",
    "LATEST_RECOMMENDED",
    "RECOMMENDED_RECIPES",
    "RecommendedRecipe",
    "fit_stacker",
    "get_recommended_recipe",
    "greedy_ensemble_weights",
    "make_recommended_classifier",
    "stacker_features",
    "stacker_proba",
]
