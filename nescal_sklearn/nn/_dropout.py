"""Dropout whose masks are cheap to draw on a CPU, alone or fused with the ReLU before it.

torch's CPU dropout draws one Bernoulli variable per unit from its Mersenne Twister, about
11 ns a unit on one thread: a third of a small tabular MLP's training epoch. The modules
here draw 16 bits per unit from numpy's SFC64 generator instead (about 0.5 ns a unit).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .._params import check_int

__all__ = ["FastDropout", "dropout_seeds"]

#: Random bits per unit: the drop probability is rounded to a multiple of 1 / 2**16.
_LEVELS = 1 << 16


class _MaskedReLU(torch.autograd.Function):
    """``relu(x) * keep * scale``, in place on ``x`` where that is safe; the backward reads
    the output, not the mask, so the mask's memory can be reused at once."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        if x.grad_fn is not None and not x._is_view():  # an op's own output: no one else's
            ctx.mark_dirty(x)
            out = x.clamp_min_(0)
        else:
            out = x.clamp_min(0)
        out.mul_(keep).mul_(scale)
        ctx.save_for_backward(out)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # out > 0 exactly where x > 0 and the unit was kept (scale > 1 keeps x * scale > 0)
        (out,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad, out, 0).mul_(ctx.scale), None, None


class FastDropout(nn.Module):
    """Dropout with masks of 16 random bits a unit from numpy's SFC64 generator.

    In training mode each unit is dropped where its 16 bits, read as an integer in
    ``[0, 65536)``, fall below ``round(p * 65536)``, so the drop probability is ``p``
    rounded to a multiple of ``1 / 65536`` (0.1 becomes 0.100006); kept units are scaled
    by ``1 / (1 - p)`` as :class:`torch.nn.Dropout` scales them. In eval mode the module
    is the identity (or the ReLU, with ``relu=True``). On a device other than the CPU it
    is :func:`torch.nn.functional.dropout`, whose masks are cheap there.

    Parameters
    ----------
    p : float
        Drop probability, in ``[0, 1)``.
    seed : int
        Seed of the module's generator (``numpy.random.SFC64``).
    relu : bool, default=False
        Apply ``relu`` first, in the same step: the backward then reads the output
        alone (``relu(x) * mask`` is positive exactly where the gradient passes), which
        saves two passes over the activations.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.nn import FastDropout
    >>> layer = FastDropout(0.5, seed=0)
    >>> sorted(set(layer(torch.ones(1000)).tolist()))
    [0.0, 2.0]
    >>> layer.eval()(torch.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, p: float, seed: int, relu: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"FastDropout's p must be in [0, 1); got {p!r}.")
        self.p = float(p)
        self.relu = bool(relu)
        self.threshold = round(self.p * _LEVELS)
        self.generator = np.random.SFC64(check_int("seed", seed, low=0))
        self._buffer = np.empty(0, dtype=np.float32)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_buffer": np.empty(0, dtype=np.float32)}  # not pickled

    def keep(self, shape: torch.Size) -> torch.Tensor:
        """The next float32 mask of ``shape``: 1 for a kept unit, 0 for a dropped one.

        It lives in the module's buffer, which the next call overwrites.
        """
        n = shape.numel()
        if self._buffer.size < n:
            self._buffer = np.empty(n, dtype=np.float32)
        bits = self.generator.random_raw(-(-n // 4)).view(np.uint16)[:n]
        np.greater_equal(bits, self.threshold, out=self._buffer[:n])
        return torch.from_numpy(self._buffer[:n]).view(shape)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if not self.training or self.threshold == 0:
            return torch.relu(X) if self.relu else X
        if X.device.type != "cpu":
            X = torch.relu(X) if self.relu else X
            return nn.functional.dropout(X, self.p, training=True)
        keep, scale = self.keep(X.shape), 1.0 / (1.0 - self.p)
        if self.relu:
            return _MaskedReLU.apply(X, keep, scale)
        return X * keep.mul(scale).to(X.dtype)  # a new mask: autograd saves it

    def extra_repr(self) -> str:
        return f"p={self.p}, relu={self.relu}"


def dropout_seeds(n: int) -> list[int]:
    """``n`` seeds for :class:`FastDropout` layers, from one draw of torch's generator."""
    seed = int(torch.randint(0, 2**62, ()))
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(n)]
