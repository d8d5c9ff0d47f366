"""``make_recommended_classifier``: cross-fitted NeSCal networks and gradient boosting,
calibrated out of fold, under a dated, frozen recipe.

These dates are the recommended model's own registry, :data:`RECOMMENDED_RECIPES`
(:func:`get_recommended_recipe`); each names a whole cross-fitted ensemble. The
estimator has a separate one, ``nescal_sklearn.estimator.RECIPES``
(:func:`~nescal_sklearn.estimator.get_recipe`), whose dates name a network's training
settings: ``make_recommended_classifier(recipe="2026-12-04")`` and
``NeSCalClassifier(recipe="2026-12-04")`` are different things (the recommended model
of a date names the estimator recipe its networks train with).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sklearn import get_config
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.pipeline import Pipeline

from .._registry import DatedRecipe, lookup, registry
from ..estimator import NeSCalClassifier
from ..preprocessing import make_tabular_preprocessor
from ._budget import CLOCK
from ._crossfit import CrossFitClassifier

__all__ = [
    "LATEST_RECOMMENDED",
    "RECOMMENDED_RECIPES",
    "RecommendedRecipe",
    "get_recommended_recipe",
    "make_recommended_classifier",
]


@dataclass(frozen=True)
class RecommendedRecipe(DatedRecipe):
    """A dated, frozen recommended model: its members and how they are cross-fitted.

    An entry of :data:`RECOMMENDED_RECIPES`, the recommended model's registry (not the
    estimator's, ``nescal_sklearn.estimator.RECIPES``). ``to_json()`` gives it as plain
    JSON-ready data (tuples become lists, a member's class its name).

    Parameters
    ----------
    name : str
        The date (``YYYY-MM-DD``) it became the recommended model.
    summary : str
        One line on what it is and which study chose it.
    members : tuple of (str, type, mapping)
        Each member's name, class and parameters.
    folds : int
        The folds of the cross-fitting.
    prune : bool
        Whether a member of weight 0 on the first fold is fitted on the others
        (:class:`CrossFitClassifier`'s ``prune``).

    Examples
    --------
    >>> from nescal_sklearn.ensemble import get_recommended_recipe
    >>> recipe = get_recommended_recipe("2026-12-04")
    >>> [(name, cls.__name__) for name, cls, _ in recipe.members], recipe.folds
    ([('nescal', 'NeSCalClassifier'), ('hgb', 'HistGradientBoostingClassifier')], 5)
    """

    members: tuple[tuple[str, type, Mapping[str, Any]], ...]
    folds: int = 5
    prune: bool = True


_HGB = ("hgb", HistGradientBoostingClassifier, {"early_stopping": True})
#: The second boosting configuration, since 2026-12-05 (docs/networks.md).
_HGB2 = (
    "hgb2",
    HistGradientBoostingClassifier,
    {
        "early_stopping": True,
        "learning_rate": 0.05,
        "max_leaf_nodes": 15,
        "min_samples_leaf": 10,
        "l2_regularization": 1.0,
        "max_features": 0.8,
    },
)

#: The recommended models, by the date each became the default (a registry apart from the
#: estimator's ``RECIPES``); an old one never changes, so a study that names one means the
#: same model forever.
RECOMMENDED_RECIPES: Mapping[str, RecommendedRecipe] = registry(
    RecommendedRecipe(
        "2026-12-04",
        "NeSCal members (recipe 2026-12-04, patience 10) and HGB(early_stopping="
        "True), 5 folds, every member on every fold (docs/oof_ensembles.md).",
        members=(
            (
                "nescal",
                NeSCalClassifier,
                {"recipe": "2026-12-04", "patience": 10},
            ),
            _HGB,
        ),
        prune=False,
    ),
    RecommendedRecipe(
        "2026-12-05",
        "NeSCal members that see at most 600,000 rows with a batch growing with the "
        "rows (docs/scale.md), HGB(early_stopping=True) and a second HGB "
        "configuration, 5 folds, a member of weight 0 on the first fold not fitted "
        "on the others (docs/networks.md).",
        members=(
            (
                "nescal",
                NeSCalClassifier,
                {
                    "recipe": "2026-12-04",
                    "patience": 10,
                    "max_row_epochs": 600_000,
                    "batch_size": "auto",
                },
            ),
            _HGB,
            _HGB2,
        ),
        prune=True,
    ),
    RecommendedRecipe(
        "2026-12-06",
        "The model of 2026-12-05 with NeSCal members of estimator recipe 2026-12-06 "
        "(cheaper dropout masks) that see at most 300,000 rows: the fastest variant of "
        "the scale search within +0.5 % of its test NLL (docs/scale.md).",
        members=(
            (
                "nescal",
                NeSCalClassifier,
                {
                    "recipe": "2026-12-06",
                    "patience": 10,
                    "max_row_epochs": 300_000,
                    "batch_size": "auto",
                },
            ),
            _HGB,
            _HGB2,
        ),
        prune=True,
    ),
)

#: The newest recommended model: what ``make_recommended_classifier()`` builds.
LATEST_RECOMMENDED = max(RECOMMENDED_RECIPES)


def get_recommended_recipe(name: str | None = None) -> RecommendedRecipe:
    """The recommended model's recipe called ``name`` (:data:`RECOMMENDED_RECIPES`); None
    gives the newest (:data:`LATEST_RECOMMENDED`). The estimator's recipes are
    :func:`~nescal_sklearn.estimator.get_recipe`'s.

    Raises
    ------
    ValueError
        If no recipe has that name; the message lists the recipes.

    Examples
    --------
    >>> from nescal_sklearn.ensemble import LATEST_RECOMMENDED, get_recommended_recipe
    >>> get_recommended_recipe().name == LATEST_RECOMMENDED
    True
    """
    return lookup(RECOMMENDED_RECIPES, name)


class _ClockedPipeline(Pipeline):
    """A ``Pipeline`` whose last step's ``time_limit`` counts from the call of ``fit``.

    ``fit`` passes the time it started to the last step (``<name>__started_at``) when that
    is a :class:`CrossFitClassifier`, so the preprocessing's seconds count against its
    limit. With scikit-learn's metadata routing enabled, parameters reach a step only as
    requested, so the limit then counts from the classifier's own ``fit``.
    """

    def fit(self, X, y=None, **params):
        name, last = self.steps[-1]
        if isinstance(last, CrossFitClassifier) and not get_config()["enable_metadata_routing"]:
            params.setdefault(f"{name}__started_at", CLOCK())
        return super().fit(X, y, **params)


def make_recommended_classifier(
    random_state: int | None = None,
    n_jobs: int | None = None,
    *,
    time_limit: float | None = None,
    refit: bool = False,
    verbose: int = 0,
    recipe: str | None = None,
) -> Pipeline:
    """The package's recommended model: cross-fitted networks calibrated out of fold.

    Every training row trains and every row calibrates. The returned (unfitted)
    scikit-learn pipeline preprocesses a raw table (numeric, categorical and datetime
    columns, missing values: :func:`~nescal_sklearn.make_tabular_preprocessor`), then
    fits a :class:`~nescal_sklearn.ensemble.CrossFitClassifier`: the recipe's members
    (``NeSCalClassifier`` networks and two configurations of
    ``HistGradientBoostingClassifier(early_stopping=True)`` in the newest) cross-fitted
    on 5 folds, each early-stopping on the fold it did not train on, weighted by greedy
    ensemble selection on their out-of-fold predictions, and calibrated by one map chosen
    out of fold among none, temperature scaling, quadratic scaling (binary) and
    structured matrix scaling (multiclass). A member of weight 0 on the first fold is
    not fitted on the others. The recipes (:data:`RECOMMENDED_RECIPES`) name the studies
    that chose them; ``recipe="2026-12-04"`` gives the model of that date.

    ``fit`` takes a pandas DataFrame, a NumPy array or a list of rows (see
    :func:`~nescal_sklearn.make_tabular_preprocessor`); weights and groups go to the
    classifier step: ``fit(X, y, classifier__sample_weight=w, classifier__groups=g)``
    (rows of one group, and exact duplicate rows, stay in one fold: see
    :class:`~nescal_sklearn.ensemble.CrossFitClassifier`).

    Parameters
    ----------
    random_state : int or None, default=None
        Seeds the folds, the members and the map's selection: an int gives identical
        fits (at the same thread count).
    n_jobs : int or None, default=None
        Member fits in parallel (joblib; each member trains on one thread): ``-1`` for
        every core, or a dask cluster through ``joblib.parallel_backend("dask")``. The
        networks predict on as many threads, one member after another.
    time_limit : float or None, default=None
        Wall-clock seconds for the fit (:class:`CrossFitClassifier`'s ``time_limit``,
        counted from the call of the pipeline's ``fit``, preprocessing included): the
        networks get their share of the time left and stop on time, no fit starts after
        the deadline, and the folds that finished make the model (``fit`` warns). None:
        no limit.
    refit : bool, default=False
        Serve one model per member, refitted on all rows as its fold models trained
        (:class:`CrossFitClassifier`'s ``refit``): smaller and faster to predict.
    verbose : int, default=0
        1: a line per member fit, with the time elapsed and an estimate of the time to
        go.
    recipe : str or None, default=None
        The recommended model's recipe (:data:`RECOMMENDED_RECIPES`, a registry apart from
        ``NeSCalClassifier``'s ``recipe``); None: the newest, :data:`LATEST_RECOMMENDED`.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``"preprocess"`` and ``"classifier"`` (the ``CrossFitClassifier``; the
        pipeline's ``fit`` passes it the time it started, ``started_at``); after
        ``fit``, ``[-1].oof_proba_`` holds every training row's out-of-fold calibrated
        probabilities, ``[-1].weights_`` the members' weights and ``[-1].calibration_``
        the map chosen.

    Raises
    ------
    ValueError
        For an unknown ``recipe``; the message lists the recipes.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.datasets import load_breast_cancer
    >>> from nescal_sklearn.ensemble import make_recommended_classifier
    >>> X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    >>> model = make_recommended_classifier(random_state=0)
    >>> _ = model.set_params(  # a quick example: 5 epochs, the penalty from the third
    ...     classifier__nescal__max_epochs=5, classifier__nescal__loss__warmup=2
    ... )
    >>> model.fit(X, y).predict_proba(X.iloc[:2]).shape
    (2, 2)
    """
    chosen = get_recommended_recipe(recipe)
    members = [(name, cls(**params)) for name, cls, params in chosen.members]
    return _ClockedPipeline(
        [
            ("preprocess", make_tabular_preprocessor()),
            (
                "classifier",
                CrossFitClassifier(
                    members,
                    cv=chosen.folds,
                    calibration="auto",
                    n_jobs=n_jobs,
                    prune=chosen.prune,
                    refit=refit,
                    time_limit=time_limit,
                    random_state=random_state,
                    verbose=verbose,
                ),
            ),
        ]
    )
