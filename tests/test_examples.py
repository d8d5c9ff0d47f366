"""The gallery examples run top to bottom in cheap mode, and what they rely on holds.

``examples/plot_pretrained_encoder.py`` and ``examples/plot_digits_cnn.py`` run as
scripts in a subprocess with ``NESCAL_EXAMPLE_EPOCHS=3`` (their cheap mode); the
tests check what they print. The in-process tests check the behaviours the
pretrained-encoder example demonstrates — frozen parameters and BatchNorm
statistics untouched, and ``unfreeze_at``/``unfreeze_lr`` — against references that
do not come from the estimator: the module instance passed in (``fit`` trains a deep
copy) and Adam's bound on the size of one step.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from nescal_sklearn import NeSCalClassifier, NeSCalLoss

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CHEAP_EPOCHS = 3


def run_example(name: str, tmp_path: Path) -> str:
    """Run ``examples/<name>`` in cheap mode in ``tmp_path``; return its stdout."""
    env = dict(
        os.environ,
        NESCAL_EXAMPLE_EPOCHS=str(CHEAP_EPOCHS),
        MPLBACKEND="Agg",
        OMP_NUM_THREADS="1",
    )
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def table_rows(stdout: str, names: list[str]) -> dict[str, tuple[float, float, float]]:
    """The (NLL, ECE %, accuracy %) row of each model in an example's printed table."""
    rows = {}
    for name in names:
        match = re.search(
            rf"^{re.escape(name)}\s+([-\d.na]+)\s+([-\d.na]+)%\s+([-\d.na]+)%$", stdout, re.M
        )
        assert match, f"no table row for {name!r} in:\n{stdout}"
        rows[name] = tuple(float(v) for v in match.groups())
    return rows


def check_metrics(rows: dict[str, tuple[float, float, float]], n_classes: int) -> None:
    for name, (nll, ece, accuracy) in rows.items():
        assert 0.0 < nll < 2 * np.log(n_classes) + 1.0, (name, nll)
        assert 0.0 <= ece <= 100.0, (name, ece)
        assert 100.0 / n_classes < accuracy <= 100.0, (name, accuracy)  # better than chance


def test_pretrained_encoder_example(tmp_path):
    stdout = run_example("plot_pretrained_encoder.py", tmp_path)
    assert "frozen encoder unchanged (parameters and BatchNorm statistics): True" in stdout
    assert "graph embedding == encoder output: True" in stdout
    # unfreeze_at falls inside the cheap budget: the fine-tuned encoder moved.
    drift = float(re.search(r"largest change of a weight ([\d.]+)", stdout).group(1))
    assert drift > 0.0
    assert re.search(r"^model\s+NLL\s+ECE\s+accuracy$", stdout, re.M)
    check_metrics(table_rows(stdout, ["frozen", "fine-tuned", "from scratch"]), n_classes=3)
    assert list(tmp_path.iterdir()) == []  # the saved encoder went with its temp dir


def test_digits_cnn_example(tmp_path):
    stdout = run_example("plot_digits_cnn.py", tmp_path)
    assert f"NeSCal: {CHEAP_EPOCHS} epochs" in stdout
    assert re.search(r"^model\s+NLL\s+ECE\s+accuracy$", stdout, re.M)
    rows = table_rows(stdout, ["NeSCal", "cross-entropy", "cross-entropy + TS"])
    check_metrics(rows, n_classes=10)
    # Temperature scaling never changes the predicted class.
    assert rows["cross-entropy + TS"][2] == rows["cross-entropy"][2]


# ------------------------------------------------- the behaviours the examples use
class EncoderHead(nn.Module):
    """The pretrained-encoder example's architecture: BatchNorm and Dropout in the encoder."""

    def __init__(self, n_features: int, n_classes: int, width: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(n_features, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Dropout(0.5)
        )
        self.head = nn.Linear(width, n_classes)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(X))


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return (X[:300] / 16.0).astype(np.float32), y[:300]


def encoder_change(before: nn.Module, after: nn.Module) -> dict[str, float]:
    """Largest absolute change of each floating entry of the encoder's state dict."""
    old, new = before.encoder.state_dict(), after.encoder.state_dict()
    return {k: float((new[k] - old[k]).abs().max()) for k in old if torch.is_floating_point(old[k])}


def test_frozen_encoder_keeps_weights_and_batchnorm_statistics(digits):
    X, y = digits
    torch.manual_seed(0)
    initial = EncoderHead(64, 10)
    # A fixed warm-up builds NeSCal's graph mid-training (an eval-mode forward pass
    # that restores train mode afterwards), with no validation rows: the frozen
    # submodules must be back in eval mode for every training batch after it.
    common = dict(
        loss=NeSCalLoss(n_neighbors=5, warmup=1),
        module=initial,
        embedding_layer="head",
        max_epochs=3,
        batch_size=32,
        early_stopping=False,
        random_state=0,
    )
    frozen = NeSCalClassifier(freeze=["encoder*"], **common).fit(X, y)
    assert frozen.graph_epoch_ == 2
    assert encoder_change(initial, frozen.module_) == {
        "0.weight": 0.0,
        "0.bias": 0.0,
        "1.weight": 0.0,
        "1.bias": 0.0,
        "1.running_mean": 0.0,
        "1.running_var": 0.0,
    }
    assert int(frozen.module_.encoder[1].num_batches_tracked) == 0
    assert not torch.equal(frozen.module_.head.weight, initial.head.weight)  # the head trained
    # The same fit without freeze moves all of them: the comparison above can fail.
    free = NeSCalClassifier(**common).fit(X, y)
    assert min(encoder_change(initial, free.module_).values()) > 0.0


@pytest.mark.parametrize("unfreeze_lr", [1e-6, None])
def test_unfreeze_at_trains_the_encoder_at_unfreeze_lr(digits, unfreeze_lr):
    X, y = digits
    torch.manual_seed(0)
    initial = EncoderHead(64, 10)
    lr, batch_size, max_epochs, unfreeze_at = 1e-2, 50, 3, 2
    model = NeSCalClassifier(
        loss="ce",
        module=initial,
        freeze=["encoder*"],
        unfreeze_at=unfreeze_at,
        unfreeze_lr=unfreeze_lr,
        lr=lr,
        max_epochs=max_epochs,
        batch_size=batch_size,
        early_stopping=False,
        random_state=0,
    ).fit(X, y)
    unfrozen = [bool(row.get("unfrozen", False)) for row in model.history_]
    assert unfrozen == [epoch == unfreeze_at for epoch in range(1, max_epochs + 1)]
    change = encoder_change(initial, model.module_)
    assert min(change.values()) > 0.0  # everything trained once unfrozen
    # One Adam(W) step moves a weight by lr * |m_hat / (sqrt(v_hat) + eps)| plus the
    # decoupled decay lr * wd * |w|. By Cauchy-Schwarz on the two moving averages,
    # |m_hat / sqrt(v_hat)| <= (1 - b1) / sqrt(1 - b2) / sqrt(1 - b1**2 / b2) < 7.3 for
    # torch's default betas (0.9, 0.999), whatever the gradients; 8 leaves room for the
    # decay term (wd = 1e-4, |w| < 10).
    steps = (max_epochs - unfreeze_at + 1) * int(np.ceil(len(X) / batch_size))
    per_step = 8.0
    step_lr = lr if unfreeze_lr is None else unfreeze_lr
    weights = {k: v for k, v in change.items() if "running" not in k}
    assert max(weights.values()) <= steps * per_step * step_lr
    if unfreeze_lr is None:  # at the head's lr the encoder moves beyond what 1e-6 allows
        assert max(weights.values()) > steps * per_step * 1e-6
