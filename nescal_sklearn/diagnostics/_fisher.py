"""Local Fisher–Laplacian form: JS(p, p + δ) / (⅛ Σ_c δ_c² / p_c) → 1 as ‖δ‖ → 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._display import DiagnosticDisplay, draw_reference, scatter_sample
from ._divergence import (
    fisher_quadratic,
    jensen_shannon,
    l2_distance,
    relative_distance,
    total_variation,
)
from ._pairs import edge_pairs
from ._validation import check_proba

__all__ = [
    "BASES",
    "DISTANCES",
    "FisherLaplacianRatio",
    "fisher_laplacian_ratio",
    "perturbed_pairs",
]

#: Accepted values of ``base`` in :func:`fisher_laplacian_ratio`: the Fisher metric at
#: ``p`` (DESIGN.md's form) or at the midpoint ``m = (p + q) / 2`` (symmetric).
BASES = ("p", "mean")
#: Accepted values of ``distance``: ``‖p − q‖₂``, ``TV = ½ ‖p − q‖₁``, or the relative
#: size ``max_c |p_c − q_c| / base_c`` that controls the expansion's error.
DISTANCES = ("l2", "tv", "relative")

_ONE_LABEL = "ratio = 1"
_MAX_POINTS = 5000
_DEFAULT_SCALES = np.logspace(-4, -0.5, 20)


def perturbed_pairs(
    scales: Any = None,
    *,
    n_classes: int = 3,
    n_per_scale: int = 10,
    random_state: int | np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Random pairs ``(p, q = p + δ)`` with ``‖δ‖`` proportional to each scale.

    ``p ~ Dirichlet(1, …, 1)``; ``q_c = p_c (1 + s z_c)`` with ``z = u − Σ_c p_c u_c``
    (``u`` uniform on [−1, 1]^K), rescaled to ``max_c |z_c| = 1``, so ``q`` sums to 1,
    keeps ``p``'s support, is non-negative for every scale ``s ≤ 1``, and
    ``max_c |q_c − p_c| / p_c = s`` (the ``distance="relative"`` of
    :func:`fisher_laplacian_ratio`).

    Parameters
    ----------
    scales : array-like of float in (0, 1] or None, default=None
        Perturbation sizes ``s``; None: ``np.logspace(-4, -0.5, 20)``.
    n_classes : int, default=3
        Number of classes ``K >= 2``.
    n_per_scale : int, default=10
        Pairs per scale.
    random_state : int, Generator or None, default=None
        Seed.

    Returns
    -------
    p, q : ndarray of shape (len(scales) * n_per_scale, n_classes)
        The pairs, scale by scale.

    Examples
    --------
    >>> from nescal_sklearn.diagnostics import perturbed_pairs
    >>> p, q = perturbed_pairs([1e-3, 1e-1], n_per_scale=2, random_state=0)
    >>> p.shape, bool(abs(q.sum(axis=1) - 1).max() < 1e-12), bool((q > 0).all())
    ((4, 3), True, True)
    """
    scales = _DEFAULT_SCALES if scales is None else np.asarray(scales, dtype=np.float64)
    if scales.ndim != 1 or scales.size == 0 or not np.all((scales > 0) & (scales <= 1)):
        raise ValueError(
            f"scales must be a non-empty 1-D array of values in (0, 1]; got {scales!r}."
        )
    for value, what, low in ((n_classes, "n_classes", 2), (n_per_scale, "n_per_scale", 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{what} must be an integer >= {low}; got {what}={value!r}.")
    rng = np.random.default_rng(random_state)
    n_pairs = scales.size * n_per_scale
    p = rng.dirichlet(np.ones(n_classes), size=n_pairs)
    u = rng.uniform(-1.0, 1.0, size=(n_pairs, n_classes))
    z = u - np.sum(p * u, axis=1, keepdims=True)
    z /= np.max(np.abs(z), axis=1, keepdims=True)
    s = np.repeat(scales, n_per_scale)[:, None]
    q = p * (1.0 + s * z)
    return p, q / q.sum(axis=1, keepdims=True)


@dataclass(frozen=True, eq=False, repr=False)
class FisherLaplacianRatio:
    """Per-pair ``JS / (⅛ Σ δ²/base)`` against ``‖p − q‖``, and the summary.

    Returned by :func:`fisher_laplacian_ratio`; the arrays are read-only.

    Attributes
    ----------
    distance : ndarray of shape (n_pairs,)
        ``‖p − q‖₂``, ``TV(p, q)`` or ``max_c |p_c − q_c| / base_c`` (see
        ``distance_metric``).
    js : ndarray of shape (n_pairs,)
        ``JS(p, q)`` in nats.
    quadratic : ndarray of shape (n_pairs,)
        ``⅛ Σ_c (p_c − q_c)² / base_c``; NaN where the form is undefined
        (``base_c = 0 < |p_c − q_c|``).
    ratio : ndarray of shape (n_pairs,)
        ``js / quadratic``; NaN where the quadratic is NaN or 0 (``p = q``).
    edges : ndarray of shape (n_pairs, 2) or None
        The graph's edges, when the pairs came from one.
    base : {"p", "mean"}
        Where the Fisher metric is taken.
    distance_metric : {"l2", "tv", "relative"}
        What ``distance`` measures.
    name : str or None
        Legend name.
    panels : tuple of str
        Class attribute: the panels :meth:`plot` draws.
    """

    distance: np.ndarray
    js: np.ndarray
    quadratic: np.ndarray
    ratio: np.ndarray
    edges: np.ndarray | None = None
    base: str = "p"
    distance_metric: str = "l2"
    name: str | None = None

    panels: ClassVar[tuple[str, ...]] = ("JS / Fisher quadratic",)

    @property
    def valid(self) -> np.ndarray:
        """Boolean mask of the pairs with a defined ratio."""
        return np.isfinite(self.ratio)

    @property
    def n_pairs(self) -> int:
        """Number of pairs."""
        return int(len(self.ratio))

    @property
    def n_skipped(self) -> int:
        """Pairs without a ratio (``p = q``, or ``base_c = 0 < |δ_c|``)."""
        return int(self.n_pairs - np.count_nonzero(self.valid))

    def _median_index(self) -> int | None:
        valid = np.flatnonzero(self.valid)
        if not len(valid):
            return None
        ordered = valid[np.argsort(self.distance[valid], kind="stable")]
        return int(ordered[(len(ordered) - 1) // 2])

    @property
    def median_distance(self) -> float:
        """Distance of the median pair by distance (lower median), among valid pairs."""
        index = self._median_index()
        return float("nan") if index is None else float(self.distance[index])

    @property
    def ratio_at_median_distance(self) -> float:
        """The ratio of that pair: how close to 1 a typical edge of the graph is."""
        index = self._median_index()
        return float("nan") if index is None else float(self.ratio[index])

    @property
    def ratio_at_min_distance(self) -> float:
        """The ratio of the closest valid pair."""
        valid = np.flatnonzero(self.valid)
        if not len(valid):
            return float("nan")
        return float(self.ratio[valid[np.argmin(self.distance[valid])]])

    @property
    def median_ratio(self) -> float:
        """Median ratio over valid pairs."""
        return (
            float(np.median(self.ratio[self.valid]))
            if self.n_skipped < self.n_pairs
            else float("nan")
        )

    @property
    def summary(self) -> dict[str, float]:
        """The scalar findings, by name."""
        return {
            "n_pairs": self.n_pairs,
            "n_skipped": self.n_skipped,
            "median_distance": self.median_distance,
            "ratio_at_median_distance": self.ratio_at_median_distance,
            "ratio_at_min_distance": self.ratio_at_min_distance,
            "median_ratio": self.median_ratio,
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, base={self.base!r}, "
            f"n_pairs={self.n_pairs}, n_skipped={self.n_skipped}, "
            f"median_distance={self.median_distance:.4g}, "
            f"ratio_at_median_distance={self.ratio_at_median_distance:.4g})"
        )

    def plot(self, ax: Any = None, *, name: str | None = None, **kwargs: Any) -> DiagnosticDisplay:
        """Scatter the ratio against the distance (log x), with the line ``ratio = 1``.

        At most 5,000 valid pairs are drawn (the same ones on every call); the
        median pair by distance is ringed.

        Parameters
        ----------
        ax : matplotlib Axes or None, default=None
            See :meth:`DiagnosticDisplay.plot`.
        name : str or None, default=None
            Legend name; defaults to ``self.name``.
        **kwargs : dict
            Matplotlib properties of the points (``color``, ``marker``, ``s``, ...).

        Returns
        -------
        display : DiagnosticDisplay
        """
        return DiagnosticDisplay(self, name=self.name).plot(ax=ax, name=name, **kwargs)

    def _draw(self, axes: np.ndarray, name: str | None, style: dict) -> tuple[dict, Any]:
        (axis,) = axes
        shown = np.flatnonzero(self.valid & (self.distance > 0) & np.isfinite(self.distance))
        shown = shown[scatter_sample(len(shown), _MAX_POINTS)]
        style = {"s": 10, "alpha": 0.6, "linewidths": 0, **style}
        points = axis.scatter(self.distance[shown], self.ratio[shown], label=name, **style)
        color = points.get_facecolor()[0]
        artists = [points]
        index = self._median_index()
        if index is not None and self.distance[index] > 0:
            artists.append(
                axis.scatter(
                    [self.distance[index]],
                    [self.ratio[index]],
                    s=80,
                    facecolors="none",
                    edgecolors=[color],
                    linewidths=1.5,
                )
            )
        draw_reference(
            axis, _ONE_LABEL, lambda a: a.axhline(1.0, color="k", ls=":", label=_ONE_LABEL)
        )
        if len(shown):
            axis.set_xscale("log")
        base = "p_c" if self.base == "p" else "m_c"
        x_label = {
            "l2": "‖p − q‖₂",
            "tv": "TV(p, q)",
            "relative": f"max_c |p_c − q_c| / {base}",
        }[self.distance_metric]
        axis.set(
            title=self.panels[0],
            xlabel=x_label,
            ylabel=f"JS(p, q) / (⅛ Σ (p_c − q_c)² / {base})",
        )
        return {self.panels[0]: artists}, color


def fisher_laplacian_ratio(
    estimator: Any = None,
    X: Any = None,
    *,
    p: Any = None,
    q: Any = None,
    proba: Any = None,
    embeddings: Any = None,
    edges: Any = None,
    n_neighbors: int = 10,
    reference_X: Any = None,
    reference_proba: Any = None,
    reference_embeddings: Any = None,
    synthetic: bool = False,
    scales: Any = None,
    n_classes: int = 3,
    n_per_scale: int = 10,
    base: str = "p",
    distance: str = "l2",
    random_state: int | None = None,
    name: str | None = None,
) -> FisherLaplacianRatio:
    """Check that ``JS(p, q) / (⅛ Σ_c (p_c − q_c)² / p_c)`` tends to 1 as ``q → p``.

    DESIGN.md's local Fisher–Laplacian form: ``JS(p, p + δ) = ⅛ Σ_c δ_c² / p_c +
    O(‖δ‖³)``, so near agreement NeSCal's penalty on a graph is a graph-Laplacian
    quadratic form under the Fisher information metric. This computes the ratio
    for each pair and its distance; on a model's graph the ratio at the median
    edge says whether its edges are in that local regime.

    The quadratic is not symmetric in ``p`` and ``q``: ``base="p"`` (the default,
    DESIGN.md's form) divides by the *first* distribution of each pair — ``p_i``,
    the row, for a graph edge ``(i, j)`` — and its ratio is ``1 + O(‖δ‖)``;
    ``base="mean"`` divides by ``m = (p + q) / 2``, is symmetric, and its ratio is
    ``1 + O(‖δ‖²)`` (JS's expansion around the midpoint has no cubic term).
    Classes with ``base_c = 0`` and ``p_c = q_c`` are dropped from the sum; a pair
    with ``base_c = 0 < |δ_c|`` has no local form (the quadratic is infinite while
    JS is finite) and, like a pair with ``p = q``, gets a NaN ratio, is left out of
    the summary and counted in ``n_skipped``. JS is summed as ``¼ Σ_c s_c h(r_c)`` with
    ``s = p + q``, ``r = (p − q) / s`` and ``h(r) = (1 + r) log(1 + r) + (1 − r) log(1 − r)``
    taken from its series ``r² + r⁴/6 + …`` for small ``|r|``: every term is
    non-negative, nothing cancels, and the ratio stays accurate for tiny ``‖δ‖``.

    Pairs come from exactly one source: a fitted estimator and ``X`` (its kNN
    graph, as in :func:`neighbour_confidence_gap`), arrays ``proba`` with
    ``edges`` or ``embeddings`` (likewise), the pairs ``p`` and ``q`` themselves,
    or ``synthetic=True`` (:func:`perturbed_pairs`).

    Parameters
    ----------
    estimator : NeSCalClassifier, Pipeline ending in one, or None, default=None
        A fitted model.
    X : array-like of shape (n_samples, n_features) or None, default=None
        Its rows.
    p, q : array-like of shape (n_pairs, n_classes) or None, default=None
        Pairs of distributions given directly (``base="p"`` divides by ``p``).
    proba, embeddings, edges, n_neighbors, reference_X, reference_proba, reference_embeddings
        The graph and its distributions, see :func:`neighbour_confidence_gap`.
    synthetic : bool, default=False
        Use :func:`perturbed_pairs` with ``scales``, ``n_classes``, ``n_per_scale``
        and ``random_state``.
    scales : array-like or None, default=None
        Perturbation sizes of ``synthetic=True`` (default ``np.logspace(-4, -0.5, 20)``).
    n_classes, n_per_scale : int, default=3, 10
        Shape of the synthetic pairs.
    base : {"p", "mean"}, default="p"
        Where the Fisher metric is taken, see above.
    distance : {"l2", "tv", "relative"}, default="l2"
        The x axis: ``‖p − q‖₂``, ``TV(p, q)``, or ``max_c |p_c − q_c| / base_c``
        (``inf`` where ``base_c = 0 < |δ_c|``). On a trained model the last is the
        one to read: classes with tiny ``p_c`` make ``δ_c / p_c`` large while ``‖δ‖``
        is tiny, so against ``‖δ‖`` the ratio of confident neighbours spreads far
        from 1 even at small distances, whereas it tends to 1 as the relative
        distance does.
    random_state : int or None, default=None
        Seed of the synthetic pairs and of the approximate kNN search.
    name : str or None, default=None
        Legend name.

    Returns
    -------
    FisherLaplacianRatio

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.diagnostics import fisher_laplacian_ratio
    >>> p = np.array([[0.2, 0.3, 0.5]])
    >>> delta = np.array([[1.0, -1.0, 0.0]]) / np.sqrt(2)
    >>> far = fisher_laplacian_ratio(p=p, q=p + 0.1 * delta)
    >>> near = fisher_laplacian_ratio(p=p, q=p + 1e-6 * delta)
    >>> far.ratio.round(3), near.ratio.round(6)
    (array([0.967]), array([0.999999]))
    >>> fisher_laplacian_ratio(p=p, q=p + 0.1 * delta, base="mean").ratio.round(4)
    array([1.0034])
    >>> synthetic = fisher_laplacian_ratio(synthetic=True, random_state=0)
    >>> bool(abs(synthetic.ratio_at_min_distance - 1) < 1e-3)
    True
    """
    if base not in BASES:
        raise ValueError(f"base must be one of {list(BASES)}; got base={base!r}.")
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {list(DISTANCES)}; got distance={distance!r}.")
    graph_given = estimator is not None or proba is not None
    pairs_given = p is not None or q is not None
    sources = [
        label
        for label, used in (
            ("an estimator or proba (a graph)", graph_given),
            ("p and q", pairs_given),
            ("synthetic=True", bool(synthetic)),
        )
        if used
    ]
    if len(sources) != 1:
        raise ValueError(
            "fisher_laplacian_ratio takes pairs from exactly one source: an estimator with X, "
            "proba with edges or embeddings, p and q, or synthetic=True; got "
            + (" and ".join(sources) if sources else "none")
            + "."
        )
    found_edges = None
    if synthetic:
        left, right = perturbed_pairs(
            scales, n_classes=n_classes, n_per_scale=n_per_scale, random_state=random_state
        )
    elif pairs_given:
        if p is None or q is None:
            raise ValueError("p and q must be passed together; got only one of them.")
        left, right = check_proba(p, "p"), check_proba(q, "q")
        if left.shape != right.shape:
            raise ValueError(
                f"p and q must have the same shape (one pair per row); got {left.shape} and "
                f"{right.shape}."
            )
    else:
        left, right, found_edges = edge_pairs(
            estimator,
            X,
            proba=proba,
            embeddings=embeddings,
            edges=edges,
            reference_X=reference_X,
            reference_proba=reference_proba,
            reference_embeddings=reference_embeddings,
            n_neighbors=n_neighbors,
            random_state=random_state,
        )
    divergence = jensen_shannon(left, right)
    metric_base = left if base == "p" else 0.5 * (left + right)
    quadratic = fisher_quadratic(left, right, metric_base)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(quadratic > 0, divergence / quadratic, np.nan)
    if distance == "l2":
        measured = l2_distance(left, right)
    elif distance == "tv":
        measured = total_variation(left, right)
    else:
        measured = relative_distance(left, right, metric_base)
    arrays = [measured, divergence, quadratic, ratio]
    for array in [*arrays, found_edges]:
        if array is not None:
            array.setflags(write=False)
    return FisherLaplacianRatio(
        *arrays, edges=found_edges, base=base, distance_metric=distance, name=name
    )
