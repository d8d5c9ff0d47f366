"""Benchmark configuration: every validation error, tested on its full message."""

from __future__ import annotations

import copy
import json
import re
from importlib.util import find_spec
from pathlib import Path

import pytest
from _benchmark_helpers import set_default

from nescal_bench import (
    ConfigError,
    ConfigWarning,
    GaussianNoise,
    ImbalancedSource,
    LocalSource,
    LossMethod,
    ScaledRows,
    load_config,
    validate_config,
)

CONFIGS = Path(__file__).resolve().parents[1] / "benchmarks" / "configs"
BENCH_EXTRAS = ("pytabkit", "catboost")

BASE = {
    "datasets": [{"sklearn": "iris"}],
    "recipe": "2026-12-04",
    "methods": [{"loss": "ce"}],
    "confirm_seeds": [0],
}


def config_with(**changes):
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return data


def check_error(data, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        validate_config(data)


NESCAL_RANDOM = {"name": "nescal_random", "loss": "nescal", "params": {"graph": "random"}}


def _classifier_params() -> list[str]:
    from nescal_sklearn import NeSCalClassifier

    runner = {"random_state", "verbose", "loss"}
    return sorted(set(NeSCalClassifier().get_params(deep=False)) - runner)


CLASSIFIER_PARAMS = _classifier_params()


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"methods": [{"loss": "nescal", "grid": {"n_neighbors": 5}}]},
            "methods[0].grid.n_neighbors: input should be a valid list, got 5",
        ),
        (
            {"methods": [{"loss": "ce", "params": {"random_state": 1}}]},
            "methods[0].params.random_state: set by the runner (loss, seeds), not by the config",
        ),
        (
            {"methods": [{"loss": "ce", "params": {"graph": "random"}}]},
            "methods[0].params.graph: unknown parameter; expected a parameter of loss 'ce' [] or of "
            f"NeSCalClassifier {CLASSIFIER_PARAMS}",
        ),
        (
            {"methods": [{"loss": "cee"}]},
            "methods[0].loss: expected a registered loss name, one of ['ce', 'flsd53', 'focal', 'label_smoothing', 'mbls', 'mdca', 'mmce', 'nescal', 'nescal_experimental', 'savuc'], got \"cee\"",
        ),
        (
            {"methods": [{"loss": "ce"}, {"loss": "ce"}]},
            "methods[1].name: duplicate method name 'ce' (also methods[0]); give each a 'name'",
        ),
        (
            {"methods": [{"loss": "ce", "estimator": "x"}]},
            'methods[0]: expected an object with exactly one of the keys \'loss\' and \'estimator\', got {"loss": "ce", "estimator": "x"}',
        ),
        (
            {"methods": [{"loss": "ce", "params": {"lr": 0.1}, "grid": {"lr": [0.1]}}]},
            "methods[0]: 'lr' is given in params and in grid; give it in one place",
        ),
        (
            {"methods": [{"estimator": "sklearn.ensemble.NoSuchClassifier"}]},
            "methods[0].estimator: cannot import 'sklearn.ensemble.NoSuchClassifier': module 'sklearn.ensemble' has no attribute 'NoSuchClassifier'",
        ),
        (
            {"methods": [{"estimator": "sklearn.linear_model.LinearRegression"}]},
            'methods[0].estimator: expected a scikit-learn classifier class with predict_proba, got "sklearn.linear_model.LinearRegression"',
        ),
        (
            {
                "methods": [
                    {
                        "estimator": "sklearn.tree.DecisionTreeClassifier",
                        "params": {"random_state": 0},
                    }
                ]
            },
            "methods[0].params.random_state: set by the runner from the seeds, not by the config",
        ),
        (
            {"methods": []},
            "methods: list should have at least 1 item after validation, not 0, got []",
        ),
        ({"methods": None}, "methods: required key missing"),
        (
            {"datasets": [{"sklearn": "mnist"}]},
            "datasets[0].sklearn: input should be 'iris', 'wine', 'breast_cancer' or 'digits', got \"mnist\"",
        ),
        (
            {"datasets": [{"openml_task": -1}]},
            "datasets[0].openml_task: input should be greater than or equal to 1, got -1",
        ),
        (
            {"datasets": [{"openml_suite": 0}]},
            "datasets[0].openml_suite: expected an OpenML suite id (int >= 1) or alias (a name), got 0",
        ),
        (
            {"datasets": [{"openml_task": 1, "sklearn": "iris"}]},
            "datasets[0]: expected an object with exactly one of the keys ['local', 'sklearn', 'openml_task', 'openml_suite', 'suite'] (and optionally 'imbalance'), got {\"sklearn\": \"iris\", \"openml_task\": 1}",
        ),
        ({"datasets": [{"kaggle": "titanic"}]}, "datasets[0].kaggle: unknown key"),
        (
            {"datasets": [{"sklearn": "iris", "imbalance": 1}]},
            "datasets[0].imbalance: input should be less than 1, got 1",
        ),
        (
            {"datasets": [{"openml_task": 31, "imbalance": 0.1}]},
            "datasets[0]: only local and scikit-learn datasets can be made imbalanced; got 'openml_task'",
        ),
        (
            {"datasets": [{"sklearn": "iris"}, {"sklearn": "iris"}]},
            'datasets[1]: duplicate dataset {"sklearn": "iris"}',
        ),
        ({"datasets": None}, "datasets: required key missing"),
        (
            {"confirm_seeds": [0, -1]},
            "confirm_seeds[1]: input should be greater than or equal to 0, got -1",
        ),
        ({"confirm_seeds": [0, 0]}, "confirm_seeds: expected distinct values, got 0 twice"),
        ({"confirm_seeds": [True]}, "confirm_seeds[0]: input should be a valid integer, got true"),
        (
            {"confirm_seeds": []},
            "confirm_seeds: value should have at least 1 item after validation, not 0, got []",
        ),
        ({"confirm_seeds": None}, "confirm_seeds: required key missing"),
        (
            {"methods": [{"loss": "nescal", "grid": {"weight": [0.5, 1.0]}}]},
            "search_seeds: expected a non-empty list of ints >= 0 because methods[0].grid has 2 points, got []",
        ),
        (
            {"splits": {"train": 0.6, "validation": 0.2, "test": 0.3}},
            "splits: expected train + validation + test == 1, got 0.6 + 0.2 + 0.3 = 1.1",
        ),
        ({"splits": {"train": 1.5}}, "splits.train: input should be less than 1, got 1.5"),
        (
            {"budget": {"max_epochs": 0}},
            "budget.max_epochs: input should be greater than or equal to 1, got 0",
        ),
        (
            {"budget": {"max_epochs": 2.5}},
            "budget.max_epochs: input should be a valid integer, got 2.5",
        ),
        (
            {"budget": {"hidden_sizes": [16, 0]}},
            "budget.hidden_sizes[1]: input should be greater than or equal to 1, got 0",
        ),
        ({"budget": {"epochs": 3}}, "budget.epochs: unknown key"),
        (
            {"calibrators": ["platt"]},
            "calibrators[0].name: input should be 'temperature', 'vector', 'matrix', 'structured_matrix', 'isotonic', 'histogram', 'ensemble_temperature', 'probmetrics' or 'sklearn', got \"platt\"",
        ),
        (
            {"calibrators": ["temperature", "temperature"]},
            "calibrators[1]: duplicate calibrator 'temperature' (also calibrators[0]); give each a 'label'",
        ),
        (
            {"calibrators": [{"name": "temperature", "params": {"estimator": None}}]},
            "calibrators[0].params.estimator: set by the runner (the fitted model)",
        ),
        (
            {"metrics": ["nll", "auc"]},
            "metrics[1]: input should be 'nll', 'ece', 'brier', 'accuracy', 'classwise_ece' or 'mce', got \"auc\"",
        ),
        (
            {"selection": "temperature"},
            "selection: expected one of ['raw'] (raw, or a configured calibrator), got \"temperature\"",
        ),
        (
            {"report": {"baseline": "nope"}},
            "report.baseline: expected a method name, one of ['ce'], got \"nope\"",
        ),
        (
            {"report": {"tie_tolerance": -1}},
            "report.tie_tolerance: input should be greater than or equal to 0, got -1",
        ),
        (
            {"openml": {"n_retries": 0}},
            "openml.n_retries: input should be greater than or equal to 1, got 0",
        ),
        ({"foo": 1}, "foo: unknown key"),
        ({"output": ""}, 'output: string should have at least 1 character, got ""'),
        (
            {"conditions": [{"kind": "blur"}]},
            "conditions[0].kind: expected one of ['gaussian_noise', 'missing_entries', 'shuffled_columns', 'scaled_rows', 'feature_noise', 'missing_values', 'scale_drift', 'category_swap', 'pc_shift', 'foreign_rows', 'held_out_class'], got \"blur\"",
        ),
        ({"conditions": [{"kind": "gaussian_noise"}]}, "conditions[0].sd: required key missing"),
        (
            {"conditions": [{"kind": "gaussian_noise", "sd": -1}]},
            "conditions[0].sd: input should be greater than 0, got -1",
        ),
        (
            {"conditions": [{"kind": "missing_entries", "fraction": 1.5}]},
            "conditions[0].fraction: input should be less than 1, got 1.5",
        ),
        ({"conditions": [{"kind": "shuffled_columns", "sd": 1}]}, "conditions[0].sd: unknown key"),
        (
            {"conditions": [{"kind": "scaled_rows", "name": "clean"}]},
            "conditions[0].name: 'clean' names the unmodified test rows; pick another",
        ),
        (
            {"conditions": [{"kind": "scaled_rows"}, {"kind": "scaled_rows", "factor": 4}]},
            "conditions[1].name: duplicate condition name 'scaled_rows_4' (also conditions[0])",
        ),
        (
            {"conditions": {"kind": "scaled_rows"}},
            'conditions: input should be a valid list, got {"kind": "scaled_rows"}',
        ),
        (
            {"report": {"controls": ["nope"]}},
            "report.controls[0]: expected a method name, one of ['ce'], got \"nope\"",
        ),
    ],
)
def test_validation_error_messages(changes, message):
    check_error(config_with(**changes), message)


def test_local_dataset_names_are_checked_against_the_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps([{"name": "phoneme"}, {"name": "wdbc"}]))
    data = config_with(datasets=[{"local": "phonem"}], data_dir=str(tmp_path))
    check_error(
        data,
        f"datasets[0].local: expected a dataset of '{tmp_path / 'manifest.json'}', one of "
        "['phoneme', 'wdbc'], got \"phonem\"",
    )
    (tmp_path / "manifest.json").write_text(json.dumps([{"name": "ghost", "file": "g.parquet"}]))
    check_error(
        config_with(datasets=[{"local": "ghost"}], data_dir=str(tmp_path)),
        f"datasets[0].local: the entry 'ghost' of '{tmp_path / 'manifest.json'}' names the file "
        f"'{tmp_path / 'g.parquet'}', which does not exist",
    )
    missing = tmp_path / "nowhere"
    check_error(
        config_with(datasets=[{"local": "phoneme"}], data_dir=str(missing)),
        f"datasets[0].local: no manifest.json in data_dir '{missing}' (resolved to "
        f"'{missing.resolve()}'); set data_dir or NESCAL_DATA_DIR",
    )


def _library_message(check) -> str:
    with pytest.raises((ValueError, TypeError)) as info:
        check()
    return str(info.value)


def test_parameter_errors_are_the_librarys_own_messages_after_the_config_path():
    from sklearn.tree import DecisionTreeClassifier

    from nescal_sklearn import NeSCalClassifier, get_loss

    def bad_loss(value):
        def check():
            loss = get_loss("nescal").set_params(n_neighbors=value)
            loss.validate()

        return _library_message(check)

    check_error(
        config_with(
            methods=[
                {"loss": "ce"},
                {"loss": "focal"},
                {"loss": "nescal", "params": {"n_neighbors": -3}},
            ]
        ),
        f"methods[2].params.n_neighbors: {bad_loss(-3)}",
    )
    check_error(
        config_with(
            methods=[{"loss": "nescal", "grid": {"n_neighbors": [5, 0]}}], search_seeds=[0]
        ),
        f"methods[0].grid.n_neighbors[1]: {bad_loss(0)}",
    )
    lr = _library_message(lambda: NeSCalClassifier(lr=-1)._validate_params())
    check_error(
        config_with(methods=[{"loss": "label_smoothing", "params": {"lr": -1}}]),
        f"methods[0].params.lr: {lr}",
    )
    assert lr == (
        "The 'lr' parameter of NeSCalClassifier must be None or a float in the range (0.0, inf). "
        "Got -1 instead."
    )
    depth = _library_message(lambda: DecisionTreeClassifier(max_depth=0)._validate_params())
    check_error(
        config_with(
            methods=[
                {"estimator": "sklearn.tree.DecisionTreeClassifier", "params": {"max_depth": 0}}
            ]
        ),
        f"methods[0].params.max_depth: {depth}",
    )
    from nescal_sklearn import CalibratedTemperature

    cv = _library_message(lambda: CalibratedTemperature(None, cv="x")._validate_params())
    check_error(
        config_with(calibrators=[{"name": "temperature", "params": {"cv": "x"}}]),
        f"calibrators[0].params.cv: {cv}",
    )


def test_a_parameter_error_is_located_by_its_param_and_other_errors_blame_the_method(
    monkeypatch,
):
    """The lab reads ParameterError.param (the library's structured error), never the
    message; any other error of a method's checks blames the method."""
    from nescal_sklearn.exceptions import ParameterError

    def check(self, estimator):
        for param, value in estimator.get_params(deep=False).items():
            if value == 13:
                raise ParameterError(param, "a message the lab does not read")
        if estimator.batch_size == 7:
            raise ValueError("not a ParameterError")

    monkeypatch.setattr(LossMethod, "check", check)
    grid = [{"loss": "ce"}, {"name": "b", "loss": "ce", "grid": {"lr": [0.1, 13.0]}}]
    for changes, where in [
        ({"budget": {"max_epochs": 13}}, "budget.max_epochs"),
        (
            {"methods": [{"loss": "ce", "params": {"batch_size": 13}}]},
            "methods[0].params.batch_size",
        ),
        ({"methods": grid, "search_seeds": [0]}, "methods[1].grid.lr[1]"),
    ]:
        check_error(config_with(**changes), f"{where}: a message the lab does not read")
    check_error(
        config_with(methods=[{"loss": "ce", "params": {"batch_size": 7}}]),
        "methods[0]: not a ParameterError",
    )


def test_scikit_learn_constraints_name_their_parameter():
    from nescal_bench._methods import ClassifierMethod
    from nescal_sklearn.exceptions import ParameterError

    method = ClassifierMethod("sklearn.linear_model.LogisticRegression")
    with pytest.raises(ParameterError) as caught:
        method.check(method.build({"C": -1.0}, seed=0))
    assert caught.value.param == "C"
    assert str(caught.value) == (
        "The 'C' parameter of LogisticRegression must be a float in the range (0.0, inf]. "
        "Got -1.0 instead."
    )


COMMAND = (
    "import importlib.util as util, sys\n"
    "{hide}"
    "sys.argv = ['nescal-bench', 'validate', 'no/such/config.json']\n"
    "from nescal_bench_command import main\n"  # the console script's entry point
    "sys.exit(main())\n"
)
# pandas as if not installed: find_spec answers None, and an import of it fails
WITHOUT_PANDAS = (
    "find = util.find_spec\n"
    "util.find_spec = lambda name, *a: None if name == 'pandas' else find(name, *a)\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.partition('.')[0] == 'pandas':\n"
    "            raise ModuleNotFoundError(f'No module named {{name!r}}', name=name)\n"
    "sys.meta_path.insert(0, Block())\n"
)


def test_the_command_without_the_bench_extra_prints_its_install_line():
    import subprocess
    import sys

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    root = CONFIGS.parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"nescal-bench": "nescal_bench_command:main"}
    program = COMMAND.format(hide=WITHOUT_PANDAS)
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=root, capture_output=True, text=True
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "nescal-bench: error: nescal_bench needs the lab's extra (pandas missing): "
        "pip install -e '.[bench]'\n"
    )
    # with the extra, the same entry point is the command
    result = subprocess.run(
        [sys.executable, "-c", COMMAND.format(hide="")], cwd=root, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        "nescal-bench: error: cannot read config file 'no/such/config.json'"
    )


def test_validate_command(tmp_path, capsys):
    from nescal_bench.cli import main

    path = tmp_path / "ok.json"
    path.write_text(json.dumps(config_with(calibrators=["temperature"])))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"{path}: valid (1 datasets, 1 methods, 1 grid points, 1 calibrators, 0 conditions)\n"
    )
    path.write_text(json.dumps(config_with(budget={"max_epochs": 0})))
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        "nescal-bench: error: budget.max_epochs: input should be greater than or equal to 1, got 0\n"
    )
    assert main(["run", str(path.with_name("missing.json"))]) == 2
    assert "cannot read config file" in capsys.readouterr().err
    path.write_text(json.dumps(config_with()))
    assert main(["run", str(path), "--jobs", "0"]) == 2
    assert capsys.readouterr().err == "nescal-bench: error: --jobs: expected int >= 1, got 0\n"


def test_load_config_reports_file_problems(tmp_path):
    with pytest.raises(ConfigError, match=r"^cannot read config file '.*nope\.json': No such file"):
        load_config(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"datasets": [\n  {"sklearn": "iris"},,\n]}')
    with pytest.raises(
        ConfigError,
        match=f"^{re.escape(str(bad))}: invalid JSON at line 2, column 23: Expecting value$",
    ):
        load_config(bad)


def test_defaults_names_and_roundtrip(tmp_path):
    path = tmp_path / "my_bench.json"
    path.write_text(
        json.dumps(
            config_with(
                methods=[
                    {"loss": "ce"},
                    {
                        "loss": "nescal",
                        "params": {"n_neighbors": 5},
                        "grid": {"weight": [0.5, 1.0]},
                    },
                    NESCAL_RANDOM,
                    {"estimator": "HistGradientBoostingClassifier", "params": {"max_iter": 10}},
                ],
                search_seeds=[1],
                calibrators=["temperature"],
            )
        )
    )
    config = load_config(path)
    assert config.name == "my_bench"
    assert config.output == "results/my_bench"
    assert [m.name for m in config.methods] == [
        "ce",
        "nescal",
        "nescal_random",
        "HistGradientBoostingClassifier",
    ]
    assert config.methods[3].kind.ref == "sklearn.ensemble.HistGradientBoostingClassifier"
    assert config.methods[1].kind == LossMethod("nescal")
    # the baseline is the plain cross-entropy, the reference the first neighbour loss that is
    # not a control, the controls those whose resolved params have loss__graph == "random"
    assert config.report.baseline == "ce" and config.report.reference == "nescal"
    assert config.report.controls == ("nescal_random",)
    assert config.estimator_params(config.methods[1], {"weight": 0.5}) == {
        "loss__n_neighbors": 5,
        "loss__weight": 0.5,
        "recipe": "2026-12-04",
    }
    again = validate_config(config.to_json())
    assert again == config
    assert again.to_json()["report"]["controls"] == ["nescal_random"]


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.json")))
def test_shipped_configs_validate(name):
    # a config may name an anchor from the optional ``bench`` extra (pytabkit's RealMLP)
    for module in BENCH_EXTRAS:
        if f'"{module}.' in (CONFIGS / name).read_text() and find_spec(module) is None:
            pytest.skip(f"{name} names {module}, from the 'bench' extra, which is not installed")
    config = load_config(CONFIGS / name)
    assert config.confirm_seeds and config.methods
    again = validate_config(config.to_json(), check_files=False)
    assert again == config  # e.g. the imbalance option survives the round trip


def test_random_graph_control_is_read_from_the_loss_the_fits_train_with(monkeypatch):
    from nescal_sklearn import NeSCalLoss

    data = config_with(methods=[{"loss": "ce"}, {"loss": "nescal"}, NESCAL_RANDOM])
    assert validate_config(data).report.controls == ("nescal_random",)
    # A library default that changes later does not change the study: "nescal" trains with
    # its recipe's graph, whatever NeSCalLoss's own default becomes.
    set_default(monkeypatch, NeSCalLoss.__init__, "graph", "random")
    config = validate_config(data)
    assert config.report.controls == ("nescal_random",)
    assert config.report.reference == "nescal"


def test_explicit_report_controls_and_dataset_sources():
    data = config_with(
        methods=[{"loss": "ce"}, {"name": "other", "loss": "ce"}],
        report={"controls": ["other"]},
        datasets=[{"sklearn": "iris"}, {"local": "adult", "imbalance": 0.05}],
        conditions=[{"kind": "gaussian_noise", "sd": 0.5}, {"name": "far", "kind": "scaled_rows"}],
    )
    config = validate_config(data, check_files=False)
    assert config.report.controls == ("other",) and config.report.reference is None
    assert config.datasets[1] == ImbalancedSource(LocalSource("adult"), 0.05)
    assert config.datasets[1].name == "adult-imbalance-0.05"
    assert config.conditions == (GaussianNoise("gaussian_noise_0.5", 0.5), ScaledRows("far", 4.0))
    assert validate_config(config.to_json(), check_files=False) == config


def test_saved_configs_are_read_without_the_librarys_checks():
    data = config_with(
        methods=[{"loss": "nescal", "params": {"n_neighbors": 5}}],
        report={"baseline": None, "reference": "nescal", "controls": [], "tie_tolerance": 0.01},
    )
    config = validate_config(data, check_params=False)
    assert config.methods[0].targets is None and config.report.reference == "nescal"
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "method 'nescal' was read without the library's checks (a saved run's "
            "configuration); validate it with check_params=True to build estimators"
        ),
    ):
        config.methods[0].build({}, config.budget, 0)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {
                "methods": [{"loss": "nescal", "params": {"warmup": 50}}],
                "budget": {"max_epochs": 2},
            },
            "methods[0].params.warmup: loss__warmup=50 ends the warm-up at epoch 51, after the last of max_epochs=2: the neighbour graph would never be built. Pass a shorter warmup, a fraction in [0, 1), or more max_epochs. max_epochs=2 comes from budget.max_epochs.",
        ),
        (
            {
                "methods": [{"loss": "nescal", "params": {"loss__warmup": 3}}],
                "budget": {"max_epochs": 3},
            },
            "methods[0].params.loss__warmup: loss__warmup=3 ends the warm-up at epoch 4, after the last of max_epochs=3: the neighbour graph would never be built. Pass a shorter warmup, a fraction in [0, 1), or more max_epochs. max_epochs=3 comes from budget.max_epochs.",
        ),
        (
            {
                "methods": [{"loss": "nescal", "grid": {"warmup": [1, 5]}}],
                "search_seeds": [1],
                "budget": {"max_epochs": 4},
            },
            "methods[0].grid.warmup[1]: loss__warmup=5 ends the warm-up at epoch 6, after the last of max_epochs=4: the neighbour graph would never be built. Pass a shorter warmup, a fraction in [0, 1), or more max_epochs. max_epochs=4 comes from budget.max_epochs.",
        ),
        (
            {
                "methods": [{"loss": "nescal", "params": {"warmup": 5, "max_epochs": 5}}],
                "budget": {"max_epochs": 30},
            },
            "methods[0].params.warmup: loss__warmup=5 ends the warm-up at epoch 6, after the last of max_epochs=5: the neighbour graph would never be built. Pass a shorter warmup, a fraction in [0, 1), or more max_epochs. max_epochs=5 comes from methods[0].params.max_epochs.",
        ),
        (
            {"methods": [{"loss": "nescal", "params": {"warmup": 500}}]},
            "methods[0].params.warmup: loss__warmup=500 ends the warm-up at epoch 501, after the last of max_epochs=256: the neighbour graph would never be built. Pass a shorter warmup, a fraction in [0, 1), or more max_epochs. max_epochs=256 comes from recipe '2026-12-04'.",
        ),
        (
            {"methods": [{"loss": "ce", "params": {"hidden_sizes": [0]}}]},
            "methods[0].params.hidden_sizes: hidden_sizes must be a sequence of ints >= 1 (the width of each hidden layer; () for none); got [0].",
        ),
        (
            {
                "methods": [{"loss": "ce", "grid": {"hidden_sizes": [[8], [8, 0]]}}],
                "search_seeds": [1],
            },
            "methods[0].grid.hidden_sizes[1]: hidden_sizes must be a sequence of ints >= 1 (the width of each hidden layer; () for none); got [8, 0].",
        ),
        (
            {"name": "a/../../b"},
            "name: expected a name of letters, digits and '_', '.', '@', '+', '-' that does not start with '.', '@', '+' or '-', got \"a/../../b\"",
        ),
        (
            {"name": "/tmp/b"},
            "name: expected a name of letters, digits and '_', '.', '@', '+', '-' that does not start with '.', '@', '+' or '-', got \"/tmp/b\"",
        ),
        (
            {"output": "results/a\x00b"},
            'output: expected a path without NUL characters, got "results/a\\u0000b"',
        ),
        (
            {"data_dir": "data\x00"},
            'data_dir: expected a path without NUL characters, got "data\\u0000"',
        ),
    ],
)
def test_what_run_would_reject_fails_validation(changes, message):
    check_error(config_with(**changes), message)


def test_warm_ups_within_max_epochs_and_fractions_are_accepted():
    validate_config(
        config_with(
            methods=[{"loss": "nescal", "grid": {"warmup": [0, 1, 0.99]}}],
            search_seeds=[1],
            budget={"max_epochs": 2},
        )
    )


def test_unusable_output_directories(tmp_path):
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    check_error(
        config_with(output=str(taken)), f"output: {str(taken)!r} exists and is not a directory"
    )
    check_error(
        config_with(output=str(taken / "results")),
        f"output: {str(taken / 'results')!r} cannot be created: {str(taken)!r} is in its path, "
        "and it is a file, not a directory",
    )
    (tmp_path / "manifest.json").write_text("[]")
    check_error(
        config_with(output=str(tmp_path / "." / ""), data_dir=str(tmp_path)),
        f"output: expected a folder of its own, got the data_dir {str(tmp_path)!r} (the local "
        "datasets' folder)",
    )
    # a saved run's configuration is read without these checks
    validate_config(config_with(output=str(taken)), check_files=False, check_params=False)


def test_duplicate_json_keys_are_errors(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text(
        '{"datasets": [{"sklearn": "iris"}], "recipe": "2026-12-04", "methods": [{"loss": "ce"}], '
        '"confirm_seeds": [1], "confirm_seeds": [5]}'
    )
    message = (
        "confirm_seeds: given more than once in the same object; JSON keeps only the last "
        "value, so give it once"
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_config(path)
    path.write_text(
        '{"datasets": [{"sklearn": "iris"}], "confirm_seeds": [1], "methods": '
        '[{"loss": "ce"}, {"loss": "nescal", "params": {"weight": 1, "weight": 2}}]}'
    )
    message = message.replace("confirm_seeds", "weight")
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_config(path)


def test_confirm_seeds_shared_with_search_seeds_warn(tmp_path, capsys):
    from nescal_bench.cli import main

    data = config_with(
        methods=[{"loss": "label_smoothing", "grid": {"epsilon": [0.05, 0.1]}}],
        search_seeds=[0, 1],
        confirm_seeds=[1, 2, 0],
    )
    message = (
        "confirm_seeds: [1, 0] are also in search_seeds; a gridded method's confirm fit on "
        "such a seed is its search fit at the chosen point, which biases the reported result "
        "towards that point; keep confirm_seeds apart from search_seeds"
    )
    with pytest.warns(ConfigWarning, match=f"^{re.escape(message)}$"):
        validate_config(data)
    path = tmp_path / "shared.json"
    path.write_text(json.dumps(data))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().err == f"nescal-bench: warning: {message}\n"
    # without a grid the search seeds are not used: nothing to warn about
    validate_config(config_with(search_seeds=[0]))


def test_run_refuses_unusable_outputs_before_writing(tmp_path, capsys):
    from nescal_bench.cli import main

    taken = tmp_path / "taken"
    taken.write_text("")
    path = tmp_path / "c.json"
    for output, message in [
        (str(taken), f"output: {str(taken)!r} exists and is not a directory"),
        ("a\0b", 'output: expected a path without NUL characters, got "a\\u0000b"'),
    ]:
        path.write_text(json.dumps(config_with(output=output)))
        assert main(["run", str(path)]) == 2
        assert capsys.readouterr().err == f"nescal-bench: error: {message}\n"
    assert not (tmp_path / "a").exists()
