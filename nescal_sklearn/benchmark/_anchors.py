"""Strong reference models for the benchmark: LightGBM and TabM.

They are benchmark extras, not part of the package's estimators:

* :class:`LightGBMClassifier` is a scikit-learn classifier around
  `LightGBM <https://lightgbm.readthedocs.io>`_ that stops early on the validation rows
  the benchmark passes to every method (``fit(X, y, X_val=..., y_val=...)``), so that
  gradient boosting is compared on the same footing as ``NeSCalClassifier``.
* :class:`TabMModule` is TabM (Gorishniy et al., "TabM: Advancing Tabular Deep
  Learning with Parameter-Efficient Ensembling", ICLR 2025) as a torch module for
  ``NeSCalClassifier(module=TabMModule, module_kwargs={...})``: it returns one set of
  logits per ensemble member, shape ``(n, k, n_classes)``.

``lightgbm`` and ``tabm`` are imported only when a model is fitted or built; without
them, that raises an ImportError saying how to install them (``pip install -e
".[bench]"``).
"""

from __future__ import annotations

import inspect
import numbers
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
from torch import nn

from ._external import INSTALL_HINT

__all__ = ["LightGBMClassifier", "TabMModule"]


def _import_lightgbm():
    """``lightgbm``, or an ImportError saying how to install it."""
    try:
        import lightgbm
    except ImportError as exc:
        raise ImportError(
            "LightGBMClassifier needs the lightgbm package, which is not installed "
            f"({exc}); install it with `pip install lightgbm` or with the benchmark "
            f"extras, `{INSTALL_HINT}`"
        ) from exc
    return lightgbm


def _import_tabm():
    """``tabm``, or an ImportError saying how to install it."""
    try:
        import tabm
    except ImportError as exc:
        raise ImportError(
            "TabMModule needs the tabm package, which is not installed "
            f"({exc}); install it with `pip install tabm` or with the benchmark "
            f"extras, `{INSTALL_HINT}`"
        ) from exc
    return tabm


class LightGBMClassifier(ClassifierMixin, BaseEstimator):
    """LightGBM gradient boosting that stops early on the given validation rows.

    ``fit(X, y, X_val=..., y_val=...)`` trains up to ``n_estimators`` trees with
    LightGBM's own classifier (binary objective for two classes, multiclass softmax
    otherwise, as LightGBM chooses), watching the log-loss (``binary_logloss`` or
    ``multi_logloss``) on ``(X_val, y_val)``, and stops when it has not improved for
    ``early_stopping_rounds`` rounds. Predictions use the trees up to the best round.
    Without validation rows (or with ``early_stopping_rounds=None``) all
    ``n_estimators`` trees are trained and used. The benchmark runner passes the same
    validation rows to every method, so no rows are split off here.

    Parameters
    ----------
    n_estimators : int, default=1000
        Maximum number of boosting rounds (trees per class for multiclass).
    learning_rate : float, default=0.05
        Shrinkage of each tree.
    num_leaves : int, default=31
        Maximum number of leaves per tree (LightGBM's default).
    min_child_samples : int, default=20
        Minimum number of rows in a leaf (LightGBM's default).
    subsample : float, default=1.0
        Fraction of the rows each tree is grown on (LightGBM's default, 1.0: all rows).
        Below 1, rows are redrawn at every round (LightGBM's ``subsample_freq=1``;
        LightGBM itself ignores ``subsample`` unless ``subsample_freq > 0``).
    colsample_bytree : float, default=1.0
        Fraction of the columns each tree may use (LightGBM's default).
    early_stopping_rounds : int or None, default=50
        Stop when the validation log-loss has not improved for this many rounds.
        None: no early stopping, even with validation rows.
    n_threads : int or None, default=None
        Threads LightGBM uses (its ``n_jobs``). None means 1 thread, except in the
        benchmark runner, which sets it to the fit's thread budget (``n_threads`` is
        one of its ``THREAD_PARAMS``). LightGBM's own default, all cores, would
        oversubscribe the machine when fits run side by side.
    random_state : int, RandomState instance or None, default=None
        Seed of LightGBM's random draws (row and column subsampling). The benchmark
        sets it from the run's seed.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    model_ : lightgbm.LGBMClassifier
        The fitted LightGBM classifier (trained on the labels encoded as
        ``0 .. n_classes - 1``).
    booster_ : lightgbm.Booster
        Its booster. After early stopping LightGBM keeps the trees up to the best
        round only.
    best_iteration_ : int
        Number of rounds used for predictions: the round of lowest validation
        log-loss with early stopping, else the number of rounds trained.
    n_iter_ : int
        Number of rounds trained (with early stopping, ``best_iteration_`` plus the
        rounds without improvement that stopped it, at most ``n_estimators``).
    n_features_in_ : int
        Number of features seen in ``fit``.

    See Also
    --------
    sklearn.ensemble.HistGradientBoostingClassifier : scikit-learn's histogram
        gradient boosting, which the benchmark also gives the validation rows.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("lightgbm")
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = LightGBMClassifier(random_state=0)
    >>> model = model.fit(X[:300], y[:300], X_val=X[300:450], y_val=y[300:450])
    >>> model.best_iteration_ < model.n_iter_ < model.n_estimators
    True
    >>> model.predict_proba(X[450:452]).shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "num_leaves": [Interval(Integral, 2, None, closed="left")],
        "min_child_samples": [Interval(Integral, 1, None, closed="left")],
        "subsample": [Interval(Real, 0, 1, closed="right")],
        "colsample_bytree": [Interval(Real, 0, 1, closed="right")],
        "early_stopping_rounds": [Interval(Integral, 1, None, closed="left"), None],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        n_estimators: int = 1000,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        min_child_samples: int = 20,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        early_stopping_rounds: int | None = 50,
        n_threads: int | None = None,
        random_state=None,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.early_stopping_rounds = early_stopping_rounds
        self.n_threads = n_threads
        self.random_state = random_state

    @classmethod
    def check_dependencies(cls) -> None:
        """Raise ImportError, saying how to install it, when lightgbm is missing."""
        _import_lightgbm()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # LightGBM routes missing values itself
        return tags

    def _encode(self, y, name: str) -> np.ndarray:
        """``y`` as column indices of ``classes_``; ValueError for an unknown label."""
        y = np.asarray(y)
        encoded = np.searchsorted(self.classes_, y)
        inside = encoded < len(self.classes_)
        if not np.all(inside) or not np.array_equal(self.classes_[encoded[inside]], y[inside]):
            unknown = sorted(set(y.tolist()) - set(self.classes_.tolist()))
            raise ValueError(
                f"{name} has labels {unknown} that are not in y; the classes of y are "
                f"{self.classes_.tolist()}"
            )
        return encoded

    def fit(self, X, y, X_val=None, y_val=None, sample_weight=None):
        """Train the trees, stopping early on ``(X_val, y_val)`` when given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows (missing values allowed).
        y : array-like of shape (n_samples,)
            Their labels.
        X_val : array-like of shape (n_val, n_features) or None, default=None
            Validation rows for early stopping; pass them with ``y_val``.
        y_val : array-like of shape (n_val,) or None, default=None
            Their labels, each one of the labels of ``y``.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights of the training rows (the validation log-loss is unweighted).

        Returns
        -------
        self : LightGBMClassifier
        """
        self._validate_params()
        if (X_val is None) != (y_val is None):
            raise ValueError(
                "X_val and y_val must be given together (validation rows for early "
                f"stopping); got X_val={'None' if X_val is None else 'an array'} and "
                f"y_val={'None' if y_val is None else 'an array'}."
            )
        lightgbm = _import_lightgbm()
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan")
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                "LightGBMClassifier needs at least 2 classes in y; got 1 class: "
                f"{self.classes_.tolist()}."
            )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
        metric = "binary_logloss" if len(self.classes_) == 2 else "multi_logloss"
        model = lightgbm.LGBMClassifier(
            n_estimators=self.n_estimators,
            learning_rate=self.learning_rate,
            num_leaves=self.num_leaves,
            min_child_samples=self.min_child_samples,
            subsample=self.subsample,
            subsample_freq=1 if self.subsample < 1 else 0,
            colsample_bytree=self.colsample_bytree,
            random_state=self.random_state,
            n_jobs=1 if self.n_threads is None else self.n_threads,
            metric=metric,
            verbose=-1,
        )
        stops = X_val is not None and self.early_stopping_rounds is not None
        fit_params: dict = {"sample_weight": sample_weight}
        if stops:
            X_val = validate_data(self, X_val, reset=False, ensure_all_finite="allow-nan")
            y_val = self._encode(y_val, "y_val")
            # lightgbm >= 4.7 deprecates eval_set for eval_X / eval_y.
            if "eval_X" in inspect.signature(lightgbm.LGBMModel.fit).parameters:
                fit_params.update(eval_X=(X_val,), eval_y=(y_val,))
            else:
                fit_params["eval_set"] = [(X_val, y_val)]
            fit_params["callbacks"] = [
                lightgbm.early_stopping(self.early_stopping_rounds, verbose=False),
                lightgbm.log_evaluation(0),
            ]
        model.fit(X, encoded, **fit_params)
        self.model_ = model
        self.booster_ = model.booster_
        if stops:  # the booster keeps the trees up to the best round only
            self.n_iter_ = len(next(iter(model.evals_result_.values()))[metric])
            self.best_iteration_ = int(self.booster_.best_iteration)
        else:
            self.n_iter_ = self.best_iteration_ = int(self.booster_.current_iteration())
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities from the trees up to ``best_iteration_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to predict.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            One column per class of ``classes_``; rows sum to 1.
        """
        check_is_fitted(self, "booster_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan")
        proba = np.asarray(
            self.booster_.predict(X, num_iteration=self.best_iteration_), dtype=np.float64
        )
        if proba.ndim == 1:  # binary: the probability of the second class
            proba = np.column_stack([1.0 - proba, proba])
        return proba

    def predict(self, X) -> np.ndarray:
        """The class of highest probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to predict.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        check_is_fitted(self, "booster_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


#: TabM's architecture types (``tabm.TabM``'s ``arch_type``).
TABM_ARCH_TYPES = ("tabm", "tabm-mini", "tabm-packed")
#: Numeric feature embeddings of :class:`TabMModule`.
TABM_NUMERIC_EMBEDDINGS = (None, "periodic")


def _check_int(name: str, value: object, minimum: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}.")
    return int(value)


class TabMModule(nn.Module):
    """TabM as a network for ``NeSCalClassifier``: ``k`` members' logits per row.

    TabM (Gorishniy et al., ICLR 2025) is an ensemble of ``k`` MLPs that share most
    of their weights (BatchEnsemble) and train in parallel on the same batches. This
    module builds it with ``tabm.TabM.make`` (the ``tabm`` package), every input
    column numeric (the benchmark's preprocessing has one-hot encoded the
    categorical ones), ``d_out=n_classes`` and ReLU activations.

    Parameters
    ----------
    n_features : int
        Number of input columns.
    n_classes : int
        Number of classes (2 for a binary problem: one logit per class).
    k : int, default=32
        Number of ensemble members.
    n_blocks : int or None, default=None
        Number of hidden blocks (linear, ReLU, dropout). None takes ``TabM.make``'s
        default: 3, or 2 with ``numeric_embedding="periodic"`` (the TabM README: "When
        using embeddings ... the default depth can be reduced to 2").
    d_block : int, default=512
        Width of every block.
    dropout : float, default=0.1
        Dropout rate of every block, in [0, 1).
    arch_type : {"tabm", "tabm-mini", "tabm-packed"}, default="tabm"
        ``"tabm"``: BatchEnsemble in every linear layer (shared weight, per-member
        scalings and biases); ``"tabm-mini"``: one shared MLP after a per-member
        scaling of the input; ``"tabm-packed"``: ``k`` independent MLPs.
    numeric_embedding : {None, "periodic"}, default=None
        ``"periodic"`` embeds every column with
        ``rtdl_num_embeddings.PeriodicEmbeddings(n_features, lite=False)`` (its
        defaults: 48 frequencies, 24 dimensions per column; as in TabM's example
        notebook), shared by the members, before the backbone.

    Attributes
    ----------
    tabm : tabm.TabM
        The TabM network. ``tabm.output`` is its output layer (one linear layer per
        member, ``tabm.LinearEnsemble``).
    k : int
        Number of ensemble members.

    Notes
    -----
    Defaults are those of ``tabm.TabM.make`` (tabm 0.0.3) and the TabM README's
    suggested starting point: ``k=32``, 3 blocks of width 512, dropout 0.1, ReLU; the
    first per-member scaling is initialised with random signs (``"normal"`` with an
    embedding), the others with ones. The README's training settings to go with them
    are AdamW with learning rate 0.002 and weight decay 0.0003; they are the
    estimator's, not this module's.

    Shapes: input ``(n, n_features)`` (float), output ``(n, k, n_classes)``. The input
    of the output layer (:attr:`embedding_layer_name`) is the backbone's last
    representation, ``(n, k, d_block)``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tabm")
    >>> import torch
    >>> module = TabMModule(5, 3, k=4, d_block=16)
    >>> module(torch.zeros(2, 5)).shape
    torch.Size([2, 4, 3])
    >>> module.embedding_layer_name
    'tabm.output'
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        k: int = 32,
        n_blocks: int | None = None,
        d_block: int = 512,
        dropout: float = 0.1,
        arch_type: str = "tabm",
        numeric_embedding: str | None = None,
    ) -> None:
        super().__init__()
        n_features = _check_int("n_features", n_features, 1)
        n_classes = _check_int("n_classes", n_classes, 2)
        k = _check_int("k", k, 1)
        if n_blocks is not None:
            n_blocks = _check_int("n_blocks", n_blocks, 1)
        d_block = _check_int("d_block", d_block, 1)
        if (
            not isinstance(dropout, numbers.Real)
            or isinstance(dropout, bool)
            or not 0 <= dropout < 1
        ):
            raise ValueError(f"dropout must be a float in [0, 1); got {dropout!r}.")
        if arch_type not in TABM_ARCH_TYPES:
            raise ValueError(
                f"arch_type must be one of {list(TABM_ARCH_TYPES)}; got {arch_type!r}."
            )
        if numeric_embedding not in TABM_NUMERIC_EMBEDDINGS:
            raise ValueError(
                f"numeric_embedding must be None or 'periodic'; got {numeric_embedding!r}."
            )
        tabm = _import_tabm()
        num_embeddings = None
        if numeric_embedding == "periodic":
            import rtdl_num_embeddings  # a dependency of tabm

            num_embeddings = rtdl_num_embeddings.PeriodicEmbeddings(n_features, lite=False)
        kwargs = {"n_blocks": n_blocks} if n_blocks is not None else {}
        self.tabm = tabm.TabM.make(
            n_num_features=n_features,
            d_out=n_classes,
            num_embeddings=num_embeddings,
            k=k,
            d_block=d_block,
            dropout=float(dropout),
            arch_type=arch_type,
            **kwargs,
        )
        self.n_features = n_features
        self.n_classes = n_classes

    @property
    def k(self) -> int:
        """Number of ensemble members."""
        return self.tabm.k

    @property
    def embedding_layer_name(self) -> str:
        """Dotted name (as in ``named_modules()``) of the output layer.

        Its forward receives the backbone's last representation, of shape
        ``(n, k, d_block)``: NeSCal builds its neighbour graph on it.
        """
        return "tabm.output"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of every member.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)
            Float features.

        Returns
        -------
        logits : torch.Tensor of shape (n, k, n_classes)
        """
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(
                f"TabMModule expects input of shape (n, {self.n_features}); got {tuple(x.shape)}."
            )
        return self.tabm(x)
