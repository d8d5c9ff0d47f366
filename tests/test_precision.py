"""bfloat16 autocast as an option of NeSCalClassifier (issue 41), and the CPU reading that
says where it is fast."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_classification

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.estimator import _precision, bfloat16_hardware, cpu_description
from nescal_sklearn.exceptions import InvalidParameterError

torch.set_num_threads(1)

CPUINFO = """processor\t: 0
model name\t: Example CPU 9000
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_tile amx_bf16

processor\t: 1
model name\t: Another CPU
flags\t\t: fpu sse2
"""


def _data(n=400):
    return make_classification(n, 10, n_informative=6, n_classes=3, random_state=0)


def _quick(**params) -> NeSCalClassifier:
    return NeSCalClassifier("ce", max_epochs=4, random_state=0, **params)


def test_the_first_processors_name_and_flags_are_read(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    name, flags = _precision._cpuinfo(path)
    assert name == "Example CPU 9000"
    assert bfloat16_hardware(flags) == ["avx512_bf16", "amx_bf16"]
    assert "avx2" in flags and "sse2" in flags
    assert _precision._cpuinfo(tmp_path / "missing") == ("", frozenset())
    assert bfloat16_hardware(frozenset({"avx2", "avx512f"})) == []


def test_the_cpu_description_names_torchs_vector_unit():
    assert cpu_description().endswith(f"torch: {torch.backends.cpu.get_cpu_capability()})")


def _dtypes_seen(model: NeSCalClassifier, X, y) -> dict[str, set]:
    """The dtypes of the linear layers' outputs in the training steps and in prediction."""
    seen = {"training steps": set(), "predict": set()}
    phase = "fit"
    original = torch.nn.Linear.forward

    def record(self, x):
        out = original(self, x)
        if phase == "predict" or self.training:
            seen["training steps" if phase == "fit" else phase].add(out.dtype)
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.Linear, "forward", record)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model.fit(X, y)
        phase = "predict"
        model.predict_proba(X)
    return seen


def test_bfloat16_trains_its_products_in_bfloat16_and_predicts_in_float32():
    X, y = _data()
    seen = _dtypes_seen(_quick(precision="bfloat16"), X, y)
    assert seen == {"training steps": {torch.bfloat16}, "predict": {torch.float32}}
    expected = {"training steps": {torch.float32}, "predict": {torch.float32}}
    assert _dtypes_seen(_quick(), X, y) == expected


@pytest.mark.parametrize("loss", ["nescal", "label_smoothing"])
def test_a_bfloat16_fit_is_a_usable_model_close_to_float32s(loss):
    """Not the same fit (bfloat16 keeps 8 bits of mantissa), but the same model within a
    loose bound: 400 easy rows, 12 epochs, the NeSCal penalty from the fourth."""
    X, y = _data()
    params = {"max_epochs": 12, "random_state": 0}
    if loss == "nescal":
        params["loss__warmup"] = 3
    fits = {}
    for precision in ("float32", "bfloat16"):
        model = NeSCalClassifier(loss, precision=precision).set_params(**params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fits[precision] = model.fit(X, y)
    low, full = fits["bfloat16"].predict_proba(X), fits["float32"].predict_proba(X)
    assert np.all(np.isfinite(low)) and np.allclose(low.sum(axis=1), 1, atol=1e-6)
    assert not np.array_equal(low, full)  # it did train differently
    assert np.abs(low - full).max() < 0.2
    assert (low.argmax(1) == full.argmax(1)).mean() > 0.95
    again = pickle.loads(pickle.dumps(fits["bfloat16"]))
    np.testing.assert_array_equal(again.predict_proba(X), low)


@pytest.mark.parametrize(("hardware", "warns"), [([], True), (["amx_bf16"], False)])
def test_bfloat16_warns_only_where_the_cpu_emulates_it(monkeypatch, hardware, warns):
    monkeypatch.setattr(_precision, "bfloat16_hardware", lambda: hardware)
    X, y = _data(120)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _quick(precision="bfloat16").fit(X, y)
    messages = [str(w.message) for w in caught if "precision='bfloat16'" in str(w.message)]
    assert bool(messages) is warns
    if warns:
        assert "neither AMX-BF16 nor AVX-512 BF16" in messages[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _quick().fit(X, y)  # float32 never warns
    assert not [w for w in caught if "precision=" in str(w.message)]


def test_an_unknown_precision_is_refused_by_name():
    X, y = _data(60)
    with pytest.raises(InvalidParameterError, match=r"'precision' parameter .*'float16'"):
        _quick(precision="float16").fit(X, y)
