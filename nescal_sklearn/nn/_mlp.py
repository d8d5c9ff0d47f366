"""The default tabular MLP, and how the estimator instantiates its network."""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from .._params import check_int, is_int
from ._dropout import FastDropout, dropout_seeds
from ._layers import CategoricalEmbeddings, FrontScale, ParametricActivation, PBLDEmbeddings

__all__ = [
    "CATEGORICAL_EMBEDDING_MIN_SIZE",
    "MemberLinear",
    "TabularMLP",
    "build_module",
    "layout_kwargs",
]

#: Fewest one-hot columns (categories) of a feature that ``categorical_embedding``
#: embeds; RealMLP one-hot encodes up to 9 categories and embeds larger features.
CATEGORICAL_EMBEDDING_MIN_SIZE = 10

_ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "tanh": nn.Tanh,
    "selu": nn.SELU,
    "mish": nn.Mish,
}
_NUMERIC_EMBEDDINGS = (None, "periodic", "pbld")
#: Embedding size per column when ``numeric_embedding_dim`` is None.
_DEFAULT_EMBEDDING_DIM = {"periodic": 16, "pbld": 4}


class MemberLinear(nn.Module):
    """``n_members`` independent linear layers applied in one batched matrix product.

    The layer of a packed ensemble: member ``j`` maps ``x[:, j, :]`` to
    ``x[:, j, :] @ weight[j] + bias[j]``; members share no parameter.

    Parameters
    ----------
    in_features : int
        Input width of every member.
    out_features : int
        Output width of every member.
    n_members : int
        Number of members ``k``.
    bias : bool, default=True
        Whether each member adds its own bias.

    Attributes
    ----------
    weight : torch.nn.Parameter of shape (n_members, in_features, out_features)
        One weight matrix per member, stored input-major (``x @ weight[j]``, the
        transpose of :class:`torch.nn.Linear`'s layout).
    bias : torch.nn.Parameter of shape (n_members, out_features) or None
        One bias vector per member.

    Notes
    -----
    Every member is initialised as :class:`torch.nn.Linear` would be, with its own
    draws: weight and bias uniform on ``(-1/sqrt(in_features), 1/sqrt(in_features))``.
    Input of shape ``(n, n_members, in_features)``, output
    ``(n, n_members, out_features)``.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import MemberLinear
    >>> layer = MemberLinear(4, 2, n_members=3)
    >>> layer.weight.shape
    torch.Size([3, 4, 2])
    >>> layer(torch.zeros(5, 3, 4)).shape
    torch.Size([5, 3, 2])
    """

    def __init__(
        self, in_features: int, out_features: int, n_members: int, bias: bool = True
    ) -> None:
        super().__init__()
        self.in_features = check_int("in_features", in_features, low=1)
        self.out_features = check_int("out_features", out_features, low=1)
        self.n_members = check_int("n_members", n_members, low=1)
        self.weight = nn.Parameter(torch.empty(self.n_members, self.in_features, self.out_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(self.n_members, self.out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every member's weight and bias as ``nn.Linear.reset_parameters`` would."""
        bound = 1.0 / math.sqrt(self.in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if X.ndim != 3 or X.shape[1] != self.n_members or X.shape[2] != self.in_features:
            raise ValueError(
                "MemberLinear expects input of shape (n, n_members, in_features) = "
                f"(n, {self.n_members}, {self.in_features}); got {tuple(X.shape)}."
            )
        if X.stride(1) == 0:
            # The same rows for every member (an expanded input, as the first layer of
            # TabularMLP gets): one (n, in) @ (in, k * out) product, no copy of the input.
            weight = self.weight.permute(1, 0, 2).reshape(self.in_features, -1)
            out = (X[:, 0] @ weight).view(len(X), self.n_members, self.out_features)
            return out if self.bias is None else out + self.bias
        # (k, n, in) @ (k, in, out) as one batched product; baddbmm measured faster than
        # einsum on CPU. The result is returned as a (n, k, out) view.
        members_first = X.transpose(0, 1)
        if self.bias is None:
            out = torch.bmm(members_first, self.weight)
        else:
            out = torch.baddbmm(self.bias.unsqueeze(1), members_first, self.weight)
        return out.transpose(0, 1)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"n_members={self.n_members}, bias={self.bias is not None}"
        )


def _periodic_embeddings(n_embedded: int, d_embedding: int) -> nn.Module:
    try:
        from rtdl_num_embeddings import PeriodicEmbeddings
    except ImportError as exc:
        raise ImportError(
            "numeric_embedding='periodic' needs the rtdl_num_embeddings package, which the "
            "periodic extra brings: pip install 'nescal-sklearn[periodic]'"
        ) from exc
    return PeriodicEmbeddings(n_embedded, d_embedding=d_embedding, lite=False)


def _numeric_embeddings(
    kind: str | None, dim: int | None, embedded_features, n_features: int
) -> tuple[nn.Module | None, list[int], int]:
    """The numeric embedding module of :class:`TabularMLP` (None without one), the
    embedded columns and the embedding's width, checked."""
    if kind is None:
        return None, [], 0
    d = check_int(
        "numeric_embedding_dim", _DEFAULT_EMBEDDING_DIM[kind] if dim is None else dim, low=1
    )
    if kind == "pbld" and d < 2:
        raise ValueError(
            "numeric_embedding_dim must be >= 2 with numeric_embedding='pbld' (the "
            f"raw value is one of its outputs); got {dim!r}."
        )
    embedded = _check_embedded_features(embedded_features, n_features)
    if not embedded:
        return None, embedded, d
    if kind == "pbld":
        return PBLDEmbeddings(len(embedded), d_embedding=d), embedded, d
    return _periodic_embeddings(len(embedded), d), embedded, d


def _use_fast_dropout(layers: list, n_blocks: int, p: float, fused: bool) -> None:
    """Replace, in place, each hidden block's dropout of ``layers`` ([linear, activation,
    dropout] x n_blocks, then the output layer) by :class:`FastDropout` (fused with the
    ReLU, the activation then an identity, when ``fused``)."""
    for block, seed in enumerate(dropout_seeds(n_blocks)):
        start = 3 * block + 1
        if fused:
            layers[start : start + 2] = [FastDropout(p, seed, True), nn.Identity()]
        else:
            layers[start + 1] = FastDropout(p, seed)


def _check_embedded_features(embedded_features: object, n_features: int) -> list[int]:
    if embedded_features is None:
        return list(range(n_features))
    if isinstance(embedded_features, (str, bytes)) or not isinstance(
        embedded_features, (Sequence, np.ndarray)
    ):
        raise ValueError(
            "embedded_features must be None or a sequence of column indices; got "
            f"{embedded_features!r}."
        )
    indices = list(embedded_features)
    bad = [i for i in indices if not is_int(i) or not 0 <= i < n_features]
    if bad:
        raise ValueError(
            f"embedded_features must hold column indices in [0, {n_features}) (n_features="
            f"{n_features}); got {embedded_features!r} with invalid entries {bad!r}."
        )
    indices = [int(i) for i in indices]
    duplicates = sorted({i for i in indices if indices.count(i) > 1})
    if duplicates:
        raise ValueError(
            f"embedded_features must not repeat a column; got {embedded_features!r} "
            f"with {duplicates!r} repeated."
        )
    return indices


def _check_categorical_groups(
    groups: object, n_features: int, embedded: list[int]
) -> list[list[int]]:
    if groups is None:
        return []
    if isinstance(groups, (str, bytes)) or not isinstance(groups, (Sequence, np.ndarray)):
        raise ValueError(
            f"categorical_groups must be None or a sequence of column-index sequences; got "
            f"{groups!r}."
        )
    checked = []
    for group in groups:
        if isinstance(group, (str, bytes)) or not isinstance(group, (Sequence, np.ndarray)):
            raise ValueError(
                f"categorical_groups must hold sequences of column indices; got {group!r} "
                f"in {groups!r}."
            )
        bad = [i for i in group if not is_int(i) or not 0 <= i < n_features]
        if not len(group) or bad:
            raise ValueError(
                f"each group of categorical_groups must be a non-empty sequence of column "
                f"indices in [0, {n_features}); got {list(group)!r}."
            )
        checked.append([int(i) for i in group])
    flat = [i for group in checked for i in group]
    repeated = sorted({i for i in flat if flat.count(i) > 1} | (set(flat) & set(embedded)))
    if repeated:
        raise ValueError(
            f"categorical_groups must not repeat a column or share one with "
            f"embedded_features; got {groups!r} with {repeated!r} repeated."
        )
    return checked


class TabularMLP(nn.Module):
    """A multilayer perceptron for tabular rows: [Linear -> activation -> dropout] x L -> Linear.

    Optionally with periodic numeric embeddings in front and/or as a packed ensemble
    of ``n_members`` MLPs trained in one network.

    Parameters
    ----------
    n_features : int
        Input width.
    n_classes : int
        Output width (logits).
    hidden_sizes : sequence of int, default=(256, 256)
        Widths of the hidden layers.
    dropout : float, default=0.1
        Dropout probability after each hidden activation.
    activation : {"relu", "gelu", "silu", "tanh", "selu", "mish"}, default="relu"
        Hidden activation.
    n_members : int, default=1
        Number of ensemble members ``k``. ``1`` is the plain MLP (``nn.Linear`` layers in
        ``self.layers``, output ``(n, n_classes)``). ``k > 1`` packs ``k`` independent MLPs
        into :class:`MemberLinear` layers: the (embedded) input is broadcast to
        ``(n, k, width)`` without a copy and the output is ``(n, k, n_classes)``, the
        logits of every member. Members have their own weights and dropout masks.
    numeric_embedding : {None, "periodic", "pbld"}, default=None
        ``"periodic"`` embeds the columns ``embedded_features`` with
        ``rtdl_num_embeddings.PeriodicEmbeddings(n_embedded, numeric_embedding_dim,
        lite=False)`` (Gorishniy et al., 2022, "On embeddings for numerical features in
        tabular deep learning"; needs the ``rtdl_num_embeddings`` package:
        ``pip install 'nescal-sklearn[periodic]'``); ``"pbld"``
        with RealMLP's :class:`PBLDEmbeddings`. Either flattens the embedded columns to
        ``n_embedded * numeric_embedding_dim`` columns and appends the other columns,
        unchanged, after them. With ``n_members > 1`` all members share this one
        embedding (it runs once, before the broadcast to members).
    embedded_features : sequence of int or None, default=None
        Column indices (into the input) to embed, in the order they are embedded;
        ``None`` means every column, an empty sequence means none (the MLP then sees
        the raw input). Ignored when ``numeric_embedding`` is None.
    numeric_embedding_dim : int or None, default=None
        Embedding size ``d`` per embedded column; None: 16 for ``"periodic"``, 4 for
        ``"pbld"`` (RealMLP's size, the raw value included).
    categorical_groups : sequence of sequences of int or None, default=None
        Column indices of one-hot encoded categorical features, one sequence per
        feature. Each group is replaced by its learned embedding
        (:class:`CategoricalEmbeddings`, ``categorical_embedding_dim`` values), placed
        after the numeric embeddings and before the other columns. None: no group.
    categorical_embedding_dim : int, default=8
        Embedding size per categorical group (RealMLP: 8).
    front_scale : bool, default=False
        Put a :class:`FrontScale` (a learned scale per column, RealMLP's scaling layer)
        between the (embedded) input and the first linear layer, shared by the members.
    parametric_activation : bool, default=False
        Wrap each hidden activation ``f`` in a :class:`ParametricActivation`,
        ``x + alpha * (f(x) - x)`` with a learned ``alpha`` per unit (per member and unit
        when ``n_members > 1``), as RealMLP does.
    dropout_masks : {"torch", "fast"}, default="torch"
        How dropout draws its masks: ``"torch"`` is :class:`torch.nn.Dropout`;
        ``"fast"`` is :class:`FastDropout` (16 bits a unit from numpy's SFC64 generator,
        seeded from torch's generator after the weights are drawn, so the initial
        weights are the same), several times faster on a CPU. With the plain ReLU it
        is fused with the activation: the activation's place in ``layers`` holds the
        :class:`FastDropout` (``relu=True``) and the dropout's place an
        ``nn.Identity``, so every linear layer keeps its index.

    Attributes
    ----------
    embedding : torch.nn.Module or None
        The shared ``PeriodicEmbeddings`` or :class:`PBLDEmbeddings`, or None when
        nothing is embedded.
    categorical : CategoricalEmbeddings or None
        The embeddings of ``categorical_groups``, or None when there is none.
    front : FrontScale or None
        The front scale, when ``front_scale`` is True.
    layers : torch.nn.Sequential
        The MLP (``nn.Linear`` layers when ``n_members == 1``, else
        :class:`MemberLinear`); its last entry is the output layer.

    Notes
    -----
    Shapes: input ``(n, n_features)``; output ``(n, n_classes)`` when ``n_members == 1``,
    ``(n, n_members, n_classes)`` otherwise.

    Parameter count. With ``m`` embedded columns and ``G`` categorical groups of ``c``
    columns in all, the MLP's input width is
    ``w_0 = m * d + G * d_cat + (n_features - m - c)`` (``w_0 = n_features`` without
    embeddings) and,
    with hidden widths ``w_1 .. w_L``, each member has
    ``sum_l (w_{l-1} + 1) * w_l + (w_L + 1) * n_classes`` parameters; the network has
    ``n_members`` times that. The shared periodic embedding adds ``m * (48 + 97 * d)``
    parameters once (48 frequencies per column, then a per-column linear map
    ``96 -> d`` with bias); PBLD adds ``m * (32 + 17 * (d - 1))``. A front scale adds
    ``w_0``; parametric activations add ``n_members * (w_1 + ... + w_L)``; categorical
    embeddings add ``c * d_cat``.

    The input of the output layer (``embedding_layer_name``) is the penultimate
    representation, of shape ``(n, w_L)`` or ``(n, n_members, w_L)``.

    Threads. Intel MKL, torch's BLAS on x86, picks a matrix product's kernel and
    summation order by CPU and thread count, so outputs and gradients at different
    thread counts differ by float32 round-off unless MKL's strict reproducibility is on
    (``MKL_CBWR=AUTO,STRICT`` in the environment before torch loads); see
    ``docs/nescal.md``, "Threads".

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import TabularMLP
    >>> TabularMLP(4, 3, hidden_sizes=(8,))(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    >>> ensemble = TabularMLP(4, 3, hidden_sizes=(8,), n_members=5,
    ...                       numeric_embedding="periodic", embedded_features=[0, 2],
    ...                       numeric_embedding_dim=6)
    >>> ensemble(torch.zeros(2, 4)).shape
    torch.Size([2, 5, 3])
    >>> ensemble.embedding_layer_name
    'layers.3'
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden_sizes: Sequence[int] = (256, 256),
        dropout: float = 0.1,
        activation: str = "relu",
        *,
        n_members: int = 1,
        numeric_embedding: str | None = None,
        embedded_features: Sequence[int] | None = None,
        numeric_embedding_dim: int | None = None,
        front_scale: bool = False,
        parametric_activation: bool = False,
        categorical_groups: Sequence[Sequence[int]] | None = None,
        categorical_embedding_dim: int = 8,
        dropout_masks: str = "torch",
    ) -> None:
        super().__init__()
        if dropout_masks not in ("torch", "fast"):
            raise ValueError(f"dropout_masks must be 'torch' or 'fast'; got {dropout_masks!r}.")
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}; got {activation!r}."
            )
        n_members = check_int("n_members", n_members, low=1)
        if numeric_embedding not in _NUMERIC_EMBEDDINGS:
            raise ValueError(
                f"numeric_embedding must be None, 'periodic' or 'pbld'; got {numeric_embedding!r}."
            )
        self.n_members = n_members
        self.embedding: nn.Module | None = None
        self.categorical: nn.Module | None = None
        self.embedding, embedded, d = _numeric_embeddings(
            numeric_embedding, numeric_embedding_dim, embedded_features, n_features
        )
        groups = _check_categorical_groups(categorical_groups, n_features, embedded)
        d_cat = check_int("categorical_embedding_dim", categorical_embedding_dim, low=1)
        if groups:
            self.categorical = CategoricalEmbeddings([len(g) for g in groups], d_cat)
        width = n_features
        if embedded or groups:
            in_groups = [column for group in groups for column in group]
            passed = sorted(set(range(n_features)) - set(embedded) - set(in_groups))
            # Non-persistent: derived from the constructor's arguments, so state_dict
            # keys are only learned parameters.
            indices = [("passed_index", passed)]
            if embedded:
                indices.append(("embedded_index", embedded))
            if groups:
                indices.append(("categorical_index", in_groups))
            for name, columns in indices:
                index = torch.tensor(columns, dtype=torch.long)
                self.register_buffer(name, index, persistent=False)
            width = len(embedded) * d + len(groups) * d_cat + len(passed)

        def linear(n_in: int, n_out: int) -> nn.Module:
            if n_members == 1:
                return nn.Linear(n_in, n_out)
            return MemberLinear(n_in, n_out, n_members)

        self.front = FrontScale(width) if front_scale else None

        def act(size: int) -> nn.Module:
            if parametric_activation:
                return ParametricActivation(_ACTIVATIONS[activation](), size, n_members)
            return _ACTIVATIONS[activation]()

        layers: list[nn.Module] = []
        for size in hidden_sizes:
            layers += [linear(width, int(size)), act(int(size)), nn.Dropout(dropout)]
            width = int(size)
        layers.append(linear(width, n_classes))
        if dropout_masks == "fast":  # seeded after the weights: the same initial weights
            fused = activation == "relu" and not parametric_activation
            _use_fast_dropout(layers, len(hidden_sizes), dropout, fused)
        self.layers = nn.Sequential(*layers)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        # Networks pickled before n_members / numeric_embedding existed: plain MLPs.
        self.__dict__.setdefault("n_members", 1)
        for name in ("embedding", "front", "categorical"):
            if name not in self._modules:
                self.__dict__.setdefault(name, None)

    @property
    def embedding_layer_name(self) -> str:
        """Dotted name (as in ``named_modules()``) of the output layer.

        Its forward receives the penultimate representation, ``(n, w_L)`` or
        ``(n, n_members, w_L)``.
        """
        return f"layers.{len(self.layers) - 1}"

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if self.embedding is not None or self.categorical is not None:
            parts = []
            if self.embedding is not None:
                parts.append(self.embedding(X.index_select(1, self.embedded_index)).flatten(1))
            if self.categorical is not None:
                parts.append(self.categorical(X.index_select(1, self.categorical_index)))
            parts.append(X.index_select(1, self.passed_index))
            X = torch.cat(parts, dim=1)
        if self.front is not None:
            X = self.front(X)
        if self.n_members > 1:
            X = X.unsqueeze(1).expand(-1, self.n_members, -1)
        return self.layers(X)


def layout_kwargs(module_kwargs: Mapping[str, Any], layout) -> dict:
    """:class:`TabularMLP`'s keyword arguments for a column layout: ``module_kwargs`` with
    the columns its options act on filled in.

    ``numeric_embedding`` embeds the layout's numeric columns, unless
    ``embedded_features`` is given. ``categorical_embedding=True``, an option of
    ``NeSCalClassifier``'s ``module_kwargs`` rather than of :class:`TabularMLP`, becomes
    ``categorical_groups``: the layout's one-hot groups of at least
    :data:`CATEGORICAL_EMBEDDING_MIN_SIZE` columns, unless ``categorical_groups`` is given.

    Parameters
    ----------
    module_kwargs : mapping
        The network's options.
    layout : ColumnLayout or None
        Anything with ``numeric`` (column indices) and ``groups`` (the one-hot groups),
        such as :class:`~nescal_sklearn.preprocessing.ColumnLayout`; read only when an
        option needs it.

    Returns
    -------
    dict

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from nescal_sklearn.nn import layout_kwargs
    >>> layout = SimpleNamespace(numeric=(0, 1), groups=((2, 3), tuple(range(4, 14))))
    >>> kwargs = layout_kwargs({"numeric_embedding": "pbld", "categorical_embedding": True}, layout)
    >>> kwargs["embedded_features"], kwargs["categorical_groups"]
    ([0, 1], [[4, 5, 6, 7, 8, 9, 10, 11, 12, 13]])
    """
    kwargs = dict(module_kwargs)
    if kwargs.get("numeric_embedding") is not None:
        kwargs.setdefault("embedded_features", list(layout.numeric))
    if kwargs.pop("categorical_embedding", False):
        kwargs.setdefault(
            "categorical_groups",
            [
                list(group)
                for group in layout.groups
                if len(group) >= CATEGORICAL_EMBEDDING_MIN_SIZE
            ],
        )
    return kwargs


def build_module(
    module: type[nn.Module] | nn.Module | None,
    module_kwargs: dict | None,
    *,
    n_features: int,
    n_classes: int,
    mlp_kwargs: dict,
) -> nn.Module:
    """Instantiate the network: default MLP, a module class, or a copy of an instance."""
    kwargs = dict(module_kwargs or {})
    if module is None:
        return TabularMLP(n_features, n_classes, **mlp_kwargs, **kwargs)
    if isinstance(module, nn.Module):
        if kwargs:
            raise ValueError("module_kwargs must be empty when module is an nn.Module instance.")
        return copy.deepcopy(module)
    if isinstance(module, type) and issubclass(module, nn.Module):
        params = inspect.signature(module).parameters
        for key, value in (("n_features", n_features), ("n_classes", n_classes)):
            if key in params and key not in kwargs:
                kwargs[key] = value
        try:
            return module(**kwargs)
        except TypeError as exc:
            raise TypeError(
                f"module={module.__name__} could not be built with {kwargs!r} ({exc}). A "
                "module class gets n_features and n_classes when its __init__ takes them, "
                "and module_kwargs for everything else; pass the other arguments in "
                "module_kwargs, or a module instance."
            ) from exc
    raise TypeError(
        f"module must be None, a torch.nn.Module subclass or an nn.Module instance; got {module!r}."
    )
