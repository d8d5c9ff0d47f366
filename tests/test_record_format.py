"""Record compatibility: the keys and the records of format 3 outlive the move of the lab
from ``nescal_sklearn.benchmark`` to ``nescal_bench``.

``data/format3_config.json`` is a small fixed config whose keys were computed by the
runner of ``nescal_sklearn.benchmark`` (branch point of ``nescal_bench``);
``data/format3/`` is a results folder that runner wrote (config, plan, 5 records).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from nescal_bench import (
    BenchmarkWarning,
    RecordStore,
    load_results,
    plan_run,
    run_benchmark,
    validate_config,
    write_report,
)
from nescal_bench._records import RECORD_FORMAT

DATA = Path(__file__).resolve().parent / "data"

#: (dataset, method, grid point, seed) -> the key the format-3 runner computed.
PINNED = {
    ("sklearn-iris", "ls", '{"epsilon": 0.05}', 0): "bdc7dd801688af3b9906",
    ("sklearn-iris", "ls", '{"epsilon": 0.1}', 0): "a5e4150931bde9b5d974",
    ("sklearn-wine-imbalance-0.5", "ls", '{"epsilon": 0.05}', 0): "0c9f7338d0712cdd0c70",
    ("sklearn-iris", "ce", "{}", 1): "ea4dfee00e03ce9012d5",
    ("sklearn-iris", "logreg", "{}", 2): "d8081ff47ccca2f901d1",
    ("sklearn-wine-imbalance-0.5", "ce", "{}", 2): "83736ab92408ac1558f2",
    ("sklearn-wine-imbalance-0.5", "ls", '{"epsilon": 0.1}', 2): "f899bd6d6073cc2c9c08",
}


def test_the_keys_of_a_fixed_config_are_those_of_record_format_3():
    assert RECORD_FORMAT == 3
    config = validate_config(
        json.loads((DATA / "format3_config.json").read_text()), check_files=False
    )
    index = plan_run(config).index.entries
    assert len(index) == 20
    for (dataset, method, point, seed), key in PINNED.items():
        assert index[(dataset, method, point, seed)] == key


@pytest.fixture
def old_folder(tmp_path) -> Path:
    folder = tmp_path / "format3"
    shutil.copytree(DATA / "format3", folder)
    return folder


def test_records_written_by_the_format_3_runner_are_read(old_folder, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", BenchmarkWarning)  # none is corrupt
        records = RecordStore(old_folder).load(move=False)
        results = load_results(old_folder)
    assert sorted(records) == sorted(p.stem for p in (old_folder / "records").glob("*.json"))
    assert len(records) == 5 and results.stale == [] and results.failures == []
    assert {m: len(r) for m, r in results.reported()["sklearn-iris"].items()} == {
        "ce": 1,
        "ls": 1,
        "logreg": 1,
    }
    assert write_report(old_folder)["markdown"].read_text().count("sklearn-iris") > 1

    # the same config, run again into that folder, finds every fit done (same keys)
    data = json.loads((old_folder / "run.json").read_text())
    config = validate_config({**data, "output": str(old_folder)})
    summary = run_benchmark(config, resume=True, progress=False, report=False)
    assert (summary.n_finished, summary.n_skipped, summary.failures, summary.stale) == (
        0,
        5,
        [],
        [],
    )
