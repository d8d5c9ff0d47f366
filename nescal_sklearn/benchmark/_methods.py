"""Methods of a benchmark: a kind of estimator, its fixed parameters and its grid.

A method is a ``NeSCalClassifier`` with a registered loss (:class:`LossMethod`) or any
scikit-learn classifier (:class:`ClassifierMethod`); :data:`METHOD_KINDS` is the only
place where the configuration key (``"loss"`` or ``"estimator"``) becomes a class.
Everything that differs between the two kinds (which parameter names exist, how a value
is checked, how the estimator is built, whether the budget applies) is a method of the
kind, so the rest of the benchmark never branches on it.

:func:`stated_params` is the canonical form of the parameters a configuration states,
which every record key holds (with the recipe that fills in the rest).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import product
from typing import Any, ClassVar

from ._specs import Budget, ConfigError, _fail

__all__ = [
    "FIT_ON",
    "METHOD_KINDS",
    "ClassifierMethod",
    "LossMethod",
    "MethodKind",
    "MethodSpec",
    "ParameterConflict",
    "public_path",
    "resolved_params",
    "stated_params",
]

#: The rows a method is fitted on: the training rows (the validation rows then fit the
#: calibrators of the stages and choose grid points), or the training and the validation
#: rows, for a method that calibrates itself out of fold (every calibrator stage is then
#: the method's own output).
FIT_ON = ("train", "train+validation")

#: Estimator parameters that the runner sets (seeds, verbosity, the loss itself).
RUNNER_PARAMS = ("random_state", "verbose", "loss")


@functools.lru_cache(maxsize=256)
def public_path(cls: type) -> str:
    """The shortest importable path of ``cls``.

    Examples
    --------
    >>> from sklearn.ensemble._hist_gradient_boosting.gradient_boosting import (
    ...     HistGradientBoostingClassifier)
    >>> public_path(HistGradientBoostingClassifier)
    'sklearn.ensemble.HistGradientBoostingClassifier'
    """
    parts = cls.__module__.split(".")
    for i in range(1, len(parts) + 1):
        module = ".".join(parts[:i])
        try:
            if getattr(importlib.import_module(module), cls.__name__, None) is cls:
                return f"{module}.{cls.__name__}"
        except ImportError:
            continue
    return f"{cls.__module__}.{cls.__qualname__}"


def _canonical(value: Any) -> Any:
    """A JSON-ready, deterministic rendering of a parameter value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, type):
        return {"class": public_path(value)}
    if hasattr(value, "get_params"):
        params = value.get_params(deep=False)
        return {
            "class": public_path(type(value)),
            "params": {k: _canonical(v) for k, v in sorted(params.items())},
        }
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if hasattr(value, "item") and getattr(value, "shape", None) == ():  # numpy scalar
        return value.item()
    return repr(value)


def resolved_params(estimator) -> dict:
    """``clone(estimator).get_params(deep=True)``, defaults included, in canonical form.

    Nested objects (a loss object) are rendered as their class path and their own
    parameters; tuples become lists; anything else unknown becomes its ``repr``.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> params = resolved_params(LogisticRegression(C=2.0))
    >>> params["C"], params["max_iter"]
    (2.0, 100)
    """
    from sklearn.base import clone

    params = clone(estimator).get_params(deep=True)
    return {name: _canonical(value) for name, value in sorted(params.items())}


def stated_params(params: Mapping[str, Any]) -> dict:
    """The estimator parameters a configuration states, in canonical form: what a fit's
    record key holds (with the recipe, for ``NeSCalClassifier``), instead of every
    resolved default, so that a default the library adds or changes leaves stored
    records valid.

    Examples
    --------
    >>> stated_params({"hidden_sizes": (64, 64), "lr": 0.01})
    {'hidden_sizes': [64, 64], 'lr': 0.01}
    """
    return {name: _canonical(value) for name, value in sorted(params.items())}


class ParameterConflict(ValueError):
    """Estimator parameters that are valid one by one but not together; ``param`` is the
    estimator parameter to blame (None: the estimator as a whole)."""

    def __init__(self, param: str | None, message: str) -> None:
        self.param = param
        super().__init__(message)


class MethodKind(ABC):
    """What a method fits; subclasses are frozen dataclasses with one field ``ref``."""

    #: Configuration key of a method entry (``"loss"`` or ``"estimator"``).
    key: ClassVar[str]
    #: Whether the budget's ``NeSCalClassifier`` settings apply to this kind.
    uses_budget: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def from_config(cls, path: str, ref: Any) -> MethodKind:
        """Validate the value of ``key`` (the library is imported here)."""

    @property
    @abstractmethod
    def default_name(self) -> str:
        """The method's name when the entry gives none."""

    @abstractmethod
    def describe(self) -> str:
        """One line for the dry-run plan."""

    def to_json(self) -> dict:
        return {self.key: self.ref}

    @abstractmethod
    def parameter_target(self, name: str, where: str) -> str:
        """The estimator parameter a configuration parameter ``name`` sets."""

    @abstractmethod
    def check_value(self, path: str, target: str, value: Any) -> None:
        """Run the library's own check of ``value`` for ``target`` (ConfigError if bad)."""

    @abstractmethod
    def build(self, params: Mapping[str, Any], seed: int):
        """The unfitted estimator with estimator ``params``, seeded with ``seed``."""

    def check_estimator(self, estimator, where) -> None:
        """Run the library's checks on the whole ``estimator`` (every parameter at once).

        ``where(param)`` says where the configuration sets an estimator parameter (for
        messages). Raises :class:`ParameterConflict`.
        """
        try:
            _validate_params(estimator)
        except (ValueError, TypeError) as exc:
            raise ParameterConflict(None, str(exc)) from None

    @property
    def estimator_path(self) -> str:
        """The import path of the estimator class, as the configuration states it."""
        return self.ref

    @property
    def uses_neighbours(self) -> bool:
        """Whether the estimator trains with a neighbour loss (the report's reference)."""
        return False

    @property
    def is_plain_cross_entropy(self) -> bool:
        """Whether the estimator trains with plain cross-entropy (the report's baseline)."""
        return False


def _validate_params(estimator) -> None:
    """scikit-learn's parameter validation of ``estimator``, when it declares its
    constraints (a ``BaseEstimator`` of another library, such as pytabkit's, may not)."""
    if hasattr(estimator, "_validate_params") and hasattr(estimator, "_parameter_constraints"):
        estimator._validate_params()


def _library_check(path: str, check) -> None:
    try:
        check()
    except (ValueError, TypeError) as exc:
        raise ConfigError(path, str(exc)) from None


@functools.lru_cache(maxsize=64)
def _loss_parameter_names(loss: str) -> frozenset[str]:
    from ..losses import get_loss

    return frozenset(get_loss(loss).get_params(deep=True))


@functools.lru_cache(maxsize=1)
def _classifier_parameter_names() -> frozenset[str]:
    from ..estimator import NeSCalClassifier

    return frozenset(NeSCalClassifier().get_params(deep=False)) - set(RUNNER_PARAMS)


def _import_path(path: str, ref: str) -> Any:
    """The object a dotted import path ``module.attr`` names; ConfigError at ``path`` if none."""
    module_name, _, attr = ref.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(path, f"cannot import {ref!r}: {exc}") from None


def _instance(cls: type):
    """``cls()``, with None for the arguments its constructor requires (the members of a
    meta-estimator, which the configuration's params then give)."""
    required = [
        name
        for name, p in inspect.signature(cls).parameters.items()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    return cls(**dict.fromkeys(required))


def built_value(path: str, value: Any) -> Any:
    """A parameter value with every nested ``{"class": import path, "params": {...}}``
    built as that estimator (inside lists too), so that a configuration can give a
    meta-estimator its members (``CrossFitClassifier(estimators=[[name, {...}], ...])``).
    The import paths are code the configuration runs, as ``"estimator"`` is.

    Examples
    --------
    >>> built_value("p", [["lr", {"class": "sklearn.linear_model.LogisticRegression",
    ...                           "params": {"C": 2.0}}]])
    [('lr', LogisticRegression(C=2.0))]
    """
    if isinstance(value, Mapping) and set(value) in ({"class"}, {"class", "params"}):
        cls = _import_path(f"{path}.class", value["class"])
        params = value.get("params", {})
        if not isinstance(cls, type) or not isinstance(params, Mapping):
            raise _fail(path, "{'class': an import path of an estimator, 'params': {...}}", value)
        built = {k: built_value(f"{path}.params.{k}", v) for k, v in params.items()}
        try:
            return cls(**built)
        except (TypeError, ValueError) as exc:
            raise ConfigError(path, f"cannot build {value['class']}: {exc}") from None
    if isinstance(value, list):
        items = [built_value(f"{path}[{i}]", v) for i, v in enumerate(value)]
        # A [name, estimator] pair becomes a tuple, as scikit-learn's meta-estimators want.
        if len(items) == 2 and isinstance(items[0], str) and hasattr(items[1], "get_params"):
            return tuple(items)
        return items
    return value


def _module_class(path: str, value: Any):
    """A config's ``module``: an import path of a ``torch.nn.Module`` subclass (or the class)."""
    if value is None or isinstance(value, type):
        return value
    if not isinstance(value, str) or "." not in value:
        raise _fail(path, "the import path of a torch.nn.Module subclass", value)
    found = _import_path(path, value)
    from torch import nn

    if not (isinstance(found, type) and issubclass(found, nn.Module)):
        raise _fail(path, "the import path of a torch.nn.Module subclass", value)
    return found


@dataclass(frozen=True)
class LossMethod(MethodKind):
    """``NeSCalClassifier`` trained with a registered loss (``nescal_sklearn.losses.LOSSES``).

    The estimator is built with the loss *name*, so that a setting the configuration
    does not state comes from the configuration's recipe.
    """

    ref: str
    key: ClassVar[str] = "loss"
    uses_budget: ClassVar[bool] = True

    @classmethod
    def from_config(cls, path: str, ref: Any) -> LossMethod:
        from ..losses import LOSSES

        if ref not in LOSSES:
            raise _fail(path, f"a registered loss name, one of {sorted(LOSSES)}", ref)
        return cls(ref)

    @property
    def default_name(self) -> str:
        return self.ref

    def describe(self) -> str:
        return f"loss={self.ref}"

    @property
    def estimator_path(self) -> str:
        return "nescal_sklearn.NeSCalClassifier"

    def parameter_target(self, name: str, where: str) -> str:
        loss_names = _loss_parameter_names(self.ref)
        estimator_names = _classifier_parameter_names()
        if name.startswith("loss__") and name[len("loss__") :] in loss_names:
            return name
        if name in loss_names:
            return f"loss__{name}"
        if name in estimator_names:
            return name
        if name in RUNNER_PARAMS:
            raise ConfigError(where, "set by the runner (loss, seeds), not by the config")
        raise ConfigError(
            where,
            f"unknown parameter; expected a parameter of loss {self.ref!r} "
            f"{sorted(loss_names)} or of NeSCalClassifier {sorted(estimator_names)}",
        )

    def check_value(self, path: str, target: str, value: Any) -> None:
        from ..estimator import NeSCalClassifier
        from ..losses import get_loss

        if target.startswith("loss__"):
            loss = get_loss(self.ref)

            def check():
                loss.set_params(**{target[len("loss__") :]: value})
                loss.validate()
        else:
            estimator = NeSCalClassifier(loss=self.ref)
            if target == "module":
                value = _module_class(path, value)

            def check():
                estimator.set_params(**{target: value})
                estimator._validate_params()

        _library_check(path, check)

    def build(self, params: Mapping[str, Any], seed: int):
        from ..estimator import NeSCalClassifier

        params = dict(params)
        if "hidden_sizes" in params:
            params["hidden_sizes"] = tuple(params["hidden_sizes"])
        if "module" in params:
            params["module"] = _module_class("module", params["module"])
        estimator = NeSCalClassifier(loss=self.ref, random_state=seed)
        return estimator.set_params(**params)

    def check_estimator(self, estimator, where) -> None:
        """Every check ``NeSCalClassifier.fit`` makes without data (``check_params``): the
        parameters, the loss's, a fixed warm-up within ``max_epochs``, the freeze options."""
        from ..estimator import get_recipe

        try:
            estimator.check_params()
        except (ValueError, TypeError) as exc:
            message = str(exc)
            named = message.split("=", 1)[0].split(" ", 1)[0]
            param = named if named in estimator.get_params() else None
            if message.startswith("loss__warmup="):  # say where max_epochs comes from
                param, max_epochs = "loss__warmup", estimator.max_epochs
                if max_epochs is None:
                    max_epochs = get_recipe(estimator.recipe).params["max_epochs"]
                shown = f"max_epochs={max_epochs}"
                message = message.replace(shown, f"{shown} ({where('max_epochs')})", 1)
            raise ParameterConflict(param, message) from None

    @property
    def uses_neighbours(self) -> bool:
        from ..losses import LOSSES

        return bool(LOSSES[self.ref].uses_neighbours)

    @property
    def is_plain_cross_entropy(self) -> bool:
        from ..losses import LOSSES, CrossEntropyLoss

        return LOSSES[self.ref] is CrossEntropyLoss


@dataclass(frozen=True)
class ClassifierMethod(MethodKind):
    """A scikit-learn classifier with ``predict_proba``, by import path; its
    ``random_state`` (if it has one) is the seed."""

    ref: str
    key: ClassVar[str] = "estimator"

    @classmethod
    def from_config(cls, path: str, ref: Any) -> ClassifierMethod:
        from sklearn.base import is_classifier

        if not isinstance(ref, str) or not ref:
            raise _fail(
                path,
                "an import path such as 'sklearn.ensemble.HistGradientBoostingClassifier'",
                ref,
            )
        if "." in ref:
            found = _import_path(path, ref)
        else:
            from sklearn.utils.discovery import all_estimators

            classifiers = dict(all_estimators(type_filter="classifier"))
            if ref not in classifiers:
                raise _fail(path, "an import path, or the name of a scikit-learn classifier", ref)
            found = classifiers[ref]
        try:
            ok = (
                isinstance(found, type)
                and is_classifier(found())
                and hasattr(found, "predict_proba")
            )
        except TypeError:  # a meta-estimator whose members the params give
            from sklearn.base import ClassifierMixin

            ok = issubclass(found, ClassifierMixin) and hasattr(found, "predict_proba")
        if not ok:
            raise _fail(path, "a scikit-learn classifier class with predict_proba", ref)
        # The path as the configuration states it: a record's key must not change when a
        # library later exports the class from a shorter path.
        return cls(ref if "." in ref else public_path(found))

    @property
    def estimator_class(self) -> type:
        module_name, _, name = self.ref.rpartition(".")
        return getattr(importlib.import_module(module_name), name)

    @property
    def default_name(self) -> str:
        return self.ref.rpartition(".")[2]

    def describe(self) -> str:
        return self.ref

    def parameter_target(self, name: str, where: str) -> str:
        if name == "random_state":
            raise ConfigError(where, "set by the runner from the seeds, not by the config")
        names = set(_instance(self.estimator_class).get_params(deep=True))
        if name not in names:
            raise ConfigError(
                where,
                f"unknown parameter of {self.default_name}; expected one of {sorted(names)}",
            )
        return name

    def check_value(self, path: str, target: str, value: Any) -> None:
        estimator = _instance(self.estimator_class)
        value = built_value(path, value)

        def check():
            estimator.set_params(**{target: value})
            _validate_params(estimator)

        _library_check(path, check)

    def build(self, params: Mapping[str, Any], seed: int):
        estimator = _instance(self.estimator_class)
        if "random_state" in estimator.get_params(deep=False):
            estimator.set_params(random_state=seed)
        return estimator.set_params(**{k: built_value(k, v) for k, v in params.items()})


#: Configuration key of a method entry -> its kind.
METHOD_KINDS: dict[str, type[MethodKind]] = {cls.key: cls for cls in (LossMethod, ClassifierMethod)}


@dataclass(frozen=True)
class MethodSpec:
    """A method: its kind, fixed ``params`` and ``grid`` (configuration names).

    ``targets`` maps each configuration name to the estimator parameter it sets
    (``n_neighbors`` -> ``loss__n_neighbors``); it is None for a configuration read
    without the library's checks (a saved run's, read by the report), which cannot
    build estimators.

    Examples
    --------
    >>> from nescal_sklearn.benchmark import LossMethod, MethodSpec
    >>> MethodSpec("ls", LossMethod("label_smoothing"), grid={"epsilon": (0.05, 0.1)}).points()
    [{'epsilon': 0.05}, {'epsilon': 0.1}]
    """

    name: str
    kind: MethodKind
    params: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, tuple] = field(default_factory=dict)
    targets: Mapping[str, str] | None = None
    fit_on: str = "train"

    def points(self) -> list[dict]:
        """The grid points (configuration names), in a stable order."""
        names = sorted(self.grid)
        return [
            dict(zip(names, values, strict=True))
            for values in product(*(self.grid[n] for n in names))
        ]

    def estimator_params(self, point: Mapping[str, Any], budget: Budget) -> dict:
        """Estimator parameters of ``point``: the budget's (when the kind uses it), then the
        fixed parameters and the point, keyed by estimator names."""
        if self.targets is None:
            raise RuntimeError(
                f"method {self.name!r} was read without the library's checks (a saved "
                "run's configuration); validate it with check_params=True to build estimators"
            )
        merged = {**self.params, **point}
        params = {self.targets.get(name, name): value for name, value in sorted(merged.items())}
        return {**budget.estimator_params(), **params} if self.kind.uses_budget else params

    def build(self, point: Mapping[str, Any], budget: Budget, seed: int):
        """The unfitted estimator of ``point`` seeded with ``seed``."""
        return self.kind.build(self.estimator_params(point, budget), seed)

    def to_json(self) -> dict:
        out = {
            "name": self.name,
            **self.kind.to_json(),
            "params": dict(self.params),
            "grid": {name: list(values) for name, values in self.grid.items()},
        }
        if self.fit_on != "train":
            out["fit_on"] = self.fit_on
        return out
