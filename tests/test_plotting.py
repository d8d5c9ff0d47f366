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
