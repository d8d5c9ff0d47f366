"""``NeSCalClassifier``: a scikit-learn classifier trained with NeSCal (or a baseline loss).

``fit`` reads top to bottom: the settings (:mod:`._settings`), the data
(:mod:`._fit_data`), the settings for its rows with NeSCal's plan, the network
(:mod:`._network`) and its skorch net (:mod:`._net`), training, the checks of its outcome
(:mod:`._outcome`), then the fitted attributes.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np
import torch
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from ..losses import LOSSES, TrainingLoss, get_loss
from ..preprocessing import ColumnLayout
from ._fit_data import FitData, prepare_fit_data
from ._net import make_net
from ._network import build_network, frozen_parts, module_logits, training_device
from ._outcome import check_finite, penalty_status, warn_degenerate
from ._precision import PRECISIONS, warn_if_emulated
from ._recipes import RECIPES, get_recipe
from ._schedule import LR_SCHEDULES
from ._settings import FitSettings, resolve_settings
from ._threads import _PREDICTION_THREADS, limit_threads, torch_threads

__all__ = ["NeSCalClassifier"]


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
    cross-entropy until the validation NLL stops improving, then cross-entropy plus a
    pull of each prediction toward its neighbours' on a k-nearest-neighbour graph built
    once on the network's own embeddings of the training rows. ``loss="ce"`` trains the
    same network with plain cross-entropy, and the fitted model predicts exactly like
    one trained so. ``docs/nescal.md`` describes the method, its options and what
    ``fit`` refuses and warns about.

    **Recipes.** Every training parameter below whose default is None takes its value
    from a *recipe*: a named, dated, frozen set of settings
    (:data:`~nescal_sklearn.estimator.RECIPES`). ``recipe=None`` is the newest, today
    ``"2026-12-06"``. A loss given by name takes the recipe's settings for that loss, a
    parameter set explicitly wins over the recipe, and ``params_`` holds what a fit used.

    The class *composes* a skorch ``NeuralNet`` (built in ``fit``, dropped after it), so
    that ``__init__`` stores only this class's parameters and fitted state ends in ``_``.

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
    dropout_masks : {"torch", "fast"} or None, default=None
        How the default network draws its dropout masks (recipe: ``"fast"``; before
        2026-12-06, ``"torch"``): torch's own Bernoulli draws, or 16 random bits a unit
        from numpy's SFC64 generator, fused with the ReLU, several times faster on a CPU
        (:class:`~nescal_sklearn.nn.FastDropout`).
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
    max_row_epochs : int or None, default=None
        Training budget in rows seen (training rows × epochs): ``max_epochs`` is cut to
        ``ceil(max_row_epochs / n_train)`` where that is fewer, so the budget of a fit
        stops growing with its rows, and the learning-rate schedule spans the epochs
        left. Recipe: None (no cut).
    batch_size : int, "auto" or None, default=None
        Mini-batch size (recipe: 256). ``"auto"`` grows it with the training rows
        (TabM's rule): 256 below 32,000 rows, 512 below 108,000, 1,024 from there on.
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
    time_limit : float or None, default=None
        Wall-clock seconds the training may take: at the end of an epoch, training
        stops when one more epoch (as long as the longest so far) would end past it,
        and the best epoch is kept as after ``patience``; at least one epoch runs.
        NeSCal's graph is then searched exactly at any size (only that search can stop
        on time: the approximate one first compiles for about 35 s in a new process),
        and abandoned, unbuilt, once the limit has passed. A
        time budget (``CrossFitClassifier(time_limit=...)`` gives each member fit its
        share, or this limit where it is smaller); a fit it stops depends on the
        machine's speed, so it is not reproducible elsewhere. None: no limit.
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
        parallel fits from oversubscribing the cores (``docs/nescal.md``, "Threads");
        network fits in threads of one process (joblib's ``threading`` backend) run one
        at a time, so that ``random_state`` holds under every joblib backend.
        Fits at different ``n_threads`` are bit-identical under Intel MKL's strict
        reproducibility (``MKL_CBWR=AUTO,STRICT`` in the environment before torch loads);
        without it they differ by float32 round-off, which training compounds.
    precision : {"float32", "bfloat16"}, default="float32"
        The arithmetic of the training steps' forward and backward passes and of the
        validation passes: float32, or torch's bfloat16 autocast (matrix products in
        bfloat16, weights, optimizer and losses in float32). Predictions are float32
        either way. bfloat16 is fast only on CPUs that multiply it in hardware (AMX-BF16
        or AVX-512 BF16, :func:`~nescal_sklearn.estimator.bfloat16_hardware`); elsewhere
        torch emulates it, and ``fit`` warns. Not a recipe's setting: its test NLL
        against float32 is in ``docs/scale.md``.
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
    history_ : skorch.history.History
        Per-epoch log: ``train_loss``, ``valid_nll`` (validation NLL),
        ``valid_refined_nll`` and ``valid_temperature`` (after the best temperature on
        those rows, and that temperature), ``train_penalty``, ``penalty_weight``,
        ``graph_seconds``, ``cache_seconds``, ``unfrozen``,
        ``warmup_restored_epoch``, ``event_lr``, ``dur`` (and skorch's own
        ``valid_loss``).
    n_epochs_ : int
        Epochs run.
    stopped_on_time_ : bool
        Whether ``time_limit`` ended the training.
    best_epoch_ : int or None
        1-based epoch restored by early stopping (None without early stopping).
    graph_epoch_ : int or None
        1-based epoch at whose start the neighbour graph was built (None if never).
    penalty_status_ : {"penalised", "no_graph", "warmup_checkpoint"} or None
        For a neighbour loss (NeSCal): ``"penalised"`` when the returned weights
        were trained with the penalty; ``"no_graph"`` when the warm-up never ended
        within ``max_epochs``, or ``time_limit`` ran out during the graph's search;
        ``"warmup_checkpoint"`` when early stopping restored an
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
    ('2026-12-06', 0.003)

    """

    _parameter_constraints: dict = {
        "loss": [TrainingLoss, str],
        "recipe": [None, StrOptions(set(RECIPES))],
        "module": [None, type, nn.Module],
        "module_kwargs": [None, dict],
        "hidden_sizes": [None, "array-like"],
        "dropout": [None, Interval(numbers.Real, 0.0, 1.0, closed="left")],
        "activation": [None, StrOptions({"relu", "gelu", "silu", "tanh", "selu", "mish"})],
        "dropout_masks": [None, StrOptions({"torch", "fast"})],
        "categorical_features": [None, ColumnLayout, list, tuple, np.ndarray],
        "embedding_layer": [None, str],
        "max_epochs": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "max_row_epochs": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [
            None,
            Interval(numbers.Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "lr": [None, Interval(numbers.Real, 0.0, None, closed="neither")],
        "weight_decay": [None, Interval(numbers.Real, 0.0, None, closed="left")],
        "lr_schedule": [None, StrOptions(set(LR_SCHEDULES))],
        "early_stopping": [None, StrOptions({"nll", "refinement"}), "boolean"],
        "validation_fraction": [None, Interval(numbers.Real, 0.0, 1.0, closed="neither")],
        "patience": [None, Interval(numbers.Integral, 1, None, closed="left"), "boolean"],
        "time_limit": [None, Interval(numbers.Real, 0.0, None, closed="neither")],
        "mixup": [Interval(numbers.Real, 0.0, None, closed="left")],
        "class_weight": [None, dict, StrOptions({"balanced"})],
        "freeze": [None, list, tuple],
        "unfreeze_at": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "unfreeze_lr": [None, Interval(numbers.Real, 0.0, None, closed="neither")],
        "n_threads": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "precision": [StrOptions(set(PRECISIONS))],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
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
        dropout_masks: str | None = None,
        categorical_features: ColumnLayout | Sequence[Sequence[int]] | None = None,
        embedding_layer: str | None = None,
        max_epochs: int | None = None,
        max_row_epochs: int | None = None,
        batch_size: int | str | None = None,
        lr: float | None = None,
        weight_decay: float | None = None,
        lr_schedule: str | None = None,
        early_stopping: str | bool | None = None,
        validation_fraction: float | None = None,
        patience: int | bool | None = None,
        time_limit: float | None = None,
        mixup: float = 0.0,
        class_weight: dict | str | None = None,
        freeze: Sequence[str] | None = None,
        unfreeze_at: int | None = None,
        unfreeze_lr: float | None = None,
        n_threads: int | None = 1,
        precision: str = "float32",
        device: str = "cpu",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ) -> None:
        self.loss = loss
        self.recipe = recipe
        self.module = module
        self.module_kwargs = module_kwargs
        self.hidden_sizes = hidden_sizes
        self.dropout = dropout
        self.activation = activation
        self.dropout_masks = dropout_masks
        self.categorical_features = categorical_features
        self.embedding_layer = embedding_layer
        self.max_epochs = max_epochs
        self.max_row_epochs = max_row_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.lr_schedule = lr_schedule
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.time_limit = time_limit
        self.mixup = mixup
        self.class_weight = class_weight
        self.freeze = freeze
        self.unfreeze_at = unfreeze_at
        self.unfreeze_lr = unfreeze_lr
        self.n_threads = n_threads
        self.precision = precision
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

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
        with limit_threads(settings.n_threads):
            rng = check_random_state(settings.random_state)
            seed = int(rng.randint(np.iinfo(np.int32).max))
            data = prepare_fit_data(
                self,
                settings,
                X,
                y,
                sample_weight=sample_weight,
                X_val=X_val,
                y_val=y_val,
                sample_weight_val=sample_weight_val,
                rng=rng,
            )
            settings = settings.for_rows(
                len(data.X_train), validated=data.X_valid is not None, held_out=data.held_out
            )
            device = training_device(settings.device)
            warn_if_emulated(settings.precision, device)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                module = build_network(settings, data)
                frozen = None if settings.freeze is None else frozen_parts(module, settings.freeze)
                net, callbacks = make_net(
                    settings, data, module, device=device, seed=seed, frozen=frozen
                )
                train_X = {"X": data.X_train, "index": np.arange(len(data.X_train))}
                if data.w_train is not None:
                    train_X["sample_weight"] = data.w_train
                net.fit(train_X, data.y_train)
                net.remove_frozen_hooks()
            logits = check_finite(net, data, settings)
            warn_degenerate(net, callbacks, data, settings, logits)
        self._set_fitted(net, callbacks, settings, data)
        return self

    def check_params(self) -> FitSettings:
        """Check the parameters without data, as ``fit`` does, and return its settings.

        Runs scikit-learn's parameter constraints and every check that needs no data
        (the loss's own, a fixed warm-up within ``max_epochs``, the freeze options), and
        resolves the parameters against the recipe. A benchmark configuration calls it to
        reject a bad method before any fit. Every step of ``fit`` after it reads the
        settings it returns, never the parameters.

        Returns
        -------
        FitSettings
            The settings a fit would use (a frozen dataclass; ``settings["lr"]`` reads a
            field by name too): the recipe's values overridden by the parameters set,
            the recipe's name and the loss object.

        Raises
        ------
        ValueError, TypeError
            Naming the parameter and the value.

        Examples
        --------
        >>> from nescal_sklearn import NeSCalClassifier
        >>> NeSCalClassifier(recipe="2026-12-02").check_params().lr
        0.001
        """
        return resolve_settings(self)

    def refit_params(self, fold_models: Sequence[NeSCalClassifier]) -> dict:
        """The parameters under which this estimator trains on all rows as its fold
        models trained on theirs (``CrossFitClassifier(refit=True)``).

        The refit trains for the mean of the fold models' best epochs (their epochs
        run, where none was restored): without early stopping, without a time limit of
        its own (the ensemble's budget still bounds it) and without ``max_row_epochs``,
        whose cap the fold models' epochs already obeyed on their rows (on all rows it
        would allow fewer). For NeSCal, when most fold models kept an epoch the penalty
        trained, the warm-up is the mean of theirs (kept below the epochs); otherwise
        the epochs kept were the warm-up's, and the base loss trains them.

        Parameters
        ----------
        fold_models : sequence of NeSCalClassifier
            This estimator fitted on each fold of a cross-fitting.

        Returns
        -------
        dict
            Parameters for ``set_params`` of a clone of this estimator.

        Examples
        --------
        >>> from sklearn.base import clone
        >>> from sklearn.datasets import load_iris
        >>> from nescal_sklearn import NeSCalClassifier
        >>> X, y = load_iris(return_X_y=True)
        >>> net = NeSCalClassifier("ce", max_epochs=6, random_state=0)
        >>> folds = [clone(net).fit(X[i::2], y[i::2]) for i in range(2)]
        >>> [fold.best_epoch_ for fold in folds]
        [6, 6]
        >>> params = net.refit_params(folds)
        >>> params["early_stopping"], params["max_epochs"]
        (False, 6)
        """
        epochs = [m.best_epoch_ or m.n_epochs_ for m in fold_models]
        params = {
            "early_stopping": False,
            "max_epochs": _mean_int(epochs),
            "max_row_epochs": None,
            "time_limit": None,
        }
        first = fold_models[0]
        if first.loss_.uses_neighbours:
            penalised = [m for m in fold_models if m.penalty_status_ == "penalised"]
            if len(penalised) * 2 > len(fold_models):  # most kept a penalised epoch
                warmup = _mean_int([m.graph_epoch_ - 1 for m in penalised])
                warmup = min(warmup, params["max_epochs"] - 1)
                params["loss"] = clone(first.loss_).set_params(warmup=warmup)
            else:  # the epochs kept were the warm-up's: the base loss trained them
                params["loss"] = first.loss_.base()
        return params

    def _forget_fit(self) -> None:
        """Remove every fitted attribute (of an earlier fit): the estimator is unfitted."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, name)

    def _set_fitted(self, net, callbacks: dict, settings: FitSettings, data: FitData):
        """Set every fitted attribute, once training has succeeded."""
        self.classes_ = data.classes
        self.n_features_in_ = data.n_features_in
        if data.feature_names_in is not None:
            self.feature_names_in_ = data.feature_names_in
        self.recipe_ = settings.recipe
        self.params_ = settings.params
        self.loss_ = settings.loss
        plan = settings.neighbours
        self.warmup_ = None if plan is None else plan.warmup
        self.n_neighbors_ = None if plan is None else plan.n_neighbors
        self.column_layout_ = data.layout
        module = net.module_.eval()
        for param in module.parameters():
            param.requires_grad_(True)  # a frozen part is frozen for training only
        self.module_ = module
        self.history_ = _epoch_history(net.history)
        self.n_epochs_ = len(net.history)
        on_time = callbacks.get("stop_on_time")
        self.stopped_on_time_ = on_time is not None and on_time.stopped_
        keeper = callbacks.get("best_epoch")
        self.best_epoch_ = None if keeper is None else int(keeper.best_epoch_)
        runtime = net.nescal_
        self.graph_epoch_ = None if runtime is None else runtime.start_epoch + 1
        net.nescal_ = None  # the graph and the cache are not kept
        warmup = callbacks.get("warmup_end")
        builder = callbacks.get("build_neighbourhood")
        self.penalty_status_ = penalty_status(
            settings,
            self.graph_epoch_,
            self.best_epoch_,
            None if warmup is None else warmup.restored_epoch_,
            None if builder is None else builder.timed_out_epoch_,
        )

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
        threads = _PREDICTION_THREADS.get()  # prediction_threads' block, if any
        with torch_threads(self.n_threads if threads is None else threads):
            return self._forward(X)  # a forward pass: torch's threads alone

    def _forward(self, X) -> np.ndarray:
        X = validate_data(self, X, dtype=np.float32, reset=False)
        if not X.flags.writeable:
            X = X.copy()
        return module_logits(self.module_, X)

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


def _mean_int(values) -> int:
    """The mean of ``values``, rounded, and at least 1."""
    return max(1, int(round(float(np.mean(values)))))


def _plain_mapping(mapping: Mapping) -> dict:
    """A (nested) read-only mapping as plain dicts, for pickling."""
    return {k: _plain_mapping(v) if isinstance(v, Mapping) else v for k, v in mapping.items()}
