"""
A frozen pretrained encoder with a new head
===========================================

A network pretrained on one task can be reused on another: load its encoder,
keep it frozen, and train only a new output layer — optionally fine-tuning the
encoder later at a lower learning rate. ``NeSCalClassifier`` does this with three
parameters:

* ``freeze=["encoder*"]``: fnmatch patterns of module or parameter names (as in
  ``module.named_modules()`` / ``named_parameters()``). The matching parameters
  are left out of the optimizer, and the matching submodules stay in eval mode
  while training (BatchNorm statistics fixed, Dropout off);
* ``unfreeze_at``: the 1-based epoch from which everything trains (fine-tuning);
* ``unfreeze_lr``: the learning rate of the formerly frozen parameters from then
  on (None: ``lr``).

With an ``encoder`` followed by a ``head``, ``embedding_layer="head"`` builds
NeSCal's neighbour graph on the head's *input*, i.e. on the encoder's output.

Here both tasks use scikit-learn's handwritten digits. An encoder is pretrained
to tell the ten digits apart on one half of the images and saved with
``torch.save``. The new task is a coarser labelling of the *other* half: the
digit's remainder modulo 3 (classes {0, 3, 6, 9}, {1, 4, 7} and {2, 5, 8}), with
only 50 labelled images per class. Each new class is a union of unrelated shapes:
hard to learn from 150 images, but a linear function of a representation that
already separates the digits. The frozen encoder, the fine-tuned one and the same
network trained from scratch are compared on the held-out test images.

Cheap mode: set the environment variable ``NESCAL_EXAMPLE_EPOCHS`` (for example
``NESCAL_EXAMPLE_EPOCHS=3``) to cap every training budget; CI and the documentation
build use it. The numbers below are meaningful only with the default budget.
"""

# %%
# The network: an encoder and a head
# ----------------------------------
# Any ``nn.Module`` mapping a float32 batch ``(n, n_features)`` to logits
# ``(n, n_classes)`` works. ``encoder_path`` loads pretrained encoder weights when
# the estimator instantiates the class; passing the class and its keyword
# arguments (rather than an instance) keeps the estimator cloneable, so it works
# in ``GridSearchCV`` and ``cross_validate`` like any other parameter.
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from nescal_sklearn import NeSCalClassifier, PenaltyInactiveWarning
from nescal_sklearn.graph import build_knn_graph, embed_rows
from nescal_sklearn.metrics import expected_calibration_error, log_loss

MAX_EPOCHS = int(os.environ.get("NESCAL_EXAMPLE_EPOCHS", "60"))
UNFREEZE_AT = min(MAX_EPOCHS, max(2, MAX_EPOCHS // 6))
torch.set_num_threads(1)  # a network this small gains nothing from threads


class EncoderHead(nn.Module):
    def __init__(
        self, n_features: int, n_classes: int, width: int = 64, encoder_path: str | None = None
    ) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(n_features, width),
            nn.BatchNorm1d(width),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(width, width),
            nn.ReLU(),
        )
        self.head = nn.Linear(width, n_classes)
        if encoder_path is not None:
            self.encoder.load_state_dict(torch.load(encoder_path, weights_only=True))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(X))


# %%
# Pretraining: the ten digits
# ---------------------------
# Plain cross-entropy on one half of the images (pixel values scaled to [0, 1]),
# with early stopping on a validation split. Only the encoder's weights (its
# ``state_dict``: parameters and BatchNorm statistics) are saved; the ten-class
# head is thrown away.
X, y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)
X_source, X_target, y_source, digit_target = train_test_split(
    X, y, test_size=0.5, stratify=y, random_state=0
)
pretrained = NeSCalClassifier(
    loss="ce", module=EncoderHead, max_epochs=MAX_EPOCHS, batch_size=64, random_state=0
).fit(X_source, y_source)
print(f"pretrained on {len(X_source)} images of the ten digits for {pretrained.n_epochs_} epochs")

workdir = tempfile.TemporaryDirectory()
encoder_path = Path(workdir.name) / "encoder.pt"
torch.save(pretrained.module_.encoder.state_dict(), encoder_path)
saved = torch.load(encoder_path, weights_only=True)

# %%
# The new task: the digit modulo 3, from 50 images per class
# ----------------------------------------------------------
# On the other half of the images: 150 training images, 150 validation images
# (early stopping and NeSCal's warm-up), the rest for testing.
y_target = digit_target % 3
X_rest, X_train, y_rest, y_train = train_test_split(
    X_target, y_target, test_size=150, stratify=y_target, random_state=0
)
X_test, X_val, y_test, y_val = train_test_split(
    X_rest, y_rest, test_size=150, stratify=y_rest, random_state=0
)
print(f"new task: {len(X_train)} training / {len(X_val)} validation / {len(X_test)} test images")

# %%
# Three models of the same architecture, all trained with NeSCal
# --------------------------------------------------------------
# * **frozen**: the pretrained encoder is loaded and frozen; only ``head`` trains;
# * **fine-tuned**: the same, until epoch ``UNFREEZE_AT``, from which the encoder
#   trains too, at a tenth of the head's learning rate (``unfreeze_lr``);
# * **from scratch**: no pretrained weights, nothing frozen.
#
# A single linear layer on 150 images takes large steps well, so every model
# uses ``lr=1e-2``.
#
# NeSCal's default warm-up ends at the cross-entropy optimum on the validation
# rows; early stopping then keeps the best epoch. When no penalised epoch beats the
# warm-up's best — common for a linear head on a fixed representation, which the
# penalty has little room to improve — the estimator returns that warm-up
# checkpoint, warns (``PenaltyInactiveWarning``) and says so in
# ``penalty_status_``, printed below instead of the warning.
common = dict(
    module=EncoderHead,
    embedding_layer="head",
    max_epochs=MAX_EPOCHS,
    batch_size=32,
    lr=1e-2,
    random_state=0,
)
transfer = dict(module_kwargs={"encoder_path": str(encoder_path)}, freeze=["encoder*"])
models = {
    "frozen": NeSCalClassifier(**common, **transfer),
    "fine-tuned": NeSCalClassifier(**common, **transfer, unfreeze_at=UNFREEZE_AT, unfreeze_lr=1e-3),
    "from scratch": NeSCalClassifier(**common),
}
for name, model in models.items():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PenaltyInactiveWarning)
        model.fit(X_train, y_train, X_val=X_val, y_val=y_val)
    print(
        f"{name}: {model.n_epochs_} epochs, graph built at epoch {model.graph_epoch_}, "
        f"best epoch {model.best_epoch_}, penalty_status_={model.penalty_status_!r}"
    )

# %%
# (a) The frozen encoder did not change
# -------------------------------------
# Every entry of the frozen model's encoder ``state_dict`` — weights, biases, and
# the BatchNorm running statistics, which a module in train mode would have
# updated — equals the saved one. The fine-tuned encoder moved away from the
# saved weights once it was unfrozen.
frozen_model = models["frozen"].module_
unchanged = all(torch.equal(frozen_model.encoder.state_dict()[k], v) for k, v in saved.items())
print(f"frozen encoder unchanged (parameters and BatchNorm statistics): {unchanged}")
tuned_encoder = models["fine-tuned"].module_.encoder
tuned = tuned_encoder.state_dict()  # detached tensors
weights = [name for name, _ in tuned_encoder.named_parameters()]  # not BatchNorm statistics
drift = max(float((tuned[name] - saved[name]).abs().max()) for name in weights)
print(f"fine-tuned encoder: largest change of a weight {drift:.4f}")

# %%
# (b) The neighbour graph lives on the encoder's output
# -----------------------------------------------------
# ``embedding_layer="head"`` makes the embedding the input of ``head``: the
# pretrained encoder's output. :func:`~nescal_sklearn.graph.embed_rows` is the
# function the estimator uses to embed the training rows before its kNN search;
# here it returns exactly the frozen encoder's output. Since that encoder never
# changes, NeSCal's graph is the kNN graph of the pretrained representation. The
# share of neighbours with the same label shows how well that representation,
# learnt for another task, already groups the new classes — far better than the
# raw pixels do.
embeddings, _ = embed_rows(frozen_model, torch.as_tensor(X_train), embedding_layer="head")
with torch.no_grad():
    encoder_output = frozen_model.encoder(torch.as_tensor(X_train))
print(f"graph embedding == encoder output: {torch.allclose(embeddings, encoder_output)}")
neighbours = build_knn_graph(embeddings.numpy(), n_neighbors=10)
agreement = np.mean(y_train[neighbours] == y_train[:, None])
raw_neighbours = build_knn_graph(X_train, n_neighbors=10)
raw_agreement = np.mean(y_train[raw_neighbours] == y_train[:, None])
print(
    f"neighbours (k=10) sharing the row's label: {100 * agreement:.1f}% on the encoder "
    f"output, {100 * raw_agreement:.1f}% on the raw pixels"
)

# %%
# (c) Frozen, fine-tuned or from scratch
# --------------------------------------
# Test NLL (nats), top-label ECE (15 bins) and accuracy on the test images of
# the new task.
print(f"{'model':<14} {'NLL':>7} {'ECE':>8} {'accuracy':>9}")
for name, model in models.items():
    proba = model.predict_proba(X_test)
    nll = log_loss(y_test, proba, labels=model.classes_)
    ece = expected_calibration_error(y_test, proba, labels=model.classes_)
    accuracy = np.mean(model.classes_[proba.argmax(axis=1)] == y_test)
    print(f"{name:<14} {nll:7.4f} {100 * ece:7.2f}% {100 * accuracy:8.2f}%")

# %%
# Learning curves
# ---------------
# The validation NLL of each epoch, from ``history_``. The dotted line marks the
# epoch at which the fine-tuned model's encoder starts training.
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(6, 4))
for name, model in models.items():
    curve = model.history_[:, "valid_nll"]
    ax.plot(np.arange(1, len(curve) + 1), curve, label=name)
ax.axvline(UNFREEZE_AT, color="grey", linestyle=":", label="unfreeze_at")
ax.set_xlabel("epoch")
ax.set_ylabel("validation NLL (nats)")
ax.set_yscale("log")
ax.set_title("Digit modulo 3, from 50 images per class")
ax.legend()
plt.show()

workdir.cleanup()
