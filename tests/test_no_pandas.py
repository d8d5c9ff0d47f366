"""The library without the lab's extra: ``import nescal_sklearn`` and a default fit work
with neither pandas nor pyarrow importable (issue 29)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import importlib.abc
import importlib.machinery
import sys


class NotInstalled(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    # pandas and pyarrow as if absent: importing them raises ModuleNotFoundError

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pandas", "pyarrow"):
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)

    def exec_module(self, module):
        raise AssertionError("unreachable")


sys.meta_path.insert(0, NotInstalled())
from sklearn.datasets import load_iris
import nescal_sklearn
from nescal_sklearn import NeSCalClassifier

X, y = load_iris(return_X_y=True)
model = NeSCalClassifier(max_epochs=3, random_state=0).fit(X, y)
assert model.predict_proba(X).shape == (150, 3)
assert not {m.split(".")[0] for m in sys.modules} & {"pandas", "pyarrow", "nescal_bench"}
print("ok")
"""


def test_the_library_fits_without_pandas_or_pyarrow():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"
