"""Standard preprocessing for mixed-type tabular data in front of a classifier."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

from ._scaling import RobustSmoothClipScaler, _QuantileTransformer

__all__ = ["make_tabular_pipeline", "make_tabular_preprocessor"]

#: ``numeric_scaling`` choices: name -> (step name, scaler factory). The step names are
#: the ones :func:`~sklearn.pipeline.make_pipeline` gives the public classes.
NUMERIC_SCALINGS = {
    "standard": ("standardscaler", StandardScaler),
    "robust": ("robustsmoothclipscaler", RobustSmoothClipScaler),
    "quantile": (
        "quantiletransformer",
        lambda: _QuantileTransformer(
            n_quantiles=1000, output_distribution="normal", random_state=0
        ),
    ),
}


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
    numeric_scaling: str = "standard",
) -> ColumnTransformer:
    """The preprocessing of :func:`make_tabular_pipeline`, without a classifier.

    Numeric columns: median imputation, then scaling (standard by default, see
    ``numeric_scaling``). Categorical columns (object, string, category or boolean
    dtype): most-frequent imputation, then one-hot encoding (unknown categories at
    predict time are ignored). The output is a dense float matrix.

    Parameters
    ----------
    numeric_features, categorical_features : list of column names or None, default=None
        Columns of each kind; None selects them by dtype.
    max_categories : int or None, default=50
        Upper bound on one-hot columns per categorical feature (rarer categories are
        grouped), as in :class:`~sklearn.preprocessing.OneHotEncoder`.
    numeric_scaling : {"standard", "robust", "quantile"}, default="standard"
        Scaling of the numeric columns after median imputation.

        - ``"standard"``: :class:`~sklearn.preprocessing.StandardScaler` (zero mean,
          unit variance). Fine for roughly symmetric columns without outliers; one
          extreme value inflates the standard deviation and squashes the rest.
        - ``"robust"``: :class:`RobustSmoothClipScaler`, RealMLP's preprocessing
          (Holzmüller et al., 2024): median centring, inter-quartile scaling, then a
          smooth clip to ``(-3, 3)``. Nearly linear in the bulk of a column and bounded
          on outliers and heavy tails; a good default for neural networks on raw
          tabular data.
        - ``"quantile"``: :class:`~sklearn.preprocessing.QuantileTransformer` to a
          standard normal, ``n_quantiles=min(1000, n_rows)`` (no warning when there are
          fewer rows) from at most 10,000 rows subsampled with ``random_state=0``.
          Rank-based: removes any skew and outlier, but also the distances within a
          column, and maps ties (discrete columns) to a few levels.

    Returns
    -------
    sklearn.compose.ColumnTransformer
        Transformers ``"numeric"`` (a pipeline: ``SimpleImputer``, then the scaler) and
        ``"categorical"``.

    Raises
    ------
    ValueError
        If ``numeric_scaling`` is not one of the choices above.

    Examples
    --------
    >>> import pandas as pd
    >>> from nescal_sklearn import make_tabular_preprocessor
    >>> X = pd.DataFrame({"age": [25, 32, None, 51], "city": ["a", "b", "a", None]})
    >>> make_tabular_preprocessor().fit_transform(X).shape
    (4, 3)
    >>> make_tabular_preprocessor(numeric_scaling="robust").fit_transform(X)[:, 0].round(3)
    array([-1.014,  0.   ,  0.   ,  2.094])
    """
    if not isinstance(numeric_scaling, str) or numeric_scaling not in NUMERIC_SCALINGS:
        raise ValueError(
            f"numeric_scaling must be one of {sorted(NUMERIC_SCALINGS)}; got {numeric_scaling!r}."
        )
    scaler_name, make_scaler = NUMERIC_SCALINGS[numeric_scaling]
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
            (
                "numeric",
                Pipeline(
                    [
                        ("simpleimputer", SimpleImputer(strategy="median")),
                        (scaler_name, make_scaler()),
                    ]
                ),
                numeric,
            ),
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
    numeric_scaling: str = "standard",
) -> Pipeline:
    """Build ``preprocess -> classifier`` for a DataFrame with numeric and categorical columns.

    The preprocessing is :func:`make_tabular_preprocessor`: median imputation and
    scaling of numeric columns (standard by default; ``numeric_scaling="robust"`` gives
    RealMLP's robust smooth clip), most-frequent imputation and one-hot encoding of
    categorical ones. Its output is a dense float matrix that any scikit-learn
    classifier accepts.

    Parameters
    ----------
    classifier : estimator or None, default=None
        The final step; None gives ``NeSCalClassifier()``.
    numeric_features, categorical_features, max_categories, numeric_scaling
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
        numeric_scaling=numeric_scaling,
    )
    return Pipeline([("preprocess", preprocess), ("classifier", classifier)])
