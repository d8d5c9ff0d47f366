"""AutoGluon as an anchor method of the lab, and parameters that follow another method's
records (``{"from_method": NAME}``: its fit seconds on the same dataset and seed).

The runner's resolution is tested with scikit-learn estimators (a float parameter that
takes another method's fit seconds); the AutoGluon smoke fit runs where the ``autogluon``
extra is installed (.ci/run installs it in a venv of its own)."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import re

import numpy as np
import pytest
from sklearn.datasets import load_wine

from nescal_bench import (
    AutoGluonClassifier,
    ConfigError,
    RecordStore,
    run_benchmark,
    validate_config,
)

HAS_AUTOGLUON = importlib.util.find_spec("autogluon") is not None
#: The model families of AutoGluon 1.6's medium_quality preset, by leaderboard name.
FAMILIES = {
    "NeuralNetFastAI",
    "NeuralNetTorch",
    "LightGBM",
    "CatBoost",
    "XGBoost",
    "RandomForest",
    "ExtraTrees",
}

FOLLOWS = {
    "name": "follows",
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
    "methods": [
        {
            "name": "hgb",
            "estimator": "sklearn.ensemble.HistGradientBoostingClassifier",
            "params": {"max_iter": 5},
        },
        {
            # a float parameter > 0 that takes hgb's fit seconds on the same dataset and seed
            "name": "lr",
            "estimator": "sklearn.linear_model.LogisticRegression",
            "params": {"tol": {"from_method": "hgb"}, "max_iter": 50},
        },
    ],
    "confirm_seeds": [0, 1],
}


def run(tmp_path, data: dict) -> dict[str, dict]:
    config = validate_config({**data, "output": str(tmp_path / "results")})
    run_benchmark(config, progress=False, report=False)
    return RecordStore(tmp_path / "results").load(move=False)


def by_fit(records: dict[str, dict]) -> dict[tuple, dict]:
    return {(r["dataset"], r["method"], r["seed"]): r for r in records.values()}


def test_a_parameter_takes_the_fit_seconds_of_the_same_dataset_and_seed(tmp_path):
    records = by_fit(run(tmp_path, FOLLOWS))
    assert len(records) == 8
    seconds = set()
    for dataset in ("sklearn-iris", "sklearn-wine"):
        for seed in (0, 1):
            source = records[(dataset, "hgb", seed)]["run"]["fit_seconds"]
            assert records[(dataset, "lr", seed)]["params"]["tol"] == source
            seconds.add(source)
    assert len(seconds) == 4  # four fits, four times: each split its own
    # the record key holds what the config states, not the seconds of one run
    lr = records[("sklearn-iris", "lr", 0)]
    assert lr["identity"]["params"]["tol"] == {"from_method": "hgb"}


def test_a_missing_record_fails_the_fit_that_follows_it_with_a_clear_error(tmp_path):
    failing = {  # DummyClassifier(strategy="constant") without a constant: fails in fit
        "name": "source",
        "estimator": "sklearn.dummy.DummyClassifier",
        "params": {"strategy": "constant"},
    }
    lr = {**FOLLOWS["methods"][1], "params": {"tol": {"from_method": "source"}}}
    data = {**FOLLOWS, "datasets": [{"sklearn": "iris"}], "confirm_seeds": [0]}
    config = validate_config(
        {**data, "methods": [failing, lr], "output": str(tmp_path / "results")}
    )
    summary = run_benchmark(config, progress=False, report=False)
    assert summary.n_finished == 0
    errors = {f["method"]: f["error"] for f in summary.failures}
    assert errors["lr"] == (
        "RunError: tol={'from_method': 'source'} takes the fit seconds of method 'source' on "
        "dataset 'sklearn-iris', seed 0, and this run has no record of that fit (not run, or "
        "failed): run 'source' there first"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"tol": {"from_method": "lr"}},
            "methods[1].params.tol: expected the name of another method, one of ['hgb'], got \"lr\"",
        ),
        (
            {"tol": {"from_method": "rf"}},
            "methods[1].params.tol: expected the name of another method, one of ['hgb'], got \"rf\"",
        ),
    ],
)
def test_the_config_names_another_method(change, message):
    methods = [FOLLOWS["methods"][0], {**FOLLOWS["methods"][1], "params": change}]
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        validate_config({**FOLLOWS, "methods": methods})


def test_no_chains_and_no_grids():
    hgb, lr = FOLLOWS["methods"]
    third = {**lr, "name": "lr2", "params": {"tol": {"from_method": "lr"}}}
    with pytest.raises(ConfigError, match=r"^methods\[2\]\.params\.tol: method 'lr' follows"):
        validate_config({**FOLLOWS, "methods": [hgb, lr, third]})
    gridded = {**lr, "grid": {"C": [0.5, 1.0]}}
    with pytest.raises(ConfigError, match="a method with a grid cannot take from_method"):
        validate_config({**FOLLOWS, "methods": [hgb, gridded], "search_seeds": [5]})
    in_grid = {**lr, "params": {}, "grid": {"tol": [{"from_method": "hgb"}, 0.1]}}
    with pytest.raises(ConfigError, match=r"^methods\[1\]\.grid\.tol: from_method is not a"):
        validate_config({**FOLLOWS, "methods": [hgb, in_grid], "search_seeds": [5]})


def test_outside_the_runner_the_estimator_refuses_a_time_limit_to_resolve():
    model = AutoGluonClassifier(time_limit={"from_method": "rec"})
    message = (
        "time_limit={'from_method': 'rec'} is resolved by 'nescal-bench run' from the records "
        "of that method; outside the runner, pass seconds or None."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        model.fit(np.zeros((4, 2)), [0, 1, 0, 1])


def test_a_config_with_autogluon_at_another_methods_time_validates_without_autogluon():
    """A config naming the anchor is read and checked without autogluon installed: only
    fit imports it."""
    autogluon = {
        "name": "autogluon",
        "estimator": "nescal_bench.AutoGluonClassifier",
        "fit_on": "train+validation",
        "params": {"time_limit": {"from_method": "hgb"}},
    }
    config = validate_config({**FOLLOWS, "methods": [FOLLOWS["methods"][0], autogluon]})
    assert config.methods[1].params == {"time_limit": {"from_method": "hgb"}}


@pytest.mark.skipif(
    not HAS_AUTOGLUON,
    reason="autogluon.tabular is not installed: the optional 'autogluon' extra "
    "(pip install -e '.[bench,autogluon]'; .ci/run runs this in a venv of its own)",
)
def test_autogluon_fits_a_tiny_set_and_predicts_in_the_label_order(tmp_path):
    X, y = load_wine(return_X_y=True)
    labels = np.array(["c", "a", "b"])[y]  # classes_ sorted: a, b, c
    model = AutoGluonClassifier(time_limit=120, random_state=0).fit(X[::2], labels[::2])
    assert model.classes_.tolist() == ["a", "b", "c"]
    proba = model.predict_proba(X[1::2])
    assert proba.shape == (89, 3) and np.allclose(proba.sum(axis=1), 1)
    # each column is the probability of its class: the right class scores highest mostly
    assert np.mean(model.classes_[proba.argmax(axis=1)] == labels[1::2]) > 0.8
    assert model.predictor_.eval_metric.name == "log_loss"
    # medium_quality's families all train here, the two networks included (a torchvision
    # built for another torch once stopped the lab's AutoGluon venv from importing them);
    # AutoGluon stops once its models are trained (about 10 s here), so the limit of 120 s
    # only keeps a slow machine from skipping a family
    families = {re.sub(r"(Gini|Entr|XT|Large)$", "", name) for name in model.models_}
    assert FAMILIES <= families, f"medium_quality trained {sorted(model.models_)}"
    path = model.path_
    assert os.path.isdir(path)
    del model
    gc.collect()
    assert not os.path.exists(path)  # its models' folder goes with it


@pytest.mark.skipif(not HAS_AUTOGLUON, reason="autogluon.tabular is not installed (see above)")
def test_the_runner_fits_autogluon_at_the_time_of_another_method(tmp_path):
    autogluon = {
        "name": "autogluon",
        "estimator": "nescal_bench.AutoGluonClassifier",
        "fit_on": "train+validation",
        "params": {"time_limit": {"from_method": "hgb"}, "presets": "medium_quality"},
    }
    # a source that trains for seconds: AutoGluon needs some to fit a model at all
    mlp = {
        "name": "mlp",
        "estimator": "sklearn.neural_network.MLPClassifier",
        "params": {
            "hidden_layer_sizes": [64],
            "max_iter": 8000,
            "tol": 0,
            "n_iter_no_change": 8000,
        },
    }
    autogluon["params"]["time_limit"] = {"from_method": "mlp"}
    data = {**FOLLOWS, "datasets": [{"sklearn": "iris"}], "confirm_seeds": [0]}
    records = by_fit(run(tmp_path, {**data, "methods": [mlp, autogluon]}))
    mlp, ag = records[("sklearn-iris", "mlp", 0)], records[("sklearn-iris", "autogluon", 0)]
    assert ag["params"]["time_limit"] == mlp["run"]["fit_seconds"] > 1
    assert np.isfinite(ag["test"]["raw"]["nll"]) and ag["test"]["raw"]["accuracy"] > 0.5
    assert json.dumps(ag["identity"]["params"]["time_limit"]) == '{"from_method": "mlp"}'
    assert ag["fit"]["models"] and all(isinstance(name, str) for name in ag["fit"]["models"])
