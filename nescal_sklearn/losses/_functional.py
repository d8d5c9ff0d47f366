"""Functional forms of the calibration-oriented training objectives.

Every function takes ``logits`` of shape (n, C) and integer ``target`` of shape (n,) and
returns the batch-mean scalar, *including* the cross-entropy part where the method has one.
All of them start from ``log_softmax`` (never ``log(softmax)``), are vectorised over the
batch and keep finite values and gradients for logits as extreme as +-50 and beyond.

Each also takes ``sample_weight``: None, or a 1-D floating-point tensor of shape (n,) of
finite non-negative per-row weights on the device of ``logits``. A row of weight ``w_i``
counts as if it appeared ``w_i`` times in the batch:

* per-row (decomposable) terms — cross-entropy, label smoothing, focal, adaptive focal,
  the margin penalty and the cross-entropy part of MMCE, MDCA and S-AvUC — become
  ``mean_i(w_i * l_i)``, the weighted sum divided by the batch size n (not by the sum of
  the weights): with weights of mean 1 over the training rows, an unbiased estimate of
  the objective on the training set with each row repeated ``w_i`` times;
* batch statistics — MMCE's kernel sums and counts m, n; MDCA's mean confidence and
  class frequency; S-AvUC's soft counts n_AC, n_AU, n_IC, n_IU — are those of the batch
  in which row i is repeated ``w_i`` times (weighted sums and weighted counts), so with
  integer weights they equal the statistics of that duplicated batch exactly and a zero
  weight removes the row. Scaling every weight by c leaves MDCA's and S-AvUC's
  statistics unchanged (they are self-normalised averages, up to S-AvUC's 1e-5 floor),
  while MMCE, whose reference normalisation shrinks with the batch, is divided by c,
  exactly as repeating the batch c times would (as long as its weighted counts m, n stay
  at or above 1, where they are floored).

A batch whose weights are all 0 gives 0 (an empty batch has no calibration term), with
finite gradients. ``sample_weight=None`` runs the unweighted computation unchanged, and
weights that are all 1 give the same value and gradient bit for bit.

This module imports torch only: no scikit-learn, no skorch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._base import check_real, check_sample_weight, weighted_nll_loss

__all__ = [
    "label_smoothing_loss",
    "focal_loss",
    "adaptive_focal_loss",
    "mmce_loss",
    "mdca_loss",
    "soft_avuc_loss",
    "margin_loss",
]

# FLSD-53 (Mukhoti et al. 2020): gamma = 5 where p_t < 0.2, gamma = 3 otherwise.
_FLSD_THRESHOLD = 0.2
_FLSD_GAMMA_BELOW = 5.0
_FLSD_GAMMA_ABOVE = 3.0
# Laplacian kernel bandwidth of MMCE (Kumar et al. 2018): k(r, r') = exp(-|r - r'| / 0.4).
_MMCE_BANDWIDTH = 0.4
# Floor under the squared MMCE before the square root (the reference adds 1e-10): keeps the
# gradient of the square root finite where the estimate is ~0 or rounds below 0.
_MMCE_FLOOR = 1e-10
# Floor under the AvUC denominator n_AC + n_IU, as in the reference implementation.
_AVUC_EPS = 1e-5


# -- input and parameter checks ---------------------------------------------------------------
def _check_inputs(func: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Check shapes and dtypes; return ``target`` as int64."""
    if not isinstance(logits, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise TypeError(
            f"{func}: logits and target must be torch tensors; got "
            f"{type(logits).__name__} and {type(target).__name__}."
        )
    if logits.ndim != 2 or logits.shape[0] < 1 or logits.shape[1] < 2:
        raise ValueError(
            f"{func}: logits must have shape (n_samples, n_classes) with n_samples >= 1 and "
            f"n_classes >= 2; got shape {tuple(logits.shape)}."
        )
    if not logits.is_floating_point():
        raise TypeError(f"{func}: logits must be a floating-point tensor; got {logits.dtype}.")
    if target.shape != (logits.shape[0],):
        raise ValueError(
            f"{func}: target must have shape (n_samples,) = ({logits.shape[0]},); got shape "
            f"{tuple(target.shape)}."
        )
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise TypeError(
            f"{func}: target must be an integer tensor of class indices; got {target.dtype}."
        )
    return target.long()


def _row_mean(per_row: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """``mean_i(w_i * per_row_i)`` (the plain mean without weights)."""
    if weight is None:
        return per_row.mean()
    return (weight * per_row).mean()


def _nll(log_p: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """The (weighted) cross-entropy part: ``mean_i(w_i * -log p_{i,y_i})``."""
    if weight is None:
        return F.nll_loss(log_p, target)
    return weighted_nll_loss(log_p, target, weight)


def _check_weight(
    func: str, sample_weight: torch.Tensor | None, logits: torch.Tensor
) -> torch.Tensor | None:
    """None, or ``sample_weight`` checked and detached in the dtype of ``logits``."""
    if sample_weight is None:
        return None
    return check_sample_weight(func, sample_weight, logits)


def _focal_terms(log_pt: torch.Tensor, gamma: float | torch.Tensor) -> torch.Tensor:
    """Per-row ``-(1 - p_t)**gamma * log p_t`` from ``log p_t``.

    ``1 - p_t`` is computed as ``-expm1(log p_t)`` (exact for p_t near 1) and floored at the
    smallest normal number so that ``gamma < 1`` never meets ``0 ** (gamma - 1)`` in backward.
    """
    one_minus_pt = (-torch.expm1(log_pt)).clamp_min(torch.finfo(log_pt.dtype).tiny)
    return -(one_minus_pt**gamma) * log_pt


# -- losses -----------------------------------------------------------------------------------
def label_smoothing_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    epsilon: float = 0.1,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Cross-entropy against label-smoothed targets.

    The target distribution is :math:`q = (1 - \varepsilon)\,\mathrm{onehot}(y) + \varepsilon/K`:
    the smoothing mass is spread over *all* K classes, the true one included, so the true class
    gets :math:`1 - \varepsilon + \varepsilon/K`. This is the convention of
    ``torch.nn.functional.cross_entropy(label_smoothing=epsilon)`` and of Szegedy et al. (2016);
    some code (e.g. the MDCA repository) spreads :math:`\varepsilon` over the K - 1 *other*
    classes instead, which is a different loss.

    Parameters
    ----------
    logits : torch.Tensor of shape (n_samples, n_classes)
        Unnormalised scores.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    epsilon : float, default=0.1
        Smoothing mass, in [0, 1]. ``epsilon=0`` is plain cross-entropy.
    sample_weight : torch.Tensor of shape (n_samples,), default=None
        Finite non-negative per-row weights; see the module docstring for how they enter.

    Returns
    -------
    torch.Tensor
        The batch-mean loss, a 0-dim tensor:
        :math:`\mathrm{mean}_i[(1 - \varepsilon)(-\log p_{i,y_i})
        + \varepsilon \cdot \mathrm{mean}_k(-\log p_{ik})]`.

    References
    ----------
    .. [1] C. Szegedy, V. Vanhoucke, S. Ioffe, J. Shlens and Z. Wojna, "Rethinking the
       Inception architecture for computer vision", CVPR 2016.
    .. [2] R. Müller, S. Kornblith and G. Hinton, "When does label smoothing help?",
       NeurIPS 2019.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import label_smoothing_loss
    >>> logits = torch.tensor([[2.0, 0.0, -1.0]])
    >>> loss = label_smoothing_loss(logits, torch.tensor([0]), epsilon=0.1)
    >>> reference = torch.nn.functional.cross_entropy(logits, torch.tensor([0]), label_smoothing=0.1)
    >>> bool(torch.isclose(loss, reference))
    True
    """
    func = "label_smoothing_loss"
    target = _check_inputs(func, logits, target)
    check_real(func, "epsilon", epsilon, low=0, high=1)
    weight = _check_weight(func, sample_weight, logits)
    log_p = F.log_softmax(logits, dim=1)
    nll = -log_p.gather(1, target[:, None]).squeeze(1)
    uniform = -log_p.mean(dim=1)
    return _row_mean((1.0 - epsilon) * nll + epsilon * uniform, weight)


def focal_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    gamma: float = 3.0,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Focal loss :math:`-(1 - p_t)^\gamma \log p_t`, averaged over the batch.

    :math:`p_t` is the predicted probability of the true class. ``gamma=0`` is cross-entropy;
    larger ``gamma`` down-weights well-classified rows, which Mukhoti et al. (2020) show
    acts as an entropy regulariser and improves calibration (they use ``gamma=3``).

    Parameters
    ----------
    logits : torch.Tensor of shape (n_samples, n_classes)
        Unnormalised scores.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    gamma : float, default=3.0
        Focusing parameter, >= 0.
    sample_weight : torch.Tensor of shape (n_samples,), default=None
        Finite non-negative per-row weights; see the module docstring for how they enter.

    Returns
    -------
    torch.Tensor
        The batch-mean loss, a 0-dim tensor. (The focal_calibration reference code sums over
        the batch; this function averages, like every loss here.)

    References
    ----------
    .. [1] T.-Y. Lin, P. Goyal, R. Girshick, K. He and P. Dollár, "Focal loss for dense object
       detection", ICCV 2017.
    .. [2] J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. Torr and P. Dokania,
       "Calibrating deep neural networks using focal loss", NeurIPS 2020.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import focal_loss
    >>> logits = torch.zeros(1, 2)  # p_t = 0.5
    >>> round(float(focal_loss(logits, torch.tensor([0]), gamma=3.0)), 4)  # 0.5**3 * log 2
    0.0866
    """
    target = _check_inputs("focal_loss", logits, target)
    check_real("focal_loss", "gamma", gamma, low=0)
    weight = _check_weight("focal_loss", sample_weight, logits)
    log_pt = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return _row_mean(_focal_terms(log_pt, gamma), weight)


def adaptive_focal_loss(
    logits: torch.Tensor, target: torch.Tensor, sample_weight: torch.Tensor | None = None
) -> torch.Tensor:
    r"""Focal loss with the sample-dependent FLSD-53 schedule for :math:`\gamma`.

    Each row uses :math:`\gamma = 5` where :math:`p_t < 0.2` and :math:`\gamma = 3`
    otherwise (Mukhoti et al. 2020, "FLSD-53"). The choice of :math:`\gamma` is made from
    the *detached* :math:`p_t`, as in the reference code (which reads ``pt[i].item()``): it is
    a piecewise-constant selection, so no gradient flows through it, and each row's gradient
    is that of the fixed-:math:`\gamma` focal loss it was assigned to.

    Parameters
    ----------
    logits : torch.Tensor of shape (n_samples, n_classes)
        Unnormalised scores.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    sample_weight : torch.Tensor of shape (n_samples,), default=None
        Finite non-negative per-row weights; see the module docstring for how they enter.

    Returns
    -------
    torch.Tensor
        The batch-mean loss, a 0-dim tensor (the reference code sums over the batch).

    References
    ----------
    .. [1] J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. Torr and P. Dokania,
       "Calibrating deep neural networks using focal loss", NeurIPS 2020.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import adaptive_focal_loss
    >>> logits = torch.zeros(1, 10)  # p_t = 0.1 < 0.2, so gamma = 5
    >>> round(float(adaptive_focal_loss(logits, torch.tensor([0]))), 4)  # 0.9**5 * log 10
    1.3597
    """
    target = _check_inputs("adaptive_focal_loss", logits, target)
    weight = _check_weight("adaptive_focal_loss", sample_weight, logits)
    log_pt = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    below = log_pt.detach() < math.log(_FLSD_THRESHOLD)
    gamma = torch.where(
        below,
        torch.full_like(log_pt, _FLSD_GAMMA_BELOW),
        torch.full_like(log_pt, _FLSD_GAMMA_ABOVE),
    ).detach()
    return _row_mean(_focal_terms(log_pt, gamma), weight)


def mmce_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    weight: float = 2.0,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Cross-entropy plus ``weight`` times the weighted MMCE of the batch, as in the reference code.

    With top-label confidences :math:`r_i = \max_k p_{ik}`, correct rows :math:`D_c`
    (:math:`m = |D_c|`), incorrect rows :math:`D_w` (:math:`n = |D_w|`) and the Laplacian
    kernel :math:`k(r, r') = \exp(-|r - r'| / 0.4)`, the weighted MMCE of Kumar, Sarawagi
    & Jain (2018), as their published code computes it, is

    .. math::

        \mathrm{MMCE}_w^2 = \sum_{i,j \in D_c} \frac{(1-r_i)(1-r_j)\,k(r_i,r_j)}{m^4}
        + \sum_{i,j \in D_w} \frac{r_i r_j\,k(r_i,r_j)}{n^4}
        - 2 \sum_{i \in D_c,\, j \in D_w} \frac{(1-r_i)\,r_j\,k(r_i,r_j)}{m^2 n^2},

    computed here as the quadratic form :math:`a^\top K a` with
    :math:`a_i = 1[i \in D_c](1-r_i)/m^2 - 1[i \in D_w]\,r_i/n^2`. The term is 0 when the
    batch is all correct or all incorrect (the measure is undefined there), and the square
    root is taken of :math:`\max(\mathrm{MMCE}_w^2, 10^{-10})` so its gradient stays finite.

    Parameters
    ----------
    logits : torch.Tensor of shape (n_samples, n_classes)
        Unnormalised scores.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    weight : float, default=2.0
        Weight of the MMCE term, >= 0 (2.0 is the weight used for MMCE in the
        focal_calibration and MDCA experiments, with this normalisation).
    sample_weight : torch.Tensor of shape (n_samples,), default=None
        Finite non-negative per-row weights. The cross-entropy part is
        ``mean_i(w_i * ce_i)``; m, n and the kernel sums are those of the batch with row
        ``i`` repeated ``w_i`` times: :math:`m = \sum_{i \in D_c} w_i`,
        :math:`n = \sum_{i \in D_w} w_i` and :math:`a_i` times :math:`w_i`. Like the
        unweighted counts, m and n are floored at 1 in the denominators: no change for
        integer weights, and the term stays bounded when the correct (or wrong) rows of a
        batch weigh less than 1 in total.

    Returns
    -------
    torch.Tensor
        ``cross_entropy + weight * MMCE_w``, a 0-dim tensor. Memory is O(n_samples**2).

    Notes
    -----
    The normalisation is the reference implementations' (Kumar's TensorFlow code and its
    PyTorch port in focal_calibration): each kernel block is averaged over its pairs *and
    then* divided again by :math:`m^2`, :math:`n^2` and :math:`mn`. The published weights
    (``weight=2``) are tuned to it, and the comparisons in the literature use it. The
    formula written with a single :math:`1/m^2` is about ``m`` times larger; with
    ``weight=2`` it cost about 8 accuracy points on this project's tabular suite.

    References
    ----------
    .. [1] A. Kumar, S. Sarawagi and U. Jain, "Trainable calibration measures for neural
       networks from kernel mean embeddings", ICML 2018.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import mmce_loss
    >>> logits = torch.tensor([[2.0, 0.0], [1.0, 0.0]])
    >>> target = torch.tensor([0, 1])  # first row correct, second wrong
    >>> ce = torch.nn.functional.cross_entropy(logits, target)
    >>> round(float(mmce_loss(logits, target, weight=1.0) - ce), 4)
    0.6548
    """
    target = _check_inputs("mmce_loss", logits, target)
    check_real("mmce_loss", "weight", weight, low=0)
    row_weight = _check_weight("mmce_loss", sample_weight, logits)
    log_p = F.log_softmax(logits, dim=1)
    ce = _nll(log_p, target, row_weight)
    max_log_p, predicted = log_p.max(dim=1)
    r = max_log_p.exp()
    correct = (predicted == target).to(r.dtype)
    wrong = 1.0 - correct
    if row_weight is not None:  # memberships of the batch with row i repeated w_i times
        correct, wrong = row_weight * correct, row_weight * wrong
    m_count, n_count = correct.sum(), wrong.sum()
    m = m_count.clamp_min(1.0)
    n = n_count.clamp_min(1.0)
    a = correct * (1.0 - r) / m**2 - wrong * r / n**2
    kernel = torch.exp(-(r[:, None] - r[None, :]).abs() / _MMCE_BANDWIDTH)
    mmce_squared = a @ kernel @ a
    defined = (m_count > 0) & (n_count > 0)
    mmce = torch.where(
        defined, mmce_squared.clamp_min(_MMCE_FLOOR).sqrt(), torch.zeros_like(mmce_squared)
    )
    return ce + weight * mmce


def mdca_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    beta: float = 1.0,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Cross-entropy plus ``beta`` times the multi-class difference of confidence and accuracy.

    .. math::

        \mathrm{MDCA} = \frac{1}{K} \sum_{k=1}^{K}
        \Bigl| \frac{1}{n}\sum_i p_{ik} - \frac{1}{n}\sum_i 1[y_i = k] \Bigr|

    over the batch: the mean predicted probability of each class against its frequency
    among the labels. Classes absent from the batch still count (frequency 0).

    Parameters
    ----------
    logits : torch.Tensor of shape (n_samples, n_classes)
        Unnormalised scores.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    beta : float, default=1.0
        Weight of the MDCA term, >= 0 (1.0 as in the paper's NLL+MDCA runs).
    sample_weight : torch.Tensor of shape (n_samples,), default=None
        Finite non-negative per-row weights. The cross-entropy part is
        ``mean_i(w_i * ce_i)``; the mean confidence and the class frequency are
        ``sum_i w_i p_ik / sum_i w_i`` and ``sum_i w_i 1[y_i = k] / sum_i w_i``.

    Returns
    -------
    torch.Tensor
        ``cross_entropy + beta * MDCA``, a 0-dim tensor.

    References
    ----------
    .. [1] R. Hebbalaguppe, J. Prakash, N. Madan and C. Arora, "A stitch in time saves nine:
       a train-time regularizing loss for improved neural network calibration", CVPR 2022.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import mdca_loss
    >>> logits = torch.zeros(2, 2)  # mean probabilities (0.5, 0.5), label frequencies (1, 0)
    >>> loss = mdca_loss(logits, torch.tensor([0, 0]), beta=1.0)
    >>> round(float(loss), 4)  # log 2 + (0.5 + 0.5) / 2
    1.1931
    >>> weights = torch.tensor([1.0, 0.0])  # the second row leaves the statistics
    >>> loss = mdca_loss(logits, torch.tensor([0, 1]), beta=1.0, sample_weight=weights)
    >>> round(float(loss), 4)  # log(2) / 2 + (0.5 + 0.5) / 2
    0.8466
    """
    target = _check_inputs("mdca_loss", logits, target)
    check_real("mdca_loss", "beta", beta, low=0)
    weight = _check_weight("mdca_loss", sample_weight, logits)
    log_p = F.log_softmax(logits, dim=1)
    ce = _nll(log_p, target, weight)
    if weight is None:
        mean_confidence = log_p.exp().mean(dim=0)
        frequency = F.one_hot(target, logits.shape[1]).to(log_p.dtype).mean(dim=0)
    else:
        total = weight.sum()
        total = torch.where(total > 0, total, torch.ones_like(total))  # all 0: both means 0
        column = weight[:, None]
        mean_confidence = (column * log_p.exp()).sum(dim=0) / total
        frequency = (column * F.one_hot(target, logits.shape[1]).to(log_p.dtype)).sum(dim=0)
        frequency = frequency / total
    mdca = (mean_confidence - frequency).abs().mean()
    return ce + beta * mdca


def soft_avuc_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    beta: float = 1.0,
    temperature: float = 1.0,
    kappa: float = 0.5,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Cross-entropy plus ``beta`` times the soft accuracy-versus-uncertainty loss (S-AvUC).

    With predictive entropy :math:`u_i` (nats), its normalised value
    :math:`\tilde u_i = u_i / \log K \in [0, 1]`, the soft uncertainty

    .. math::

        s_i = \sigma\Bigl(\frac{1}{T}\log\frac{\tilde u_i (1-\kappa)}{(1-\tilde u_i)\kappa}\Bigr)
        \quad (s_i = 1/2 \text{ at } \tilde u_i = \kappa),

    the soft certainty :math:`1 - s_i` and :math:`t_i = \tanh u_i`, Karandikar et al. (2021,
    eq. 15) replace AvUC's hard certain/uncertain split by these soft memberships:

    .. math::

        n_{AC} = \sum_{i\,\mathrm{correct}} (1-s_i)(1-t_i),\quad
        n_{AU} = \sum_{i\,\mathrm{correct}} s_i t_i,\quad
        n_{IC} = \sum_{i\,\mathrm{wrong}} (1-s_i)(1-t_i),\quad
        n_{IU} = \sum_{i\,\mathrm{wrong}} s_i t_i,

    .. math::

        \mathrm{S\text{-}AvUC} = \log\Bigl(1 + \frac{n_{AU} + n_{IC}}
        {\max(n_{AC} + n_{IU}, 10^{-5})}\Bigr).

    "Correct" means the arg-max class is the label. The floor on the denominator is the
    reference code's guard for batches with no accurate-certain and no inaccurate-uncertain
    mass (e.g. all rows wrong and certain); :math:`\tilde u_i` is clipped into
    :math:`[\delta, 1 - \delta]` (:math:`\delta` = max(1e-6, machine epsilon)) so that the
    log-odds stay finite for one-hot and uniform predictions.

    Parameters
    ----------
    logits : torch.Tensor of shape (n_samples, n_classes)
        Unnormalised scores.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    beta : float, default=1.0
        Weight of the S-AvUC term, >= 0.
    temperature : float, default=1.0
        Softness :math:`T > 0` of the certain/uncertain split; as :math:`T \to 0` it becomes
        AvUC's hard threshold at :math:`\tilde u = \kappa`.
    kappa : float, default=0.5
        Normalised-entropy threshold :math:`\kappa \in (0, 1)` at which a row is half certain,
        half uncertain.
    sample_weight : torch.Tensor of shape (n_samples,), default=None
        Finite non-negative per-row weights. The cross-entropy part is
        ``mean_i(w_i * ce_i)``; each soft count sums ``w_i`` times the row's membership.

    Returns
    -------
    torch.Tensor
        ``cross_entropy + beta * S-AvUC``, a 0-dim tensor.

    Notes
    -----
    The defaults ``temperature=1.0, kappa=0.5`` are the defaults of ``soft_uncertainty`` in
    the reference implementation (uncertainty-baselines, ``experimental/caltrain``); with
    them :math:`s_i = \tilde u_i` exactly, i.e. the soft uncertainty *is* the normalised
    entropy. The paper tunes :math:`\beta`, :math:`T` and :math:`\kappa` per data set; tune
    them too. The entropy is computed exactly from ``log_softmax`` rather than from the
    reference's :math:`(1 - 10^{-5})p + 10^{-5}/K` smoothed probabilities (a difference of
    order :math:`10^{-5}`).

    References
    ----------
    .. [1] A. Karandikar, N. Cain, D. Tran, B. Lakshminarayanan, J. Shlens, M. C. Mozer and
       B. Roelofs, "Soft calibration objectives for neural networks", NeurIPS 2021.
    .. [2] R. Krishnan and O. Tickoo, "Improving model calibration with accuracy versus
       uncertainty optimization", NeurIPS 2020.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import soft_avuc_loss
    >>> logits = torch.tensor([[3.0, 0.0, 0.0], [0.0, 0.5, 0.0]])
    >>> target = torch.tensor([0, 2])  # confident and right; unsure and wrong
    >>> ce = torch.nn.functional.cross_entropy(logits, target)
    >>> round(float(soft_avuc_loss(logits, target) - ce), 4)
    0.0976
    """
    func = "soft_avuc_loss"
    target = _check_inputs(func, logits, target)
    check_real(func, "beta", beta, low=0)
    check_real(func, "temperature", temperature, low=0, low_inclusive=False)
    check_real(func, "kappa", kappa, low=0, high=1, low_inclusive=False, high_inclusive=False)
    weight = _check_weight(func, sample_weight, logits)
    log_p = F.log_softmax(logits, dim=1)
    ce = _nll(log_p, target, weight)
    entropy = -(log_p.exp() * log_p).sum(dim=1)
    delta = max(1e-6, torch.finfo(log_p.dtype).eps)
    u = (entropy / math.log(logits.shape[1])).clamp(delta, 1.0 - delta)
    log_odds = torch.log(u) - torch.log1p(-u) - math.log(kappa / (1.0 - kappa))
    uncertain = torch.sigmoid(log_odds / temperature)
    certain = 1.0 - uncertain
    tanh_u = torch.tanh(entropy)
    correct = (log_p.argmax(dim=1) == target).to(log_p.dtype)
    wrong = 1.0 - correct
    if weight is not None:  # memberships of the batch with row i repeated w_i times
        correct, wrong = weight * correct, weight * wrong
    certain_low_entropy = certain * (1.0 - tanh_u)
    uncertain_high_entropy = uncertain * tanh_u
    n_ac = (correct * certain_low_entropy).sum()
    n_au = (correct * uncertain_high_entropy).sum()
    n_ic = (wrong * certain_low_entropy).sum()
    n_iu = (wrong * uncertain_high_entropy).sum()
    savuc = torch.log1p((n_au + n_ic) / (n_ac + n_iu).clamp_min(_AVUC_EPS))
    return ce + beta * savuc


def margin_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    margin: float = 10.0,
    weight: float = 0.1,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Cross-entropy plus ``weight`` times the margin-based logit penalty of MbLS.

    .. math::

        \mathrm{MbLS} = \frac{1}{nK} \sum_{i=1}^{n} \sum_{k=1}^{K}
        \max\bigl(0,\ \max_j z_{ij} - z_{ik} - m\bigr)

    penalises logit gaps to the row's largest logit beyond the margin :math:`m` (the
    arg-max column itself contributes 0). The gradient also flows through
    :math:`\max_j z_{ij}`, as in the reference code.

    Parameters
    ----------
    logits : torch.Tensor of shape (n_samples, n_classes)
        Unnormalised scores.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    margin : float, default=10.0
        Tolerated logit gap :math:`m`, >= 0 (the paper's default).
    weight : float, default=0.1
        Weight of the penalty, >= 0 (the paper's :math:`\lambda`, default 0.1).
    sample_weight : torch.Tensor of shape (n_samples,), default=None
        Finite non-negative per-row weights: both the cross-entropy and the penalty
        become ``mean_i(w_i * l_i)``, ``l_i`` the row's term.

    Returns
    -------
    torch.Tensor
        ``cross_entropy + weight * MbLS``, a 0-dim tensor.

    References
    ----------
    .. [1] B. Liu, I. Ben Ayed, A. Galdran and J. Dolz, "The devil is in the margin:
       margin-based label smoothing for network calibration", CVPR 2022.

    Examples
    --------
    >>> import torch
    >>> from nescal_sklearn.losses import margin_loss
    >>> logits = torch.tensor([[12.0, 0.0, 1.0]])  # gaps 0, 12, 11: excess 0, 2, 1
    >>> ce = torch.nn.functional.cross_entropy(logits, torch.tensor([0]))
    >>> round(float(margin_loss(logits, torch.tensor([0]), margin=10.0, weight=0.1) - ce), 4)
    0.1
    """
    target = _check_inputs("margin_loss", logits, target)
    check_real("margin_loss", "margin", margin, low=0)
    check_real("margin_loss", "weight", weight, low=0)
    row_weight = _check_weight("margin_loss", sample_weight, logits)
    if row_weight is None:
        ce = F.cross_entropy(logits, target)
    else:
        ce = weighted_nll_loss(F.log_softmax(logits, dim=1), target, row_weight)
    gaps = logits.max(dim=1, keepdim=True).values - logits
    excess = F.relu(gaps - margin)
    penalty = excess.mean() if row_weight is None else (row_weight[:, None] * excess).mean()
    return ce + weight * penalty
