"""The benchmark runner end to end: dry run, records, reproducibility, resume, report."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from _benchmark_helpers import ColdStartLogistic, deterministic, set_default, table_rows
from scipy.stats import wilcoxon

import nescal_sklearn
from nescal_bench import (
    RecordStore,
    RunError,
    load_config,
    load_results,
    plan_run,
    run_benchmark,
    validate_config,
    write_report,
)
from nescal_bench.cli import main

TINY = {
    "name": "tiny",
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}, {"sklearn": "breast_cancer"}],
    "recipe": "2026-12-04",
    "methods": [
        {"loss": "ce"},
        {"loss": "nescal", "params": {"n_neighbors": 5}, "grid": {"weight": [0.5, 1.0]}},
        {
            "name": "nescal_random",
            "loss": "nescal",
            "params": {"n_neighbors": 5, "graph": "random"},
        },
        {
            "name": "hgb",
            "estimator": "sklearn.ensemble.HistGradientBoostingClassifier",
            "params": {"max_iter": 10},
        },
    ],
    "calibrators": ["temperature"],
    "search_seeds": [0],
    "confirm_seeds": [1, 2],
    "budget": {"max_epochs": 2, "hidden_sizes": [16]},
}


def write_config(directory: Path, data: dict, name: str = "tiny.json") -> Path:
    data = {**data, "output": str(directory / "results")}
    path = directory / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    config = load_config(write_config(directory, TINY))
    stream = io.StringIO()
    summary = run_benchmark(config, stream=stream)
    return config, summary, stream.getvalue()


def _no_fits(monkeypatch):
    """Make every way of fitting raise, so that a test proves nothing is trained."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    import nescal_bench._fit
    from nescal_sklearn import NeSCalClassifier

    def refuse(*args, **kwargs):
        raise AssertionError("a dry run fitted something")

    monkeypatch.setattr(NeSCalClassifier, "fit", refuse)
    monkeypatch.setattr(HistGradientBoostingClassifier, "fit", refuse)
    monkeypatch.setattr(nescal_bench._fit, "execute_fit", refuse)


def test_dry_run_prints_the_plan_and_fits_nothing(tmp_path, capsys, monkeypatch):
    _no_fits(monkeypatch)
    path = write_config(tmp_path, TINY)
    assert main(["run", str(path), "--dry-run", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Plan of 'tiny' -> {tmp_path / 'results'}\ndatasets (3):\n")
    assert re.search(r"sklearn-iris +150 rows +4 features +3 classes", out)
    assert re.search(
        r"nescal +loss=nescal \{\"n_neighbors\": 5\}; 2 grid points: weight in \[0.5, 1.0\]", out
    )
    assert "hgb                      sklearn.ensemble.HistGradientBoostingClassifier" in out
    assert "calibrators: temperature\nconditions: none\n" in out
    assert (
        "seeds: search [0], confirm [1, 2]; grid point chosen on mean validation NLL (raw)\n" in out
    )
    assert (
        "fits: 3 datasets x (2 searched grid points x 1 search seeds + 4 methods x 2 confirm "
        "seeds) = 30 fits, 30 distinct" in out
    )
    assert out.endswith(
        "estimated time: none (a dry run trains nothing, and there are no records to measure "
        "from: pass --estimate-from RESULTS_DIR of an earlier run of similar fits, or --resume "
        "with an output folder that holds records)\n"
    )
    assert not (tmp_path / "results").exists()


def test_dry_run_estimates_from_the_fit_times_of_records(tiny_run, tmp_path, capsys, monkeypatch):
    config, _, _ = tiny_run
    _no_fits(monkeypatch)
    store = RecordStore(config.output)
    records = list(store.load(move=False).values())
    # one more dataset than the records have: its fits are estimated from their method's
    # seconds per training row and epoch (hgb has no epochs: one per fit)
    bigger = {**TINY, "datasets": [*TINY["datasets"], {"sklearn": "digits"}]}
    path = write_config(tmp_path, bigger)
    assert main(["run", str(path), "--dry-run", "--estimate-from", config.output]) == 0
    line = capsys.readouterr().out.splitlines()[-1]

    def seconds(r):
        return r["run"]["fit_seconds"] + r["run"]["calibration_seconds"]

    by_pair, rate, epochs = {}, {}, {}
    for r in records:
        by_pair.setdefault((r["dataset"], r["method"]), []).append(seconds(r))
        n_epochs = r["fit"].get("n_epochs") or r["fit"].get("n_iter") or 1
        rate.setdefault(r["method"], []).append(seconds(r) / (r["data"]["n_train"] * n_epochs))
        epochs.setdefault(r["method"], []).append(n_epochs)
    plan = plan_run(load_config(path))
    distinct = {t.key: t for t in plan.search + plan.confirm_fixed}
    for by_point in plan.confirm_candidates.values():
        distinct.update({t.key: t for t in next(iter(by_point.values()))})
    total = 0.0
    for task in distinct.values():
        pair = (task.dataset.name, task.method.name)
        if pair in by_pair:
            total += np.mean(by_pair[pair])
        else:
            n_train = 1797 * 0.6  # digits
            total += np.mean(rate[pair[1]]) * n_train * np.mean(epochs[pair[1]])
    shown = int(round(total))
    expected = f"{shown} s" if shown < 60 else f"{shown // 60} min {shown % 60:02d} s"
    assert line == (
        f"estimated time: {expected} with 1 job ({expected} of fitting for 40 fits, from the "
        f"fit times of 30 records in {config.output}: 30 fits by the records of their dataset "
        "and method, 10 by their method's seconds per training row and epoch)"
    )


def test_dry_run_with_resume_counts_the_recorded_fits(tiny_run, capsys, monkeypatch, tmp_path):
    config, _, _ = tiny_run
    _no_fits(monkeypatch)
    path = tmp_path / "again.json"
    path.write_text(json.dumps({**TINY, "output": config.output}))
    assert main(["run", str(path), "--dry-run", "--resume"]) == 0
    out = capsys.readouterr().out
    output = Path(config.output).resolve()
    assert f"resume: 30 of the planned fits are already recorded in {output}\n" in out
    assert "estimated time: 0 s with 1 job (0 s of fitting for 0 fits, from the fit times" in out


def test_end_to_end_records(tiny_run):
    config, summary, progress = tiny_run
    store = RecordStore(config.output)
    plan = plan_run(config)
    assert summary.n_finished == plan.n_fits == 30 and not summary.failures
    assert len(store.keys()) == 30
    record = store.read(sorted(store.keys())[0])
    assert set(record["test"]) == {"raw", "temperature"}
    assert set(record["test"]["raw"]) >= {"nll", "ece", "brier", "accuracy"}
    assert set(record["environment"]) >= {"nescal_sklearn", "torch", "sklearn", "numpy", "skorch"}
    assert record["run"]["fit_seconds"] > 0
    assert len(record["reliability"]["raw"]["counts"]) == 15
    assert record["conditions"] == {} and isinstance(record["fit"]["warnings"], list)
    identity = record["identity"]
    assert identity["threads"] == 1 and identity["seed"] == record["seed"]
    assert "nescal_sklearn" not in identity  # the version is recorded, not keyed
    assert record["environment"]["nescal_sklearn"] == nescal_sklearn.__version__
    for key in store.keys():
        assert store.read(key)["key"] == key
    # plan.json lists every fit the run may need: the gridded method's confirm fits at both
    # grid points included (30 run + 3 datasets x 2 confirm seeds at the other point)
    saved_plan = json.loads((Path(config.output) / "plan.json").read_text())
    assert len(saved_plan["fits"]) == 36 and store.keys() <= {f["key"] for f in saved_plan["fits"]}
    lines = [line for line in progress.splitlines() if line.startswith("[")]
    assert len(lines) == 30
    assert re.match(
        r"\[1/30\] sklearn-\w+ \| nescal \| weight=0.5 \| seed 0 \(search\) \| val NLL \d\.\d{4} \| "
        r"test NLL \d\.\d{4} ECE \d\.\d{4} acc \d\.\d{4} \| temperature: NLL \d\.\d{4} ECE \d\.\d{4} \| "
        r"\d+\.\d s$",
        lines[0],
    )
    assert "tiny: 30 fits finished, 0 already recorded, 0 failed" in progress
    saved = json.loads((Path(config.output) / "config.json").read_text())
    assert validate_config(saved, check_files=False).methods == config.methods


@pytest.mark.determinism
def test_same_config_and_seeds_reproduce_the_records(tiny_run, tmp_path):
    config, _, _ = tiny_run
    subset = {**TINY, "datasets": TINY["datasets"][:1], "methods": TINY["methods"][:3]}
    again = load_config(write_config(tmp_path, subset))
    run_benchmark(again, progress=False, report=False)
    first, second = RecordStore(config.output), RecordStore(again.output)
    assert second.keys() and second.keys() <= first.keys()
    for key in second.keys():
        # exact: the same fits run again at the same threads, in the same process
        assert deterministic(second.read(key)) == deterministic(first.read(key))


def test_existing_records_need_resume(tiny_run):
    config, _, _ = tiny_run
    with pytest.raises(
        RunError,
        match=re.escape(
            f"The output directory {str(Path(config.output).resolve())!r} already holds 30 records; "
            "pass --resume (resume=True) to continue that run, or set another 'output' in the config."
        ),
    ):
        run_benchmark(config, progress=False)
    summary = run_benchmark(config, resume=True, progress=False, report=False)
    assert (summary.n_finished, summary.n_skipped, summary.failures) == (0, 30, [])


def test_report_contents(tiny_run):
    config, summary, _ = tiny_run
    output = Path(config.output)
    markdown = (output / "report.md").read_text()
    for heading in (
        "# Benchmark report: tiny",
        "## Average ranks",
        "## Per-dataset results",
        "### sklearn-iris",
        "## Paired comparisons",
        "### Against `ce`",
        "### Against `nescal`",
        "## Random-graph control",
        "## Model selection",
        "## Environment",
    ):
        assert f"\n{heading}\n" in f"\n{markdown}", heading
    iris = table_rows(markdown, "### sklearn-iris")
    assert iris[0] == ["Method", "Calibration", "NLL", "ECE", "Brier", "Accuracy", "Chosen point"]
    ce_raw = next(row for row in iris if row[:2] == ["ce", "raw"])
    assert re.fullmatch(r"(\*\*)?\d\.\d{4} ± \d\.\d{4}(\*\*)?", ce_raw[2])
    nescal_raw = next(row for row in iris if row[:2] == ["nescal", "raw"])
    assert re.fullmatch(r"weight=(0\.5|1\.0)", nescal_raw[-1])
    headline = table_rows(summary.report["headline"])
    assert headline[0][:4] == ["Method", "NLL raw", "NLL +temperature", "ECE raw"]
    # the random-graph control sits right after NeSCal, in the headline and per dataset
    assert [row[0] for row in headline[1:]] == ["ce", "nescal", "nescal_random", "hgb"]
    rows = [row[0] for row in iris[1:]]
    assert rows == [
        "ce",
        "ce",
        "nescal",
        "nescal",
        "nescal_random",
        "nescal_random",
        "hgb",
        "hgb",
    ]

    # the Wilcoxon p-value of nescal vs ce (NLL, raw) is scipy's on the relative changes of the
    # per-dataset means
    store = RecordStore(output)
    means = {}
    for record in store.load(move=False).values():
        if record["seed"] in config.confirm_seeds and record["method"] in ("ce", "nescal"):
            means.setdefault((record["method"], record["dataset"]), []).append(
                record["test"]["raw"]["nll"]
            )
    datasets = [d.name for d in config.datasets]
    a = [np.mean(means[("nescal", d)]) for d in datasets]
    b = [np.mean(means[("ce", d)]) for d in datasets]
    changes = 100 * (np.array(a) - np.array(b)) / np.array(b)
    nescal_row = next(
        row for row in table_rows(markdown, "### Against `ce`") if row[:2] == ["nescal", "raw"]
    )
    assert nescal_row[2] == f"{int(np.sum(changes < 0))}/3"
    if np.any(changes != 0):
        assert nescal_row[4] == f"{wilcoxon(changes).pvalue:.3g}"

    figures = sorted(p.name for p in (output / "figures").glob("*.png"))
    assert figures == ["sklearn-breast_cancer.png", "sklearn-iris.png", "sklearn-wine.png"]
    for name in figures:
        assert (output / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![Reliability diagrams of {name[:-4]}](figures/{name})" in markdown
    page = (output / "report.html").read_text()
    assert page.count("src='data:image/png;base64,") == 3
    assert "src='figures/" not in page and "<table" in page


def test_report_command_rewrites_the_report(tiny_run, capsys):
    config, _, _ = tiny_run
    output = Path(config.output)
    (output / "report.md").unlink()
    assert main(["report", str(output)]) == 0
    out = capsys.readouterr().out
    assert table_rows(out)[0][:3] == ["Method", "NLL raw", "NLL +temperature"]
    assert (output / "report.md").is_file()
    assert main(["report", str(output / "nowhere")]) == 2


def test_failed_fits_are_reported_and_retried(tmp_path, capsys):
    failing = {
        **TINY,
        "datasets": [{"sklearn": "iris"}],
        "recipe": "2026-12-04",
        "methods": [{"loss": "ce"}, {"loss": "nescal", "params": {"n_neighbors": 500}}],
        "search_seeds": [],
        "confirm_seeds": [0],
    }
    path = write_config(tmp_path, failing)
    assert main(["run", str(path)]) == 1
    captured = capsys.readouterr()
    assert "1 fit(s) failed; see" in captured.err
    assert (
        "| nescal | no grid | seed 0 (confirm) | FAILED: ParameterError: loss__n_neighbors=500"
        in captured.err
    )
    assert len(list((tmp_path / "results" / "failures").glob("*.json"))) == 1
    assert "## Failed fits" in (tmp_path / "results" / "report.md").read_text()
    assert main(["run", str(path), "--resume"]) == 1  # retried, fails again
    assert "1 already recorded, 1 failed" in capsys.readouterr().err


SMALL = {
    "name": "small",
    "datasets": [{"sklearn": "iris"}],
    "recipe": "2026-12-04",
    "methods": [{"loss": "ce"}, {"loss": "label_smoothing"}],
    "confirm_seeds": [0, 1],
    "budget": {"max_epochs": 2, "hidden_sizes": [8]},
}


def test_record_keys_hold_what_the_config_states_its_recipe_and_threads(tmp_path, monkeypatch):
    """A library default that changes later (a loss's, the estimator's, the version) neither
    changes what a fit trains nor its key: the recipe the config names fixes the rest."""
    from nescal_sklearn import NeSCalClassifier
    from nescal_sklearn.losses import LabelSmoothingLoss

    config = load_config(write_config(tmp_path, SMALL))

    def keys(cfg):
        return [t.key for t in plan_run(cfg).confirm_fixed]

    base = keys(config)
    assert len(set(base)) == 4 and keys(config) == base  # stable
    with monkeypatch.context() as patch:  # a loss default the config does not set
        set_default(patch, LabelSmoothingLoss.__init__, "epsilon", 0.2)
        assert keys(config) == base
        task = plan_run(config).confirm_fixed[2]
        assert task.estimator.check_params()["loss"].epsilon == 0.1  # the recipe's
        assert task.identity["params"] == {
            "hidden_sizes": [8],
            "max_epochs": 2,
            "recipe": "2026-12-04",
        }
        assert task.identity["kind"] == {"loss": "label_smoothing"}
    with monkeypatch.context() as patch:  # an estimator default
        set_default(patch, NeSCalClassifier.__init__, "lr", 0.01)
        assert keys(config) == base
    with monkeypatch.context() as patch:
        patch.setattr(nescal_sklearn, "__version__", "9.9")
        assert keys(config) == base
    for changed in ({"budget": {**SMALL["budget"], "threads": 2}}, {"recipe": "2026-12-02"}):
        other = load_config(write_config(tmp_path, {**SMALL, **changed}))
        assert not set(keys(other)) & set(base), changed


def test_resumed_run_reports_records_under_another_key(tmp_path):
    config = load_config(write_config(tmp_path, SMALL))
    run_benchmark(config, progress=False, report=False)
    changed = {
        **SMALL,
        "methods": [{"loss": "ce"}, {"loss": "label_smoothing", "params": {"epsilon": 0.2}}],
    }
    config = load_config(write_config(tmp_path, changed))
    stream = io.StringIO()
    summary = run_benchmark(config, resume=True, stream=stream, report=False)
    output = Path(config.output).resolve()
    assert summary.stale == [
        f"2 records in {output} were written under another key and are ignored",
        "  2: same dataset, method, grid point and seed as a planned fit; "
        "params.loss__epsilon: (absent) -> 0.2",
    ]
    assert stream.getvalue().startswith("\n".join(summary.stale) + "\n")
    assert (summary.n_skipped, summary.n_finished) == (2, 2)  # CE reused, LS refitted
    assert len(RecordStore(output).keys()) == 6
    # the report reads the folder without the stale records, and says so
    markdown = write_report(output)["markdown"].read_text()
    assert (
        "2 records in the folder were written under another key (an earlier configuration, "
        "recipe or record format) and are ignored." in markdown
    )
    assert "(4 of 4 confirm fits recorded)" in markdown


def test_fit_warnings_go_to_the_record_not_the_console(tmp_path, capfd):
    data = {
        **SMALL,
        "recipe": "2026-12-04",
        "methods": [
            {"estimator": "sklearn.linear_model.LogisticRegression", "params": {"max_iter": 1}}
        ],
        "confirm_seeds": [0],
    }
    config = load_config(write_config(tmp_path, data))
    run_benchmark(config, progress=False, report=False)
    assert "Warning" not in capfd.readouterr().err
    (record,) = RecordStore(config.output).load(move=False).values()
    (message,) = record["fit"]["warnings"]
    assert message.startswith("ConvergenceWarning: lbfgs failed to converge")
    assert record["fit"]["n_iter"] == 1


def test_report_counts_the_fits_the_penalty_never_trained(tiny_run):
    config, _, _ = tiny_run
    results = load_results(config.output)
    statuses = {}
    for by_method in results.reported().values():
        for method, records in by_method.items():
            for record in records:
                status = record["fit"].get("penalty_status")
                if status is not None:
                    statuses.setdefault(method, []).append(status)
    markdown = (Path(config.output) / "report.md").read_text()
    assert set(statuses) == {"nescal", "nescal_random"}  # the neighbour losses only
    header, *rows = table_rows(markdown, "## Members and penalty status")
    assert header[:3] == ["method", "member", "fits"]
    rows = {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}
    for method, found in statuses.items():
        counts = {s: str(found.count(s)) for s in header[3:]}
        assert rows[method] == {"member": "–", "fits": str(len(found)), **counts}


class _ColdStart:
    """A model whose first ``predict_proba`` takes 0.3 s, the later ones no time."""

    calls = 0

    def predict_proba(self, X):
        self.calls += 1
        time.sleep(0.3 if self.calls == 1 else 0.0)
        return np.full((len(X), 2), 0.5)


def test_serving_time_is_the_fastest_of_several_calls_not_the_first():
    """The first ``predict_proba`` after a fit pays one-off costs (a cold cache, thread
    pools started); the record's ``predict_seconds`` is the fastest call."""
    from nescal_bench._fit import PREDICT_CALLS, _serving_cost

    model = _ColdStart()
    cost = _serving_cost(model, np.zeros((4, 1)))
    assert model.calls == PREDICT_CALLS > 1
    assert cost["predict_seconds"] < 0.1 and cost["model_bytes"] > 0


def test_a_process_s_first_fit_is_timed_warm(tmp_path, monkeypatch):
    """A process's first fit pays one-off costs; the runner pays them in an untimed fit on
    at most ``WARM_UP_ROWS`` training rows, so that no record of a run carries them."""
    import nescal_bench._fit

    monkeypatch.setattr(nescal_bench._fit, "_warmed", False)
    monkeypatch.setattr(nescal_bench._fit, "WARM_UP_ROWS", 50)
    monkeypatch.setattr(ColdStartLogistic, "cold", True)
    monkeypatch.setattr(ColdStartLogistic, "rows", [])
    method = {"name": "cold", "estimator": "_benchmark_helpers.ColdStartLogistic"}
    data = {**SMALL, "methods": [method], "confirm_seeds": [0, 1]}
    config = load_config(write_config(tmp_path, data))
    run_benchmark(config, progress=False, report=False)
    records = RecordStore(config.output).load(move=False).values()
    assert [r["run"]["fit_seconds"] < 0.25 for r in records] == [True, True]
    assert ColdStartLogistic.rows == [50, *(r["data"]["n_train"] for r in records)]
    assert min(ColdStartLogistic.rows[1:]) > 50
