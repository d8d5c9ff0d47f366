"""Where a cross-fitted member's epoch goes, and how far it is from its matrix products' bound.

On one fold of a full-size dataset (the training rows of 5-fold cross-fitting of the
60/20/20 split's train + validation: 64 % of the rows, 16 % held out), one thread, for
each batch size:

* ``estimator``: seconds per epoch of ``NeSCalClassifier`` (cross-entropy, the recipe's
  network), from skorch's own epoch timer: training batches, the validation pass and
  every callback;
* ``torch loop``: the same network, optimizer and batches in a bare PyTorch loop
  (forward, loss, backward, step), with no validation pass: what skorch and the
  callbacks add is the difference;
* ``bound``: the epoch's multiply-adds (forward 2, backward 4 per weight and row) at the
  speed this machine's single thread reaches on one large matrix product of the same
  width, ``torch.mm`` (measured in the same run): the compute bound of the epoch's
  matrix products.

Every figure is the fastest of ``--rounds`` (interference only adds time); each ratio
is against the bound measured in the same run.

Examples
--------
    python benchmarks/member_cost.py --dataset adult
    python benchmarks/member_cost.py --quick   # smoke run (iris-sized, seconds)
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="adult", help="a local dataset (../shared/data)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smoke run on 600 rows")
    return parser.parse_args(argv)


def fold_rows(dataset: str, quick: bool):
    """One fold's training and held-out rows, preprocessed as the study's splits are."""
    from nescal_bench import load_local_dataset, stratified_split

    if quick:
        from sklearn.datasets import make_classification

        X, y = make_classification(600, n_features=12, n_informative=6, random_state=0)
    else:
        data = load_local_dataset(dataset)
        X, y = data.X, np.asarray(data.y)
    split = stratified_split(X, y, seed=0)
    X_all = np.concatenate([split.X_train, split.X_val]).astype(np.float32)
    y_all = np.unique(np.concatenate([split.y_train, split.y_val]), return_inverse=True)[1]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y_all))
    cut = len(order) // 5
    return X_all[order[cut:]], y_all[order[cut:]], X_all[order[:cut]], y_all[order[:cut]]


def estimator_epoch(X, y, X_val, y_val, batch: int, epochs: int) -> float:
    """The fastest epoch of a NeSCalClassifier fit, as skorch times it."""
    from nescal_sklearn import NeSCalClassifier

    clf = NeSCalClassifier(
        "ce",
        max_epochs=epochs,
        batch_size=batch,
        patience=False,
        lr_schedule="constant",
        random_state=0,
        n_threads=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y, X_val=X_val, y_val=y_val)
    return float(min(clf.history_[:, "dur"]))


def torch_epoch(X, y, batch: int, epochs: int, n_classes: int) -> float:
    """The fastest epoch of the same network trained in a bare PyTorch loop."""
    from nescal_sklearn.estimator import get_recipe
    from nescal_sklearn.nn import TabularMLP

    recipe = get_recipe().params
    torch.manual_seed(0)
    module = TabularMLP(X.shape[1], n_classes, hidden_sizes=recipe["hidden_sizes"], dropout=0.1)
    optimizer = torch.optim.AdamW(module.parameters(), lr=3e-3, weight_decay=1e-4)
    X_t, y_t = torch.as_tensor(X), torch.as_tensor(y, dtype=torch.long)
    best = np.inf
    for _ in range(epochs):
        start = time.perf_counter()
        for idx in torch.randperm(len(y_t)).split(batch):
            loss = F.cross_entropy(module(X_t[idx]), y_t[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_flops(width: int) -> float:
    """Multiply-adds per second of one thread on a (4096 x width) @ (width x width) product."""
    a, b = torch.randn(4096, width), torch.randn(width, width)
    torch.mm(a, b)
    best = np.inf
    for _ in range(5):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 4096 * width * width / best


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.batch_sizes, args.epochs, args.rounds = [64], 2, 1
    torch.set_num_threads(1)
    X, y, X_val, y_val = fold_rows(args.dataset, args.quick)
    n_classes = int(y.max()) + 1
    from nescal_sklearn.estimator import get_recipe

    sizes = [X.shape[1], *get_recipe().params["hidden_sizes"], n_classes]
    weights = sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    speed = matmul_flops(max(sizes[1:-1]))
    bound = 3 * weights * len(y) / speed  # forward 1, backward 2 products per weight and row
    print(
        f"{args.dataset}: {len(y)} training rows, {len(y_val)} held out, widths {sizes}; "
        f"one thread does {speed / 1e9:.1f} G multiply-adds/s on a width-{max(sizes[1:-1])} "
        f"product: the epoch's bound is {bound:.3f} s\n"
    )
    print(
        "| batch | estimator s/epoch | torch loop s/epoch | bound s | estimator / bound | loop / bound |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for batch in args.batch_sizes:
        est = min(
            estimator_epoch(X, y, X_val, y_val, batch, args.epochs) for _ in range(args.rounds)
        )
        loop = min(torch_epoch(X, y, batch, args.epochs, n_classes) for _ in range(args.rounds))
        print(
            f"| {batch} | {est:.3f} | {loop:.3f} | {bound:.3f} | {est / bound:.1f}× | "
            f"{loop / bound:.1f}× |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
