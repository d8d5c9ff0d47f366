"""CUDA check of the issue-12 paths: built-in ensembles, periodic embeddings, robust input
scaling, per-member graphs and a TabM module, trained on the GPU; pickled to the CPU.

Run on a machine with a GPU (it exits with a message where there is none)::

    python benchmarks/cuda_check.py

Prints, per configuration, the fit's penalty status, test NLL, fit seconds on the GPU and,
for the same configuration on the CPU (1 thread), the CPU seconds and the ratio; and
checks that a GPU-trained model pickles to one that predicts the same on the CPU.
"""

from __future__ import annotations

import pickle
import sys
import time

import numpy as np
import torch
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 0
    from nescal_sklearn import NeSCalClassifier, NeSCalLoss
    from nescal_sklearn.nn import TabMModule

    X, y = make_classification(12_000, n_features=20, n_informative=8, n_classes=4, random_state=0)
    X = X.astype(np.float32)
    X_train, y_train, X_test, y_test = X[:10_000], y[:10_000], X[10_000:], y[10_000:]
    settings = {
        "default": {},
        "m8": {"module_kwargs": {"n_members": 8}},
        "m8_per_member": {"module_kwargs": {"n_members": 8}, "loss__member_graph": "per_member"},
        "m8_periodic": {"module_kwargs": {"n_members": 8, "numeric_embedding": "periodic"}},
        "m4_realmlp_blocks": {
            "activation": "selu",
            "module_kwargs": {
                "n_members": 4,
                "numeric_embedding": "pbld",
                "front_scale": True,
                "parametric_activation": True,
            },
        },
        "tabm": {"module": TabMModule, "module_kwargs": {"k": 16, "d_block": 256}},
    }
    failures = 0
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print(
        "| setting | status | test NLL (GPU) | GPU s | CPU s | CPU / GPU | pickled on CPU == GPU |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, params in settings.items():
        times, nll = {}, None
        for device in ("cuda", "cpu"):
            clf = NeSCalClassifier(
                NeSCalLoss(warmup=5), max_epochs=15, device=device, random_state=0
            )
            clf.set_params(**params)
            start = time.perf_counter()
            clf.fit(X_train, y_train)
            if device == "cuda":
                torch.cuda.synchronize()
            times[device] = time.perf_counter() - start
            if device == "cuda":
                proba, status = clf.predict_proba(X_test), clf.penalty_status_
                nll = log_loss(y_test, proba)
                on_cpu = pickle.loads(pickle.dumps(clf)).predict_proba(X_test)
                same = bool(np.allclose(on_cpu, proba, atol=1e-4))
                failures += not same or not np.isfinite(nll) or status != "penalised"
        print(
            f"| {name} | {status} | {nll:.4f} | {times['cuda']:.1f} | {times['cpu']:.1f} | "
            f"{times['cpu'] / times['cuda']:.1f}× | {same} |"
        )
    print("FAILED" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
