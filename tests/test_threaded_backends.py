"""A seeded fit gives the same model under every joblib backend, threads included.

torch's default random generator and its thread count are process-wide, so two network
fits in two threads of one process (joblib's ``threading`` backend, a dask cluster of
threads) drew from each other's stream: at b2ed419, ``random_state=0`` fits differed by
up to 0.06 in probability between runs (review case J07). ``limit_threads`` now holds a
process-wide lock around every fit and prediction. Bit-identity is the claim because the
same code runs on the same thread count, in the same process, in every fit compared.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from joblib import parallel_backend
from sklearn.datasets import make_classification

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.ensemble import CrossFitClassifier

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
