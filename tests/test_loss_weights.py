"""Per-row sample weights in the training losses and in the NeSCal penalty.

The convention (``TrainingLoss`` docstring): a row of weight ``w_i`` counts as if it
appeared ``w_i`` times in the batch. Per-row terms become ``mean_i(w_i * l_i)`` (divided by
the batch size n); batch statistics (MMCE, MDCA, S-AvUC) are those of the duplicated batch.
The references are the *unweighted* losses on the batch with rows repeated
(``repeat_interleave``, so that autograd sums the copies' gradients), numpy re-computations
of the weighted statistics written from the papers' formulas, and, for the penalty, the
divergences written out from the cached neighbour distributions.
"""

from __future__ import annotations

import copy
import itertools
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from nescal_sklearn.losses import (
    LOSSES,
    CrossEntropyLoss,
    FocalLoss,
    NeSCalLoss,
    TrainingLoss,
    adaptive_focal_loss,
    focal_loss,
    get_loss,
    label_smoothing_loss,
    margin_loss,
    mdca_loss,
    mmce_loss,
    soft_avuc_loss,
)
from nescal_sklearn.penalties import NeighbourhoodSmoothing, NeSCalRuntime

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

#: Losses whose every term is per row, and those with a batch-statistic calibration term.
DECOMPOSABLE = {"ce", "label_smoothing", "focal", "flsd53", "mbls", "nescal", "nescal_experimental"}
STATISTICS = {"mmce", "mdca", "savuc"}

#: Non-default parameters where the default would leave a term inactive on these batches.
PARAMS = {"mbls": {"margin": 1.0, "weight": 0.5}, "focal": {"gamma": 2.0}}

#: Functional forms with the parameters used here; the last entry names the coefficient
#: of the calibration term for the batch-statistic losses.
FUNCTIONALS = {
    "label_smoothing": (label_smoothing_loss, {"epsilon": 0.2}),
    "focal": (focal_loss, {"gamma": 2.0}),
    "flsd53": (adaptive_focal_loss, {}),
    "mbls": (margin_loss, {"margin": 1.0, "weight": 0.5}),
    "mmce": (mmce_loss, {"weight": 1.5}),
    "mdca": (mdca_loss, {"beta": 1.5}),
    "savuc": (soft_avuc_loss, {"beta": 1.5, "temperature": 0.7, "kappa": 0.4}),
}
COEFFICIENT = {"mmce": "weight", "mdca": "beta", "savuc": "beta"}


def _object(name: str) -> TrainingLoss:
    return get_loss(name).set_params(**PARAMS.get(name, {}))


def _functional(name: str):
    func, params = FUNCTIONALS[name]

    def call(logits, target, sample_weight=None):
        return func(logits, target, **params, sample_weight=sample_weight)

    return call


#: (id, callable, kind): every registered loss object, NeSCal over a non-CE base, and
#: every functional form.
CASES = (
    [(f"object-{name}", _object(name), name) for name in sorted(LOSSES)]
    + [("object-nescal-focal", NeSCalLoss(base_loss=FocalLoss(gamma=2.0)), "nescal")]
    + [(f"functional-{name}", _functional(name), name) for name in sorted(FUNCTIONALS)]
)
CASE_IDS = [case[0] for case in CASES]


def _full(message: str) -> str:
    return "^" + re.escape(message) + "$"


def _batch(seed: int, n: int = 24, n_classes: int = 4, scale: float = 2.0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    logits = (scale * torch.randn(n, n_classes, generator=gen, dtype=torch.float64)).to(dtype)
    target = torch.randint(0, n_classes, (n,), generator=gen)
    return logits, target


def _value_and_grad(loss, logits, target, sample_weight=None):
    z = logits.clone().requires_grad_(True)
    value = loss(z, target) if sample_weight is None else loss(z, target, sample_weight)
    value.backward()
    return value.detach(), z.grad


def test_every_registered_loss_is_classified():
    # A new loss must be added to one of the two groups (and so to these tests).
    assert set(LOSSES) == DECOMPOSABLE | STATISTICS
    assert set(FUNCTIONALS) == (DECOMPOSABLE | STATISTICS) - {"ce", "nescal", "nescal_experimental"}


# -- exactness of unit weights ---------------------------------------------------------------
@pytest.mark.parametrize(("case_id", "loss", "kind"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unit_weights_give_the_unweighted_value_and_gradient_exactly(case_id, loss, kind, dtype):
    logits, target = _batch(0, n=37, n_classes=5, scale=3.0, dtype=dtype)
    value, grad = _value_and_grad(loss, logits, target)
    weighted, weighted_grad = _value_and_grad(loss, logits, target, torch.ones(37, dtype=dtype))
    # exact: weights of 1.0 multiply exactly, so the unweighted arithmetic op for op
    assert torch.equal(weighted, value)
    assert torch.equal(weighted_grad, grad)


# -- integer weights against the duplicated batch --------------------------------------------
def _duplicated_reference(loss, kind, logits, target, counts):
    """The loss the weighted call must return, from the batch with row i repeated counts[i]
    times: ``sum(w)/n`` times the per-row part of the duplicated batch, plus (for MMCE, MDCA,
    S-AvUC) its calibration term unchanged. Differentiable with respect to ``logits``."""
    dup_logits = logits.repeat_interleave(counts, dim=0)
    dup_target = target.repeat_interleave(counts)
    scale = counts.sum().to(logits.dtype) / len(counts)
    if dup_logits.shape[0] == 0:  # an empty batch: nothing per row, no calibration term
        return logits.sum() * 0.0
    full = loss(dup_logits, dup_target)
    if kind in DECOMPOSABLE:
        return scale * full
    ce = F.cross_entropy(dup_logits, dup_target)
    return scale * ce + (full - ce)


WEIGHT_PATTERNS = {
    "integers": lambda gen, n: torch.randint(0, 4, (n,), generator=gen),
    "zeros_and_ones": lambda gen, n: torch.randint(0, 2, (n,), generator=gen),
}


@pytest.mark.parametrize(("case_id", "loss", "kind"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("pattern", sorted(WEIGHT_PATTERNS))
def test_integer_weights_equal_the_duplicated_batch(case_id, loss, kind, pattern):
    logits, target = _batch(1)
    counts = WEIGHT_PATTERNS[pattern](torch.Generator().manual_seed(2), len(target))
    assert (counts == 0).any() and (counts > 0).any()
    value, grad = _value_and_grad(loss, logits, target, counts.to(torch.float64))
    z = logits.clone().requires_grad_(True)
    expected = _duplicated_reference(loss, kind, z, target, counts)
    expected.backward()
    torch.testing.assert_close(value, expected.detach(), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(grad, z.grad, rtol=1e-9, atol=1e-12)
    if kind in DECOMPOSABLE:  # the brief's form: loss(x, y, w) * n / sum(w) == loss(dup)
        dup = loss(logits.repeat_interleave(counts, 0), target.repeat_interleave(counts))
        torch.testing.assert_close(
            value * len(counts) / counts.sum().double(), dup, rtol=1e-9, atol=0
        )


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_calibration_term_and_ce_part_of_the_statistic_losses(name):
    """Loss minus its CE part is the duplicated batch's term, and the CE part is the
    weighted mean of the rows' cross-entropies (computed here by hand)."""
    logits, target = _batch(3)
    counts = torch.randint(0, 4, (len(target),), generator=torch.Generator().manual_seed(4))
    weights = counts.to(torch.float64)
    loss = _object(name)
    log_p = F.log_softmax(logits, dim=1)
    ce_part = -(weights * log_p[torch.arange(len(target)), target]).sum() / len(target)
    term = loss(logits, target, weights) - ce_part
    dup_logits, dup_target = logits.repeat_interleave(counts, 0), target.repeat_interleave(counts)
    dup_term = loss(dup_logits, dup_target) - F.cross_entropy(dup_logits, dup_target)
    assert abs(float(dup_term)) > 1e-3  # the term is active on this batch
    torch.testing.assert_close(term, dup_term, rtol=1e-9, atol=1e-12)
    # with the coefficient at 0 only the CE part is left
    func, params = FUNCTIONALS[name]
    params = {**params, COEFFICIENT[name]: 0.0}
    torch.testing.assert_close(
        func(logits, target, **params, sample_weight=weights), ce_part, rtol=1e-12, atol=0
    )


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_a_zero_weight_removes_the_row_from_the_batch_statistic(name):
    logits, target = _batch(5, n=10)
    weights = torch.ones(10, dtype=torch.float64)
    weights[[1, 6]] = 0.0
    keep = weights > 0
    func, params = FUNCTIONALS[name]
    off = {**params, COEFFICIENT[name]: 0.0}

    def term(x, y, w=None):
        return func(x, y, **params, sample_weight=w) - func(x, y, **off, sample_weight=w)

    torch.testing.assert_close(
        term(logits, target, weights), term(logits[keep], target[keep]), rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize(("case_id", "loss", "kind"), CASES, ids=CASE_IDS)
def test_all_zero_weights_give_zero_with_a_zero_gradient(case_id, loss, kind):
    logits, target = _batch(6, n=8)
    value, grad = _value_and_grad(loss, logits, target, torch.zeros(8, dtype=torch.float64))
    assert float(value) == 0.0
    assert torch.isfinite(grad).all() and not grad.any()


@pytest.mark.parametrize(("case_id", "loss", "kind"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_logits_with_zero_and_large_weights_stay_finite(case_id, loss, kind, dtype):
    logits, target = _batch(7, n=12, scale=50.0, dtype=dtype)
    weights = torch.tensor([0.0, 1.0, 7.5, 0.0, 1e-3, 2.0, 0.0, 3.0, 1.0, 0.5, 0.0, 4.0])
    value, grad = _value_and_grad(loss, logits, target, weights.to(dtype))
    assert torch.isfinite(value) and torch.isfinite(grad).all()
    assert not grad[weights == 0].any()  # a zero weight removes the row, gradient included


# -- independent numpy references for fractional weights -------------------------------------
def _np_softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _np_weighted_ce(z, y, w) -> float:
    p = _np_softmax(z)
    return float(np.sum(w * -np.log(p[np.arange(len(y)), y])) / len(y))


def _np_mmce_squared(z, y, w):
    """Kumar et al.'s weighted MMCE^2 (the reference normalisation, each block's pair sum
    over m^4, n^4, m^2 n^2) with row i counted w_i times and the weighted counts m, n floored
    at 1 (None where undefined), and the counts before the floor."""
    p = _np_softmax(z)
    r = p.max(axis=1)
    correct = p.argmax(axis=1) == y
    counts = m, n = w[correct].sum(), w[~correct].sum()
    if m <= 0 or n <= 0:
        return None, counts
    m, n = max(m, 1.0), max(n, 1.0)
    pair = np.outer(w, w) * np.exp(-np.abs(r[:, None] - r[None, :]) / 0.4)
    c, i = np.flatnonzero(correct), np.flatnonzero(~correct)
    cc = np.sum(pair[np.ix_(c, c)] * np.outer(1 - r[c], 1 - r[c])) / m**4
    ww = np.sum(pair[np.ix_(i, i)] * np.outer(r[i], r[i])) / n**4
    cw = np.sum(pair[np.ix_(c, i)] * np.outer(1 - r[c], r[i])) / (m**2 * n**2)
    return cc + ww - 2 * cw, counts


def _np_mdca(z, y, w) -> float:
    p = _np_softmax(z)
    onehot = np.eye(z.shape[1])[y]
    return float(np.mean(np.abs(w @ p / w.sum() - w @ onehot / w.sum())))


def _np_savuc_counts(z, y, w, temperature, kappa):
    p = _np_softmax(z)
    u = -np.sum(p * np.log(p), axis=1)
    un = np.clip(u / math.log(z.shape[1]), 1e-6, 1 - 1e-6)
    s = 1.0 / (1.0 + ((1 - un) * kappa / (un * (1 - kappa))) ** (1.0 / temperature))
    certain, uncertain = (1 - s) * (1 - np.tanh(u)), s * np.tanh(u)
    correct = p.argmax(axis=1) == y
    return (
        np.sum(w * correct * certain),  # n_AC
        np.sum(w * correct * uncertain),  # n_AU
        np.sum(w * ~correct * certain),  # n_IC
        np.sum(w * ~correct * uncertain),  # n_IU
    )


def _term(name, z, y, w):
    """The calibration term of the functional (loss at the coefficient minus loss at 0)."""
    func, params = FUNCTIONALS[name]
    coefficient = params[COEFFICIENT[name]]
    off = {**params, COEFFICIENT[name]: 0.0}
    zt, yt, wt = torch.tensor(z), torch.tensor(y), torch.tensor(w)
    full = func(zt, yt, **params, sample_weight=wt)
    return float((full - func(zt, yt, **off, sample_weight=wt)) / coefficient)


@st.composite
def _weighted_batches(draw):
    n = draw(st.integers(2, 10))
    n_classes = draw(st.integers(2, 4))
    z = draw(arrays(np.float64, (n, n_classes), elements=st.floats(-4, 4)))
    y = draw(arrays(np.int64, n, elements=st.integers(0, n_classes - 1)))
    w = draw(arrays(np.float64, n, elements=st.floats(0, 4)))
    c = draw(st.floats(0.25, 4.0))
    return z, y, w, c


@settings(max_examples=60, deadline=None)
@given(batch=_weighted_batches())
def test_property_scaling_the_weights(batch):
    """Scaling every weight by c scales each per-row part by c; MDCA's and S-AvUC's
    statistics are unchanged and MMCE's is divided by c (as repeating the batch c times
    does under its reference normalisation). Each statistic also matches numpy."""
    z, y, w, c = batch
    assume(w.sum() > 0.5)
    zt, yt = torch.tensor(z), torch.tensor(y)
    for name in sorted(DECOMPOSABLE - {"nescal"}):
        loss = _object(name)
        torch.testing.assert_close(
            loss(zt, yt, torch.tensor(c * w)),
            c * loss(zt, yt, torch.tensor(w)),
            rtol=1e-9,
            atol=1e-300,
        )
    for name in sorted(STATISTICS):
        func, params = FUNCTIONALS[name]
        off = {**params, COEFFICIENT[name]: 0.0}
        ce = func(zt, yt, **off, sample_weight=torch.tensor(w))
        assert float(ce) == pytest.approx(_np_weighted_ce(z, y, w), rel=1e-9)
        scaled_ce = func(zt, yt, **off, sample_weight=torch.tensor(c * w))
        assert float(scaled_ce) == pytest.approx(c * float(ce), rel=1e-9)
    # MDCA: self-normalised means
    assert _term("mdca", z, y, w) == pytest.approx(_np_mdca(z, y, w), rel=1e-9, abs=1e-12)
    assert _term("mdca", z, y, c * w) == pytest.approx(_term("mdca", z, y, w), rel=1e-9, abs=1e-12)
    # S-AvUC: a ratio of weighted soft counts, unchanged by c away from the 1e-5 floor
    params = FUNCTIONALS["savuc"][1]
    for weights in (w, c * w):
        n_ac, n_au, n_ic, n_iu = _np_savuc_counts(
            z, y, weights, params["temperature"], params["kappa"]
        )
        expected = math.log1p((n_au + n_ic) / max(n_ac + n_iu, 1e-5))
        assert _term("savuc", z, y, weights) == pytest.approx(expected, rel=1e-8, abs=1e-12)
    n_ac, _, _, n_iu = _np_savuc_counts(z, y, w, params["temperature"], params["kappa"])
    if min(1.0, c) * (n_ac + n_iu) > 1e-5:
        assert _term("savuc", z, y, c * w) == pytest.approx(
            _term("savuc", z, y, w), rel=1e-8, abs=1e-12
        )
    # MMCE: 0 unless both weighted counts are positive, else the root of the quadratic form
    for weights in (w, c * w):
        squared, _ = _np_mmce_squared(z, y, weights)
        expected = 0.0 if squared is None else math.sqrt(max(squared, 1e-10))
        assert _term("mmce", z, y, weights) == pytest.approx(expected, rel=1e-7, abs=1e-12)
    # ... and where the counts stay >= 1 (no floor), scaling the weights by c divides it by c
    squared, counts = _np_mmce_squared(z, y, w)
    if squared is not None and min(counts) * min(1.0, c) >= 1.0 and squared / c**2 > 1e-9:
        assert _term("mmce", z, y, c * w) == pytest.approx(_term("mmce", z, y, w) / c, rel=1e-7)


# -- objects, NeSCal and validation ----------------------------------------------------------
def test_nescal_passes_the_weights_to_its_base_loss():
    logits, target = _batch(8)
    weights = torch.rand(
        len(target), dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    spec = NeSCalLoss(base_loss=FocalLoss(gamma=2.0))
    expected = focal_loss(logits, target, gamma=2.0, sample_weight=weights)
    # exact: NeSCalLoss calls its base loss with the weights, the same call
    assert torch.equal(spec(logits, target, sample_weight=weights), expected)
    assert torch.equal(spec.forward(logits, target, weights), expected)


class _UnweightedLoss(TrainingLoss):
    """A user-defined loss written before sample weights existed."""

    def forward(self, logits, target):
        return F.cross_entropy(logits, target)


def test_a_loss_without_sample_weight_still_works_unweighted_and_refuses_weights():
    logits, target = _batch(9, n=4)
    # exact: the loss is this same F.cross_entropy call
    assert torch.equal(_UnweightedLoss()(logits, target), F.cross_entropy(logits, target))
    message = (
        "_UnweightedLoss.forward takes no sample_weight, so this loss cannot weigh rows; add "
        "a sample_weight=None parameter to its forward."
    )
    with pytest.raises(TypeError, match=_full(message)):
        _UnweightedLoss()(logits, target, torch.ones(4, dtype=torch.float64))
    with pytest.raises(TypeError, match=_full(message)):
        NeSCalLoss(base_loss=_UnweightedLoss())(logits, target, torch.ones(4, dtype=torch.float64))


BAD_WEIGHTS = [
    (
        torch.ones(3),
        ValueError,
        "sample_weight must have shape (n_samples,) = (2,); got shape (3,).",
    ),
    (
        torch.ones(2, 1),
        ValueError,
        "sample_weight must have shape (n_samples,) = (2,); got shape (2, 1).",
    ),
    (
        torch.tensor([1.0, -1.0]),
        ValueError,
        "sample_weight must be finite and >= 0; got -1.0 at row 1.",
    ),
    (
        torch.tensor([float("nan"), 1.0]),
        ValueError,
        "sample_weight must be finite and >= 0; got nan at row 0.",
    ),
    (
        torch.tensor([1.0, float("inf")]),
        ValueError,
        "sample_weight must be finite and >= 0; got inf at row 1.",
    ),
    (
        torch.tensor([1, 2]),
        TypeError,
        "sample_weight must be a floating-point tensor; got torch.int64.",
    ),
    (
        [1.0, 1.0],
        TypeError,
        "sample_weight must be None or a 1-D floating-point tensor of per-row weights; got list.",
    ),
    (
        torch.ones(2, device="meta"),
        ValueError,
        "sample_weight must be on the device of logits (cpu); got meta.",
    ),
]

OWNERS = [(name, FUNCTIONALS[name][0].__name__, _functional(name)) for name in sorted(FUNCTIONALS)]
OWNERS += [("ce", "CrossEntropyLoss", CrossEntropyLoss())]


@pytest.mark.parametrize(("name", "owner", "loss"), OWNERS, ids=[o[0] for o in OWNERS])
@pytest.mark.parametrize(("weights", "error", "message"), BAD_WEIGHTS, ids=repr)
def test_invalid_weights_are_refused_with_the_owner_and_value(
    name, owner, loss, weights, error, message
):
    logits, target = torch.zeros(2, 3), torch.tensor([0, 1])
    with pytest.raises(error, match=_full(f"{owner}: {message}")):
        loss(logits, target, weights)


def test_cross_entropy_weights_need_batched_logits():
    message = (
        "CrossEntropyLoss: sample_weight needs logits of shape (n_samples, n_classes); got "
        "logits of shape (3,)."
    )
    with pytest.raises(ValueError, match=_full(message)):
        CrossEntropyLoss()(torch.zeros(3), torch.tensor(0), torch.ones(1))


# -- the NeSCal penalty ----------------------------------------------------------------------
N_ROWS, N_CLASSES, K, BATCH = 30, 4, 3, 12
VARIANTS = [
    ("soft_target", "pairwise", 1.0),
    ("soft_target", "pairwise", 2.0),
    ("js", "pairwise", 1.0),
    ("js", "mean", 1.0),
]
ADAPTIVE = [None, "agreement", "density"]


def _problem(seed: int, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    neighbors = torch.randint(0, N_ROWS, (N_ROWS, K), generator=gen)
    initial = 2.0 * torch.randn(N_ROWS, N_CLASSES, generator=gen, dtype=torch.float64)
    similarities = torch.rand(N_ROWS, K, generator=gen) * 2.0 - 0.5
    indices = torch.randperm(N_ROWS, generator=gen)[:BATCH]
    logits = 2.0 * torch.randn(BATCH, N_CLASSES, generator=gen)
    target = torch.randint(0, N_CLASSES, (BATCH,), generator=gen)
    weights = torch.rand(BATCH, generator=gen) * 3.0
    weights[[2, 7]] = 0.0
    return {
        "neighbors": neighbors,
        "initial": F.log_softmax(initial, dim=-1).to(dtype),  # normalised in `dtype`
        "similarities": similarities,
        "indices": indices,
        "logits": logits.to(dtype),
        "target": target,
        "weights": weights.to(dtype),
    }


def _smoothing(problem, variant, adaptive) -> NeighbourhoodSmoothing:
    divergence, aggregation, temperature = variant
    return NeighbourhoodSmoothing(
        problem["neighbors"],
        problem["initial"],
        divergence=divergence,
        aggregation=aggregation,
        target_temperature=temperature,
        adaptive=adaptive,
        similarities=problem["similarities"],
    )


def _reference_penalty(problem, variant, adaptive, logits, weights):
    """``sum_i w_i a_i v_i / B`` written out from the cached neighbour distributions."""
    divergence, aggregation, temperature = variant
    log_p = F.log_softmax(logits, dim=-1)
    p = log_p.exp()
    log_q = problem["initial"].double()[problem["neighbors"][problem["indices"]]]  # (B, k, C)
    q = log_q.exp()
    q_mean = q.mean(dim=1)
    if divergence == "soft_target":
        soft = q_mean ** (1.0 / temperature)
        soft = soft / soft.sum(dim=-1, keepdim=True)
        per_row = (soft * (soft.log() - log_p)).sum(dim=-1)  # KL(soft || p)
    elif aggregation == "mean":
        m = (p + q_mean) / 2
        per_row = 0.5 * (p * (log_p - m.log())).sum(-1)
        per_row = per_row + 0.5 * (q_mean * (q_mean / m).log()).sum(-1)
    else:
        m = (p[:, None, :] + q) / 2
        js = 0.5 * (p[:, None, :] * (log_p[:, None, :] - m.log())).sum(-1)
        js = js + 0.5 * (q * (log_q - m.log())).sum(-1)
        per_row = js.mean(dim=1)
    row_weights = weights.double()
    if adaptive == "agreement":
        on_label = q_mean[torch.arange(BATCH), problem["target"]]
        row_weights = row_weights * (1.0 - on_label)
    elif adaptive == "density":
        density = problem["similarities"].double().mean(dim=1).clamp(min=0.0)
        row_weights = row_weights * (density / density.mean())[problem["indices"]]
    return (row_weights * per_row).sum() / BATCH


def _penalty_value_and_grad(smoothing, problem, weights, call=None):
    z = problem["logits"].clone().requires_grad_(True)
    call = call or smoothing
    value = call(z, problem["indices"], problem["target"], weights)
    value.backward()
    return value.detach(), z.grad


@pytest.mark.parametrize(("variant", "adaptive"), list(itertools.product(VARIANTS, ADAPTIVE)))
@pytest.mark.parametrize("path", ["fused", "reference_call"])
def test_weighted_penalty_matches_the_written_out_reference(variant, adaptive, path):
    problem = _problem(10)
    smoothing = _smoothing(problem, variant, adaptive)
    call = smoothing._reference_call if path == "reference_call" else None
    value, grad = _penalty_value_and_grad(smoothing, problem, problem["weights"], call)
    z = problem["logits"].clone().requires_grad_(True)
    expected = _reference_penalty(problem, variant, adaptive, z, problem["weights"])
    expected.backward()
    # the density weights are computed in float32 by the penalty
    rtol = 1e-6 if adaptive == "density" else 1e-10
    torch.testing.assert_close(value, expected.detach(), rtol=rtol, atol=1e-12)
    torch.testing.assert_close(grad, z.grad, rtol=rtol, atol=1e-12)
    assert not grad[problem["weights"] == 0].any()


@pytest.mark.parametrize(("variant", "adaptive"), list(itertools.product(VARIANTS, ADAPTIVE)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unit_weights_leave_the_penalty_and_the_cache_exactly_unchanged(variant, adaptive, dtype):
    problem = _problem(11, dtype)
    plain, weighted = _smoothing(problem, variant, adaptive), _smoothing(problem, variant, adaptive)
    value, grad = _penalty_value_and_grad(plain, problem, None)
    weighted_value, weighted_grad = _penalty_value_and_grad(
        weighted, problem, torch.ones(BATCH, dtype=dtype)
    )
    # exact: weights of 1.0 multiply exactly, so the unweighted arithmetic op for op
    assert torch.equal(weighted_value, value)
    assert torch.equal(weighted_grad, grad)
    assert torch.equal(weighted.cache.log_probs, plain.cache.log_probs)


@pytest.mark.parametrize("variant", VARIANTS)
def test_weights_never_change_what_is_cached(variant):
    problem = _problem(12)
    plain = _smoothing(problem, variant, None)
    weighted = copy.deepcopy(plain)
    _penalty_value_and_grad(plain, problem, None)
    _penalty_value_and_grad(weighted, problem, problem["weights"])
    # exact: the cache stores the batch's log-softmax; weights never enter it
    assert torch.equal(weighted.cache.log_probs, plain.cache.log_probs)
    assert torch.equal(weighted.cache.probs, plain.cache.probs)
    assert torch.equal(weighted.cache.neg_entropy(), plain.cache.neg_entropy())


@pytest.mark.parametrize("adaptive", ADAPTIVE)
def test_integer_penalty_weights_equal_the_duplicated_batch(adaptive):
    problem = _problem(13)
    counts = torch.tensor([0, 1, 2, 3, 1, 0, 2, 1, 1, 3, 0, 2])
    variant = ("js", "pairwise", 1.0)
    weighted = _smoothing(problem, variant, adaptive)
    value = weighted(problem["logits"], problem["indices"], problem["target"], counts.double())
    duplicated = _smoothing(problem, variant, adaptive)
    dup_value = duplicated(
        problem["logits"].repeat_interleave(counts, 0),
        problem["indices"].repeat_interleave(counts),
        problem["target"].repeat_interleave(counts),
    )
    torch.testing.assert_close(value * BATCH / counts.sum(), dup_value, rtol=1e-10, atol=0)


def test_all_zero_penalty_weights_give_zero_with_a_zero_gradient():
    problem = _problem(14)
    for variant in VARIANTS:
        smoothing = _smoothing(problem, variant, "agreement")
        value, grad = _penalty_value_and_grad(smoothing, problem, torch.zeros(BATCH).double())
        assert float(value) == 0.0
        assert torch.isfinite(grad).all() and not grad.any()


def test_the_runtime_passes_the_weights_on_and_records_the_weighted_value():
    problem = _problem(15)
    variant = ("soft_target", "pairwise", 1.0)
    runtime = NeSCalRuntime(
        _smoothing(problem, variant, None),
        weight=1.0,
        schedule="constant",
        start_epoch=0,
        end_epoch=5,
    )
    value = runtime.penalty(
        problem["logits"], problem["indices"], problem["target"], sample_weight=problem["weights"]
    )
    expected = _reference_penalty(problem, variant, None, problem["logits"], problem["weights"])
    torch.testing.assert_close(value, expected, rtol=1e-10, atol=1e-12)


BAD_PENALTY_WEIGHTS = [
    (
        torch.ones(3),
        ValueError,
        "sample_weight must have shape (B,) = (2,), one weight per batch row; got shape (3,).",
    ),
    (
        torch.tensor([1.0, -0.5]),
        ValueError,
        "sample_weight must be finite and >= 0; got -0.5 at row 1.",
    ),
    (
        torch.tensor([float("nan"), 1.0]),
        ValueError,
        "sample_weight must be finite and >= 0; got nan at row 0.",
    ),
    (
        torch.tensor([1, 1]),
        TypeError,
        "sample_weight must be a floating-point tensor; got torch.int64.",
    ),
    (
        np.ones(2),
        TypeError,
        "sample_weight must be None or a 1-D floating-point tensor of per-row weights; got ndarray.",
    ),
    (
        torch.ones(2, device="meta"),
        ValueError,
        "sample_weight must be on the device of logits (cpu); got meta.",
    ),
]


@pytest.mark.parametrize(("weights", "error", "message"), BAD_PENALTY_WEIGHTS, ids=repr)
def test_invalid_penalty_weights_are_refused(weights, error, message):
    smoothing = NeighbourhoodSmoothing(torch.tensor([[1], [0]]), torch.zeros(2, 2))
    with pytest.raises(error, match=_full(message)):
        smoothing(torch.zeros(2, 2), torch.tensor([0, 1]), sample_weight=weights)
    assert torch.equal(smoothing.cache.log_probs, torch.zeros(2, 2))  # nothing was written
