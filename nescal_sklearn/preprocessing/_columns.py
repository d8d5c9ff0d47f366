"""The columns of a raw table that :class:`TabularPreprocessor` checks and encodes:
datetime and timedelta columns as numbers, the kind of values a column holds (read from
its values where its dtype is ``object``; one kind, the same at ``fit`` and ``predict``),
numeric overflow, and input that is not a DataFrame."""

from __future__ import annotations

import datetime
import numbers

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

__all__ = ["TemporalColumns", "TemporalFeatures", "as_frame", "as_kind", "value_kinds"]

#: The dtypes of the columns :class:`TemporalFeatures` encodes.
TEMPORAL_DTYPES = ("datetime", "datetimetz", "timedelta")

#: The parts of a date a datetime column becomes (``hour`` only when the column holds
#: times other than midnight at ``fit``), and its seconds since 1970-01-01 (UTC).
DATE_PARTS = ("year", "month", "day", "weekday")

#: pandas' ``Series.dt`` accessor of a feature, where its name differs.
_ACCESSORS = {"weekday": "day_of_week"}

_KINDS = {
    "string": "string",
    "unicode": "string",
    "bytes": "string",
    "integer": "number",
    "integer-na": "number",
    "floating": "number",
    "mixed-integer-float": "number",
    "decimal": "number",
    "complex": "number",
    "boolean": "boolean",
    "date": "datetime",
    "datetime": "datetime",
    "datetime64": "datetime",
    "timedelta": "timedelta",
    "timedelta64": "timedelta",
}

#: The kinds a column is converted to by :func:`as_kind`, and the kinds of values each
#: takes at ``transform`` (numpy reads booleans as 0 and 1).
ACCEPTED_KINDS = {
    "number": {"number", "boolean"},
    "datetime": {"datetime"},
    "timedelta": {"timedelta"},
}


def _value_kind(value) -> str:
    if isinstance(value, str | bytes):
        return "string"
    if isinstance(value, bool | np.bool_):
        return "boolean"
    if isinstance(value, datetime.date | np.datetime64):  # Timestamp and datetime too
        return "datetime"
    if isinstance(value, datetime.timedelta | np.timedelta64):  # before numbers: numpy's
        return "timedelta"  # timedelta64 is an integer type
    if isinstance(value, numbers.Number):
        return "number"
    return type(value).__name__


def value_kinds(column) -> set[str]:
    """The kinds of the non-missing values of a pandas column: ``"string"``, ``"number"``,
    ``"boolean"``, ``"datetime"`` (``datetime.date``, ``datetime.datetime``, ``Timestamp``,
    ``datetime64``, in any time zone), ``"timedelta"`` or a type's name (a categorical
    column: those of its categories)."""
    from pandas.api.types import infer_dtype

    if hasattr(column, "cat"):
        column = column.cat.categories.to_series()
    column = column.dropna()  # a column of missing values only holds no kind (e.g. NaN)
    if column.empty:
        return set()
    inferred = infer_dtype(column, skipna=True)
    if inferred in _KINDS:
        return {_KINDS[inferred]}
    return {_value_kind(v) for v in column.tolist()}


def as_kind(column, kind: str):
    """``column`` with the dtype of ``kind`` (a key of :data:`ACCEPTED_KINDS`), from values
    of that kind or missing ones: datetimes in UTC (naive ones read as UTC), so that one
    column may mix time zones. Numbers that make no real float or integer dtype (complex
    ones, integers beyond 64 bits) are left as they are."""
    import pandas as pd

    if column.isna().all():  # missing values of any dtype (NaT of the other kind, say)
        column = pd.Series(np.nan, index=column.index, name=column.name)
    if kind == "datetime" and column.dtype.kind != "M":
        return pd.to_datetime(column, utc=True)
    if kind == "timedelta" and column.dtype.kind != "m":
        return pd.to_timedelta(column)
    if kind == "number" and column.dtype == object:
        numbers = pd.to_numeric(column.where(column.notna(), np.nan))
        return numbers if numbers.dtype.kind in "biuf" else column
    return column


def as_frame(X, owner: str = "make_tabular_preprocessor"):
    """``X`` as a pandas DataFrame: a NumPy array or a list of rows becomes one with
    columns ``0, 1, ...`` (numeric where the values are numbers, in each column alone, so
    that a list of rows mixing numbers and strings keeps its numeric columns); sparse
    input is refused.

    Raises
    ------
    TypeError
        For a scipy sparse matrix or array.
    """
    if hasattr(X, "columns") and hasattr(X, "iloc"):
        return X
    if sparse.issparse(X):
        raise TypeError(
            f"{owner} takes a pandas DataFrame or a dense array of rows; got a sparse "
            f"{type(X).__name__} of shape {X.shape}. Its one-hot encoding and imputation "
            "work on dense columns: convert it with X.toarray() (numeric columns), or pass "
            "a DataFrame."
        )
    import pandas as pd
    from sklearn.utils.validation import check_array

    if isinstance(X, list | tuple):  # numpy would make every value a string
        X = np.asarray(X, dtype=object)
    values = check_array(X, dtype=None, ensure_all_finite=False, input_name="X")
    frame = pd.DataFrame(values)
    return frame.infer_objects() if values.dtype == object else frame


def _in_utc(values):
    """A datetime column without its timezone: timezone-aware ones converted to UTC."""
    if getattr(values.dt, "tz", None) is not None:
        return values.dt.tz_convert("UTC").dt.tz_localize(None)
    return values


class TemporalColumns:
    """Column selector of the datetime and timedelta columns of a DataFrame, except those
    named in ``exclude`` (the columns given as numeric or categorical) and those whose
    every value is missing (:meth:`all_missing`)."""

    def __init__(self, exclude: tuple = ()):
        self.exclude = tuple(exclude)

    def __call__(self, X) -> list:
        return [column for column in self._temporal(X) if not X[column].isna().all()]

    def all_missing(self, X) -> list:
        """The datetime and timedelta columns left out because they hold only ``NaT``."""
        return [column for column in self._temporal(X) if X[column].isna().all()]

    def _temporal(self, X) -> list:
        chosen = X.select_dtypes(include=list(TEMPORAL_DTYPES)).columns
        return [column for column in chosen if column not in self.exclude]

    def __repr__(self) -> str:
        return f"TemporalColumns(exclude={self.exclude!r})"


class TemporalFeatures(TransformerMixin, BaseEstimator):
    """Datetime and timedelta columns as numbers, before imputation and scaling.

    A datetime column becomes its year, month, day, weekday (Monday 0), hour (only when
    the column held times other than midnight at ``fit``) and seconds since 1970-01-01;
    a timezone-aware one is read in UTC. A timedelta column becomes its length in
    seconds. A missing value (``NaT``) gives NaN in every feature of its column.

    Attributes
    ----------
    features_ : list of tuple of str
        For each input column, the names of its features (``"year"``, ...,
        ``"seconds"``).
    feature_names_in_ : ndarray of str
        The input columns.
    """

    def fit(self, X, y=None):
        """Choose each column's features.

        Parameters
        ----------
        X : pandas DataFrame of datetime and timedelta columns
        y : None
            Ignored.

        Returns
        -------
        self : TemporalFeatures
        """
        self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        self.n_features_in_ = len(X.columns)
        self.features_ = [self._features(X[column]) for column in X.columns]
        return self

    @staticmethod
    def _features(column) -> tuple[str, ...]:
        if column.dtype.kind == "m":
            return ("seconds",)
        times = _in_utc(column).dropna()
        timed = bool(np.any(times != times.dt.normalize())) if len(times) else False
        return DATE_PARTS + (("hour",) if timed else ()) + ("seconds",)

    def transform(self, X):
        """The features of every column, as floats.

        Parameters
        ----------
        X : pandas DataFrame
            The columns seen in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples, n_features_out)
        """
        check_is_fitted(self, "features_")
        out = []
        for column, features in zip(self.feature_names_in_, self.features_, strict=True):
            values = X[column]
            if values.dtype.kind == "m":
                out.append(values.dt.total_seconds().to_numpy(dtype=np.float64, na_value=np.nan))
                continue
            values = _in_utc(values)
            for feature in features:
                if feature == "seconds":
                    seconds = (values - np.datetime64("1970-01-01")).dt.total_seconds()
                    out.append(seconds.to_numpy(dtype=np.float64, na_value=np.nan))
                else:
                    part = getattr(values.dt, _ACCESSORS.get(feature, feature))
                    out.append(part.to_numpy(dtype=np.float64, na_value=np.nan))
        if not out:
            return np.empty((len(X), 0))
        return np.column_stack(out)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """``<column>_<feature>`` for every feature of every column."""
        check_is_fitted(self, "features_")
        return np.asarray(
            [
                f"{column}_{feature}"
                for column, features in zip(self.feature_names_in_, self.features_, strict=True)
                for feature in features
            ],
            dtype=object,
        )
