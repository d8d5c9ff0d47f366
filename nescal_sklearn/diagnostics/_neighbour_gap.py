"""Neighbour confidence gap: |max p − max q| ≤ TV(p, q) ≤ √(2 JS(p, q)) on a model's kNN edges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._display import (
    DiagnosticDisplay,
    draw_ecdf,
    draw_reference,
    fit_square_limits,
    scatter_sample,
)
from ._divergence import confidence_gap, jensen_shannon, total_variation
from ._pairs import edge_pairs
from ._validation import check_nonnegative_real, check_values

__all__ = ["NeighbourConfidenceGap", "neighbour_confidence_gap"]

#: Default round-off allowance of the bound checks (see :func:`neighbour_confidence_gap`).
DEFAULT_TOL = 1e-12
_DIAGONAL_LABEL = "y = x (the bound)"
_MAX_POINTS = 5000


def _within(lhs: np.ndarray, rhs: np.ndarray, tol: float) -> np.ndarray:
    return lhs <= rhs * (1.0 + tol) + tol


def _median_ratio(numerator: np.ndarray, denominator: np.ndarray) -> float:
    positive = denominator > 0
    if not np.any(positive):
        return float("nan")
    return float(np.median(numerator[positive] / denominator[positive]))


@dataclass(frozen=True, eq=False, repr=False)
class NeighbourConfidenceGap:
    """Per-edge confidence gaps, total variations and JS divergences, and their summary.

    Returned by :func:`neighbour_confidence_gap`; the arrays are read-only.

    Attributes
    ----------
    edges : ndarray of shape (n_edges, 2), int64
        ``(i, j)``: row ``i`` of the rows, row ``j`` of the reference rows (the rows
        themselves when there are none).
    confidence_gap : ndarray of shape (n_edges,)
        ``g = |max_c p_c - max_c q_c|``.
    total_variation : ndarray of shape (n_edges,)
        ``TV = ½ Σ_c |p_c - q_c|``.
    js : ndarray of shape (n_edges,)
        ``JS(p, q)`` in nats (computed, or the values passed as ``js``).
    js_bound : ndarray of shape (n_edges,)
        ``b = √(2 JS)``.
    tol : float
        Round-off allowance: an edge meets a bound ``lhs ≤ rhs`` when
        ``lhs ≤ (1 + tol) rhs + tol``.
    name : str or None
        Legend name.
    panels : tuple of str
        Class attribute: the panels :meth:`plot` draws.
    """

    edges: np.ndarray
    confidence_gap: np.ndarray
    total_variation: np.ndarray
    js: np.ndarray
    js_bound: np.ndarray
    tol: float = DEFAULT_TOL
    name: str | None = None

    panels: ClassVar[tuple[str, ...]] = (
        "neighbour JS",
        "confidence gap",
        "gap vs TV",
        "TV vs √(2 JS)",
    )

    @property
    def n_edges(self) -> int:
        """Number of edges."""
        return int(len(self.edges))

    @property
    def fraction_gap_within_tv(self) -> float:
        """Fraction of edges with ``g ≤ TV`` (up to ``tol``): 1 for true distributions."""
        return float(np.mean(_within(self.confidence_gap, self.total_variation, self.tol)))

    @property
    def fraction_tv_within_bound(self) -> float:
        """Fraction of edges with ``TV ≤ √(2 JS)`` (up to ``tol``): 1 for the true JS."""
        return float(np.mean(_within(self.total_variation, self.js_bound, self.tol)))

    @property
    def median_gap_over_tv(self) -> float:
        """Tightness of the first bound: median of ``g / TV`` over edges with ``TV > 0``."""
        return _median_ratio(self.confidence_gap, self.total_variation)

    @property
    def median_tv_over_bound(self) -> float:
        """Tightness of the second bound: median of ``TV / b`` over edges with ``b > 0``."""
        return _median_ratio(self.total_variation, self.js_bound)

    @property
    def max_gap_excess(self) -> float:
        """``max(g - TV)`` over edges: ≤ 0 up to round-off when the first bound holds."""
        return float(np.max(self.confidence_gap - self.total_variation))

    @property
    def max_tv_excess(self) -> float:
        """``max(TV - b)`` over edges: ≤ 0 up to round-off when the second bound holds."""
        return float(np.max(self.total_variation - self.js_bound))

    @property
    def summary(self) -> dict[str, float]:
        """The scalar findings, by name (also ``mean_js``, ``median_js``, ``mean_gap``)."""
        return {
            "n_edges": self.n_edges,
            "fraction_gap_within_tv": self.fraction_gap_within_tv,
            "fraction_tv_within_bound": self.fraction_tv_within_bound,
            "median_gap_over_tv": self.median_gap_over_tv,
            "median_tv_over_bound": self.median_tv_over_bound,
            "max_gap_excess": self.max_gap_excess,
            "max_tv_excess": self.max_tv_excess,
            "mean_js": float(np.mean(self.js)),
            "median_js": float(np.median(self.js)),
            "mean_gap": float(np.mean(self.confidence_gap)),
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, n_edges={self.n_edges}, "
            f"fraction_gap_within_tv={self.fraction_gap_within_tv:.4g}, "
            f"fraction_tv_within_bound={self.fraction_tv_within_bound:.4g}, "
            f"median_gap_over_tv={self.median_gap_over_tv:.4g}, "
            f"median_tv_over_bound={self.median_tv_over_bound:.4g})"
        )

    def plot(self, ax: Any = None, *, name: str | None = None, **kwargs: Any) -> DiagnosticDisplay:
        """Draw ECDFs of the neighbour JS and the confidence gap, and the two bounds.

        Panels (see ``panels``): the ECDF of JS and of ``g`` over edges (log x),
        ``g`` against ``TV`` and ``TV`` against ``√(2 JS)`` (at most 5,000 edges
        each, the same ones for every call), with the line ``y = x``: every point
        lies on or below it when the bounds hold.

        Parameters
        ----------
        ax : array-like of 4 matplotlib Axes or None, default=None
            See :meth:`DiagnosticDisplay.plot`; pass another display's ``ax_`` to
            overlay (e.g. NeSCal and cross-entropy on the same data).
        name : str or None, default=None
            Legend name; defaults to ``self.name``.
        **kwargs : dict
            Matplotlib properties of the ECDF curves (``color`` colours the points).

        Returns
        -------
        display : DiagnosticDisplay

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from nescal_sklearn.diagnostics import neighbour_confidence_gap
        >>> gap = neighbour_confidence_gap(
        ...     proba=[[0.7, 0.2, 0.1], [0.5, 0.3, 0.2]], edges=[[0, 1]], name="m")
        >>> display = gap.plot()
        >>> [axis.get_title() for axis in display.ax_]
        ['neighbour JS', 'confidence gap', 'gap vs TV', 'TV vs √(2 JS)']
        """
        return DiagnosticDisplay(self, name=self.name).plot(ax=ax, name=name, **kwargs)

    def _draw(self, axes: np.ndarray, name: str | None, style: dict) -> tuple[dict, Any]:
        js_axis, gap_axis, tv_axis, bound_axis = axes
        js_line = draw_ecdf(js_axis, self.js, name, style, log=True)
        color = js_line.get_color()
        style = {**style, "color": color}
        gap_line = draw_ecdf(gap_axis, self.confidence_gap, name, style, log=True)
        js_axis.set(title=self.panels[0], xlabel="JS(p_i, p_j) (nats)")
        gap_axis.set(title=self.panels[1], xlabel="|max p_i − max p_j|")
        shown = scatter_sample(self.n_edges, _MAX_POINTS)
        points = {}
        for axis, x, y, title, labels in (
            (
                tv_axis,
                self.total_variation,
                self.confidence_gap,
                self.panels[2],
                ("TV(p_i, p_j)", "|max p_i − max p_j|"),
            ),
            (
                bound_axis,
                self.js_bound,
                self.total_variation,
                self.panels[3],
                ("√(2 JS(p_i, p_j))", "TV(p_i, p_j)"),
            ),
        ):
            points[title] = axis.scatter(
                x[shown], y[shown], s=8, alpha=0.4, color=color, label=name, linewidths=0
            )
            draw_reference(
                axis,
                _DIAGONAL_LABEL,
                lambda a: a.axline((0.0, 0.0), slope=1.0, color="k", ls=":", label=_DIAGONAL_LABEL),
            )
            axis.set(title=title, xlabel=labels[0], ylabel=labels[1])
            fit_square_limits(axis)
        artists = {
            self.panels[0]: [js_line],
            self.panels[1]: [gap_line],
            self.panels[2]: [points[self.panels[2]]],
            self.panels[3]: [points[self.panels[3]]],
        }
        return artists, color


def neighbour_confidence_gap(
    estimator: Any = None,
    X: Any = None,
    *,
    proba: Any = None,
    embeddings: Any = None,
    edges: Any = None,
    n_neighbors: int = 10,
    reference_X: Any = None,
    reference_proba: Any = None,
    reference_embeddings: Any = None,
    js: Any = None,
    tol: float = DEFAULT_TOL,
    random_state: int | None = None,
    name: str | None = None,
) -> NeighbourConfidenceGap:
    """Check ``|max p_i − max p_j| ≤ TV(p_i, p_j) ≤ √(2 JS(p_i, p_j))`` on a model's kNN edges.

    DESIGN.md's neighbour confidence gap: for any two distributions the gap in top
    confidence is at most their total variation (the top class of one is a class
    of the other), and the total variation is at most ``√(2 JS)`` (Pinsker on each
    half of JS, with ``TV(p, m) = TV(p, q) / 2`` for ``m = (p + q) / 2``; JS in
    nats). So a small NeSCal penalty on an edge bounds how far two neighbours'
    confidences can differ. Both inequalities are theorems: a fraction below 1
    means the inputs are not distributions, or ``js`` is not their JS. The
    medians of ``g / TV`` and ``TV / b`` say how tight each bound is on the model.

    The graph: with an estimator, the rows ``X`` are embedded by the fitted network
    (the input of its ``embedding_layer``, as NeSCal's graph) and joined to their
    ``n_neighbors`` most cosine-similar other rows
    (:func:`~nescal_sklearn.graph.build_knn_graph`) — the graph is rebuilt on the
    fitted model, the estimator does not keep the one of training. With
    ``reference_X`` (e.g. ``X`` test rows, ``reference_X`` the training rows), each
    row of ``X`` is joined instead to its nearest reference rows (exact search).
    Probabilities are ``predict_proba``. Without an estimator, pass the same
    things as arrays.

    Parameters
    ----------
    estimator : NeSCalClassifier, Pipeline ending in one, or None, default=None
        A fitted model; None to pass arrays.
    X : array-like of shape (n_samples, n_features) or None, default=None
        Rows to check (with an estimator), as given to ``estimator.predict_proba``.
    proba : array-like of shape (n_samples, n_classes) or None, default=None
        Without an estimator: the rows' predicted distributions. Rows must sum to 1
        within 1e-5 and are renormalised in float64.
    embeddings : array-like of shape (n_samples, n_features) or None, default=None
        Without an estimator and without ``edges``: the rows' embeddings, for the
        cosine kNN graph.
    edges : array-like of shape (n_edges, 2) or None, default=None
        The graph itself, ``(i, j)`` per row (``j`` indexes the reference rows when
        there are some); overrides the kNN search (e.g. NeSCal's training graph,
        or a random graph). Usable with an estimator too.
    n_neighbors : int, default=10
        Neighbours per row of the kNN graph.
    reference_X : array-like of shape (n_reference, n_features) or None, default=None
        With an estimator: rows that ``X`` is joined to (instead of to itself).
    reference_proba, reference_embeddings : array-like or None, default=None
        Without an estimator: the reference rows' distributions and embeddings.
    js : array-like of shape (n_edges,) or None, default=None
        Per-edge JS values to check instead of computing them (e.g. a penalty's
        own float32 values); needs ``edges``.
    tol : float, default=1e-12
        Round-off allowance: an edge meets ``lhs ≤ rhs`` when
        ``lhs ≤ (1 + tol) rhs + tol``.
    random_state : int or None, default=None
        Seed of the approximate kNN search (above 20,000 rows).
    name : str or None, default=None
        Legend name of the plots.

    Returns
    -------
    NeighbourConfidenceGap
        Per-edge arrays and the summary.

    Warns
    -----
    UserWarning
        When rows of the embeddings that the kNN graph is built on are all zero: their
        cosine similarity to every row is 0, so their neighbours are arbitrary. Zero
        rows are allowed (the graph builders accept them), but their edges say nothing
        about the model.

    Examples
    --------
    Two 3-class distributions: ``g = TV = 0.2`` and ``b = √(2 · 0.0219) ≈ 0.209``.

    >>> from nescal_sklearn.diagnostics import neighbour_confidence_gap
    >>> gap = neighbour_confidence_gap(proba=[[0.7, 0.2, 0.1], [0.5, 0.3, 0.2]], edges=[[0, 1]])
    >>> gap.confidence_gap.round(6), gap.total_variation.round(6), gap.js_bound.round(3)
    (array([0.2]), array([0.2]), array([0.209]))
    >>> gap.fraction_gap_within_tv, gap.fraction_tv_within_bound
    (1.0, 1.0)

    On a fitted model, its training rows among themselves:

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from nescal_sklearn import NeSCalClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = NeSCalClassifier("ce", hidden_sizes=(8,), max_epochs=3, random_state=0).fit(X, y)
    >>> gap = neighbour_confidence_gap(clf, X, n_neighbors=5)
    >>> gap.n_edges, gap.fraction_gap_within_tv, gap.fraction_tv_within_bound
    (750, 1.0, 1.0)
    """
    tol = check_nonnegative_real(tol, "tol")
    if js is not None and edges is None:
        raise ValueError("js holds one value per edge and needs edges; got edges=None.")
    p, q, edges = edge_pairs(
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
    if js is None:
        divergence = jensen_shannon(p, q)
    else:
        divergence = check_values(js, "js", len(edges))
        if np.any(divergence < 0):
            raise ValueError(f"js must be non-negative; got {float(divergence.min())!r}.")
    arrays = [
        edges,
        confidence_gap(p, q),
        total_variation(p, q),
        divergence,
        np.sqrt(2.0 * divergence),
    ]
    for array in arrays:
        array.setflags(write=False)
    return NeighbourConfidenceGap(*arrays, tol=tol, name=name)
