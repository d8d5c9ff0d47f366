"""
A convolutional network on the digits images
============================================

``NeSCalClassifier`` trains any PyTorch module that maps a float32 batch of shape
``(n, n_features)`` to logits ``(n, n_classes)``. Here the module is a small
convolutional network for scikit-learn's 8×8 handwritten digits: each row of 64
pixel values is reshaped to a one-channel image inside ``forward``, so the
estimator, its validation split, early stopping and the neighbour graph work
unchanged. The graph is built on the input of the layer named by
``embedding_layer`` — here the CNN's final linear layer, ``"head"``, whose input is
the flattened penultimate representation.

The same network is trained three ways and scored on held-out test images:

* **NeSCal**: cross-entropy warm-up, then the neighbourhood-smoothing penalty;
* **cross-entropy** (``loss="ce"``), the same architecture and budget;
* **cross-entropy + temperature scaling**: the cross-entropy model wrapped in
  :class:`~nescal_sklearn.CalibratedTemperature` around scikit-learn's
  ``FrozenEstimator``, the temperature fitted on the validation images.

Cheap mode: set the environment variable ``NESCAL_EXAMPLE_EPOCHS`` (for example
``NESCAL_EXAMPLE_EPOCHS=3``) to cap the training budget; CI and the documentation
build use it. The numbers below are meaningful only with the default budget.
"""

# %%
# Data
# ----
# The 1797 digits images, pixel values scaled to [0, 1], split 60/20/20 into
# training, validation (early stopping, temperature) and test rows, stratified by
# class.
import os

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import train_test_split
from torch import nn

from nescal_sklearn import CalibratedTemperature, NeSCalClassifier
from nescal_sklearn.metrics import expected_calibration_error, log_loss

MAX_EPOCHS = int(os.environ.get("NESCAL_EXAMPLE_EPOCHS", "60"))
torch.set_num_threads(1)  # a network this small gains nothing from threads

X, y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)
X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
X_train, X_val, y_train, y_val = train_test_split(
    X_rest, y_rest, test_size=0.25, stratify=y_rest, random_state=0
)
print(f"{len(X_train)} training / {len(X_val)} validation / {len(X_test)} test images")


# %%
# The module
# ----------
# Two 3×3 convolutions and a max-pool, then a small fully connected block and the
# output layer ``head``. ``NeSCalClassifier`` instantiates the class at each ``fit``
# and fills in ``n_classes`` from the labels (``n_features`` too, when ``__init__``
# takes it); ``module_kwargs`` sets the rest.
class DigitsCNN(nn.Module):
    def __init__(self, n_classes: int, channels: int = 16, width: int = 64) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # (2 * channels, 4, 4)
        )
        self.hidden = nn.Sequential(
            nn.Flatten(), nn.Linear(2 * channels * 16, width), nn.ReLU(), nn.Dropout(0.2)
        )
        self.head = nn.Linear(width, n_classes)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        images = X.view(-1, 1, 8, 8)  # each row of 64 pixels is one 8x8 image
        return self.head(self.hidden(self.features(images)))


# %%
# Training
# --------
# Both networks early-stop on the validation images (``X_val``/``y_val``);
# ``embedding_layer="head"`` builds NeSCal's neighbour graph on the input of the
# output layer (the default, the last ``nn.Linear``, is the same layer here).
common = dict(
    module=DigitsCNN,
    module_kwargs={"channels": 16},
    max_epochs=MAX_EPOCHS,
    batch_size=64,
    random_state=0,
)
nescal = NeSCalClassifier(embedding_layer="head", **common)
nescal.fit(X_train, y_train, X_val=X_val, y_val=y_val)
ce = NeSCalClassifier(loss="ce", **common).fit(X_train, y_train, X_val=X_val, y_val=y_val)
ce_ts = CalibratedTemperature(FrozenEstimator(ce)).fit(X_val, y_val)
print(
    f"NeSCal: {nescal.n_epochs_} epochs, graph built at epoch {nescal.graph_epoch_}, "
    f"best epoch {nescal.best_epoch_}; cross-entropy: {ce.n_epochs_} epochs; "
    f"temperature {float(ce_ts.temperature_):.3f} "
    f"(NLL-optimal before the shrinkage guard: {float(ce_ts.fitted_temperature_):.3f})"
)

# %%
# Test metrics
# ------------
# NLL (nats), top-label ECE (15 equal-width bins) and accuracy on the test images.
# On this small, easy problem, early stopping on the validation NLL leaves the
# cross-entropy model close to calibrated: its NLL-optimal temperature is near 1,
# and :class:`~nescal_sklearn.CalibratedTemperature`'s default guard (shrinking
# ``log T`` towards 0 by its bootstrap standard error) then keeps ``T = 1``. This is
# one split and one seed; ``docs/results.md`` has the systematic comparison.
models = {"NeSCal": nescal, "cross-entropy": ce, "cross-entropy + TS": ce_ts}
print(f"{'model':<20} {'NLL':>7} {'ECE':>8} {'accuracy':>9}")
for name, model in models.items():
    proba = model.predict_proba(X_test)
    nll = log_loss(y_test, proba, labels=model.classes_)
    ece = expected_calibration_error(y_test, proba, labels=model.classes_)
    accuracy = np.mean(model.classes_[proba.argmax(axis=1)] == y_test)
    print(f"{name:<20} {nll:7.4f} {100 * ece:7.2f}% {100 * accuracy:8.2f}%")

# %%
# Learning curves
# ---------------
# The validation NLL of each epoch, from ``history_``: NeSCal's curve follows
# cross-entropy's until its warm-up ends (the dotted line: the graph is built at
# the start of that epoch), then the penalty takes over. The dots mark the epochs
# that early stopping restored. Temperature scaling does not train: it rescales
# the cross-entropy model's logits after the fact.
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(6, 4))
for name, model in (("NeSCal", nescal), ("cross-entropy", ce)):
    curve = model.history_[:, "valid_nll"]
    (line,) = ax.plot(np.arange(1, len(curve) + 1), curve, label=name)
    best = model.best_epoch_
    ax.plot(best, curve[best - 1], "o", color=line.get_color())
if nescal.graph_epoch_ is not None:
    ax.axvline(nescal.graph_epoch_, color="grey", linestyle=":", label="NeSCal graph built")
ax.set_xlabel("epoch")
ax.set_ylabel("validation NLL (nats)")
ax.set_yscale("log")
ax.set_title("Digits CNN")
ax.legend()
plt.show()
