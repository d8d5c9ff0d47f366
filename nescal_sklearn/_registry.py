"""Dated, frozen registries: the one shape of the package's two recipe registries.

The estimator's recipes (``nescal_sklearn.estimator.RECIPES``, read by
``NeSCalClassifier(recipe=...)``) and the recommended model's
(``nescal_sklearn.ensemble.RECOMMENDED_RECIPES``, read by
``make_recommended_classifier(recipe=...)``) are each a read-only mapping from a date to
a :class:`DatedRecipe`, made by :func:`registry` and read by :func:`lookup`. Their dates
are separate: the same date may name an entry in both, and they are different things.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = ["DatedRecipe", "frozen", "lookup", "registry"]

R = TypeVar("R", bound="DatedRecipe")


def frozen(value: Any) -> Any:
    """``value`` read-only: mappings (nested ones too, and those inside tuples) become
    :class:`~types.MappingProxyType` copies; anything else is returned as it is."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, tuple):
        return tuple(frozen(v) for v in value)
    return value


def _json_ready(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_json_ready(v) for v in value]
    if isinstance(value, type):
        return value.__name__
    return value


@dataclass(frozen=True)
class DatedRecipe:
    """A named, frozen entry of a dated registry: its fields are read-only, mappings
    included.

    Parameters
    ----------
    name : str
        The date (``YYYY-MM-DD``) it became the default.
    summary : str
        One line on what it is and which study chose it.
    """

    name: str
    summary: str

    def __post_init__(self) -> None:
        for field in fields(self):
            object.__setattr__(self, field.name, frozen(getattr(self, field.name)))

    def to_json(self) -> dict:
        """The recipe as plain JSON-ready data: mappings become dicts, tuples lists, and
        a class its name."""
        return {field.name: _json_ready(getattr(self, field.name)) for field in fields(self)}


def registry(*recipes: R) -> Mapping[str, R]:
    """The read-only mapping from each recipe's name to the recipe."""
    return MappingProxyType({recipe.name: recipe for recipe in recipes})


def lookup(recipes: Mapping[str, R], name: str | None) -> R:
    """The recipe called ``name`` in ``recipes``; None gives the newest (the latest date).

    Raises
    ------
    ValueError
        If no recipe has that name; the message lists the recipes.
    """
    key = max(recipes) if name is None else name
    if not isinstance(key, str) or key not in recipes:
        raise ValueError(f"recipe must be None or one of {sorted(recipes)}; got {name!r}.")
    return recipes[key]
