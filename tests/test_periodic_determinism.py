"""Fits across thread counts (issue 34; the promise is in ``docs/nescal.md``, "Threads").

Intel MKL, which torch multiplies with on x86, picks a matrix product's kernel and its
summation order by CPU and by thread count. With MKL's strict reproducibility on
(``MKL_CBWR=AUTO,STRICT``, which ``tests/conftest.py`` sets before torch loads), fits at
``n_threads=1`` and ``2`` are bit-identical; without it they agree to float32 round-off,
checked in a subprocess that runs without the variable. ``numeric_embedding="periodic"``
is the sensitive case: the one that differed on an AVX-512 Xeon with MKL's default kernel.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from nescal_sklearn import NeSCalClassifier, NeSCalLoss
from nescal_sklearn.nn import TabularMLP

ROOT = Path(__file__).resolve().parents[1]

#: The fits compared: the numeric embeddings, packed members, the NeSCal penalty.
CASES = {
    "periodic": {"loss": "ce", "module_kwargs": {"numeric_embedding": "periodic"}},
    "pbld": {"loss": "ce", "module_kwargs": {"numeric_embedding": "pbld"}},
    "None": {"loss": "ce"},
    "members": {"loss": "ce", "module_kwargs": {"n_members": 3}},
    "nescal": {"loss": NeSCalLoss(warmup=1)},
}
ROWS = (1, 5, 7, 11, 15, 64, 300)

#: Without strict reproducibility a product at 2 threads can differ from the same
#: product at 1 thread by a few float32 ulps (eps = 1.2e-7, relative), and training
#: compounds it. Measured on an AVX-512/AMX Xeon (MKL 2024.2) over CASES and ROWS, with
#: MKL's default, AVX2 and AVX512 kernels: at most 2.6e-8 in probability after these
#: 3-epoch fits (AVX2, members; periodic 2.0e-8 with every kernel), 5.8e-9 on
#: predictions. 1e-6, about 8 float32 eps at p = 1, leaves a 40x margin and stays far
#: below what a real difference between fits moves (another seed: 1e-2 and more).
ATOL_WITHOUT_CNR = 1e-6


def _mkl_compatible_path() -> bool:
    """Whether MKL runs its compatible code path: the one it takes on CPUs it does not
    recognise (non-Intel ones, as the AMD EPYC of 2026-12-07), read from MKL itself."""
    import ctypes

    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        torch.ones(8, 8) @ torch.ones(8, 8)  # MKL picks its branch on the first product
        return lib.mkl_serv_cbwr_get_auto_branch() == 2  # MKL_CBWR_COMPATIBLE
    except (OSError, AttributeError):  # no MKL in this torch: not MKL's promise either
        return True


#: Bit-identity across thread counts is promised under MKL_CBWR=AUTO,STRICT on CPUs whose
#: own MKL kernels run (Intel's). On an AMD EPYC (AVX2; MKL's compatible path) fits at 1
#: and 2 threads differed by up to 9.3e-9 in probability even under it: round-off, which
#: the tolerance test below covers on every CPU.
strict_cnr = pytest.mark.skipif(
    "STRICT" not in os.environ.get("MKL_CBWR", "").upper() or _mkl_compatible_path(),
    reason="bit-identity across thread counts is promised under MKL_CBWR=AUTO,STRICT, on "
    "CPUs where MKL runs its own kernels, only",
)


def digits():
    X, y = load_digits(return_X_y=True)
    return StandardScaler().fit_transform(X[:300]), y[:300]


def fit_probas(case: str, X: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """predict_proba on X of the same 3-epoch fit at n_threads=1 and at 2."""
    probas = []
    for n_threads in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a short warm-up, a thin graph
            clf = NeSCalClassifier(
                hidden_sizes=(16,), max_epochs=3, random_state=0, n_threads=n_threads
            )
            clf.set_params(**CASES[case]).fit(X, y)
        probas.append(clf.predict_proba(X))
    return probas


def predict_probas(X: np.ndarray, y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """predict_proba of one fit on the first rows of X, at n_threads=1 and at 2."""
    clf = NeSCalClassifier("ce", hidden_sizes=(64, 64), max_epochs=2, random_state=0).fit(X, y)
    return [
        (
            clf.set_params(n_threads=1).predict_proba(X[:rows]),
            clf.set_params(n_threads=2).predict_proba(X[:rows]),
        )
        for rows in ROWS
    ]


@pytest.mark.determinism
@strict_cnr
@pytest.mark.parametrize("case", list(CASES))
def test_fit_is_identical_across_thread_counts(case):
    one, two = fit_probas(case, *digits())
    np.testing.assert_array_equal(one, two)


@pytest.mark.determinism
@strict_cnr
def test_predictions_are_identical_across_thread_counts():
    for one, two in predict_probas(*digits()):
        np.testing.assert_array_equal(one, two)


@pytest.mark.determinism
def test_without_strict_reproducibility_fits_agree_to_float32_round_off():
    env = {name: value for name, value in os.environ.items() if name != "MKL_CBWR"}
    code = f"import runpy; runpy.run_path({str(Path(__file__))!r}, run_name='__main__')"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    drift = json.loads(result.stdout.splitlines()[-1])
    assert set(drift) == {*CASES, "predictions"}
    assert max(drift.values()) <= ATOL_WITHOUT_CNR, drift


def test_hooks_of_the_output_layer_see_each_call_once():
    # NeSCal reads the penultimate representation with a hook on the output layer.
    module = TabularMLP(5, 3, hidden_sizes=(8,))
    seen = []
    output_layer = module.get_submodule(module.embedding_layer_name)
    output_layer.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    module(torch.randn(40, 5)).sum().backward()
    assert len(seen) == 1 and seen[0].shape == (40, 8) and seen[0].grad_fn is not None


@pytest.mark.determinism
def test_network_pickles_and_keeps_its_parameter_names():
    module = TabularMLP(5, 3, hidden_sizes=(8,), numeric_embedding="periodic").eval()
    restored = pickle.loads(pickle.dumps(module))
    X = torch.randn(4, 5)
    torch.testing.assert_close(restored(X), module(X), rtol=0, atol=0)  # same code path twice
    assert "layers.3.weight" in dict(module.named_parameters())


if __name__ == "__main__":
    # Run by the test above, in a process without MKL_CBWR: the largest difference
    # between n_threads=1 and 2 of each case, and of the predictions, as one JSON line.
    X, y = digits()
    drift = {case: float(np.abs(np.subtract(*fit_probas(case, X, y))).max()) for case in CASES}
    drift["predictions"] = max(float(np.abs(a - b).max()) for a, b in predict_probas(X, y))
    print(json.dumps(drift))
