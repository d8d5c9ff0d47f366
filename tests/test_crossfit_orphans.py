"""A cross-fitted fit's worker processes end with the process that fits: killed while its
members fit in loky's workers, none of them goes on fitting (nescal_sklearn._compat.orphans)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from nescal_sklearn._compat.orphans import exit_with_parent

psutil = pytest.importorskip("psutil")

#: Fits two members that each write their process id, then sleep for a minute.
SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    import numpy as np
    from sklearn.base import BaseEstimator, ClassifierMixin

    from nescal_sklearn.ensemble import CrossFitClassifier


    class Sleeper(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            Path(sys.argv[1], str(os.getpid())).touch()
            time.sleep(60)
            self.classes_ = np.unique(y)
            return self

        def predict_proba(self, X):
            return np.full((len(X), 2), 0.5)


    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.arange(40) % 2
    members = [("a", Sleeper()), ("b", Sleeper())]
    CrossFitClassifier(members, cv=2, n_jobs=2).fit(X, y)
    """
)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_killed_fit_leaves_no_worker_fitting(tmp_path):
    script, pids = tmp_path / "fit.py", tmp_path / "pids"
    script.write_text(SCRIPT)
    pids.mkdir()
    process = subprocess.Popen([sys.executable, str(script), str(pids)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(list(pids.iterdir())) < 2:
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "the members did not start within 120 s"
            time.sleep(0.1)
        workers = [int(p.name) for p in pids.iterdir()]
        assert process.pid not in workers and all(map(_alive, workers))
        os.kill(process.pid, signal.SIGKILL)  # the fitting process only
    finally:
        process.wait(timeout=30)
        process.stderr.close()
    start = time.monotonic()
    while any(map(_alive, workers)) and time.monotonic() - start < 5.0:
        time.sleep(0.05)
    assert not any(map(_alive, workers)), "a worker went on fitting after its parent died"


def test_the_fitting_process_itself_and_a_process_not_its_child_start_no_watch():
    assert exit_with_parent(os.getpid()) is False  # one job: the fit runs here
    assert exit_with_parent(os.getppid() + 1_000_000) is False  # a dask worker's case
