"""A seeded fit gives the same model under every joblib backend, threads included.

torch's default random generator and its thread count are process-wide, so two network
fits in two threads of one process (joblib's ``threading`` backend, a dask cluster of
threads) drew from each other's stream: at b2ed419, ``random_state=0`` fits differed by
up to 0.06 in probability between runs (review case J07). ``limit_threads`` now holds a
process-wide lock around every fit, and ``torch_threads`` the same lock around every
prediction. Bit-identity is the claim because the
same code runs on the same thread count, in the same process, in every fit compared.
"""

from __future__ import annotations

import threading
from unittest import mock

import numpy as np
import pytest
import torch
from joblib import cpu_count, parallel_backend
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_info

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.ensemble import CrossFitClassifier
from nescal_sklearn.estimator import _threads

X, Y = make_classification(300, 4, n_informative=3, n_redundant=0, random_state=1)


def net(seed: int) -> NeSCalClassifier:
    return NeSCalClassifier(loss="ce", max_epochs=5, random_state=seed)


@pytest.mark.determinism
def test_network_fits_in_concurrent_threads_equal_the_sequential_fits():
    sequential = [net(seed).fit(X, Y).predict_proba(X) for seed in range(2)]
    threaded: list = [None, None]

    def fit(seed: int) -> None:
        threaded[seed] = net(seed).fit(X, Y).predict_proba(X)

    threads = [threading.Thread(target=fit, args=(seed,)) for seed in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for seed in range(2):
        np.testing.assert_array_equal(threaded[seed], sequential[seed])


@pytest.mark.determinism
def test_the_threading_backend_gives_the_sequential_ensemble():
    members = [("nescal", NeSCalClassifier(max_epochs=5, random_state=0))]
    members[0][1].set_params(loss__warmup=2)
    model = CrossFitClassifier(members, cv=4, random_state=0, n_jobs=2)
    sequential = model.set_params(n_jobs=None).fit(X, Y).oof_proba_
    with parallel_backend("threading", n_jobs=2):
        threaded = model.set_params(n_jobs=2).fit(X, Y).oof_proba_
    np.testing.assert_array_equal(threaded, sequential)


def test_prediction_sets_torch_threads_alone_and_restores_them():
    """A forward pass needs torch's threads only: prediction never scans the process's
    libraries through threadpoolctl (3 to 30 ms a call), and gives the same
    probabilities as a forward pass under every pool's limit."""
    model = NeSCalClassifier(loss="ce", max_epochs=2, random_state=0, n_threads=1).fit(X, Y)
    before = torch.get_num_threads()
    with _threads.limit_threads(1):
        expected = model.predict_proba(X)
    scan = mock.patch.object(_threads, "threadpool_limits", side_effect=AssertionError("scan"))
    with scan:
        got = model.predict_proba(X)
    np.testing.assert_array_equal(got, expected)
    assert torch.get_num_threads() == before


class _OpenMPRecorder(LogisticRegression):
    """Records the OpenMP thread count its ``fit`` runs under (gradient boosting's pool)."""

    def fit(self, X, y, sample_weight=None):
        seen = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp"]
        OPENMP_THREADS.extend(seen)
        return super().fit(X, y, sample_weight)


OPENMP_THREADS: list[int] = []


def test_parallel_member_fits_in_threads_share_the_cores():
    """Two member fits at a time in threads of one process: each fit's OpenMP pool runs
    cpu_count() // 2 threads, as joblib's process workers do, instead of every core each
    (two such fits on 2 cores then run four threads on two cores)."""
    OPENMP_THREADS.clear()
    model = CrossFitClassifier([("lr", _OpenMPRecorder())], cv=4, random_state=0, n_jobs=2)
    with parallel_backend("threading", n_jobs=2):
        model.fit(X, Y)
    assert len(OPENMP_THREADS) >= 4  # the four folds' fits, each with its OpenMP pools
    assert max(OPENMP_THREADS) == max(1, cpu_count() // 2)
