"""Standard preprocessing for mixed-type tabular data, which declares its column layout."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
from sklearn.utils.validation import check_is_fitted

from .._params import plain as _plain
from ._columns import (
    ACCEPTED_KINDS,
    TemporalColumns,
    TemporalFeatures,
    as_frame,
    as_kind,
    value_kinds,
)
from ._impute import _MedianImputer
from ._layout import ColumnLayout
from ._scaling import RobustSmoothClipScaler, _QuantileTransformer

__all__ = ["TabularPreprocessor", "make_tabular_preprocessor"]

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


#: The numpy dtype kinds that need no check against a column's kind of ``fit``.
_DTYPE_KINDS = {"number": "biuf", "datetime": "M", "timedelta": "m"}

#: What a column of each kind takes, for the messages.
_GIVE = {
    "number": "numbers",
    "datetime": "datetimes (datetime64, datetime.date, datetime.datetime or Timestamp)",
    "timedelta": "durations (timedelta64, datetime.timedelta or Timedelta)",
}


class TabularPreprocessor(ColumnTransformer):
    """The :class:`~sklearn.compose.ColumnTransformer` of :func:`make_tabular_preprocessor`.

    The same transformer, plus the layout of its output: ``column_layout_`` says which
    output columns are the scaled numeric features and which one-hot encode each
    categorical feature, so that a classifier is told the layout instead of guessing it
    (``NeSCalClassifier(categorical_features=preprocessor.column_layout_)``), and
    ``imputed_row_`` says what a missing value becomes in each output column.

    It takes what every scikit-learn transformer takes: a pandas DataFrame, or a NumPy
    array or list of rows (columns ``0, 1, ...``: numeric where the values are numbers);
    a sparse matrix is refused. An ``object`` column is typed by its values: numbers,
    datetimes or durations are encoded as such, anything else as categories. After a
    DataFrame ``fit``, an array is read by position if every column was numeric. It
    checks what the column transformer would get wrong without a word: a categorical
    column that mixes value types (numbers and strings) at ``fit``, a column whose
    values are of a kind at ``transform`` that it never held at ``fit`` (strings in
    ``fit``, numbers now: every value would be an unseen category; a duration in
    ``fit``, a date now), and numeric values whose scaling overflows float64.
    """

    def fit_transform(self, X, y=None, **params):
        """Fit the transformers and transform ``X`` (see
        :meth:`sklearn.compose.ColumnTransformer.fit_transform`).

        Raises
        ------
        ValueError
            When a categorical column mixes value types, or the scaling of a numeric
            column overflows.
        TypeError
            For sparse input.
        """
        X = self._typed(as_frame(X))
        kinds = {column: self._checked_kinds(X[column]) for column in self._categorical_columns(X)}
        out = super().fit_transform(X, y, **params)
        self._value_kinds = kinds
        self._column_kinds = self._fitted_kinds(X)
        self._warn_about_dropped_columns(X)
        return self._checked_finite(out, X)

    def transform(self, X, **params):
        """Transform ``X`` (see :meth:`sklearn.compose.ColumnTransformer.transform`).

        Raises
        ------
        ValueError
            When a categorical column holds values of a kind it did not hold at ``fit``,
            or the scaling of a numeric column overflows.
        """
        check_is_fitted(self, "transformers_")
        X = self._checked_columns(self._named(X))
        for column, fitted in getattr(self, "_value_kinds", {}).items():
            if column in X.columns and fitted:
                new = value_kinds(X[column]) - fitted
                if new:
                    raise ValueError(
                        f"Column {_plain(column)!r} held {sorted(fitted)} values in fit, "
                        f"but holds {sorted(new)} values now: each would be a category "
                        "never seen in fit, and the column would be ignored on every row. "
                        "Give it values of the kind it had in fit (e.g. "
                        f"X[{_plain(column)!r}].astype(str)), or refit."
                    )
        return self._checked_finite(super().transform(X, **params), X)

    def _typed(self, X):
        """``X`` with each ``object`` column of numbers, datetimes or durations only (and
        not named by the user) converted to that kind, for the dtype selectors."""
        named = {
            column
            for _, _, columns in self.transformers
            if not callable(columns)
            for column in columns
        }
        typed = {}
        for column in X.columns:
            if X[column].dtype == object and column not in named:
                kinds = value_kinds(X[column])
                if len(kinds) == 1 and next(iter(kinds)) in ACCEPTED_KINDS:
                    typed[column] = as_kind(X[column], next(iter(kinds)))
        typed = {column: values for column, values in typed.items() if values.dtype != object}
        return _with_columns(X, typed)

    def _fitted_kinds(self, X) -> dict:
        """The kind of each numeric and temporal column of ``fit``: ``"number"``,
        ``"datetime"`` or ``"timedelta"`` (a numeric column named by the user that holds
        other values has none: it is not checked)."""
        kinds = {}
        for name, _, columns in self.transformers_:
            for column in columns if name in ("numeric", "temporal") else ():
                values = X[column]
                if name == "temporal":
                    kinds[column] = "timedelta" if values.dtype.kind == "m" else "datetime"
                elif values.dtype.kind in "biuf" or value_kinds(values) <= {"number", "boolean"}:
                    kinds[column] = "number"
        return kinds

    def _named(self, X):
        """``X`` as a frame with the columns of ``fit``: after a DataFrame ``fit``, an array
        (or list of rows) is read by position when it has as many columns and every one was
        numeric, with scikit-learn's warning; otherwise it is refused."""
        frame = as_frame(X)
        if frame is X or not hasattr(self, "feature_names_in_"):
            return frame
        names = [_plain(c) for c in self.feature_names_in_]
        kinds = getattr(self, "_column_kinds", {})
        other = [c for c in names if kinds.get(c) != "number"]
        if frame.shape[1] == len(names) and not other:
            warnings.warn(
                "X does not have valid feature names, but TabularPreprocessor was fitted "
                "with feature names",
                UserWarning,
                stacklevel=3,
            )
            return frame.set_axis(names, axis=1)
        why = (
            f"it has {frame.shape[1]}, not {len(names)}"
            if frame.shape[1] != len(names)
            else f"{other} were not numeric"
        )
        raise ValueError(
            f"make_tabular_preprocessor was fitted on a DataFrame with the columns {names}, "
            f"and gets X without column names (of type {type(X).__name__}). Its columns are "
            "read by position only when they are as many as in fit and were all numeric in "
            f"fit: {why}. Pass a DataFrame with the columns of fit."
        )

    def _checked_columns(self, X):
        """``X`` with its numeric and temporal columns checked against their kind in
        ``fit`` and converted to it (``object`` columns of dates, say)."""
        converted = {}
        for column, kind in getattr(self, "_column_kinds", {}).items():
            if column not in X.columns or X[column].dtype.kind in _DTYPE_KINDS[kind]:
                continue
            new = value_kinds(X[column]) - ACCEPTED_KINDS[kind]
            if new:
                raise ValueError(
                    f"Column {_plain(column)!r} held {kind} values in fit, but holds "
                    f"{' and '.join(sorted(new))} values now, which would not be read as "
                    f"what the model learned from. Give it {_GIVE[kind]}, as in fit (e.g. "
                    f"pd.to_{'numeric' if kind == 'number' else kind}(X[{_plain(column)!r}])), "
                    "or refit."
                )
            converted[column] = as_kind(X[column], kind)
        return _with_columns(X, converted)

    def _categorical_columns(self, X) -> list:
        """The columns the ``"categorical"`` transformer takes from ``X``."""
        for name, _, columns in self.transformers:
            if name == "categorical":
                return list(columns(X) if callable(columns) else columns)
        return []

    @staticmethod
    def _checked_kinds(column) -> set[str]:
        kinds = value_kinds(column)
        if len(kinds) > 1:
            types = sorted({type(v).__name__ for v in column.dropna().tolist()})
            raise ValueError(
                f"Column {_plain(column.name)!r} mixes values of the types {types}: a "
                "categorical column must hold one kind of value (strings, numbers or "
                "booleans) for the one-hot encoder to compare them. Convert it to one, "
                f"e.g. X[{_plain(column.name)!r}].astype('string') (missing values stay "
                "missing)."
            )
        return kinds

    def _warn_about_dropped_columns(self, X) -> None:
        """Columns of a dtype no transformer takes, or datetime and timedelta columns
        without a value, are dropped: say which."""
        selector = {name: columns for name, _, columns in self.transformers}["temporal"]
        empty = selector.all_missing(X) if isinstance(selector, TemporalColumns) else []
        if empty:
            warnings.warn(
                f"make_tabular_preprocessor drops the columns {[_plain(c) for c in empty]}: "
                "every value is missing (NaT) in fit, so they hold nothing to learn from.",
                UserWarning,
                stacklevel=3,
            )
        if any(not callable(columns) for _, _, columns in self.transformers):
            return  # columns named by the user: the others are dropped on purpose
        kept = {
            column
            for name, _, columns in self.transformers_
            if name != "remainder"
            for column in columns
        }
        dropped = [column for column in X.columns if column not in kept and column not in empty]
        if dropped and self.remainder == "drop":
            dtypes = sorted({str(X[column].dtype) for column in dropped})
            warnings.warn(
                f"make_tabular_preprocessor drops the columns {[_plain(c) for c in dropped]} "
                f"(dtypes {dtypes}): it encodes numeric, string, categorical, boolean, "
                "datetime and timedelta columns. Convert them to one of those, or drop them "
                "from X.",
                UserWarning,
                stacklevel=3,
            )

    def _checked_finite(self, out: np.ndarray, X) -> np.ndarray:
        """``out``, unless scaling made a value that is not finite (an overflow)."""
        if np.all(np.isfinite(out)):
            return out
        names = self.get_feature_names_out()
        bad = [names[j] for j in np.flatnonzero(~np.all(np.isfinite(out), axis=0))]
        column = next((c for c in X.columns if str(c) == bad[0]), None)
        largest = (
            f" (its largest absolute value is {np.nanmax(np.abs(X[column].to_numpy(dtype=float))):.3g})"
            if column is not None and X[column].dtype.kind in "fiu"
            else ""
        )
        raise ValueError(
            f"Scaling the column {bad[0]!r}{largest} overflows float64 and gives values "
            f"that are not finite (NaN or inf){'' if len(bad) == 1 else f'; so do {bad[1:]!r}'}: "
            "a standard scaler squares the values. Divide the column by a large power of "
            "ten, or use numeric_scaling='robust' or 'quantile'."
        )

    @property
    def column_layout_(self) -> ColumnLayout:
        """The :class:`ColumnLayout` of the output (available once fitted)."""
        check_is_fitted(self, "output_indices_")
        n_features = int(sum(s.stop - s.start for s in self.output_indices_.values()))
        numeric = [
            index
            for name in ("numeric", "temporal")
            for index in range(n_features)[self.output_indices_.get(name, slice(0, 0))]
        ]
        groups: list[tuple[int, ...]] = []
        categorical = self.output_indices_.get("categorical", slice(0, 0))
        if categorical.stop > categorical.start:
            encoder = self.named_transformers_["categorical"][-1]
            start = self.output_indices_["categorical"].start
            infrequent = getattr(
                encoder, "infrequent_categories_", [None] * len(encoder.categories_)
            )
            for categories, rare in zip(encoder.categories_, infrequent, strict=True):
                size = len(categories) - (0 if rare is None else len(rare) - 1)
                groups.append(tuple(range(start, start + size)))
                start += size
        return ColumnLayout(n_features, tuple(numeric), tuple(groups))

    @property
    def imputed_row_(self) -> np.ndarray:
        """The output of an input row whose every value is missing (available once fitted).

        A numeric column holds its training median after scaling (what the median
        imputer and then the scaler make of a missing value); the one-hot columns of a
        categorical feature encode its most frequent training category (the imputer's
        choice). So a missing entry can be written into the output directly, with the
        value the preprocessor would give it, without sending the rows through again.
        A float64 array of shape ``(n_features_out,)``, in the order of ``column_layout_``.

        Examples
        --------
        >>> import pandas as pd
        >>> from nescal_sklearn import make_tabular_preprocessor
        >>> X = pd.DataFrame({"age": [20.0, 30.0, 70.0], "city": ["a", "b", "b"]})
        >>> make_tabular_preprocessor().fit(X).imputed_row_.round(3).tolist()
        [-0.463, 0.0, 1.0]
        """
        check_is_fitted(self, "output_indices_")
        row = np.zeros(sum(s.stop - s.start for s in self.output_indices_.values()))
        for name in ("numeric", "categorical"):
            columns = self.output_indices_.get(name, slice(0, 0))
            if columns.stop == columns.start:
                continue
            steps = self.named_transformers_[name]
            statistics = steps.named_steps["simpleimputer"].statistics_
            # NaN for an all-missing training column, which the imputer drops
            filled = [v for v in statistics if not (isinstance(v, float) and np.isnan(v))]
            dtype = float if name == "numeric" else object
            row[columns] = steps[-1].transform(np.asarray([filled], dtype=dtype))[0]
        return row


def make_tabular_preprocessor(
    *,
    numeric_features=None,
    categorical_features=None,
    max_categories: int | None = 50,
    numeric_scaling: str = "standard",
) -> TabularPreprocessor:
    """The preprocessing of :func:`make_tabular_pipeline`, without a classifier.

    Numeric columns: median imputation, then scaling (standard by default, see
    ``numeric_scaling``). Datetime and timedelta columns: numbers (a datetime becomes
    its year, month, day, weekday, hour when the column holds times other than
    midnight, and seconds since 1970-01-01, in UTC; a timedelta its seconds), then the
    numeric columns' imputation and scaling. Categorical columns (object, string,
    category or boolean dtype): most-frequent imputation, then one-hot encoding
    (unknown categories at predict time are ignored). The output is a dense float
    matrix: the numeric columns first, then the datetime and timedelta features, then
    the one-hot columns of each categorical feature, as the fitted ``column_layout_``
    says.

    The temporal kinds it takes: a **datetime** column is one of dtype ``datetime64``
    (naive, read as UTC, or in a time zone, converted to UTC), or an ``object`` column of
    ``datetime.date``, ``datetime.datetime``, ``Timestamp`` or ``numpy.datetime64``
    values, which may mix time zones (what a database driver or ``pd.concat`` of
    columns in two zones gives); a **timedelta** column is one of dtype
    ``timedelta64``, or of ``datetime.timedelta``, ``Timedelta`` or
    ``numpy.timedelta64`` values. An ``object`` column of numbers only is numeric; any
    other ``object`` column is categorical: strings are never parsed as dates (convert
    them with ``pd.to_datetime``), and numbers meant as categories take the
    ``category`` dtype. A datetime or timedelta column whose every value is missing
    (``NaT``) in ``fit`` is dropped with a warning that names it.

    ``X`` is a pandas DataFrame, or a NumPy array or list of rows (columns ``0, 1, ...``,
    each typed by its values as an ``object`` column is); sparse input is refused.
    Columns of other dtypes are dropped with a warning that names them (without one when
    the columns are given). A categorical column must hold one kind of value (strings,
    numbers or booleans). At predict time each column must hold values of the kind it
    held in ``fit`` (a datetime column datetimes, a number column numbers or booleans;
    missing values are of every kind): otherwise ``transform`` raises, naming the
    column, the kind it had and the kind it has. After a ``fit`` on a DataFrame, a NumPy
    array is read by position (with scikit-learn's feature-names warning) when it has as
    many columns and all of them were numeric, and refused otherwise. ``fit`` also
    raises, naming the column, when the scaling of a numeric column overflows float64
    (values near 1e300).

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
    TabularPreprocessor
        A :class:`~sklearn.compose.ColumnTransformer` with transformers ``"numeric"`` (a
        pipeline: a median ``SimpleImputer``, then the scaler), ``"temporal"`` (the datetime and
        timedelta columns, which the features named in ``numeric_features`` or
        ``categorical_features`` are not) and ``"categorical"``, and the fitted
        ``column_layout_``.

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
    >>> make_tabular_preprocessor().fit(X).column_layout_.groups
    ((1, 2),)
    """
    if not isinstance(numeric_scaling, str) or numeric_scaling not in NUMERIC_SCALINGS:
        raise ValueError(
            f"numeric_scaling must be one of {sorted(NUMERIC_SCALINGS)}; got {numeric_scaling!r}."
        )
    scaler_name, make_scaler = NUMERIC_SCALINGS[numeric_scaling]
    numeric = (
        make_column_selector(dtype_include=np.number, dtype_exclude="timedelta")
        if numeric_features is None
        else list(numeric_features)
    )
    categorical = (
        make_column_selector(dtype_include=["object", "string", "category", "bool"])
        if categorical_features is None
        else list(categorical_features)
    )
    named = [
        *([] if numeric_features is None else numeric),
        *([] if categorical_features is None else categorical),
    ]
    return TabularPreprocessor(
        [
            (
                "numeric",
                Pipeline(
                    [
                        ("simpleimputer", _MedianImputer(strategy="median")),
                        (scaler_name, make_scaler()),
                    ]
                ),
                numeric,
            ),
            (
                "temporal",
                make_pipeline(TemporalFeatures(), SimpleImputer(strategy="median"), make_scaler()),
                TemporalColumns(exclude=tuple(named)),
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


def _with_columns(X, columns: dict):
    """``X`` with ``columns`` (name -> values) replaced, in a shallow copy; ``X`` itself
    when there are none."""
    if not columns:
        return X
    X = X.copy(deep=False)
    for column, values in columns.items():
        X[column] = values
    return X
