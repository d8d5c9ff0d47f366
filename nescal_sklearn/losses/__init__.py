"""Training objectives: cross-entropy, NeSCal and the calibration baselines.

Each objective exists as a loss object (callable as
``loss(logits, target, sample_weight=None)`` in any PyTorch loop, selectable by object
or registered name in ``NeSCalClassifier(loss=...)``) and, for the baselines, as a functional form taking
``(logits, target, ...)`` and returning the batch-mean scalar.
"""

from . import experimental  # noqa: F401  (registers loss="nescal_experimental")
from ._base import LOSSES, CrossEntropyLoss, TrainingLoss, get_loss, register_loss
from ._calibration_losses import (
    AdaptiveFocalLoss,
    FocalLoss,
    LabelSmoothingLoss,
    MarginLoss,
    MDCALoss,
    MMCELoss,
    SoftAvUCLoss,
)
from ._functional import (
    adaptive_focal_loss,
    focal_loss,
    label_smoothing_loss,
    margin_loss,
    mdca_loss,
    mmce_loss,
    soft_avuc_loss,
)
from ._nescal import NeSCalLoss

__all__ = [
    "LOSSES",
    "AdaptiveFocalLoss",
    "CrossEntropyLoss",
    "FocalLoss",
    "LabelSmoothingLoss",
    "MDCALoss",
    "MMCELoss",
    "MarginLoss",
    "NeSCalLoss",
    "SoftAvUCLoss",
    "adaptive_focal_loss",
    "focal_loss",
    "label_smoothing_loss",
    "margin_loss",
    "mdca_loss",
    "mmce_loss",
    "soft_avuc_loss",
    "TrainingLoss",
    "get_loss",
    "register_loss",
]
