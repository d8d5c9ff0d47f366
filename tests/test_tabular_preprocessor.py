"""make_tabular_preprocessor on the columns it used to drop or ignore without a word
(reliability-8e13b82.md: N30, N39, N40, N42, N45, N46, N50, N112): datetime and timedelta
columns are encoded, a categorical column must keep one kind of value, an overflow is
named, and NumPy input is taken as every scikit-learn transformer takes it."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from nescal_sklearn.preprocessing import make_tabular_preprocessor


def _frame(n=150, seed=0):
    rng = np.random.default_rng(seed)
    y = np.r_[np.zeros(n // 2, int), np.ones(n - n // 2, int)]
    X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n)})
    return X, y


def test_a_datetime_column_becomes_its_date_parts_and_seconds():
    when = pd.Series(
        pd.to_datetime(["2020-01-01", "2021-03-15 06:30", None, "2019-12-31"], format="ISO8601")
    )
    X = pd.DataFrame({"when": when, "x": [1.0, 2.0, 3.0, 4.0]})
    pre = make_tabular_preprocessor().fit(X)
    names = pre.get_feature_names_out().tolist()
    assert names == [
        "x",
        "when_year",
        "when_month",
        "when_day",
        "when_weekday",
        "when_hour",
        "when_seconds",
    ]
    assert pre.column_layout_.numeric == tuple(range(7))
    temporal = pre.named_transformers_["temporal"][0].transform(X[["when"]])
    expected = [
        [2020, 1, 1, 2, 0, 1577836800.0],
        [2021, 3, 15, 0, 6, 1615789800.0],
        [np.nan] * 6,
        [2019, 12, 31, 1, 0, 1577750400.0],
    ]
    np.testing.assert_array_equal(temporal, expected)
    assert np.all(np.isfinite(pre.transform(X)))  # NaT imputed by the median


def test_a_datetime_column_at_midnight_has_no_hour_and_a_timezone_is_read_in_utc():
    when = pd.Series(pd.date_range("2020-01-01", periods=3, freq="D", tz="Europe/Paris"))
    pre = make_tabular_preprocessor().fit(pd.DataFrame({"when": when}))
    temporal = pre.named_transformers_["temporal"][0]
    assert temporal.get_feature_names_out().tolist() == [
        "when_year",
        "when_month",
        "when_day",
        "when_weekday",
        "when_hour",
        "when_seconds",
    ]  # midnight in Paris is 23:00 UTC
    naive = pd.DataFrame({"when": pd.date_range("2020-01-01", periods=3, freq="D")})
    assert "when_hour" not in make_tabular_preprocessor().fit(naive).get_feature_names_out()


def test_a_datetime_column_that_carries_the_label_is_used():
    # N39: the column was dropped (the remainder), training accuracy 0.59-0.63.
    X, y = _frame()
    start = pd.Timestamp("2020-01-01")
    X["when"] = start + pd.to_timedelta(np.where(y == 1, 400, 0) + np.arange(150), unit="D")
    model = make_pipeline(make_tabular_preprocessor(), LogisticRegression()).fit(X, y)
    assert (model.predict(X) == y).mean() == 1.0


def test_a_timedelta_column_is_its_seconds():
    # N112: a numpy DTypePromotionError from the numeric imputer.
    X, y = _frame()
    X["dt"] = pd.to_timedelta(np.arange(150), unit="h")
    pre = make_tabular_preprocessor().fit(X)
    assert pre.get_feature_names_out().tolist() == ["x1", "x2", "dt_seconds"]
    seconds = 3600.0 * np.arange(150)
    np.testing.assert_allclose(
        pre.transform(X)[:, 2], (seconds - seconds.mean()) / seconds.std(), atol=1e-12
    )


def test_a_categorical_column_whose_values_change_kind_is_refused_by_name():
    # N30: strings in fit, integers at predict: every value an unseen category, ignored.
    X, y = _frame()
    X["c"] = np.where(y == 1, "p", "q")
    pre = make_tabular_preprocessor().fit(X)
    changed = X.assign(c=np.arange(150))
    message = (
        "Column 'c' held ['string'] values in fit, but holds ['number'] values now: each "
        "would be a category never seen in fit, and the column would be ignored on every "
        "row. Give it values of the kind it had in fit (e.g. X['c'].astype(str)), or refit."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        pre.transform(changed)
    pre.transform(X.assign(c="r"))  # an unseen category of the same kind is ignored


def test_a_categorical_column_of_mixed_types_is_refused_by_name():
    # N40: scikit-learn's "Encoders require ... uniformly strings or numbers", no column.
    X, _ = _frame()
    X["m"] = np.array([1, "a", 2.5, None, "b"] * 30, dtype=object)
    message = (
        "Column 'm' mixes values of the types ['float', 'int', 'str']: a categorical column "
        "must hold one kind of value (strings, numbers or booleans) for the one-hot encoder "
        "to compare them. Convert it to one, e.g. X['m'].astype('string') (missing values "
        "stay missing)."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        make_tabular_preprocessor().fit(X)


def test_an_overflow_in_scaling_is_named():
    # N42: StandardScaler's overflow became "Input X contains NaN" in the classifier.
    X, _ = _frame()
    X["x1"] = X["x1"] * 1e300
    largest = np.abs(X["x1"]).max()
    message = (
        f"Scaling the column 'x1' (its largest absolute value is {largest:.3g}) overflows "
        "float64 and gives values that are not finite (NaN or inf): a standard scaler "
        "squares the values. Divide the column by a large power of ten, or use "
        "numeric_scaling='robust' or 'quantile'."
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's own overflow warnings
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            make_tabular_preprocessor().fit(X)
        assert np.all(
            np.isfinite(make_tabular_preprocessor(numeric_scaling="robust").fit_transform(X))
        )


def test_a_numpy_array_or_a_list_of_rows_is_numeric_columns():
    # N45, N46: "make_column_selector can only be applied to pandas dataframes".
    X, _ = _frame()
    values = X.to_numpy()
    expected = make_tabular_preprocessor().fit_transform(pd.DataFrame(values))
    np.testing.assert_array_equal(make_tabular_preprocessor().fit_transform(values), expected)
    np.testing.assert_array_equal(
        make_tabular_preprocessor().fit_transform(values.tolist()), expected
    )
    pre = make_tabular_preprocessor().fit(values)
    np.testing.assert_array_equal(pre.transform(values), expected)
    assert pre.column_layout_.numeric == (0, 1)


def test_sparse_input_is_refused_by_name():
    # N50.
    message = (
        "make_tabular_preprocessor takes a pandas DataFrame or a dense array of rows; got a "
        "sparse csr_matrix of shape (3, 3). Its one-hot encoding and imputation work on "
        "dense columns: convert it with X.toarray() (numeric columns), or pass a DataFrame."
    )
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        make_tabular_preprocessor().fit(sp.csr_matrix(np.eye(3)))


def test_a_column_of_another_dtype_is_dropped_with_a_warning():
    X, _ = _frame()
    X["month"] = pd.period_range("2020-01", periods=150, freq="M")
    message = (
        "make_tabular_preprocessor drops the columns ['month'] (dtypes ['period[M]']): it "
        "encodes numeric, string, categorical, boolean, datetime and timedelta columns. "
        "Convert them to one of those, or drop them from X."
    )
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
        make_tabular_preprocessor().fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # columns named by the user: dropped on purpose
        make_tabular_preprocessor(numeric_features=["x1"]).fit(X)


def test_missing_values_at_predict_are_of_no_kind():
    X, y = _frame()
    X["c"] = np.where(y == 1, "p", "q")
    pre = make_tabular_preprocessor().fit(X)
    missing = X.assign(c=np.nan)  # a float column of NaN: imputed, not a new kind
    # imputed by the most frequent category ("p" and "q" tie: the first, "p")
    np.testing.assert_array_equal(pre.transform(missing)[:, 2:], [[1.0, 0.0]] * 150)
