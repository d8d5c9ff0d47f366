"""Tests of local_calibration_error and its scorer: hand-worked values, references, errors."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import check_scoring
from sklearn.model_selection import GridSearchCV, StratifiedKFold

from nescal_sklearn.metrics import (
    expected_calibration_error,
    local_calibration_error,
    maximum_calibration_error,
)
from nescal_sklearn.scorers import (
    LocalCalibrationScorer,
    get_scorer,
    get_scorer_names,
    neg_local_calibration_error,
)

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

# Six rows on a line, two clusters; binary, y_proba is the probability of class 1.
#   row  x     p(1)  y | predicted  confidence c  correct a  c - a
#   0    0     0.9   1 | 1          0.9           1          -0.1
#   1    1     0.7   0 | 1          0.7           0          +0.7
#   2    2     0.95  1 | 1          0.95          1          -0.05
#   3    10    0.3   0 | 0          0.7           1          -0.3
#   4    11    0.1   1 | 0          0.9           0          +0.9
#   5    12    0.3   0 | 0          0.7           1          -0.3
X_LINE = [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]
P_LINE = [0.9, 0.7, 0.95, 0.3, 0.1, 0.3]
Y_LINE = [1, 0, 1, 0, 1, 0]
GAP_LINE = np.array([-0.1, 0.7, -0.05, -0.3, 0.9, -0.3])


def _raises(message: str, error: type[Exception] = ValueError):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _random_problem(seed: int, n: int = 60, n_classes: int = 3, n_features: int = 2):
    rng = np.random.default_rng(seed)
    logits = 1.5 * rng.normal(size=(n, n_classes))
    proba = np.exp(logits)
    proba /= proba.sum(axis=1, keepdims=True)
    y = rng.integers(0, n_classes, size=n)
    features = rng.normal(size=(n, n_features))
    return y, proba, features


def _top_label_gap(y, proba):
    predicted = np.argmax(proba, axis=1)
    return proba[np.arange(len(y)), predicted] - (predicted == y)


def _bins(confidence, n_bins):
    # Equal-width bins closed on the right, the first one on both sides.
    return np.maximum(np.ceil(confidence * n_bins).astype(int) - 1, 0)


def _brute_force(y, proba, features, *, n_neighbors=20, n_bins=15, kernel="knn", bandwidth=1.0):
    """Per-row loop over the definition, for inputs without distance ties."""
    gap = _top_label_gap(np.asarray(y), np.asarray(proba))
    features = np.asarray(features, dtype=float).reshape(len(gap), -1)
    bins = _bins(np.max(proba, axis=1), n_bins)
    local = []
    for i in range(len(gap)):
        same = np.flatnonzero(bins == bins[i])
        dist = np.linalg.norm(features[same] - features[i], axis=1)
        if kernel == "knn":
            nearest = same[np.argsort(dist)[:n_neighbors]]
            local.append(abs(gap[nearest].mean()))
        else:
            k = np.exp(-dist / bandwidth)
            local.append(abs(np.sum(k * gap[same]) / np.sum(k)))
    return np.array(local)


# --------------------------------------------------------------------------- hand-worked


def test_hand_worked_two_clusters_one_bin():
    # n_bins=1, 3 neighbours: each row's neighbourhood is its own cluster (the third
    # nearest row is 2 away, the other cluster at least 8).
    # left  {0, 1, 2}: (-0.1 + 0.7 - 0.05) / 3 = 0.55 / 3 = 0.18333
    # right {3, 4, 5}: (-0.3 + 0.9 - 0.3) / 3 = 0.1
    # mean = (3 * 0.18333 + 3 * 0.1) / 6 = 0.141667 ; max = 0.18333
    kwargs = dict(n_neighbors=3, n_bins=1)
    assert local_calibration_error(Y_LINE, P_LINE, X_LINE, **kwargs) == pytest.approx(
        (0.55 / 3 + 0.1) / 2
    )
    assert local_calibration_error(
        Y_LINE, P_LINE, X_LINE, reduction="max", **kwargs
    ) == pytest.approx(0.55 / 3)


def test_hand_worked_bins_restrict_the_neighbourhoods():
    # n_bins=5: bin (0.6, 0.8] holds rows 1, 3, 5 (c = 0.7), bin (0.8, 1] rows 0, 2, 4.
    # 2 neighbours, the nearest row of the same bin:
    #   row 1 (x=1):  row 3 (9 away, row 5 is 11)  |0.7 - 0.3| / 2  = 0.2
    #   row 3 (x=10): row 5 (2 away)               |-0.3 - 0.3| / 2 = 0.3
    #   row 5 (x=12): row 3                        0.3
    #   row 0 (x=0):  row 2 (2 away, row 4 is 11)  |-0.1 - 0.05| / 2 = 0.075
    #   row 2 (x=2):  row 0                        0.075
    #   row 4 (x=11): row 2 (9 away, row 0 is 11)  |0.9 - 0.05| / 2 = 0.425
    # mean = (0.075 + 0.2 + 0.075 + 0.3 + 0.425 + 0.3) / 6 = 1.375 / 6 ; max = 0.425
    kwargs = dict(n_neighbors=2, n_bins=5)
    assert local_calibration_error(Y_LINE, P_LINE, X_LINE, **kwargs) == pytest.approx(1.375 / 6)
    assert local_calibration_error(
        Y_LINE, P_LINE, X_LINE, reduction="max", **kwargs
    ) == pytest.approx(0.425)


def test_hand_worked_rows_tied_at_the_edge_share_the_last_place():
    # n_bins=1, 2 neighbours. Row 1 (x=1) has rows 0 and 2 both 1 away: they share the
    # one place left, half each: |0.7 + 0.5 * (-0.1) + 0.5 * (-0.05)| / 2 = 0.3125.
    # Row 4 likewise with rows 3 and 5: |0.9 - 0.15 - 0.15| / 2 = 0.3.
    # Rows 0 and 2 take row 1: |-0.1 + 0.7| / 2 = 0.3 and |-0.05 + 0.7| / 2 = 0.325;
    # rows 3 and 5 take row 4: |-0.3 + 0.9| / 2 = 0.3.
    # mean = (0.3 + 0.3125 + 0.325 + 0.3 + 0.3 + 0.3) / 6 = 1.8375 / 6 ; max = 0.325
    kwargs = dict(n_neighbors=2, n_bins=1)
    assert local_calibration_error(Y_LINE, P_LINE, X_LINE, **kwargs) == pytest.approx(1.8375 / 6)
    assert local_calibration_error(
        Y_LINE, P_LINE, X_LINE, reduction="max", **kwargs
    ) == pytest.approx(0.325)


def test_hand_worked_laplacian():
    # n_bins=1, bandwidth 1: K_ij = exp(-|x_i - x_j|); the other cluster weighs e^-8 or less.
    x, gap = np.asarray(X_LINE), GAP_LINE
    kernel = np.exp(-np.abs(x[:, None] - x[None, :]))
    expected = np.abs(kernel @ gap / kernel.sum(axis=1))
    assert local_calibration_error(
        Y_LINE, P_LINE, X_LINE, n_bins=1, kernel="laplacian", bandwidth=1.0
    ) == pytest.approx(expected.mean())
    # Row 0, by hand: (-0.1 + 0.7 e^-1 - 0.05 e^-2 + ...) / (1 + e^-1 + e^-2 + ...)
    e1, e2 = np.exp(-1.0), np.exp(-2.0)
    assert expected[0] == pytest.approx((-0.1 + 0.7 * e1 - 0.05 * e2) / (1 + e1 + e2), abs=1e-3)


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_all_rows_one_bin_is_the_global_gap(seed):
    y, proba, features = _random_problem(seed)
    global_gap = abs(np.mean(_top_label_gap(y, proba)))
    for reduction in ("mean", "max"):
        lce = local_calibration_error(
            y, proba, features, n_neighbors=len(y), n_bins=1, reduction=reduction
        )
        assert lce == pytest.approx(global_gap)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_bins", [1, 5, 15])
def test_whole_bins_give_ece_and_mce(seed, n_bins):
    y, proba, features = _random_problem(seed)
    kwargs = dict(n_neighbors=10 * len(y), n_bins=n_bins)  # more than the rows: no error
    assert local_calibration_error(y, proba, features, **kwargs) == pytest.approx(
        expected_calibration_error(y, proba, n_bins=n_bins)
    )
    assert local_calibration_error(y, proba, features, reduction="max", **kwargs) == pytest.approx(
        maximum_calibration_error(y, proba, n_bins=n_bins)
    )
    at_n = local_calibration_error(y, proba, features, n_neighbors=len(y), n_bins=n_bins)
    # exact: n_neighbors above the row count takes the bin whole, as n_neighbors=n does
    assert local_calibration_error(y, proba, features, **kwargs) == at_n


@pytest.mark.parametrize("n_bins", [1, 15])
def test_one_neighbour_is_the_mean_absolute_row_gap(n_bins):
    y, proba, features = _random_problem(3)
    gap = _top_label_gap(y, proba)
    kwargs = dict(n_neighbors=1, n_bins=n_bins)
    assert local_calibration_error(y, proba, features, **kwargs) == pytest.approx(
        np.mean(np.abs(gap))
    )
    assert local_calibration_error(y, proba, features, reduction="max", **kwargs) == pytest.approx(
        np.max(np.abs(gap))
    )


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize(("kernel", "extra"), [("knn", {"n_neighbors": 7}), ("laplacian", {})])
@pytest.mark.parametrize("n_bins", [1, 4, 15])
def test_matches_a_per_row_loop(seed, kernel, extra, n_bins):
    y, proba, features = _random_problem(seed, n=80, n_features=3)
    kwargs = dict(n_bins=n_bins, kernel=kernel, **extra)
    expected = _brute_force(y, proba, features, **kwargs)
    assert local_calibration_error(y, proba, features, **kwargs) == pytest.approx(expected.mean())
    assert local_calibration_error(y, proba, features, reduction="max", **kwargs) == pytest.approx(
        expected.max()
    )


def test_laplacian_bandwidth_limits():
    y, proba, features = _random_problem(6)
    gap = _top_label_gap(y, proba)
    narrow = local_calibration_error(y, proba, features, kernel="laplacian", bandwidth=1e-6)
    assert narrow == pytest.approx(np.mean(np.abs(gap)))
    wide = local_calibration_error(y, proba, features, kernel="laplacian", bandwidth=1e9)
    assert wide == pytest.approx(expected_calibration_error(y, proba))


def test_sees_what_ece_cannot():
    # Every row at confidence 0.75. Left cluster: always right (under-confident by 0.25);
    # right cluster: right every other row (over-confident by 0.25). 75 % are right
    # overall, so ECE and MCE are 0, while each neighbourhood is 0.25 off.
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(0, 1, 100), rng.uniform(10, 11, 100)])
    order = np.argsort(x[100:])
    right = np.empty(100, dtype=int)
    right[order] = np.arange(100) % 2  # alternate along the line
    y = np.concatenate([np.ones(100, dtype=int), right])
    proba = np.full(200, 0.75)
    assert expected_calibration_error(y, proba) == pytest.approx(0.0, abs=1e-12)
    assert maximum_calibration_error(y, proba) == pytest.approx(0.0, abs=1e-12)
    lce = local_calibration_error(y, proba, x, n_neighbors=20)
    assert lce == pytest.approx(0.25, abs=0.02)
    assert local_calibration_error(y, proba, x, kernel="laplacian", bandwidth=0.1) == (
        pytest.approx(0.25, abs=0.02)
    )


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("kernel", ["knn", "laplacian"])
@pytest.mark.parametrize("seed", [8, 9, 10])
def test_invariant_to_row_permutation(kernel, seed):
    y, proba, features = _random_problem(seed)
    order = np.random.default_rng(seed).permutation(len(y))
    for reduction in ("mean", "max"):
        kwargs = dict(n_neighbors=6, n_bins=4, kernel=kernel, reduction=reduction)
        assert local_calibration_error(
            y[order], proba[order], features[order], **kwargs
        ) == pytest.approx(local_calibration_error(y, proba, features, **kwargs), abs=1e-12)


def test_invariant_to_row_permutation_with_ties():
    # Integer grid features: many rows tied at the edge of a neighbourhood.
    rng = np.random.default_rng(11)
    y, proba, _ = _random_problem(11, n=50)
    features = rng.integers(0, 3, size=(50, 2))
    order = rng.permutation(50)
    kwargs = dict(n_neighbors=5, n_bins=3)
    assert local_calibration_error(
        y[order], proba[order], features[order], **kwargs
    ) == pytest.approx(local_calibration_error(y, proba, features, **kwargs), abs=1e-12)


@pytest.mark.parametrize("kernel", ["knn", "laplacian"])
@pytest.mark.parametrize("seed", [12, 13, 14])
def test_integer_sample_weight_equals_row_repetition(kernel, seed):
    y, proba, features = _random_problem(seed, n=40)  # continuous features: no ties
    weights = np.random.default_rng(seed).integers(0, 4, size=len(y))
    weights[0] = max(weights[0], 1)
    for reduction in ("mean", "max"):
        kwargs = dict(n_neighbors=7, n_bins=3, kernel=kernel, reduction=reduction)
        weighted = local_calibration_error(y, proba, features, sample_weight=weights, **kwargs)
        repeated = local_calibration_error(
            np.repeat(y, weights),
            np.repeat(proba, weights, axis=0),
            np.repeat(features, weights, axis=0),
            **kwargs,
        )
        assert weighted == pytest.approx(repeated)


@st.composite
def _problems(draw):
    n = draw(st.integers(1, 30))
    n_classes = draw(st.integers(2, 4))
    n_features = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.normal(size=(n, n_classes))
    proba = np.exp(logits)
    proba /= proba.sum(axis=1, keepdims=True)
    y = rng.integers(0, n_classes, size=n)
    features = rng.integers(-2, 3, size=(n, n_features)) * draw(st.sampled_from([1.0, 0.37]))
    weights = rng.uniform(0, 2, size=n) if draw(st.booleans()) else None
    return y, proba, features, np.arange(n_classes), weights


@settings(max_examples=60, deadline=None)
@given(
    problem=_problems(),
    n_neighbors=st.integers(1, 40),
    n_bins=st.integers(1, 20),
    kernel=st.sampled_from(["knn", "laplacian"]),
    bandwidth=st.floats(0.01, 100.0),
)
def test_in_unit_interval_and_mean_at_most_max(problem, n_neighbors, n_bins, kernel, bandwidth):
    y, proba, features, labels, weights = problem
    kwargs = dict(
        n_neighbors=n_neighbors,
        n_bins=n_bins,
        kernel=kernel,
        bandwidth=bandwidth,
        labels=labels,
        sample_weight=weights,
    )
    mean = local_calibration_error(y, proba, features, **kwargs)
    largest = local_calibration_error(y, proba, features, reduction="max", **kwargs)
    assert type(mean) is float
    assert 0.0 <= mean <= largest + 1e-12
    assert largest <= 1.0


def test_zero_weight_rows_are_left_out():
    y, proba, features = _random_problem(15, n=30)
    weights = np.ones(30)
    weights[::3] = 0
    keep = weights > 0
    for reduction in ("mean", "max"):
        kwargs = dict(n_neighbors=4, n_bins=2, reduction=reduction)
        assert local_calibration_error(
            y, proba, features, sample_weight=weights, **kwargs
        ) == pytest.approx(local_calibration_error(y[keep], proba[keep], features[keep], **kwargs))


def test_labels_when_y_true_lacks_a_class():
    y, proba, features = _random_problem(16, n=20)
    y = np.where(y == 2, 0, y)  # class 2 never occurs
    lce = local_calibration_error(y, proba, features, labels=[0, 1, 2], n_neighbors=5)
    assert lce == pytest.approx(_brute_force(y, proba, features, n_neighbors=5).mean())


def test_computing_it_imports_neither_torch_nor_matplotlib():
    program = (
        "import sys; import nescal_sklearn.metrics as m; "
        "m.local_calibration_error([0, 1, 1], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]], [0, 1, 2], "
        "n_neighbors=2); m.local_calibration_error([0, 1], [0.3, 0.6], [0, 1], kernel='laplacian'); "
        "print(sorted(x for x in sys.modules if x.split('.')[0] in ('torch', 'matplotlib')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# --------------------------------------------------------------------------- errors

_Y, _P, _F = [0, 1, 1, 0], [0.2, 0.7, 0.6, 0.4], [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_neighbors": 0}, "n_neighbors must be an integer >= 1; got 0."),
        ({"n_neighbors": np.int64(-3)}, "n_neighbors must be an integer >= 1; got -3."),
        ({"n_neighbors": 2.5}, "n_neighbors must be an integer >= 1; got 2.5."),
        ({"n_neighbors": True}, "n_neighbors must be an integer >= 1; got True."),
        ({"n_neighbors": "5"}, "n_neighbors must be an integer >= 1; got '5'."),
        ({"n_bins": 0}, "n_bins must be an integer >= 1; got 0."),
        ({"reduction": "sum"}, "reduction must be 'mean' or 'max'; got 'sum'."),
        ({"reduction": np.str_("median")}, "reduction must be 'mean' or 'max'; got 'median'."),
        ({"reduction": None}, "reduction must be 'mean' or 'max'; got None."),
        ({"kernel": "rbf"}, "kernel must be 'knn' or 'laplacian'; got 'rbf'."),
        ({"bandwidth": 0}, "bandwidth must be a finite number > 0; got 0."),
        ({"bandwidth": -1.5}, "bandwidth must be a finite number > 0; got -1.5."),
        ({"bandwidth": np.nan}, "bandwidth must be a finite number > 0; got nan."),
        ({"bandwidth": np.float64(np.inf)}, "bandwidth must be a finite number > 0; got inf."),
        ({"bandwidth": True}, "bandwidth must be a finite number > 0; got True."),
        ({"bandwidth": "1"}, "bandwidth must be a finite number > 0; got '1'."),
        (
            {"sample_weight": [1.0, -1.0, 1.0, 1.0]},
            "sample_weight must be finite and non-negative; got -1.0 at index 1.",
        ),
    ],
)
def test_argument_errors(kwargs, message):
    with _raises(message):
        local_calibration_error(_Y, _P, _F, **kwargs)


@pytest.mark.parametrize(
    ("features", "message"),
    [
        (
            [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]],
            "y_true and features must have the same number of samples; got 4 and 3.",
        ),
        (
            [0.0, 1.0, 2.0, 3.0, 4.0],
            "y_true and features must have the same number of samples; got 4 and 5.",
        ),
        (
            [[0.0, 1.0], [1.0, np.nan], [2.0, 2.0], [3.0, 1.0]],
            "features must not contain NaN or infinity; got nan in row 1.",
        ),
        (
            [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [-np.inf, 1.0]],
            "features must not contain NaN or infinity; got -inf in row 3.",
        ),
        ([["a", "b"]] * 4, "features must hold numbers; got an array of dtype <U1."),
        (
            [[0.0, 1.0], [1.0], [2.0, 2.0], [3.0, 1.0]],
            (
                "features must be an array of shape (n_samples, n_features); its rows differ "
                "in length."
            ),
        ),
        (
            np.zeros((4, 2, 2)),
            (
                "features must be of shape (n_samples,) or (n_samples, n_features) with at least "
                "one feature; got shape (4, 2, 2)."
            ),
        ),
        (
            np.zeros((4, 0)),
            (
                "features must be of shape (n_samples,) or (n_samples, n_features) with at least "
                "one feature; got shape (4, 0)."
            ),
        ),
        (
            np.float64(1.0),
            (
                "features must be of shape (n_samples,) or (n_samples, n_features) with at least "
                "one feature; got shape ()."
            ),
        ),
    ],
)
def test_feature_errors(features, message):
    with _raises(message):
        local_calibration_error(_Y, _P, features)


def test_probability_errors_are_the_shared_ones():
    with _raises("y_true and y_proba must have the same number of samples; got 4 and 3."):
        local_calibration_error(_Y, _P[:3], _F)


# --------------------------------------------------------------------------- scorer


def _standardise(X):
    """Column-wise zero mean, unit (population) standard deviation; constant columns 0."""
    X = np.asarray(X, dtype=float)
    std = X.std(axis=0)
    constant = X.max(axis=0) == X.min(axis=0)
    return np.where(constant, 0.0, (X - X.mean(axis=0)) / np.where(constant, 1.0, std))


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


class _Constant:
    """A fitted 'classifier' that predicts the same probabilities for any X."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X):
        return np.tile([0.3, 0.7], (len(X), 1))


def test_grid_search_matches_metric_by_hand(iris):
    X, y = iris
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"C": [0.05, 1.0]}
    search = GridSearchCV(
        LogisticRegression(max_iter=1000), grid, scoring=neg_local_calibration_error, cv=cv
    ).fit(X, y)
    for i, params in enumerate(search.cv_results_["params"]):
        for k, (train, test) in enumerate(cv.split(X, y)):
            model = LogisticRegression(max_iter=1000, **params).fit(X[train], y[train])
            by_hand = -local_calibration_error(
                y[test], model.predict_proba(X[test]), _standardise(X[test]), labels=model.classes_
            )
            assert search.cv_results_[f"split{k}_test_score"][i] == pytest.approx(by_hand)
    assert search.best_score_ <= 0


def test_grid_search_by_name_and_with_other_scorers(iris):
    X, y = iris
    assert "neg_local_calibration_error" in get_scorer_names()
    scorer = get_scorer("neg_local_calibration_error")
    assert scorer is not neg_local_calibration_error
    assert repr(scorer) == "LocalCalibrationScorer(local_calibration_error)"
    scoring = {"lce": scorer, "ece": "neg_expected_calibration_error", "acc": "accuracy"}
    scoring["ece"] = get_scorer(scoring["ece"])
    search = GridSearchCV(
        LogisticRegression(max_iter=1000), {"C": [0.05, 1.0]}, scoring=scoring, refit="lce", cv=3
    ).fit(X, y)
    assert np.all(search.cv_results_["mean_test_lce"] <= 0)
    assert search.best_index_ == int(np.argmax(search.cv_results_["mean_test_lce"]))


def test_scorer_params_and_sample_weight(iris):
    X, y = iris
    model = LogisticRegression(max_iter=1000).fit(X, y)
    weights = np.random.default_rng(17).uniform(0.1, 2.0, size=len(y))
    scorer = LocalCalibrationScorer(n_neighbors=10, reduction="max")
    assert repr(scorer) == (
        "LocalCalibrationScorer(local_calibration_error, n_neighbors=10, reduction='max')"
    )
    by_hand = -local_calibration_error(
        y,
        model.predict_proba(X),
        _standardise(X),
        n_neighbors=10,
        reduction="max",
        sample_weight=weights,
    )
    # exact: the scorer calls predict_proba and the metric as by_hand does
    assert scorer(model, X, y, sample_weight=weights) == by_hand
    multi = check_scoring(model, scoring={"lce": scorer, "acc": "accuracy"})
    assert multi(model, X, y, sample_weight=weights)["lce"] == by_hand


def test_scorer_constant_columns_and_scale_do_not_matter(iris):
    X, y = iris
    model = _Constant()
    y = (y > 0).astype(int)
    base = neg_local_calibration_error(model, X, y)
    with_constant = np.column_stack([X, np.full(len(y), 0.1), np.full(len(y), 7.0)])
    assert neg_local_calibration_error(model, with_constant, y) == pytest.approx(base)
    assert neg_local_calibration_error(model, X * [1.0, 10.0, 0.01, 3.0], y) == pytest.approx(base)


@pytest.mark.determinism
def test_scorer_pickles(iris):
    X, y = iris
    model = LogisticRegression(max_iter=1000).fit(X, y)
    restored = pickle.loads(pickle.dumps(neg_local_calibration_error))
    assert restored(model, X, y) == neg_local_calibration_error(model, X, y)


def test_scorer_needs_numeric_finite_x():
    y = [0, 1, 1]
    message = (
        "LocalCalibrationScorer(local_calibration_error) measures the neighbourhoods in the "
        "space of the scored rows X, so X must hold numbers only; it could not be converted "
        "to a float array."
    )
    with _raises(message):
        neg_local_calibration_error(_Constant(), [["a", 1.0], ["b", 2.0], ["c", 3.0]], y)
    message = (
        "LocalCalibrationScorer(local_calibration_error) measures the neighbourhoods in the "
        "space of the scored rows X, so X must be finite; got nan in row 2."
    )
    with _raises(message):
        neg_local_calibration_error(_Constant(), [[0.0, 1.0], [1.0, 2.0], [np.nan, 3.0]], y)


def test_scorer_takes_no_features_argument():
    message = (
        "LocalCalibrationScorer takes the features from the scored rows X; do not pass features."
    )
    with _raises(message, TypeError):
        LocalCalibrationScorer(features=np.zeros((3, 1)))
