"""The module a fit trains: its device, the network built and checked, its frozen parts,
and its prediction.

* :func:`training_device` resolves the ``device`` parameter to a torch device available
  here;
* :func:`build_network` builds the module a fit trains (the default network with the
  options of ``module_kwargs`` on the column layout, a module class, or a copy of an
  instance) and checks it on two training rows;
* :func:`frozen_parts` resolves the ``freeze`` patterns on it, refusing to freeze it all;
* :func:`module_logits` is the network's prediction on rows, in eval mode.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from torch import nn

from ..exceptions import ParameterError
from ..nn import build_module, ensemble_logits, layout_kwargs
from ._fit_data import FitData, largest_abs
from ._freeze import FrozenParts, resolve_frozen
from ._settings import FitSettings

__all__ = ["build_network", "frozen_parts", "module_logits", "training_device"]

#: Rows per forward pass in ``predict``, ``predict_proba``, ``decision_function`` and
#: the validation pass: on one thread, chunks of 1,024-2,048 rows ran a pass over 7,800
#: rows of adult 20 % faster than chunks of 8,192, whose activations leave the cache.
PREDICT_BATCH_ROWS = 2048


def training_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device that is available here (else a ParameterError)."""
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:  # torch's own message lists the device types it knows
        raise ParameterError(
            "device",
            f"device={device!r} is not a torch device; expected a device string "
            f"such as 'cpu', 'cuda' or 'cuda:1' (torch: {exc}).",
        ) from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError(
            "device", f"device={device!r} was requested but CUDA is not available."
        )
    return resolved


def build_network(settings: FitSettings, data: FitData) -> nn.Module:
    """The network, checked on two training rows: one logit per class and member."""
    n_classes = len(data.classes)
    mlp_kwargs: dict[str, Any] = {
        "hidden_sizes": settings.hidden_sizes,
        "dropout": settings.dropout,
        "activation": settings.activation,
        "dropout_masks": settings.dropout_masks,
    }
    kwargs = dict(settings.module_kwargs)
    if settings.module is None:
        kwargs = layout_kwargs(kwargs, data.layout)
        if kwargs.get("numeric_embedding") is not None and not kwargs["embedded_features"]:
            warnings.warn(
                f"module_kwargs numeric_embedding={kwargs['numeric_embedding']!r} "
                "finds no numeric column to embed in the layout (every column "
                "is one-hot or binary); the network sees the columns as they are.",
                UserWarning,
                stacklevel=4,
            )
    module = build_module(
        settings.module,
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
            f"absolute value is {largest_abs(data.X_train[:2]):.3g}); a module "
            "must map finite inputs to finite logits."
        )
    return module


def frozen_parts(module: nn.Module, freeze) -> FrozenParts:
    """The parts of ``module`` that the patterns ``freeze`` freeze; not all of it."""
    frozen = resolve_frozen(module, freeze)
    n_params = sum(1 for _ in module.parameters())
    if len(frozen.parameters) == n_params:
        raise ParameterError(
            "freeze",
            f"freeze={list(freeze)!r} freezes every parameter of "
            f"{type(module).__name__}: nothing would train. Leave some part (a head) "
            "unfrozen.",
        )
    return frozen


def module_logits(module: nn.Module, X: np.ndarray) -> np.ndarray:
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
        with torch.inference_mode():
            for chunk in torch.split(torch.as_tensor(X), PREDICT_BATCH_ROWS):
                outputs.append(ensemble_logits(module(chunk.to(device)).float()).cpu())
    finally:
        if was_training:
            module.train()
    return torch.cat(outputs).numpy().astype(np.float64)
