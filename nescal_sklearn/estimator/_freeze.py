"""Frozen parts of a network: which parameters train, and when everything does.

``NeSCalClassifier(freeze=[patterns], unfreeze_at=epoch, unfreeze_lr=lr)`` trains only
the parameters that no pattern matches. :func:`resolve_frozen` turns the patterns into
the names of the frozen parameters and submodules of one module;
:class:`NeSCalNet` keeps those out of the optimizer and keeps the frozen submodules in
eval mode (BatchNorm statistics fixed, Dropout off); :class:`Unfreeze` hands them back
to training at a given epoch, as a new optimizer parameter group with its own learning
rate.

skorch's ``Freezer``/``Unfreezer`` callbacks only flip ``requires_grad``: the optimizer
still holds the frozen parameters, and BatchNorm layers keep updating their running
statistics in train mode. Neither is what "frozen pretrained encoder" means, so this
module does both properly instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from skorch.callbacks import Callback
from torch import nn

from ..exceptions import ParameterError

__all__ = ["FrozenParts", "Unfreeze", "check_freeze_patterns", "resolve_frozen"]


@dataclass(frozen=True)
class FrozenParts:
    """The frozen part of a module.

    Attributes
    ----------
    parameters : frozenset of str
        Names (as in ``module.named_parameters()``) of the parameters not trained.
    modules : tuple of str
        Names (as in ``module.named_modules()``) of the submodules kept in eval mode:
        those a pattern matches by name, and those whose parameters are all frozen.
    """

    parameters: frozenset
    modules: tuple


def check_freeze_patterns(freeze) -> tuple[str, ...] | None:
    """``freeze`` as a tuple of patterns (None stays None); raise on anything else."""
    if freeze is None:
        return None
    if isinstance(freeze, str) or not isinstance(freeze, Sequence):
        raise ParameterError(
            "freeze",
            "freeze must be None or a list of fnmatch patterns of module or parameter names "
            f"(e.g. ['encoder*']); got {freeze!r}.",
        )
    if not all(isinstance(p, str) and p for p in freeze):
        raise ParameterError(
            "freeze",
            f"freeze must hold non-empty strings (fnmatch patterns); got {list(freeze)!r}.",
        )
    return tuple(freeze)


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def resolve_frozen(module: nn.Module, patterns: Sequence[str]) -> FrozenParts:
    """Names of the parameters and submodules of ``module`` that ``patterns`` freeze.

    A parameter is frozen when a pattern matches its own name (``"encoder.0.weight"``)
    or the name of a submodule that holds it (``"encoder"``, ``"encoder.0"``). A
    submodule stays in eval mode when a pattern matches its name or when it has
    parameters and all of them are frozen.

    Parameters
    ----------
    module : torch.nn.Module
        The network.
    patterns : sequence of str
        fnmatch patterns (case-sensitive), e.g. ``["encoder*"]``.

    Returns
    -------
    FrozenParts

    Raises
    ------
    ParameterError
        For ``freeze``, when a pattern matches no parameter (a typo would otherwise train everything).

    Examples
    --------
    >>> from torch import nn
    >>> net = nn.Sequential()
    >>> net.add_module("encoder", nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8)))
    >>> net.add_module("head", nn.Linear(8, 2))
    >>> parts = resolve_frozen(net, ["encoder*"])
    >>> sorted(parts.parameters)
    ['encoder.0.bias', 'encoder.0.weight', 'encoder.1.bias', 'encoder.1.weight']
    >>> parts.modules
    ('encoder', 'encoder.0', 'encoder.1')
    """
    named_modules = dict(module.named_modules())
    frozen_parameters = set()
    for name, _ in module.named_parameters():
        owners = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        if _matches(name, patterns) or any(_matches(owner, patterns) for owner in owners):
            frozen_parameters.add(name)
    for pattern in patterns:
        hit = any(fnmatchcase(name, pattern) for name in frozen_parameters) or any(
            fnmatchcase(name, pattern) and any(True for _ in named_modules[name].parameters())
            for name in named_modules
            if name
        )
        if not hit:
            shown = [name for name, _ in module.named_parameters()]
            raise ParameterError(
                "freeze",
                f"freeze pattern {pattern!r} matches no parameter or module with parameters of "
                f"{type(module).__name__}; its parameters are {shown[:20]!r}"
                + (" ..." if len(shown) > 20 else "")
                + ".",
            )
    frozen_modules = []
    for name, sub in named_modules.items():
        if not name:
            continue
        own = [f"{name}.{p}" for p, _ in sub.named_parameters()]
        if _matches(name, patterns) or (own and all(p in frozen_parameters for p in own)):
            frozen_modules.append(name)
    return FrozenParts(frozenset(frozen_parameters), tuple(frozen_modules))


class Unfreeze(Callback):
    """Train the frozen parameters from ``epoch`` on (1-based), at learning rate ``lr``.

    At the start of that epoch the frozen parameters get ``requires_grad=True`` back,
    join the optimizer as a new parameter group with learning rate ``lr``, and the
    frozen submodules follow the network's train/eval mode again. Records
    ``unfrozen`` (True) in that epoch's history row.

    Parameters
    ----------
    epoch : int
        1-based epoch from which everything trains.
    lr : float
        Learning rate of the formerly frozen parameters.
    """

    def __init__(self, epoch: int, lr: float) -> None:
        self.epoch = epoch
        self.lr = lr

    def on_epoch_begin(self, net, **kwargs) -> None:
        if len(net.history) != self.epoch or net.frozen_ is None:
            return
        net.optimizer_.add_param_group({"params": net.unfreeze(), "lr": self.lr})
        net.history.record("unfrozen", True)
