"""RealMLP's building blocks for the default MLP: a front scale, parametric activations
and PBLD numeric embeddings (Holzmüller et al. 2024, "Better by default: strong
pre-tuned MLPs and boosted trees on tabular data")."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["CategoricalEmbeddings", "FrontScale", "ParametricActivation", "PBLDEmbeddings"]


class FrontScale(nn.Module):
    """A learned scale per input column, initialised to 1: ``x * scale``.

    RealMLP's "scaling layer": it lets training decide how much each (embedded) input
    column counts before the first linear layer, a soft feature selection.

    Parameters
    ----------
    n_features : int
        Input width; one scale per column.

    Attributes
    ----------
    scale : torch.nn.Parameter of shape (n_features,)

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import FrontScale
    >>> FrontScale(3)(torch.ones(2, 3)).tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(int(n_features)))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X * self.scale


class ParametricActivation(nn.Module):
    """``x + alpha * (f(x) - x)`` with a learned ``alpha`` per unit, initialised to 1.

    At initialisation this is ``f``; training may move each unit towards the identity
    (``alpha = 0``) or beyond. RealMLP's parametric activation.

    Parameters
    ----------
    activation : torch.nn.Module
        The activation ``f``.
    n_features : int
        Width of the layer; one ``alpha`` per unit.
    n_members : int, default=1
        With ``n_members > 1`` the input is ``(n, n_members, n_features)`` and every
        member has its own ``alpha`` (shape ``(n_members, n_features)``).

    Attributes
    ----------
    alpha : torch.nn.Parameter of shape (n_features,) or (n_members, n_features)

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from nescal_sklearn.nn import ParametricActivation
    >>> layer = ParametricActivation(nn.ReLU(), 2)
    >>> layer(torch.tensor([[-1.0, 2.0]])).tolist()
    [[0.0, 2.0]]
    >>> with torch.no_grad():
    ...     _ = layer.alpha.fill_(0.5)
    >>> layer(torch.tensor([[-1.0, 2.0]])).tolist()
    [[-0.5, 2.0]]
    """

    def __init__(self, activation: nn.Module, n_features: int, n_members: int = 1) -> None:
        super().__init__()
        self.activation = activation
        shape = (int(n_features),) if n_members == 1 else (int(n_members), int(n_features))
        self.alpha = nn.Parameter(torch.ones(shape))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X + self.alpha * (self.activation(X) - X)


class PBLDEmbeddings(nn.Module):
    """RealMLP's PBLD numeric embeddings: periodic with a phase, linear, and the value itself.

    Column ``j`` of ``x`` maps to ``d_embedding`` values: ``d_embedding - 1`` of
    ``cos(2 pi x_j w_j + b_j) @ W_j + c_j`` (``n_frequencies`` frequencies ``w_j`` drawn
    from ``N(0, sigma^2)``, phases ``b_j`` uniform on ``(-pi, pi)``, a per-column linear
    map ``W_j, c_j``), followed by ``x_j`` itself ("densenet": the raw value stays
    available to the MLP).

    Parameters
    ----------
    n_features : int
        Number of embedded columns.
    d_embedding : int, default=4
        Output size per column, the raw value included (RealMLP: 4); at least 2.
    n_frequencies : int, default=16
        Frequencies per column (RealMLP: 16).
    sigma : float, default=0.1
        Standard deviation of the initial frequencies (RealMLP: 0.1).

    Notes
    -----
    Input ``(n, n_features)``, output ``(n, n_features, d_embedding)``. Parameters:
    ``n_features * (2 * n_frequencies + (n_frequencies + 1) * (d_embedding - 1))``.
    Unlike ``rtdl_num_embeddings.PeriodicEmbeddings`` there is no ReLU after the
    linear map and the frequencies start smaller, so the embedding starts close to a
    smooth function of ``x``.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import PBLDEmbeddings
    >>> embedding = PBLDEmbeddings(3, d_embedding=4)
    >>> x = torch.randn(5, 3)
    >>> out = embedding(x)
    >>> out.shape
    torch.Size([5, 3, 4])
    >>> # exact: the last value of each column is x itself, copied
    >>> torch.equal(out[..., -1], x)
    True
    """

    def __init__(
        self,
        n_features: int,
        d_embedding: int = 4,
        n_frequencies: int = 16,
        sigma: float = 0.1,
    ) -> None:
        super().__init__()
        if int(d_embedding) < 2:
            raise ValueError(f"d_embedding must be >= 2 for PBLD embeddings; got {d_embedding!r}.")
        m, h, d = int(n_features), int(n_frequencies), int(d_embedding) - 1
        self.frequencies = nn.Parameter(sigma * torch.randn(m, h))
        self.phases = nn.Parameter(math.pi * (2 * torch.rand(m, h) - 1))
        bound = 1.0 / math.sqrt(h)
        self.weight = nn.Parameter((2 * torch.rand(m, h, d) - 1) * bound)
        self.bias = nn.Parameter((2 * torch.rand(m, d) - 1) * bound)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        periodic = torch.cos(2 * math.pi * X.unsqueeze(-1) * self.frequencies + self.phases)
        linear = torch.einsum("nmh,mhd->nmd", periodic, self.weight) + self.bias
        return torch.cat([linear, X.unsqueeze(-1)], dim=-1)


class CategoricalEmbeddings(nn.Module):
    """Learned embeddings of one-hot encoded categorical features.

    Group ``g`` of ``size_g`` one-hot columns has a table ``E_g`` of shape
    ``(size_g, d_embedding)``; a row's embedding is ``onehot_g @ E_g``, the table row of
    its category (``nn.Embedding``'s lookup, written as a product so that it runs on
    the one-hot columns a pipeline already produces; an all-zero row, a category
    unseen in training, gets the zero vector). RealMLP embeds its categorical
    features with more than 9 categories this way, with 8 values each.

    Parameters
    ----------
    group_sizes : sequence of int
        Number of one-hot columns of each group, in input order.
    d_embedding : int, default=8
        Embedding size per group.

    Attributes
    ----------
    weight : torch.nn.Parameter of shape (sum(group_sizes), d_embedding)
        The tables of all groups, stacked; initialised ``N(0, 1)`` as ``nn.Embedding``.

    Notes
    -----
    Input ``(n, sum(group_sizes))``, the groups' columns side by side; output
    ``(n, len(group_sizes) * d_embedding)``.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import CategoricalEmbeddings
    >>> layer = CategoricalEmbeddings([3, 2], d_embedding=4)
    >>> out = layer(torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0]]))
    >>> out.shape
    torch.Size([1, 8])
    >>> # exact: a one-hot row adds its table row times 1.0 and the others times 0.0
    >>> torch.equal(out[0, :4], layer.weight[1]) and torch.equal(out[0, 4:], layer.weight[3])
    True
    """

    def __init__(self, group_sizes, d_embedding: int = 8) -> None:
        super().__init__()
        self.group_sizes = [int(size) for size in group_sizes]
        if not self.group_sizes or min(self.group_sizes) < 1:
            raise ValueError(
                f"group_sizes must be a non-empty sequence of ints >= 1; got {group_sizes!r}."
            )
        self.d_embedding = int(d_embedding)
        self.weight = nn.Parameter(torch.randn(sum(self.group_sizes), self.d_embedding))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        parts = []
        start = 0
        for size in self.group_sizes:
            parts.append(X[:, start : start + size] @ self.weight[start : start + size])
            start += size
        return torch.cat(parts, dim=1)

    def extra_repr(self) -> str:
        return f"group_sizes={self.group_sizes}, d_embedding={self.d_embedding}"
