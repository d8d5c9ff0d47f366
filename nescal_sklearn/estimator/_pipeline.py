"""Standard preprocessing for mixed-type tabular data in front of a classifier."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

__all__ = ["make_tabular_pipeline", "make_tabular_preprocessor"]


def _as_object(X):
    """Categorical, string and boolean columns as one object array, missing as NaN.

    scikit-learn's imputer otherwise tries to cast a frame mixing ``category`` and
    ``bool`` columns to float.
    """
    if hasattr(X, "astype") and hasattr(X, "columns"):
        return X.astype(object).where(X.notna(), np.nan).to_numpy()
    return np.asarray(X, dtype=object)


def make_tabular_preprocessor(
    *,
    numeric_features=None,
    categorical_features=None,
    max_categories: int | None = 50,
) -> ColumnTransformer:
    """The preprocessing of :func:`make_tabular_pipeline`, without a classifier.

    Numeric columns: median imputation, then standard scaling. Categorical columns
    (object, string, category or boolean dtype): most-frequent imputation, then
    one-hot encoding (unknown categories at predict time are ignored). The output is
    a dense float matrix.

    Parameters
    ----------
    numeric_features, categorical_features : list of column names or None, default=None
        Columns of each kind; None selects them by dtype.
    max_categories : int or None, default=50
        Upper bound on one-hot columns per categorical feature (rarer categories are
        grouped), as in :class:`~sklearn.preprocessing.OneHotEncoder`.

    Returns
    -------
    sklearn.compose.ColumnTransformer
        Transformers ``"numeric"`` and ``"categorical"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from nescal_sklearn import make_tabular_preprocessor
    >>> X = pd.DataFrame({"age": [25, 32, None, 51], "city": ["a", "b", "a", None]})
    >>> make_tabular_preprocessor().fit_transform(X).shape
    (4, 3)
    """
    numeric = (
        make_column_selector(dtype_include=np.number)
        if numeric_features is None
        else list(numeric_features)
    )
    categorical = (
        make_column_selector(dtype_include=["object", "string", "category", "bool"])
        if categorical_features is None
        else list(categorical_features)
    )
    return ColumnTransformer(
        [
            ("numeric", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
            (
                "categorical",
                make_pipeline(
                    FunctionTransformer(_as_object, feature_names_out="one-to-one"),
                    SimpleImputer(strategy="most_frequent", missing_values=np.nan),
                    OneHotEncoder(
                        handle_unknown="infrequent_if_exist" if max_categories else "ignore",
                        max_categories=max_categories,
                        sparse_output=False,
                    ),
                ),
                categorical,
            ),
        ],
        sparse_threshold=0.0,
        verbose_feature_names_out=False,
    )


def make_tabular_pipeline(
    classifier: BaseEstimator | None = None,
    *,
    numeric_features=None,
    categorical_features=None,
    max_categories: int | None = 50,
) -> Pipeline:
    """Build ``preprocess -> classifier`` for a DataFrame with numeric and categorical columns.

    The preprocessing is :func:`make_tabular_preprocessor`: median imputation and
    standard scaling of numeric columns, most-frequent imputation and one-hot
    encoding of categorical ones. Its output is a dense float matrix that any
    scikit-learn classifier accepts.

    Parameters
    ----------
    classifier : estimator or None, default=None
        The final step; None gives ``NeSCalClassifier()``.
    numeric_features, categorical_features, max_categories
        Passed to :func:`make_tabular_preprocessor` (same defaults).

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``"preprocess"`` and ``"classifier"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from nescal_sklearn import make_tabular_pipeline
    >>> X = pd.DataFrame({"age": [25, 32, None, 51], "city": ["a", "b", "a", None]})
    >>> pipe = make_tabular_pipeline(LogisticRegression()).fit(X, [0, 1, 0, 1])
    >>> pipe.predict_proba(X).shape
    (4, 2)
    """
    if classifier is None:
        from ._classifier import NeSCalClassifier

        classifier = NeSCalClassifier()
    preprocess = make_tabular_preprocessor(
        numeric_features=numeric_features,
        categorical_features=categorical_features,
        max_categories=max_categories,
    )
    return Pipeline([("preprocess", preprocess), ("classifier", classifier)])
