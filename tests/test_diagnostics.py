"""Behaviour of nescal_sklearn.diagnostics: the theory checks of DESIGN.md on models and arrays."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestNeighbors
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import nescal_sklearn
from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.diagnostics import (
    DiagnosticDisplay,
    FisherLaplacianRatio,
    LabelSmoothingBounds,
    NeighbourConfidenceGap,
    fisher_laplacian_ratio,
    label_smoothing_bounds,
    neighbour_confidence_gap,
    perturbed_pairs,
    plot_diagnostics,
)
from nescal_sklearn.graph import build_knn_graph, embed_rows
from nescal_sklearn.losses import LabelSmoothingLoss, NeSCalLoss

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

FAST = dict(hidden_sizes=(16,), max_epochs=6, batch_size=32, lr=1e-2, random_state=0)


def _raises(message: str, error: type[Exception] = ValueError):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


@pytest.fixture(scope="module")
def fitted(iris):
    """Tiny fits: plain CE, label smoothing (ε = 0.2), NeSCal over label smoothing (ε = 0.15)."""
    X, y = iris
    return {
        "ce": NeSCalClassifier("ce", **FAST).fit(X, y),
        "ls": NeSCalClassifier(LabelSmoothingLoss(epsilon=0.2), **FAST).fit(X, y),
        "nescal_ls": NeSCalClassifier(
            NeSCalLoss(warmup=2, n_neighbors=5, base_loss=LabelSmoothingLoss(epsilon=0.15)),
            **FAST,
        ).fit(X, y),
    }


def _kl(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True) if a > 0)


# -- neighbour confidence gap: hand-worked cases -----------------------------------------------


def test_gap_tv_and_js_worked_by_hand():
    # Edge 0: same top class. Edge 1: the top class changes (0 -> 1).
    p0, q0 = (0.7, 0.2, 0.1), (0.5, 0.3, 0.2)
    p1, q1 = (0.6, 0.3, 0.1), (0.2, 0.5, 0.3)
    proba = np.array([p0, q0, p1, q1])
    result = neighbour_confidence_gap(proba=proba, edges=[[0, 1], [2, 3]])
    np.testing.assert_allclose(result.confidence_gap, [0.2, 0.1], atol=1e-15)
    np.testing.assert_allclose(result.total_variation, [0.2, 0.4], atol=1e-15)
    # m = (0.6, 0.25, 0.15): JS = (KL(p‖m) + KL(q‖m)) / 2 = (0.022730 + 0.021072) / 2.
    js0 = 0.5 * (_kl(p0, (0.6, 0.25, 0.15)) + _kl(q0, (0.6, 0.25, 0.15)))
    js1 = 0.5 * (_kl(p1, (0.4, 0.4, 0.2)) + _kl(q1, (0.4, 0.4, 0.2)))
    assert js0 == pytest.approx(0.0219011790, abs=1e-9)
    np.testing.assert_allclose(result.js, [js0, js1], rtol=1e-13)
    np.testing.assert_allclose(result.js_bound, np.sqrt(2 * np.array([js0, js1])), rtol=1e-13)
    assert result.fraction_gap_within_tv == result.fraction_tv_within_bound == 1.0
    assert result.median_gap_over_tv == pytest.approx(np.median([1.0, 0.25]))
    assert result.median_tv_over_bound == pytest.approx(
        np.median([0.2 / math.sqrt(2 * js0), 0.4 / math.sqrt(2 * js1)])
    )
    assert result.summary["n_edges"] == 2
    assert result.max_gap_excess == pytest.approx(0.0, abs=1e-15)


def test_js_extremes_and_agreement_with_scipy():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(5), size=50), rng.dirichlet(np.ones(5), size=50)
    result = neighbour_confidence_gap(
        proba=np.vstack([p, q, [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0]]]),
        edges=np.vstack([np.column_stack([np.arange(50), np.arange(50, 100)]), [[100, 101]]]),
    )
    expected = jensenshannon(p, q, axis=1) ** 2  # natural log: JS in nats
    np.testing.assert_allclose(result.js[:50], expected, rtol=1e-10)
    assert result.js[50] == pytest.approx(math.log(2), rel=1e-15)  # disjoint supports
    assert result.total_variation[50] == 1.0


def test_js_is_accurate_for_near_equal_distributions():
    p = np.array([[0.2, 0.3, 0.5]])
    for size in (1e-3, 1e-6, 1e-9, 1e-12):
        q = p + size * np.array([[1.0, -1.0, 0.0]])
        js = neighbour_confidence_gap(proba=np.vstack([p, q]), edges=[[0, 1]]).js[0]
        # JS = ⅛ Σ δ²/m + O(δ⁴): the leading term alone is exact to ~δ² relative.
        m = (p + q) / 2
        leading = 0.125 * np.sum((p - q) ** 2 / m)
        assert js == pytest.approx(leading, rel=max(size, 1e-12))
        # A naive sum of x log(x/m) terms cancels catastrophically here; this must not.
        assert js > 0


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_classes=st.integers(2, 12),
    concentration=st.floats(0.01, 10.0),
)
def test_both_bounds_hold_on_random_dirichlet_pairs(seed, n_classes, concentration):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(n_classes, concentration), size=40)
    proba = np.vstack([proba, proba[:5]])  # identical pairs too
    edges = np.column_stack([rng.integers(0, len(proba), 60), rng.integers(0, len(proba), 60)])
    edges = np.vstack([edges, [[40 + i, i] for i in range(5)]])
    result = neighbour_confidence_gap(proba=proba, edges=edges)
    assert result.fraction_gap_within_tv == 1.0
    assert result.fraction_tv_within_bound == 1.0
    assert result.max_gap_excess <= 1e-15
    assert result.max_tv_excess <= 1e-15


def test_a_wrong_js_is_reported_as_violating_the_bound():
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(4), size=30)
    edges = np.column_stack([np.arange(29), np.arange(1, 30)])
    honest = neighbour_confidence_gap(proba=proba, edges=edges)
    assert honest.fraction_tv_within_bound == 1.0
    # A quarter of the true JS halves √(2 JS): Pinsker fails on (almost) every edge.
    wrong = neighbour_confidence_gap(proba=proba, edges=edges, js=honest.js / 4)
    assert wrong.fraction_tv_within_bound < 0.5
    assert wrong.max_tv_excess > 0
    zero = neighbour_confidence_gap(proba=proba, edges=edges, js=np.zeros(29))
    assert zero.fraction_tv_within_bound == 0.0
    # The penalty's own float32 JS (the training-time code) satisfies the bound.
    log_p = torch.log(torch.as_tensor(proba, dtype=torch.float32))
    from nescal_sklearn.penalties import js_divergence

    own = js_divergence(log_p[edges[:, 0]], log_p[edges[:, 1]]).double().numpy()
    penalty = neighbour_confidence_gap(proba=proba, edges=edges, js=own, tol=1e-6)
    assert penalty.fraction_tv_within_bound == 1.0


def test_gap_check_fails_on_a_gap_larger_than_tv_and_respects_tol():
    def result(gap, tv, tol):
        ones = np.ones(len(gap))
        return NeighbourConfidenceGap(
            edges=np.zeros((len(gap), 2), dtype=np.int64),
            confidence_gap=np.asarray(gap, dtype=float),
            total_variation=np.asarray(tv, dtype=float),
            js=ones,
            js_bound=np.sqrt(2 * ones),
            tol=tol,
        )

    assert result([0.3, 0.1], [0.2, 0.2], 1e-12).fraction_gap_within_tv == 0.5
    assert result([0.2 + 1e-13], [0.2], 1e-12).fraction_gap_within_tv == 1.0
    assert result([0.2 + 1e-13], [0.2], 0.0).fraction_gap_within_tv == 0.0
    assert math.isnan(result([0.5], [0.0], 1e-12).median_gap_over_tv)  # no edge with TV > 0


def test_graph_from_embeddings_is_the_graph_rooms_knn_graph():
    rng = np.random.default_rng(2)
    embeddings = rng.normal(size=(30, 4))
    proba = rng.dirichlet(np.ones(3), size=30)
    result = neighbour_confidence_gap(proba=proba, embeddings=embeddings, n_neighbors=3)
    neighbours = build_knn_graph(embeddings, 3)
    np.testing.assert_array_equal(result.edges[:, 0], np.repeat(np.arange(30), 3))
    # integer indices: the front end calls build_knn_graph on these same embeddings
    np.testing.assert_array_equal(result.edges[:, 1], neighbours.ravel())
    assert not np.any(result.edges[:, 0] == result.edges[:, 1])


def test_query_rows_against_reference_rows():
    rng = np.random.default_rng(3)
    reference, query = rng.normal(size=(40, 5)), rng.normal(size=(12, 5))
    reference_proba = rng.dirichlet(np.ones(3), size=40)
    proba = rng.dirichlet(np.ones(3), size=12)
    result = neighbour_confidence_gap(
        proba=proba,
        embeddings=query,
        reference_proba=reference_proba,
        reference_embeddings=reference,
        n_neighbors=4,
    )
    expected = NearestNeighbors(n_neighbors=4, metric="cosine").fit(reference).kneighbors(query)[1]
    # integer indices in order: each query's top 5 similarities are >= 6.5e-4 apart
    np.testing.assert_array_equal(result.edges[:, 1].reshape(12, 4), expected)
    tv = 0.5 * np.abs(proba[result.edges[:, 0]] - reference_proba[result.edges[:, 1]]).sum(axis=1)
    np.testing.assert_allclose(result.total_variation, tv, rtol=1e-14)


def test_results_are_frozen_and_read_only():
    result = neighbour_confidence_gap(proba=[[0.6, 0.4], [0.5, 0.5]], edges=[[0, 1]])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.tol = 0.0
    with pytest.raises(ValueError, match="read-only"):
        result.js[0] = 1.0
    assert repr(result).startswith("NeighbourConfidenceGap(name=None, n_edges=1, ")


# -- front ends on fitted estimators ----------------------------------------------------------


def test_gap_on_a_fitted_estimator_uses_its_embeddings_and_probabilities(iris, fitted):
    X, _ = iris
    clf = fitted["ce"]
    result = neighbour_confidence_gap(clf, X, n_neighbors=5, name="CE")
    embeddings, _ = embed_rows(clf.module_, torch.as_tensor(X))
    # integer indices: the front end calls these same functions on the same rows
    np.testing.assert_array_equal(
        result.edges[:, 1], build_knn_graph(embeddings.numpy(), 5).ravel()
    )
    proba = clf.predict_proba(X)
    tv = 0.5 * np.abs(proba[result.edges[:, 0]] - proba[result.edges[:, 1]]).sum(axis=1)
    np.testing.assert_allclose(result.total_variation, tv, rtol=1e-12, atol=1e-15)
    assert result.fraction_gap_within_tv == result.fraction_tv_within_bound == 1.0
    assert 0 < result.median_gap_over_tv <= 1 and 0 < result.median_tv_over_bound <= 1


def test_gap_on_a_pipeline_transforms_rows_like_the_pipeline(iris):
    X, y = load_iris(return_X_y=True)
    pipeline = make_pipeline(StandardScaler(), NeSCalClassifier("ce", **FAST)).fit(X, y)
    direct = neighbour_confidence_gap(pipeline[-1], pipeline[0].transform(X), n_neighbors=3)
    through = neighbour_confidence_gap(pipeline, X, n_neighbors=3)
    # integer indices: the pipeline's transform is the same arithmetic as direct's
    np.testing.assert_array_equal(direct.edges, through.edges)
    np.testing.assert_allclose(direct.js, through.js)


def test_gap_of_test_rows_against_training_rows(iris, fitted):
    X, _ = iris
    result = neighbour_confidence_gap(fitted["ce"], X[:20], reference_X=X[20:], n_neighbors=4)
    assert result.edges.shape == (80, 2)
    assert result.edges[:, 1].max() < 130
    assert result.fraction_tv_within_bound == 1.0


def test_fitted_estimator_with_a_given_graph(iris, fitted):
    X, _ = iris
    edges = np.column_stack([np.arange(149), np.arange(1, 150)])
    result = neighbour_confidence_gap(fitted["ce"], X, edges=edges)
    np.testing.assert_array_equal(result.edges, edges)


# -- Fisher–Laplacian ratio --------------------------------------------------------------------


def test_ratio_tends_to_one_for_tiny_perturbations():
    p = np.array([[0.2, 0.3, 0.5]])
    direction = np.array([[1.0, -1.0, 0.0]]) / math.sqrt(2)
    near = fisher_laplacian_ratio(p=p, q=p + 1e-6 * direction)
    assert near.distance[0] == pytest.approx(1e-6, rel=1e-9)
    assert abs(near.ratio[0] - 1) < 1e-3
    tiny = fisher_laplacian_ratio(p=p, q=p + 1e-10 * direction, base="mean")
    assert abs(tiny.ratio[0] - 1) < 1e-6
    # The quadratic by hand: ⅛ (δ²/0.2 + δ²/0.3) with δ = 1e-6 / √2.
    delta2 = 1e-12 / 2
    assert near.quadratic[0] == pytest.approx(0.125 * (delta2 / 0.2 + delta2 / 0.3), rel=1e-12)


def test_synthetic_perturbations_converge_at_first_and_second_order():
    for base, low, high in (("p", 30, 300), ("mean", 3e3, 3e5)):
        result = fisher_laplacian_ratio(
            synthetic=True, scales=[1e-4, 1e-2], n_per_scale=50, random_state=0, base=base
        )
        error = np.abs(result.ratio - 1)
        growth = np.median(error[50:]) / np.median(error[:50])  # scale up 100×
        assert low < growth < high
        assert np.all(error[:50] < 1e-3)
    default = fisher_laplacian_ratio(synthetic=True, random_state=0)
    assert default.n_pairs == 200 and default.n_skipped == 0
    assert abs(default.ratio_at_min_distance - 1) < 1e-3


def test_relative_distance_is_the_size_of_the_synthetic_perturbation():
    scales = np.array([1e-4, 1e-3, 1e-2])
    result = fisher_laplacian_ratio(
        synthetic=True, scales=scales, n_per_scale=5, random_state=2, distance="relative"
    )
    # q is renormalised after the perturbation, which moves it by round-off only.
    np.testing.assert_allclose(result.distance, np.repeat(scales, 5), rtol=1e-9)
    assert result.plot().ax_[0].get_xlabel() == "max_c |p_c − q_c| / p_c"
    zero = fisher_laplacian_ratio(p=[[0.5, 0.5, 0.0]], q=[[0.5, 0.4, 0.1]], distance="relative")
    assert zero.distance[0] == math.inf and zero.n_skipped == 1


def test_perturbed_pairs_are_distributions_on_the_same_support():
    p, q = perturbed_pairs([1e-3, 1.0], n_classes=5, n_per_scale=20, random_state=1)
    assert p.shape == q.shape == (40, 5)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-14)
    assert np.all(q >= 0) and np.all(p > 0)
    distance = np.linalg.norm(p - q, axis=1)
    assert distance[:20].max() < distance[20:].min()


def test_zero_probabilities_and_equal_pairs():
    p = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.3, 0.7, 0.0]])
    q = np.array([[0.5, 0.4, 0.1], [0.4, 0.6, 0.0], [0.3, 0.7, 0.0]])
    result = fisher_laplacian_ratio(p=p, q=q)
    assert math.isnan(result.ratio[0])  # p_c = 0 < q_c: no local form
    assert math.isnan(result.ratio[2])  # p = q
    assert result.quadratic[1] == pytest.approx(0.125 * (0.01 / 0.5 + 0.01 / 0.5))
    assert np.isfinite(result.ratio[1])
    assert result.n_skipped == 2
    assert result.ratio_at_median_distance == result.ratio[1]
    symmetric = fisher_laplacian_ratio(p=p, q=q, base="mean")
    assert np.isfinite(symmetric.ratio[0])  # m_c = 0.05 > 0


def test_ratio_at_the_median_edge_by_distance():
    p = np.tile([[0.25, 0.25, 0.5]], (3, 1))
    q = p + np.array([[1e-1, -1e-1, 0], [1e-4, -1e-4, 0], [1e-2, -1e-2, 0]])
    result = fisher_laplacian_ratio(p=p, q=q, distance="tv")
    np.testing.assert_allclose(result.distance, [1e-1, 1e-4, 1e-2])
    assert result.median_distance == pytest.approx(1e-2)
    assert result.ratio_at_median_distance == result.ratio[2]
    assert result.ratio_at_min_distance == result.ratio[1]


def test_fisher_ratio_on_a_fitted_estimators_graph(iris, fitted):
    X, _ = iris
    result = fisher_laplacian_ratio(fitted["ce"], X, n_neighbors=5, name="CE")
    assert result.edges.shape == (750, 2)
    assert result.n_pairs == 750 and np.isfinite(result.ratio_at_median_distance)
    assert 0 < result.ratio_at_median_distance < 2
    proba = fitted["ce"].predict_proba(X)
    gap = neighbour_confidence_gap(proba=proba, edges=result.edges)
    np.testing.assert_allclose(result.js, gap.js)


# -- label smoothing ---------------------------------------------------------------------------


def test_predictions_at_the_optimum_meet_every_closed_form():
    epsilon, n_classes = 0.1, 5
    c, other = 1 - epsilon + epsilon / n_classes, epsilon / n_classes
    y = np.array([0, 3, 4, 1])
    proba = np.full((4, n_classes), other)
    proba[np.arange(4), y] = c
    shift = np.array([[0.0], [5.0], [-3.0], [100.0]])  # logits up to a per-row shift
    result = label_smoothing_bounds(logits=np.log(proba) + shift, y=y, epsilon=epsilon)
    assert result.ceiling == pytest.approx(0.92)
    assert result.logit_gap_bound == pytest.approx(math.log(0.92 * 5 / 0.1))
    np.testing.assert_allclose(result.gap_mean_other, result.logit_gap_bound, rtol=1e-12)
    np.testing.assert_allclose(result.gap_max_other, result.logit_gap_bound, rtol=1e-12)
    np.testing.assert_allclose(result.top_confidence, c, rtol=1e-12)
    assert result.mean_nll == pytest.approx(result.nll_floor, rel=1e-12)
    assert result.nll_floor == pytest.approx(-math.log(0.92))
    assert result.fraction_above_ceiling == 0.0 and result.fraction_gap_above_bound == 0.0
    from_proba = label_smoothing_bounds(proba=proba, y=y, epsilon=epsilon)
    np.testing.assert_allclose(from_proba.gap_mean_other, result.gap_mean_other, rtol=1e-12)


def test_design_md_figures_at_k_1000():
    proba = np.full((1, 1000), 0.1 / 1000)
    proba[0, 0] += 0.9
    result = label_smoothing_bounds(proba=proba, epsilon=0.1)
    assert result.logit_gap_bound == pytest.approx(9.11, abs=0.01)
    assert result.nll_floor == pytest.approx(0.105, abs=0.001)
    assert result.nll is None and math.isnan(result.mean_nll)


def test_gap_definitions_worked_by_hand_and_overconfidence_counted():
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 4.0, 4.0]])
    result = label_smoothing_bounds(logits=logits, epsilon=0.1, y=[0, 2])
    np.testing.assert_allclose(result.gap_mean_other, [2.5, 2.0])
    np.testing.assert_allclose(result.gap_max_other, [2.0, 0.0])
    sharp = label_smoothing_bounds(proba=[[0.99, 0.005, 0.005], [0.5, 0.3, 0.2]], epsilon=0.1)
    assert sharp.fraction_above_ceiling == 0.5
    assert sharp.fraction_gap_above_bound == 0.5


def test_epsilon_zero_gives_trivial_bounds():
    result = label_smoothing_bounds(proba=[[1.0, 0.0], [0.8, 0.2]], epsilon=0.0, y=[0, 0])
    assert (result.ceiling, result.logit_gap_bound, result.nll_floor) == (1.0, math.inf, 0.0)
    assert result.fraction_above_ceiling == 0.0 and result.fraction_gap_above_bound == 0.0
    assert result.gap_mean_other[0] == math.inf  # a zero probability: log 0
    display = result.plot()
    assert len(display.ax_[1].get_lines()) == 0  # no line for an infinite bound


def test_epsilon_is_read_from_the_fitted_loss(iris, fitted):
    X, y = iris
    ls = label_smoothing_bounds(fitted["ls"], X, y)
    assert ls.epsilon == 0.2 and ls.n_classes == 3
    assert ls.ceiling == pytest.approx(1 - 0.2 + 0.2 / 3)
    np.testing.assert_allclose(ls.top_confidence, fitted["ls"].predict_proba(X).max(axis=1))
    proba = fitted["ls"].predict_proba(X)
    np.testing.assert_allclose(ls.nll, -np.log(proba[np.arange(150), y]), rtol=1e-10)
    assert ls.mean_nll >= ls.nll_floor  # 6 epochs: not beyond label smoothing's optimum
    assert label_smoothing_bounds(fitted["nescal_ls"], X, y).epsilon == 0.15
    ce = label_smoothing_bounds(fitted["ce"], X, y, epsilon=0.1)
    assert ce.epsilon == 0.1


def test_label_smoothing_on_a_real_fit_with_the_registered_name(iris):
    X, y = iris
    clf = NeSCalClassifier(loss="label_smoothing", **FAST).fit(X, y)
    result = label_smoothing_bounds(clf, X, y, name="LS")
    assert result.epsilon == 0.1
    assert 0.0 <= result.fraction_above_ceiling <= 1.0
    assert np.all(result.gap_max_other <= result.gap_mean_other + 1e-12)
    binary = NeSCalClassifier(loss="label_smoothing", **FAST).fit(X[:100], y[:100])
    two = label_smoothing_bounds(binary, X[:100], y[:100])
    np.testing.assert_allclose(two.gap_mean_other, np.abs(binary.decision_function(X[:100])))


# -- plots -------------------------------------------------------------------------------------


def test_plots_draw_and_overlay(iris, fitted):
    X, y = iris
    nescal = neighbour_confidence_gap(fitted["nescal_ls"], X, n_neighbors=5, name="NeSCal")
    ce = neighbour_confidence_gap(fitted["ce"], X, n_neighbors=5, name="CE")
    first = nescal.plot()
    assert isinstance(first, DiagnosticDisplay)
    assert first.ax_.shape == (4,) and first.figure_ is first.ax_[0].figure
    second = ce.plot(ax=first.ax_)
    assert list(second.ax_) == list(first.ax_) and second.color_ != first.color_
    scatter_axis = first.ax_[2]
    labels = [text.get_text() for text in scatter_axis.get_legend().get_texts()]
    assert labels.count("y = x (the bound)") == 1 and {"NeSCal", "CE"} <= set(labels)
    assert first.ax_[0].get_xscale() == "log"
    x, y_ecdf = first.artists_["neighbour JS"][0].get_data()
    assert y_ecdf[-1] == 1.0 and np.all(np.diff(x) >= 0)

    displays = plot_diagnostics(
        {
            "NeSCal": fisher_laplacian_ratio(fitted["nescal_ls"], X, n_neighbors=5),
            "CE": fisher_laplacian_ratio(fitted["ce"], X, n_neighbors=5),
        }
    )
    axis = displays[0].ax_[0]
    assert axis.get_xscale() == "log" and displays[1].ax_[0] is axis
    assert [line.get_label() for line in axis.get_lines()] == ["ratio = 1"]

    ls = label_smoothing_bounds(fitted["ls"], X, y, name="LS").plot()
    assert ls.ax_.shape == (2,)
    assert ls.ax_[0].get_lines()[0].get_xdata()[0] == pytest.approx(1 - 0.2 + 0.2 / 3)
    assert ls.ax_[1].get_lines()[0].get_xdata()[0] == pytest.approx(
        math.log((1 - 0.2 + 0.2 / 3) * 3 / 0.2)
    )


def test_plot_wants_one_axes_per_panel():
    result = neighbour_confidence_gap(proba=[[0.6, 0.4], [0.5, 0.5]], edges=[[0, 1]])
    _, axes = plt.subplots(1, 2)
    with _raises(
        "ax must hold 4 Axes for NeighbourConfidenceGap (panels ['neighbour JS', "
        "'confidence gap', 'gap vs TV', 'TV vs √(2 JS)']); got 2."
    ):
        result.plot(ax=axes)
    fisher = fisher_laplacian_ratio(p=[[0.6, 0.4]], q=[[0.5, 0.5]])
    assert fisher.plot(ax=axes[0]).ax_[0] is axes[0]
    with _raises(
        "results must all be of one kind to share axes; got ['FisherLaplacianRatio', "
        "'NeighbourConfidenceGap']."
    ):
        plot_diagnostics({"a": result, "b": fisher})


# -- errors ------------------------------------------------------------------------------------


def test_errors_name_the_parameter_and_value(fitted, iris):
    X, y = iris
    proba = [[0.6, 0.4], [0.5, 0.5]]
    cases = [
        (
            lambda: neighbour_confidence_gap(proba=[[0.6, 0.5]], edges=[[0, 0]]),
            "proba rows must sum to 1 (within 1e-05); row 0 sums to 1.1.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=[[1.2, -0.2]], edges=[[0, 0]]),
            "proba must be non-negative; row 0 holds -0.2.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=[0.6, 0.4], edges=[[0, 0]]),
            "proba must be a 2-D array of shape (n_samples, n_classes) with n_samples >= 1 and "
            "n_classes >= 2; got shape (2,).",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, edges=[0, 1]),
            "edges must be an integer array of shape (n_edges, 2) with n_edges >= 1, one (i, j) "
            "pair per row; got shape (2,).",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, edges=[[0, 2]]),
            "edges[:, 1] must index the reference rows (0 <= index < 2); got 2.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, edges=[[0.0, 1.0]]),
            "edges must hold integer row indices; got dtype float64.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba),
            "the diagnostic needs a graph: pass edges, or embeddings to build the kNN graph on; "
            "got edges=None and embeddings=None.",
        ),
        (
            lambda: neighbour_confidence_gap(),
            "pass a fitted estimator with X, or proba with edges or embeddings; got "
            "estimator=None and proba=None.",
        ),
        (
            lambda: neighbour_confidence_gap(fitted["ce"], X, proba=proba),
            "pass either a fitted estimator with X (and reference_X) or arrays, not both; got an "
            "estimator and proba.",
        ),
        (
            lambda: neighbour_confidence_gap(fitted["ce"]),
            "X is required with an estimator; got X=None.",
        ),
        (
            lambda: neighbour_confidence_gap(X=X, proba=proba),
            "X and reference_X need a fitted estimator; with estimator=None pass proba (and "
            "reference_proba) instead.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, js=[0.1]),
            "js holds one value per edge and needs edges; got edges=None.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, edges=[[0, 1]], js=[0.1, 0.2]),
            "js must have shape (1,), one value per pair; got shape (2,).",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, edges=[[0, 1]], js=[-0.1]),
            "js must be non-negative; got -0.1.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, edges=[[0, 1]], tol=-1.0),
            "tol must be >= 0; got tol=-1.0.",
        ),
        (
            lambda: neighbour_confidence_gap(proba=proba, embeddings=np.ones((3, 2))),
            "embeddings and proba must have one row per sample; got 3 and 2 rows.",
        ),
        (
            lambda: neighbour_confidence_gap(
                proba=proba,
                embeddings=np.eye(2),
                reference_proba=proba,
                reference_embeddings=np.eye(2),
                n_neighbors=3,
            ),
            "n_neighbors=3 must be between 1 and the number of reference rows (2).",
        ),
        (
            lambda: fisher_laplacian_ratio(p=proba, q=proba, base="q"),
            "base must be one of ['p', 'mean']; got base='q'.",
        ),
        (
            lambda: fisher_laplacian_ratio(p=proba, q=proba, distance="kl"),
            "distance must be one of ['l2', 'tv', 'relative']; got distance='kl'.",
        ),
        (
            lambda: fisher_laplacian_ratio(p=proba, q=proba, synthetic=True),
            "fisher_laplacian_ratio takes pairs from exactly one source: an estimator with X, "
            "proba with edges or embeddings, p and q, or synthetic=True; got p and q and "
            "synthetic=True.",
        ),
        (
            lambda: fisher_laplacian_ratio(),
            "fisher_laplacian_ratio takes pairs from exactly one source: an estimator with X, "
            "proba with edges or embeddings, p and q, or synthetic=True; got none.",
        ),
        (
            lambda: fisher_laplacian_ratio(p=proba),
            "p and q must be passed together; got only one of them.",
        ),
        (
            lambda: fisher_laplacian_ratio(synthetic=True, scales=[0.0, 0.1]),
            "scales must be a non-empty 1-D array of values in (0, 1]; got array([0. , 0.1]).",
        ),
        (
            lambda: perturbed_pairs(n_classes=1),
            "n_classes must be an integer >= 2; got n_classes=1.",
        ),
        (
            lambda: label_smoothing_bounds(proba=proba),
            "epsilon is required without an estimator; got epsilon=None.",
        ),
        (
            lambda: label_smoothing_bounds(proba=proba, epsilon=1.5),
            "epsilon must be in [0, 1]; got epsilon=1.5.",
        ),
        (
            lambda: label_smoothing_bounds(epsilon=0.1),
            "pass a fitted estimator with X, or proba or logits; got neither.",
        ),
        (
            lambda: label_smoothing_bounds(
                proba=proba, logits=[[0.0, 0.0], [1.0, 0.0]], epsilon=0.1
            ),
            "proba must be softmax(logits) (within 1e-6) when both are given; they disagree.",
        ),
        (
            lambda: label_smoothing_bounds(proba=proba, epsilon=0.1, y=[0, 2]),
            "without an estimator, y must hold column indices 0..1 of proba; got [0, 2].",
        ),
        (
            lambda: label_smoothing_bounds(fitted["ce"], X, y),
            "epsilon is required: the estimator was trained with CrossEntropyLoss(), which is not "
            "label smoothing; pass epsilon (e.g. epsilon=0.1) to compare with its bounds.",
        ),
        (
            lambda: label_smoothing_bounds(fitted["ls"], X, y, epsilon=0.1),
            "epsilon=0.1 disagrees with the estimator's loss LabelSmoothingLoss(epsilon=0.2) "
            "(epsilon=0.2); pass epsilon=None to use the estimator's.",
        ),
        (
            lambda: label_smoothing_bounds(fitted["ls"], X, np.full(150, 7)),
            "y contains labels the estimator was not fitted on: [7]; classes are [0, 1, 2].",
        ),
    ]
    for call, message in cases:
        with _raises(message):
            call()
    fitted_lr = LogisticRegression(max_iter=200).fit(X, y)
    with _raises(
        "estimator must be a fitted NeSCalClassifier or a Pipeline ending in one (or None, "
        "with arrays); got LogisticRegression.",
        TypeError,
    ):
        neighbour_confidence_gap(fitted_lr, X)
    with _raises(
        "estimator must be a fitted NeSCalClassifier or a Pipeline ending in one (or None, "
        "with arrays); got Pipeline ending in LogisticRegression.",
        TypeError,
    ):
        label_smoothing_bounds(make_pipeline(StandardScaler(), fitted_lr), X, y, epsilon=0.1)
    with _raises("tol must be a real number; got str '1'.", TypeError):
        label_smoothing_bounds(proba=proba, epsilon=0.1, tol="1")


# -- package shape -----------------------------------------------------------------------------


def test_public_names_and_top_level_exports():
    import nescal_sklearn.diagnostics as diagnostics

    for name in ("neighbour_confidence_gap", "fisher_laplacian_ratio", "label_smoothing_bounds"):
        assert getattr(nescal_sklearn, name) is getattr(diagnostics, name)
        assert name in nescal_sklearn.__all__
    assert set(diagnostics.__all__) == {
        "BASES",
        "DISTANCES",
        "DiagnosticDisplay",
        "FisherLaplacianRatio",
        "LabelSmoothingBounds",
        "NeighbourConfidenceGap",
        "fisher_laplacian_ratio",
        "label_smoothing_bounds",
        "neighbour_confidence_gap",
        "perturbed_pairs",
        "plot_diagnostics",
    }
    assert isinstance(fisher_laplacian_ratio(p=[[0.6, 0.4]], q=[[0.5, 0.5]]), FisherLaplacianRatio)
    assert isinstance(label_smoothing_bounds(proba=[[0.6, 0.4]], epsilon=0.1), LabelSmoothingBounds)


def test_array_paths_need_neither_torch_nor_matplotlib():
    program = (
        "import sys; from nescal_sklearn.diagnostics import neighbour_confidence_gap, "
        "fisher_laplacian_ratio, label_smoothing_bounds; "
        "neighbour_confidence_gap(proba=[[0.6, 0.4], [0.5, 0.5]], edges=[[0, 1]]); "
        "fisher_laplacian_ratio(synthetic=True, random_state=0); "
        "label_smoothing_bounds(proba=[[0.6, 0.4]], epsilon=0.1); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'matplotlib')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
