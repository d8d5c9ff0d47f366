"""OpenML tasks through openml-python's cache, offline (a copy of ../shared/openml_cache)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from nescal_bench import (
    OpenMLUnavailableError,
    RecordStore,
    dry_run,
    load_config,
    run_benchmark,
)
from nescal_bench._config import OpenMLSettings
from nescal_bench._openml import expand_suite, load_openml_task
from nescal_bench.cli import main

openml = pytest.importorskip("openml")

SHARED_CACHE = Path(__file__).resolve().parents[2] / "shared" / "openml_cache"
TEST_SERVER = "https://test.openml.org/api/v1/xml"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    if not SHARED_CACHE.is_dir():
        pytest.skip(f"no OpenML cache at {SHARED_CACHE}")
    root = tmp_path_factory.mktemp("openml") / "openml_cache"
    shutil.copytree(SHARED_CACHE, root)
    return root


def settings(cache) -> OpenMLSettings:
    return OpenMLSettings(cache_dir=str(cache), server=TEST_SERVER, n_retries=1)


def test_task_loads_offline_with_its_own_splits(cache):
    before = openml.config.get_config_as_dict()
    task = load_openml_task(1882, settings(cache))
    assert openml.config.get_config_as_dict() == before  # settings restored
    assert task.dataset_name == "anneal" and task.X.shape == (898, 38)
    assert (task.n_repeats, task.n_folds) == (10, 10)
    train, test = task.folds[(0, 0)]
    assert (len(train), len(test)) == (808, 90)
    assert task.fold_of_seed(13) == (1, 3)


def test_uncached_task_names_the_task_and_the_cache(cache):
    expected = (
        f"OpenML task 31 is not in the OpenML cache directory "
        f"'{cache / 'org' / 'openml' / 'test'}' and could not be downloaded from '{TEST_SERVER}' ("
    )
    with pytest.raises(
        OpenMLUnavailableError, match=f"^{re.escape(expected)}.*Connect to the network"
    ):
        load_openml_task(31, settings(cache))
    with pytest.raises(OpenMLUnavailableError, match=r"^OpenML suite 99 could not be fetched from"):
        expand_suite(99, settings(cache))


def write(tmp_path, cache, datasets) -> Path:
    path = tmp_path / "openml.json"
    path.write_text(
        json.dumps(
            {
                "name": "openml",
                "output": str(tmp_path / "results"),
                "openml": {"cache_dir": str(cache), "server": TEST_SERVER, "n_retries": 1},
                "datasets": datasets,
                "recipe": "2026-12-04",
                "methods": [{"loss": "ce"}],
                "calibrators": ["temperature"],
                "confirm_seeds": [0, 11],
                "budget": {"max_epochs": 2, "hidden_sizes": [16]},
            }
        )
    )
    return path


@pytest.mark.filterwarnings("ignore:Skipping features without any observed values")
def test_run_on_a_cached_task_uses_its_folds(tmp_path, cache):
    config = load_config(write(tmp_path, cache, [{"openml_task": 1882}]))
    assert re.search(r"openml-task-1882 +898 rows +38 features +5 classes", dry_run(config))
    summary = run_benchmark(config, progress=False)
    assert summary.n_finished == 2 and not summary.failures
    records = sorted(RecordStore(config.output).load(move=False).values(), key=lambda r: r["seed"])
    assert [r["data"]["split"] for r in records] == [
        "openml task 1882 repeat 0 fold 0",
        "openml task 1882 repeat 1 fold 1",
    ]
    assert [r["data"]["n_test"] for r in records] == [90, 90]
    assert "### openml-task-1882" in (Path(config.output) / "report.md").read_text()


def test_cli_error_for_an_uncached_task(tmp_path, cache, capsys):
    path = write(tmp_path, cache, [{"openml_task": 1882}, {"openml_task": 31}])
    for extra in ([], ["--dry-run"]):
        assert main(["run", str(path), *extra]) == 2
        assert capsys.readouterr().err.startswith(
            "nescal-bench: error: OpenML task 31 is not in the OpenML cache directory "
            f"'{cache / 'org' / 'openml' / 'test'}'"
        )
    assert not (tmp_path / "results" / "records").exists()  # stopped before any fit
