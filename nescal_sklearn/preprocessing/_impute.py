"""Median imputation as scikit-learn's, fitted without masked-array sorting."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.impute import SimpleImputer

__all__: list[str] = []


class _MedianImputer(SimpleImputer):
    """``SimpleImputer(strategy="median")`` whose ``fit`` takes numpy's ``nanmedian``.

    scikit-learn's dense median sorts a masked array: 9.5 s on fashion-mnist's 56,000
    rows of 784 columns, against 0.9 s for ``np.nanmedian`` (which partitions each
    column), with the same statistics (the mean of the two middle values of an even
    count, as both take it). Parameters, fitted attributes and ``transform`` are
    ``SimpleImputer``'s; a strategy other than ``"median"``, a ``missing_values`` other
    than NaN or a non-float matrix is fitted by ``SimpleImputer`` itself.
    """

    def _dense_fit(self, X, strategy, missing_values, fill_value):
        nan = isinstance(missing_values, float) and np.isnan(missing_values)
        if strategy != "median" or not nan or X.dtype.kind != "f":
            return super()._dense_fit(X, strategy, missing_values, fill_value)
        self._fit_indicator(np.isnan(X))
        with warnings.catch_warnings():  # a column with no value: NaN, dropped below
            warnings.simplefilter("ignore", RuntimeWarning)
            median = np.nanmedian(X, axis=0)
        median[np.isnan(median)] = 0 if self.keep_empty_features else np.nan
        return median
