"""Tests of the calibration-baseline losses: functional forms and loss objects."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone

from nescal_sklearn.losses._base import LOSSES, TrainingLoss, get_loss
from nescal_sklearn.losses._calibration_losses import (
    AdaptiveFocalLoss,
    FocalLoss,
    LabelSmoothingLoss,
    MarginLoss,
    MDCALoss,
    MMCELoss,
    SoftAvUCLoss,
)
from nescal_sklearn.losses._functional import (
    adaptive_focal_loss,
    focal_loss,
    label_smoothing_loss,
    margin_loss,
    mdca_loss,
    mmce_loss,
    soft_avuc_loss,
)

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

FUNCTIONS = {
    "label_smoothing": label_smoothing_loss,
    "focal": focal_loss,
    "flsd53": adaptive_focal_loss,
    "mmce": mmce_loss,
    "mdca": mdca_loss,
    "savuc": soft_avuc_loss,
    "mbls": margin_loss,
}
CLASSES = {
    "label_smoothing": LabelSmoothingLoss,
    "focal": FocalLoss,
    "flsd53": AdaptiveFocalLoss,
    "mmce": MMCELoss,
    "mdca": MDCALoss,
    "savuc": SoftAvUCLoss,
    "mbls": MarginLoss,
}
NAMES = sorted(FUNCTIONS)


def _full(message: str) -> str:
    """A regex matching exactly ``message``."""
    return "^" + re.escape(message) + "$"


def _t(values, dtype=torch.float64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def _y(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


# -- independent numpy re-computations ------------------------------------------------------
def _np_softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _np_ce(z: np.ndarray, y: np.ndarray) -> float:
    p = _np_softmax(z)
    return float(np.mean([-math.log(p[i, y[i]]) for i in range(len(y))]))


def _np_focal(z: np.ndarray, y: np.ndarray, gammas) -> float:
    p = _np_softmax(z)
    terms = []
    for i in range(len(y)):
        pt = p[i, y[i]]
        terms.append(-((1.0 - pt) ** gammas[i]) * math.log(pt))
    return float(np.mean(terms))


def _np_mmce_w(z: np.ndarray, y: np.ndarray) -> float:
    """The reference code's weighted MMCE, as explicit O(n^2) double loops: each block is
    a mean over its pairs, divided again by m^2, n^2 or m n (m, n: correct, wrong counts)."""
    p = _np_softmax(z)
    r = p.max(axis=1)
    correct = [i for i in range(len(y)) if p[i].argmax() == y[i]]
    wrong = [i for i in range(len(y)) if p[i].argmax() != y[i]]
    if not correct or not wrong:
        return 0.0
    m, n = len(correct), len(wrong)

    def k(a, b):
        return math.exp(-abs(a - b) / 0.4)

    cc = np.mean([(1 - r[i]) * (1 - r[j]) * k(r[i], r[j]) for i in correct for j in correct])
    ww = np.mean([r[i] * r[j] * k(r[i], r[j]) for i in wrong for j in wrong])
    cw = np.mean([(1 - r[i]) * r[j] * k(r[i], r[j]) for i in correct for j in wrong])
    return math.sqrt(cc / m**2 + ww / n**2 - 2 * cw / (m * n))


def _np_savuc(z: np.ndarray, y: np.ndarray, temperature: float, kappa: float) -> float:
    p = _np_softmax(z)
    n_ac = n_au = n_ic = n_iu = 0.0
    for i in range(len(y)):
        u = -sum(q * math.log(q) for q in p[i] if q > 0)
        un = min(max(u / math.log(p.shape[1]), 1e-6), 1 - 1e-6)
        s = 1.0 / (1.0 + ((1 - un) * kappa / (un * (1 - kappa))) ** (1.0 / temperature))
        if p[i].argmax() == y[i]:
            n_ac += (1 - s) * (1 - math.tanh(u))
            n_au += s * math.tanh(u)
        else:
            n_ic += (1 - s) * (1 - math.tanh(u))
            n_iu += s * math.tanh(u)
    return math.log(1 + (n_au + n_ic) / max(n_ac + n_iu, 1e-5))


def _random_batch(seed: int, n: int = 12, k: int = 4, scale: float = 2.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=scale, size=(n, k))
    y = rng.integers(0, k, size=n)
    return z, y


# -- label smoothing ----------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.0, 0.05, 0.1, 0.3, 1.0])
def test_label_smoothing_matches_torch_convention(epsilon):
    z, y = _random_batch(0)
    got = label_smoothing_loss(_t(z), _y(y), epsilon=epsilon)
    expected = F.cross_entropy(_t(z), _y(y), label_smoothing=epsilon)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_label_smoothing_uniform_logits_give_log_k():
    # Every class has probability 1/5, so both parts of the loss are log 5.
    got = label_smoothing_loss(torch.zeros(3, 5), _y([0, 2, 4]), epsilon=0.3)
    assert float(got) == pytest.approx(math.log(5), rel=1e-6)


def test_label_smoothing_optimum_matches_closed_form():
    # DESIGN.md: the optimum puts 1 - eps + eps/K on the true class; the logit gap is
    # log((1 - eps + eps/K) * K / eps) and the hard-label NLL floor is -log(1 - eps + eps/K).
    eps, k = 0.1, 10
    gap = math.log((1 - eps + eps / k) * k / eps)
    logits = torch.zeros(1, k, dtype=torch.float64)
    logits[0, 0] = gap
    logits.requires_grad_(True)
    label_smoothing_loss(logits, _y([0]), epsilon=eps).backward()
    assert torch.allclose(logits.grad, torch.zeros_like(logits), atol=1e-12)
    nll = F.cross_entropy(logits.detach(), _y([0]))
    assert float(nll) == pytest.approx(-math.log(1 - eps + eps / k), rel=1e-10)


# -- focal ----------------------------------------------------------------------------------------
def test_focal_gamma_zero_is_cross_entropy():
    z, y = _random_batch(1)
    torch.testing.assert_close(
        focal_loss(_t(z), _y(y), gamma=0.0), F.cross_entropy(_t(z), _y(y)), rtol=1e-12, atol=0
    )


@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0])
def test_focal_matches_numpy(gamma):
    z, y = _random_batch(2)
    expected = _np_focal(z, y, [gamma] * len(y))
    assert float(focal_loss(_t(z), _y(y), gamma=gamma)) == pytest.approx(expected, rel=1e-10)


def test_focal_hand_value():
    # p_t = 1/2 for both rows: (1/2)**2 * log 2 each.
    got = focal_loss(torch.zeros(2, 2), _y([0, 1]), gamma=2.0)
    assert float(got) == pytest.approx(0.25 * math.log(2), rel=1e-6)


def test_focal_fractional_gamma_has_finite_gradient_at_certainty():
    # p_t == 1 exactly in float32: (1 - p_t)**0.5 has an infinite derivative at 0.
    logits = _t([[200.0, -200.0]], dtype=torch.float32).requires_grad_(True)
    loss = focal_loss(logits, _y([0]), gamma=0.5)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()


# -- FLSD-53 --------------------------------------------------------------------------------------
def _flsd_batch():
    # p_t about 0.09 (gamma 5), 0.33 (gamma 3), 0.91 (gamma 3), 0.14 (gamma 5)
    z = np.array(
        [[0.0, 2.0, 1.0], [0.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.3]], dtype=np.float64
    )
    y = np.array([0, 1, 0, 2])
    return z, y


def test_adaptive_focal_matches_numpy_schedule():
    z, y = _flsd_batch()
    pt = _np_softmax(z)[np.arange(len(y)), y]
    gammas = [5.0 if q < 0.2 else 3.0 for q in pt]
    assert gammas == [5.0, 3.0, 3.0, 5.0]
    expected = _np_focal(z, y, gammas)
    assert float(adaptive_focal_loss(_t(z), _y(y))) == pytest.approx(expected, rel=1e-10)


def test_adaptive_focal_hand_value():
    # Ten equal logits: p_t = 0.1 < 0.2, so gamma = 5: 0.9**5 * log 10.
    got = adaptive_focal_loss(torch.zeros(1, 10), _y([3]))
    assert float(got) == pytest.approx(0.9**5 * math.log(10), rel=1e-6)


def test_adaptive_focal_gradient_is_that_of_the_assigned_fixed_gamma():
    z, y = _flsd_batch()
    a = _t(z).requires_grad_(True)
    adaptive_focal_loss(a, _y(y)).backward()
    b = _t(z).requires_grad_(True)
    gammas = _t([5.0, 3.0, 3.0, 5.0])
    log_pt = F.log_softmax(b, dim=1).gather(1, _y(y)[:, None]).squeeze(1)
    (-((1 - log_pt.exp()) ** gammas) * log_pt).mean().backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-10, atol=1e-12)


# -- MMCE -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_mmce_matches_paper_double_loop(seed):
    z, y = _random_batch(seed, n=15, k=3, scale=1.5)
    penalty = _np_mmce_w(z, y)
    assert penalty > 0
    got = mmce_loss(_t(z), _y(y), weight=1.7)
    assert float(got) == pytest.approx(_np_ce(z, y) + 1.7 * penalty, rel=1e-10)


def test_mmce_hand_value():
    # r = (sigmoid(2), sigmoid(1)); row 0 correct, row 1 wrong, so m = n = 1 and
    # MMCE^2 = (1 - r0)^2 + r1^2 - 2 (1 - r0) r1 exp(-|r0 - r1| / 0.4).
    r0, r1 = 1 / (1 + math.exp(-2)), 1 / (1 + math.exp(-1))
    mmce2 = (1 - r0) ** 2 + r1**2 - 2 * (1 - r0) * r1 * math.exp(-abs(r0 - r1) / 0.4)
    ce = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(1))) / 2
    got = mmce_loss(_t([[2.0, 0.0], [1.0, 0.0]]), _y([0, 1]), weight=1.0)
    assert float(got) == pytest.approx(ce + math.sqrt(mmce2), rel=1e-12)


@pytest.mark.parametrize(
    "target",
    [[0, 0, 0, 0], [1, 1, 1, 1]],
    ids=["all-correct", "all-incorrect"],
)
def test_mmce_undefined_batches_fall_back_to_cross_entropy(target):
    z = _t([[2.0, 0.0], [1.0, -1.0], [0.5, 0.0], [3.0, 1.0]]).requires_grad_(True)
    got = mmce_loss(z, _y(target), weight=2.0)
    torch.testing.assert_close(got, F.cross_entropy(z, _y(target)))
    got.backward()
    assert torch.isfinite(z.grad).all()


@pytest.mark.parametrize(
    "target", [[0, 1, 1, 1], [0, 0, 0, 1]], ids=["single-correct", "single-incorrect"]
)
def test_mmce_single_correct_or_incorrect_row(target):
    z = np.array([[2.0, 0.0], [1.0, -1.0], [0.5, 0.0], [3.0, 1.0]])
    logits = _t(z).requires_grad_(True)
    got = mmce_loss(logits, _y(target), weight=2.0)
    expected = _np_ce(z, np.array(target)) + 2.0 * _np_mmce_w(z, np.array(target))
    assert float(got.detach()) == pytest.approx(expected, rel=1e-10)
    got.backward()
    assert torch.isfinite(logits.grad).all()


def test_mmce_term_shrinks_with_the_batch_as_in_the_reference():
    # Doubling a batch (same rows twice) leaves every block mean unchanged and doubles m
    # and n, so the reference normalisation halves MMCE_w.
    z, y = _random_batch(7, n=12, k=3, scale=1.5)
    single = _np_mmce_w(z, y)
    double = _np_mmce_w(np.vstack([z, z]), np.concatenate([y, y]))
    assert double == pytest.approx(single / 2, rel=1e-9)
    got = mmce_loss(_t(np.vstack([z, z])), _y(np.concatenate([y, y])), weight=1.0)
    assert float(got) == pytest.approx(_np_ce(z, y) + double, rel=1e-9)


def test_mmce_zero_estimate_has_finite_gradient():
    # One correct and one wrong row with r = 0.5 each: MMCE^2 = 0.25 + 0.25 - 2 * 0.25 = 0.
    logits = torch.zeros(2, 2, dtype=torch.float64, requires_grad=True)
    got = mmce_loss(logits, _y([0, 1]), weight=1.0)
    # The square root of the 1e-10 floor: 1e-5.
    assert float(got.detach()) == pytest.approx(math.log(2) + 1e-5, rel=1e-9)
    got.backward()
    assert torch.isfinite(logits.grad).all()


# -- MDCA -----------------------------------------------------------------------------------------
def test_mdca_hand_value():
    # Mean probabilities (1/2, 1/2), label frequencies (1, 0): (1/2 + 1/2) / 2 = 1/2.
    got = mdca_loss(torch.zeros(2, 2), _y([0, 0]), beta=3.0)
    assert float(got) == pytest.approx(math.log(2) + 3.0 * 0.5, rel=1e-6)


def test_mdca_hand_value_with_missing_class():
    # Rows p = (0.5, 0.5, 0) (approximately: logit -inf replaced by -1e3) and (1/3, 1/3, 1/3);
    # labels (0, 1), class 2 absent. Mean p = (5/12, 5/12, 1/6), frequencies (1/2, 1/2, 0):
    # MDCA = (1/12 + 1/12 + 1/6) / 3 = 1/9.
    z = np.array([[0.0, 0.0, -1e3], [0.0, 0.0, 0.0]])
    y = np.array([0, 1])
    got = mdca_loss(_t(z), _y(y), beta=1.0)
    assert float(got) == pytest.approx(_np_ce(z, y) + 1 / 9, rel=1e-10)


def test_mdca_matches_numpy():
    z, y = _random_batch(6, n=10, k=5)
    p = _np_softmax(z)
    mdca = sum(abs(p[:, k].mean() - np.mean(y == k)) for k in range(5)) / 5
    got = mdca_loss(_t(z), _y(y), beta=0.7)
    assert float(got) == pytest.approx(_np_ce(z, y) + 0.7 * mdca, rel=1e-10)


# -- S-AvUC ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("temperature", "kappa"), [(1.0, 0.5), (0.5, 0.3), (2.0, 0.8)])
def test_soft_avuc_matches_numpy(temperature, kappa):
    z, y = _random_batch(7, n=14, k=4, scale=2.5)
    expected = _np_ce(z, y) + 0.8 * _np_savuc(z, y, temperature, kappa)
    got = soft_avuc_loss(_t(z), _y(y), beta=0.8, temperature=temperature, kappa=kappa)
    assert float(got) == pytest.approx(expected, rel=1e-9)


def test_soft_avuc_default_soft_uncertainty_is_normalised_entropy():
    # T = 1, kappa = 1/2: s = sigmoid(log(u / (1 - u))) = u. One correct row with
    # normalised entropy u: S-AvUC = log(1 + u t / ((1 - u)(1 - t))) with t = tanh(H).
    z = np.array([[1.0, 0.0, -1.0]])
    p = _np_softmax(z)[0]
    h = -float(np.sum(p * np.log(p)))
    u, t = h / math.log(3), math.tanh(h)
    expected = _np_ce(z, np.array([0])) + math.log(1 + u * t / ((1 - u) * (1 - t)))
    assert float(soft_avuc_loss(_t(z), _y([0]))) == pytest.approx(expected, rel=1e-10)


def test_soft_avuc_small_temperature_recovers_hard_threshold():
    z, y = _random_batch(8, n=10, k=3)
    p = _np_softmax(z)
    h = -(p * np.log(p)).sum(axis=1)
    uncertain = h / math.log(3) > 0.5
    correct = p.argmax(axis=1) == y
    t = np.tanh(h)
    n_ac = np.sum((1 - t)[correct & ~uncertain])
    n_au = np.sum(t[correct & uncertain])
    n_ic = np.sum((1 - t)[~correct & ~uncertain])
    n_iu = np.sum(t[~correct & uncertain])
    hard = math.log(1 + (n_au + n_ic) / (n_ac + n_iu))
    got = soft_avuc_loss(_t(z), _y(y), beta=1.0, temperature=1e-4, kappa=0.5)
    assert float(got) == pytest.approx(_np_ce(z, y) + hard, rel=1e-6)


def test_soft_avuc_all_certain_and_correct_is_cross_entropy():
    z = _t([[50.0, -50.0, -50.0], [-50.0, 50.0, -50.0]]).requires_grad_(True)
    got = soft_avuc_loss(z, _y([0, 1]), beta=1.0)
    ce = float(F.cross_entropy(z.detach(), _y([0, 1])))
    assert float(got.detach()) == pytest.approx(ce, abs=1e-6)
    got.backward()
    assert torch.isfinite(z.grad).all()


def test_soft_avuc_all_certain_and_wrong_hits_the_denominator_guard():
    # n_AC = 0 and n_IU ~ 0, so the ratio uses the 1e-5 floor: log(1 + n_IC / 1e-5), n_IC ~ 2.
    z = _t([[50.0, -50.0, -50.0], [-50.0, 50.0, -50.0]]).requires_grad_(True)
    got = soft_avuc_loss(z, _y([1, 0]), beta=1.0)
    ce = float(F.cross_entropy(z.detach(), _y([1, 0])))
    assert float(got.detach()) == pytest.approx(ce + math.log(1 + 2 / 1e-5), rel=1e-6)
    got.backward()
    assert torch.isfinite(z.grad).all()


@pytest.mark.parametrize("target", [[0, 0, 0], [1, 2, 1]], ids=["correct", "wrong"])
def test_soft_avuc_all_uncertain_is_finite(target):
    # Equal logits: entropy log K exactly, normalised entropy clipped below 1.
    z = torch.zeros(3, 3, dtype=torch.float32, requires_grad=True)
    got = soft_avuc_loss(z, _y(target))
    got.backward()
    assert torch.isfinite(got) and torch.isfinite(z.grad).all()
    expected = _np_ce(np.zeros((3, 3)), np.array(target)) + _np_savuc(
        np.zeros((3, 3)), np.array(target), 1.0, 0.5
    )
    assert float(got.detach()) == pytest.approx(expected, rel=1e-5)


# -- MbLS -----------------------------------------------------------------------------------------
def test_margin_hand_value_some_classes_beyond_margin():
    # Row 0 gaps (0, 12, 11): excess over 10 is (0, 2, 1); row 1 gaps (0, 5, 3): none.
    # Penalty = (0 + 2 + 1 + 0 + 0 + 0) / 6 = 0.5.
    z = np.array([[12.0, 0.0, 1.0], [5.0, 0.0, 2.0]])
    y = np.array([0, 2])
    got = margin_loss(_t(z), _y(y), margin=10.0, weight=0.1)
    assert float(got) == pytest.approx(_np_ce(z, y) + 0.1 * 0.5, rel=1e-12)


def test_margin_inactive_below_margin_is_cross_entropy():
    z, y = _random_batch(9, scale=1.0)
    torch.testing.assert_close(margin_loss(_t(z), _y(y)), F.cross_entropy(_t(z), _y(y)))


def test_margin_gradient_pushes_gaps_back_inside():
    logits = _t([[12.0, 0.0, 1.0]]).requires_grad_(True)
    margin_loss(logits, _y([0]), margin=10.0, weight=1.0).backward()
    ce_logits = _t([[12.0, 0.0, 1.0]]).requires_grad_(True)
    F.cross_entropy(ce_logits, _y([0])).backward()
    penalty_grad = logits.grad - ce_logits.grad
    # d/dz of (relu(z0 - z1 - 10) + relu(z0 - z2 - 10)) / 3 = (2, -1, -1) / 3.
    torch.testing.assert_close(penalty_grad, _t([[2.0, -1.0, -1.0]]) / 3)


# -- properties shared by every loss --------------------------------------------------------------
EXTREME = [
    [50.0, -50.0, -50.0],
    [-50.0, 50.0, -50.0],
    [50.0, 50.0, -50.0],
    [-50.0, -50.0, 50.0],
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scale", [1.0, 10.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_logits_give_finite_values_and_gradients(name, scale, dtype):
    logits = (_t(EXTREME, dtype=dtype) * scale).requires_grad_(True)
    target = _y([0, 2, 1, 2])  # right, confidently wrong, tie, right
    loss = FUNCTIONS[name](logits, target)
    loss.backward()
    assert torch.isfinite(loss) and float(loss.detach()) >= 0
    assert torch.isfinite(logits.grad).all()


BATCHES = {
    "all-correct": ([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 1.0]], [0, 1, 2]),
    "all-wrong": ([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 1.0]], [1, 2, 0]),
    "missing-classes": ([[1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 2.0, 0.0]], [0, 0]),
    "single-row": ([[0.2, -0.3, 0.1]], [2]),
    "uniform": ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [0, 1]),
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_degenerate_batches_are_finite(name, batch):
    values, target = BATCHES[batch]
    logits = torch.tensor(values, requires_grad=True)
    loss = FUNCTIONS[name](logits, _y(target))
    loss.backward()
    assert loss.ndim == 0 and torch.isfinite(loss) and float(loss.detach()) >= 0
    assert torch.isfinite(logits.grad).all()


GRADCHECK_KWARGS = {"mbls": {"margin": 1.0, "weight": 0.5}}


@pytest.mark.parametrize("name", NAMES)
def test_autograd_gradients_match_finite_differences(name):
    z, y = _random_batch(10, n=6, k=3, scale=1.5)
    logits = _t(z).requires_grad_(True)
    kwargs = GRADCHECK_KWARGS.get(name, {})
    assert torch.autograd.gradcheck(lambda x: FUNCTIONS[name](x, _y(y), **kwargs), (logits,))


@pytest.mark.parametrize("name", NAMES)
def test_float32_agrees_with_float64(name):
    z, y = _random_batch(11)
    single = FUNCTIONS[name](_t(z, dtype=torch.float32), _y(y))
    double = FUNCTIONS[name](_t(z), _y(y))
    assert single.dtype == torch.float32
    assert float(single) == pytest.approx(float(double), rel=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    n=st.integers(min_value=1, max_value=8),
    k=st.integers(min_value=2, max_value=5),
)
def test_random_logits_give_finite_nonnegative_losses(data, n, k):
    z = data.draw(arrays(np.float32, (n, k), elements=st.floats(-60, 60, width=32)))
    y = data.draw(arrays(np.int64, (n,), elements=st.integers(0, k - 1)))
    for name in NAMES:
        logits = torch.from_numpy(z.copy()).requires_grad_(True)
        loss = FUNCTIONS[name](logits, torch.from_numpy(y))
        loss.backward()
        assert torch.isfinite(loss) and float(loss.detach()) >= 0, name
        assert torch.isfinite(logits.grad).all(), name


def _separable_data():
    gen = torch.Generator().manual_seed(0)
    centres = torch.tensor([[3.0, 0.0], [-3.0, 3.0], [-3.0, -3.0]])
    y = torch.arange(3).repeat(20)
    x = centres[y] + 0.5 * torch.randn(60, 2, generator=gen)
    return x, y


@pytest.mark.parametrize("name", NAMES)
def test_loss_decreases_when_training_a_linear_model(name):
    torch.manual_seed(0)
    x, y = _separable_data()
    model = torch.nn.Linear(2, 3)
    loss_fn = CLASSES[name]()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.no_grad():
        initial = float(loss_fn(model(x), y))
    for _ in range(30):
        optimiser.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        final = float(loss_fn(model(x), y))
    assert final < 0.8 * initial


# -- loss objects ---------------------------------------------------------------------------------
DEFAULTS = {
    "label_smoothing": {"epsilon": 0.1},
    "focal": {"gamma": 3.0},
    "flsd53": {},
    "mmce": {"weight": 2.0},
    "mdca": {"beta": 1.0},
    "savuc": {"beta": 1.0, "temperature": 1.0, "kappa": 0.5},
    "mbls": {"margin": 10.0, "weight": 0.1},
}
OTHER = {
    "label_smoothing": {"epsilon": 0.2},
    "focal": {"gamma": 1.5},
    "flsd53": {},
    "mmce": {"weight": 4.0},
    "mdca": {"beta": 5.0},
    "savuc": {"beta": 2.0, "temperature": 0.1, "kappa": 0.3},
    "mbls": {"margin": 6.0, "weight": 0.2},
}


@pytest.mark.parametrize("name", NAMES)
def test_registered_under_its_name(name):
    assert LOSSES[name] is CLASSES[name]
    assert CLASSES[name].name == name
    assert isinstance(get_loss(name), CLASSES[name])
    assert issubclass(CLASSES[name], TrainingLoss)
    assert CLASSES[name].uses_neighbours is False


@pytest.mark.parametrize("name", NAMES)
def test_get_params_set_params_and_clone(name):
    obj = CLASSES[name]()
    assert obj.get_params() == DEFAULTS[name]
    assert obj.set_params(**OTHER[name]) is obj
    assert obj.get_params() == OTHER[name]
    copy = clone(obj)
    assert copy is not obj and type(copy) is type(obj)
    assert copy.get_params() == OTHER[name]
    obj.validate()
    copy.validate()


@pytest.mark.parametrize("name", NAMES)
def test_repr_shows_non_default_parameters(name):
    cls = CLASSES[name]
    assert repr(cls()) == f"{cls.__name__}()"
    shown = ", ".join(f"{key}={value!r}" for key, value in sorted(OTHER[name].items()))
    assert repr(cls(**OTHER[name])) == f"{cls.__name__}({shown})"


@pytest.mark.parametrize("name", NAMES)
def test_object_equals_functional_form(name):
    z, y = _random_batch(12)
    obj = CLASSES[name](**OTHER[name])
    expected = FUNCTIONS[name](_t(z), _y(y), **OTHER[name])
    torch.testing.assert_close(obj(_t(z), _y(y)), expected)


INVALID = [
    (
        LabelSmoothingLoss(epsilon=-0.1),
        ValueError,
        "LabelSmoothingLoss: epsilon must be >= 0 and <= 1; got -0.1.",
    ),
    (
        LabelSmoothingLoss(epsilon=1.5),
        ValueError,
        "LabelSmoothingLoss: epsilon must be >= 0 and <= 1; got 1.5.",
    ),
    (
        LabelSmoothingLoss(epsilon="0.1"),
        TypeError,
        "LabelSmoothingLoss: epsilon must be a real number; got str '0.1'.",
    ),
    (FocalLoss(gamma=-1), ValueError, "FocalLoss: gamma must be >= 0; got -1."),
    (FocalLoss(gamma=float("nan")), ValueError, "FocalLoss: gamma must be >= 0; got nan."),
    (FocalLoss(gamma=float("inf")), ValueError, "FocalLoss: gamma must be finite; got inf."),
    (FocalLoss(gamma=True), TypeError, "FocalLoss: gamma must be a real number; got bool True."),
    (MMCELoss(weight=-2.0), ValueError, "MMCELoss: weight must be >= 0; got -2.0."),
    (
        MMCELoss(weight=None),
        TypeError,
        "MMCELoss: weight must be a real number; got NoneType None.",
    ),
    (MDCALoss(beta=-0.5), ValueError, "MDCALoss: beta must be >= 0; got -0.5."),
    (MDCALoss(beta=float("inf")), ValueError, "MDCALoss: beta must be finite; got inf."),
    (SoftAvUCLoss(beta=-1.0), ValueError, "SoftAvUCLoss: beta must be >= 0; got -1.0."),
    (SoftAvUCLoss(temperature=0.0), ValueError, "SoftAvUCLoss: temperature must be > 0; got 0.0."),
    (
        SoftAvUCLoss(temperature=float("inf")),
        ValueError,
        "SoftAvUCLoss: temperature must be finite; got inf.",
    ),
    (SoftAvUCLoss(kappa=0.0), ValueError, "SoftAvUCLoss: kappa must be > 0 and < 1; got 0.0."),
    (SoftAvUCLoss(kappa=1), ValueError, "SoftAvUCLoss: kappa must be > 0 and < 1; got 1."),
    (MarginLoss(margin=-1.0), ValueError, "MarginLoss: margin must be >= 0; got -1.0."),
    (MarginLoss(margin=float("inf")), ValueError, "MarginLoss: margin must be finite; got inf."),
    (MarginLoss(weight=-0.1), ValueError, "MarginLoss: weight must be >= 0; got -0.1."),
    (MarginLoss(weight="x"), TypeError, "MarginLoss: weight must be a real number; got str 'x'."),
]


@pytest.mark.parametrize(("obj", "error", "message"), INVALID, ids=repr)
def test_validate_errors_name_parameter_and_value(obj, error, message):
    with pytest.raises(error, match=_full(message)):
        obj.validate()


def test_validate_accepts_boundaries_and_numpy_scalars():
    LabelSmoothingLoss(epsilon=0).validate()
    LabelSmoothingLoss(epsilon=1.0).validate()
    FocalLoss(gamma=np.float64(2.0)).validate()
    MarginLoss(margin=0, weight=0).validate()
    AdaptiveFocalLoss().validate()
    SoftAvUCLoss(beta=0, temperature=1e-3, kappa=0.999).validate()


FUNCTIONAL_INVALID = [
    (
        label_smoothing_loss,
        {"epsilon": 2.0},
        ValueError,
        "label_smoothing_loss: epsilon must be >= 0 and <= 1; got 2.0.",
    ),
    (focal_loss, {"gamma": -0.5}, ValueError, "focal_loss: gamma must be >= 0; got -0.5."),
    (focal_loss, {"gamma": float("inf")}, ValueError, "focal_loss: gamma must be finite; got inf."),
    (
        mmce_loss,
        {"weight": "2"},
        TypeError,
        "mmce_loss: weight must be a real number; got str '2'.",
    ),
    (mdca_loss, {"beta": -1}, ValueError, "mdca_loss: beta must be >= 0; got -1."),
    (soft_avuc_loss, {"beta": -1}, ValueError, "soft_avuc_loss: beta must be >= 0; got -1."),
    (
        soft_avuc_loss,
        {"temperature": -1.0},
        ValueError,
        "soft_avuc_loss: temperature must be > 0; got -1.0.",
    ),
    (
        soft_avuc_loss,
        {"kappa": 1.0},
        ValueError,
        "soft_avuc_loss: kappa must be > 0 and < 1; got 1.0.",
    ),
    (margin_loss, {"margin": -1.0}, ValueError, "margin_loss: margin must be >= 0; got -1.0."),
    (
        margin_loss,
        {"weight": float("nan")},
        ValueError,
        "margin_loss: weight must be >= 0; got nan.",
    ),
]


@pytest.mark.parametrize(("func", "kwargs", "error", "message"), FUNCTIONAL_INVALID)
def test_functional_parameter_errors(func, kwargs, error, message):
    with pytest.raises(error, match=_full(message)):
        func(torch.zeros(2, 3), _y([0, 1]), **kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_functional_input_errors(name):
    func = FUNCTIONS[name]
    with pytest.raises(
        ValueError,
        match=_full(
            f"{func.__name__}: logits must have shape (n_samples, n_classes) with "
            "n_samples >= 1 and n_classes >= 2; got shape (3,)."
        ),
    ):
        func(torch.zeros(3), _y([0, 1, 2]))
    with pytest.raises(ValueError, match=r"got shape \(0, 3\)\.$"):
        func(torch.zeros(0, 3), _y([]))
    with pytest.raises(ValueError, match=r"got shape \(2, 1\)\.$"):
        func(torch.zeros(2, 1), _y([0, 0]))
    with pytest.raises(
        ValueError,
        match=_full(
            f"{func.__name__}: target must have shape (n_samples,) = (2,); got shape (3,)."
        ),
    ):
        func(torch.zeros(2, 3), _y([0, 1, 2]))
    with pytest.raises(
        TypeError,
        match=_full(
            f"{func.__name__}: target must be an integer tensor of class indices; "
            "got torch.float32."
        ),
    ):
        func(torch.zeros(2, 3), torch.tensor([0.0, 1.0]))
    with pytest.raises(
        TypeError,
        match=_full(f"{func.__name__}: logits must be a floating-point tensor; got torch.int64."),
    ):
        func(torch.zeros(2, 3, dtype=torch.int64), _y([0, 1]))
    with pytest.raises(
        TypeError,
        match=_full(
            f"{func.__name__}: logits and target must be torch tensors; got ndarray and Tensor."
        ),
    ):
        func(np.zeros((2, 3)), _y([0, 1]))


@pytest.mark.parametrize("name", NAMES)
def test_int32_targets_are_accepted(name):
    z, y = _random_batch(13)
    torch.testing.assert_close(
        FUNCTIONS[name](_t(z), torch.from_numpy(y.astype(np.int32))),
        FUNCTIONS[name](_t(z), _y(y)),
    )
