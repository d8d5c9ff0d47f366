"""Frozen, dated training recipes, and a fit that sets its fitted attributes only at the end.

A recipe must never change once it exists: every benchmark configuration names one, and
its stored records mean what the recipe meant. The content of each recipe is pinned here
by a hash; a new default is a new recipe, added with its own hash.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler

from nescal_sklearn import NeSCalClassifier, NeSCalLoss
from nescal_sklearn.estimator import LATEST_RECIPE, RECIPES, get_recipe
from nescal_sklearn.losses import LOSSES

#: sha256 of what each recipe sets (its JSON, sorted keys, summary left out). Never edit a
#: line: a new recipe adds one.
FROZEN = {
    "2026-12-02": "0ca06ff5aca6705a62a3589b7055b0e25b46f35f7b290b29dc9fb1c561fccedb",
    "2026-12-04": "b9678fbabd0032f01f1c2c46b0ea6a8e619514721a6aa336e646feb1418848b7",
    "2026-12-06": "ba8a7c53b46f3f533dccb43863fa335f8e63d3de6de25cd58eed1dcec5d2bfa7",
}

FAST = dict(hidden_sizes=(8,), max_epochs=3, batch_size=32, random_state=0)


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


def _digest(recipe) -> str:
    """The hash of what a recipe sets (its one-line summary may be reworded)."""
    data = {k: v for k, v in recipe.to_json().items() if k != "summary"}
    payload = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def test_no_recipe_ever_changes():
    assert {name: _digest(recipe) for name, recipe in RECIPES.items()} == FROZEN


def test_recipes_are_read_only_and_the_newest_is_the_default():
    recipe = get_recipe("2026-12-02")
    with pytest.raises(TypeError):
        recipe.params["lr"] = 1.0
    with pytest.raises(TypeError):
        recipe.loss_params["nescal"]["weight"] = 2.0
    with pytest.raises(AttributeError):
        recipe.name = "x"
    assert LATEST_RECIPE == max(RECIPES) and get_recipe(None) is RECIPES[LATEST_RECIPE]
    assert f"``{LATEST_RECIPE!r}``".replace("'", '"') in NeSCalClassifier.__doc__
    with pytest.raises(
        ValueError,
        match=re.escape(
            "recipe must be None or one of ['2026-12-02', '2026-12-04', '2026-12-06']; got 'x'."
        ),
    ):
        get_recipe("x")


def test_every_recipe_sets_every_recipe_parameter_and_every_registered_loss():
    from nescal_sklearn.estimator._recipes import BEFORE_RECIPES
    from nescal_sklearn.estimator._settings import RECIPE_PARAMS

    for recipe in RECIPES.values():
        # a parameter added after a recipe was frozen takes its BEFORE_RECIPES value
        assert set(recipe.params) <= set(RECIPE_PARAMS), recipe.name
        assert set(recipe.params) | set(BEFORE_RECIPES) == set(RECIPE_PARAMS), recipe.name
        assert set(recipe.loss_params) == set(LOSSES), recipe.name
        for name, params in recipe.loss_params.items():
            LOSSES[name](**params).validate()


def test_the_recipe_fills_every_parameter_left_at_none(iris):
    X, y = iris
    old = NeSCalClassifier("ce", recipe="2026-12-02", hidden_sizes=(8,), random_state=0)
    settings = old.check_params()
    assert (settings.lr, settings.max_epochs, settings.patience) == (1e-3, 100, 10)
    assert settings.lr_schedule == "constant" and settings.hidden_sizes == (8,)
    assert settings["lr"] == 1e-3  # a field read by name, as a mapping's
    new = NeSCalClassifier("ce").check_params()
    assert (new.lr, new.max_epochs, new.patience) == (3e-3, 256, False)
    old.set_params(max_epochs=4).fit(X, y)
    assert old.recipe_ == "2026-12-02" and old.params_["max_epochs"] == 4
    assert old.params_["lr"] == 1e-3
    assert old.get_params()["lr"] is None  # the parameter itself is untouched


def test_a_loss_by_name_takes_the_recipes_settings_and_an_object_is_used_as_it_is(
    iris, monkeypatch
):
    X, y = iris
    # A later change of a loss's own default does not change a named loss under a recipe.
    original = NeSCalLoss.__init__.__defaults__
    defaults = list(original)
    defaults[0] = 3  # n_neighbors
    monkeypatch.setattr(NeSCalLoss.__init__, "__defaults__", tuple(defaults))
    assert NeSCalLoss().n_neighbors == 3
    assert NeSCalClassifier().check_params().loss.n_neighbors == 10
    by_name = NeSCalClassifier().set_params(loss__weight=0.5)
    assert by_name.loss.n_neighbors == 10 and by_name.loss.weight == 0.5
    assert NeSCalClassifier(loss=NeSCalLoss()).check_params().loss.n_neighbors == 3
    monkeypatch.setattr(NeSCalLoss.__init__, "__defaults__", original)


def test_a_fit_that_raises_leaves_the_estimator_unfitted(iris):
    X, y = iris
    clf = NeSCalClassifier("ce", **FAST).fit(X, y)
    assert clf.predict(X[:2]).shape == (2,)
    with pytest.raises(ValueError, match=re.escape("X_val: X has 3 features")):
        clf.fit(X, y, X_val=X[:10, :3], y_val=y[:10])
    assert not [k for k in vars(clf) if k.endswith("_") and not k.startswith("_")]
    with pytest.raises(NotFittedError):
        clf.predict(X[:2])


def test_x_val_without_early_stopping_is_refused(iris):
    X, y = iris
    message = (
        "X_val and y_val are passed to fit while at the same time early_stopping is False: "
        "they would be ignored. Pass early_stopping='nll' (or 'refinement') to stop on them, "
        "or leave them out."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        NeSCalClassifier("ce", early_stopping=False, **FAST).fit(X, y, X_val=X, y_val=y)


@pytest.mark.determinism
def test_fitted_recipe_and_settings_survive_pickling_and_clone(iris):
    X, y = iris
    clf = NeSCalClassifier("ce", recipe="2026-12-02", **FAST).fit(X, y)
    restored = pickle.loads(pickle.dumps(clf))
    assert restored.recipe_ == "2026-12-02" and dict(restored.params_) == dict(clf.params_)
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    assert clone(clf).get_params() == clf.get_params()
