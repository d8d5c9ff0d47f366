"""``NeSCalClassifier``: a scikit-learn classifier trained with NeSCal (or a baseline loss)."""

from __future__ import annotations

import contextlib
import copy
import numbers
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    column_or_1d,
    validate_data,
)
from skorch.callbacks import PassthroughScoring, ProgressBar
from skorch.dataset import Dataset
from skorch.helper import predefined_split
from threadpoolctl import threadpool_limits
from torch import nn

from ..exceptions import PenaltyInactiveWarning
from ..losses import TrainingLoss, get_loss
from ..penalties import ensemble_logits
from ._backbone import (
    LR_SCHEDULES,
    ColumnScaler,
    lr_scheduler,
    numeric_columns,
    one_hot_groups,
)
from ._callbacks import (
    CRITERIA,
    BuildNeighbourhood,
    EarlyStoppingAfterWarmup,
    PenaltySchedule,
    PlainPrintLog,
    RefinedValidationLoss,
    WarmupEnd,
)
from ._freeze import Unfreeze, check_freeze_patterns, resolve_frozen
from ._module import build_module
from ._net import NeSCalNet, TrainingInterrupted

__all__ = ["NeSCalClassifier"]

#: Fewest one-hot columns (categories) of a feature that ``categorical_embedding``
#: embeds; RealMLP one-hot encodes up to 9 categories and embeds larger features.
CATEGORICAL_EMBEDDING_MIN_SIZE = 10

#: Warm-up fraction used by ``warmup="auto"`` when there are no validation rows.
AUTO_WARMUP_FALLBACK = 0.3

#: Rows per forward pass in ``predict``, ``predict_proba`` and ``decision_function``.
PREDICT_BATCH_ROWS = 8192


def _plain(value):
    """A numpy scalar as the Python number or string it holds (for error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _training_weights(weights: np.ndarray | None) -> np.ndarray | None:
    """Training-row weights scaled to mean 1, as float32; None when they are all equal.

    Equal weights are the unweighted objective exactly, so they take its code path.
    """
    if weights is None or np.all(weights == weights[0]):
        return None
    return (weights / weights.mean()).astype(np.float32)


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

    Design: the class *composes* a skorch ``NeuralNet`` (built in ``fit``, dropped
    after it) instead of subclassing skorch's classifier. That keeps the scikit-learn
    contract exact — ``__init__`` stores only this class's parameters, ``clone`` and
    ``GridSearchCV`` see a flat, documented parameter list, fitted state ends in
    ``_`` — while skorch supplies the training loop, callbacks and ``history``.

    Parameters
    ----------
    loss : str or TrainingLoss, default="nescal"
        The training objective: a registered name (``"nescal"``, ``"ce"``, and the
        baselines in :data:`nescal_sklearn.losses.LOSSES`) or a loss object. Its
        hyperparameters are nested parameters, e.g. ``loss__n_neighbors``.
    module : None, torch.nn.Module subclass or instance, default=None
        The network. ``None`` builds :class:`TabularMLP` from ``hidden_sizes``,
        ``dropout`` and ``activation``. A class is instantiated with
        ``module_kwargs`` plus ``n_features``/``n_classes`` when its ``__init__``
        takes them. An instance is deep-copied at each ``fit`` (its initial weights
        are the starting point). The module maps a float32 batch (n, n_features) to
        logits (n, n_classes).
    module_kwargs : dict or None, default=None
        Keyword arguments of the module class (or extra ones of ``TabularMLP``).
    hidden_sizes : tuple of int, default=(256, 256)
        Hidden widths of the default MLP.
    dropout : float, default=0.1
        Dropout of the default MLP.
    activation : {"relu", "gelu", "silu", "tanh", "selu", "mish"}, default="relu"
        Hidden activation of the default MLP.
    n_members : int, default=1
        Members of the default MLP's built-in ensemble: ``k > 1`` trains ``k``
        independent MLPs in one fit, as one network with stacked weights
        (:class:`MemberLinear`: one batched matrix product per layer), each on every
        batch, each paying its own loss (and NeSCal penalty); predictions are the
        mean of the members' probabilities. Training and ``predict_proba`` cost
        grow about linearly with ``k`` (docs/backbone.md measures it). A module of
        your own is an ensemble when it returns logits of shape (n, k, n_classes)
        (TabM, for instance): the same rules apply to it.
    numeric_embedding : {None, "periodic", "pbld"}, default=None
        Default MLP only. ``"periodic"``: each numeric column passes through a
        periodic embedding (Gorishniy et al. 2022, ``rtdl_num_embeddings``'
        ``PeriodicEmbeddings``, ``lite=False``) before the MLP; ``"pbld"``: through
        RealMLP's :class:`PBLDEmbeddings` (4 values per column). The embedded columns
        are those with more than two distinct values among the training rows (so
        one-hot and binary columns are left as they are).
    numeric_scaling : {None, "robust"}, default=None
        ``"robust"``: RealMLP's robust scaling and smooth clipping
        (:class:`RobustSmoothClipScaler`) of the numeric columns (more than two
        distinct values among the training rows), fitted on the training rows and
        applied inside the estimator at fit and predict time. Robust scaling is
        affine invariant, so after :func:`make_tabular_pipeline`'s standard scaling
        this is the same as ``make_tabular_pipeline(numeric_scaling="robust")``;
        here it is one parameter of the classifier (a grid can search it). None:
        the inputs as given.
    categorical_embedding : bool, default=False
        Default MLP only. True: each one-hot encoded categorical feature of at least
        10 categories (a run of adjacent 0/1 columns with exactly one 1 per training
        row, as ``make_tabular_pipeline`` produces) gets a learned embedding of 8
        values (:class:`CategoricalEmbeddings`, as RealMLP embeds its categorical
        features of more than 9 categories); smaller ones stay one-hot. The groups
        found are the fitted attribute ``categorical_groups_``.
    lr_schedule : {"constant", "cosine", "flat_cosine"}, default="flat_cosine"
        Learning-rate multiplier per epoch over ``max_epochs``: constant, cosine
        decay from 1 to 0, or flat for the first half then cosine to 0 (as
        RealMLP's schedule, flat then decaying). Parameters unfrozen by
        ``unfreeze_at`` keep their ``unfreeze_lr``.
    embedding_layer : str or None, default=None
        Name (as in ``module.named_modules()``) of the layer whose *input* is the
        embedding used for the neighbour graph. None: the name the module gives
        in its ``embedding_layer_name`` attribute (the default MLP's output layer),
        else the last ``nn.Linear``.
    max_epochs : int, default=256
        Training budget in epochs.
    batch_size : int, default=256
        Mini-batch size.
    lr : float, default=3e-3
        AdamW learning rate.
    weight_decay : float, default=1e-4
        AdamW weight decay.
    early_stopping : {"nll", "refinement"} or bool, default="nll"
        Hold out ``validation_fraction`` of the rows (stratified), watch a
        criterion on them, and restore the epoch where it was best at the end
        (training stops early when it has not improved for ``patience`` epochs;
        with ``patience=None``, the default, every epoch is trained). ``"nll"`` (or ``True``): the validation NLL. ``"refinement"``:
        the validation NLL after the temperature that is best on the validation rows
        of that epoch (:func:`~nescal_sklearn.metrics.refinement_log_loss`; Berta et
        al., 2025), i.e. the epoch that is best once it is temperature-scaled; use it
        when the model will be calibrated post hoc (:class:`CalibratedTemperature`),
        since the raw NLL stops training before the refinement loss is lowest.
        NeSCal's ``warmup="auto"`` watches the same criterion. ``False``: train for
        ``max_epochs`` on all rows. Patience counts from the end of NeSCal's warm-up.
        Held-out rows never enter the neighbour graph.
    validation_fraction : float, default=0.2
        Fraction held out for early stopping.
    patience : int or None, default=None
        Early-stopping patience in epochs. None: never stop early; train for
        ``max_epochs`` and restore the epoch that was best on the validation rows
        (best-epoch selection, as RealMLP trains). ``patience=10`` is the cheaper
        preset: it stops about 7 times sooner on the backbone study's datasets, at
        about 1 % higher test NLL after temperature scaling (docs/backbone.md).
    mixup : float, default=0.0
        When > 0, mixup with Beta(mixup, mixup) coefficients: inputs and targets of
        each batch are mixed with a random permutation of it (the loss is the
        convex combination of the losses on both targets).
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, as in scikit-learn's classifiers: ``{label: weight}``,
        or ``"balanced"`` (``n_samples / (n_classes * np.bincount(y))`` on the ``y``
        passed to ``fit``). Multiplied into ``sample_weight``; see ``fit`` for how
        weights enter training, early stopping and the temperature.
    freeze : list of str or None, default=None
        fnmatch patterns (case-sensitive) of module or parameter names, as in
        ``module.named_modules()`` / ``named_parameters()``, e.g. ``["encoder*"]``:
        the parameters they match (or that live in a submodule they match) are not
        trained. The optimizer is given only the other parameters, and the frozen
        submodules stay in eval mode while training (BatchNorm statistics fixed,
        Dropout off), so a pretrained encoder is used exactly as it was saved. A
        pattern that matches nothing raises. The neighbour graph is built on the
        ``embedding_layer`` input as usual: with an encoder followed by a head,
        ``embedding_layer="head"`` is the encoder's output.
    unfreeze_at : int or None, default=None
        With ``freeze``: the 1-based epoch from which every parameter trains
        (fine-tuning). The formerly frozen parameters join the optimizer as a new
        parameter group. None: frozen to the end.
    unfreeze_lr : float or None, default=None
        Learning rate of the formerly frozen parameters from ``unfreeze_at`` on
        (often lower than ``lr``); None: ``lr``.
    n_threads : int or None, default=1
        Torch intra-op and BLAS/OpenMP threads during ``fit``, ``predict``,
        ``predict_proba`` and ``decision_function`` (set with
        ``torch.set_num_threads`` and threadpoolctl, and restored afterwards); None
        leaves the process's settings alone. The default 1 is the safe choice on a
        shared CPU: on 2 cores a lone fit at torch's default 2 threads was 1.4×
        faster on an idle machine but 7× slower while other processes used the cores,
        and ``GridSearchCV(n_jobs=2)`` 1.65× slower (``benchmarks/threads.py``;
        ``docs/nescal.md``, "Threads"). Pass None or more threads for a lone fit of a
        large network on an idle machine.
    device : str, default="cpu"
        Torch device for training ("cpu", "cuda", "cuda:1", ...). The fitted network
        stays on it and predicts there; a pickled model is stored on the CPU and
        unpickles there (move ``module_`` to predict elsewhere). Prediction never
        moves the network, so concurrent ``predict`` calls are safe.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, weight initialisation, shuffling, dropout, the graph and
        mixup. With an int, fits on the CPU are identical.
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
    module_ : torch.nn.Module
        The trained network (in eval mode, on the training device).
    input_scaler_ : ColumnScaler or None
        The fitted ``numeric_scaling`` of the inputs (None without it).
    categorical_groups_ : list of list of int
        The one-hot groups that ``categorical_embedding`` embeds (column indices of
        each); empty without it.
    loss_ : TrainingLoss
        The objective used (a validated copy of ``loss``; a spec, so it holds no
        graph or cache).
    history_ : skorch.history.History
        Per-epoch log: ``train_loss``, ``valid_loss`` (validation NLL),
        ``valid_refined_loss`` and ``valid_temperature`` (validation NLL after the
        best temperature on those rows, and that temperature: both curves are logged
        with either stopping criterion), ``train_penalty``, ``penalty_weight``,
        ``graph_seconds`` (at the graph epoch), ``cache_seconds`` (the cache
        refill of ``loss__cache="epoch"``), ``unfrozen`` (at ``unfreeze_at``),
        ``warmup_restored_epoch`` (``auto`` warm-up), ``dur``.
    n_epochs_ : int
        Epochs run.
    best_epoch_ : int or None
        1-based epoch restored by early stopping (None without early stopping).
    graph_epoch_ : int or None
        1-based epoch at whose start the neighbour graph was built (None if never).
    penalty_status_ : {"penalised", "no_graph", "warmup_checkpoint"} or None
        For a neighbour loss (NeSCal): ``"penalised"`` when the returned weights
        were trained with the penalty; ``"no_graph"`` when the warm-up never ended
        within ``max_epochs`` (no graph, plain base-loss training);
        ``"warmup_checkpoint"`` when early stopping restored an epoch from before
        the graph (no penalised epoch beat it). None for other losses.

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

    """

    _parameter_constraints: dict = {
        "loss": [TrainingLoss, str],
        "module": [None, type, nn.Module],
        "module_kwargs": [None, dict],
        "hidden_sizes": ["array-like"],
        "dropout": [Interval(numbers.Real, 0.0, 1.0, closed="left")],
        "activation": [StrOptions({"relu", "gelu", "silu", "tanh", "selu", "mish"})],
        "n_members": [Interval(numbers.Integral, 1, None, closed="left")],
        "numeric_embedding": [None, StrOptions({"periodic", "pbld"})],
        "numeric_scaling": [None, StrOptions({"robust"})],
        "categorical_embedding": ["boolean"],
        "lr_schedule": [StrOptions(set(LR_SCHEDULES))],
        "embedding_layer": [None, str],
        "max_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0.0, None, closed="neither")],
        "weight_decay": [Interval(numbers.Real, 0.0, None, closed="left")],
        "early_stopping": [StrOptions({"nll", "refinement"}), "boolean"],
        "validation_fraction": [Interval(numbers.Real, 0.0, 1.0, closed="neither")],
        "patience": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "mixup": [Interval(numbers.Real, 0.0, None, closed="left")],
        "class_weight": [None, dict, StrOptions({"balanced"})],
        "freeze": [None, list, tuple],
        "unfreeze_at": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "unfreeze_lr": [None, Interval(numbers.Real, 0.0, None, closed="neither")],
        "n_threads": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        loss: str | TrainingLoss = "nescal",
        *,
        module: type[nn.Module] | nn.Module | None = None,
        module_kwargs: dict | None = None,
        hidden_sizes: Sequence[int] = (256, 256),
        dropout: float = 0.1,
        activation: str = "relu",
        n_members: int = 1,
        numeric_embedding: str | None = None,
        numeric_scaling: str | None = None,
        categorical_embedding: bool = False,
        lr_schedule: str = "flat_cosine",
        embedding_layer: str | None = None,
        max_epochs: int = 256,
        batch_size: int = 256,
        lr: float = 3e-3,
        weight_decay: float = 1e-4,
        early_stopping: str | bool = "nll",
        validation_fraction: float = 0.2,
        patience: int | None = None,
        mixup: float = 0.0,
        class_weight: dict | str | None = None,
        freeze: Sequence[str] | None = None,
        unfreeze_at: int | None = None,
        unfreeze_lr: float | None = None,
        n_threads: int | None = 1,
        device: str = "cpu",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ) -> None:
        self.loss = loss
        self.module = module
        self.module_kwargs = module_kwargs
        self.hidden_sizes = hidden_sizes
        self.dropout = dropout
        self.activation = activation
        self.n_members = n_members
        self.numeric_embedding = numeric_embedding
        self.numeric_scaling = numeric_scaling
        self.categorical_embedding = categorical_embedding
        self.lr_schedule = lr_schedule
        self.embedding_layer = embedding_layer
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
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

    # ------------------------------------------------------------------ fitting
    def fit(
        self, X, y, sample_weight=None, *, X_val=None, y_val=None, sample_weight_val=None
    ) -> NeSCalClassifier:
        """Train the network on ``X`` (n_samples, n_features) and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric features (use :func:`make_tabular_pipeline` for mixed types).
        y : array-like of shape (n_samples,)
            Class labels of any type.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Non-negative weight of each row (times ``class_weight``). Each training
            row's loss is weighted: the base loss and the penalty's term of the row
            itself (its neighbours' cached predictions are what they are). The
            weights of the training rows are scaled to mean 1, so a constant weight
            is the unweighted fit exactly, and an integer weight acts as that many
            copies of the row in expectation (a mini-batch holds one copy; the
            loss is ``mean_i w_i l_i``). Rows held out for early stopping keep their
            weights there: the stopping criterion and ``warmup="auto"`` watch the
            weighted validation NLL (``sum_i w_i l_i / sum_i w_i``, and the
            temperature of ``early_stopping="refinement"`` is fitted on it).
            Zero-weight training rows still take part in the neighbour graph.
        X_val, y_val : array-like or None, default=None
            Validation rows for early stopping, used instead of holding out
            ``validation_fraction`` of ``X`` (as in scikit-learn's
            ``HistGradientBoostingClassifier.fit``). Ignored without early stopping.
        sample_weight_val : array-like of shape (n_val_samples,) or None, default=None
            Weights of ``X_val`` (times ``class_weight``).

        Returns
        -------
        self : NeSCalClassifier
        """
        self._validate_params()
        self._check_module_options()
        freeze = check_freeze_patterns(self.freeze)
        self._check_unfreeze(freeze)
        with self._thread_limits():
            return self._fit(X, y, sample_weight, X_val, y_val, sample_weight_val, freeze)

    def _fit(self, X, y, sample_weight, X_val, y_val, sample_weight_val, freeze):
        loss = self._validated_loss()
        X, y = validate_data(self, X, y, dtype=np.float32, ensure_min_samples=2)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(
                "NeSCalClassifier needs samples of at least 2 classes in y; got 1 class: "
                f"{_plain(self.classes_[0])!r}."
            )
        y_enc = encoder.transform(y).astype(np.int64)
        class_weights = self._class_weights(y)
        weights = self._row_weights(sample_weight, X, y, class_weights, "sample_weight")
        if weights is not None and np.unique(y_enc[weights > 0]).size < 2:
            label = _plain(self.classes_[y_enc[weights > 0][0]])
            raise ValueError(
                "NeSCalClassifier needs samples of at least 2 classes with a positive weight; "
                f"sample_weight (times class_weight) leaves only class {label!r}."
            )
        device = self._training_device()
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))

        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be passed together; got only one of them.")
        if sample_weight_val is not None and X_val is None:
            raise ValueError(
                "sample_weight_val weighs the rows of X_val; it was passed without X_val and y_val."
            )
        if X_val is not None and self.early_stopping:
            X_valid = validate_data(self, X_val, dtype=np.float32, reset=False)
            y_val = column_or_1d(y_val)
            unknown = np.setdiff1d(y_val, self.classes_)
            if len(unknown):
                raise ValueError(
                    f"y_val contains labels not seen in y: {unknown.tolist()!r}; classes are "
                    f"{self.classes_.tolist()!r}."
                )
            w_valid = self._row_weights(
                sample_weight_val, X_valid, y_val, class_weights, "sample_weight_val"
            )
            X_train, y_train, w_train = X, y_enc, weights
            y_valid = encoder.transform(y_val).astype(np.int64)
        else:
            X_train, X_valid, y_train, y_valid, w_train, w_valid = self._split(
                X, y_enc, weights, rng
            )
        # The columns both numeric options act on, from the training rows as given.
        numeric = None
        if self.numeric_scaling is not None or self.numeric_embedding is not None:
            numeric = numeric_columns(X_train)
        self.categorical_groups_ = (
            one_hot_groups(X_train, min_size=CATEGORICAL_EMBEDDING_MIN_SIZE)
            if self.categorical_embedding
            else []
        )
        self.input_scaler_ = self._fit_input_scaler(X_train, numeric)
        X_train = self._scale_inputs(X_train)
        if X_valid is not None:
            X_valid = self._scale_inputs(X_valid)
        w_train = _training_weights(w_train)
        w_valid = None if w_valid is None or np.all(w_valid == w_valid[0]) else w_valid
        if w_valid is not None and not w_valid.sum() > 0:
            raise ValueError(
                "The sample weights of the validation rows sum to zero; the weighted "
                "validation NLL that early stopping watches is undefined. Pass weights with "
                "a positive weight among the validation rows, or early_stopping=False."
            )
        if loss.uses_neighbours:
            loss = self._check_graph_fits(loss, len(X_train), X_valid is not None)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build_module(
                self.module,
                self.module_kwargs,
                n_features=X.shape[1],
                n_classes=len(self.classes_),
                mlp_kwargs=self._mlp_kwargs(numeric),
            )
            frozen = None if freeze is None else self._frozen_parts(module, freeze)
            net, callbacks = self._build_net(
                module, loss, X_train, X_valid, y_valid, w_valid, device, seed, frozen
            )
            train_X = {"X": X_train, "index": np.arange(len(X_train), dtype=np.int64)}
            if w_train is not None:
                train_X["sample_weight"] = w_train
            try:
                net.fit(train_X, y_train)
            except TrainingInterrupted as exc:
                # A real Ctrl-C: no half-trained (or earlier) model is left as fitted.
                for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
                    delattr(self, name)
                raise KeyboardInterrupt(f"NeSCalClassifier.fit: {exc}") from None

        self.loss_ = loss
        self.module_ = net.module_.eval()
        for param in self.module_.parameters():
            param.requires_grad_(True)  # a frozen part is frozen for training only
        self.history_ = _epoch_history(net.history)
        self.n_epochs_ = len(net.history)
        stopper = callbacks.get("early_stopping")
        self.best_epoch_ = None if stopper is None else int(stopper.best_epoch_)
        runtime = net.nescal_
        self.graph_epoch_ = None if runtime is None else runtime.start_epoch + 1
        net.nescal_ = None  # the graph and the cache are not kept
        self.penalty_status_ = self._penalty_status(loss, callbacks.get("warmup_end"))
        return self

    def _class_weights(self, y) -> dict | None:
        """``class_weight`` as ``{label: weight}`` ("balanced" computed on ``y``)."""
        if self.class_weight is None:
            return None
        classes = self.classes_.tolist()
        if self.class_weight == "balanced":
            counts = np.array([np.sum(y == label) for label in self.classes_])
            return dict(zip(classes, len(y) / (len(classes) * counts), strict=True))
        unknown = [k for k in self.class_weight if k not in set(classes)]
        if unknown:
            raise ValueError(
                f"class_weight has labels that are not classes of y: "
                f"{[_plain(k) for k in unknown]!r}; classes are {classes!r}."
            )
        for label, value in self.class_weight.items():
            if not (isinstance(value, numbers.Real) and np.isfinite(value) and value >= 0):
                raise ValueError(
                    f"class_weight[{_plain(label)!r}] must be a finite number >= 0; got {value!r}."
                )
        return {label: float(self.class_weight.get(label, 1.0)) for label in classes}

    def _row_weights(self, sample_weight, X, y, class_weights, name: str) -> np.ndarray | None:
        """``sample_weight`` times the class weights of ``y`` (None when neither is given)."""
        weights = None
        if sample_weight is not None:
            try:
                weights = _check_sample_weight(
                    sample_weight, X, dtype=np.float64, ensure_non_negative=True
                )
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            if not np.all(np.isfinite(weights)):
                raise ValueError(f"{name} must be finite; got a non-finite weight.")
        if class_weights is not None:
            per_class = np.array([class_weights[label] for label in y.tolist()], dtype=np.float64)
            weights = per_class if weights is None else weights * per_class
        if weights is not None and not weights.sum() > 0:
            raise ValueError(
                f"{name} sums to zero (times class_weight): sample weights must contain at "
                "least one non-zero number."
            )
        return weights

    def _check_unfreeze(self, freeze) -> None:
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
        if self.unfreeze_at is not None and self.unfreeze_at > self.max_epochs:
            raise ValueError(
                f"unfreeze_at={self.unfreeze_at} is after the last of "
                f"max_epochs={self.max_epochs}: nothing would be unfrozen. Pass an epoch "
                f"<= {self.max_epochs}, or unfreeze_at=None to stay frozen."
            )

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

    @contextlib.contextmanager
    def _thread_limits(self) -> Iterator[None]:
        """``n_threads`` torch and BLAS/OpenMP threads for the duration of a call."""
        if self.n_threads is None:
            yield
            return
        previous = torch.get_num_threads()
        torch.set_num_threads(self.n_threads)
        try:
            with threadpool_limits(limits=self.n_threads):
                yield
        finally:
            torch.set_num_threads(previous)

    def _check_graph_fits(self, loss: TrainingLoss, n_train: int, held_out: bool) -> TrainingLoss:
        """Explicit NeSCal settings that cannot work on this fit raise here.

        With ``loss`` given by name (default settings), a ``n_neighbors`` the training
        rows cannot hold is clamped to ``n_train - 1`` with a warning instead, so that
        the default estimator fits any data a scikit-learn classifier accepts.
        """
        held = (
            f" after holding out validation_fraction={self.validation_fraction}" if held_out else ""
        )
        if n_train < loss.n_neighbors + 1 and isinstance(self.loss, str) and n_train >= 2:
            warnings.warn(
                f"loss__n_neighbors={loss.n_neighbors} (the default of loss={self.loss!r}) "
                f"needs at least {loss.n_neighbors + 1} training rows; got {n_train}{held}. "
                f"Using loss__n_neighbors={n_train - 1} instead; pass loss__n_neighbors "
                "explicitly to choose.",
                UserWarning,
                stacklevel=4,
            )
            loss.set_params(n_neighbors=n_train - 1)
        if n_train < loss.n_neighbors + 1:
            raise ValueError(
                f"loss__n_neighbors={loss.n_neighbors} needs at least {loss.n_neighbors + 1} "
                f"training rows; got {n_train}{held}."
            )
        fixed = loss.warmup_epochs(self.max_epochs)
        if fixed is not None and fixed >= self.max_epochs:
            raise ValueError(
                f"loss__warmup={loss.warmup!r} ends the warm-up at epoch {fixed + 1}, after "
                f"the last of max_epochs={self.max_epochs}: the neighbour graph would never "
                "be built. Pass a shorter warmup, a fraction in [0, 1), or more max_epochs."
            )
        return loss

    def _penalty_status(self, loss: TrainingLoss, warmup) -> str | None:
        """Whether the returned weights were trained with the penalty; warn when not."""
        if not loss.uses_neighbours:
            return None
        if self.graph_epoch_ is None:
            why = (
                "the warm-up never ended (warmup='auto' ends it once the "
                f"{self._criterion_name()} has not improved for warmup_patience={loss.warmup_patience} epochs, and "
                f"max_epochs={self.max_epochs} ran out first), so the neighbour graph was "
                "never built"
            )
            status = "no_graph"
        elif self.best_epoch_ is not None and self.best_epoch_ < self.graph_epoch_:
            restored = (
                ""
                if warmup is None or warmup.restored_epoch_ is None
                else (f" (the auto warm-up's optimum, restored at epoch {warmup.restored_epoch_})")
            )
            why = (
                f"early stopping restored epoch {self.best_epoch_}{restored}, before the "
                f"graph was built at epoch {self.graph_epoch_}: no penalised epoch had a "
                f"lower {self._criterion_name()}"
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

    def _validated_loss(self) -> TrainingLoss:
        loss = clone(get_loss(self.loss))
        loss.validate()
        if loss.uses_neighbours and loss.warmup == "auto" and not self.early_stopping:
            warnings.warn(
                "loss__warmup='auto' ends the warm-up where the validation NLL stops "
                "improving, but early_stopping=False holds out no validation rows; the "
                f"warm-up falls back to {AUTO_WARMUP_FALLBACK} of max_epochs. Pass an int "
                "or float warmup to silence this warning.",
                UserWarning,
                stacklevel=4,
            )
            loss.set_params(warmup=AUTO_WARMUP_FALLBACK)
        return loss

    def _validate_params(self) -> None:
        """scikit-learn's parameter constraints, plus the entries of ``hidden_sizes``."""
        super()._validate_params()
        self._hidden_sizes()

    def _hidden_sizes(self) -> tuple[int, ...]:
        sizes = self.hidden_sizes
        entries = list(sizes) if isinstance(sizes, (list, tuple, np.ndarray)) else None
        if entries is None or not all(
            isinstance(h, numbers.Integral) and not isinstance(h, bool) and h >= 1 for h in entries
        ):
            shown = [_plain(h) for h in entries] if entries is not None else sizes
            raise ValueError(
                "hidden_sizes must be a sequence of ints >= 1 (the width of each hidden "
                f"layer; () for none); got {shown!r}."
            )
        return tuple(int(h) for h in entries)

    def _mlp_kwargs(self, numeric: list[int] | None) -> dict:
        kwargs = {
            "hidden_sizes": self._hidden_sizes(),
            "dropout": self.dropout,
            "activation": self.activation,
        }
        if self.n_members != 1:
            kwargs["n_members"] = int(self.n_members)
        if self.numeric_embedding is not None:
            kwargs["numeric_embedding"] = self.numeric_embedding
            kwargs["embedded_features"] = numeric
        if self.categorical_groups_:
            kwargs["categorical_groups"] = self.categorical_groups_
        return kwargs

    def _fit_input_scaler(
        self, X_train: np.ndarray, numeric: list[int] | None
    ) -> ColumnScaler | None:
        if self.numeric_scaling is None:
            return None
        return ColumnScaler(numeric).fit(X_train)

    def _scale_inputs(self, X: np.ndarray) -> np.ndarray:
        scaler = getattr(self, "input_scaler_", None)
        return X if scaler is None else scaler.transform(X)

    def _check_module_options(self) -> None:
        """The default MLP's backbone options cannot reach a module of the user's own."""
        if self.module is None:
            return
        for name, default in (
            ("n_members", 1),
            ("numeric_embedding", None),
            ("categorical_embedding", False),
        ):
            value = getattr(self, name)
            if value != default:
                raise ValueError(
                    f"{name}={value!r} configures the default MLP (module=None), but module="
                    f"{self.module!r} was given. Configure your module instead: an ensemble "
                    "module returns logits of shape (n, n_members, n_classes)."
                )

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

    def _criterion(self) -> str | None:
        """``"nll"``, ``"refinement"`` or None (no early stopping); ``True`` is ``"nll"``."""
        if isinstance(self.early_stopping, str):
            return self.early_stopping
        return "nll" if self.early_stopping else None

    def _criterion_name(self) -> str:
        """The stopping criterion in words, for messages."""
        if self._criterion() == "refinement":
            return "validation NLL after temperature scaling"
        return "validation NLL"

    def _split(self, X, y, weights, rng):
        if not self.early_stopping:
            return X, None, y, None, weights, None
        counts = np.bincount(y, minlength=len(self.classes_))
        n_valid = int(np.ceil(self.validation_fraction * len(y)))
        if counts.min() < 2:
            raise ValueError(
                f"early_stopping={self.early_stopping!r} holds out validation_fraction="
                f"{self.validation_fraction} "
                "of the rows stratified by class, which needs at least 2 rows of every class; "
                f"class {_plain(self.classes_[int(counts.argmin())])!r} has {int(counts.min())}. "
                "Pass early_stopping=False, X_val and y_val, or more data."
            )
        if n_valid < len(self.classes_) or len(y) - n_valid < len(self.classes_):
            raise ValueError(
                f"early_stopping={self.early_stopping!r} with validation_fraction="
                f"{self.validation_fraction} "
                f"splits the {len(y)} rows into {len(y) - n_valid} training and {n_valid} "
                f"validation rows; each side needs at least one row of each of the "
                f"{len(self.classes_)} classes. Pass early_stopping=False, X_val and y_val, "
                "or a different validation_fraction."
            )
        if weights is None:
            X_train, X_valid, y_train, y_valid = train_test_split(
                X, y, test_size=n_valid, stratify=y, random_state=rng
            )
            return X_train, X_valid, y_train, y_valid, None, None
        return train_test_split(X, y, weights, test_size=n_valid, stratify=y, random_state=rng)

    def _build_net(
        self, module, loss, X_train, X_valid, y_valid, w_valid, device, seed, frozen
    ) -> tuple[NeSCalNet, dict]:
        """The skorch net and its callbacks (by name, so ``fit`` can read their state)."""
        callbacks: dict = {}
        monitor = CRITERIA[self._criterion()] if X_valid is not None else "valid_loss"
        if X_valid is not None:
            # First, so that the criterion is in the history when the others read it.
            callbacks["refined_validation_loss"] = RefinedValidationLoss()
        if loss.uses_neighbours:
            callbacks["warmup_end"] = WarmupEnd(
                loss.warmup_epochs(self.max_epochs), loss.warmup_patience, monitor=monitor
            )
            callbacks["build_neighbourhood"] = BuildNeighbourhood(
                loss, torch.as_tensor(X_train), self.max_epochs, self.embedding_layer, seed
            )
        callbacks["penalty_schedule"] = PenaltySchedule()
        callbacks["train_penalty"] = PassthroughScoring(name="train_penalty", on_train=True)
        train_split = None
        if X_valid is not None:
            # Validation rows carry no row id into the graph (only their weights).
            valid_X = X_valid if w_valid is None else {"X": X_valid, "sample_weight": w_valid}
            train_split = predefined_split(Dataset(valid_X, y_valid))
            # patience=None: a patience of max_epochs never stops; the best epoch is
            # still restored at the end (best-epoch selection).
            patience = self.max_epochs if self.patience is None else self.patience
            callbacks["early_stopping"] = EarlyStoppingAfterWarmup(
                patience, wait_for_warmup=loss.uses_neighbours, monitor=monitor
            )
        if frozen is not None and self.unfreeze_at is not None:
            lr = self.lr if self.unfreeze_lr is None else self.unfreeze_lr
            callbacks["unfreeze"] = Unfreeze(self.unfreeze_at, lr)
        if self.lr_schedule != "constant":
            callbacks["lr_schedule"] = lr_scheduler(self.lr_schedule, self.max_epochs)
        if self.verbose >= 2:
            callbacks["progress_bar"] = ProgressBar()
        net = NeSCalNet(
            module=module,
            criterion=nn.CrossEntropyLoss,  # required by skorch; get_loss computes the loss
            optimizer=torch.optim.AdamW,
            lr=self.lr,
            optimizer__weight_decay=self.weight_decay,
            max_epochs=self.max_epochs,
            batch_size=self.batch_size,
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

    def set_params(self, **params) -> NeSCalClassifier:
        """Set parameters; ``loss__<name>`` reaches into the loss object.

        When ``loss`` is a registered name, a nested parameter first replaces it with
        a loss object of that name (default parameters), then sets the nested value,
        so ``NeSCalClassifier().set_params(loss__n_neighbors=5)`` and grids such as
        ``{"loss__weight": [0.5, 1.0]}`` work with the default ``loss="nescal"``.
        """
        nested = {k[len("loss__") :]: v for k, v in params.items() if k.startswith("loss__")}
        super().set_params(**{k: v for k, v in params.items() if not k.startswith("loss__")})
        if nested:
            if isinstance(self.loss, str):
                self.loss = get_loss(self.loss)
            self.loss.set_params(**nested)
        return self

    # --------------------------------------------------------------- prediction
    def _logits(self, X) -> np.ndarray:
        check_is_fitted(self)
        with self._thread_limits():
            return self._forward(X)

    def _forward(self, X) -> np.ndarray:
        X = self._scale_inputs(validate_data(self, X, dtype=np.float32, reset=False))
        if not X.flags.writeable:
            X = X.copy()
        module = self.module_
        parameter = next(module.parameters(), None)
        device = torch.device("cpu") if parameter is None else parameter.device
        outputs = []
        # The network is used where it lives and never moved: predict is thread-safe.
        with torch.no_grad():
            for chunk in torch.split(torch.as_tensor(X), PREDICT_BATCH_ROWS):
                outputs.append(ensemble_logits(module(chunk.to(device)).float()).cpu())
        return torch.cat(outputs).numpy().astype(np.float64)

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
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags
