"""Tests of nescal_sklearn.graph.build_knn_graph."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import normalize

import nescal_sklearn.graph._knn as knn_module
from nescal_sklearn.graph import AUTO_EXACT_MAX_SAMPLES, build_knn_graph


def _sklearn_graph(data: np.ndarray, k: int) -> np.ndarray:
    search = NearestNeighbors(n_neighbors=k + 1, metric="cosine", algorithm="brute").fit(data)
    indices = search.kneighbors(data, return_distance=False)
    return np.array([[j for j in row if j != i][:k] for i, row in enumerate(indices)])


def _clustered(n: int, d: int, seed: int = 0, n_clusters: int = 50) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, d)).astype(np.float32)
    labels = rng.integers(0, n_clusters, n)
    return centres[labels] + rng.normal(scale=0.8, size=(n, d)).astype(np.float32)


def _recall(found: np.ndarray, reference: np.ndarray) -> float:
    k = reference.shape[1]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(found, reference, strict=True)]))


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(0).normal(size=(300, 12))


@pytest.mark.parametrize("chunk_size", [None, 1, 7, 64, 299, 300, 1000])
def test_exact_matches_sklearn_brute_force(points, chunk_size):
    neighbors, sims = build_knn_graph(
        points, 6, method="exact", chunk_size=chunk_size, return_similarities=True
    )
    assert neighbors.shape == (300, 6) and neighbors.dtype == np.int64
    assert sims.shape == (300, 6) and sims.dtype == np.float32
    reference = _sklearn_graph(points, 6)
    # sets: every row's 6th and 7th similarities differ by >= 7.9e-5, far above rounding
    assert all(set(a) == set(b) for a, b in zip(neighbors, reference, strict=True))
    unit = normalize(points)
    expected = np.einsum("id,ikd->ik", unit, unit[neighbors])
    np.testing.assert_allclose(sims, expected, atol=1e-5)
    assert np.all(np.diff(sims, axis=1) <= 0)


def test_torch_input_gives_the_same_graph(points):
    from_numpy = build_knn_graph(points, 4, method="exact")
    from_torch = build_knn_graph(torch.from_numpy(points).requires_grad_(True), 4, method="exact")
    # integer indices: both inputs become the same float32 array first, then one path
    np.testing.assert_array_equal(from_numpy, from_torch)


def test_self_is_never_a_neighbour_and_k_can_be_n_minus_one(points):
    neighbors = build_knn_graph(points[:10], 9, method="exact")
    expected = [sorted(set(range(10)) - {i}) for i in range(10)]
    assert np.sort(neighbors, axis=1).tolist() == expected


@pytest.mark.parametrize("chunk_size", [None, 1, 2, 4])
def test_ties_broken_by_lower_index_and_zero_rows_are_finite(chunk_size):
    a, b = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    data = np.array([a, [0.0, 0.0, 0.0], a, a, b, [0.0, 0.0, 0.0]])
    neighbors, sims = build_knn_graph(
        data, 2, method="exact", chunk_size=chunk_size, return_similarities=True
    )
    assert np.isfinite(sims).all()
    # Row 0: duplicates 2 and 3 (similarity 1). Row 1 (zero): every similarity is 0,
    # so the lowest other indices. Row 4: all others have similarity 0.
    assert neighbors[0].tolist() == [2, 3]
    assert neighbors[2].tolist() == [0, 3]
    assert neighbors[3].tolist() == [0, 2]
    assert neighbors[1].tolist() == [0, 2]
    assert neighbors[4].tolist() == [0, 1]
    assert neighbors[5].tolist() == [0, 1]
    np.testing.assert_allclose(sims[0], [1.0, 1.0])
    np.testing.assert_allclose(sims[1], [0.0, 0.0])


def test_tie_at_the_cut_takes_lowest_indices():
    # Row 0 is most similar to row 5, then rows 1..4 tie: k = 3 keeps 5, 1, 2.
    data = np.array([[1.0, 0.0], [0.6, 0.8], [0.6, 0.8], [0.6, 0.8], [0.6, 0.8], [0.9, 0.1]])
    for chunk_size in (None, 1, 3):
        neighbors = build_knn_graph(data, 3, method="exact", chunk_size=chunk_size)
        assert neighbors[0].tolist() == [5, 1, 2]


def test_approximate_recall_on_clustered_points():
    data = _clustered(20_000, 32)
    exact = build_knn_graph(data, 10, method="exact")
    start = time.perf_counter()
    approximate = build_knn_graph(data, 10, method="approximate", random_state=0)
    elapsed = time.perf_counter() - start
    assert approximate.shape == (20_000, 10) and approximate.dtype == np.int64
    assert not (approximate == np.arange(20_000)[:, None]).any()
    assert _recall(approximate, exact) >= 0.95
    print(f"approximate build incl. any JIT: {elapsed:.1f}s")


@pytest.mark.determinism
def test_approximate_is_seeded_and_handles_zero_rows():
    data = _clustered(3000, 16, seed=1)
    data[::50] = 0.0
    first, sims = build_knn_graph(
        data, 5, method="approximate", random_state=0, return_similarities=True
    )
    second = build_knn_graph(data, 5, method="approximate", random_state=0)
    np.testing.assert_array_equal(first, second)
    assert np.isfinite(sims).all()
    assert not (first == np.arange(3000)[:, None]).any()
    nonzero = np.flatnonzero(data.any(axis=1))
    zero = set(range(0, 3000, 50))
    # A zero row is never preferred to a row of positive similarity.
    assert not any(set(first[i]) & zero for i in nonzero if sims[i].min() > 0)


def test_auto_switches_at_the_threshold(monkeypatch):
    data = _clustered(600, 8, seed=2)
    exact = build_knn_graph(data, 5, method="exact")
    assert AUTO_EXACT_MAX_SAMPLES >= 600
    # integer indices: auto runs the exact search below the threshold, the same call
    np.testing.assert_array_equal(build_knn_graph(data, 5), exact)
    monkeypatch.setattr(knn_module, "AUTO_EXACT_MAX_SAMPLES", 500)
    auto = build_knn_graph(data, 5, random_state=0)
    # integer indices: auto runs the approximate search above it, the same seeded call
    np.testing.assert_array_equal(
        auto, build_knn_graph(data, 5, method="approximate", random_state=0)
    )


def test_pca_reduction_matches_a_manual_pipeline(points):
    neighbors = build_knn_graph(points, 5, reduction="pca", n_components=4, random_state=0)
    reduced = PCA(n_components=4, random_state=0).fit_transform(normalize(points))
    reference = _sklearn_graph(reduced, 5)
    assert np.mean([set(a) == set(b) for a, b in zip(neighbors, reference, strict=True)]) > 0.98
    default = build_knn_graph(points, 5, reduction="pca")
    assert default.shape == (300, 5)


def test_umap_reduction_runs_on_a_small_set(points):
    neighbors = build_knn_graph(points[:120], 5, reduction="umap", n_components=3, random_state=0)
    assert neighbors.shape == (120, 5) and neighbors.dtype == np.int64
    assert not (neighbors == np.arange(120)[:, None]).any()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"n_neighbors": 300},
            "n_neighbors=300 must be smaller than n_samples=300: a row is never its own neighbour.",
        ),
        ({"n_neighbors": 0}, "n_neighbors must be at least 1; got n_neighbors=0."),
        (
            {"n_neighbors": 3, "reduction": "tsne"},
            "reduction must be one of [None, 'pca', 'umap']; got reduction='tsne'.",
        ),
        (
            {"n_neighbors": 3, "method": "faiss"},
            "method must be one of ['auto', 'exact', 'approximate']; got method='faiss'.",
        ),
        (
            {"n_neighbors": 3, "reduction": "pca", "n_components": 13},
            "n_components=13 is out of range for reduction='pca': it must be between 1 and "
            "min(n_samples, n_features) = 12.",
        ),
        (
            {"n_neighbors": 3, "reduction": "umap", "n_components": 0},
            "n_components=0 is out of range for reduction='umap': it must be between 1 and "
            "min(n_samples - 1, n_features) = 12.",
        ),
        (
            {"n_neighbors": 3, "n_components": 2},
            "n_components=2 needs a reduction ('pca' or 'umap'); got reduction=None.",
        ),
        ({"n_neighbors": 3, "chunk_size": 0}, "chunk_size must be at least 1; got chunk_size=0."),
    ],
)
def test_parameter_errors(points, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_knn_graph(points, **kwargs)


def test_embedding_errors(points):
    bad = points.copy()
    bad[3, 2] = np.nan
    message = (
        "embeddings contains NaN or infinite values; the graph needs finite embeddings "
        "(check the network's outputs after warm-up)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        build_knn_graph(bad, 3)
    message = (
        "embeddings must be a 2-D array of shape (n_samples, n_features); got an array with "
        "ndim=1 and shape (300,)."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        build_knn_graph(points[:, 0], 3)
    with pytest.raises(ValueError, match=re.escape("embeddings must be numeric; got dtype <U1.")):
        build_knn_graph(np.array([["a", "b"], ["c", "d"]]), 1)
    message = "embeddings must have at least one feature; got shape (4, 0)."
    with pytest.raises(ValueError, match=re.escape(message)):
        build_knn_graph(np.zeros((4, 0)), 1)
    with pytest.raises(TypeError, match=re.escape("n_neighbors must be an int; got 3.0.")):
        build_knn_graph(points, 3.0)


def test_auto_falls_back_to_exact_without_pynndescent(monkeypatch, points):
    monkeypatch.setattr(knn_module, "AUTO_EXACT_MAX_SAMPLES", 100)
    real_find_spec = knn_module.importlib.util.find_spec
    monkeypatch.setattr(
        knn_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "pynndescent" else real_find_spec(name, *a),
    )
    message = (
        "method='auto' would search the 300 rows approximately, but pynndescent is not "
        "installed (pip install pynndescent); falling back to the exact search, whose time "
        "grows with n_samples squared."
    )
    with pytest.warns(RuntimeWarning, match=re.escape(message)):
        neighbors = build_knn_graph(points, 4)
    # integer indices: the fallback is the exact search, the same call
    np.testing.assert_array_equal(neighbors, build_knn_graph(points, 4, method="exact"))


def test_a_deadline_makes_auto_search_exactly_at_any_size(monkeypatch):
    """Only the exact search can stop on time: under a deadline, auto never calls the
    approximate search (a cold one compiles for about 35 s first)."""
    data = _clustered(600, 8, seed=2)
    monkeypatch.setattr(knn_module, "AUTO_EXACT_MAX_SAMPLES", 500)

    def refuse(*args, **kwargs):
        raise AssertionError("the approximate search ran under a deadline")

    monkeypatch.setattr(knn_module, "approximate_neighbours", refuse)
    later = time.perf_counter() + 3600
    # integer indices of the same exact search: equal
    np.testing.assert_array_equal(
        build_knn_graph(data, 5, deadline=later), build_knn_graph(data, 5, method="exact")
    )


@pytest.mark.parametrize("method", ["exact", "approximate", "auto"])
def test_a_search_past_its_deadline_raises_graph_timeout(points, method):
    from nescal_sklearn.exceptions import GraphTimeout, NeSCalError

    past = time.perf_counter() - 1.0
    with pytest.raises(
        GraphTimeout, match="^the neighbour search passed its deadline after 0 of its 300 rows$"
    ) as caught:
        build_knn_graph(points, 5, method=method, deadline=past)
    assert isinstance(caught.value, NeSCalError) and isinstance(caught.value, TimeoutError)


def test_the_exact_search_stops_between_blocks_once_its_deadline_passes(points, monkeypatch):
    """A deadline that passes during the search stops it at the next block, not the end."""
    import nescal_sklearn.graph._exact as exact_module
    from nescal_sklearn.exceptions import GraphTimeout

    clock = iter(np.arange(0.0, 100.0))  # one second a reading: past 2.5 at the 4th block
    monkeypatch.setattr(exact_module, "perf_counter", lambda: next(clock))
    with pytest.raises(GraphTimeout, match="after 30 of its 300 rows$"):
        build_knn_graph(points, 5, method="exact", chunk_size=10, deadline=2.5)
