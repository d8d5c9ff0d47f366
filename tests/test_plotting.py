"""Tests of nescal_sklearn.plotting (headless)."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from collections.abc import MutableMapping, MutableSequence, MutableSet

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402

from nescal_sklearn.metrics import (  # noqa: E402
    bootstrap_reliability_band,
    classwise_calibration_error,
    expected_calibration_error,
    reliability_curve,
)
from nescal_sklearn.plotting import ReliabilityDisplay, plot_classwise_reliability  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def iris_models():
    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    X = X + rng.normal(scale=0.5, size=X.shape)  # make the models less than perfect
    return X, y, LogisticRegression(max_iter=1000).fit(X, y), GaussianNB().fit(X, y)


def _raises(message: str, error: type[Exception] = ValueError):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("kind", ["top_label", 1])
def test_plotted_data_is_the_reliability_curve(iris_models, strategy, kind):
    X, y, model, _ = iris_models
    proba = model.predict_proba(X)
    display = ReliabilityDisplay.from_predictions(
        y, proba, n_bins=8, strategy=strategy, kind=kind, name="LR"
    )
    curve = reliability_curve(y, proba, n_bins=8, strategy=strategy, kind=kind)
    nonempty = curve.counts > 0
    np.testing.assert_allclose(display.line_.get_xdata(), curve.confidence[nonempty])
    np.testing.assert_allclose(display.line_.get_ydata(), curve.accuracy[nonempty])
    values, edges, _ = display.hist_.get_data()
    np.testing.assert_allclose(values, curve.counts)
    np.testing.assert_allclose(edges, curve.bin_edges)
    ece = expected_calibration_error(y, proba, n_bins=8, strategy=strategy, kind=kind)
    assert display.ece == pytest.approx(ece)
    legend = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert legend == ["Perfectly calibrated", f"LR (ECE = {100 * ece:.2f}%)"]


def test_axis_labels(iris_models):
    X, y, model, _ = iris_models
    top = ReliabilityDisplay.from_estimator(model, X, y)
    assert (top.hist_ax_.get_xlabel(), top.ax_.get_ylabel()) == (
        "Confidence (top-label probability)",
        "Accuracy",
    )
    assert top.ax_.get_xlabel() == ""
    one = ReliabilityDisplay.from_estimator(model, X, y, kind=2, show_histogram=False)
    assert (one.ax_.get_xlabel(), one.ax_.get_ylabel()) == (
        "Predicted probability of class 2",
        "Fraction of class 2",
    )


def test_from_estimator_equals_from_predictions(iris_models):
    X, y, model, _ = iris_models
    a = ReliabilityDisplay.from_estimator(model, X, y, n_bins=10)
    b = ReliabilityDisplay.from_predictions(
        y, model.predict_proba(X), n_bins=10, labels=model.classes_, name="LogisticRegression"
    )
    # exact: from_estimator calls predict_proba, then from_predictions: the same path
    np.testing.assert_array_equal(a.line_.get_xydata(), b.line_.get_xydata())
    assert a.ece == b.ece
    assert a.line_.get_label() == b.line_.get_label()
    assert a.estimator_name == "LogisticRegression"


def test_overlay_two_models_on_one_ax(iris_models, tmp_path):
    X, y, lr, nb = iris_models
    first = ReliabilityDisplay.from_estimator(lr, X, y)
    second = ReliabilityDisplay.from_estimator(nb, X, y, ax=first.ax_)
    ax = first.ax_
    assert second.ax_ is ax and second.figure_ is first.figure_
    assert second.hist_ax_ is first.hist_ax_
    assert len(first.figure_.axes) == 2  # main + one shared histogram
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels.count("Perfectly calibrated") == 1
    assert len(labels) == 3
    assert len(first.hist_ax_.patches) == 4  # filled + outline per display
    assert first.line_.get_color() != second.line_.get_color()
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend[1].startswith("LogisticRegression (ECE = ")
    assert legend[2].startswith("GaussianNB (ECE = ")
    path = tmp_path / "reliability.png"
    first.figure_.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_panels_sharing_x_keep_one_histogram_each(iris_models):
    # Axes of one grid share their x-axis with each other; each panel still gets its own
    # histogram axes, shared only by the displays overlaid on that panel.
    X, y, lr, nb = iris_models
    fig, axes = plt.subplots(1, 3, sharex=True, sharey=True)
    first = plot_classwise_reliability(y, lr.predict_proba(X), axes=axes, name="LR")
    second = plot_classwise_reliability(y, nb.predict_proba(X), axes=axes, name="NB")
    assert len(fig.axes) == 6
    assert len({d.hist_ax_ for d in first}) == 3
    assert [a.hist_ax_ for a in first] == [b.hist_ax_ for b in second]
    assert all(len(d.hist_ax_.patches) == 4 for d in first)


def test_histogram_axes_removed_by_the_user_are_drawn_anew(iris_models):
    X, y, lr, nb = iris_models
    first = ReliabilityDisplay.from_estimator(lr, X, y)
    first.figure_.delaxes(first.hist_ax_)
    second = ReliabilityDisplay.from_estimator(nb, X, y, ax=first.ax_)
    assert second.hist_ax_ is not first.hist_ax_
    assert second.hist_ax_ in first.figure_.axes
    assert len(first.figure_.axes) == 2


def test_displays_keep_no_module_state_and_figures_pickle(iris_models):
    from nescal_sklearn.plotting import _reliability

    mutable = {
        name
        for name, value in vars(_reliability).items()
        if not name.startswith("__")
        and isinstance(value, MutableMapping | MutableSequence | MutableSet)
    }
    assert mutable == set()
    X, y, lr, nb = iris_models
    first = ReliabilityDisplay.from_estimator(lr, X, y)
    ReliabilityDisplay.from_estimator(nb, X, y, ax=first.ax_)
    restored = pickle.loads(pickle.dumps(first.figure_))
    assert len(restored.axes) == 2


def test_without_histogram(iris_models):
    X, y, model, _ = iris_models
    display = ReliabilityDisplay.from_estimator(model, X, y, show_histogram=False, ref_line=False)
    assert display.hist_ax_ is None and display.hist_ is None
    assert len(display.figure_.axes) == 1
    assert len(display.ax_.get_lines()) == 1


def test_plot_from_constructor_and_kwargs():
    display = ReliabilityDisplay(
        confidence=np.array([0.3, np.nan, 0.8]),
        accuracy=np.array([0.25, np.nan, 0.9]),
        counts=np.array([4.0, 0.0, 6.0]),
        bin_edges=np.array([0.0, 0.4, 0.6, 1.0]),
    )
    fig, ax = plt.subplots()
    assert display.plot(ax=ax, name="x", color="red") is display
    assert display.figure_ is fig
    assert display.line_.get_color() == "red"
    assert display.line_.get_label() == "x"  # no ece given
    np.testing.assert_array_equal(display.line_.get_xdata(), [0.3, 0.8])


def test_plot_needs_bin_edges_for_histogram():
    display = ReliabilityDisplay(
        confidence=np.array([0.5]), accuracy=np.array([0.5]), counts=np.array([1.0])
    )
    with _raises(
        "show_histogram=True needs bin_edges; got bin_edges=None. "
        "Pass bin_edges or show_histogram=False."
    ):
        display.plot()
    display.plot(show_histogram=False)


def test_from_estimator_errors(iris_models):
    X, y, _, _ = iris_models
    with _raises(
        "estimator must have a predict_proba method; got LinearRegression, which does not."
    ):
        ReliabilityDisplay.from_estimator(LinearRegression().fit(X, y), X, y)
    with pytest.raises(NotFittedError):
        ReliabilityDisplay.from_estimator(LogisticRegression(), X, y)


def test_classwise_panels(iris_models):
    X, y, model, _ = iris_models
    proba = model.predict_proba(X)
    displays = plot_classwise_reliability(y, proba, n_bins=10, name="LR")
    assert [d.kind for d in displays] == [0, 1, 2]
    assert np.mean([d.ece for d in displays]) == pytest.approx(
        classwise_calibration_error(y, proba, n_bins=10)
    )
    assert len({d.ax_ for d in displays}) == 3
    assert displays[1].ax_.get_title() == "Class 1 vs rest"
    with _raises("axes must hold one Axes per class (3); got 2."):
        plot_classwise_reliability(y, proba, axes=plt.subplots(1, 2)[1])


def test_importing_plotting_does_not_import_matplotlib():
    code = "import sys, nescal_sklearn.plotting; print('matplotlib' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# ------------------------------------------------------------------- bootstrap bands


def _calibrated_binary(n: int, seed: int):
    rng = np.random.default_rng(seed)
    proba = rng.uniform(size=n)
    return (rng.uniform(size=n) < proba).astype(int), proba


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("kind", ["top_label", 2])
def test_band_contains_the_curve_and_matches_the_metrics_band(iris_models, strategy, kind):
    X, y, model, _ = iris_models
    proba = model.predict_proba(X)
    display = ReliabilityDisplay.from_predictions(
        y, proba, n_bins=8, strategy=strategy, kind=kind, n_bootstrap=100, random_state=0
    )
    band = bootstrap_reliability_band(
        y, proba, n_bins=8, strategy=strategy, kind=kind, n_resamples=100, random_state=0
    )
    assert display.band_low.shape == display.band_high.shape == (8,)
    # exact: the display's band is bootstrap_reliability_band with these arguments
    np.testing.assert_array_equal(display.band_low, band.low)
    np.testing.assert_array_equal(display.band_high, band.high)
    nonempty = display.counts > 0
    assert np.all(display.band_low[nonempty] <= display.accuracy[nonempty])
    assert np.all(display.accuracy[nonempty] <= display.band_high[nonempty])
    assert np.all(np.isnan(display.band_low[~nonempty]))
    # The curve is the same as without a band.
    plain = ReliabilityDisplay.from_predictions(y, proba, n_bins=8, strategy=strategy, kind=kind)
    # exact: the curve is reliability_curve's with or without a band
    np.testing.assert_array_equal(display.line_.get_xydata(), plain.line_.get_xydata())
    assert display.ece == plain.ece


def test_band_is_drawn_as_a_fill_between_in_the_colour_of_the_curve(iris_models):
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    X, y, model, _ = iris_models
    display = ReliabilityDisplay.from_estimator(model, X, y, n_bins=6, n_bootstrap=50)
    assert isinstance(display.band_, PolyCollection)
    assert display.band_ in display.ax_.collections
    facecolor = display.band_.get_facecolor()[0]
    np.testing.assert_allclose(facecolor[:3], to_rgba(display.line_.get_color())[:3])
    nonempty = display.counts > 0
    vertices = display.band_.get_paths()[0].vertices
    finite = vertices[np.all(np.isfinite(vertices), axis=1)]
    assert finite[:, 0].min() == pytest.approx(display.confidence[nonempty].min())
    assert finite[:, 0].max() == pytest.approx(display.confidence[nonempty].max())
    assert finite[:, 1].min() == pytest.approx(np.nanmin(display.band_low))
    assert finite[:, 1].max() == pytest.approx(np.nanmax(display.band_high))
    legend = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert legend[0] == "Perfectly calibrated" and len(legend) == 2  # band not in the legend


@pytest.mark.parametrize("n_bootstrap", [None, 0])
def test_no_band_by_default(iris_models, n_bootstrap):
    X, y, model, _ = iris_models
    display = ReliabilityDisplay.from_estimator(model, X, y, n_bootstrap=n_bootstrap)
    assert display.band_ is None
    assert display.band_low is None and display.band_high is None
    assert len(display.ax_.collections) == 0


def test_band_narrows_with_more_data():
    widths = []
    for n in (300, 3000):
        y, proba = _calibrated_binary(n, seed=n)
        display = ReliabilityDisplay.from_predictions(
            y, proba, n_bins=5, kind=1, n_bootstrap=200, random_state=0, show_histogram=False
        )
        widths.append(np.mean(display.band_high - display.band_low))
    assert widths[1] < 0.5 * widths[0]  # about 1 / sqrt(10)


def test_band_random_state_and_confidence():
    y, proba = _calibrated_binary(400, seed=1)
    kwargs = dict(n_bins=5, kind=1, n_bootstrap=60, show_histogram=False)
    first = ReliabilityDisplay.from_predictions(y, proba, random_state=3, **kwargs)
    again = ReliabilityDisplay.from_predictions(y, proba, random_state=3, **kwargs)
    other = ReliabilityDisplay.from_predictions(y, proba, random_state=4, **kwargs)
    np.testing.assert_array_equal(first.band_low, again.band_low)
    np.testing.assert_array_equal(first.band_high, again.band_high)
    assert not np.array_equal(first.band_high - first.band_low, other.band_high - other.band_low)
    narrow = ReliabilityDisplay.from_predictions(
        y, proba, random_state=3, band_confidence=0.5, **kwargs
    )
    assert np.all(first.band_low <= narrow.band_low)
    assert np.all(narrow.band_high <= first.band_high)


def test_from_estimator_band_equals_from_predictions(iris_models):
    X, y, model, _ = iris_models
    a = ReliabilityDisplay.from_estimator(model, X, y, kind=1, n_bootstrap=30, random_state=2)
    b = ReliabilityDisplay.from_predictions(
        y, model.predict_proba(X), labels=model.classes_, kind=1, n_bootstrap=30, random_state=2
    )
    # exact: from_estimator calls predict_proba, then from_predictions: the same path
    np.testing.assert_array_equal(a.band_low, b.band_low)
    np.testing.assert_array_equal(a.band_high, b.band_high)


def test_classwise_panels_with_bands(iris_models):
    X, y, model, _ = iris_models
    proba = model.predict_proba(X)
    displays = plot_classwise_reliability(y, proba, n_bins=6, n_bootstrap=40, random_state=0)
    for label, display in zip([0, 1, 2], displays, strict=True):
        band = bootstrap_reliability_band(
            y, proba, n_bins=6, kind=label, n_resamples=40, random_state=0
        )
        # exact: each panel's band is bootstrap_reliability_band with these arguments
        np.testing.assert_array_equal(display.band_low, band.low)
        np.testing.assert_array_equal(display.band_high, band.high)
        assert display.band_ in display.ax_.collections
    assert all(d.band_ is None for d in plot_classwise_reliability(y, proba, n_bins=6))


@pytest.mark.parametrize("value", [1, -1, 2.5, True, "10"])
def test_bad_n_bootstrap(iris_models, value):
    X, y, model, _ = iris_models
    with _raises(f"n_bootstrap must be None, 0 or an integer >= 2; got {value!r}."):
        ReliabilityDisplay.from_estimator(model, X, y, n_bootstrap=value)
    with _raises(f"n_bootstrap must be None, 0 or an integer >= 2; got {value!r}."):
        plot_classwise_reliability(y, model.predict_proba(X), n_bootstrap=value)


@pytest.mark.parametrize("value", [0, 1, 1.5, True, None])
def test_bad_band_confidence(iris_models, value):
    X, y, model, _ = iris_models
    with _raises(f"band_confidence must be a number strictly between 0 and 1; got {value!r}."):
        ReliabilityDisplay.from_estimator(model, X, y, n_bootstrap=10, band_confidence=value)


def test_band_from_the_constructor():
    display = ReliabilityDisplay(
        confidence=np.array([0.3, np.nan, 0.8]),
        accuracy=np.array([0.25, np.nan, 0.9]),
        counts=np.array([4.0, 0.0, 6.0]),
        bin_edges=np.array([0.0, 0.4, 0.6, 1.0]),
        band_low=np.array([0.1, np.nan, 0.8]),
        band_high=np.array([0.4, np.nan, 1.0]),
    ).plot()
    vertices = display.band_.get_paths()[0].vertices
    assert {tuple(v) for v in vertices} >= {(0.3, 0.1), (0.3, 0.4), (0.8, 0.8), (0.8, 1.0)}
