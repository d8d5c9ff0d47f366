"""Training objectives: cross-entropy, NeSCal and the calibration baselines.

Each objective exists as a loss object (callable as ``loss(logits, target)`` in any
PyTorch loop, selectable by object or registered name in
``NeSCalClassifier(loss=...)``) and, for the baselines, as a functional form taking
``(logits, target, ...)`` and returning the batch-mean scalar.
"""

from ._base import LOSSES, CrossEntropyLoss, TrainingLoss, get_loss, register_loss

__all__ = ["LOSSES", "CrossEntropyLoss", "TrainingLoss", "get_loss", "register_loss"]
