"""The settings of one fit: the estimator's parameters, checked and resolved against a recipe.

:func:`resolve_settings` is what ``NeSCalClassifier.check_params`` runs, without data:
scikit-learn's parameter constraints, the checks they cannot express, the recipe, the
freeze options and the loss object. It returns one frozen :class:`FitSettings`; every
later step of ``fit`` reads that, never the estimator's parameters. Every bad parameter
raises a :class:`~nescal_sklearn.exceptions.ParameterError` whose ``param`` is the name
as ``get_params(deep=True)`` spells it (``"max_epochs"``, ``"loss__warmup"``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError as SklearnInvalidParameterError
from sklearn.utils._param_validation import validate_parameter_constraints
from torch import nn

from .._params import is_int, plain
from ..exceptions import InvalidParameterError, ParameterError, ParameterTypeError
from ..losses import TrainingLoss, get_loss
from ..preprocessing import ColumnLayout
from ._freeze import check_freeze_patterns
from ._recipes import BEFORE_RECIPES, get_recipe

__all__ = [
    "AUTO_BATCH_SIZES",
    "CRITERIA",
    "RECIPE_PARAMS",
    "Criterion",
    "FitSettings",
    "NeighbourPlan",
    "resolve_settings",
]

#: Parameters that default to None and take their value from the recipe.
RECIPE_PARAMS = (
    "hidden_sizes",
    "dropout",
    "activation",
    "dropout_masks",
    "lr_schedule",
    "max_epochs",
    "max_row_epochs",
    "batch_size",
    "lr",
    "weight_decay",
    "early_stopping",
    "validation_fraction",
    "patience",
)

#: Integer parameters, which refuse a bool (True is an ``int`` to Python).
INT_PARAMS = ("max_epochs", "max_row_epochs", "batch_size", "patience", "unfreeze_at", "n_threads")

#: ``batch_size="auto"``: (fewest training rows, batch size), TabM's rule by the training
#: rows (which AutoGluon's TabM uses above 6,400 rows): 256 below 32,000, then 512, and
#: 1,024 from 108,000.
AUTO_BATCH_SIZES = ((0, 256), (32_000, 512), (108_000, 1024))

#: Warm-up fraction used by ``warmup="auto"`` when there are no validation rows.
AUTO_WARMUP_FALLBACK = 0.3


@dataclass(frozen=True)
class Criterion:
    """A stopping criterion: the history key it selects on (lower is better), and its
    name in messages."""

    key: str
    words: str


#: ``early_stopping`` -> its criterion: the one table of the criteria.
CRITERIA: Mapping[str, Criterion] = MappingProxyType(
    {
        "nll": Criterion("valid_nll", "validation NLL"),
        "refinement": Criterion("valid_refined_nll", "validation NLL after temperature scaling"),
    }
)


@dataclass(frozen=True)
class NeighbourPlan:
    """NeSCal's warm-up and neighbour count as one fit trains them (``warmup_``,
    ``n_neighbors_``): ``"auto"`` or a number of epochs, and the neighbours per row."""

    warmup: int | str
    n_neighbors: int


@dataclass(frozen=True)
class FitSettings:
    """What one fit of ``NeSCalClassifier`` trains with: its parameters, checked and resolved.

    The recipe's values fill the parameters left at None; every other field is the
    parameter of the same name as checked. ``settings["lr"]`` reads a field by name too.

    Attributes
    ----------
    recipe : str
        The recipe's name.
    loss : TrainingLoss
        The objective: a new object for a registered name (under the recipe's settings
        for it), a clone of a loss object; validated, and never changed by the fit.
    loss_name : str or None
        The registered name the loss was given by; None for a loss object.
    hidden_sizes, dropout, activation, dropout_masks, lr_schedule, max_epochs, \
max_row_epochs, batch_size, lr, weight_decay, validation_fraction
        As the parameters, the recipe's where they were None (after :meth:`for_rows`,
        ``batch_size`` and ``max_epochs`` are those of the data's training rows).
    early_stopping : {"nll", "refinement"} or False
        The stopping criterion (True is ``"nll"``), or False.
    patience : int or False
    time_limit : float or None
        The parameter as given.
    module, embedding_layer, categorical_features, mixup, class_weight, n_threads, \
precision, device, random_state, verbose
        The parameters as given.
    module_kwargs : mapping
        ``module_kwargs`` (empty when None), read-only.
    freeze : tuple of str or None
        The freeze patterns.
    unfreeze_at : int or None
    unfreeze_lr : float or None
        The learning rate of the unfrozen parameters from ``unfreeze_at`` on (``lr``
        when not given); None without ``unfreeze_at``.
    neighbours : NeighbourPlan or None
        NeSCal's warm-up and neighbour count for the data's rows, set by
        :meth:`for_rows`; None before it and for a loss without a graph.
    """

    recipe: str
    loss: TrainingLoss
    loss_name: str | None
    hidden_sizes: tuple[int, ...]
    dropout: float
    activation: str
    dropout_masks: str
    lr_schedule: str
    max_epochs: int
    max_row_epochs: int | None
    batch_size: int | str
    lr: float
    weight_decay: float
    early_stopping: str | bool
    validation_fraction: float
    patience: int | bool
    time_limit: float | None
    module: type[nn.Module] | nn.Module | None
    module_kwargs: Mapping[str, Any]
    categorical_features: ColumnLayout | Sequence[Sequence[int]] | None
    embedding_layer: str | None
    mixup: float
    class_weight: Mapping | str | None
    freeze: tuple[str, ...] | None
    unfreeze_at: int | None
    unfreeze_lr: float | None
    n_threads: int | None
    precision: str
    device: str | torch.device
    random_state: int | np.random.RandomState | None
    verbose: int
    neighbours: NeighbourPlan | None = None

    def __getitem__(self, name: str) -> Any:
        if name not in {field.name for field in fields(self)}:
            raise KeyError(name)
        return getattr(self, name)

    def for_rows(self, n_train: int, *, validated: bool, held_out: bool) -> FitSettings:
        """These settings for ``n_train`` training rows: ``batch_size="auto"`` resolved
        (:data:`AUTO_BATCH_SIZES`), ``max_epochs`` cut to
        ``ceil(max_row_epochs / n_train)`` where that is fewer, and NeSCal's warm-up and
        neighbour count (``neighbours``).

        ``validated`` says whether the fit has validation rows, ``held_out`` whether they
        were held out of ``X`` (messages say so). The loss is not changed: where the plan
        differs from it (the ``auto`` warm-up without validation rows, a default
        ``n_neighbors`` too large for the data) a warning says so, and the fit records
        the plan as ``warmup_`` and ``n_neighbors_``.

        Raises
        ------
        ParameterError
            When a fixed NeSCal warm-up would then outlast the epochs, or the training
            rows are too few for the neighbours asked for.
        """
        batch_size = self.batch_size
        if batch_size == "auto":
            batch_size = max(size for rows, size in AUTO_BATCH_SIZES if n_train >= rows)
        max_epochs = self.max_epochs
        if self.max_row_epochs is not None:
            max_epochs = min(max_epochs, math.ceil(self.max_row_epochs / max(n_train, 1)))
        if max_epochs < self.max_epochs:  # the parameter's own epochs were checked before
            _check_warmup(
                self.loss,
                max_epochs,
                f"the {max_epochs} epochs that max_row_epochs={self.max_row_epochs} "
                f"leaves for {n_train} training rows",
                "a larger max_row_epochs",
                {"max_row_epochs": self.max_row_epochs},
            )
        rows = replace(self, batch_size=batch_size, max_epochs=max_epochs)
        return replace(rows, neighbours=rows._neighbour_plan(n_train, validated, held_out))

    def _neighbour_plan(
        self, n_train: int, validated: bool, held_out: bool
    ) -> NeighbourPlan | None:
        """NeSCal's warm-up and neighbour count for ``n_train`` training rows (None for a
        loss without a graph); see :meth:`for_rows`."""
        loss, max_epochs = self.loss, self.max_epochs
        if not loss.uses_neighbours:
            return None
        warmup: int | str = "auto"
        if loss.warmup == "auto" and not validated:
            warmup = int(AUTO_WARMUP_FALLBACK * max_epochs)
            warnings.warn(
                "loss__warmup='auto' ends the warm-up where the validation NLL stops "
                "improving, but early_stopping=False holds out no validation rows; the "
                f"warm-up falls back to {AUTO_WARMUP_FALLBACK} of max_epochs ({warmup} "
                "epochs, warmup_). Pass an int or float warmup to silence this warning.",
                UserWarning,
                stacklevel=4,
            )
        elif loss.warmup != "auto":
            warmup = loss.warmup_epochs(max_epochs)
        held = (
            f" after holding out validation_fraction={self.validation_fraction}" if held_out else ""
        )
        n_neighbors = loss.n_neighbors
        if n_train < n_neighbors + 1 and self.loss_name is not None and n_train >= 2:
            n_neighbors = n_train - 1
            warnings.warn(
                f"loss__n_neighbors={loss.n_neighbors} (the recipe's value for "
                f"loss={self.loss_name!r}) needs at least {loss.n_neighbors + 1} training "
                f"rows; got {n_train}{held}. Using {n_neighbors} neighbours instead (recorded "
                "as n_neighbors_); pass loss__n_neighbors explicitly to choose.",
                UserWarning,
                stacklevel=4,
            )
        if n_train < n_neighbors + 1:
            raise ParameterError(
                "loss__n_neighbors",
                f"loss__n_neighbors={loss.n_neighbors} needs at least {loss.n_neighbors + 1} "
                f"training rows; got {n_train}{held}.",
            )
        return NeighbourPlan(warmup, n_neighbors)

    @property
    def criterion(self) -> Criterion | None:
        """The stopping criterion (None without early stopping)."""
        return CRITERIA[self.early_stopping] if self.early_stopping else None

    @property
    def needs_layout(self) -> bool:
        """Whether the default network's options act on the column layout."""
        return self.module is None and (
            self.module_kwargs.get("numeric_embedding") is not None
            or bool(self.module_kwargs.get("categorical_embedding"))
        )

    @property
    def params(self) -> Mapping[str, Any]:
        """The training parameters a fit records as ``params_``: the recipe's parameters
        and ``module_kwargs``."""
        return MappingProxyType({name: self[name] for name in (*RECIPE_PARAMS, "module_kwargs")})


def resolve_settings(estimator) -> FitSettings:
    """Check ``estimator``'s parameters without data and resolve them (``check_params``)."""
    params = estimator.get_params(deep=False)
    _check_constraints(estimator, params)
    for name in INT_PARAMS:
        value = params[name]
        if isinstance(value, bool) and not (name == "patience" and value is False):
            raise ParameterTypeError(name, f"{name} must be an int, not a bool; got {value!r}.")
    recipe = get_recipe(params["recipe"])
    resolved = {
        name: (
            params[name]
            if params[name] is not None
            else recipe.params.get(name, BEFORE_RECIPES.get(name))
        )
        for name in RECIPE_PARAMS
    }
    if not isinstance(resolved["early_stopping"], str):
        resolved["early_stopping"] = "nll" if resolved["early_stopping"] else False
    resolved["hidden_sizes"] = _checked_hidden_sizes(resolved["hidden_sizes"])
    freeze = check_freeze_patterns(params["freeze"])
    _check_freeze_options(freeze, params, resolved["max_epochs"])
    unfreeze_lr = params["unfreeze_lr"]
    if params["unfreeze_at"] is not None and unfreeze_lr is None:
        unfreeze_lr = resolved["lr"]
    loss = _resolved_loss(params["loss"], recipe.name, resolved["max_epochs"])
    return FitSettings(
        recipe=recipe.name,
        loss=loss,
        loss_name=params["loss"] if isinstance(params["loss"], str) else None,
        **resolved,
        time_limit=params["time_limit"],
        module=params["module"],
        module_kwargs=MappingProxyType(dict(params["module_kwargs"] or {})),
        categorical_features=params["categorical_features"],
        embedding_layer=params["embedding_layer"],
        mixup=params["mixup"],
        class_weight=params["class_weight"],
        freeze=freeze,
        unfreeze_at=params["unfreeze_at"],
        unfreeze_lr=unfreeze_lr,
        n_threads=params["n_threads"],
        precision=params["precision"],
        device=params["device"],
        random_state=params["random_state"],
        verbose=params["verbose"],
    )


def _check_constraints(estimator, params: Mapping[str, Any]) -> None:
    """scikit-learn's ``_validate_params``, one parameter at a time (in the same order),
    so that its error names the parameter: an
    :class:`~nescal_sklearn.exceptions.InvalidParameterError` with scikit-learn's message."""
    constraints = estimator._parameter_constraints
    for name, value in params.items():
        if name not in constraints:
            continue
        try:
            validate_parameter_constraints(
                {name: constraints[name]}, {name: value}, caller_name=type(estimator).__name__
            )
        except SklearnInvalidParameterError as exc:
            raise InvalidParameterError(name, str(exc), value=value) from None


def _checked_hidden_sizes(sizes) -> tuple[int, ...]:
    entries = list(sizes) if isinstance(sizes, list | tuple | np.ndarray) else None
    if entries is None or not all(is_int(h) and h >= 1 for h in entries):
        shown = [plain(h) for h in entries] if entries is not None else sizes
        raise ParameterError(
            "hidden_sizes",
            "hidden_sizes must be a sequence of ints >= 1 (the width of each hidden "
            f"layer; () for none); got {shown!r}.",
        )
    return tuple(int(h) for h in entries)


def _check_freeze_options(freeze, params: Mapping[str, Any], max_epochs: int) -> None:
    unfreeze_at, unfreeze_lr = params["unfreeze_at"], params["unfreeze_lr"]
    if freeze == ():
        raise ParameterError(
            "freeze",
            "freeze=[] freezes nothing; pass freeze=None, or patterns of the parts to freeze.",
        )
    if unfreeze_at is not None and freeze is None:
        raise ParameterError(
            "unfreeze_at",
            f"unfreeze_at={unfreeze_at!r} unfreezes the parameters that freeze "
            "freezes, but freeze=None; pass freeze patterns too.",
        )
    if unfreeze_lr is not None and unfreeze_at is None:
        raise ParameterError(
            "unfreeze_lr",
            f"unfreeze_lr={unfreeze_lr!r} is the learning rate from unfreeze_at on, "
            "but unfreeze_at=None; pass unfreeze_at too.",
        )
    if unfreeze_at is not None and unfreeze_at > max_epochs:
        raise ParameterError(
            "unfreeze_at",
            f"unfreeze_at={unfreeze_at} is after the last of "
            f"max_epochs={max_epochs}: nothing would be unfrozen. Pass an epoch "
            f"<= {max_epochs}, or unfreeze_at=None to stay frozen.",
        )


def _resolved_loss(given: str | TrainingLoss, recipe: str, max_epochs: int) -> TrainingLoss:
    """The loss object: a name with the recipe's settings for it, or a copy of the
    object given. Validated, its errors named ``loss__<param>``; never changed by the fit."""
    if isinstance(given, str):
        loss = get_loss(given)  # an unknown name raises a ParameterError for "loss"
        loss.set_params(**get_recipe(recipe).loss_params.get(given, {}))
    else:
        loss = clone(get_loss(given))
    try:
        loss.validate()
    except ParameterError as exc:
        raise exc.nested("loss") from None
    except TypeError as exc:  # a loss of one's own, raising Python's errors
        raise ParameterTypeError("loss", str(exc)) from exc
    except ValueError as exc:
        raise ParameterError("loss", str(exc)) from exc
    _check_warmup(
        loss, max_epochs, f"max_epochs={max_epochs}", "more max_epochs", {"max_epochs": max_epochs}
    )
    return loss


def _check_warmup(
    loss: TrainingLoss, max_epochs: int, epochs: str, remedy: str, context: dict
) -> None:
    """A fixed NeSCal warm-up ends before the last of ``max_epochs`` epochs (described as
    ``epochs``), or the graph would never be built: else a ParameterError that offers
    ``remedy`` and carries ``context`` (the parameters that set ``max_epochs``)."""
    if not loss.uses_neighbours or loss.warmup == "auto":
        return
    fixed = loss.warmup_epochs(max_epochs)
    if fixed >= max_epochs:
        raise ParameterError(
            "loss__warmup",
            f"loss__warmup={loss.warmup!r} ends the warm-up at epoch {fixed + 1}, after the "
            f"last of {epochs}: the neighbour graph would never be built. Pass a shorter "
            f"warmup, a fraction in [0, 1), or {remedy}.",
            value=loss.warmup,
            context=context,
        )
