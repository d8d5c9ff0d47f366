"""``make_tabular_pipeline``: the tabular preprocessing in front of a classifier."""

from __future__ import annotations

from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ..preprocessing import make_tabular_preprocessor
from ._classifier import NeSCalClassifier

__all__ = ["make_tabular_pipeline"]


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
        classifier = NeSCalClassifier()
    preprocess = make_tabular_preprocessor(
        numeric_features=numeric_features,
        categorical_features=categorical_features,
        max_categories=max_categories,
        numeric_scaling=numeric_scaling,
    )
    return Pipeline([("preprocess", preprocess), ("classifier", classifier)])
