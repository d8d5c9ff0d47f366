"""
NeSCal in a plain PyTorch loop
==============================

The neighbourhood-smoothing penalty sits beside cross-entropy in an ordinary
training loop: warm up with cross-entropy, build the kNN graph once on the
network's penultimate-layer embeddings of the training rows, fill the prediction
cache with one forward pass, then train on ``CE + weight * penalty`` using each
batch's row indices. No scikit-learn estimator involved (scikit-learn only loads
the data and builds the graph).
"""

# %%
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from nescal_sklearn.graph import build_knn_graph
from nescal_sklearn.penalties import NeighbourhoodSmoothing, penalty_weight

torch.manual_seed(0)
torch.set_num_threads(1)  # a model this small gains nothing from threads on shared CPUs
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train = torch.tensor(scaler.transform(X_train), dtype=torch.float32)
X_test = torch.tensor(scaler.transform(X_test), dtype=torch.float32)
y_train, y_test = torch.tensor(y_train), torch.tensor(y_test)

body = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64), torch.nn.ReLU()
)
head = torch.nn.Linear(64, 10)
model = torch.nn.Sequential(body, head)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

# %%
# The loop: ``warmup_epochs`` of plain cross-entropy, then the graph, then CE + penalty.
max_epochs, warmup_epochs, weight = 30, 10, 1.0
smoothing = None
for epoch in range(max_epochs):
    if epoch == warmup_epochs:
        with torch.no_grad():
            embeddings = body(X_train)  # penultimate layer, training rows only
            neighbors = build_knn_graph(embeddings, n_neighbors=10, random_state=0)
            smoothing = NeighbourhoodSmoothing(neighbors, F.log_softmax(head(embeddings), -1))
    lam = penalty_weight(epoch, weight=weight, start_epoch=warmup_epochs)
    for batch in torch.randperm(len(X_train)).split(64):  # batch = row indices
        logits = model(X_train[batch])
        loss = F.cross_entropy(logits, y_train[batch])
        if smoothing is not None:
            loss = loss + lam * smoothing(logits, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

# %%
with torch.no_grad():
    test_nll = F.cross_entropy(model(X_test), y_test).item()
    accuracy = (model(X_test).argmax(1) == y_test).float().mean().item()
print(f"test NLL {test_nll:.4f}  accuracy {accuracy:.3f}")
