"""
NeSCal in a plain PyTorch loop
==============================

The neighbourhood-smoothing penalty sits beside cross-entropy in an ordinary
training loop. The settings are one :class:`~nescal_sklearn.losses.NeSCalLoss`
spec; when the warm-up ends, ``spec.build_runtime`` embeds the training rows
with the network (one eval-mode forward pass, the input of its last linear
layer), builds the kNN graph and fills the prediction cache — the same function
``NeSCalClassifier`` calls. The loop then trains on ``base loss + weight *
penalty`` using each batch's row indices. No scikit-learn estimator involved
(scikit-learn only loads and scales the data).
"""

# %%
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from nescal_sklearn.losses import NeSCalLoss

torch.manual_seed(0)
torch.set_num_threads(1)  # a model this small gains nothing from threads on shared CPUs
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train = torch.tensor(scaler.transform(X_train), dtype=torch.float32)
X_test = torch.tensor(scaler.transform(X_test), dtype=torch.float32)
y_train, y_test = torch.tensor(y_train), torch.tensor(y_test)

model = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64), torch.nn.ReLU(),
    torch.nn.Linear(64, 10),
)  # fmt: skip
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

# %%
# The loop: a fixed warm-up of plain cross-entropy (``warmup="auto"`` needs validation
# rows and the estimator), then the graph, then cross-entropy + weight * penalty.
max_epochs = 30
spec = NeSCalLoss(n_neighbors=10, weight=1.0, warmup=10)
runtime = None
for epoch in range(max_epochs):
    if epoch == spec.warmup_epochs(max_epochs):
        runtime = spec.build_runtime(
            model, X_train, start_epoch=epoch, max_epochs=max_epochs, random_state=0
        )
    if runtime is not None:
        runtime.set_epoch(epoch)
    for batch in torch.randperm(len(X_train)).split(64):  # batch = row indices
        logits = model(X_train[batch])
        loss = spec(logits, y_train[batch])  # the base loss (cross-entropy)
        if runtime is not None:
            penalty = runtime.penalty(logits, batch, y_train[batch])
            loss = loss + runtime.current_weight * penalty
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
del runtime  # nothing of the graph or the cache is needed at inference

# %%
with torch.no_grad():
    test_nll = F.cross_entropy(model(X_test), y_test).item()
    accuracy = (model(X_test).argmax(1) == y_test).float().mean().item()
print(f"test NLL {test_nll:.4f}  accuracy {accuracy:.3f}")
