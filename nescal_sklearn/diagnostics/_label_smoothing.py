"""Label-smoothing closed forms: confidence ceiling, optimal logit gap, NLL floor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.special import log_softmax

from ._display import DiagnosticDisplay
from ._model import model_classes, model_logits, training_epsilon
from ._validation import check_nonnegative_real, check_proba

__all__ = ["LabelSmoothingBounds", "label_smoothing_bounds"]

#: Default round-off allowance of the ceiling and gap counts.
DEFAULT_TOL = 1e-12
_CONFIDENCE_BINS = np.linspace(0.0, 1.0, 41)


@dataclass(frozen=True, eq=False, repr=False)
class LabelSmoothingBounds:
    """Per-row top confidence, logit gaps and NLL against label smoothing's closed forms.

    Returned by :func:`label_smoothing_bounds`; the arrays are read-only. With
    smoothing mass ``ε`` over ``K`` classes (target ``(1 − ε) onehot + ε/K``), the
    per-example optimum puts ``c = 1 − ε + ε/K`` on the true class and ``ε/K`` on
    each other one.

    Attributes
    ----------
    epsilon : float
        The smoothing mass ``ε``.
    n_classes : int
        ``K``.
    ceiling : float
        ``c = 1 − ε + ε/K``, the optimum's (and so the cap on) top confidence.
    logit_gap_bound : float
        ``log(c K / ε)``, the optimum's gap between the true logit and every other
        one (``inf`` for ``ε = 0``).
    nll_floor : float
        ``−log c``, the optimum's hard-label NLL (0 for ``ε = 0``).
    top_confidence : ndarray of shape (n_samples,)
        ``max_c p_c`` of each row.
    gap_mean_other : ndarray of shape (n_samples,)
        Top logit minus the mean of the other logits.
    gap_max_other : ndarray of shape (n_samples,)
        Top logit minus the largest other logit (``≤ gap_mean_other``; equal at
        the optimum, where all other logits are equal).
    nll : ndarray of shape (n_samples,) or None
        ``−log p_{y}`` of each row's label; None without ``y``.
    tol : float
        Round-off allowance: a value exceeds a bound ``v`` when it is above
        ``(1 + tol) v + tol``.
    name : str or None
        Legend name.
    panels : tuple of str
        Class attribute: the panels :meth:`plot` draws.
    """

    epsilon: float
    n_classes: int
    top_confidence: np.ndarray
    gap_mean_other: np.ndarray
    gap_max_other: np.ndarray
    nll: np.ndarray | None = None
    tol: float = DEFAULT_TOL
    name: str | None = None

    panels: ClassVar[tuple[str, ...]] = ("top confidence", "logit gap")

    @property
    def ceiling(self) -> float:
        """``1 − ε + ε/K``."""
        return 1.0 - self.epsilon + self.epsilon / self.n_classes

    @property
    def logit_gap_bound(self) -> float:
        """``log(c K / ε)``; ``inf`` for ``ε = 0``."""
        if self.epsilon == 0.0:
            return float("inf")
        return float(np.log(self.ceiling * self.n_classes / self.epsilon))

    @property
    def nll_floor(self) -> float:
        """``−log c``."""
        return float(-np.log(self.ceiling))

    def _above(self, values: np.ndarray, bound: float) -> float:
        return float(np.mean(values > bound * (1.0 + self.tol) + self.tol))

    @property
    def fraction_above_ceiling(self) -> float:
        """Fraction of rows whose top confidence exceeds ``c`` (0 at or below the optimum)."""
        return self._above(self.top_confidence, self.ceiling)

    @property
    def fraction_gap_above_bound(self) -> float:
        """Fraction of rows whose ``gap_mean_other`` exceeds ``log(c K / ε)``."""
        return self._above(self.gap_mean_other, self.logit_gap_bound)

    @property
    def mean_nll(self) -> float:
        """Mean hard-label NLL (NaN without ``y``)."""
        return float("nan") if self.nll is None else float(np.mean(self.nll))

    @property
    def summary(self) -> dict[str, float]:
        """The scalar findings, by name."""
        return {
            "epsilon": self.epsilon,
            "n_classes": self.n_classes,
            "ceiling": self.ceiling,
            "fraction_above_ceiling": self.fraction_above_ceiling,
            "max_top_confidence": float(np.max(self.top_confidence)),
            "mean_top_confidence": float(np.mean(self.top_confidence)),
            "logit_gap_bound": self.logit_gap_bound,
            "fraction_gap_above_bound": self.fraction_gap_above_bound,
            "median_gap_mean_other": float(np.median(self.gap_mean_other)),
            "median_gap_max_other": float(np.median(self.gap_max_other)),
            "nll_floor": self.nll_floor,
            "mean_nll": self.mean_nll,
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, epsilon={self.epsilon!r}, "
            f"n_classes={self.n_classes}, ceiling={self.ceiling:.4g}, "
            f"fraction_above_ceiling={self.fraction_above_ceiling:.4g}, "
            f"logit_gap_bound={self.logit_gap_bound:.4g}, mean_nll={self.mean_nll:.4g}, "
            f"nll_floor={self.nll_floor:.4g})"
        )

    def plot(self, ax: Any = None, *, name: str | None = None, **kwargs: Any) -> DiagnosticDisplay:
        """Histograms of top confidence and of the logit gap, with the ceiling and bound.

        Histograms are of fractions of rows (so models with different numbers of rows
        compare); top confidence uses 40 fixed bins on [0, 1], the gap
        (``gap_mean_other``, finite values) ``bins="auto"``. The ceiling ``c`` and
        the bound ``log(c K / ε)`` are dashed lines in the result's colour (none for
        an infinite bound).

        Parameters
        ----------
        ax : array-like of 2 matplotlib Axes or None, default=None
            See :meth:`DiagnosticDisplay.plot`.
        name : str or None, default=None
            Legend name; defaults to ``self.name``.
        **kwargs : dict
            Matplotlib properties of the histograms' outlines.

        Returns
        -------
        display : DiagnosticDisplay

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from nescal_sklearn.diagnostics import label_smoothing_bounds
        >>> bounds = label_smoothing_bounds(
        ...     proba=[[0.9, 0.05, 0.05], [0.2, 0.7, 0.1]], epsilon=0.1, name="LS")
        >>> display = bounds.plot()
        >>> round(display.ax_[0].get_lines()[0].get_xdata()[0], 4)  # the ceiling
        0.9333
        """
        return DiagnosticDisplay(self, name=self.name).plot(ax=ax, name=name, **kwargs)

    def _draw(self, axes: np.ndarray, name: str | None, style: dict) -> tuple[dict, Any]:
        confidence_axis, gap_axis = axes
        n = len(self.top_confidence)
        weights = np.full(n, 1.0 / n)
        style = {"histtype": "step", "linewidth": 1.5, **style}
        *_, patches = confidence_axis.hist(
            self.top_confidence, bins=_CONFIDENCE_BINS, weights=weights, label=name, **style
        )
        color = patches[0].get_edgecolor()
        style = {**style, "color": color}
        suffix = "" if name is None else f" ({name})"
        ceiling = confidence_axis.axvline(
            self.ceiling,
            color=color,
            ls="--",
            label=f"ceiling 1 − ε + ε/K = {self.ceiling:.4g}{suffix}",
        )
        confidence_axis.set(title=self.panels[0], xlabel="max_c p_c", ylabel="Fraction of rows")
        artists = {self.panels[0]: [*patches, ceiling], self.panels[1]: []}
        finite = self.gap_mean_other[np.isfinite(self.gap_mean_other)]
        if len(finite):
            *_, gap_patches = gap_axis.hist(
                finite,
                bins=np.histogram_bin_edges(finite, bins="auto"),
                weights=np.full(len(finite), 1.0 / n),
                label=name,
                **style,
            )
            artists[self.panels[1]].extend(gap_patches)
        if np.isfinite(self.logit_gap_bound):
            artists[self.panels[1]].append(
                gap_axis.axvline(
                    self.logit_gap_bound,
                    color=color,
                    ls="--",
                    label=f"log(cK/ε) = {self.logit_gap_bound:.4g}{suffix}",
                )
            )
        gap_axis.set(
            title=self.panels[1],
            xlabel="top logit − mean of the other logits",
            ylabel="Fraction of rows",
        )
        return artists, color


def _logit_gaps(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    top = np.argmax(logits, axis=1)
    rows = np.arange(len(logits))
    top_logit = logits[rows, top]
    others = logits.copy()
    others[rows, top] = np.nan
    with np.errstate(invalid="ignore"):
        mean_other = np.nanmean(others, axis=1)
        max_other = np.nanmax(others, axis=1)
    return top_logit - mean_other, top_logit - max_other


def _check_labels(y: Any, n_rows: int, n_classes: int, classes: np.ndarray | None) -> np.ndarray:
    labels = np.asarray(y)
    if labels.shape != (n_rows,):
        raise ValueError(
            f"y must have shape ({n_rows},), one label per row; got shape {labels.shape}."
        )
    if classes is not None:
        index = np.searchsorted(classes, labels)
        index = np.clip(index, 0, len(classes) - 1)
        unknown = labels[classes[index] != labels]
        if len(unknown):
            raise ValueError(
                f"y contains labels the estimator was not fitted on: {np.unique(unknown).tolist()!r}; "
                f"classes are {classes.tolist()!r}."
            )
        return index
    if labels.dtype.kind not in "iu" or np.any((labels < 0) | (labels >= n_classes)):
        raise ValueError(
            f"without an estimator, y must hold column indices 0..{n_classes - 1} of proba; "
            f"got {np.unique(labels)[:10].tolist()!r}."
        )
    return labels.astype(np.int64)


def _from_estimator(
    estimator: Any, X: Any, epsilon: float | None, proba: Any, logits: Any
) -> tuple[float, np.ndarray]:
    """``(epsilon, logits)`` of a fitted estimator on ``X``: its training ``ε`` (which a
    given ``epsilon`` must equal), or ``epsilon`` for a loss without one."""
    given = [label for label, value in (("proba", proba), ("logits", logits)) if value is not None]
    if given:
        raise ValueError(
            "pass either a fitted estimator with X or arrays, not both; got an estimator "
            f"and {', '.join(given)}."
        )
    if X is None:
        raise ValueError("X is required with an estimator; got X=None.")
    trained, loss = training_epsilon(estimator)
    if trained is None and epsilon is None:
        raise ValueError(
            f"epsilon is required: the estimator was trained with {loss}, which is not "
            "label smoothing; pass epsilon (e.g. epsilon=0.1) to compare with its bounds."
        )
    if trained is not None and epsilon is not None and epsilon != trained:
        raise ValueError(
            f"epsilon={epsilon!r} disagrees with the estimator's loss {loss} "
            f"(epsilon={trained!r}); pass epsilon=None to use the estimator's."
        )
    return (trained if epsilon is None else epsilon), model_logits(estimator, X)


def _from_arrays(
    X: Any, epsilon: float | None, proba: Any, logits: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``(logits, log_p)`` from arrays: the logits and their log-softmax (which ``proba``,
    if given too, must match), or the log of ``proba`` standing in for both."""
    if X is not None:
        raise ValueError(
            "X needs a fitted estimator; with estimator=None pass proba or logits instead."
        )
    if epsilon is None:
        raise ValueError("epsilon is required without an estimator; got epsilon=None.")
    if proba is None and logits is None:
        raise ValueError("pass a fitted estimator with X, or proba or logits; got neither.")
    if logits is None:
        with np.errstate(divide="ignore"):
            log_p = np.log(check_proba(proba))
        return log_p, log_p
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 2 or logits.shape[1] < 2 or logits.shape[0] < 1:
        raise ValueError(
            "logits must be a 2-D array of shape (n_samples, n_classes) with "
            f"n_samples >= 1 and n_classes >= 2; got shape {logits.shape}."
        )
    if not np.all(np.isfinite(logits)):
        raise ValueError("logits contains NaN or infinite values.")
    log_p = log_softmax(logits, axis=1)
    if proba is not None:
        probabilities = check_proba(proba)
        if probabilities.shape != logits.shape or not np.allclose(
            probabilities, np.exp(log_p), rtol=0.0, atol=1e-6
        ):
            raise ValueError(
                "proba must be softmax(logits) (within 1e-6) when both are given; they disagree."
            )
    return logits, log_p


def label_smoothing_bounds(
    estimator: Any = None,
    X: Any = None,
    y: Any = None,
    *,
    epsilon: float | None = None,
    proba: Any = None,
    logits: Any = None,
    tol: float = DEFAULT_TOL,
    name: str | None = None,
) -> LabelSmoothingBounds:
    """Compare a label-smoothed model with the closed forms of label smoothing's optimum.

    DESIGN.md: with target ``(1 − ε) onehot + ε/K``, the per-example optimum puts
    ``c = 1 − ε + ε/K`` on the true class and ``ε/K`` on each other class. So top
    confidence is capped at ``c``, every wrong logit sits ``log(c K / ε)`` below the
    true one (≈ 9.1 nats at K = 1000, ε = 0.1), and the hard-label NLL has the floor
    ``−log c`` (≈ 0.105 nats there). This reports, per row, the top confidence, two
    measured logit gaps and (with ``y``) the NLL:

    * ``gap_mean_other`` = top logit − mean of the other logits,
    * ``gap_max_other`` = top logit − largest other logit;

    both equal ``log(c K / ε)`` at the optimum, where the other logits are equal.
    For a row with top confidence ``t`` they bracket the equal-others gap
    ``log(t (K − 1) / (1 − t))`` (Jensen): ``gap_max_other`` ≤ it ≤
    ``gap_mean_other``, so a ``gap_mean_other`` above the bound alone does not mean
    the row is more confident than ``c``. Logits are defined up to a shift per row,
    which neither gap sees.

    The closed forms are those of the per-example optimum. A network shares its
    parameters across rows, so its training rows scatter around them (some above
    the ceiling, some below); ``fraction_above_ceiling`` counts the rows above, and
    a mean NLL below the floor means the model is, on average, sharper than label
    smoothing's optimum. For ``ε = 0`` (cross-entropy) the
    bounds are trivial: ceiling 1, gap bound ``inf``, floor 0.

    ``ε`` comes from the estimator when it was trained with
    ``loss="label_smoothing"`` (``loss_.epsilon``) or with a NeSCal loss whose
    ``base_loss`` is label smoothing (then the penalty moves the optimum, and the
    closed forms are those of the base loss alone); otherwise pass ``epsilon``.

    Parameters
    ----------
    estimator : NeSCalClassifier, Pipeline ending in one, or None, default=None
        A fitted model; its logits are ``decision_function`` (for two classes,
        ``[0, z₁ − z₀]``) and its probabilities their softmax (``predict_proba``).
    X : array-like of shape (n_samples, n_features) or None, default=None
        Rows (typically the training rows) for the estimator.
    y : array-like of shape (n_samples,) or None, default=None
        Labels for the NLL: classes of the estimator, or, without one, column
        indices of ``proba``. None: no NLL.
    epsilon : float in [0, 1] or None, default=None
        The smoothing mass; required unless the estimator's loss gives it (it must
        then agree with it).
    proba : array-like of shape (n_samples, n_classes) or None, default=None
        Without an estimator: predicted probabilities (their logarithms stand in
        for the logits when ``logits`` is None).
    logits : array-like of shape (n_samples, n_classes) or None, default=None
        Without an estimator: the logits (``proba`` is their softmax when None; if
        both are given they must agree).
    tol : float, default=1e-12
        Round-off allowance: a value exceeds a bound ``v`` when it is above
        ``(1 + tol) v + tol``.
    name : str or None, default=None
        Legend name.

    Returns
    -------
    LabelSmoothingBounds

    Examples
    --------
    Predictions exactly at the optimum (ε = 0.1, K = 3):

    >>> import numpy as np
    >>> from nescal_sklearn.diagnostics import label_smoothing_bounds
    >>> c, other = 1 - 0.1 + 0.1 / 3, 0.1 / 3
    >>> proba = np.array([[c, other, other], [other, c, other]])
    >>> bounds = label_smoothing_bounds(proba=proba, y=[0, 1], epsilon=0.1)
    >>> round(bounds.ceiling, 4), round(bounds.logit_gap_bound, 4), round(bounds.nll_floor, 4)
    (0.9333, 3.3322, 0.069)
    >>> bounds.gap_mean_other.round(4), round(bounds.mean_nll, 4)
    (array([3.3322, 3.3322]), 0.069)
    >>> bounds.fraction_above_ceiling
    0.0
    """
    tol = check_nonnegative_real(tol, "tol")
    if epsilon is not None:
        epsilon = check_nonnegative_real(epsilon, "epsilon", high=1.0)
    classes = None
    if estimator is not None:
        epsilon, logits = _from_estimator(estimator, X, epsilon, proba, logits)
        classes = model_classes(estimator)
        log_p = log_softmax(logits, axis=1)
    else:
        logits, log_p = _from_arrays(X, epsilon, proba, logits)
    n_rows, n_classes = logits.shape
    gap_mean, gap_max = _logit_gaps(logits)
    nll = None
    if y is not None:
        labels = _check_labels(y, n_rows, n_classes, classes)
        nll = -log_p[np.arange(n_rows), labels]
    top = np.exp(np.max(log_p, axis=1))
    arrays = [top, gap_mean, gap_max, nll]
    for array in arrays:
        if array is not None:
            array.setflags(write=False)
    return LabelSmoothingBounds(epsilon, int(n_classes), *arrays, tol=tol, name=name)
