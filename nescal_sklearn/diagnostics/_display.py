"""``DiagnosticDisplay``: draws a diagnostic result; matplotlib is imported only here, lazily."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["DiagnosticDisplay", "plot_diagnostics"]


class DiagnosticDisplay:
    """Figure of one diagnostic result; results drawn on the same axes overlay.

    Build it with a result's ``plot`` method (or :func:`plot_diagnostics` for
    several results); the constructor only stores values. Each kind of result has
    a fixed list of panels (``result.panels``). To compare models, draw the
    second result on the first one's axes: ``other.plot(ax=display.ax_)``;
    reference lines are drawn once per axes, and each model gets one colour.

    Parameters
    ----------
    result : NeighbourConfidenceGap, FisherLaplacianRatio or LabelSmoothingBounds
        What to draw.
    name : str or None, default=None
        Legend name.

    Attributes
    ----------
    ax_ : ndarray of matplotlib Axes, shape (n_panels,)
        One Axes per panel, in the order of ``result.panels``.
    figure_ : matplotlib Figure
        The figure of ``ax_[0]``.
    artists_ : dict
        Panel title -> list of the artists drawn for this result there.
    color_ : color
        The colour of this result in every panel.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from nescal_sklearn.diagnostics import fisher_laplacian_ratio
    >>> result = fisher_laplacian_ratio(synthetic=True, random_state=0, name="synthetic")
    >>> display = result.plot()
    >>> display.ax_.shape, display.ax_[0].get_xscale()
    ((1,), 'log')
    """

    def __init__(self, result: Any, *, name: str | None = None) -> None:
        self.result = result
        self.name = name

    def plot(self, ax: Any = None, *, name: str | None = None, **kwargs: Any) -> DiagnosticDisplay:
        """Draw the result's panels.

        Parameters
        ----------
        ax : matplotlib Axes, array-like of Axes or None, default=None
            One Axes per panel (any shape, read in row-major order; a single Axes
            for a one-panel result); a new one-row figure when None. Pass the
            ``ax_`` of another display to overlay.
        name : str or None, default=None
            Legend name; defaults to the display's ``name``.
        **kwargs : dict
            Matplotlib properties of this result's curves and histograms (e.g.
            ``color``, ``linestyle``, ``linewidth``); the colour is used for its
            points and its reference lines too.

        Returns
        -------
        display : DiagnosticDisplay
            ``self``, with ``ax_``, ``figure_``, ``artists_`` and ``color_`` set.
        """
        import matplotlib.pyplot as plt

        panels = self.result.panels
        if ax is None:
            _, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
        else:
            axes = np.asarray(ax, dtype=object)
        axes = np.ravel(axes)
        if axes.shape[0] != len(panels):
            raise ValueError(
                f"ax must hold {len(panels)} Axes for {type(self.result).__name__} (panels "
                f"{list(panels)}); got {axes.shape[0]}."
            )
        name = self.name if name is None else name
        self.artists_, self.color_ = self.result._draw(axes, name, dict(kwargs))
        for axis in axes:
            handles, _ = axis.get_legend_handles_labels()
            if handles:
                axis.legend(loc="best", fontsize="small")
        self.ax_ = axes
        self.figure_ = axes[0].figure
        return self


def plot_diagnostics(
    results: Mapping[str, Any], *, ax: Any = None, **kwargs: Any
) -> list[DiagnosticDisplay]:
    """Draw several results of the same diagnostic on the same axes (e.g. NeSCal vs CE).

    Parameters
    ----------
    results : mapping of str to result
        Legend name -> result, all of one kind (all from
        :func:`neighbour_confidence_gap`, say), drawn in order.
    ax : matplotlib Axes, array-like of Axes or None, default=None
        Axes for the first result (see :meth:`DiagnosticDisplay.plot`); a new figure
        when None.
    **kwargs : dict
        Passed to every :meth:`DiagnosticDisplay.plot`.

    Returns
    -------
    displays : list of DiagnosticDisplay
        One per result, all sharing ``ax_``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from nescal_sklearn.diagnostics import neighbour_confidence_gap, plot_diagnostics
    >>> edges = np.array([[0, 1], [1, 2]])
    >>> smooth = neighbour_confidence_gap(
    ...     proba=[[0.6, 0.4], [0.55, 0.45], [0.5, 0.5]], edges=edges)
    >>> sharp = neighbour_confidence_gap(proba=[[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]], edges=edges)
    >>> displays = plot_diagnostics({"smooth": smooth, "sharp": sharp})
    >>> list(displays[0].ax_) == list(displays[1].ax_), displays[0].color_ != displays[1].color_
    (True, True)
    """
    if not isinstance(results, Mapping) or not results:
        raise ValueError(
            "results must be a non-empty mapping of legend name -> result; got "
            f"{type(results).__name__} {results!r}."
        )
    kinds = sorted({type(result).__name__ for result in results.values()})
    if len(kinds) > 1:
        raise ValueError(f"results must all be of one kind to share axes; got {kinds}.")
    displays = []
    for name, result in results.items():
        display = DiagnosticDisplay(result, name=name).plot(ax=ax, **kwargs)
        ax = display.ax_
        displays.append(display)
    return displays


# -- drawing helpers shared by the results ------------------------------------------------


def draw_reference(axis: Any, label: str, draw: Any) -> None:
    """Call ``draw(axis)`` (which must label its artist ``label``) once per axes."""
    if not any(artist.get_label() == label for artist in [*axis.get_lines(), *axis.collections]):
        draw(axis)


def draw_ecdf(axis: Any, values: np.ndarray, name: str | None, style: dict, *, log: bool) -> Any:
    """Empirical CDF of ``values`` (all of them count; on a log axis 0s sit off its left)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    fraction = np.arange(1, len(ordered) + 1) / len(ordered)
    if log:
        keep = ordered > 0
        ordered, fraction = ordered[keep], fraction[keep]
        if len(ordered):
            axis.set_xscale("log")
    (line,) = axis.step(ordered, fraction, where="post", label=name, **style)
    axis.set_ylim(0.0, 1.02)
    axis.set_ylabel("Fraction of edges ≤ x")
    return line


def scatter_sample(n: int, max_points: int) -> np.ndarray:
    """At most ``max_points`` of ``range(n)``, the same ones on every call."""
    if n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, size=max_points, replace=False))


def fit_square_limits(axis: Any) -> None:
    """``[0, top]`` on both axes, ``top`` just above every point drawn there (all overlays)."""
    offsets = [np.asarray(c.get_offsets(), dtype=float) for c in axis.collections]
    offsets = [o for o in offsets if o.size]
    top = max((float(np.max(o)) for o in offsets), default=0.0)
    top = top * 1.05 if top > 0 else 1.0
    axis.set_xlim(0.0, top)
    axis.set_ylim(0.0, top)
