"""RobustSmoothClipScaler (RealMLP's numeric preprocessing) and ``numeric_scaling``."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import QuantileTransformer, StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from nescal_sklearn import make_tabular_pipeline, make_tabular_preprocessor
from nescal_sklearn.preprocessing import RobustSmoothClipScaler

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


def smooth_clip(z, clip=3.0):
    """The reference formula, as RealMLP writes it."""
    return z / np.sqrt(1.0 + (z / clip) ** 2)


@parametrize_with_checks([RobustSmoothClipScaler(), RobustSmoothClipScaler(clip=np.inf)])
def test_sklearn_compatible_transformer(estimator, check):
    check(estimator)


def test_hand_worked_column():
    # sorted [1, 2, 3, 4, 100]: median 3; linear quantiles at positions 1 and 3 are 2 and 4
    X = np.array([[3.0], [1.0], [100.0], [2.0], [4.0]])
    scaler = RobustSmoothClipScaler().fit(X)
    np.testing.assert_allclose(scaler.center_, [3.0])
    np.testing.assert_allclose(scaler.scale_, [1 / 2])
    z = np.array([0.0, -1.0, 48.5, -0.5, 0.5])  # (x - 3) / 2
    expected = [
        0.0,
        -3 / np.sqrt(10),
        145.5 / np.sqrt(9 + 48.5**2),
        -3 / np.sqrt(37),
        3 / np.sqrt(37),
    ]
    np.testing.assert_allclose(smooth_clip(z), expected)
    np.testing.assert_allclose(scaler.transform(X).ravel(), expected, rtol=1e-12)


def test_clip_parameter_and_no_clip():
    X = np.array([[1.0], [2.0], [3.0], [4.0], [100.0]])
    np.testing.assert_allclose(
        RobustSmoothClipScaler(clip=1.0).fit_transform(X).ravel(),
        [
            -1 / np.sqrt(2),
            -0.5 / np.sqrt(1.25),
            0.0,
            0.5 / np.sqrt(1.25),
            48.5 / np.sqrt(1 + 48.5**2),
        ],
    )
    np.testing.assert_allclose(
        RobustSmoothClipScaler(clip=np.inf).fit_transform(X).ravel(), [-1, -0.5, 0, 0.5, 48.5]
    )


def test_zero_iqr_falls_back_to_half_range_and_constant_to_zero():
    # column 0: quartiles both 0, range 5 -> factor 1 / 2.5; column 1 constant
    X = np.array([[0.0, 7.0], [0.0, 7.0], [0.0, 7.0], [0.0, 7.0], [5.0, 7.0]])
    scaler = RobustSmoothClipScaler().fit(X)
    np.testing.assert_allclose(scaler.center_, [0.0, 7.0])
    np.testing.assert_allclose(scaler.scale_, [0.4, 0.0])
    out = scaler.transform(np.array([[5.0, 7.0], [-2.5, 1e6], [0.0, -3.0]]))
    np.testing.assert_allclose(
        out, [[6 / np.sqrt(13), 0.0], [-1 / np.sqrt(10 / 9), 0.0], [0.0, 0.0]]
    )


def test_nan_ignored_in_fit_and_kept_in_transform():
    # observed [1, 3, 5]: median 3, quartiles 2 and 4
    X = np.array([[1.0, np.nan], [np.nan, np.nan], [3.0, np.nan], [5.0, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "All-NaN slice" RuntimeWarning
        scaler = RobustSmoothClipScaler().fit(X)
        out = scaler.transform(X)
    np.testing.assert_allclose(scaler.center_, [3.0, 0.0])
    np.testing.assert_allclose(scaler.scale_, [0.5, 0.0])
    np.testing.assert_array_equal(np.isnan(out), np.isnan(X))
    np.testing.assert_allclose(out[[0, 2, 3], 0], [-3 / np.sqrt(10), 0.0, 3 / np.sqrt(10)])


def test_huge_values_end_at_the_clip_and_float32_is_kept():
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    scaler = RobustSmoothClipScaler().fit(X)
    np.testing.assert_allclose(scaler.transform([[1e300], [-1e300]]).ravel(), [3.0, -3.0])
    assert scaler.transform(X.astype(np.float32)).dtype == np.float32


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=30, unique=True),
    st.floats(0.1, 10.0),
)
def test_smooth_clip_is_odd_increasing_bounded_identity_near_zero(values, clip):
    # a scaler fitted on symmetric data (median 0, IQR 2) applies the bare smooth clip to x / 2
    scaler = RobustSmoothClipScaler(clip=clip).fit(np.array([[-2.0], [-1.0], [0.0], [1.0], [2.0]]))
    x = np.sort(np.asarray(values))[:, None]
    out = scaler.transform(x).ravel()
    np.testing.assert_allclose(out, -scaler.transform(-x).ravel(), atol=1e-12)  # odd
    assert np.all(np.diff(out) >= -1e-12 * clip)  # increasing, up to rounding at the bound
    assert np.all(np.abs(out) <= clip)
    small = scaler.transform(np.array([[1e-4], [-2e-4]])).ravel()
    np.testing.assert_allclose(small, [0.5e-4, -1e-4], rtol=1e-6)  # about z near 0


def test_matches_pytabkit_realmlp_preprocessing():
    pytest.importorskip("pytabkit")
    torch = pytest.importorskip("torch")
    from pytabkit.models.data.data import DictDataset, TensorInfo
    from pytabkit.models.nn_models.models import smooth_clip_func
    from pytabkit.models.nn_models.pipeline import MedianCenterFactory, RobustScaleFactory

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5)) * [1.0, 10.0, 0.1, 1.0, 1.0]
    X[:5, 0] = 1e4  # outliers
    X[:, 3] = np.where(rng.random(200) < 0.8, 2.0, rng.standard_normal(200))  # zero IQR
    X[:, 4] = -1.5  # constant
    ds = DictDataset({"x_cont": torch.as_tensor(X)}, {"x_cont": TensorInfo(feat_shape=[5])})
    for factory in [MedianCenterFactory(), RobustScaleFactory()]:
        _, ds = factory.fit_transform(ds)
    expected = smooth_clip_func(ds.tensors["x_cont"], 3.0).numpy()
    out = RobustSmoothClipScaler().fit_transform(X)
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-5)
    assert np.abs(out[:5, 0]).max() > 2.9 and np.all(out[:, 4] == 0)


@pytest.fixture
def frame():
    rng = np.random.default_rng(1)
    n = 40
    frame = pd.DataFrame(
        {
            "a": rng.lognormal(size=n),
            "b": rng.standard_normal(n),
            "city": rng.choice(["x", "y", "z"], size=n),
        }
    )
    frame.loc[[3, 7], "a"] = np.nan
    return frame


@pytest.mark.parametrize(
    ("numeric_scaling", "reference"),
    [
        ("standard", StandardScaler()),
        ("robust", RobustSmoothClipScaler()),
        ("quantile", QuantileTransformer(n_quantiles=40, output_distribution="normal")),
    ],
)
def test_preprocessor_numeric_scaling(frame, numeric_scaling, reference):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the quantile choice does not warn on 40 rows
        out = make_tabular_preprocessor(numeric_scaling=numeric_scaling).fit_transform(frame)
    assert out.shape == (40, 2 + 3)
    numeric = frame[["a", "b"]].to_numpy()
    numeric = np.where(np.isnan(numeric), np.nanmedian(numeric, axis=0), numeric)
    np.testing.assert_allclose(out[:, :2], reference.fit_transform(numeric), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(out[:, 2:].sum(axis=1), 1.0)  # one-hot block


def test_pipeline_passes_numeric_scaling(frame):
    from sklearn.linear_model import LogisticRegression

    pipe = make_tabular_pipeline(LogisticRegression(), numeric_scaling="robust")
    numeric = pipe.named_steps["preprocess"].transformers[0][1]
    assert [name for name, _ in numeric.steps] == ["simpleimputer", "robustsmoothclipscaler"]
    y = (frame["b"] > 0).to_numpy()
    assert pipe.fit(frame, y).predict_proba(frame).shape == (40, 2)


@pytest.mark.parametrize("bad", ["minmax", "Standard", None, ["robust"]])
def test_bad_numeric_scaling_raises(bad):
    message = f"numeric_scaling must be one of ['quantile', 'robust', 'standard']; got {bad!r}."
    with pytest.raises(ValueError, match=re.escape(message)):
        make_tabular_preprocessor(numeric_scaling=bad)
    with pytest.raises(ValueError, match=re.escape(message)):
        make_tabular_pipeline(numeric_scaling=bad)
