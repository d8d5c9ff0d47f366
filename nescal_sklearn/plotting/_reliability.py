"""Reliability diagrams as a scikit-learn style Display; matplotlib is imported lazily."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._params import plain
from ..metrics import (
    ReliabilityBand,
    ReliabilityCurve,
    bootstrap_reliability_band,
    classwise_reliability_curves,
    ece_from_curve,
    reliability_curve,
)

__all__ = ["ReliabilityDisplay", "plot_classwise_reliability"]

_REF_LINE_LABEL = "Perfectly calibrated"
_HISTOGRAM_LABEL = "reliability histogram"
# Name of the attribute that links a main Axes to the bin-count Axes drawn below it, so
# that displays overlaid on one Axes share one histogram. The link lives on the Axes
# (and goes away with its figure), not in this module.
_HISTOGRAM_AXES_ATTR = "_nescal_reliability_histogram_axes"


class ReliabilityDisplay:
    """Reliability diagram: accuracy against confidence per bin, with bin counts below.

    Build it with :meth:`from_estimator` or :meth:`from_predictions`; the
    constructor only stores values. Several displays can be drawn on one ``ax`` to
    compare models: the reference line and the histogram axes are shared. With
    ``n_bootstrap`` resamples, a shaded band shows the pointwise bootstrap interval of
    each bin's observed frequency (:func:`~nescal_sklearn.metrics.bootstrap_reliability_band`).

    Parameters
    ----------
    confidence : ndarray of shape (n_bins,)
        Mean predicted probability per bin (NaN for an empty bin).
    accuracy : ndarray of shape (n_bins,)
        Observed frequency per bin (NaN for an empty bin).
    counts : ndarray of shape (n_bins,)
        Weight (number of rows when unweighted) per bin.
    bin_edges : ndarray of shape (n_bins + 1,), default=None
        Bin edges; needed for the histogram.
    ece : float, default=None
        Expected calibration error, shown in the legend when given.
    estimator_name : str, default=None
        Name in the legend.
    kind : "top_label" or a class label, default="top_label"
        What was binned; only used for the axis labels.
    band_low : ndarray of shape (n_bins,), default=None
        Lower end of the bootstrap band of ``accuracy`` per bin (NaN for an empty
        bin); no band is drawn when None.
    band_high : ndarray of shape (n_bins,), default=None
        Upper end of the band, likewise.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The reliability curve (non-empty bins only).
    band_ : matplotlib PolyCollection or None
        The shaded bootstrap band (``fill_between`` over the non-empty bins, in the
        colour of the curve); None without band.
    ax_ : matplotlib Axes
        Axes with the curve.
    hist_ax_ : matplotlib Axes or None
        Axes with the bin-count histogram, below ``ax_``; None without histogram.
    hist_ : matplotlib StepPatch or None
        The filled histogram of this display.
    figure_ : matplotlib Figure
        Figure holding the axes.

    See Also
    --------
    nescal_sklearn.metrics.reliability_curve : The binning plotted here.
    sklearn.calibration.CalibrationDisplay : The binary counterpart in scikit-learn.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn.plotting import ReliabilityDisplay
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = LogisticRegression(max_iter=1000).fit(X, y)
    >>> display = ReliabilityDisplay.from_estimator(clf, X, y, n_bins=10)
    >>> display.ax_.get_legend().get_texts()[1].get_text().startswith("LogisticRegression (ECE = ")
    True
    """

    def __init__(
        self,
        *,
        confidence: np.ndarray,
        accuracy: np.ndarray,
        counts: np.ndarray,
        bin_edges: np.ndarray | None = None,
        ece: float | None = None,
        estimator_name: str | None = None,
        kind: Any = "top_label",
        band_low: np.ndarray | None = None,
        band_high: np.ndarray | None = None,
    ) -> None:
        self.confidence = confidence
        self.accuracy = accuracy
        self.counts = counts
        self.bin_edges = bin_edges
        self.ece = ece
        self.estimator_name = estimator_name
        self.kind = kind
        self.band_low = band_low
        self.band_high = band_high

    def plot(
        self,
        *,
        ax: Any = None,
        name: str | None = None,
        show_histogram: bool = True,
        ref_line: bool = True,
        **kwargs: Any,
    ) -> ReliabilityDisplay:
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None. Pass the ``ax_`` of another
            display to overlay.
        name : str, default=None
            Legend name; defaults to ``estimator_name``.
        show_histogram : bool, default=True
            Draw the bin counts in a small axes below ``ax`` (shared by displays
            drawn on the same ``ax``).
        ref_line : bool, default=True
            Draw the diagonal ``y = x`` once per ``ax``.
        **kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.plot` for the curve.

        Returns
        -------
        display : ReliabilityDisplay
            ``self``, with ``line_``, ``band_``, ``ax_``, ``hist_ax_``, ``hist_``,
            ``figure_`` set.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import numpy as np
        >>> from nescal_sklearn.plotting import ReliabilityDisplay
        >>> display = ReliabilityDisplay(
        ...     confidence=np.array([0.3, 0.8]), accuracy=np.array([0.25, 0.9]),
        ...     counts=np.array([4.0, 6.0]), bin_edges=np.array([0.0, 0.5, 1.0]),
        ...     ece=0.08, estimator_name="model",
        ... ).plot()
        >>> display.line_.get_label()
        'model (ECE = 8.00%)'
        """
        import matplotlib.pyplot as plt

        if show_histogram and self.bin_edges is None:
            raise ValueError(
                "show_histogram=True needs bin_edges; got bin_edges=None. "
                "Pass bin_edges or show_histogram=False."
            )
        if ax is None:
            _, ax = plt.subplots(figsize=(5.0, 5.5) if show_histogram else (5.0, 4.5))
        name = self.estimator_name if name is None else name

        if ref_line and not any(line.get_label() == _REF_LINE_LABEL for line in ax.get_lines()):
            ax.plot([0, 1], [0, 1], "k:", label=_REF_LINE_LABEL)

        confidence = np.asarray(self.confidence, dtype=float)
        accuracy = np.asarray(self.accuracy, dtype=float)
        nonempty = np.asarray(self.counts, dtype=float) > 0
        line_kwargs = {"marker": "s", "label": _legend_label(name, self.ece)}
        line_kwargs.update(kwargs)
        (self.line_,) = ax.plot(confidence[nonempty], accuracy[nonempty], **line_kwargs)
        self.band_ = None
        if self.band_low is not None and self.band_high is not None:
            self.band_ = ax.fill_between(
                confidence[nonempty],
                np.asarray(self.band_low, dtype=float)[nonempty],
                np.asarray(self.band_high, dtype=float)[nonempty],
                color=self.line_.get_color(),
                alpha=0.2,
                linewidth=0,
            )

        x_label, y_label = _axis_labels(self.kind)
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel=x_label, ylabel=y_label)
        ax.legend(loc="best")

        self.hist_ax_ = None
        self.hist_ = None
        if show_histogram:
            self.hist_ax_ = _histogram_axes(ax)
            ax.set_xlabel("")
            ax.tick_params(labelbottom=False)
            self.hist_ax_.set(xlabel=x_label, ylabel="Count")
            color = self.line_.get_color()
            self.hist_ = self.hist_ax_.stairs(
                self.counts, self.bin_edges, fill=True, alpha=0.3, color=color
            )
            self.hist_ax_.stairs(self.counts, self.bin_edges, color=color)

        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_predictions(
        cls,
        y_true: Any,
        y_proba: Any,
        *,
        n_bins: int = 15,
        strategy: str = "uniform",
        labels: Any = None,
        kind: Any = "top_label",
        sample_weight: Any = None,
        name: str | None = None,
        ax: Any = None,
        show_histogram: bool = True,
        ref_line: bool = True,
        n_bootstrap: int | None = None,
        band_confidence: float = 0.95,
        random_state: Any = None,
        **kwargs: Any,
    ) -> ReliabilityDisplay:
        """Plot a reliability diagram from true labels and predicted probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True class of each row.
        y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
            Predicted probabilities, columns in the order of ``labels``; a 1-D
            array is the probability of the second class of a binary problem.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width bins on [0, 1], or bins holding equal weight.
        labels : array-like of shape (n_classes,), default=None
            The class of each column; defaults to the sorted unique ``y_true``.
        kind : "top_label" or a class label, default="top_label"
            Top-label diagram, or one class against the rest.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row.
        name : str, default=None
            Legend name.
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        show_histogram : bool, default=True
            Draw the bin counts below.
        ref_line : bool, default=True
            Draw the diagonal.
        n_bootstrap : int or None, default=None
            Number of bootstrap resamples (at least 2) of a shaded band around the
            curve: per bin, the percentile interval of the observed frequency over
            resamples drawn within each class, the bins kept fixed. None or 0: no band.
        band_confidence : float, default=0.95
            Pointwise coverage of the band, strictly between 0 and 1 (checked also
            without a band).
        random_state : int, RandomState instance or None, default=None
            Seed of the resampling; an int draws the same band on every call.
        **kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        display : ReliabilityDisplay
            The plotted display; its ``ece`` is the ECE of the plotted bins, its
            ``band_low`` and ``band_high`` the band (None without ``n_bootstrap``).

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from nescal_sklearn.plotting import ReliabilityDisplay
        >>> y_true = [0, 1, 1, 2]
        >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
        >>> display = ReliabilityDisplay.from_predictions(y_true, y_proba, n_bins=5, name="m")
        >>> display.line_.get_label()
        'm (ECE = 15.00%)'
        >>> display.line_.get_xydata().tolist()
        [[0.6, 0.5], [0.8, 1.0]]

        With a bootstrap band of 200 resamples:

        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> proba = rng.uniform(size=400)
        >>> y = (rng.uniform(size=400) < proba).astype(int)
        >>> display = ReliabilityDisplay.from_predictions(
        ...     y, proba, n_bins=5, kind=1, n_bootstrap=200, random_state=0
        ... )
        >>> bool(np.all(display.band_low <= display.accuracy))
        True
        >>> from matplotlib.collections import PolyCollection
        >>> isinstance(display.band_, PolyCollection)
        True
        """
        binning = _binning(n_bins, strategy, labels, sample_weight)
        band_settings = _band_settings(n_bootstrap, band_confidence, random_state)
        if band_settings is None:
            curve = reliability_curve(y_true, y_proba, kind=kind, **binning)
            display = cls._from_curve(curve, name=name, kind=kind)
        else:
            band = bootstrap_reliability_band(
                y_true, y_proba, kind=kind, **binning, **band_settings
            )
            display = cls._from_curve(band.curve, name=name, kind=kind, band=band)
        return display.plot(ax=ax, show_histogram=show_histogram, ref_line=ref_line, **kwargs)

    @classmethod
    def _from_curve(
        cls,
        curve: ReliabilityCurve,
        *,
        name: str | None,
        kind: Any,
        band: ReliabilityBand | None = None,
    ):
        """An unplotted display of ``curve``, its ECE in the legend, with ``band`` if any."""
        return cls(
            confidence=curve.confidence,
            accuracy=curve.accuracy,
            counts=curve.counts,
            bin_edges=curve.bin_edges,
            ece=ece_from_curve(curve),
            estimator_name=name,
            kind=kind,
            band_low=None if band is None else band.low,
            band_high=None if band is None else band.high,
        )

    @classmethod
    def from_estimator(
        cls,
        estimator: Any,
        X: Any,
        y: Any,
        *,
        n_bins: int = 15,
        strategy: str = "uniform",
        kind: Any = "top_label",
        sample_weight: Any = None,
        name: str | None = None,
        ax: Any = None,
        show_histogram: bool = True,
        ref_line: bool = True,
        n_bootstrap: int | None = None,
        band_confidence: float = 0.95,
        random_state: Any = None,
        **kwargs: Any,
    ) -> ReliabilityDisplay:
        """Plot a reliability diagram of a fitted classifier on ``X``, ``y``.

        Uses ``estimator.predict_proba(X)`` with ``labels=estimator.classes_``.

        Parameters
        ----------
        estimator : fitted classifier with ``predict_proba`` and ``classes_``
            The model to diagnose (a ``Pipeline`` works).
        X : array-like of shape (n_samples, n_features)
            Input rows.
        y : array-like of shape (n_samples,)
            True classes.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width bins on [0, 1], or bins holding equal weight.
        kind : "top_label" or a class label, default="top_label"
            Top-label diagram, or one class against the rest.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row.
        name : str, default=None
            Legend name; defaults to the estimator's class name.
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        show_histogram : bool, default=True
            Draw the bin counts below.
        ref_line : bool, default=True
            Draw the diagonal.
        n_bootstrap : int or None, default=None
            Number of bootstrap resamples (at least 2) of a shaded band around the
            curve: per bin, the percentile interval of the observed frequency over
            resamples drawn within each class, the bins kept fixed. None or 0: no band.
        band_confidence : float, default=0.95
            Pointwise coverage of the band, strictly between 0 and 1 (checked also
            without a band).
        random_state : int, RandomState instance or None, default=None
            Seed of the resampling; an int draws the same band on every call.
        **kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        display : ReliabilityDisplay

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from sklearn.datasets import load_breast_cancer
        >>> from sklearn.naive_bayes import GaussianNB
        >>> from nescal_sklearn.plotting import ReliabilityDisplay
        >>> X, y = load_breast_cancer(return_X_y=True)
        >>> display = ReliabilityDisplay.from_estimator(GaussianNB().fit(X, y), X, y, kind=1)
        >>> display.ax_.get_ylabel()
        'Fraction of class 1'
        """
        if not hasattr(estimator, "predict_proba"):
            raise ValueError(
                "estimator must have a predict_proba method; "
                f"got {type(estimator).__name__}, which does not."
            )
        check_is_fitted(estimator)
        return cls.from_predictions(
            y,
            estimator.predict_proba(X),
            n_bins=n_bins,
            strategy=strategy,
            labels=estimator.classes_,
            kind=kind,
            sample_weight=sample_weight,
            name=type(estimator).__name__ if name is None else name,
            ax=ax,
            show_histogram=show_histogram,
            ref_line=ref_line,
            n_bootstrap=n_bootstrap,
            band_confidence=band_confidence,
            random_state=random_state,
            **kwargs,
        )


def plot_classwise_reliability(
    y_true: Any,
    y_proba: Any,
    *,
    labels: Any = None,
    n_bins: int = 15,
    strategy: str = "uniform",
    sample_weight: Any = None,
    name: str | None = None,
    axes: Any = None,
    show_histogram: bool = True,
    ref_line: bool = True,
    n_bootstrap: int | None = None,
    band_confidence: float = 0.95,
    random_state: Any = None,
    **kwargs: Any,
) -> list[ReliabilityDisplay]:
    """One one-vs-rest reliability diagram per class, side by side.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class of each row.
    y_proba : array-like of shape (n_samples,), (n_samples, 1) or (n_samples, n_classes)
        Predicted probabilities, columns in the order of ``labels``.
    labels : array-like of shape (n_classes,), default=None
        The class of each column; defaults to the sorted unique ``y_true``.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins on [0, 1], or bins holding equal weight.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weight of each row.
    name : str, default=None
        Legend name.
    axes : array-like of matplotlib Axes, default=None
        One Axes per class (any shape, read in row-major order); a new
        one-row figure when None. Pass the ``ax_`` of earlier displays to overlay.
    show_histogram : bool, default=True
        Draw the bin counts below each panel.
    ref_line : bool, default=True
        Draw the diagonal.
    n_bootstrap : int or None, default=None
        Number of bootstrap resamples (at least 2) of a shaded band around each
        curve, as in :meth:`ReliabilityDisplay.from_predictions`. Every panel uses the
        same resamples of the rows when ``random_state`` is an int. None or 0: no band.
    band_confidence : float, default=0.95
        Pointwise coverage of the bands, strictly between 0 and 1 (checked also
        without bands).
    random_state : int, RandomState instance or None, default=None
        Seed of the resampling.
    **kwargs : dict
        Passed to :meth:`matplotlib.axes.Axes.plot`.

    Returns
    -------
    displays : list of ReliabilityDisplay
        One per class, in the order of ``labels``; ``displays[i].ece`` is the
        one-vs-rest ECE of class ``i``, so their mean is the classwise ECE.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from nescal_sklearn.plotting import plot_classwise_reliability
    >>> y_true = [0, 1, 1, 2]
    >>> y_proba = [[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]
    >>> displays = plot_classwise_reliability(y_true, y_proba, n_bins=5)
    >>> [round(d.ece, 6) for d in displays]
    [0.3, 0.325, 0.125]
    """
    binning = _binning(n_bins, strategy, labels, sample_weight)
    band_settings = _band_settings(n_bootstrap, band_confidence, random_state)
    curves = classwise_reliability_curves(y_true, y_proba, **binning)
    n_classes = len(curves)
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, n_classes, figsize=(4.0 * n_classes, 5.0), squeeze=False)
    axes = np.ravel(np.asarray(axes, dtype=object))
    if axes.shape[0] != n_classes:
        raise ValueError(f"axes must hold one Axes per class ({n_classes}); got {axes.shape[0]}.")
    displays = []
    for (label, curve), ax in zip(curves.items(), axes, strict=True):
        band = None
        if band_settings is not None:
            band = bootstrap_reliability_band(
                y_true, y_proba, kind=label, **binning, **band_settings
            )
        display = ReliabilityDisplay._from_curve(curve, name=name, kind=label, band=band).plot(
            ax=ax, show_histogram=show_histogram, ref_line=ref_line, **kwargs
        )
        ax.set_title(f"Class {label} vs rest")
        displays.append(display)
    return displays


def _binning(n_bins: Any, strategy: Any, labels: Any, sample_weight: Any) -> dict[str, Any]:
    """The binning arguments that the diagrams pass on to the metrics unchanged."""
    return dict(n_bins=n_bins, strategy=strategy, labels=labels, sample_weight=sample_weight)


def _band_settings(
    n_bootstrap: Any, band_confidence: Any, random_state: Any
) -> dict[str, Any] | None:
    """The resampling arguments of the bootstrap band, or None when no band is asked for.

    ``band_confidence`` is checked either way: a bad value is a mistake even where it
    goes unused.
    """
    if (
        isinstance(band_confidence, bool | np.bool_)
        or not isinstance(band_confidence, numbers.Real)
        or not 0.0 < band_confidence < 1.0
    ):
        raise ValueError(
            "band_confidence must be a number strictly between 0 and 1; "
            f"got {plain(band_confidence)!r}."
        )
    if n_bootstrap is None or (
        isinstance(n_bootstrap, numbers.Integral)
        and not isinstance(n_bootstrap, bool | np.bool_)
        and n_bootstrap == 0
    ):
        return None
    if (
        isinstance(n_bootstrap, bool | np.bool_)
        or not isinstance(n_bootstrap, numbers.Integral)
        or n_bootstrap < 2
    ):
        raise ValueError(
            f"n_bootstrap must be None, 0 or an integer >= 2; got {plain(n_bootstrap)!r}."
        )
    return dict(
        n_resamples=int(n_bootstrap),
        confidence=float(band_confidence),
        random_state=random_state,
    )


def _legend_label(name: str | None, ece: float | None) -> str | None:
    if ece is None:
        return name
    ece_text = f"ECE = {100 * ece:.2f}%"
    return ece_text if name is None else f"{name} ({ece_text})"


def _axis_labels(kind: Any) -> tuple[str, str]:
    if isinstance(kind, str) and kind == "top_label":
        return "Confidence (top-label probability)", "Accuracy"
    return f"Predicted probability of class {kind}", f"Fraction of class {kind}"


def _histogram_axes(ax: Any) -> Any:
    """The bin-count axes below ``ax``, created on first use and shared afterwards."""
    hist_ax = getattr(ax, _HISTOGRAM_AXES_ATTR, None)
    if hist_ax is not None and hist_ax in ax.figure.axes:
        return hist_ax
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    hist_ax = make_axes_locatable(ax).append_axes("bottom", size="28%", pad=0.1, sharex=ax)
    hist_ax.set_label(_HISTOGRAM_LABEL)
    setattr(ax, _HISTOGRAM_AXES_ATTR, hist_ax)
    return hist_ax
