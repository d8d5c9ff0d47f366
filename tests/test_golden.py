"""Golden fits: the same probabilities as the commit the fold-layer refactor started from.

The refactors of the fold layer, the time budget, the member refit and the skorch net
(issue 43) and the speed work after them must not change what a fit computes. Each case
below is fitted fresh and compared with the probabilities stored in
``tests/data/golden_b2ed419.npz``, written at commit b2ed419 by running this module:
``python tests/test_golden.py`` (under ``MKL_CBWR=AUTO,STRICT``, as the tests run).

The tolerance: the stored values come from one CPU and the test may run on another,
where torch's float32 products sum in another order. Drift between kernels over a few
epochs was measured at <= 2.6e-8 on probabilities (docs/nescal.md, "Threads"); 1e-5 is
400 times that, while a changed fit (another seed, another fold, another epoch) moves
probabilities by 1e-3 or more, so the test tells the two apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from _quick_models import quick_recommended
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nescal_sklearn import CalibratedTemperature, NeSCalClassifier
from nescal_sklearn.ensemble import CrossFitClassifier

GOLDEN = Path(__file__).parent / "data" / "golden_b2ed419.npz"
ATOL = 1e-5


def _net(**params):
    # the recipe of the stored fits (a newer one may draw other dropout masks)
    net = NeSCalClassifier(recipe="2026-12-04", max_epochs=5, random_state=0, **params)
    return net.set_params(loss__warmup=2) if net.loss == "nescal" else net


def _crossfit(**params):
    members = [
        ("nescal", _net()),
        ("hgb", HistGradientBoostingClassifier(early_stopping=True, max_iter=30)),
    ]
    return CrossFitClassifier(members, cv=3, random_state=0, **params)


def _cases():
    """Each case: name -> (estimator, X, y, fit keyword arguments)."""
    cancer_X, cancer_y = load_breast_cancer(return_X_y=True)
    frame, frame_y = load_breast_cancer(return_X_y=True, as_frame=True)
    iris_X, iris_y = load_iris(return_X_y=True)
    wine_X, wine_y = load_wine(return_X_y=True)
    rng = np.random.default_rng(0)
    weights = rng.uniform(0.5, 2.0, len(cancer_y))
    groups = np.arange(len(cancer_y)) // 4
    return {
        "nescal_binary": (_net(), cancer_X, cancer_y, {}),
        "nescal_multiclass": (_net(), wine_X, wine_y, {}),
        "ce_multiclass": (_net(loss="ce"), iris_X, iris_y, {}),
        "crossfit": (_crossfit(), cancer_X, cancer_y, {}),
        "crossfit_weights_groups": (
            _crossfit(prune=True),
            cancer_X,
            cancer_y,
            {"sample_weight": weights, "groups": groups},
        ),
        "crossfit_refit": (_crossfit(refit=True), wine_X, wine_y, {}),
        "recommended": (quick_recommended("2026-12-05"), frame, frame_y, {}),
        "recommended_2026_12_04": (quick_recommended("2026-12-04"), iris_X, iris_y, {}),
        "temperature_cv": (
            CalibratedTemperature(
                make_pipeline(StandardScaler(), LogisticRegression()), cv=5, random_state=0
            ),
            wine_X,
            wine_y,
            {},
        ),
    }


CASES = sorted(_cases())


def _probabilities(name: str) -> dict[str, np.ndarray]:
    model, X, y, fit_params = _cases()[name]
    model.fit(X, y, **fit_params)
    out = {f"{name}/proba": model.predict_proba(X[:40])}
    fitted = model[-1] if hasattr(model, "steps") else model
    if hasattr(fitted, "oof_proba_"):
        out[f"{name}/oof"] = fitted.oof_proba_
    return out


@pytest.mark.numerical
@pytest.mark.parametrize("name", CASES)
def test_fits_give_the_probabilities_of_b2ed419(name):
    stored = np.load(GOLDEN)
    for key, value in _probabilities(name).items():
        np.testing.assert_allclose(value, stored[key], rtol=0, atol=ATOL, err_msg=key)


if __name__ == "__main__":  # regenerate at the commit the file names, nowhere else
    import os

    assert os.environ.get("MKL_CBWR") == "AUTO,STRICT", "run with MKL_CBWR=AUTO,STRICT"
    arrays: dict[str, np.ndarray] = {}
    for case in CASES:
        arrays.update(_probabilities(case))
        print(case, file=sys.stderr)
    np.savez_compressed(GOLDEN, **arrays)
