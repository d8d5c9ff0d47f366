"""The default tabular MLP, and how the estimator instantiates its network."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["TabularMLP", "build_module"]

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh}


class TabularMLP(nn.Module):
    """A multilayer perceptron for tabular rows: [Linear -> activation -> dropout] x L -> Linear.

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
    activation : {"relu", "gelu", "silu", "tanh"}, default="relu"
        Hidden activation.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.estimator import TabularMLP
    >>> TabularMLP(4, 3, hidden_sizes=(8,))(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden_sizes: Sequence[int] = (256, 256),
        dropout: float = 0.1,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}; got {activation!r}."
            )
        layers: list[nn.Module] = []
        width = n_features
        for size in hidden_sizes:
            layers += [nn.Linear(width, int(size)), _ACTIVATIONS[activation](), nn.Dropout(dropout)]
            width = int(size)
        layers.append(nn.Linear(width, n_classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.layers(X)


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
        return module(**kwargs)
    raise TypeError(
        "module must be None, a torch.nn.Module subclass or an nn.Module instance; got "
        f"{module!r}."
    )
