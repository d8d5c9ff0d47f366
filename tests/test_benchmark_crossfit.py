"""The runner and cross-fitted methods: ``fit_on: train+validation``, members given in a
config, keys from what the config states, and the study script's smoke run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from nescal_bench import (
    ConfigError,
    RecordStore,
    load_config,
    plan_run,
    run_benchmark,
    stratified_split,
    validate_config,
)

ROOT = Path(__file__).resolve().parents[1]
CF = "nescal_sklearn.ensemble.CrossFitClassifier"
#: Where CrossFitClassifier lived when the study's records were keyed: keys keep that path.
KEYED_CF = "nescal_sklearn.calibration.CrossFitClassifier"
HGB = "sklearn.ensemble.HistGradientBoostingClassifier"
LR = {"class": "sklearn.linear_model.LogisticRegression", "params": {"max_iter": 3000}}

CONFIG = {
    "name": "crossfit",
    "datasets": [{"sklearn": "breast_cancer"}],
    "methods": [
        {
            "name": "lr",
            "estimator": "sklearn.linear_model.LogisticRegression",
            "params": {"max_iter": 3000},
        },
        {
            "name": "lr_cf",
            "fit_on": "train+validation",
            "estimator": CF,
            "params": {"cv": 3, "estimators": [["lr", LR]], "calibration": "identity"},
        },
    ],
    "calibrators": ["temperature"],
    "confirm_seeds": [3],
}


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**data, "output": str(tmp_path / "results")}))
    return path


@pytest.mark.determinism
def test_a_cross_fitted_method_trains_on_train_and_validation_and_calibrates_itself(tmp_path):
    config = load_config(_write(tmp_path, CONFIG))
    run_benchmark(config, progress=False, report=False)
    store = RecordStore(config.output)
    records = {r["method"]: r for r in (store.read(k) for k in store.keys())}
    record = records["lr_cf"]
    assert record["identity"]["fit_on"] == "train+validation"
    assert "fit_on" not in records["lr"]["identity"]  # the default keeps earlier keys
    # exact: every stage is the model itself (_calibrate), the same probabilities twice
    assert record["test"]["temperature"] == record["test"]["raw"]  # its own calibration
    assert record["fit"]["calibration"] == "identity" and record["fit"]["weights"] == [1.0]
    # one member: its 3 fold fits' seconds, summed (each a positive wall time)
    (seconds,) = record["fit"]["member_seconds"]
    assert 0 < seconds < record["run"]["fit_seconds"]
    # By hand: the same split, the members fitted on train + validation, 3 folds.
    from sklearn.base import clone

    X, y = load_breast_cancer(return_X_y=True)
    split = stratified_split(X, y, seed=3)
    task = next(t for t in plan_run(config).confirm_fixed if t.method.name == "lr_cf")
    model = clone(task.estimator).fit(
        np.concatenate([split.X_train, split.X_val]), np.concatenate([split.y_train, split.y_val])
    )
    from sklearn.metrics import log_loss

    proba = model.predict_proba(split.X_test).astype(np.float64)
    # The runner fitted at one BLAS thread, this test at the process's count: L-BFGS
    # (tol=1e-4) stops within its tolerance of the same flat optimum.
    assert record["test"]["raw"]["nll"] == pytest.approx(log_loss(split.y_test, proba), rel=1e-6)


def test_members_in_a_config_are_built_and_key_by_what_the_config_states(tmp_path):
    config = load_config(_write(tmp_path, CONFIG))
    task = next(t for t in plan_run(config).confirm_fixed if t.method.name == "lr_cf")
    ((name, member),) = task.estimator.estimators
    assert name == "lr" and member.max_iter == 3000
    assert task.identity["estimator"] == KEYED_CF
    assert task.identity["kind"] == {"estimator": KEYED_CF}
    assert task.identity["params"]["estimators"] == [["lr", LR]]


def test_a_cross_fitted_method_cannot_have_a_grid():
    data = {**CONFIG, "methods": [{**CONFIG["methods"][1], "grid": {"cv": [3, 4]}}]}
    data["methods"][0]["params"] = {"estimators": [["lr", LR]]}
    message = (
        "methods[0]: a method with fit_on='train+validation' trains on the validation "
        "rows, so no held-out rows are left to choose a grid point on; give it one point "
        "(params)"
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        validate_config(data)
    bad = {**CONFIG, "methods": [{**CONFIG["methods"][0], "fit_on": "all"}]}
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "methods[0].fit_on: input should be 'train' or 'train+validation', got \"all\""
        ),
    ):
        validate_config(bad)


def test_a_member_that_cannot_be_built_is_named_by_its_path():
    data = {**CONFIG, "methods": [json.loads(json.dumps(CONFIG["methods"][1]))]}
    data["methods"][0]["params"]["estimators"][0][1]["params"] = {"no_such": 1}
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "methods[0].params.estimators[0][1]: cannot build sklearn.linear_model."
            "LogisticRegression:"
        ),
    ):
        validate_config(data)


def run_script(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_oof_ensembles_quick_smoke(tmp_path):
    args = ("--config", "oof_ensembles_search", "--quick", "--out", str(tmp_path))
    run = run_script("benchmarks/oof_ensembles.py", *args)
    table = (tmp_path / "table_oof_ensembles_search.md").read_text()
    assert table in run.stdout
    assert re.search(r"^\| hgb_cf +\|", table, re.M) and re.search(
        r"^\| cf_p10_k5 +\|", table, re.M
    )
    pairs = (tmp_path / "pairs_oof_ensembles_search.md").read_text()
    assert "cf_p10_k5 vs cf_ce_p10_k5" in pairs
    assert (tmp_path / "oof_ensembles_oof_ensembles_search.png").stat().st_size > 5_000
    again = run_script("benchmarks/oof_ensembles.py", *args, "--no-run")
    # exact: the same report code on the same records (floats round-trip JSON exactly)
    assert (tmp_path / "table_oof_ensembles_search.md").read_text() == table
    assert "fits finished" not in again.stderr


def _config_json(name: str) -> dict:
    """A study config of benchmarks/configs as its file holds it (not validated)."""
    return json.loads((ROOT / "benchmarks" / "configs" / f"{name}.json").read_text())


def _params(estimator) -> dict:
    """What a cross-fitted model trains: every parameter but where and how it runs."""
    skip = ("n_jobs", "random_state", "verbose")
    params = {
        k: v
        for k, v in estimator.get_params(deep=True).items()
        if not k.endswith(skip) and not hasattr(v, "get_params") and k != "estimators"
    }
    return {**params, "members": [name for name, _ in estimator.estimators]}


@pytest.mark.parametrize(
    ("name", "method", "recipe", "options"),
    [
        ("quickstart", "recommended", None, {}),
        ("oof_ensembles", "recommended", "2026-12-04", {}),
        # the configs whose records made the figures of the recipe of 2026-12-05
        ("networks_search", "rec_h2", "2026-12-05", {}),
        ("portfolio_search", "rec", "2026-12-05", {}),  # issue 45's baselines
        ("portfolio_weights", "rec", "2026-12-06", {}),
        ("scale", "rec", "2026-12-05", {}),
        ("scale", "rec_lean", "2026-12-05", {"refit": True}),
        ("scale", "rec_budget", "2026-12-05", {"time_limit": 60.0}),
        # the choice of scale_search, and the full-size study of the recipe of 2026-12-06
        ("scale_search", "fast_300k", "2026-12-06", {}),
        ("scale_search", "rec", "2026-12-05", {}),
        ("scale_confirm", "new", "2026-12-06", {}),
        ("scale_confirm", "new_lean", "2026-12-06", {"refit": True}),
        ("scale_confirm", "new_budget", "2026-12-06", {"time_limit": 30.0}),
        ("scale_confirm", "rec", "2026-12-05", {}),
        # the searches that follow it: the graph's (issue 41) and the stacker's (issue 45)
        ("graph_search", "new", "2026-12-06", {}),
        ("stack_search", "rec", "2026-12-06", {}),
        ("stack_search", "rec05", "2026-12-05", {}),
        ("portfolio_confirm", "rec05", "2026-12-05", {}),
    ],
)
def test_the_configs_recommended_model_is_make_recommended_classifier(
    name, method, recipe, options
):
    """The main job shows the model users get, and each study the recipe it measured
    (tests/test_recommended.py writes the recipes out by hand), not copies that drifted."""
    from nescal_sklearn import make_recommended_classifier

    config = load_config(ROOT / "benchmarks" / "configs" / f"{name}.json")
    (spec,) = [m for m in config.methods if m.name == method]
    shown = config.build(spec, {}, 0)
    given = make_recommended_classifier(random_state=0, recipe=recipe, **options)[-1]
    assert _params(shown) == _params(given)


@pytest.mark.parametrize(("method", "search"), [("exact_pca", {"reduction": "pca"}), ("exact", {})])
def test_the_graph_searchs_candidates_differ_from_new_only_in_the_neighbour_search(method, search):
    """graph_search.json's description says so: the candidates' NeSCal member trains with
    the loss settings of the recipe of 2026-12-06 but the search (and PCA for exact_pca)."""
    from nescal_sklearn.estimator import get_recipe

    config = load_config(ROOT / "benchmarks" / "configs" / "graph_search.json")
    built = {m.name: config.build(m, {}, 0) for m in config.methods if m.name in ("new", method)}
    (nescal, *others) = built[method].estimators
    (reference, *same_others) = built["new"].estimators
    assert [(n, e.get_params()) for n, e in others] == [(n, e.get_params()) for n, e in same_others]

    def training(member) -> dict:
        return {k: v for k, v in member.get_params().items() if not k.startswith("loss")}

    assert training(nescal[1]) == training(reference[1])
    expected = {
        **get_recipe("2026-12-06").loss_params["nescal_experimental"],
        "graph_method": "exact",
        **search,
    }
    assert nescal[1].loss.get_params() == expected


def test_the_portfolio_confirm_runs_the_stack_searchs_choice_and_its_twins():
    """portfolio_confirm.json's description says so: chosen is stack_search's all_stack (its
    rule's choice), chosen_ce the same with a cross-entropy network, chosen_nonet without
    the networks."""
    search = {m["name"]: m for m in _config_json("stack_search")["methods"]}
    confirm = {m["name"]: m for m in _config_json("portfolio_confirm")["methods"]}
    assert confirm["chosen"] == {**search["all_stack"], "name": "chosen"}
    members = confirm["chosen"]["params"]["estimators"]
    ce = [
        [name, {**spec, "params": {**spec["params"], "loss": "ce"}}]
        if name == "nescal"
        else [name, spec]
        for name, spec in members
    ]
    assert confirm["chosen_ce"]["params"] == {**confirm["chosen"]["params"], "estimators": ce}
    networks = [n for n, spec in members if spec["class"] == "nescal_sklearn.NeSCalClassifier"]
    assert networks == ["nescal", "ls"]
    kept = [[n, spec] for n, spec in members if n not in networks]
    assert confirm["chosen_nonet"]["params"] == {**confirm["chosen"]["params"], "estimators": kept}
    assert confirm["autogluon"]["params"]["time_limit"] == {"from_method": "chosen"}


def test_the_timing_run_fits_the_confirms_chosen_ce_and_rec05_again():
    """portfolio_timing.json's description says so: the same two methods, sets, rows, seeds
    and thread count as the confirm, so only the seconds differ (its rule reads the ratio)."""
    confirm, timing = (_config_json(name) for name in ("portfolio_confirm", "portfolio_timing"))
    assert timing["methods"] == [
        m for m in confirm["methods"] if m["name"] in {"chosen_ce", "rec05"}
    ]
    assert [m["name"] for m in timing["methods"]] == ["chosen_ce", "rec05"]
    same = ("datasets", "confirm_seeds", "search_seeds", "splits", "budget", "recipe", "selection")
    assert {k: timing[k] for k in same} == {k: confirm[k] for k in same}


def test_the_timing_runs_records_are_the_confirms_fits_timed_again():
    """Every record of portfolio_timing has a record of the same key in portfolio_confirm
    with the same test NLL, bit for bit (the same fits); only the seconds differ."""
    results = ROOT / "benchmarks" / "results"
    timing, confirm = (
        RecordStore(results / name).load(move=False)
        for name in ("portfolio_timing", "portfolio_confirm")
    )
    assert len(timing) == 114 and timing.keys() <= confirm.keys()
    for key, record in timing.items():
        assert record["test"]["raw"]["nll"] == confirm[key]["test"]["raw"]["nll"]


def test_the_cheaper_search_changes_chosen_ce_only_as_its_description_says():
    """portfolio_cheap.json: rec05 as in the confirm, and chosen_ce without a forest, without
    both forests, with forests of 100 trees, or without the label-smoothing network and with
    forests of 100 trees; every other member and parameter is the confirm's."""
    confirm, cheap = (_config_json(name) for name in ("portfolio_confirm", "portfolio_cheap"))
    confirm = {m["name"]: m for m in confirm["methods"]}
    ce = confirm["chosen_ce"]

    def variant(name, drop=(), trees=300):
        members = [[n, spec] for n, spec in ce["params"]["estimators"] if n not in drop]
        members = [
            [n, {**spec, "params": {**spec["params"], "n_estimators": trees}}]
            if n in {"et", "rf"}
            else [n, spec]
            for n, spec in members
        ]
        return {**ce, "name": name, "params": {**ce["params"], "estimators": members}}

    assert cheap["methods"] == [
        confirm["rec05"],
        variant("ce_no_rf", drop={"rf"}),
        variant("ce_no_et_rf", drop={"et", "rf"}),
        variant("ce_trees100", trees=100),
        variant("ce_no_ls_trees100", drop={"ls"}, trees=100),
    ]
    assert cheap["confirm_seeds"] == [0] and cheap["budget"] == {"max_rows": 3000, "threads": 1}


def test_the_cheaper_portfolios_confirm_fits_the_kept_variant_its_twin_rec05_and_autogluon():
    """portfolio_confirm_trees100.json: the variant portfolio_cheap kept, its twin without
    the two networks, the confirm's rec05 and AutoGluon at the variant's fit time, on the
    confirm's sets, rows, seeds and thread count."""
    confirm, cheap, trees = (
        _config_json(name)
        for name in ("portfolio_confirm", "portfolio_cheap", "portfolio_confirm_trees100")
    )
    variant = next(m for m in cheap["methods"] if m["name"] == "ce_trees100")
    members = variant["params"]["estimators"]
    nets = {n for n, spec in members if spec["class"] == "nescal_sklearn.NeSCalClassifier"}
    assert nets == {"nescal", "ls"}
    twin = [[n, spec] for n, spec in members if n not in nets]
    confirm_methods = {m["name"]: m for m in confirm["methods"]}
    autogluon = confirm_methods["autogluon"]
    assert trees["methods"] == [
        variant,
        {
            **variant,
            "name": "ce_trees100_nonet",
            "params": {**variant["params"], "estimators": twin},
        },
        confirm_methods["rec05"],
        {
            **autogluon,
            "params": {**autogluon["params"], "time_limit": {"from_method": "ce_trees100"}},
        },
    ]
    same = ("datasets", "confirm_seeds", "search_seeds", "splits", "budget", "recipe", "selection")
    assert {k: trees[k] for k in same} == {k: confirm[k] for k in same}


def test_the_cheaper_portfolios_confirm_refits_rec05_as_the_confirm_did():
    """Each of the 57 rec05 records of portfolio_confirm_trees100 (fitted again there, so
    that each fit-time ratio pairs fits of one machine) has the key of a record of the
    confirm and its test NLL bit for bit."""
    results = ROOT / "benchmarks" / "results"
    trees, confirm = (
        RecordStore(results / name).load(move=False)
        for name in ("portfolio_confirm_trees100", "portfolio_confirm")
    )
    rec05 = {key: r for key, r in trees.items() if r["method"] == "rec05"}
    assert len(rec05) == 57 and rec05.keys() <= confirm.keys()
    for key, record in rec05.items():
        assert record["test"]["raw"]["nll"] == confirm[key]["test"]["raw"]["nll"]


def test_the_full_size_study_runs_the_confirms_methods_on_two_threads():
    """portfolio_full.json's description says so: the confirm's methods, the same members
    and parameters, but for the cores they run on, on the full-size sets of scale_confirm."""
    confirm, full, scale = (
        _config_json(name) for name in ("portfolio_confirm", "portfolio_full", "scale_confirm")
    )
    cores = {"n_jobs", "thread_count"}
    expected = []
    for method in confirm["methods"]:
        params = dict(method.get("params", {}))
        if method["estimator"].endswith("CrossFitClassifier"):
            params["n_jobs"] = 2
        elif "thread_count" in params:
            params["thread_count"] = 2
        expected.append({**method, "params": params} if "params" in method else method)
    assert full["methods"] == expected
    assert {k for m in full["methods"] for k in m.get("params", {})} >= cores
    assert full["datasets"] == scale["datasets"] and full["confirm_seeds"] == [0, 1, 2]
    assert full["budget"] == {"threads": 2} and "max_rows" not in full["budget"]


def test_the_own_validation_search_changes_ce_trees100_only_as_its_description_says():
    """portfolio_ownval.json: rec05 and ce_trees100 as in portfolio_folds; ce_own is
    ce_trees100 with early_stopping_rows="own", ce_own_v10 that with the two networks'
    validation_fraction at 0.1; nothing else differs, so every record differs by the
    rows the members early-stop on."""
    folds, ownval = (_config_json(name) for name in ("portfolio_folds", "portfolio_ownval"))
    before = {m["name"]: m for m in folds["methods"]}
    methods = {m["name"]: m for m in ownval["methods"]}
    assert list(methods) == ["rec05", "ce_trees100", "ce_own", "ce_own_v10"]
    assert methods["rec05"] == before["rec05"]
    assert methods["ce_trees100"] == before["ce_trees100"]
    base = before["ce_trees100"]
    own = {**base, "name": "ce_own", "params": {**base["params"], "early_stopping_rows": "own"}}
    assert methods["ce_own"] == own
    networks = [
        [name, {**spec, "params": {**spec["params"], "validation_fraction": 0.1}}]
        if spec["class"] == "nescal_sklearn.NeSCalClassifier"
        else [name, spec]
        for name, spec in own["params"]["estimators"]
    ]
    v10 = {**own, "name": "ce_own_v10", "params": {**own["params"], "estimators": networks}}
    assert methods["ce_own_v10"] == v10
    same = ("datasets", "confirm_seeds", "search_seeds", "splits", "budget", "recipe", "selection")
    assert {k: ownval[k] for k in same} == {k: folds[k] for k in same}
