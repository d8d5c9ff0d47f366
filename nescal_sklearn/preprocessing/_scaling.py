"""Numeric feature scalers for the tabular pipeline: RealMLP's robust smooth-clip scaling."""

from __future__ import annotations

import warnings
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, _fit_context
from sklearn.preprocessing import QuantileTransformer
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

__all__ = ["RobustSmoothClipScaler"]

#: Added to the spread before inverting it, as pytabkit does (``robust_scale_eps``).
_SPREAD_EPS = 1e-30


def _smooth_clip(z: np.ndarray, clip: float) -> np.ndarray:
    """``z / sqrt(1 + (z / clip) ** 2)``, written with ``hypot`` so huge ``z`` gives ``±clip``.

    The direct formula overflows ``(z / clip) ** 2`` to inf for ``|z| > 1e154`` and
    then returns 0; ``hypot`` does not. ``clip=inf`` is the identity. NaN stays NaN.
    """
    return z / np.hypot(1.0, z / clip)


class RobustSmoothClipScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Median centring, inter-quartile scaling and a smooth clip to ``(-clip, clip)``.

    The numeric preprocessing of RealMLP [1]_ (pytabkit's ``median_center``,
    ``robust_scale`` and ``smooth_clip`` steps, also published as
    ``RobustScaleSmoothClipTransform``). For each column ``j``::

        z = (x - center_[j]) * scale_[j]
        output = z / sqrt(1 + (z / clip) ** 2)

    ``center_`` is the median and ``scale_`` the inverse of the inter-quartile range
    ``q75 - q25`` (numpy's default linear interpolation). Where the inter-quartile range
    is 0 (a column with more than half its values equal), half the range
    ``(max - min) / 2`` replaces it; where that is 0 too (a constant column),
    ``scale_`` is 0 and the column maps to 0, also for new values at transform time.

    The smooth clip is odd, increasing, about the identity for ``|z|`` well below
    ``clip`` and bounded by ``clip``: unlike standard scaling, a few extreme values
    neither squash the bulk of a column (the median and quartiles ignore them) nor
    reach the network as huge inputs (they end near ``±clip``), and their order is
    kept.

    Missing values (NaN) are ignored by ``fit`` and kept by ``transform``, as in
    scikit-learn's scalers (pytabkit's version assumes there are none). A column with
    no observed value gets ``center_ = 0`` and ``scale_ = 0``.

    Parameters
    ----------
    clip : float, default=3.0
        Bound of the smooth clip, RealMLP's ``smooth_clip_max_abs_value``; ``inf``
        turns the clip off (plain robust scaling).

    Attributes
    ----------
    center_ : ndarray of shape (n_features,)
        Median of each column over its non-missing training values.
    scale_ : ndarray of shape (n_features,)
        Multiplicative factor applied after centring: ``1 / (q75 - q25)``, or
        ``1 / ((max - min) / 2)`` where the inter-quartile range is 0, or 0 for a
        constant column (a divisor's inverse, unlike ``StandardScaler.scale_``, which
        is the divisor).
    n_features_in_ : int
        Number of columns seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Column names seen in ``fit``, when ``X`` has string column names.

    See Also
    --------
    sklearn.preprocessing.RobustScaler : Median and inter-quartile scaling, no clip.
    sklearn.preprocessing.QuantileTransformer : Rank-based map to a fixed distribution.

    References
    ----------
    .. [1] D. Holzmüller, L. Grinsztajn and I. Steinwart, "Better by default: Strong
       pre-tuned MLPs and boosted trees on tabular data", NeurIPS 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from nescal_sklearn.preprocessing import RobustSmoothClipScaler
    >>> X = np.array([[1.0], [2.0], [3.0], [4.0], [100.0]])
    >>> scaler = RobustSmoothClipScaler().fit(X)
    >>> scaler.center_, scaler.scale_
    (array([3.]), array([0.5]))
    >>> scaler.transform(X).ravel().round(3)
    array([-0.949, -0.493,  0.   ,  0.493,  2.994])
    """

    _parameter_constraints: dict = {
        "clip": [Interval(Real, 0, None, closed="right")],  # inf: no clip
    }

    def __init__(self, clip: float = 3.0):
        self.clip = clip

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Compute each column's median and robust scale factor.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data; NaN entries are ignored.
        y : None
            Ignored.

        Returns
        -------
        self : RobustSmoothClipScaler
            The fitted scaler.
        """
        X = validate_data(self, X, dtype=FLOAT_DTYPES, ensure_all_finite="allow-nan")
        X = X.astype(np.float64, copy=False)
        center = np.zeros(X.shape[1])
        scale = np.zeros(X.shape[1])
        observed = ~np.isnan(X).all(axis=0)  # all-NaN columns stay at 0 and 0, silently
        if observed.any():
            Xo = X[:, observed]
            q25, median, q75 = np.nanquantile(Xo, [0.25, 0.5, 0.75], axis=0)
            spread = q75 - q25
            half_range = 0.5 * (np.nanmax(Xo, axis=0) - np.nanmin(Xo, axis=0))
            spread = np.where(spread == 0.0, half_range, spread)
            center[observed] = median
            scale[observed] = np.where(spread == 0.0, 0.0, 1.0 / (spread + _SPREAD_EPS))
        self.center_ = center
        self.scale_ = scale
        return self

    def transform(self, X):
        """Centre, scale and smoothly clip each column.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data to transform; NaN entries stay NaN.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Values in ``(-clip, clip)``, in the dtype of ``X`` (float32 or float64).
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FLOAT_DTYPES, ensure_all_finite="allow-nan", reset=False)
        z = (X - self.center_.astype(X.dtype)) * self.scale_.astype(X.dtype)
        return _smooth_clip(z, self.clip).astype(X.dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class _QuantileTransformer(QuantileTransformer):
    """``QuantileTransformer`` without the warning when ``n_quantiles`` exceeds the rows.

    scikit-learn then uses ``n_quantiles_ = n_samples``, which is what
    ``n_quantiles=min(1000, n_rows)`` means here, but warns on every fit to fewer than
    ``n_quantiles`` rows. Same parameters and fitted attributes otherwise.
    """

    def fit(self, X, y=None):
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore",
                message=r"n_quantiles \(\d+\) is greater than the total number of samples",
                category=UserWarning,
            )
            return super().fit(X, y)
