"""``NeSCalClassifier``: a scikit-learn classifier trained with NeSCal (or a baseline loss)."""

from __future__ import annotations

import copy
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from skorch.callbacks import EarlyStopping, PassthroughScoring, ProgressBar
from skorch.dataset import Dataset
from skorch.helper import predefined_split
from torch import nn

from ..exceptions import PenaltyInactiveWarning
from ..losses import LOSSES, TrainingLoss, get_loss
from ..nn import build_module, ensemble_logits
from ..preprocessing import ColumnLayout
from ._callbacks import (
    CRITERIA,
    BuildNeighbourhood,
    PenaltySchedule,
    PlainPrintLog,
    StopAfterPatience,
    ValidationNLL,
    WarmupEnd,
)
from ._fit_data import FitData, prepare_fit_data
from ._freeze import Unfreeze, check_freeze_patterns, resolve_frozen
from ._net import NeSCalNet
from ._recipes import BEFORE_RECIPES, RECIPES, get_recipe
from ._schedule import LR_SCHEDULES, lr_scheduler
from ._threads import limit_threads

__all__ = ["NeSCalClassifier"]

#: Fewest one-hot columns (categories) of a feature that ``categorical_embedding``
#: embeds; RealMLP one-hot encodes up to 9 categories and embeds larger features.
CATEGORICAL_EMBEDDING_MIN_SIZE = 10

#: Warm-up fraction used by ``warmup="auto"`` when there are no validation rows.
AUTO_WARMUP_FALLBACK = 0.3

#: Rows per forward pass in ``predict``, ``predict_proba`` and ``decision_function``.
PREDICT_BATCH_ROWS = 8192

#: Parameters that default to None and take their value from the recipe.
RECIPE_PARAMS = (
    "hidden_sizes",
    "dropout",
    "activation",
    "lr_schedule",
    "max_epochs",
    "batch_size",
    "lr",
    "weight_decay",
    "early_stopping",
    "validation_fraction",
    "patience",
)

#: Deprecated parameters of the default network -> where they live now.
DEPRECATED_MODULE_OPTIONS = ("n_members", "numeric_embedding", "categorical_embedding")

#: Integer parameters, which refuse a bool (True is an ``int`` to Python).
INT_PARAMS = ("max_epochs", "batch_size", "patience", "unfreeze_at", "n_threads")


def _plain(value):
    """A numpy scalar as the Python number or string it holds (for error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _epoch_history(history):
    """skorch's history without its per-batch rows (the epoch rows hold their means).

    The batch rows are most of a fitted model's pickle beyond the weights, and a
    neighbour loss logs one more value per batch (``train_penalty``) than the others.
    """
    rows = [{key: value for key, value in row.items() if key != "batches"} for row in history]
    return type(history)(rows)


class NeSCalClassifier(ClassifierMixin, BaseEstimator):
    """Neural classifier for tabular data, trained with NeSCal (neighbourhood smoothing).

    The default objective is NeSCal (:class:`~nescal_sklearn.losses.NeSCalLoss`):
    cross-entropy until the validation NLL stops improving (``warmup="auto"``), then
    a k-nearest-neighbour graph built once on the network's own embeddings of the
    training rows, then cross-entropy plus the neighbour soft target — the KL
    divergence from the neighbours' mean cached prediction to the row's own —
    pulling each prediction toward its neighbourhood's. The method as published
    (a fixed warm-up, then a Jensen–Shannon penalty) is
    ``loss=NeSCalLoss(warmup=0.3, divergence="js")``. ``loss="ce"`` trains the very
    same network with plain cross-entropy. Nothing of the graph is kept: the fitted
    model predicts exactly like a cross-entropy model of the same architecture.
    When a NeSCal fit ends up without the penalty (the warm-up never ended, or
    early stopping restored a warm-up epoch), ``fit`` warns
    (:class:`~nescal_sklearn.exceptions.PenaltyInactiveWarning`) and
    ``penalty_status_`` says so.

    **Recipes.** Every training parameter below whose default is None takes its value
    from a *recipe*: a named, dated, frozen set of settings
    (:data:`~nescal_sklearn.estimator.RECIPES`). ``recipe=None`` is the newest, today
    ``"2026-12-04"``: 256 epochs at lr 3e-3 under a flat-then-cosine schedule, every
    epoch trained and the one best on the held-out rows kept, MLP 256-256 with ReLU
    and dropout 0.1, batches of 256, weight decay 1e-4. A loss given by name
    (``loss="nescal"``) takes the recipe's settings for that loss. A parameter set
    explicitly wins over the recipe. A better default is a new recipe, never a change
    of an old one, so ``NeSCalClassifier(recipe="2026-12-04")`` always trains the same
    way; ``params_`` holds what a fit used.

    Design: the class *composes* a skorch ``NeuralNet`` (built in ``fit``, dropped
    after it) instead of subclassing skorch's classifier, so that ``__init__`` stores
    only this class's parameters and fitted state ends in ``_``; skorch supplies the
    training loop, callbacks and ``history``.

    Parameters
    ----------
    loss : str or TrainingLoss, default="nescal"
        The training objective: a registered name (``"nescal"``, ``"ce"``, and the
        baselines in :data:`nescal_sklearn.losses.LOSSES`) or a loss object (used as
        it is). Its hyperparameters are nested parameters, e.g. ``loss__n_neighbors``.
    recipe : str or None, default=None
        The training recipe the None-valued parameters take their values from (a key
        of :data:`~nescal_sklearn.estimator.RECIPES`); None: the newest.
    module : None, torch.nn.Module subclass or instance, default=None
        The network. ``None`` builds :class:`~nescal_sklearn.nn.TabularMLP` from
        ``hidden_sizes``, ``dropout``, ``activation`` and ``module_kwargs``. A class is
        instantiated with ``module_kwargs`` plus ``n_features``/``n_classes`` when its
        ``__init__`` takes them. An instance is deep-copied at each ``fit``. The module
        maps a float32 batch (n, n_features) to logits (n, n_classes), or to
        (n, k, n_classes) for an ensemble of k members (members train on every row and
        predict as the mean of their probabilities).
    module_kwargs : dict or None, default=None
        Keyword arguments of the module class. For the default network, the options of
        :class:`~nescal_sklearn.nn.TabularMLP` (``n_members``, ``numeric_embedding``,
        ``front_scale``, ``parametric_activation``, ...), plus
        ``categorical_embedding=True``: a learned embedding for each one-hot encoded
        feature of at least 10 categories. Both embeddings act on the columns of the
        layout (``categorical_features``) unless ``embedded_features`` or
        ``categorical_groups`` say otherwise.
    hidden_sizes : tuple of int or None, default=None
        Hidden widths of the default network (recipe: ``(256, 256)``).
    dropout : float or None, default=None
        Dropout of the default network (recipe: 0.1).
    activation : {"relu", "gelu", "silu", "tanh", "selu", "mish"} or None, default=None
        Hidden activation of the default network (recipe: ``"relu"``).
    categorical_features : ColumnLayout, sequence of sequences of int, or None, default=None
        The column layout of ``X``, declared: a
        :class:`~nescal_sklearn.preprocessing.ColumnLayout` (a fitted
        :func:`~nescal_sklearn.make_tabular_preprocessor`'s ``column_layout_``), or the
        one-hot groups, each the list of columns that encode one categorical feature
        (every other column is numeric). None: when an option needs the layout, it is
        read from the training rows' values (columns with more than two distinct values
        are numeric; runs of adjacent 0/1 columns with one 1 per row are one-hot
        groups), which misreads a ``drop="first"`` encoding and adjacent indicator
        columns that sum to 1.
    embedding_layer : str or None, default=None
        Name (as in ``module.named_modules()``) of the layer whose *input* is the
        embedding used for the neighbour graph. None: the name the module gives in its
        ``embedding_layer_name`` attribute (the default network's output layer), else
        the last ``nn.Linear``.
    max_epochs : int or None, default=None
        Training budget in epochs (recipe: 256).
    batch_size : int or None, default=None
        Mini-batch size (recipe: 256).
    lr : float or None, default=None
        AdamW learning rate (recipe: 3e-3).
    weight_decay : float or None, default=None
        AdamW weight decay (recipe: 1e-4).
    lr_schedule : {"constant", "cosine", "flat_cosine"} or None, default=None
        Learning-rate multiplier per epoch over ``max_epochs``: constant, cosine
        decay from 1 to 0, or flat for the first half then cosine to 0 (recipe:
        ``"flat_cosine"``). Parameters unfrozen by ``unfreeze_at`` keep ``unfreeze_lr``.
    early_stopping : {"nll", "refinement"}, bool or None, default=None
        Hold out ``validation_fraction`` of the rows (stratified) or use ``X_val``,
        watch a criterion on them, and restore the epoch where it was best at the end.
        ``"nll"`` (or True): the validation NLL. ``"refinement"``: the validation NLL
        after the temperature that is best on those rows that epoch
        (:func:`~nescal_sklearn.metrics.refinement_log_loss`; Berta et al., 2025), for
        a model that will be calibrated post hoc. NeSCal's ``warmup="auto"`` watches
        the same criterion. False: train ``max_epochs`` on all rows. Held-out rows never
        enter the neighbour graph. Recipe: ``"nll"``.
    validation_fraction : float or None, default=None
        Fraction held out for early stopping (recipe: 0.2).
    patience : int, False or None, default=None
        Stop once the criterion has not improved for ``patience`` epochs (counted from
        the end of NeSCal's warm-up); False: never stop early, train ``max_epochs`` and
        restore the best epoch. Recipe: False.
    mixup : float, default=0.0
        When > 0, mixup with Beta(mixup, mixup) coefficients: inputs and targets of
        each batch are mixed with a random permutation of it.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, as in scikit-learn's classifiers; multiplied into
        ``sample_weight``.
    freeze : list of str or None, default=None
        fnmatch patterns of module or parameter names (e.g. ``["encoder*"]``) whose
        parameters are not trained; their submodules stay in eval mode while training.
        A pattern that matches nothing raises.
    unfreeze_at : int or None, default=None
        With ``freeze``: the 1-based epoch from which every parameter trains.
    unfreeze_lr : float or None, default=None
        Learning rate of the formerly frozen parameters from ``unfreeze_at`` on;
        None: ``lr``.
    n_threads : int or None, default=1
        Torch intra-op and BLAS/OpenMP threads during ``fit`` and prediction (set, then
        restored); None leaves the process's settings alone. One thread per fit keeps
        parallel fits from oversubscribing the cores (``docs/nescal.md``, "Threads").
        Fits at different ``n_threads`` are bit-identical under Intel MKL's strict
        reproducibility (``MKL_CBWR=AUTO,STRICT`` in the environment before torch loads);
        without it they differ by float32 round-off, which training compounds.
    device : str, default="cpu"
        Torch device for training ("cpu", "cuda", "cuda:1", ...). The fitted network
        stays on it and predicts there; a pickled model unpickles on the CPU.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, weight initialisation, shuffling, dropout, the graph and
        mixup. With an int, fits on the CPU are identical from run to run and across
        processes, for the same ``n_threads`` on the same CPU (across ``n_threads``: see
        above).
    verbose : int, default=0
        0: silent; 1: skorch's per-epoch table; 2: also a progress bar per epoch.
    n_members, numeric_embedding, categorical_embedding : deprecated
        Options of the default network: pass them in ``module_kwargs``. Removed in the
        next release.
    numeric_scaling : deprecated
        ``"robust"`` scales the numeric columns inside the estimator; use
        ``make_tabular_pipeline(numeric_scaling="robust")``. Removed in the next release.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a DataFrame with string column names.
    recipe_ : str
        Name of the recipe the fit used.
    params_ : mapping
        The training settings the fit used: the recipe's, overridden by the
        parameters set explicitly.
    module_ : torch.nn.Module
        The trained network (in eval mode, on the training device).
    loss_ : TrainingLoss
        The objective used (a spec: it holds no graph or cache, and ``fit`` never
        changes it; see ``warmup_`` and ``n_neighbors_``).
    warmup_ : int, "auto" or None
        NeSCal's warm-up as trained: ``"auto"``, or its fixed length in epochs (the
        0.3 fraction of ``max_epochs`` that ``"auto"`` falls back to without
        validation rows, with a warning). None for losses without a graph.
    n_neighbors_ : int or None
        Neighbours per row in the graph as built (a default too large for the data is
        clamped, with a warning). None for losses without a graph.
    column_layout_ : ColumnLayout or None
        The column layout the network's options used (declared or read from the
        values); None when none was needed.
    input_scaler_ : ColumnScaler or None
        The fitted deprecated ``numeric_scaling`` (None without it).
    history_ : skorch.history.History
        Per-epoch log: ``train_loss``, ``valid_nll`` (validation NLL),
        ``valid_refined_nll`` and ``valid_temperature`` (after the best temperature on
        those rows, and that temperature), ``train_penalty``, ``penalty_weight``,
        ``graph_seconds``, ``cache_seconds``, ``unfrozen``,
        ``warmup_restored_epoch``, ``event_lr``, ``dur`` (and skorch's own
        ``valid_loss``).
    n_epochs_ : int
        Epochs run.
    best_epoch_ : int or None
        1-based epoch restored by early stopping (None without early stopping).
    graph_epoch_ : int or None
        1-based epoch at whose start the neighbour graph was built (None if never).
    penalty_status_ : {"penalised", "no_graph", "warmup_checkpoint"} or None
        For a neighbour loss (NeSCal): ``"penalised"`` when the returned weights
        were trained with the penalty; ``"no_graph"`` when the warm-up never ended
        within ``max_epochs``; ``"warmup_checkpoint"`` when early stopping restored an
        epoch from before the graph. None for other losses.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklearn.pipeline import make_pipeline
    >>> from nescal_sklearn import NeSCalClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = make_pipeline(
    ...     StandardScaler(), NeSCalClassifier(hidden_sizes=(32,), max_epochs=20, random_state=0)
    ... ).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> clf[-1].recipe_, clf[-1].params_["lr"]
    ('2026-12-04', 0.003)

    """

    _parameter_constraints: dict = {
        "loss": [TrainingLoss, str],
        "recipe": [None, StrOptions(set(RECIPES))],
        "module": [None, type, nn.Module],
        "module_kwargs": [None, dict],
        "hidden_sizes": [None, "array-like"],
        "dropout": [None, Interval(numbers.Real, 0.0, 1.0, closed="left")],
        "activation": [None, StrOptions({"relu", "gelu", "silu", "tanh", "selu", "mish"})],
        "categorical_features": [None, ColumnLayout, list, tuple, np.ndarray],
        "embedding_layer": [None, str],
        "max_epochs": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [None, Interval(numbers.Real, 0.0, None, closed="neither")],
        "weight_decay": [None, Interval(numbers.Real, 0.0, None, closed="left")],
        "lr_schedule": [None, StrOptions(set(LR_SCHEDULES))],
        "early_stopping": [None, StrOptions({"nll", "refinement"}), "boolean"],
        "validation_fraction": [None, Interval(numbers.Real, 0.0, 1.0, closed="neither")],
        "patience": [None, Interval(numbers.Integral, 1, None, closed="left"), "boolean"],
        "mixup": [Interval(numbers.Real, 0.0, None, closed="left")],
        "class_weight": [None, dict, StrOptions({"balanced"})],
        "freeze": [None, list, tuple],
        "unfreeze_at": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "unfreeze_lr": [None, Interval(numbers.Real, 0.0, None, closed="neither")],
        "n_threads": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "n_members": [
            StrOptions({"deprecated"}),
            Interval(numbers.Integral, 1, None, closed="left"),
        ],
        "numeric_embedding": [StrOptions({"deprecated", "periodic", "pbld"}), None],
        "numeric_scaling": [StrOptions({"deprecated", "robust"}), None],
        "categorical_embedding": [StrOptions({"deprecated"}), "boolean"],
    }

    def __init__(
        self,
        loss: str | TrainingLoss = "nescal",
        *,
        recipe: str | None = None,
        module: type[nn.Module] | nn.Module | None = None,
        module_kwargs: dict | None = None,
        hidden_sizes: Sequence[int] | None = None,
        dropout: float | None = None,
        activation: str | None = None,
        categorical_features: ColumnLayout | Sequence[Sequence[int]] | None = None,
        embedding_layer: str | None = None,
        max_epochs: int | None = None,
        batch_size: int | None = None,
        lr: float | None = None,
        weight_decay: float | None = None,
        lr_schedule: str | None = None,
        early_stopping: str | bool | None = None,
        validation_fraction: float | None = None,
        patience: int | bool | None = None,
        mixup: float = 0.0,
        class_weight: dict | str | None = None,
        freeze: Sequence[str] | None = None,
        unfreeze_at: int | None = None,
        unfreeze_lr: float | None = None,
        n_threads: int | None = 1,
        device: str = "cpu",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        n_members="deprecated",
        numeric_embedding="deprecated",
        numeric_scaling="deprecated",
        categorical_embedding="deprecated",
    ) -> None:
        self.loss = loss
        self.recipe = recipe
        self.module = module
        self.module_kwargs = module_kwargs
        self.hidden_sizes = hidden_sizes
        self.dropout = dropout
        self.activation = activation
        self.categorical_features = categorical_features
        self.embedding_layer = embedding_layer
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.lr_schedule = lr_schedule
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.mixup = mixup
        self.class_weight = class_weight
        self.freeze = freeze
        self.unfreeze_at = unfreeze_at
        self.unfreeze_lr = unfreeze_lr
        self.n_threads = n_threads
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.n_members = n_members
        self.numeric_embedding = numeric_embedding
        self.numeric_scaling = numeric_scaling
        self.categorical_embedding = categorical_embedding

    # ------------------------------------------------------------------ fitting
    def fit(
        self, X, y, sample_weight=None, *, X_val=None, y_val=None, sample_weight_val=None
    ) -> NeSCalClassifier:
        """Train the network on ``X`` (n_samples, n_features) and labels ``y``.

        The steps, in order: check the parameters and resolve them against the recipe;
        prepare the data (:func:`prepare_fit_data`); build the network and check that
        it maps the rows to one (finite) logit per class; train; check that the result
        is finite, and warn when it is degenerate (a diverged run rescued by early
        stopping, an epoch kept that is worse than chance, probabilities of exactly 0);
        then set the fitted attributes. A fit that raises (a Ctrl-C included)
        leaves the estimator unfitted.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric features (use :func:`make_tabular_pipeline` for mixed types).
        y : array-like of shape (n_samples,)
            Class labels, all numbers or all strings.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Non-negative weight of each row (times ``class_weight``). Each training
            row's loss is weighted (the base loss and the penalty's term of the row
            itself); the weights of the training rows are scaled to mean 1, so a
            constant weight is the unweighted fit exactly and an integer weight acts as
            that many copies of the row in expectation. Held-out rows keep their
            weights: early stopping and ``warmup="auto"`` watch the weighted validation
            NLL. Zero-weight training rows still take part in the neighbour graph.
            Weights that are zero on every training row, or on every held-out row,
            raise.
        X_val, y_val : array-like or None, default=None
            Validation rows for early stopping, used instead of holding out
            ``validation_fraction`` of ``X`` (as in scikit-learn's
            ``HistGradientBoostingClassifier.fit``); refused with
            ``early_stopping=False``.
        sample_weight_val : array-like of shape (n_val_samples,) or None, default=None
            Weights of ``X_val`` (times ``class_weight``).

        Returns
        -------
        self : NeSCalClassifier
        """
        self._forget_fit()
        settings = self.check_params()
        loss, freeze = settings["loss"], settings["freeze"]
        with limit_threads(self.n_threads):
            rng = check_random_state(self.random_state)
            seed = int(rng.randint(np.iinfo(np.int32).max))
            data = prepare_fit_data(
                self, settings, X, y, sample_weight, X_val, y_val, sample_weight_val, rng
            )
            plan = self._neighbour_plan(loss, settings, data)
            device = self._training_device()
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                module = self._build_module(settings, data)
                frozen = None if freeze is None else self._frozen_parts(module, freeze)
                net, callbacks = self._build_net(
                    module, loss, plan, settings, data, device, seed, frozen
                )
                train_X = {"X": data.X_train, "index": np.arange(len(data.X_train))}
                if data.w_train is not None:
                    train_X["sample_weight"] = data.w_train
                net.fit(train_X, data.y_train)
                net.remove_frozen_hooks()
            self._check_training_ended(net, callbacks, settings)
            logits = self._check_finite(net, data, settings)
            self._warn_degenerate(net, callbacks, data, settings, logits)
        self._set_fitted(net, callbacks, loss, plan, settings, data)
        return self

    def check_params(self) -> Mapping[str, Any]:
        """Check the parameters without data, as ``fit`` does, and return its settings.

        Runs scikit-learn's parameter constraints and every check that needs no data
        (the loss's own, a fixed warm-up within ``max_epochs``, the freeze options), and
        resolves the parameters against the recipe. A benchmark configuration calls it to
        reject a bad method before any fit.

        Returns
        -------
        mapping
            The settings a fit would use: the recipe's values overridden by the
            parameters set (the keys of ``params_``), plus ``"recipe"``, ``"loss"`` (the
            loss object) and the internal ones.

        Raises
        ------
        ValueError, TypeError
            Naming the parameter and the value.

        Examples
        --------
        >>> from nescal_sklearn import NeSCalClassifier
        >>> NeSCalClassifier(recipe="2026-12-02").check_params()["lr"]
        0.001
        """
        settings = dict(self._resolved_settings())
        freeze = check_freeze_patterns(self.freeze)
        self._check_freeze_options(freeze, settings)
        settings.update(freeze=freeze, loss=self._resolved_loss(settings))
        return MappingProxyType(settings)

    def _forget_fit(self) -> None:
        """Remove every fitted attribute (of an earlier fit): the estimator is unfitted."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, name)

    def _resolved_settings(self) -> Mapping[str, Any]:
        """The training settings of this fit: the recipe's, then the parameters set.

        Validates the parameters (scikit-learn's constraints, and what they cannot say)
        and turns the deprecated ones into their new form, with a ``FutureWarning``.
        """
        self._validate_params()
        for name in INT_PARAMS:
            value = getattr(self, name)
            if isinstance(value, bool) and not (name == "patience" and value is False):
                raise ValueError(f"{name} must be an int, not a bool; got {value!r}.")
        recipe = get_recipe(self.recipe)
        settings = {
            name: (
                getattr(self, name)
                if getattr(self, name) is not None
                else recipe.params.get(name, BEFORE_RECIPES.get(name))
            )
            for name in RECIPE_PARAMS
        }
        if not isinstance(settings["early_stopping"], str):
            settings["early_stopping"] = "nll" if settings["early_stopping"] else False
        settings["hidden_sizes"] = self._checked_hidden_sizes(settings["hidden_sizes"])
        module_kwargs = dict(self.module_kwargs or {})
        for name in DEPRECATED_MODULE_OPTIONS:
            value = getattr(self, name)
            if isinstance(value, str) and value == "deprecated":
                continue
            if self.module is not None:
                raise ValueError(
                    f"{name}={value!r} configures the default network (module=None), but "
                    f"module={self.module!r} was given. Configure your module instead: an "
                    "ensemble module returns logits of shape (n, n_members, n_classes)."
                )
            if isinstance(value, bool) and name == "n_members":
                raise ValueError(f"n_members must be an int, not a bool; got {value!r}.")
            warnings.warn(
                f"NeSCalClassifier({name}=...) is deprecated and will be removed in the next "
                f"release; pass module_kwargs={{{name!r}: {value!r}}} instead.",
                FutureWarning,
                stacklevel=3,
            )
            module_kwargs.setdefault(name, value)
        numeric_scaling = None
        if not (isinstance(self.numeric_scaling, str) and self.numeric_scaling == "deprecated"):
            numeric_scaling = self.numeric_scaling
            warnings.warn(
                "NeSCalClassifier(numeric_scaling=...) is deprecated and will be removed in "
                "the next release; scale in the preprocessing instead: "
                "make_tabular_pipeline(numeric_scaling='robust').",
                FutureWarning,
                stacklevel=3,
            )
        uses_layout = self.module is None and (
            module_kwargs.get("numeric_embedding") is not None
            or bool(module_kwargs.get("categorical_embedding"))
        )
        settings.update(
            recipe=recipe.name,
            module_kwargs=MappingProxyType(module_kwargs),
            class_weight=self.class_weight,
            categorical_features=self.categorical_features,
            numeric_scaling=numeric_scaling,
            needs_layout=uses_layout or numeric_scaling is not None,
        )
        return MappingProxyType(settings)

    @staticmethod
    def _checked_hidden_sizes(sizes) -> tuple[int, ...]:
        entries = list(sizes) if isinstance(sizes, list | tuple | np.ndarray) else None
        if entries is None or not all(
            isinstance(h, numbers.Integral) and not isinstance(h, bool) and h >= 1 for h in entries
        ):
            shown = [_plain(h) for h in entries] if entries is not None else sizes
            raise ValueError(
                "hidden_sizes must be a sequence of ints >= 1 (the width of each hidden "
                f"layer; () for none); got {shown!r}."
            )
        return tuple(int(h) for h in entries)

    def _check_freeze_options(self, freeze, settings: Mapping[str, Any]) -> None:
        if freeze == ():
            raise ValueError(
                "freeze=[] freezes nothing; pass freeze=None, or patterns of the parts to freeze."
            )
        if self.unfreeze_at is not None and freeze is None:
            raise ValueError(
                f"unfreeze_at={self.unfreeze_at!r} unfreezes the parameters that freeze "
                "freezes, but freeze=None; pass freeze patterns too."
            )
        if self.unfreeze_lr is not None and self.unfreeze_at is None:
            raise ValueError(
                f"unfreeze_lr={self.unfreeze_lr!r} is the learning rate from unfreeze_at on, "
                "but unfreeze_at=None; pass unfreeze_at too."
            )
        max_epochs = settings["max_epochs"]
        if self.unfreeze_at is not None and self.unfreeze_at > max_epochs:
            raise ValueError(
                f"unfreeze_at={self.unfreeze_at} is after the last of "
                f"max_epochs={max_epochs}: nothing would be unfrozen. Pass an epoch "
                f"<= {max_epochs}, or unfreeze_at=None to stay frozen."
            )

    def _resolved_loss(self, settings: Mapping[str, Any]) -> TrainingLoss:
        """The loss object: a name with the recipe's settings for it, or a copy of the
        object given. Validated; never changed by the fit."""
        if isinstance(self.loss, str):
            loss = get_loss(self.loss)
            loss.set_params(**get_recipe(settings["recipe"]).loss_params.get(self.loss, {}))
        else:
            loss = clone(get_loss(self.loss))
        loss.validate()
        if loss.uses_neighbours and loss.warmup != "auto":
            fixed, max_epochs = loss.warmup_epochs(settings["max_epochs"]), settings["max_epochs"]
            if fixed >= max_epochs:
                raise ValueError(
                    f"loss__warmup={loss.warmup!r} ends the warm-up at epoch {fixed + 1}, "
                    f"after the last of max_epochs={max_epochs}: the neighbour graph would "
                    "never be built. Pass a shorter warmup, a fraction in [0, 1), or more "
                    "max_epochs."
                )
        return loss

    def _neighbour_plan(
        self, loss: TrainingLoss, settings: Mapping[str, Any], data: FitData
    ) -> Mapping[str, Any] | None:
        """NeSCal's warm-up and neighbour count as this fit will train them.

        The spec is not changed: what differs from it (the ``auto`` warm-up without
        validation rows, a default ``n_neighbors`` too large for the data) is returned,
        announced with a warning, and recorded as ``warmup_`` and ``n_neighbors_``.
        """
        if not loss.uses_neighbours:
            return None
        max_epochs = settings["max_epochs"]
        warmup: int | str = "auto"
        if loss.warmup == "auto" and data.X_valid is None:
            warmup = int(AUTO_WARMUP_FALLBACK * max_epochs)
            warnings.warn(
                "loss__warmup='auto' ends the warm-up where the validation NLL stops "
                "improving, but early_stopping=False holds out no validation rows; the "
                f"warm-up falls back to {AUTO_WARMUP_FALLBACK} of max_epochs ({warmup} "
                "epochs, warmup_). Pass an int or float warmup to silence this warning.",
                UserWarning,
                stacklevel=3,
            )
        elif loss.warmup != "auto":
            warmup = loss.warmup_epochs(max_epochs)
        n_train = len(data.X_train)
        held = (
            f" after holding out validation_fraction={settings['validation_fraction']}"
            if data.held_out
            else ""
        )
        n_neighbors = loss.n_neighbors
        if n_train < n_neighbors + 1 and isinstance(self.loss, str) and n_train >= 2:
            n_neighbors = n_train - 1
            warnings.warn(
                f"loss__n_neighbors={loss.n_neighbors} (the recipe's value for "
                f"loss={self.loss!r}) needs at least {loss.n_neighbors + 1} training rows; got "
                f"{n_train}{held}. Using {n_neighbors} neighbours instead (recorded as "
                "n_neighbors_); pass loss__n_neighbors explicitly to choose.",
                UserWarning,
                stacklevel=3,
            )
        if n_train < n_neighbors + 1:
            raise ValueError(
                f"loss__n_neighbors={loss.n_neighbors} needs at least {loss.n_neighbors + 1} "
                f"training rows; got {n_train}{held}."
            )
        return MappingProxyType({"warmup": warmup, "n_neighbors": n_neighbors})

    def _build_module(self, settings: Mapping[str, Any], data: FitData) -> nn.Module:
        """The network, checked on two training rows: one logit per class and member."""
        n_classes = len(data.classes)
        mlp_kwargs: dict[str, Any] = {
            "hidden_sizes": settings["hidden_sizes"],
            "dropout": settings["dropout"],
            "activation": settings["activation"],
        }
        kwargs = dict(settings["module_kwargs"])
        if self.module is None:
            layout = data.layout
            if kwargs.get("numeric_embedding") is not None:
                kwargs.setdefault("embedded_features", list(layout.numeric))
                if not kwargs["embedded_features"]:
                    warnings.warn(
                        f"module_kwargs numeric_embedding={kwargs['numeric_embedding']!r} "
                        "finds no numeric column to embed in the layout (every column "
                        "is one-hot or binary); the network sees the columns as they are.",
                        UserWarning,
                        stacklevel=4,
                    )
            if kwargs.pop("categorical_embedding", False):
                kwargs.setdefault(
                    "categorical_groups",
                    [
                        list(group)
                        for group in layout.groups
                        if len(group) >= CATEGORICAL_EMBEDDING_MIN_SIZE
                    ],
                )
        module = build_module(
            self.module,
            kwargs,
            n_features=data.n_features_in,
            n_classes=n_classes,
            mlp_kwargs=mlp_kwargs,
        )
        probe = torch.as_tensor(data.X_train[:2])
        was_training = module.training
        module.eval()
        try:
            with torch.no_grad():
                out = module(probe)
        except Exception as exc:  # the module's own error, on rows of the data's width
            raise ValueError(
                f"module {type(module).__name__} failed on a batch of X's rows "
                f"({data.n_features_in} columns): {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            module.train(was_training)
        if not isinstance(out, torch.Tensor) or out.dim() not in (2, 3):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"module {type(module).__name__} must return logits of shape (n, n_classes) "
                f"or (n, n_members, n_classes); got {shape} for a batch of {len(probe)} rows."
            )
        if out.shape[-1] != n_classes:
            raise ValueError(
                f"module {type(module).__name__} returns {out.shape[-1]} logits per row, but "
                f"y has {n_classes} classes {data.classes.tolist()!r}; the output width "
                "must be the number of classes."
            )
        if not bool(torch.isfinite(out).all()):
            raise ValueError(
                f"module {type(module).__name__} returns non-finite logits (nan or inf) for "
                f"the first {len(probe)} rows of X before any training (their largest "
                f"absolute value is {_largest(data.X_train[:2]):.3g}); a module "
                "must map finite inputs to finite logits."
            )
        return module

    def _frozen_parts(self, module, freeze):
        frozen = resolve_frozen(module, freeze)
        n_params = sum(1 for _ in module.parameters())
        if len(frozen.parameters) == n_params:
            raise ValueError(
                f"freeze={list(freeze)!r} freezes every parameter of "
                f"{type(module).__name__}: nothing would train. Leave some part (a head) "
                "unfrozen."
            )
        return frozen

    def _build_net(
        self, module, loss, plan, settings, data: FitData, device, seed, frozen
    ) -> tuple[NeSCalNet, dict]:
        """The skorch net and its callbacks, in the order they must run each epoch.

        The order is pinned by a test: the validation criterion is recorded before the
        warm-up and the best-epoch keeper read it, and the keeper updates its best
        epoch before :class:`StopAfterPatience` counts from it.
        """
        max_epochs = settings["max_epochs"]
        criterion = settings["early_stopping"]
        validated = data.X_valid is not None
        monitor = CRITERIA[criterion] if validated else None
        callbacks: dict = {}
        if validated:
            callbacks["validation_nll"] = ValidationNLL()
        if plan is not None:
            fixed = None if plan["warmup"] == "auto" else plan["warmup"]
            callbacks["warmup_end"] = WarmupEnd(fixed, loss.warmup_patience, monitor=monitor)
            callbacks["build_neighbourhood"] = BuildNeighbourhood(
                loss,
                torch.as_tensor(data.X_train),
                max_epochs,
                self.embedding_layer,
                seed,
                n_neighbors=plan["n_neighbors"],
                y_train=torch.as_tensor(data.y_train),
            )
        callbacks["penalty_schedule"] = PenaltySchedule()
        callbacks["train_penalty"] = PassthroughScoring(name="train_penalty", on_train=True)
        train_split = None
        if validated:
            valid_X = (
                data.X_valid
                if data.w_valid is None
                else {"X": data.X_valid, "sample_weight": data.w_valid}
            )
            train_split = predefined_split(Dataset(valid_X, data.y_valid))
            keeper = EarlyStopping(
                monitor=monitor,
                patience=max_epochs + 1,  # never stops: it keeps and restores the best
                threshold=1e-4,
                threshold_mode="rel",
                lower_is_better=True,
                load_best=True,
            )
            callbacks["best_epoch"] = keeper
            if settings["patience"] is not False:
                callbacks["stop_after_patience"] = StopAfterPatience(
                    settings["patience"], keeper, after_warmup=plan is not None
                )
        if frozen is not None and self.unfreeze_at is not None:
            lr = settings["lr"] if self.unfreeze_lr is None else self.unfreeze_lr
            callbacks["unfreeze"] = Unfreeze(self.unfreeze_at, lr)
        if settings["lr_schedule"] != "constant":
            callbacks["lr_schedule"] = lr_scheduler(settings["lr_schedule"], max_epochs)
        if self.verbose >= 2:
            callbacks["progress_bar"] = ProgressBar()
        net = NeSCalNet(
            module=module,
            criterion=nn.CrossEntropyLoss,  # required by skorch; get_loss computes the loss
            optimizer=torch.optim.AdamW,
            lr=settings["lr"],
            optimizer__weight_decay=settings["weight_decay"],
            max_epochs=max_epochs,
            batch_size=settings["batch_size"],
            iterator_train__shuffle=True,
            train_split=train_split,
            callbacks=list(callbacks.items()),
            device=device,
            verbose=int(self.verbose >= 1),
            training_loss=loss,
            mixup=self.mixup,
            mixup_seed=seed,
            frozen=frozen,
        )
        net.set_params(callbacks__print_log=PlainPrintLog() if self.verbose else None)
        return net, callbacks

    def _check_training_ended(self, net, callbacks: dict, settings: Mapping[str, Any]) -> None:
        """Raise ``KeyboardInterrupt`` when a Ctrl-C, not the budget or patience, ended it.

        skorch ends its loop on any ``KeyboardInterrupt`` and returns normally; training
        ran to its end when the last epoch completed (``dur`` recorded) and either the
        budget was spent or :class:`StopAfterPatience` stopped it.
        """
        history = net.history
        completed = len(history) > 0 and "dur" in history[-1]
        stopper = callbacks.get("stop_after_patience")
        stopped = stopper is not None and stopper.stopped_
        if completed and (len(history) == settings["max_epochs"] or stopped):
            return
        raise KeyboardInterrupt(
            f"NeSCalClassifier.fit: training interrupted in epoch {len(history)}"
        )

    def _check_finite(self, net, data: FitData, settings: Mapping[str, Any]) -> np.ndarray:
        """Refuse non-finite weights or predictions, as scikit-learn's ``MLPClassifier``
        does; return the trained network's logits on the training rows."""
        module = net.module_
        logits = None
        if all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            logits = _module_logits(module, data.X_train)
        if logits is None or not np.isfinite(logits).all():
            raise ValueError(
                "Training produced non-finite parameter weights or predictions (the training "
                f"loss by epoch: {_short(net.history[:, 'train_loss'])}). The input data may "
                "contain large values and need to be preprocessed (the largest absolute value "
                f"in X is {_largest(data.X_train):.3g}), or lr={settings['lr']:g} is too "
                "large for this data."
            )
        return logits

    def _warn_degenerate(
        self, net, callbacks: dict, data: FitData, settings: Mapping[str, Any], logits
    ) -> None:
        """Warn when the (finite) model returned is degenerate: training diverged and
        early stopping kept an earlier epoch, the epoch kept is worse than predicting
        every class with equal probability, or some probabilities are exactly 0."""
        keeper = callbacks.get("best_epoch")
        best = None if keeper is None else int(keeper.best_epoch_)
        uniform = math.log(len(data.classes))
        nll = None if best is None else net.history[best - 1].get("valid_nll")
        garbage = nll is not None and nll > 2 * uniform
        losses = [row.get("train_loss") for row in net.history]
        diverged = [i + 1 for i, v in enumerate(losses) if v is None or not math.isfinite(v)]
        reasons = []
        if diverged:
            kept = "" if best is None or garbage else f", and early stopping kept epoch {best}"
            reasons.append(f"the training loss was not finite from epoch {diverged[0]} on{kept}")
        if garbage:
            reasons.append(
                f"the epoch early stopping kept (epoch {best}) has a validation NLL of "
                f"{nll:.3g}, more than twice that of predicting every class with equal "
                f"probability (log({len(data.classes)}) = {uniform:.3g})"
            )
        zero = (softmax(logits, axis=1) == 0.0).any(axis=1)
        if zero.any():
            span = float((logits.max(axis=1) - logits.min(axis=1)).max())
            reasons.append(
                f"predict_proba gives probabilities of exactly 0 on {int(zero.sum())} of the "
                f"{len(zero)} training rows (logits up to {span:.3g} apart), so a wrong "
                "prediction there has an infinite log loss"
            )
        if reasons:
            warnings.warn(
                f"NeSCalClassifier returned a degenerate model: {'; '.join(reasons)}. Lower "
                f"lr (lr={settings['lr']:g}) or scale X (its largest absolute value is "
                f"{_largest(data.X_train):.3g}; the network expects values of about unit "
                "scale, e.g. through make_tabular_pipeline).",
                UserWarning,
                stacklevel=3,
            )

    def _set_fitted(self, net, callbacks: dict, loss, plan, settings, data: FitData) -> None:
        """Set every fitted attribute, once training has succeeded."""
        self.classes_ = data.classes
        self.n_features_in_ = data.n_features_in
        if data.feature_names_in is not None:
            self.feature_names_in_ = data.feature_names_in
        self.recipe_ = settings["recipe"]
        self.params_ = MappingProxyType(
            {name: settings[name] for name in (*RECIPE_PARAMS, "module_kwargs")}
        )
        self.loss_ = loss
        self.warmup_ = None if plan is None else plan["warmup"]
        self.n_neighbors_ = None if plan is None else plan["n_neighbors"]
        self.column_layout_ = data.layout
        self.input_scaler_ = data.scaler
        module = net.module_.eval()
        for param in module.parameters():
            param.requires_grad_(True)  # a frozen part is frozen for training only
        self.module_ = module
        self.history_ = _epoch_history(net.history)
        self.n_epochs_ = len(net.history)
        keeper = callbacks.get("best_epoch")
        self.best_epoch_ = None if keeper is None else int(keeper.best_epoch_)
        runtime = net.nescal_
        self.graph_epoch_ = None if runtime is None else runtime.start_epoch + 1
        net.nescal_ = None  # the graph and the cache are not kept
        warmup = callbacks.get("warmup_end")
        self.penalty_status_ = _penalty_status(
            loss,
            self.graph_epoch_,
            self.best_epoch_,
            None if warmup is None else warmup.restored_epoch_,
            settings,
            criterion_name=self._criterion_name(settings),
        )

    @staticmethod
    def _criterion_name(settings: Mapping[str, Any]) -> str:
        """The stopping criterion in words, for messages."""
        if settings["early_stopping"] == "refinement":
            return "validation NLL after temperature scaling"
        return "validation NLL"

    def _training_device(self) -> torch.device:
        try:
            device = torch.device(self.device)
        except RuntimeError as exc:  # torch's own message lists the device types it knows
            raise ValueError(
                f"device={self.device!r} is not a torch device; expected a device string "
                f"such as 'cpu', 'cuda' or 'cuda:1' (torch: {exc})."
            ) from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} was requested but CUDA is not available.")
        return device

    def set_params(self, **params) -> NeSCalClassifier:
        """Set parameters; ``loss__<name>`` reaches into the loss object.

        When ``loss`` is a registered name, a nested parameter first replaces it with
        the loss object of that name under the recipe's settings for it, then sets the
        nested value, so ``NeSCalClassifier().set_params(loss__n_neighbors=5)`` and
        grids such as ``{"loss__weight": [0.5, 1.0]}`` work with ``loss="nescal"``.
        """
        nested = {k[len("loss__") :]: v for k, v in params.items() if k.startswith("loss__")}
        super().set_params(**{k: v for k, v in params.items() if not k.startswith("loss__")})
        if nested:
            if isinstance(self.loss, str):
                name = self.loss
                self.loss = get_loss(name)
                if name in LOSSES:
                    self.loss.set_params(**get_recipe(self.recipe).loss_params.get(name, {}))
            self.loss.set_params(**nested)
        return self

    # --------------------------------------------------------------- prediction
    def _logits(self, X) -> np.ndarray:
        check_is_fitted(self, "module_")
        with limit_threads(self.n_threads):
            return self._forward(X)

    def _forward(self, X) -> np.ndarray:
        X = validate_data(self, X, dtype=np.float32, reset=False)
        if self.input_scaler_ is not None:
            X = self.input_scaler_.transform(X)
        if not X.flags.writeable:
            X = X.copy()
        return _module_logits(self.module_, X)

    def decision_function(self, X) -> np.ndarray:
        """Return the network's logits (an ensemble's: the log of its mean probability).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), or (n_samples,) for two classes
            The logits; with two classes, scikit-learn's convention: the logit of
            ``classes_[1]`` minus that of ``classes_[0]`` (positive means ``classes_[1]``).
        """
        logits = self._logits(X)
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        return logits

    def predict_proba(self, X) -> np.ndarray:
        """Return class probabilities, shape (n_samples, n_classes), columns as ``classes_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return softmax(self._logits(X), axis=1)

    def predict(self, X) -> np.ndarray:
        """Return the most probable class of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        logits = self._logits(X)
        return self.classes_[np.argmax(logits, axis=1)]

    # -------------------------------------------------------------- persistence
    def __getstate__(self):
        state = super().__getstate__()
        module = state.get("module_")
        if module is not None and any(p.device.type != "cpu" for p in module.parameters()):
            # Store a CPU copy so a GPU-trained model unpickles anywhere; the fitted
            # network itself stays where it is.
            state = dict(state)
            state["module_"] = copy.deepcopy(module).to("cpu")
        if isinstance(state.get("params_"), MappingProxyType):
            state = dict(state)
            state["params_"] = _plain_mapping(state["params_"])
        return state

    def __setstate__(self, state):
        if isinstance(state.get("params_"), dict):
            state = dict(state)
            state["params_"] = MappingProxyType(state["params_"])
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


def _plain_mapping(mapping: Mapping) -> dict:
    """A (nested) read-only mapping as plain dicts, for pickling."""
    return {k: _plain_mapping(v) if isinstance(v, Mapping) else v for k, v in mapping.items()}


def _short(values) -> list[float]:
    """Numbers to 3 significant digits, for messages."""
    return [float(f"{float(v):.3g}") for v in values]


def _largest(X: np.ndarray) -> float:
    """The largest absolute value of ``X`` (0 for an empty array), for messages."""
    return float(np.abs(X).max()) if X.size else 0.0


def _module_logits(module: nn.Module, X: np.ndarray) -> np.ndarray:
    """The network's logits (an ensemble's: the log of its mean probability) on float32
    rows ``X``, as float64 (n, n_classes), computed in eval mode where the network lives.

    The network is never moved, and a fitted one (in eval mode) is not written to, so
    prediction is thread-safe; a network in training mode is put back in it afterwards.
    """
    parameter = next(module.parameters(), None)
    device = torch.device("cpu") if parameter is None else parameter.device
    was_training = module.training
    if was_training:
        module.eval()
    outputs = []
    try:
        with torch.no_grad():
            for chunk in torch.split(torch.as_tensor(X), PREDICT_BATCH_ROWS):
                outputs.append(ensemble_logits(module(chunk.to(device)).float()).cpu())
    finally:
        if was_training:
            module.train()
    return torch.cat(outputs).numpy().astype(np.float64)


def _penalty_status(
    loss: TrainingLoss,
    graph_epoch: int | None,
    best_epoch: int | None,
    restored_epoch: int | None,
    settings: Mapping[str, Any],
    criterion_name: str,
) -> str | None:
    """Whether the returned weights were trained with the penalty; warn when not."""
    if not loss.uses_neighbours:
        return None
    if graph_epoch is None:
        why = (
            "the warm-up never ended (warmup='auto' ends it once the "
            f"{criterion_name} has not improved for warmup_patience={loss.warmup_patience} "
            f"epochs, and "
            f"max_epochs={settings['max_epochs']} ran out first), so the neighbour graph was "
            "never built"
        )
        status = "no_graph"
    elif best_epoch is not None and best_epoch < graph_epoch:
        restored = (
            ""
            if restored_epoch is None
            else f" (the auto warm-up's optimum, restored at epoch {restored_epoch})"
        )
        why = (
            f"early stopping restored epoch {best_epoch}{restored}, before the "
            f"graph was built at epoch {graph_epoch}: no penalised epoch had a "
            f"lower {criterion_name}"
        )
        status = "warmup_checkpoint"
    else:
        return "penalised"
    base = loss.base_loss if isinstance(loss.base_loss, str) else type(loss.base_loss).__name__
    warnings.warn(
        "NeSCalClassifier returned a model trained without the smoothing penalty, i.e. "
        f"plain {base!r} training: {why}. penalty_status_={status!r}.",
        PenaltyInactiveWarning,
        stacklevel=4,
    )
    return status
