"""The runner trusts no file it did not write: the proofs of concept of the reliability
review (S1, S2, S4, S5 of ``reliability-ed7ab4a.md``) as tests that now fail to escape.

* S4: a dataset name from a manifest (or a results folder's ``config.json``) never
  becomes a path outside the output folder;
* S5: symbolic links planted in an output folder are refused or replaced, never written
  through (``.lock``, ``report.md``, ``figures/*``, ``records/corrupt``, a record);
* S1: ``validate`` imports nothing outside the lab's own packages;
* S2: a pickle planted in a config-named OpenML cache is never loaded, and ``--offline``
  refuses a task that is not cached;

and those of ``reliability-8e13b82.md``: ``run`` never writes into a folder of someone
else's files (X08); ``validate`` imports nothing named in grids, nor a trusted package
shadowed by a local folder (Z03, Z05-Z08).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nescal_bench import (
    ConfigError,
    RunError,
    load_config,
    run_benchmark,
    validate_config,
    write_report,
)
from nescal_bench.cli import main

ROOT = Path(__file__).resolve().parents[1]
NAME = (
    "expected a name of letters, digits and '_', '.', '@', '+', '-' that does not start with "
    "'.', '@', '+' or '-', got "
)
TINY = {
    "datasets": [{"sklearn": "iris"}],
    "methods": [{"name": "lr", "estimator": "sklearn.linear_model.LogisticRegression"}],
    "calibrators": ["temperature"],
    "confirm_seeds": [0],
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished results folder (one fit), copied by each test that plants something."""
    folder = tmp_path_factory.mktemp("finished") / "results"
    run_benchmark(validate_config({**TINY, "output": str(folder)}), progress=False)
    return folder


# --------------------------------------------------------------------------- S4
def test_a_manifest_name_never_becomes_a_path(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "d.parquet").write_bytes(b"")
    manifest = [
        {
            "name": "../../../escaped/pwned",
            "file": "d.parquet",
            "n_rows": 8,
            "n_features": 2,
            "n_classes": 2,
        }
    ]
    (data / "manifest.json").write_text(json.dumps(manifest))
    config = {
        **TINY,
        "datasets": [{"local": "../../../escaped/pwned"}],
        "data_dir": str(data),
        "output": str(tmp_path / "out"),
    }
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    assert str(info.value) == f'datasets[0].local: {NAME}"../../../escaped/pwned"'


def test_report_on_a_crafted_results_folder_writes_nothing_outside_it(finished, tmp_path):
    folder = tmp_path / "crafted" / "results"
    shutil.copytree(finished, folder)
    saved = json.loads((folder / "config.json").read_text())
    saved["datasets"] = [{"local": "../../escaped/pwned"}]
    (folder / "config.json").write_text(json.dumps(saved))
    with pytest.raises(RunError) as info:
        write_report(folder)
    assert str(info.value) == (
        f'{folder / "config.json"}: datasets[0].local: {NAME}"../../escaped/pwned"; rerun its config'
    )
    assert not (tmp_path / "crafted" / "escaped").exists() and not (tmp_path / "escaped").exists()


def test_method_and_condition_names_are_checked_too():
    for key, entry, path in (
        ("methods", {**TINY["methods"][0], "name": "../lr"}, "methods[0].name"),
        ("conditions", {"kind": "scaled_rows", "name": "a/b"}, "conditions[0].name"),
    ):
        with pytest.raises(ConfigError) as info:
            validate_config({**TINY, key: [entry]}, check_files=False)
        assert str(info.value) == f'{path}: {NAME}"{entry["name"]}"'


# --------------------------------------------------------------------------- S5
def test_a_symlinked_lock_is_refused(finished, tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(finished, folder)
    victim = tmp_path / "victim_lock.txt"
    victim.write_text("precious")
    (folder / ".lock").unlink(missing_ok=True)
    (folder / ".lock").symlink_to(victim)
    config = validate_config({**TINY, "output": str(folder)})
    with pytest.raises(RunError) as info:
        run_benchmark(config, resume=True, progress=False)
    assert str(info.value) == (
        f"{folder.resolve() / '.lock'} is a symbolic link; nescal-bench never writes through one: remove it"
    )
    assert victim.read_text() == "precious"


def test_symlinks_where_the_report_writes_are_replaced_not_written_through(finished, tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(finished, folder)
    victims = {name: tmp_path / f"victim_{name}" for name in ("report.md", "report.html", "png")}
    for victim in victims.values():
        victim.write_text("precious")
    for name in ("report.md", "report.html"):
        (folder / name).unlink()
        (folder / name).symlink_to(victims[name])
    (folder / "figures" / "sklearn-iris.png").unlink()
    (folder / "figures" / "sklearn-iris.png").symlink_to(victims["png"])
    assert main(["report", str(folder)]) == 0
    assert all(victim.read_text() == "precious" for victim in victims.values())
    for path in (
        folder / "report.md",
        folder / "report.html",
        folder / "figures" / "sklearn-iris.png",
    ):
        assert path.is_file() and not path.is_symlink()
    # a figures folder that is a link is replaced by a real one
    shutil.rmtree(folder / "figures")
    (tmp_path / "victim_dir").mkdir()
    (folder / "figures").symlink_to(tmp_path / "victim_dir")
    write_report(folder)
    assert not (folder / "figures").is_symlink() and not list((tmp_path / "victim_dir").iterdir())


def test_corrupt_records_never_move_through_a_symlink(finished, tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(finished, folder)
    records = folder / "records"
    (tmp_path / "victim_dir").mkdir()
    (records / "corrupt").symlink_to(tmp_path / "victim_dir")
    (tmp_path / "elsewhere.json").write_text("{}")
    (records / f"{'a' * 20}.json").symlink_to(tmp_path / "elsewhere.json")  # a planted link
    with pytest.warns(UserWarning) as caught:
        write_report(folder)
    (message,) = [str(w.message) for w in caught]
    assert message == (
        f"{records / ('a' * 20 + '.json')}: skipped, not a valid record: a symbolic link, which is "
        f"never followed; moved to {records / 'corrupt' / ('a' * 20 + '.json')}; run --resume fits it again"
    )
    assert (
        not (records / "corrupt").is_symlink()
        and (records / "corrupt" / f"{'a' * 20}.json").is_symlink()
    )
    assert (
        not list((tmp_path / "victim_dir").iterdir())
        and (tmp_path / "elsewhere.json").read_text() == "{}"
    )


# --------------------------------------------------------------------------- X08
def test_run_never_writes_into_a_folder_of_someone_elses_files(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("config.json", "report.md", "plan.json"):
        (mine / name).write_text(f"the user's own {name}\n")
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({**TINY, "output": str(mine)}))
    refusal = (
        f"nescal-bench: error: the output directory {str(mine)!r} holds files that nescal-bench "
        "did not write (config.json, plan.json, report.md); it never writes into such a folder"
    )
    advice = ": set 'output' to a new or an empty folder, or move those files away\n"
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == refusal + advice
    assert main(["run", str(path), "--resume"]) == 2
    assert capsys.readouterr().err == (
        refusal + " (--resume continues only a folder of its own)" + advice
    )
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "plan.json", "report.md"]
    for name in ("config.json", "report.md", "plan.json"):
        assert (mine / name).read_text() == f"the user's own {name}\n"


def test_the_runner_takes_new_and_empty_folders_and_continues_its_own(finished, tmp_path):
    from nescal_bench._records import RecordStore
    from nescal_bench._runner import MARK, _refuse_existing

    assert (finished / MARK).is_file()  # made by the runner, marked
    empty = tmp_path / "empty"
    empty.mkdir()
    run_benchmark(validate_config({**TINY, "output": str(empty)}), progress=False, report=False)
    assert (empty / MARK).is_file()
    # a folder of an older nescal-bench, without the mark: config.json, plan.json, records/
    old = tmp_path / "old"
    shutil.copytree(finished, old)
    (old / MARK).unlink()
    config = validate_config({**TINY, "output": str(old)})
    summary = run_benchmark(config, resume=True, progress=False, report=False)
    assert (summary.n_skipped, summary.n_finished) == (1, 0) and not (old / MARK).exists()
    for folder in sorted((ROOT / "benchmarks" / "results").iterdir()):  # the committed ones
        _refuse_existing(RecordStore(folder), folder, resume=True)


# --------------------------------------------------------------------------- S1
EVIL = """import pathlib
pathlib.Path(__file__).with_name("PWNED").write_text("imported")
from sklearn.linear_model import LogisticRegression as Evil
import torch
class Net(torch.nn.Module):
    pass
"""


@pytest.mark.parametrize("how", ["module", "pythonpath"])
def test_validate_imports_no_module_a_config_names(tmp_path, how):
    (tmp_path / "evil_mod.py").write_text(EVIL)
    config = {
        **TINY,
        "recipe": "2026-12-04",
        "output": str(tmp_path / "out"),
        "methods": [
            {"name": "evil", "estimator": "evil_mod.Evil"},
            {"name": "zen", "estimator": "this.X"},
            {"name": "net", "loss": "ce", "params": {"module": "evil_mod.Net", "max_epochs": 1}},
        ],
    }
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT), str(tmp_path)] * (how == "pythonpath") or [str(ROOT)]
        ),
    }
    result = subprocess.run(
        [sys.executable, "-m", "nescal_bench.cli", "validate", "cfg.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "cfg.json: valid (1 datasets, 3 methods, 3 grid points, 1 calibrators, 0 conditions)\n"
        "methods[0]: 'evil_mod.Evil' is not imported by validate; run imports it (a config is code)\n"
        "methods[1]: 'this.X' is not imported by validate; run imports it (a config is code)\n"
        "methods[2]: 'evil_mod.Net' is not imported by validate; run imports it (a config is code)\n"
    )  # (the stdlib's `this` would have printed the Zen of Python)
    assert not (tmp_path / "PWNED").exists()


VOTING = "sklearn.ensemble.VotingClassifier"


@pytest.mark.parametrize("how", ["module", "pythonpath"])
def test_validate_imports_nothing_from_grids_nor_a_shadowed_trusted_package(tmp_path, how):
    """Z03, Z05-Z08 of reliability-8e13b82: import paths in grid values and in members nested
    in grid values, and a local folder named like a trusted package (pytabkit): each is
    listed, and left to run."""
    (tmp_path / "evil_mod.py").write_text(EVIL)
    (tmp_path / "pytabkit").mkdir()  # first on sys.path under python -m, before site-packages
    (tmp_path / "pytabkit" / "__init__.py").write_text(EVIL.replace("Evil", "X"))
    members = [[["a", {"class": "this.X"}]]], [[["a", {"class": "evil_mod.Evil"}]]]
    methods = [
        {"name": "z03", "loss": "ce", "grid": {"module": ["this.X"]}},
        {"name": "z05", "estimator": VOTING, "grid": {"estimators": members[0]}},
        {"name": "z06", "loss": "ce", "grid": {"module": ["evil_mod.Net"]}},
        {"name": "z07", "estimator": VOTING, "grid": {"estimators": members[1]}},
        {"name": "z08", "estimator": "pytabkit.X"},
    ]
    config = {**TINY, "recipe": "2026-12-04", "output": str(tmp_path / "out"), "methods": methods}
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    path = [str(ROOT), str(tmp_path)] if how == "pythonpath" else [str(ROOT)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    result = subprocess.run(
        [sys.executable, "-m", "nescal_bench.cli", "validate", "cfg.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    deferred = ["this.X", "this.X", "evil_mod.Net", "evil_mod.Evil", "pytabkit.X"]
    assert result.stdout == "".join(
        [
            "cfg.json: valid (1 datasets, 5 methods, 5 grid points, 1 calibrators, 0 conditions)\n",
            *(
                f"methods[{i}]: {ref!r} is not imported by validate; run imports it (a config is "
                "code)\n"
                for i, ref in enumerate(deferred)
            ),
        ]
    )  # (the stdlib's `this` would have printed the Zen of Python)
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "pytabkit" / "PWNED").exists()


# --------------------------------------------------------------------------- S2
SHARED_CACHE = ROOT.parent / "shared" / "openml_cache"
TEST_SERVER = "https://test.openml.org/api/v1/xml"


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('code from a planted pickle ran')",))


@pytest.fixture
def cache(tmp_path) -> Path:
    pytest.importorskip("openml")
    if not SHARED_CACHE.is_dir():
        pytest.skip(f"no OpenML cache at {SHARED_CACHE}")
    root = tmp_path / "openml_cache"
    shutil.copytree(SHARED_CACHE, root)
    return root


def test_a_planted_pickle_in_a_config_named_openml_cache_never_runs(cache, tmp_path):
    from nescal_bench._config import OpenMLSettings
    from nescal_bench._openml import load_openml_task

    marker = tmp_path / "PWNED_openml_pickle"
    test = cache / "org" / "openml" / "test"
    for path in (
        test / "tasks" / "1882" / "datasplits.pkl.py3",
        test / "datasets" / "2" / "dataset.pkl.py3",
        test / "datasets" / "2" / "features.xml.pkl",
    ):
        path.write_bytes(pickle.dumps(_Payload(marker)))
    task = load_openml_task(
        1882, OpenMLSettings(cache_dir=str(cache), server=TEST_SERVER, n_retries=1)
    )
    assert task.X.shape == (898, 38)  # parsed from the ARFF files, not from the pickles
    assert not marker.exists()
    assert not list(cache.rglob("*.pkl*")) or all(
        p.read_bytes() == pickle.dumps(_Payload(marker)) for p in cache.rglob("*.pkl*")
    )  # untouched


def test_offline_refuses_a_task_that_is_not_cached(cache, tmp_path, capsys):
    config = {
        **TINY,
        "output": str(tmp_path / "out"),
        "datasets": [{"openml_task": 1882}, {"openml_task": 31}],
        "openml": {"cache_dir": str(cache), "server": TEST_SERVER, "n_retries": 1},
    }
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    missing = cache / "org" / "openml" / "test" / "tasks" / "31" / "task.xml"
    for extra in (["--dry-run"], []):
        assert main(["run", str(tmp_path / "cfg.json"), "--offline", *extra]) == 2
        assert capsys.readouterr().err == (
            f"nescal-bench: error: OpenML task 31 is not in the OpenML cache directory "
            f"'{cache / 'org' / 'openml' / 'test'}' ({missing} is missing), and --offline downloads nothing\n"
        )
    assert not (tmp_path / "out").exists()
    config["datasets"] = [{"openml_task": 1882}]  # cached: it runs offline
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    assert (
        run_benchmark(load_config(tmp_path / "cfg.json"), offline=True, progress=False).n_finished
        == 1
    )
