"""The documented deep-ensemble recipe (docs/deep_ensembles.md) works as written."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.ensemble import VotingClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.preprocessing import StandardScaler

from nescal_sklearn import CalibratedTemperature, NeSCalClassifier

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical


def deep_ensemble(n_members=3, **params):
    return VotingClassifier(
        [(f"seed{s}", NeSCalClassifier(random_state=s, **params)) for s in range(n_members)],
        voting="soft",
    )


@pytest.mark.determinism
def test_deep_ensemble_averages_members_and_calibrates():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    params = dict(loss="ce", hidden_sizes=(16,), max_epochs=5, lr=1e-2, batch_size=32)
    ensemble = deep_ensemble(**params).fit(X, y)
    members = [est.predict_proba(X) for est in ensemble.estimators_]
    np.testing.assert_allclose(ensemble.predict_proba(X), np.mean(members, axis=0), rtol=1e-12)
    assert not np.allclose(members[0], members[1])  # seeds differ
    calibrated = CalibratedTemperature(FrozenEstimator(ensemble)).fit(X, y)
    assert calibrated.predict_proba(X).shape == (150, 3)
    restored = pickle.loads(pickle.dumps(ensemble))
    np.testing.assert_array_equal(restored.predict_proba(X), ensemble.predict_proba(X))
