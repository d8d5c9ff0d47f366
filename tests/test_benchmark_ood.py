"""Out-of-distribution detection: the metrics against scikit-learn, the rows of another
dataset, the class held out of training, and a run that records them."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from _benchmark_helpers import squeeze
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from nescal_bench import (
    ConfigError,
    RecordStore,
    compare_markdown,
    load_config,
    plan_run,
    results_frame,
    run_benchmark,
    stratified_split,
    validate_config,
)
from nescal_bench._conditions import (
    ConditionContext,
    ConditionSkipped,
    ForeignRows,
    HeldOutClass,
)
from nescal_bench._data import preprocess_split
from nescal_bench._records import check_record
from nescal_bench._registry import OOD_METRICS, ood_metrics
from nescal_sklearn.metrics import (
    ood_aupr_in,
    ood_aupr_out,
    ood_auroc,
    ood_fpr_at_tpr,
    predictive_entropy,
)
from nescal_sklearn.metrics._ood import OOD_SCORES

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


# --------------------------------------------------------------------------- metrics
def _proba(rng: np.random.Generator, n: int, k: int, concentration: float) -> np.ndarray:
    return rng.dirichlet(np.full(k, concentration), size=n)


def _score(name: str, proba: np.ndarray) -> np.ndarray:
    """The OOD score, written out: entropy, or minus the largest probability."""
    if name == "entropy":
        return -np.sum(np.where(proba > 0, proba * np.log(np.where(proba > 0, proba, 1)), 0), 1)
    return -proba.max(axis=1)


def _fpr95_by_roc_curve(s_in: np.ndarray, s_out: np.ndarray) -> float:
    """In-distribution positive, confidence = -score: the FPR of the first ROC point whose
    TPR reaches 0.95 (every threshold kept)."""
    labels = np.r_[np.ones(len(s_in)), np.zeros(len(s_out))]
    fpr, tpr, _ = roc_curve(labels, -np.r_[s_in, s_out], drop_intermediate=False)
    return float(fpr[np.argmax(tpr >= 0.95 - 1e-12)])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_in=st.integers(1, 60),
    n_out=st.integers(1, 60),
    k=st.integers(2, 6),
    rounded=st.booleans(),
)
def test_ood_metrics_against_scikit_learn(seed, n_in, n_out, k, rounded):
    rng = np.random.default_rng(seed)
    p_in, p_out = _proba(rng, n_in, k, 0.3), _proba(rng, n_out, k, 1.0)
    if rounded:  # ties between and within the two sets
        p_in, p_out = (np.round(p, 1) + 1e-3 for p in (p_in, p_out))
        p_in, p_out = (p / p.sum(1, keepdims=True) for p in (p_in, p_out))
    labels = np.r_[np.zeros(n_in), np.ones(n_out)]
    for name in ("entropy", "max_proba"):
        # the library's scores equal the written-out ones; the rankings below use the
        # library's, since the last bits of a tie decide a rank
        s_in, s_out = OOD_SCORES[name](p_in), OOD_SCORES[name](p_out)
        np.testing.assert_allclose(s_in, _score(name, p_in), rtol=1e-12, atol=1e-12)
        scores = np.r_[s_in, s_out]
        assert ood_auroc(p_in, p_out, name) == pytest.approx(roc_auc_score(labels, scores))
        assert ood_aupr_out(p_in, p_out, name) == pytest.approx(
            average_precision_score(labels, scores)
        )
        assert ood_aupr_in(p_in, p_out, name) == pytest.approx(
            average_precision_score(1 - labels, -scores)
        )
        assert ood_fpr_at_tpr(p_in, p_out, name) == pytest.approx(_fpr95_by_roc_curve(s_in, s_out))
    got = ood_metrics(p_in, p_out)
    assert list(got) == list(OOD_METRICS)
    # exact: ood_metrics calls these same functions on the same arrays
    assert got["auroc"] == ood_auroc(p_in, p_out, "entropy")
    assert got["msp_fpr95"] == ood_fpr_at_tpr(p_in, p_out, "max_proba")
    assert got["max_proba"] == pytest.approx(p_out.max(axis=1).mean())


def test_fpr95_by_hand_with_ties():
    # 20 in-distribution rows: confidences 0.99 (x10), 0.9 (x9), 0.6 (x1); 95 % of them
    # (19) have confidence >= 0.9, so the threshold is 0.9; out-of-distribution rows at
    # 0.95, 0.9 (a tie: accepted), 0.8, 0.6, 0.5: 2 of 5 accepted -> FPR 0.4
    p_in = np.array([[0.99, 0.01]] * 10 + [[0.9, 0.1]] * 9 + [[0.6, 0.4]])
    p_out = np.array([[0.95, 0.05], [0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.5, 0.5]])
    assert ood_fpr_at_tpr(p_in, p_out, "max_proba") == pytest.approx(0.4)
    assert ood_fpr_at_tpr(p_in, p_out, "entropy") == pytest.approx(0.4)  # same order, K=2
    # at 100 % TPR every row down to the least confident in-distribution one is accepted
    assert ood_fpr_at_tpr(p_in, p_out, "max_proba", tpr=1.0) == pytest.approx(0.8)
    np.testing.assert_allclose(predictive_entropy(p_out), _score("entropy", p_out))


def test_ood_metric_directions_and_labels():
    higher = {name for name, metric in OOD_METRICS.items() if metric.greater_is_better}
    assert higher == {"auroc", "aupr_in", "aupr_out", "msp_auroc", "msp_aupr_in", "msp_aupr_out"}
    assert OOD_METRICS["fpr95"].label == "FPR@95%TPR" and OOD_METRICS["auroc"].label == "AUROC"


# --------------------------------------------------------------------------- held-out class
def _split(y, n_features: int = 3, seed: int = 0):
    X = np.random.default_rng(seed).normal(size=(len(y), n_features))
    return stratified_split(X, np.asarray(y), seed=seed)


def test_the_held_out_class_is_the_most_frequent_and_leaves_the_others():
    split = _split(np.repeat(["a", "b", "c"], [30, 60, 40]))
    condition = HeldOutClass("held_out")
    assert condition.held_out(split) == "b"
    reduced = condition.refit_split(split)
    assert reduced.classes.tolist() == ["a", "c"]
    for part in ("train", "val", "test"):
        y = getattr(reduced, f"y_{part}")
        kept = getattr(split, f"y_{part}") != "b"
        assert "b" not in y and len(y) == kept.sum()
        np.testing.assert_array_equal(
            getattr(reduced, f"X_{part}"), getattr(split, f"X_{part}")[kept]
        )
    rows = condition.apply(ConditionContext(split), np.random.default_rng(0))
    np.testing.assert_array_equal(rows, split.X_test[split.y_test == "b"])
    # ties go to the smallest label
    assert HeldOutClass("h").held_out(_split(np.repeat([2, 0, 1], 30))) == 0


def test_a_binary_dataset_has_no_class_to_hold_out():
    with pytest.raises(
        ConditionSkipped, match="^2 classes: holding one out would leave fewer than 2$"
    ):
        HeldOutClass("h").refit_split(_split(np.repeat([0, 1], 30)))


# --------------------------------------------------------------------------- foreign rows
def write_local_dataset(data_dir, name: str, frame: pd.DataFrame, y) -> None:
    """Add a parquet file and its manifest entry to a local data folder."""
    frame.assign(target=np.asarray(y)).to_parquet(data_dir / f"{name}.parquet")
    manifest = data_dir / "manifest.json"
    entries = json.loads(manifest.read_text()) if manifest.is_file() else []
    entries.append(
        {
            "name": name,
            "file": f"{name}.parquet",
            "n_rows": len(frame),
            "n_features": frame.shape[1],
            "n_classes": len(np.unique(y)),
        }
    )
    manifest.write_text(json.dumps(entries))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    narrow = pd.DataFrame(rng.normal(size=(50, 3)), columns=list("xyz"))
    wide = pd.DataFrame(
        rng.exponential(size=(80, 40)) * np.arange(1, 41), columns=[f"w{i}" for i in range(40)]
    )
    wide.iloc[::7, 2] = np.nan
    wide.insert(5, "label_text", pd.Categorical(rng.choice(["u", "v"], size=80)))
    write_local_dataset(folder, "narrow", narrow, np.arange(50) % 2)
    write_local_dataset(folder, "wide", wide, np.arange(80) % 2)
    return folder


def test_foreign_rows_map_evenly_spaced_numeric_columns(data_dir):
    X = pd.DataFrame(np.random.default_rng(1).normal(size=(200, 5)), columns=list("abcde"))
    X["colour"] = np.random.default_rng(2).choice(["r", "g", "b"], size=200).astype(object)
    y = np.arange(200) % 2
    split = stratified_split(X, y, seed=0)
    context = ConditionContext(split, "mine", str(data_dir))
    condition = ForeignRows("ood", datasets=("narrow", "wide"))
    assert condition.source(context) == "wide"  # narrow has 3 numeric columns, fewer than 5
    out = condition.apply(context, np.random.default_rng(7))
    # by hand: the same draws, the numeric columns 0, 9, 19, 29, 39 of the 40
    rng = np.random.default_rng(7)
    rows = rng.choice(80, size=40, replace=False)
    order = rng.permutation(40)
    wide = pd.read_parquet(data_dir / "wide.parquet").drop(columns=["target", "label_text"])
    values = wide.iloc[rows, [0, 9, 19, 29, 39]].to_numpy(dtype=float)
    expected = (values - values.mean(0)) / values.std(0)
    numeric = context.numeric
    np.testing.assert_allclose(out[:, numeric], expected, rtol=1e-5, atol=1e-6)
    one_hot = context.groups[0]
    np.testing.assert_array_equal(out[:, one_hot], split.X_test[order][:, one_hot])


def test_foreign_rows_skip_themselves_and_datasets_without_numeric_columns(data_dir):
    split = _split(np.arange(100) % 2, n_features=5)
    context = ConditionContext(split, "wide", str(data_dir))
    message = "no dataset of ['narrow', 'wide'] other than 'wide' has 5 numeric columns or more"
    with pytest.raises(ConditionSkipped, match=f"^{re.escape(message)}$"):
        ForeignRows("ood", ("narrow", "wide")).apply(context, np.random.default_rng(0))
    frame = pd.DataFrame({"c": np.random.default_rng(0).choice(["p", "q"], size=60).astype(object)})
    y = np.arange(60) % 2
    rows = np.arange(60)
    categorical = ConditionContext(preprocess_split(frame, y, rows[:36], rows[36:48], rows[48:]))
    with pytest.raises(ConditionSkipped, match="^the dataset has no numeric features$"):
        ForeignRows("ood").apply(categorical, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"kind": "foreign_rows", "datasets": []},
            "conditions[0].datasets: tuple should have at least 1 item after validation, not 0, got []",
        ),
        (
            {"kind": "foreign_rows", "datasets": "letter"},
            'conditions[0].datasets: input should be a valid tuple, got "letter"',
        ),
        (
            {"kind": "held_out_class", "class": 1},
            "conditions[0].class: unknown key",
        ),
    ],
)
def test_config_errors_name_the_value(entry, message):
    data = {
        "datasets": [{"sklearn": "iris"}],
        "methods": [{"estimator": "sklearn.linear_model.LogisticRegression"}],
        "confirm_seeds": [0],
        "conditions": [entry],
    }
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        validate_config(data, check_files=False, check_params=False)


# --------------------------------------------------------------------------- a run
OOD_SETS = [
    {"name": "ood_shuffled", "kind": "shuffled_columns"},
    {"name": "ood_far", "kind": "scaled_rows", "factor": 4.0},
    {"name": "ood_foreign", "kind": "foreign_rows", "datasets": ["narrow", "wide"]},
    {"name": "ood_held_out", "kind": "held_out_class"},
]


@pytest.fixture(scope="module")
def ood_run(tmp_path_factory, data_dir):
    tmp_path = tmp_path_factory.mktemp("ood")
    data = {
        "name": "ood",
        "output": str(tmp_path / "results"),
        "data_dir": str(data_dir),
        "datasets": [{"sklearn": "iris"}, {"sklearn": "breast_cancer"}],
        "recipe": "2026-12-04",
        "methods": [
            {"name": "ce", "loss": "ce"},
            {"name": "logreg", "estimator": "sklearn.linear_model.LogisticRegression"},
        ],
        "calibrators": ["temperature"],
        "conditions": OOD_SETS,
        "confirm_seeds": [3],
        "budget": {"max_epochs": 2, "hidden_sizes": [8]},
    }
    (tmp_path / "ood.json").write_text(json.dumps(data))
    config = load_config(tmp_path / "ood.json")
    run_benchmark(config, progress=False, report=False)
    return config


def test_a_run_records_every_ood_set_or_why_it_was_skipped(ood_run):
    records = list(RecordStore(ood_run.output).load(move=False).values())
    assert len(records) == 4
    for record in records:
        check_record(record, record["key"], stages=ood_run.stages)
        iris = record["dataset"] == "sklearn-iris"
        expected = ["ood_shuffled", "ood_far", "ood_foreign", *(["ood_held_out"] if iris else [])]
        assert set(record["conditions"]) == set(expected)
        for by_stage in record["conditions"].values():
            assert set(by_stage) == {"raw", "temperature"}
            for metrics in by_stage.values():
                assert set(metrics) == set(OOD_METRICS)
                assert all(0 <= v <= 1 for v in metrics.values())
        if iris:  # 4 numeric columns: rows of "wide" (narrow has 3)
            assert record["skipped_conditions"] == {}
            refit = record["fit"]["refits"]["ood_held_out"]
            assert refit["held_out"] == 0 and refit["n_train"] == 60  # 30 of each class kept
            assert record["run"]["refit_seconds"] > 0
        else:  # 30 numeric columns: "wide" has 40
            assert record["skipped_conditions"] == {
                "ood_held_out": "2 classes: holding one out would leave fewer than 2"
            }
            assert "refits" not in record["fit"]


def _float64(model, X):
    proba = model.predict_proba(X).astype(np.float64)
    return proba / proba.sum(axis=1, keepdims=True)


@pytest.mark.determinism
def test_held_out_metrics_are_those_of_a_model_fitted_without_the_class(ood_run):
    from sklearn.base import clone
    from sklearn.datasets import load_iris

    task = next(
        t
        for t in plan_run(ood_run).confirm_fixed
        if t.method.name == "logreg" and t.dataset.name == "sklearn-iris"
    )
    record = RecordStore(ood_run.output).read(task.key)
    X, y = load_iris(return_X_y=True)
    split = stratified_split(X, y, seed=3)
    kept = {part: getattr(split, f"y_{part}") != 0 for part in ("train", "test")}
    model = clone(task.estimator).fit(split.X_train[kept["train"]], split.y_train[kept["train"]])
    expected = ood_metrics(
        _float64(model, split.X_test[kept["test"]]), _float64(model, split.X_test[~kept["test"]])
    )
    # The runner fitted this logistic regression at one BLAS thread in a worker, this test
    # at the process's thread count: the sums round differently (~1e-15), and L-BFGS
    # (tol=1e-4) stops at a slightly different point of the same optimum, where the NLL
    # is flat to second order; measured 1e-8 relative over five OpenBLAS kernels.
    assert record["conditions"]["ood_held_out"]["raw"] == pytest.approx(
        expected, rel=1e-6, abs=1e-9
    )


def test_compare_under_an_ood_set_with_any_ood_metric(ood_run, capsys):
    from nescal_bench.cli import main

    args = ["compare", ood_run.output, "--references", "ce", "--condition", "ood_held_out"]
    assert main([*args, "--metric", "msp_fpr95"]) == 0
    out = squeeze(capsys.readouterr().out)
    assert out.startswith(
        "# Paired comparisons under `ood_held_out`, confirm seeds [3], 2 datasets"
    )
    assert re.search(r"\| logreg \| ts \| \d/1 \| ", out)  # only iris has the held-out class
    assert "| method | stage | lower MSP FPR@95%TPR strictly on |" in out
    assert "| sklearn-breast_cancer | – | – |" in out
    pooled = results_frame([ood_run.output])
    text = squeeze(
        compare_markdown(pooled, references=["ce"], condition=["ood_far", "ood_shuffled"])
    )
    assert re.search(r"\| logreg \| raw \| \d/4 \|", text)  # 2 datasets x 2 OOD sets
    assert "## Average ranks over (dataset, condition) pairs (1 = best AUROC)" in text
