"""The same run on a dask.distributed cluster (through joblib's dask backend), on loopback."""

from __future__ import annotations

import io
import json

import pytest

from nescal_sklearn.benchmark import RecordStore, load_config, run_benchmark

distributed = pytest.importorskip("distributed")

CONFIG = {
    "name": "dask",
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
    "recipe": "2026-12-04",
    "methods": [{"loss": "ce"}, {"loss": "label_smoothing", "grid": {"epsilon": [0.05, 0.1]}}],
    "calibrators": ["temperature"],
    "search_seeds": [0],
    "confirm_seeds": [1],
    "budget": {"max_epochs": 2, "hidden_sizes": [16]},
}


def test_dask_scheduler_gives_the_records_of_a_local_run(tmp_path):
    results = {}
    for mode in ("local", "dask"):
        path = tmp_path / f"{mode}.json"
        path.write_text(json.dumps({**CONFIG, "output": str(tmp_path / mode)}))
        config = load_config(path)
        if mode == "local":
            run_benchmark(config, progress=False, report=False)
        else:
            with distributed.LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                processes=False,
                host="127.0.0.1",
                protocol="tcp://",
                dashboard_address=None,
            ) as cluster:
                assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
                stream = io.StringIO()
                summary = run_benchmark(
                    config, scheduler=cluster.scheduler_address, stream=stream, report=False
                )
                assert summary.n_finished == 2 * (2 + 2) and not summary.failures
                assert "dask: 8 fits finished" in stream.getvalue()
        store = RecordStore(config.output)
        results[mode] = {
            key: {k: v for k, v in store.read(key).items() if k != "run"} for key in store.keys()
        }
    assert len(results["dask"]) == 8
    assert results["dask"] == results["local"]
