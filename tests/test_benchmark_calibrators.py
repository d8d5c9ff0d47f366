"""Benchmark calibrators: labelled entries, the external calibrators, the RealMLP anchor."""

from __future__ import annotations

import functools
import json
import re
import sys

import numpy as np
import pytest
from _benchmark_helpers import table_rows
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler

from nescal_bench import (
    ConfigError,
    ProbmetricsCalibrator,
    plan_run,
    results_frame,
    validate_config,
)
from nescal_bench._fit import _fit, execute_fit
from nescal_bench._records import record_key
from nescal_bench._sources import load_benchmark_data

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

LR = {"name": "lr", "estimator": "sklearn.linear_model.LogisticRegression"}


def config_with(tmp_path, calibrators, **changes):
    data = {
        "output": str(tmp_path / "results"),
        "datasets": [{"sklearn": "breast_cancer"}],
        "methods": [LR],
        "calibrators": calibrators,
        "confirm_seeds": [0],
        **changes,
    }
    return validate_config(data, check_files=False)


def check_error(tmp_path, calibrators, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        config_with(tmp_path, calibrators)


def only_task(config):
    (task,) = plan_run(config).confirm_fixed
    return task


def task_split(task):
    data = load_benchmark_data(task.dataset, task.data)
    split, _ = task.dataset.split(data, task.seed, task.splits, task.budget.max_rows)
    return split


NAME = (
    "expected a name of letters, digits and '_', '.', '@', '+', '-' that does not start with "
    "'.', '@', '+' or '-', "
)


# --------------------------------------------------------------------------- labels
def test_label_names_the_stage_and_unlabelled_entries_keep_their_keys(tmp_path):
    config = config_with(
        tmp_path,
        ["temperature", {"name": "temperature", "label": "ts_again"}, "vector"],
        selection="ts_again",
    )
    assert config.stages == ["raw", "temperature", "ts_again", "vector"]
    assert [c.to_json() for c in config.calibrators] == [
        {"name": "temperature", "params": {}},
        {"name": "temperature", "params": {}, "label": "ts_again"},
        {"name": "vector", "params": {}},
    ]
    # a saved run's config (read without the library's checks) keeps the labels
    saved = validate_config(config.to_json(), check_files=False, check_params=False)
    assert saved.calibrators == config.calibrators and saved.stages == config.stages

    # without labels, the identity and key are those of the format before labels existed
    plain = only_task(config_with(tmp_path, ["temperature", {"name": "vector", "params": {}}]))
    before = [{"name": "temperature", "params": {}}, {"name": "vector", "params": {}}]
    assert plain.identity["calibrators"] == before
    assert record_key({**plain.identity, "calibrators": before}) == plain.key
    # a label is part of the key: the same calibrator under another stage name
    labelled = only_task(config_with(tmp_path, ["temperature", {"name": "vector", "label": "vs"}]))
    assert labelled.key != plain.key


@pytest.mark.parametrize(
    ("calibrators", "message"),
    [
        (
            [{"name": "temperature", "label": "ts"}, {"name": "vector", "label": "ts"}],
            "calibrators[1].label: duplicate calibrator 'ts' (also calibrators[0])",
        ),
        (
            ["temperature", {"name": "vector", "label": "temperature"}],
            "calibrators[1].label: duplicate calibrator 'temperature' (also calibrators[0])",
        ),
        (
            [{"name": "temperature", "label": "ts"}, "temperature", "temperature"],
            "calibrators[2]: duplicate calibrator 'temperature' (also calibrators[1]); give "
            "each a 'label'",
        ),
        (
            [{"name": "temperature", "label": "raw"}],
            "calibrators[0].label: 'raw' names the uncalibrated model; pick another label",
        ),
        (
            [{"name": "temperature", "label": "ts plain"}],
            "calibrators[0].label: " + NAME + 'got "ts plain"',
        ),
        (
            [{"name": "temperature", "label": ""}],
            "calibrators[0].label: " + NAME + 'got ""',
        ),
        (
            [{"name": "temperature", "label": 3}],
            "calibrators[0].label: " + NAME + "got 3",
        ),
        (
            [{"name": "temperature", "lable": "ts"}],
            "calibrators[0].lable: unknown key",
        ),
        (
            [{"name": "platt", "label": "ts"}],
            "calibrators[0].name: input should be 'temperature', 'vector', 'matrix', 'structured_matrix', "
            "'isotonic', 'histogram', 'ensemble_temperature', 'probmetrics' or 'sklearn', got \"platt\"",
        ),
    ],
)
def test_bad_labels_name_the_entry(tmp_path, calibrators, message):
    from nescal_bench._registry import CALIBRATORS

    check_error(tmp_path, calibrators, message.replace("{CALIBRATORS}", str(list(CALIBRATORS))))


def test_two_entries_of_one_class_are_two_stages(tmp_path):
    second, first = {"guard": None}, {"guard": "mixture"}
    config = config_with(
        tmp_path,
        [
            {"name": "temperature", "params": first},
            {"name": "temperature", "label": "temperature_same", "params": first},
            {"name": "temperature", "label": "temperature_plain", "params": second},
        ],
        datasets=[{"sklearn": "iris"}],
    )
    record = execute_fit(only_task(config))
    for section in ("validation", "test", "reliability"):
        assert set(record[section]) == {
            "raw",
            "temperature",
            "temperature_same",
            "temperature_plain",
        }
    # exact: the same calibrator and settings under two stage names, one path twice
    assert record["test"]["temperature_same"] == record["test"]["temperature"]
    assert set(record["calibrators"]) == {"temperature", "temperature_same", "temperature_plain"}
    # the same temperature, with and without the uniform mixture: different probabilities
    # exact: the guard mixes in the uniform after the same temperature solve
    assert record["calibrators"]["temperature_plain"] == record["calibrators"]["temperature"]
    assert record["test"]["temperature_plain"]["nll"] != record["test"]["temperature"]["nll"]
    # the plain fit minimises the validation NLL; the guard pays a little for safety
    validation = record["validation"]
    assert validation["temperature_plain"]["nll"] < validation["temperature"]["nll"]


# --------------------------------------------------------------------------- probmetrics
def _problem(load, names=None):
    """A logistic regression fitted on a third of ``load``'s rows (labels ``names[y]``),
    and the calibration and test thirds."""
    X, y = load(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], (y if names is None else np.asarray(names)[y])[order]
    third = len(y) // 3
    model = LogisticRegression(C=100.0, max_iter=2000).fit(X[:third], y[:third])
    return model, (X[third : 2 * third], y[third : 2 * third]), (X[2 * third :], y[2 * third :])


def _independent_temperature(log_proba, y):
    """Temperature minimising the NLL of ``softmax(log_proba / T)`` (scipy, on log T)."""

    def nll(log_t):
        return -np.mean(log_softmax(log_proba / np.exp(log_t), axis=1)[np.arange(len(y)), y])

    return float(np.exp(minimize_scalar(nll, bounds=(-5, 5), method="bounded").x))


@pytest.mark.parametrize("load", [load_breast_cancer, load_wine], ids=["binary", "multiclass"])
def test_probmetrics_temperature_scaling_matches_an_independent_fit(load):
    pytest.importorskip("probmetrics")
    model, (X_cal, y_cal), (X_test, y_test) = _problem(load)
    log_cal = np.log(np.clip(model.predict_proba(X_cal), 1e-300, None))
    temperature = _independent_temperature(log_cal, y_cal)
    assert 1.0 < temperature < 10.0  # an overconfident model, not a degenerate fit
    log_test = np.log(np.clip(model.predict_proba(X_test), 1e-300, None))
    expected = softmax(log_test / temperature, axis=1)

    plain = ProbmetricsCalibrator(FrozenEstimator(model), method="temp-scaling")
    proba = plain.fit(X_cal, y_cal).predict_proba(X_test)
    assert proba.shape == (len(y_test), len(model.classes_))  # (n, 2) when binary
    assert plain.temperature_ == pytest.approx(temperature, rel=1e-2)
    assert abs(log_loss(y_test, proba) - log_loss(y_test, expected)) < 1e-3

    # "ts-mix": the same temperature, then a mixture with the uniform of weight 1/(n+1)
    weight = 1.0 / (len(y_cal) + 1)
    mixed = ProbmetricsCalibrator(FrozenEstimator(model)).fit(X_cal, y_cal)
    assert mixed.method == "ts-mix"
    expected_mix = (1 - weight) * expected + weight / len(model.classes_)
    assert abs(log_loss(y_test, mixed.predict_proba(X_test)) - log_loss(y_test, expected_mix)) < (
        1e-3
    )


def test_probmetrics_adapter_is_a_cloneable_meta_estimator():
    pytest.importorskip("probmetrics")
    names = ["barbera", "barolo", "grignolino"]
    model, (X_cal, y_cal), (X_test, _) = _problem(load_wine, names)
    calibrator = ProbmetricsCalibrator(FrozenEstimator(model), method="sms")
    copy = clone(calibrator)
    assert copy.get_params(deep=False) == {"estimator": copy.estimator, "method": "sms"}
    copy.fit(X_cal, y_cal)
    assert list(copy.classes_) == names  # the estimator's, string labels
    proba = copy.predict_proba(X_test)
    assert proba.shape == (len(X_test), 3) and proba.dtype == np.float64
    assert np.allclose(proba.sum(axis=1), 1.0)
    assert set(copy.predict(X_test)) <= set(names)
    with pytest.raises(ValueError, match=r"y has labels \['merlot'\] that the estimator"):
        clone(calibrator).fit(X_cal[:3], np.array(["barolo", "merlot", "barbera"]))


def test_probmetrics_method_is_checked_by_the_config(tmp_path):
    pytest.importorskip("probmetrics")
    with pytest.raises(ConfigError) as info:
        config_with(tmp_path, [{"name": "probmetrics", "params": {"method": "ts"}}])
    assert str(info.value) == (  # probmetrics' own check of the name (no AST scan of its source)
        "calibrators[0].params.method: The 'method' parameter of ProbmetricsCalibrator must be "
        "a calibration method of probmetrics' get_calibrator. Got 'ts' instead (Unknown "
        'calibration method "ts").'
    )
    check_error(
        tmp_path,
        [{"name": "probmetrics", "params": {"method": ""}}],
        "calibrators[0].params.method: The 'method' parameter of ProbmetricsCalibrator must be "
        "a non-empty string naming a probmetrics calibration method. Got '' instead.",
    )
    check_error(
        tmp_path,
        [{"name": "probmetrics", "params": {"method": 3}}],
        "calibrators[0].params.method: The 'method' parameter of ProbmetricsCalibrator must be "
        "an instance of 'str'. Got 3 instead.",
    )


def test_missing_probmetrics_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "probmetrics", None)  # `import probmetrics` fails
    monkeypatch.setitem(sys.modules, "probmetrics.calibrators", None)
    with pytest.raises(ConfigError) as info:
        config_with(tmp_path, [{"name": "probmetrics", "label": "pm"}])
    message = str(info.value)
    assert message.startswith("calibrators[0]: the 'probmetrics' calibrator needs the probmetrics")
    assert message.endswith(
        '`pip install probmetrics` or with the benchmark extras, `pip install -e ".[bench]"`'
    )


def test_probmetrics_stage_in_a_fit_record(tmp_path):
    pytest.importorskip("probmetrics")
    config = config_with(
        tmp_path,
        [
            {"name": "temperature", "params": {"guard": None}},
            {"name": "probmetrics", "label": "pm_ts", "params": {"method": "temp-scaling"}},
        ],
    )  # breast_cancer: its validation rows are not separated (no degenerate temperature)
    record = execute_fit(only_task(config))
    assert np.isfinite(record["test"]["pm_ts"]["nll"])
    # the package's temperature and probmetrics' agree
    ours, theirs = record["calibrators"]["temperature"], record["calibrators"]["pm_ts"]
    assert theirs["temperature"] == pytest.approx(ours["temperature"], rel=1e-2)


# --------------------------------------------------------------------------- sklearn
def test_sklearn_calibrator_equals_calibrated_classifier_cv_fitted_directly(tmp_path):
    entry = {"name": "sklearn", "label": "sklearn_temperature", "params": {"method": "temperature"}}
    config = config_with(tmp_path, [entry], datasets=[{"sklearn": "wine"}])
    task = only_task(config)
    record = execute_fit(task)

    split = task_split(task)
    model = _fit(clone(task.estimator), split)
    direct = CalibratedClassifierCV(FrozenEstimator(model), method="temperature")
    direct.fit(split.X_val, split.y_val)
    expected = log_loss(split.y_test, direct.predict_proba(split.X_test), labels=split.classes)
    assert record["test"]["sklearn_temperature"]["nll"] == pytest.approx(expected, abs=1e-12)
    (pair,) = direct.calibrated_classifiers_  # FrozenEstimator: one calibrator, all rows
    temperature = 1.0 / pair.calibrators[0].beta_
    assert record["calibrators"]["sklearn_temperature"]["temperature"] == pytest.approx(temperature)
    sklearn_message = "The 'method' parameter of CalibratedClassifierCV must be a str among"
    with pytest.raises(
        ConfigError, match=re.escape(f"calibrators[0].params.method: {sklearn_message}")
    ):
        config_with(tmp_path, [{"name": "sklearn", "params": {"method": "platt"}}])


def test_labelled_stages_reach_compare(tmp_path):
    from nescal_bench import compare_markdown, run_benchmark

    config = config_with(
        tmp_path,
        ["temperature", {"name": "sklearn", "label": "sk_ts", "params": {"method": "temperature"}}],
        datasets=[{"sklearn": "iris"}, {"sklearn": "wine"}],
        methods=[LR, {**LR, "name": "lr_weak", "params": {"C": 0.01}}],
    )
    run_benchmark(config, progress=False, report=False)
    pooled = results_frame([config.output])
    assert pooled.attrs["stages"] == ["raw", "temperature", "sk_ts"]
    markdown = compare_markdown(pooled, references=["lr"], best_of=[])
    assert ["lr_weak", "sk_ts"] in [row[:2] for row in table_rows(markdown, "## Against `lr`")]


# --------------------------------------------------------------------------- RealMLP
REALMLP = {
    "name": "realmlp",
    "estimator": "pytabkit.RealMLP_TD_Classifier",
    "params": {
        "val_metric_name": "ref-ll-ts",
        "calibration_method": "ts-mix",
        "use_ls": False,
        "device": "cpu",
        "n_epochs": 4,
    },
}


def test_realmlp_anchor_runs_through_execute_fit(tmp_path, monkeypatch):
    pytabkit = pytest.importorskip("pytabkit")
    import torch

    seen = {}
    original = pytabkit.RealMLP_TD_Classifier.fit

    @functools.wraps(original)
    def spy(self, X, y, X_val=None, y_val=None, **kwargs):
        seen.update(
            n_train=len(y),
            n_val=None if y_val is None else len(y_val),
            n_threads=self.n_threads,
            random_state=self.random_state,
            torch_threads=torch.get_num_threads(),
        )
        return original(self, X, y, X_val=X_val, y_val=y_val, **kwargs)

    monkeypatch.setattr(pytabkit.RealMLP_TD_Classifier, "fit", spy)
    config = config_with(
        tmp_path,
        ["temperature"],
        datasets=[{"sklearn": "iris"}],
        methods=[REALMLP],
        confirm_seeds=[3],
    )
    task = only_task(config)
    assert task.identity["seed"] == 3 and task.estimator.random_state == 3  # the seed
    before = torch.get_num_threads()
    record = execute_fit(task)
    assert torch.get_num_threads() == before
    assert seen == {
        "n_train": record["data"]["n_train"],
        "n_val": record["data"]["n_validation"],  # the runner's validation rows
        "n_threads": 1,  # None would mean every physical core; the budget has 1 thread
        "random_state": 3,
        "torch_threads": 1,
    }
    for stage in ("raw", "temperature"):
        assert np.isfinite(record["test"][stage]["nll"])
        assert np.isfinite(record["validation"][stage]["nll"])
    assert record["test"]["raw"]["accuracy"] > 0.5


def test_a_failing_calibrator_fails_its_stage_only(tmp_path):
    from nescal_bench import load_config, run_benchmark
    from nescal_bench._records import check_record

    config = config_with(
        tmp_path,
        ["temperature", {"name": "temperature", "label": "broken", "params": {"cv": 3}}],
    )
    # cv with a frozen estimator is refused by the calibrator at fit time (a ValueError).
    record = execute_fit(only_task(config))
    assert set(record["test"]) == {"raw", "temperature"}
    assert record["calibrators"]["broken"]["error"].startswith("ValueError: ")
    check_record(record, record["key"], stages=config.stages)  # a valid record
    # The run keeps the record (no failure), and its report and comparisons are written.
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config.to_json(), "output": str(tmp_path / "run")}))
    summary = run_benchmark(load_config(path), progress=False)
    assert not summary.failures
    (stored,) = [json.loads(f.read_text()) for f in (tmp_path / "run" / "records").glob("*.json")]
    assert "error" in stored["calibrators"]["broken"]


def test_stages_are_measured_in_float64_whatever_the_model_returns():
    from nescal_bench._evaluate import aligned_proba

    class Float32Model(LogisticRegression):
        def predict_proba(self, X):
            return super().predict_proba(X).astype(np.float32)

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model = Float32Model(C=1e4, max_iter=5000).fit(X, y)
    proba = aligned_proba(model, X, model.classes_)
    assert proba.dtype == np.float64
    # float32 probabilities would be clipped at 1.2e-7 by log_loss: 15.9 nats at most.
    hard = np.zeros_like(proba)
    hard[np.arange(len(y)), (y + 1) % 3] = 1.0  # every row wrong with certainty
    assert log_loss(y, hard.astype(np.float32)) < 16.0 < log_loss(y, hard)
