"""Frozen, dated training recipes: the settings a parameter left at ``None`` takes.

A *recipe* is a named, frozen set of training parameters of :class:`NeSCalClassifier`
and of the losses it trains with by name (pytabkit's ``DefaultParams`` pattern). Every
tunable of the estimator defaults to ``None``, which means "the recipe's value"; the
estimator's ``recipe`` parameter names the recipe, and ``recipe=None`` is the newest
(:data:`LATEST_RECIPE`). A better default is a *new* recipe with a new date: an old one
never changes, so a study that names its recipe means the same thing forever, whatever
the library's defaults become.

These dates are the estimator's own registry, :data:`RECIPES`. The recommended model
has a separate one, ``nescal_sklearn.ensemble.RECOMMENDED_RECIPES``
(:func:`~nescal_sklearn.ensemble.get_recommended_recipe`), whose dates name whole
cross-fitted ensembles: ``NeSCalClassifier(recipe="2026-12-04")`` and
``make_recommended_classifier(recipe="2026-12-04")`` are different things.

A parameter added to the estimator after a recipe was frozen is absent from it; it then
takes its value from :data:`BEFORE_RECIPES`, the value that reproduces the fits made
before the parameter existed (the feature off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._registry import DatedRecipe, lookup, registry

__all__ = [
    "BEFORE_RECIPES",
    "LATEST_RECIPE",
    "RECIPES",
    "Recipe",
    "get_recipe",
]


@dataclass(frozen=True)
class Recipe(DatedRecipe):
    """A named, frozen set of training parameters of :class:`NeSCalClassifier`.

    An entry of :data:`RECIPES`, the estimator's registry (not the recommended model's,
    ``nescal_sklearn.ensemble.RECOMMENDED_RECIPES``). ``to_json()`` gives it as plain
    JSON-ready data (tuples become lists).

    Parameters
    ----------
    name : str
        The recipe's name: the date (``YYYY-MM-DD``) it became the default.
    summary : str
        One line on what it is and where it was chosen.
    params : mapping
        ``NeSCalClassifier`` parameters (names as in ``get_params``).
    loss_params : mapping of str to mapping
        For each registered loss name, the parameters a loss given by that name takes
        (``NeSCalClassifier(loss="nescal")``); a loss given as an object is used as it is.

    Examples
    --------
    >>> from nescal_sklearn.estimator import get_recipe
    >>> recipe = get_recipe("2026-12-04")
    >>> recipe.params["lr"], recipe.params["max_epochs"]
    (0.003, 256)
    """

    params: Mapping[str, Any] = field(default_factory=dict)
    loss_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


#: NeSCal's loss settings of both recipes so far (the defaults since 2026-12-02,
#: commit bba0401, when the soft target's weight became 1.0).
_NESCAL_2026_12_02 = {
    "n_neighbors": 10,
    "weight": 1.0,
    "warmup": "auto",
    "divergence": "soft_target",
    "graph": "knn",
    "base_loss": "ce",
}

#: The experimental NeSCal settings at their values since 2026-12-02.
_NESCAL_EXPERIMENTAL_2026_12_02 = {
    **_NESCAL_2026_12_02,
    "schedule": "constant",
    "warmup_patience": 5,
    "aggregation": "pairwise",
    "reduction": None,
    "n_components": None,
    "graph_method": "auto",
    "target_temperature": 1.0,
    "adaptive": None,
    "cache": "batch",
    "member_graph": "shared",
}

#: Every registered loss's settings of both recipes so far.
_LOSSES_2026_12_02 = {
    "ce": {},
    "label_smoothing": {"epsilon": 0.1},
    "focal": {"gamma": 3.0},
    "flsd53": {},
    "mmce": {"weight": 2.0},
    "mdca": {"beta": 1.0},
    "savuc": {"beta": 1.0, "kappa": 0.5, "temperature": 1.0},
    "mbls": {"margin": 10.0, "weight": 0.1},
    "nescal": _NESCAL_2026_12_02,
    "nescal_experimental": _NESCAL_EXPERIMENTAL_2026_12_02,
}

#: The training parameters of both recipes that did not change.
_MLP_2026_12_02 = {
    "hidden_sizes": (256, 256),
    "dropout": 0.1,
    "activation": "relu",
    "batch_size": 256,
    "weight_decay": 1e-4,
    "early_stopping": "nll",
    "validation_fraction": 0.2,
}

#: The estimator's recipes by date (a registry apart from the recommended model's).
RECIPES: Mapping[str, Recipe] = registry(
    Recipe(
        "2026-12-02",
        "The first defaults: 100 epochs at lr 1e-3 (constant), early stopping with "
        "a patience of 10 on the validation NLL.",
        params={
            **_MLP_2026_12_02,
            "lr_schedule": "constant",
            "max_epochs": 100,
            "lr": 1e-3,
            "patience": 10,
        },
        loss_params=_LOSSES_2026_12_02,
    ),
    Recipe(
        "2026-12-04",
        "256 epochs at lr 3e-3 under a flat-then-cosine schedule, every epoch "
        "trained and the one best on the validation NLL kept (chosen on the "
        "backbone study's search seed, docs/backbone.md).",
        params={
            **_MLP_2026_12_02,
            "lr_schedule": "flat_cosine",
            "max_epochs": 256,
            "lr": 3e-3,
            "patience": False,
        },
        loss_params=_LOSSES_2026_12_02,
    ),
    Recipe(
        "2026-12-06",
        "2026-12-04's training with cheaper dropout masks: 16 random bits a unit from "
        "numpy's SFC64 generator, fused with the ReLU (FastDropout), instead of torch's "
        "Bernoulli draws, a third of an epoch on a CPU (issue 41, benchmarks/member_cost.py).",
        params={
            **_MLP_2026_12_02,
            "lr_schedule": "flat_cosine",
            "max_epochs": 256,
            "lr": 3e-3,
            "patience": False,
            "dropout_masks": "fast",
        },
        loss_params=_LOSSES_2026_12_02,
    ),
)

#: The newest recipe: what ``NeSCalClassifier(recipe=None)`` trains with.
LATEST_RECIPE = max(RECIPES)

#: Values that reproduce the fits made before a parameter existed, for parameters that a
#: recipe does not name (parameters added after it was frozen).
BEFORE_RECIPES: Mapping[str, Any] = MappingProxyType(
    {"max_row_epochs": None, "dropout_masks": "torch"}
)


def get_recipe(name: str | None = None) -> Recipe:
    """The estimator's recipe called ``name`` (:data:`RECIPES`); None gives the newest
    (:data:`LATEST_RECIPE`). The recommended model's recipes are
    :func:`~nescal_sklearn.ensemble.get_recommended_recipe`'s.

    Raises
    ------
    ValueError
        If no recipe has that name; the message lists the recipes.

    Examples
    --------
    >>> from nescal_sklearn.estimator import LATEST_RECIPE, get_recipe
    >>> get_recipe().name == LATEST_RECIPE
    True
    """
    return lookup(RECIPES, name)
