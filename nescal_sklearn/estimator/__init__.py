"""The scikit-learn estimator: ``NeSCalClassifier``, its training recipes, the tabular pipeline.

Names are loaded on first use (PEP 562): the recipes (``RECIPES``, ``get_recipe``) can be
read without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._compat.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "LATEST_RECIPE": "_recipes",
    "LR_SCHEDULES": "_schedule",
    "RECIPES": "_recipes",
    "NeSCalClassifier": "_classifier",
    "PRECISIONS": "_precision",
    "Recipe": "_recipes",
    "bfloat16_hardware": "_precision",
    "cpu_description": "_precision",
    "get_recipe": "_recipes",
    "limit_threads": "_threads",
    "make_tabular_pipeline": "_pipeline",
    "prediction_threads": "_threads",
    "torch_threads": "_threads",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from ._classifier import NeSCalClassifier  # noqa: F401
    from ._pipeline import make_tabular_pipeline  # noqa: F401
    from ._precision import PRECISIONS, bfloat16_hardware, cpu_description  # noqa: F401
    from ._recipes import LATEST_RECIPE, RECIPES, Recipe, get_recipe  # noqa: F401
    from ._schedule import LR_SCHEDULES  # noqa: F401
    from ._threads import limit_threads, prediction_threads, torch_threads  # noqa: F401
