"""Loss objects for the training-time calibration baselines.

Each class stores its ``__init__`` keyword arguments unchanged, checks them in
:meth:`~TrainingLoss.validate`, and calls its functional form from
:mod:`nescal_sklearn.losses._functional` in :meth:`~TrainingLoss.forward`, so that
``loss(logits, target, sample_weight=None)`` works in a plain PyTorch loop and the object works with
``NeSCalClassifier(loss=...)``, ``clone`` and ``GridSearchCV``.

This module imports torch only: no scikit-learn, no skorch.
"""

from __future__ import annotations

import torch

from ._base import TrainingLoss, register_loss
from ._functional import (
    adaptive_focal_loss,
    focal_loss,
    label_smoothing_loss,
    margin_loss,
    mdca_loss,
    mmce_loss,
    soft_avuc_loss,
)

__all__ = [
    "LabelSmoothingLoss",
    "FocalLoss",
    "AdaptiveFocalLoss",
    "MMCELoss",
    "MDCALoss",
    "SoftAvUCLoss",
    "MarginLoss",
]


@register_loss("label_smoothing")
class LabelSmoothingLoss(TrainingLoss):
    """Cross-entropy against targets ``(1 - epsilon) * onehot + epsilon / K``.

    The ``torch.nn.functional.cross_entropy(label_smoothing=epsilon)`` convention: the
    smoothing mass is spread over all K classes, the true one included
    (Szegedy et al. 2016; Müller, Kornblith & Hinton 2019). See
    :func:`~nescal_sklearn.losses.label_smoothing_loss`.

    Parameters
    ----------
    epsilon : float, default=0.1
        Smoothing mass, in [0, 1].

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import LabelSmoothingLoss
    >>> loss = LabelSmoothingLoss(epsilon=0.1)
    >>> round(float(loss(torch.zeros(2, 4), torch.tensor([0, 3]))), 4)  # log(4)
    1.3863
    """

    def __init__(self, epsilon: float = 0.1) -> None:
        self.epsilon = epsilon

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return label_smoothing_loss(
            logits, target, epsilon=self.epsilon, sample_weight=sample_weight
        )

    def validate(self) -> None:
        self._check_real("epsilon", low=0, high=1)


@register_loss("focal")
class FocalLoss(TrainingLoss):
    """Focal loss ``-(1 - p_t)**gamma * log p_t`` (Lin et al. 2017; Mukhoti et al. 2020).

    See :func:`~nescal_sklearn.losses.focal_loss`.

    Parameters
    ----------
    gamma : float, default=3.0
        Focusing parameter, >= 0; ``gamma=0`` is cross-entropy.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import FocalLoss
    >>> loss = FocalLoss(gamma=3.0)
    >>> round(float(loss(torch.zeros(1, 2), torch.tensor([0]))), 4)  # 0.5**3 * log 2
    0.0866
    """

    def __init__(self, gamma: float = 3.0) -> None:
        self.gamma = gamma

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return focal_loss(logits, target, gamma=self.gamma, sample_weight=sample_weight)

    def validate(self) -> None:
        self._check_real("gamma", low=0)


@register_loss("flsd53")
class AdaptiveFocalLoss(TrainingLoss):
    """Focal loss with the FLSD-53 schedule: gamma 5 where ``p_t < 0.2``, else 3.

    Mukhoti et al. (2020). The per-row gamma is chosen from the detached ``p_t``. See
    :func:`~nescal_sklearn.losses.adaptive_focal_loss`.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import AdaptiveFocalLoss
    >>> loss = AdaptiveFocalLoss()
    >>> round(float(loss(torch.zeros(1, 10), torch.tensor([0]))), 4)  # 0.9**5 * log 10
    1.3597
    """

    def __init__(self) -> None:
        pass

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return adaptive_focal_loss(logits, target, sample_weight=sample_weight)


@register_loss("mmce")
class MMCELoss(TrainingLoss):
    """Cross-entropy plus ``weight`` times the weighted MMCE (Kumar, Sarawagi & Jain 2018).

    Laplacian kernel ``exp(-|r - r'| / 0.4)`` on top-label confidences, correct and
    incorrect rows weighted separately; 0 on all-correct or all-incorrect batches. See
    :func:`~nescal_sklearn.losses.mmce_loss`.

    Parameters
    ----------
    weight : float, default=2.0
        Weight of the MMCE term, >= 0.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import MMCELoss
    >>> loss = MMCELoss(weight=2.0)
    >>> logits = torch.tensor([[2.0, 0.0], [1.0, 0.0]])
    >>> round(float(loss(logits, torch.tensor([0, 0]))), 4)  # all correct: cross-entropy only
    0.2201
    """

    def __init__(self, weight: float = 2.0) -> None:
        self.weight = weight

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return mmce_loss(logits, target, weight=self.weight, sample_weight=sample_weight)

    def validate(self) -> None:
        self._check_real("weight", low=0)


@register_loss("mdca")
class MDCALoss(TrainingLoss):
    """Cross-entropy plus ``beta`` times MDCA (Hebbalaguppe et al. 2022).

    MDCA is ``(1/K) * sum_k |mean_i p_ik - mean_i 1[y_i = k]|`` over the batch. See
    :func:`~nescal_sklearn.losses.mdca_loss`.

    Parameters
    ----------
    beta : float, default=1.0
        Weight of the MDCA term, >= 0.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import MDCALoss
    >>> loss = MDCALoss(beta=1.0)
    >>> round(float(loss(torch.zeros(2, 2), torch.tensor([0, 0]))), 4)  # log 2 + 0.5
    1.1931
    """

    def __init__(self, beta: float = 1.0) -> None:
        self.beta = beta

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return mdca_loss(logits, target, beta=self.beta, sample_weight=sample_weight)

    def validate(self) -> None:
        self._check_real("beta", low=0)


@register_loss("savuc")
class SoftAvUCLoss(TrainingLoss):
    """Cross-entropy plus ``beta`` times soft AvUC (Karandikar et al. 2021).

    Accuracy versus uncertainty with an entropy-based soft certainty; see
    :func:`~nescal_sklearn.losses.soft_avuc_loss` for the definition and the choice of
    defaults (those of the reference ``soft_uncertainty``, under which the soft
    uncertainty equals the normalised entropy).

    Parameters
    ----------
    beta : float, default=1.0
        Weight of the S-AvUC term, >= 0.
    temperature : float, default=1.0
        Softness of the certain/uncertain split, > 0.
    kappa : float, default=0.5
        Normalised-entropy threshold of the split, in (0, 1).

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import SoftAvUCLoss
    >>> loss = SoftAvUCLoss(beta=1.0, temperature=1.0, kappa=0.5)
    >>> logits = torch.tensor([[3.0, 0.0, 0.0], [0.0, 0.5, 0.0]])
    >>> round(float(loss(logits, torch.tensor([0, 2]))), 4)
    0.7922
    """

    def __init__(self, beta: float = 1.0, temperature: float = 1.0, kappa: float = 0.5) -> None:
        self.beta = beta
        self.temperature = temperature
        self.kappa = kappa

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return soft_avuc_loss(
            logits,
            target,
            beta=self.beta,
            temperature=self.temperature,
            kappa=self.kappa,
            sample_weight=sample_weight,
        )

    def validate(self) -> None:
        self._check_real("beta", low=0)
        self._check_real("temperature", low=0, low_inclusive=False)
        self._check_real("kappa", low=0, high=1, low_inclusive=False, high_inclusive=False)


@register_loss("mbls")
class MarginLoss(TrainingLoss):
    """Cross-entropy plus ``weight`` times the MbLS logit-margin penalty (Liu et al. 2022).

    The penalty is the mean over rows and classes of ``relu(max_j z_j - z_k - margin)``.
    See :func:`~nescal_sklearn.losses.margin_loss`.

    Parameters
    ----------
    margin : float, default=10.0
        Tolerated logit gap, >= 0.
    weight : float, default=0.1
        Weight of the penalty, >= 0.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import MarginLoss
    >>> loss = MarginLoss(margin=1.0, weight=1.0)
    >>> logits = torch.tensor([[2.0, 0.0]])  # gaps 0 and 2: penalty (0 + 1) / 2
    >>> round(float(loss(logits, torch.tensor([0]))), 4)  # log(1 + e**-2) + 0.5
    0.6269
    """

    def __init__(self, margin: float = 10.0, weight: float = 0.1) -> None:
        self.margin = margin
        self.weight = weight

    def forward(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        sample_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return margin_loss(
            logits,
            target,
            margin=self.margin,
            weight=self.weight,
            sample_weight=sample_weight,
        )

    def validate(self) -> None:
        self._check_real("margin", low=0)
        self._check_real("weight", low=0)
