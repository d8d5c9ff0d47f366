"""The cross-fitted ensemble on bad or awkward input: the cases of the reliability review
of 8e13b82 (``reliability-8e13b82.md``, §4) that gave a silently wrong answer, an unclear
error or a raw traceback, each with the correct result or the full text of its error.

Members are quick scikit-learn models (and the recommended model with 5 epochs), on a
few hundred rows.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sklearn
from _quick_models import quick_recommended
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import (
    GroupKFold,
    PredefinedSplit,
    RepeatedStratifiedKFold,
    ShuffleSplit,
    StratifiedKFold,
)
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nescal_sklearn.calibration import CalibratedTemperature
from nescal_sklearn.ensemble import CrossFitClassifier
from nescal_sklearn.model_selection import out_of_fold_logits


def _data(n=200, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    score = X[:, 0] + 0.5 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


def _members():
    """Two quick members whose fits do not depend on the scale of the weights."""
    return [("nb", GaussianNB()), ("smooth", GaussianNB(var_smoothing=0.5))]


def _lr():
    return make_pipeline(StandardScaler(), LogisticRegression())


# -- cv that is not a partition (N84-N87, N107) ---------------------------------------------


def _partition_message(cv, n_parts: int, problems: str) -> str:
    return (
        f"cv={cv!r} does not split the rows into a partition: its {n_parts} test parts "
        f"{problems}. Cross-fitting needs every row in exactly one test part, which holds "
        "it out of one fold model and gives it one out-of-fold prediction: use KFold, "
        "StratifiedKFold, GroupKFold or StratifiedGroupKFold, or an int."
    )


NOT_PARTITIONS = [
    (
        ShuffleSplit(5, test_size=0.2, random_state=0),
        5,
        "leave 64 of the 200 rows in no test part and put 52 rows in two or more",
    ),
    (
        RepeatedStratifiedKFold(n_splits=2, n_repeats=2, random_state=0),
        4,
        "put 200 rows in two or more",
    ),
    (
        PredefinedSplit(np.r_[-np.ones(50, int), np.arange(150) % 3]),
        3,
        "leave 50 of the 200 rows in no test part",
    ),
]


@pytest.mark.parametrize(("cv", "n_parts", "problems"), NOT_PARTITIONS)
def test_a_cv_that_is_not_a_partition_is_refused_by_the_ensemble(cv, n_parts, problems):
    X, y = _data()
    message = _partition_message(cv, n_parts, problems)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CrossFitClassifier([("lr", LogisticRegression())], cv=cv).fit(X, y)


@pytest.mark.parametrize(("cv", "n_parts", "problems"), NOT_PARTITIONS)
def test_a_cv_that_is_not_a_partition_is_refused_by_the_calibrators(cv, n_parts, problems):
    X, y = _data()
    message = _partition_message(cv, n_parts, problems)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CalibratedTemperature(LogisticRegression(), cv=cv).fit(X, y)


def test_out_of_fold_logits_never_reads_rows_no_fold_held_out():
    X, y = _data()
    folds = list(ShuffleSplit(3, test_size=0.2, random_state=0).split(X))
    fitted = [[LogisticRegression().fit(X[train], y[train])] for train, _ in folds]
    message = _partition_message(
        None, 3, "leave 97 of the 200 rows in no test part and put 15 rows in two or more"
    )
    message = message.replace("cv=None", "cv")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        out_of_fold_logits(fitted, X, folds, np.array([0, 1]))


# -- labels and classes (N01, N12-N14) ------------------------------------------------------


def test_a_class_with_fewer_rows_than_the_folds_need_is_refused_before_any_fit():
    X, y = _data(150)
    y[0] = 2  # a class of one row

    class Unfittable(LogisticRegression):
        def fit(self, X, y, sample_weight=None):
            raise AssertionError("a member was fitted")

    message = (
        "Class 2 has 1 row in y, and cv=5 holds its only row out of the training part of "
        "fold 0, so that fold's models would never see class 2: every class needs rows in "
        "every fold's training part. Give each class at least 2 rows (cv=int stratifies "
        "the folds, so a class of 2 or more rows is in every training part), use a cv that "
        "keeps rows of every class in each training part, or drop the class."
    )
    with pytest.warns(UserWarning, match="The least populated class in y has only 1 members"):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            CrossFitClassifier([("lr", Unfittable())], random_state=0).fit(X, y)


@pytest.mark.parametrize(
    ("labels", "kinds"),
    [
        (np.array([0, "a"] * 75, dtype=object), "['number', 'str']"),
        (np.array([None] + ["a", "b"] * 74 + ["a"], dtype=object), "['NoneType', 'str']"),
    ],
    ids=["int-and-str", "None-among-str"],
)
def test_mixed_label_types_are_named(labels, kinds):
    X, _ = _data(150)
    message = (
        f"y must hold labels of one type (all numbers or all strings); got a mix of {kinds}. "
        "Convert the labels to one type, e.g. y.astype(str)."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CrossFitClassifier([("lr", LogisticRegression())]).fit(X, labels)


def test_integer_labels_stored_as_objects_fit_as_integers():
    X, y = _data(150)
    model = CrossFitClassifier([("lr", LogisticRegression())], random_state=0)
    reference = CrossFitClassifier([("lr", LogisticRegression())], random_state=0).fit(X, y)
    model.fit(X, y.astype(object))
    np.testing.assert_array_equal(model.classes_, [0, 1])
    np.testing.assert_array_equal(model.predict_proba(X), reference.predict_proba(X))


# -- sample weights: per fold and per member (N63-N65) --------------------------------------


def test_a_fold_without_positive_weight_names_sample_weight_and_the_fold():
    X, y = _data()
    seed = np.random.RandomState(0).randint(2**31 - 1)
    folds = list(StratifiedKFold(5, shuffle=True, random_state=seed).split(X, y))
    weights = np.ones(200)
    weights[folds[0][1]] = 0.0
    message = (
        "sample_weight is zero on every row of fold 0's test part (40 rows), and its models "
        "early-stop and are weighed and calibrated on it: every fold needs rows of positive "
        "weight on both sides. Give rows of positive weight to every fold, or use fewer folds."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CrossFitClassifier(_members(), random_state=0).fit(X, y, sample_weight=weights)


def test_a_pipeline_member_gets_the_weights_of_its_training_rows():
    X, y = _data()
    weights = np.where(y == 1, 20.0, 1.0)
    model = CrossFitClassifier([("lr", _lr())], cv=3, calibration="identity", random_state=0)
    model.fit(X, y, sample_weight=weights)
    relative = weights * (200 / weights.sum())  # members get them at mean 1
    for (fitted,), test in zip(model.estimators_, model.folds_, strict=True):
        train = np.setdiff1d(np.arange(200), test)
        by_hand = _lr().fit(X[train], y[train], logisticregression__sample_weight=relative[train])
        np.testing.assert_allclose(fitted[-1].coef_, by_hand[-1].coef_, rtol=1e-10)
        np.testing.assert_allclose(fitted[-1].intercept_, by_hand[-1].intercept_, rtol=1e-10)
    unweighted = CrossFitClassifier([("lr", _lr())], cv=3, calibration="identity", random_state=0)
    unweighted.fit(X, y)
    assert model.estimators_[0][0][-1].intercept_ > unweighted.estimators_[0][0][-1].intercept_ + 1


@pytest.mark.parametrize(
    "member", [KNeighborsClassifier(), make_pipeline(StandardScaler(), KNeighborsClassifier())]
)
def test_a_member_that_takes_no_weights_is_refused_as_voting_classifier_does(member):
    X, y = _data()
    name = type(member).__name__
    message = (
        f"Underlying estimator {name} does not support sample weights. estimators: 'knn' "
        "cannot be fitted on sample_weight, while the other members, the member weights and "
        "the map use them: remove the member, or fit without sample_weight."
    )
    model = CrossFitClassifier([("lr", LogisticRegression()), ("knn", member)])
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        model.fit(X, y, sample_weight=np.ones(200))
    model.fit(X, y)  # unweighted, it fits


def test_metadata_routing_sends_the_weights_a_member_requested():
    X, y = _data()
    weights = np.where(y == 1, 20.0, 1.0)
    with sklearn.config_context(enable_metadata_routing=True):
        wanted = LogisticRegression().set_fit_request(sample_weight=True)
        declined = LogisticRegression().set_fit_request(sample_weight=False)
        members = [("a", wanted), ("b", declined)]  # both fitted on every fold: no pruning
        model = CrossFitClassifier(members, cv=3, random_state=0, prune=False)
        model.fit(X, y, sample_weight=weights)
    (first, second), test = model.estimators_[0], model.folds_[0]
    train = np.setdiff1d(np.arange(200), test)
    relative = weights * (200 / weights.sum())  # members get them at mean 1
    weighted = LogisticRegression().fit(X[train], y[train], sample_weight=relative[train])
    np.testing.assert_allclose(first.coef_, weighted.coef_, rtol=1e-10)
    np.testing.assert_allclose(second.coef_, LogisticRegression().fit(X[train], y[train]).coef_)


# -- the scale of the weights (N54, N123) ----------------------------------------------------


@pytest.mark.parametrize("calibration", ["temperature", "sms", "auto"])
@pytest.mark.parametrize("scale", ["1/n", 1e-3, 7.0])
def test_all_equal_weights_give_the_unweighted_ensemble(calibration, scale):
    # N54, N123: weights 1/n counted as one calibration row (ts-mix at 0.5, another map).
    X, y = _data(300, n_classes=3)
    X_new, _ = _data(1000, n_classes=3, seed=1)
    weights = np.full(300, 1 / 300 if scale == "1/n" else scale)
    plain = CrossFitClassifier(_members(), calibration=calibration, random_state=0).fit(X, y)
    scaled = CrossFitClassifier(_members(), calibration=calibration, random_state=0)
    scaled.fit(X, y, sample_weight=weights)
    assert scaled.calibration_ == plain.calibration_
    assert np.max(np.abs(scaled.predict_proba(X_new) - plain.predict_proba(X_new))) <= 1e-3
    assert np.max(np.abs(scaled.oof_proba_ - plain.oof_proba_)) <= 1e-3


# -- groups and exact duplicate rows (N44, N124) ---------------------------------------------


def _test_part_of(model, n: int) -> np.ndarray:
    fold = np.empty(n, dtype=int)
    for f, test in enumerate(model.folds_):
        fold[test] = f
    return fold


def test_an_int_cv_with_groups_keeps_each_group_in_one_fold():
    X, y = _data()
    groups = np.arange(200) // 4
    model = CrossFitClassifier(_members(), random_state=0).fit(X, y, groups=groups)
    fold = _test_part_of(model, 200)
    assert all(np.unique(fold[groups == g]).size == 1 for g in np.unique(groups))
    assert len(model.folds_) == 5


def test_a_group_splitter_gets_the_groups_also_through_a_pipeline():
    # N124: "The 'groups' parameter should not be None", and no way to pass them.
    X, y = _data()
    groups = np.arange(200) % 37
    model = make_pipeline(
        StandardScaler(), CrossFitClassifier(_members(), cv=GroupKFold(4), random_state=0)
    )
    model.fit(X, y, crossfitclassifier__groups=groups)
    fold = _test_part_of(model[-1], 200)
    assert all(np.unique(fold[groups == g]).size == 1 for g in np.unique(groups))


def test_exact_duplicate_rows_stay_in_one_fold_by_default():
    X, y = _data(100)
    model = CrossFitClassifier(_members(), random_state=0)
    model.fit(np.vstack([X, X]), np.r_[y, y])
    fold = _test_part_of(model, 200)
    np.testing.assert_array_equal(fold[:100], fold[100:])


def test_without_duplicates_the_folds_are_the_stratified_folds_of_the_seed():
    X, y = _data()
    model = CrossFitClassifier(_members(), random_state=0).fit(X, y)
    seed = np.random.RandomState(0).randint(2**31 - 1)
    expected = StratifiedKFold(5, shuffle=True, random_state=seed).split(X, y)
    for test, (_, reference) in zip(model.folds_, expected, strict=True):
        np.testing.assert_array_equal(test, reference)


#: Rows of _data(100) whose copy StratifiedKFold(5, shuffle=True, random_state=0) puts in
#: another fold.
N_SPLIT = 81


def test_duplicates_that_a_given_splitter_puts_in_several_folds_are_counted_in_a_warning():
    X, y = _data(100)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    message = (
        f"{N_SPLIT} groups of exact duplicate rows ({2 * N_SPLIT} rows) have rows in two or "
        f"more test parts of cv={cv!r}, so their copies train the fold models that predict "
        "them out of fold: oof_proba_, the member weights, early stopping and the map's "
        "choice see in-sample predictions. Pass groups (one id per row; equal for rows that "
        "must stay together) with cv=int, GroupKFold or StratifiedGroupKFold."
    )
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}$"):
        CrossFitClassifier(_members(), cv=cv).fit(np.vstack([X, X]), np.r_[y, y])


def test_groups_that_a_splitter_ignores_are_counted_in_a_warning():
    X, y = _data()
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    groups = np.arange(200) // 2
    # the pairs whose two rows the splitter puts in different test parts, by scikit-learn
    part = np.empty(200, dtype=int)
    for i, (_, test) in enumerate(cv.split(X, y)):
        part[test] = i
    split = int(np.sum(part[0::2] != part[1::2]))
    assert split > 0
    with pytest.warns(
        UserWarning, match=rf"^{split} groups \({2 * split} rows\) have rows in two or more"
    ):
        CrossFitClassifier(_members(), cv=cv).fit(X, y, groups=groups)


def test_with_every_row_twice_the_out_of_fold_nll_stays_honest():
    # N44: with each copy in another fold, oof NLL 0.21 against 0.41 on fresh rows.
    X, y = _data(150, seed=20)
    X_new, y_new = _data(4000, seed=9)
    forest = RandomForestClassifier(50, min_samples_leaf=3, random_state=0)
    model = CrossFitClassifier([("forest", forest)], random_state=0)
    model.fit(np.vstack([X, X]), np.r_[y, y])
    oof = log_loss(np.r_[y, y], model.oof_proba_)
    fresh = log_loss(y_new, model.predict_proba(X_new))
    assert abs(oof - fresh) < 0.05


# -- the recommended model on NumPy input, with groups (N45, N46, N50, N124) -----------------


def test_the_recommended_model_fits_numpy_rows_with_groups():
    X, y = _data(150)
    groups = np.arange(150) // 3
    model = quick_recommended().fit(X, y, classifier__groups=groups)
    fold = _test_part_of(model[-1], 150)
    assert all(np.unique(fold[groups == g]).size == 1 for g in np.unique(groups))
    listed = quick_recommended().fit(X.tolist(), y.tolist(), classifier__groups=groups)
    np.testing.assert_array_equal(listed.predict_proba(X.tolist()), model.predict_proba(X))


def test_the_recommended_model_refuses_sparse_input_by_name():
    X, y = _data(150)
    message = (
        "make_tabular_preprocessor takes a pandas DataFrame or a dense array of rows; got a "
        "sparse csr_matrix of shape (150, 3). Its one-hot encoding and imputation work on "
        "dense columns: convert it with X.toarray() (numeric columns), or pass a DataFrame."
    )
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        quick_recommended().fit(sp.csr_matrix(X), y)


# -- a rare class without signal (N22) ------------------------------------------------------


def _columns(n, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x0": rng.normal(size=n),
            "x1": rng.normal(size=n),
            "x2": rng.normal(size=n),
            "c": rng.choice(list("pqr"), size=n),
        }
    )


def test_a_map_chosen_on_a_rare_class_without_signal_never_collapses_fresh_rows():
    # N22: 5 positives of 200, independent of X. Quadratic scaling was chosen on seeds 4
    # and 10 and gave fresh rows P(1) down to 1e-15: fresh NLL 0.270 and 0.165 against
    # 0.126 and 0.124 without a map. Guarded, the model of 2026-12-04 stays within 9 % of
    # no map on these 12 seeds; those of 2026-12-05 and of 2026-12-06 (the default tested
    # here) within 21 % (seed 2, where quadratic scaling is chosen: 1.205x). The bound, 25 %, leaves room
    # for another CPU's fits; unguarded, the map cost 33 % and 115 %.
    X_new = _columns(5000, 11)
    y_new = (np.random.default_rng(0).random(5000) < 0.025).astype(int)
    chosen = []
    for seed in range(12):
        y = np.zeros(200, int)
        y[:5] = 1
        model = quick_recommended().fit(_columns(200, seed), y)
        classifier = model[-1]
        unmapped = np.mean(classifier._fold_probas(model[0].transform(X_new)), axis=0)
        mapped = model.predict_proba(X_new)
        assert log_loss(y_new, mapped) <= 1.25 * log_loss(y_new, unmapped)
        if classifier.calibration_ == "quadratic":  # at least 1/(5 + 1) of the model's
            assert np.all(mapped[:, 1] >= unmapped[:, 1] / 6 * (1 - 1e-9))
        chosen.append(classifier.calibration_)
    assert chosen.count("quadratic") >= 2  # the case is still there: the guard bounds it


def test_copies_of_too_few_distinct_rows_fall_back_to_the_stratified_folds():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(200, 1)).astype(float)  # two distinct rows: the data
    y = (X[:, 0] + (rng.random(200) < 0.3) > 0.5).astype(int)
    message = "X has 2 distinct rows among its 200 (100.0 rows each on average; "  # the
    with pytest.warns(UserWarning, match=f"^{re.escape(message)}"):  # rule, its own test
        model = CrossFitClassifier(_members(), random_state=0).fit(X, y)
    reference = StratifiedKFold(
        5, shuffle=True, random_state=np.random.RandomState(0).randint(2**31 - 1)
    )
    for test, (_, expected) in zip(model.folds_, reference.split(X, y), strict=True):
        np.testing.assert_array_equal(test, expected)


@pytest.mark.parametrize("scale", ["1/n", 1e-3])
def test_members_get_the_weights_at_mean_one(scale):
    # N54: gradient boosting's min_hessian_to_split saw weights of 1e-3 (max |dP| 0.05).
    X, y = _data(300)
    X_new, _ = _data(1000, seed=1)
    weights = np.full(300, 1 / 300 if scale == "1/n" else scale)
    hgb = [("hgb", HistGradientBoostingClassifier(max_iter=30, early_stopping=True))]
    plain = CrossFitClassifier(hgb, random_state=0).fit(X, y)
    scaled = CrossFitClassifier(hgb, random_state=0).fit(X, y, sample_weight=weights)
    assert np.max(np.abs(scaled.predict_proba(X_new) - plain.predict_proba(X_new))) <= 1e-3
    message = "sample_weight is zero on every row; at least one row needs a positive weight."
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        CrossFitClassifier(hgb).fit(X, y, sample_weight=np.zeros(300))
