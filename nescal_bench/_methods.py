"""Methods of a benchmark: a kind of estimator, its fixed parameters and its grid.

A method is a ``NeSCalClassifier`` with a registered loss (:class:`LossMethod`) or any
scikit-learn classifier (:class:`ClassifierMethod`); :data:`METHOD_KINDS` is the only
place where the configuration key (``"loss"`` or ``"estimator"``) becomes a class.

A configuration is code: ``"estimator"``, a loss method's ``"module"`` and every
``{"class": ...}`` member, in ``params`` and in ``grid`` values, are import paths.
``validate`` imports only the paths :func:`trusted` accepts (under :data:`TRUSTED`: this
package, the library, scikit-learn and the declared extras, as installed) and lists the
others, which ``run`` imports. :func:`stated_params` is the canonical form of the parameters a configuration
states, which every record key holds (with the recipe that fills in the rest).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, ClassVar

from nescal_sklearn.exceptions import ParameterError

from ._base import ConfigError, show

#: The rows a method is fitted on: the training rows (the validation rows then fit the
#: calibrators of the stages and choose grid points), or the training and the validation
#: rows, for a method that calibrates itself out of fold (every calibrator stage is then
#: the method's own output).
FIT_ON = ("train", "train+validation")

#: The key of a parameter value that the runner takes from another method's records, per
#: dataset and seed: ``{"from_method": NAME}`` is the fit seconds of method ``NAME``
#: (``run.fit_seconds``), e.g. AutoGluon's ``time_limit`` at the recommended model's time.
FROM_METHOD = "from_method"


def from_method(value: Any) -> str | None:
    """The method that a parameter value ``{"from_method": NAME}`` names; None for any
    other value.

    Examples
    --------
    >>> from_method({"from_method": "rec"}), from_method(60.0)
    ('rec', None)
    """
    if isinstance(value, Mapping) and set(value) == {FROM_METHOD}:
        return value[FROM_METHOD]
    return None


#: Estimator parameters that the runner sets (seeds, verbosity, the loss itself).
RUNNER_PARAMS = ("random_state", "verbose", "loss")

#: Top-level packages whose import paths ``validate`` imports (see :func:`trusted`): the
#: library, this lab, scikit-learn, torch, skorch and the ``bench`` extra's models and
#: calibrators.
# A data table: package names wrapped at 100 columns, not one per line (fmt: skip).
TRUSTED = frozenset({"nescal_sklearn", "nescal_bench", "sklearn", "torch", "skorch", "lightgbm",
                     "pytabkit", "tabm", "probmetrics"})  # fmt: skip


@functools.lru_cache(maxsize=64)
def _installed(package: str) -> bool:
    """Whether ``package`` is imported already, or would be imported from the files of an
    installed distribution: not from a folder of that name that comes first on
    ``sys.path`` (the working folder under ``python -m``, a ``PYTHONPATH`` entry)."""
    if package in sys.modules:
        return True
    spec = importlib.util.find_spec(package)  # finds the package; runs none of its code
    if spec is None or spec.origin is None:
        return False
    origin = Path(spec.origin).resolve()
    for name in importlib.metadata.packages_distributions().get(package, ()):
        distribution = importlib.metadata.distribution(name)
        files = distribution.files or ()
        if any(Path(distribution.locate_file(f)).resolve() == origin for f in files):
            return True
    return False


def trusted(ref: str) -> bool:
    """Whether ``validate`` may import the import path ``ref``: its top-level package is
    one of :data:`TRUSTED` and comes from where it is installed (or is imported already).

    Examples
    --------
    >>> from nescal_bench._methods import trusted
    >>> trusted("sklearn.linear_model.LogisticRegression"), trusted("this.X")
    (True, False)
    """
    package = MOVED.get(ref, ref).split(".")[0]
    return package in TRUSTED and _installed(package)


#: Classes that moved when the lab left the library: the import path the configurations
#: and record keys of format 3 name -> where the class lives now. Keys keep the old path.
MOVED = {
    "nescal_sklearn.benchmark.LightGBMClassifier": "nescal_bench.LightGBMClassifier",
    "nescal_sklearn.benchmark.TabMModule": "nescal_sklearn.nn.TabMModule",
    "nescal_sklearn.calibration.CrossFitClassifier": "nescal_sklearn.ensemble.CrossFitClassifier",
}
_KEYED = {new: old for old, new in MOVED.items()}


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


def keyed(path: str) -> str:
    """The import path a record key holds for ``path`` (the path before a move)."""
    return _KEYED.get(path, path)


def _canonical(value: Any) -> Any:
    """A JSON-ready, deterministic rendering of a parameter value."""
    if isinstance(value, str):
        return keyed(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, type):
        return {"class": keyed(public_path(value))}
    if hasattr(value, "get_params"):
        params = value.get_params(deep=False)
        return {
            "class": keyed(public_path(type(value))),
            "params": {k: _canonical(v) for k, v in sorted(params.items())},
        }
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if hasattr(value, "item") and getattr(value, "shape", None) == ():  # numpy scalar
        return value.item()
    return repr(value)


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


def import_path(path: str, ref: str) -> Any:
    """The object the dotted import path ``ref`` names; ConfigError at ``path`` if none."""
    module_name, _, attr = MOVED.get(ref, ref).rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
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


def _nested_classes(value: Any) -> list[str]:
    """The import paths of the ``{"class": ...}`` values nested in a parameter value."""
    if isinstance(value, Mapping):
        found = [value["class"]] if isinstance(value.get("class"), str) else []
        return found + [p for v in value.values() for p in _nested_classes(v)]
    if isinstance(value, list | tuple):
        return [p for v in value for p in _nested_classes(v)]
    return []


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
        cls = import_path(f"{path}.class", value["class"])
        params = value.get("params", {})
        if not isinstance(cls, type) or not isinstance(params, Mapping):
            raise ConfigError(
                path,
                f"expected {{'class': an estimator's import path, 'params': {{...}}}}, got {show(value)}",
            )
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
    """A config's ``module``: the import path of a ``torch.nn.Module`` subclass."""
    if value is None or isinstance(value, type):
        return value
    from torch import nn

    found = import_path(path, value) if isinstance(value, str) and "." in value else None
    if not (isinstance(found, type) and issubclass(found, nn.Module)):
        raise ConfigError(
            path, f"expected the import path of a torch.nn.Module subclass, got {show(value)}"
        )
    return found


@dataclass(frozen=True)
class MethodKind:
    """What a method fits: ``ref``, a loss name or an estimator's import path."""

    ref: str
    #: Configuration key of a method entry (``"loss"`` or ``"estimator"``).
    key: ClassVar[str]
    #: Whether the budget's ``NeSCalClassifier`` settings apply to this kind.
    uses_budget: ClassVar[bool] = False
    uses_neighbours: ClassVar[bool] = False
    is_plain_cross_entropy: ClassVar[bool] = False

    def to_json(self) -> dict:
        return {self.key: self.ref}

    def identity(self) -> dict:
        """What a record key holds of the kind."""
        return {self.key: keyed(self.ref)}

    @property
    def estimator_path(self) -> str:
        """The import path of the estimator class, as the configuration states it."""
        return self.ref

    def imports(self, params: Mapping[str, Any]) -> list[str]:
        """The import paths a fit of this kind imports (the estimator, a ``module``)."""
        return []

    def check(self, estimator) -> None:
        """The estimator's own checks without data: scikit-learn's parameter constraints,
        one parameter at a time, so that the error (a
        :class:`~nescal_sklearn.exceptions.ParameterError`) names the parameter; a value
        that follows another method's records (:func:`from_method`) is the runner's."""
        from sklearn.utils._param_validation import (
            InvalidParameterError,
            validate_parameter_constraints,
        )

        constraints = getattr(estimator, "_parameter_constraints", {})
        for name, value in estimator.get_params(deep=False).items():
            if from_method(value) is not None:  # the runner resolves it (a number)
                continue
            try:
                validate_parameter_constraints(
                    constraints, {name: value}, caller_name=type(estimator).__name__
                )
            except InvalidParameterError as exc:
                raise ParameterError(name, str(exc)) from None


@dataclass(frozen=True)
class LossMethod(MethodKind):
    """``NeSCalClassifier`` trained with a registered loss (``nescal_sklearn.losses.LOSSES``).

    The estimator is built with the loss *name*, so that a setting the configuration
    does not state comes from the configuration's recipe.
    """

    key: ClassVar[str] = "loss"
    uses_budget: ClassVar[bool] = True

    @classmethod
    def from_config(cls, path: str, ref: Any) -> LossMethod:
        from nescal_sklearn.losses import LOSSES

        if ref not in LOSSES:
            raise ConfigError(
                path, f"expected a registered loss name, one of {sorted(LOSSES)}, got {show(ref)}"
            )
        return cls(ref)

    @property
    def uses_neighbours(self) -> bool:  # type: ignore[override]
        from nescal_sklearn.losses import LOSSES

        return bool(LOSSES[self.ref].uses_neighbours)

    @property
    def is_plain_cross_entropy(self) -> bool:  # type: ignore[override]
        from nescal_sklearn.losses import LOSSES, CrossEntropyLoss

        return LOSSES[self.ref] is CrossEntropyLoss

    @property
    def default_name(self) -> str:
        return self.ref

    def describe(self) -> str:
        return f"loss={self.ref}"

    @property
    def estimator_path(self) -> str:
        return "nescal_sklearn.NeSCalClassifier"

    def parameter_target(self, name: str, where: str) -> str:
        """The estimator parameter a configuration parameter ``name`` sets."""
        from nescal_sklearn import NeSCalClassifier, get_loss

        loss_names = set(get_loss(self.ref).get_params(deep=True))
        estimator_names = set(NeSCalClassifier().get_params(deep=False)) - set(RUNNER_PARAMS)
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

    def imports(self, params: Mapping[str, Any]) -> list[str]:
        module = params.get("module")
        return [module] if isinstance(module, str) else []

    def build(self, params: Mapping[str, Any], seed: int):
        """The unfitted ``NeSCalClassifier`` with estimator ``params``, seeded with ``seed``."""
        from nescal_sklearn import NeSCalClassifier

        params = dict(params)
        if "hidden_sizes" in params and isinstance(params["hidden_sizes"], list):
            params["hidden_sizes"] = tuple(params["hidden_sizes"])
        if "module" in params:
            params["module"] = _module_class("module", params["module"])
        return NeSCalClassifier(loss=self.ref, random_state=seed).set_params(**params)

    def check(self, estimator) -> None:
        """Every check ``NeSCalClassifier.fit`` makes without data (``check_params``)."""
        estimator.check_params()


@dataclass(frozen=True)
class ClassifierMethod(MethodKind):
    """A scikit-learn classifier with ``predict_proba``, by import path (or a scikit-learn
    class name); its ``random_state`` (if it has one) is the seed."""

    key: ClassVar[str] = "estimator"

    @classmethod
    def from_config(cls, path: str, ref: Any, *, imports: bool = True) -> ClassifierMethod:
        from sklearn.base import is_classifier

        if not isinstance(ref, str) or not ref:
            expected = "an import path such as 'sklearn.ensemble.HistGradientBoostingClassifier'"
            raise ConfigError(path, f"expected {expected}, got {show(ref)}")
        if "." not in ref:
            from sklearn.utils.discovery import all_estimators

            classifiers = dict(all_estimators(type_filter="classifier"))
            if ref not in classifiers:
                raise ConfigError(
                    path,
                    f"expected an import path, or the name of a scikit-learn classifier, got {show(ref)}",
                )
            found = classifiers[ref]
        elif not imports and not trusted(ref):
            return cls(ref)  # a foreign import: left to run
        else:
            found = import_path(path, ref)
        try:
            ok = (
                isinstance(found, type)
                and is_classifier(found())
                and hasattr(found, "predict_proba")
            )
        except TypeError:  # a meta-estimator whose members the params give
            from sklearn.base import ClassifierMixin

            ok = (
                isinstance(found, type)
                and issubclass(found, ClassifierMixin)
                and hasattr(found, "predict_proba")
            )
        if not ok:
            raise ConfigError(
                path,
                f"expected a scikit-learn classifier class with predict_proba, got {show(ref)}",
            )
        # The path as the configuration states it: a record's key must not change when a
        # library later exports the class from a shorter path.
        return cls(ref if "." in ref else public_path(found))

    @property
    def default_name(self) -> str:
        return self.ref.rpartition(".")[2]

    def describe(self) -> str:
        return self.ref

    def imports(self, params: Mapping[str, Any]) -> list[str]:
        return [self.ref, *_nested_classes(dict(params))]

    def parameter_target(self, name: str, where: str) -> str:
        if name == "random_state":
            raise ConfigError(where, "set by the runner from the seeds, not by the config")
        cls = import_path("", self.ref)  # CatBoost's get_params names only those set
        names = set(_instance(cls).get_params(deep=True)) | set(inspect.signature(cls).parameters)
        if name not in names:
            raise ConfigError(
                where, f"unknown parameter of {self.default_name}; expected one of {sorted(names)}"
            )
        return name

    def build(self, params: Mapping[str, Any], seed: int):
        estimator = _instance(import_path("estimator", self.ref))
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
    without the library's checks (a saved run's, read by the report, or a foreign import
    left to ``run``): a loss method's then cannot give its estimator parameters, a
    classifier's are its configuration's names (what its checks would map them to).

    Examples
    --------
    >>> from nescal_bench import LossMethod, MethodSpec
    >>> MethodSpec("ls", LossMethod("label_smoothing"), grid={"epsilon": (0.05, 0.1)}).points()
    [{'epsilon': 0.05}, {'epsilon': 0.1}]
    """

    name: str
    kind: MethodKind
    params: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, tuple] = field(default_factory=dict)
    targets: Mapping[str, str] | None = None
    fit_on: str = "train"

    def imports(self) -> list[str]:
        """Every import path a fit of the method may import: those of its fixed
        parameters, and of every value of its grid (each once, in order)."""
        values = [self.params, *({name: v} for name, grid in self.grid.items() for v in grid)]
        return list(dict.fromkeys(ref for p in values for ref in self.kind.imports(p)))

    def points(self) -> list[dict]:
        """The grid points (configuration names), in a stable order."""
        names = sorted(self.grid)
        return [
            dict(zip(names, values, strict=True))
            for values in product(*(self.grid[n] for n in names))
        ]

    def estimator_params(self, point: Mapping[str, Any], budget: Mapping[str, Any]) -> dict:
        """Estimator parameters of ``point``: the ``budget``'s (when the kind uses it), then
        the fixed parameters and the point, keyed by estimator names."""
        if self.targets is None and self.kind.uses_budget:
            raise RuntimeError(
                f"method {self.name!r} was read without the library's checks (a saved run's "
                "configuration); validate it with check_params=True to build estimators"
            )
        merged, targets = {**self.params, **point}, self.targets or {}
        params = {targets.get(name, name): value for name, value in sorted(merged.items())}
        return {**budget, **params} if self.kind.uses_budget else params

    def build(self, point: Mapping[str, Any], budget: Mapping[str, Any], seed: int):
        """The unfitted estimator of ``point`` seeded with ``seed``."""
        return self.kind.build(self.estimator_params(point, budget), seed)

    def to_json(self) -> dict:
        grid = {name: list(values) for name, values in self.grid.items()}
        out = {"name": self.name, **self.kind.to_json(), "params": dict(self.params), "grid": grid}
        return out if self.fit_on == "train" else {**out, "fit_on": self.fit_on}
