"""The recommended model's dated recipes: old ones frozen, the newest the default."""

from __future__ import annotations

import re

import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.ensemble import (
    LATEST_RECOMMENDED,
    RECOMMENDED_RECIPES,
    get_recommended_recipe,
    make_recommended_classifier,
)


def _described(recipe: str | None) -> dict:
    crossfit = make_recommended_classifier(random_state=0, recipe=recipe)[-1]
    return {
        "cv": crossfit.cv,
        "prune": crossfit.prune,
        "members": [
            (name, type(member).__name__, member.get_params(deep=False))
            for name, member in crossfit.estimators
        ],
    }


def test_the_recipe_of_2026_12_04_is_the_model_its_study_measured():
    """An old recipe never changes: the out-of-fold study's model, written out by hand."""
    nescal = NeSCalClassifier(recipe="2026-12-04", patience=10).get_params(deep=False)
    hgb = HistGradientBoostingClassifier(early_stopping=True).get_params(deep=False)
    assert _described("2026-12-04") == {
        "cv": 5,
        "prune": False,
        "members": [
            ("nescal", "NeSCalClassifier", nescal),
            ("hgb", "HistGradientBoostingClassifier", hgb),
        ],
    }


def test_the_recipe_of_2026_12_05_is_the_model_its_studies_measured():
    """The model of docs/networks.md (``rec_h2``) and docs/scale.md (``rec``), written out
    by hand: NeSCal members capped at 600,000 rows seen with the batch growing with the
    rows, HGB(early_stopping) and a second HGB configuration, 5 folds, pruned."""
    nescal = NeSCalClassifier(
        recipe="2026-12-04", patience=10, max_row_epochs=600_000, batch_size="auto"
    ).get_params(deep=False)
    hgb = HistGradientBoostingClassifier(early_stopping=True).get_params(deep=False)
    hgb2 = HistGradientBoostingClassifier(
        early_stopping=True,
        learning_rate=0.05,
        max_leaf_nodes=15,
        min_samples_leaf=10,
        l2_regularization=1.0,
        max_features=0.8,
    ).get_params(deep=False)
    assert _described("2026-12-05") == {
        "cv": 5,
        "prune": True,
        "members": [
            ("nescal", "NeSCalClassifier", nescal),
            ("hgb", "HistGradientBoostingClassifier", hgb),
            ("hgb2", "HistGradientBoostingClassifier", hgb2),
        ],
    }


def test_the_recipe_of_2026_12_06_is_the_scale_searchs_choice():
    """``fast_300k`` of benchmarks/configs/scale_search.json, written out by hand: the model
    of 2026-12-05 with NeSCal members of estimator recipe 2026-12-06 capped at 300,000
    rows seen."""
    nescal = NeSCalClassifier(
        recipe="2026-12-06", patience=10, max_row_epochs=300_000, batch_size="auto"
    ).get_params(deep=False)
    before = _described("2026-12-05")
    assert _described("2026-12-06") == {
        **before,
        "members": [("nescal", "NeSCalClassifier", nescal), *before["members"][1:]],
    }


def test_the_default_is_the_newest_recipe():
    assert LATEST_RECOMMENDED == max(RECOMMENDED_RECIPES)
    assert get_recommended_recipe() is RECOMMENDED_RECIPES[LATEST_RECOMMENDED]
    assert _described(None) == _described(LATEST_RECOMMENDED)
    assert _described(None) != _described("2026-12-04")


@pytest.mark.parametrize("name", sorted(RECOMMENDED_RECIPES))
def test_every_recipe_is_dated_and_builds_fresh_members(name):
    recipe = RECOMMENDED_RECIPES[name]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", recipe.name) and recipe.name == name
    first = make_recommended_classifier(recipe=name)[-1].estimators
    second = make_recommended_classifier(recipe=name)[-1].estimators
    assert all(a is not b for (_, a), (_, b) in zip(first, second, strict=True))


def test_recipes_cannot_be_edited():
    newest = get_recommended_recipe()
    with pytest.raises(TypeError):
        RECOMMENDED_RECIPES["2026-12-04"] = newest  # type: ignore[index]
    with pytest.raises(AttributeError):
        newest.prune = not newest.prune  # type: ignore[misc]
    with pytest.raises(TypeError):
        newest.members[0][2]["patience"] = 1  # type: ignore[index]


@pytest.mark.parametrize("recipe", ["2026-01-01", "latest", 20261204])
def test_an_unknown_recipe_is_refused_with_the_list(recipe):
    message = f"recipe must be None or one of {sorted(RECOMMENDED_RECIPES)}; got {recipe!r}."
    with pytest.raises(ValueError, match=re.escape(message)):
        make_recommended_classifier(recipe=recipe)
    with pytest.raises(ValueError, match=re.escape(message)):
        get_recommended_recipe(recipe)


def test_a_recipe_as_json_names_its_members_classes():
    """The same ``to_json`` as the estimator's recipes: plain data, a class by its name."""
    assert get_recommended_recipe("2026-12-04").to_json() == {
        "name": "2026-12-04",
        "summary": RECOMMENDED_RECIPES["2026-12-04"].summary,
        "members": [
            ["nescal", "NeSCalClassifier", {"recipe": "2026-12-04", "patience": 10}],
            ["hgb", "HistGradientBoostingClassifier", {"early_stopping": True}],
        ],
        "folds": 5,
        "prune": False,
    }
