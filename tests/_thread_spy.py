"""A network that records torch's thread count whenever it runs: which threads a fit or a
prediction used."""

from __future__ import annotations

import torch
from torch import nn


class ThreadSpy(nn.Module):
    """A linear network that appends ``torch.get_num_threads()`` to ``seen`` on each
    forward pass (reset ``ThreadSpy.seen = []`` before the calls a test counts)."""

    seen: list = []

    def __init__(self, n_features, n_classes):
        super().__init__()
        self.linear = nn.Linear(n_features, n_classes)

    def forward(self, X):
        ThreadSpy.seen.append(torch.get_num_threads())
        return self.linear(X)
