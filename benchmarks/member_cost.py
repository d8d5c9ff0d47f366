"""Where a cross-fitted member's epoch goes, and how far it is from its matrix products' bound.

On one fold of a full-size dataset (the training rows of 5-fold cross-fitting of the
60/20/20 split's train + validation: 64 % of the rows, 16 % held out), one thread,
float32, for each batch size:

* ``estimator``: seconds per epoch of ``NeSCalClassifier`` (cross-entropy, the recipe's
  network and dropout masks), from skorch's own epoch timer: training batches, the
  validation pass and every callback;
* its shares, from a bare PyTorch loop of the same network and optimizer (fused AdamW),
  timed by phase: ``forward`` (indexing the batch, network and loss), ``backward``,
  ``optimizer`` (zero_grad and step) and ``validation`` (an eval-mode pass over the
  held-out rows in chunks of 2,048); ``skorch`` is the estimator's epoch less the loop's
  (skorch, its batches, the callbacks, the history); ``dropout`` is the estimator's
  epoch less that at dropout 0 (masks and their products, inside forward and backward);
* ``bound``: the epoch's multiply-adds (3 per weight and row: forward 1, backward 2) at
  the speed one thread reaches on a (4096 x width) ``torch.mm`` (the fastest of every
  round): the compute bound of the epoch's matrix products;
* ``nescal``: a penalised epoch of ``NeSCalClassifier("nescal")``, the members' real
  loss (the graph is built after one warm-up epoch; the fastest epoch after it);
* ``bfloat16`` (with ``--bfloat16``): the estimator's epoch with ``precision="bfloat16"``
  (bfloat16 autocast), against the float32 one; the header's CPU line says whether the
  CPU multiplies bfloat16 in hardware (AMX-BF16, AVX-512 BF16) or torch emulates it.

Each figure is the fastest of ``--rounds``, in CPU seconds of the process
(``time.process_time``, skorch's epoch timer included), so that other processes on a
shared machine add none (on an idle machine it is the wall time: the fit runs one
thread). Each ratio is against the bound of the same run.

Examples
--------
    python benchmarks/member_cost.py --dataset adult --batch-sizes 256 1024 --rounds 3
    python benchmarks/member_cost.py --recipe 2026-12-04   # an older recipe's network
    python benchmarks/member_cost.py --batch-sizes 1024 --bfloat16   # and bfloat16's epoch
    python benchmarks/member_cost.py --quick   # smoke run (600 synthetic rows, seconds)
"""

from __future__ import annotations

import argparse
import timeit
import warnings
from time import process_time as clock
from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import make_classification

from nescal_bench import load_local_dataset, stratified_split
from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.estimator import cpu_description, get_recipe
from nescal_sklearn.nn import TabularMLP

PHASES = ("forward", "backward", "optimizer", "validation")
#: The estimator's fits: figure -> (loss, parameters).
FITS = {"estimator": ("ce", {}), "no dropout": ("ce", {"dropout": 0})}
FITS["nescal"] = ("nescal", {"loss__warmup": 1})  # the graph at the start of epoch 2


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="adult", help="a local dataset (../shared/data)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recipe", default=None, help="the estimator's recipe (the newest)")
    parser.add_argument(
        "--bfloat16", action="store_true", help="also the estimator's epoch in bfloat16 autocast"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run on 600 rows")
    return parser.parse_args(argv)


def fold_rows(dataset: str, quick: bool):
    """One fold's training and held-out rows, preprocessed as the study's splits are."""
    data = None if quick else load_local_dataset(dataset)
    X, y = make_classification(600, random_state=0) if quick else (data.X, np.asarray(data.y))
    split = stratified_split(X, y, seed=0)
    X_all = np.concatenate([split.X_train, split.X_val]).astype(np.float32)
    y_all = np.unique(np.concatenate([split.y_train, split.y_val]), return_inverse=True)[1]
    order = np.random.default_rng(0).permutation(len(y_all))
    fold, held = order[len(order) // 5 :], order[: len(order) // 5]
    return X_all[fold], y_all[fold], X_all[held], y_all[held]


def estimator_epoch(data, batch: int, args, loss: str, params: dict) -> float:
    """The fastest epoch of a NeSCalClassifier fit (for NeSCal, of its penalised epochs)."""
    skip = 2 * (loss == "nescal")  # NeSCal: a warm-up epoch, then the graph's epoch
    fit = dict(batch_size=batch, patience=False, lr_schedule="constant", random_state=0, **params)
    clf = NeSCalClassifier(loss, recipe=args.recipe).set_params(max_epochs=args.epochs + skip)
    timer = mock.patch("skorch.callbacks.logging.time", SimpleNamespace(time=clock))
    with warnings.catch_warnings(), timer:
        warnings.simplefilter("ignore")
        clf.set_params(**fit).fit(*data[:2], X_val=data[2], y_val=data[3])
    return float(min(clf.history_[:, "dur"][skip:]))


def loop_epoch(data, batch: int, args) -> np.ndarray:
    """The fastest epoch of the recipe's network in a bare PyTorch loop: seconds by phase."""
    X, y, X_val, _ = (torch.as_tensor(a) for a in data)
    params = get_recipe(args.recipe).params
    masks = params.get("dropout_masks", "torch")
    torch.manual_seed(0)
    module = TabularMLP(X.shape[1], int(y.max()) + 1, params["hidden_sizes"], dropout_masks=masks)
    optimizer = torch.optim.AdamW(module.parameters(), lr=3e-3, weight_decay=1e-4, fused=True)
    best = np.full(len(PHASES), np.inf)
    for _ in range(args.epochs):
        times = np.zeros(len(PHASES))
        for idx in torch.randperm(len(y)).split(batch):
            start = clock()
            loss = F.cross_entropy(module.train()(X.index_select(0, idx)), y[idx])
            forward = clock()
            optimizer.zero_grad()
            loss.backward()
            backward = clock()
            optimizer.step()
            times[:3] += [forward - start, backward - forward, clock() - backward]
        start = clock()
        with torch.inference_mode():
            for chunk in X_val.split(2048):
                module.eval()(chunk)
        times[3] = clock() - start
        best = min(best, times, key=sum)
    return best


def measure(data, batch: int, args, width: int) -> dict[str, float]:
    """The fastest of ``args.rounds`` of every figure; ``mm``: seconds per multiply-add of
    one thread on a (4096 x width) @ (width x width) product."""
    a, b, rounds = torch.randn(4096, width), torch.randn(width, width), []
    fits = {**FITS, "bfloat16": ("ce", {"precision": "bfloat16"})} if args.bfloat16 else FITS
    for _ in range(args.rounds):
        figures = dict(zip(PHASES, loop_epoch(data, batch, args), strict=True))
        figures.update({key: estimator_epoch(data, batch, args, *fit) for key, fit in fits.items()})
        mm = timeit.repeat(lambda: torch.mm(a, b), timer=clock, number=1, repeat=21)
        rounds.append({**figures, "mm": min(mm) / (4096 * width * width)})
    return {key: min(r[key] for r in rounds) for key in rounds[0]}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.batch_sizes, args.epochs, args.rounds, args.dataset = [64], 2, 1, "600 synthetic rows"
    torch.set_num_threads(1)
    data = fold_rows(args.dataset, args.quick)
    recipe = get_recipe(args.recipe)
    sizes = [data[0].shape[1], *recipe.params["hidden_sizes"], int(data[1].max()) + 1]
    weights = sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    masks = recipe.params.get("dropout_masks", "torch")
    print(f"{args.dataset}: {len(data[1])} rows, {len(data[2])} held out, widths {sizes}, recipe")
    print(f"{recipe.name} ({masks} dropout masks), one thread, float32, CPU seconds")
    print(f"CPU: {cpu_description()}\n")
    shares = (*PHASES, "skorch", "dropout")
    print("| batch | bound s | estimator s | estimator / bound | " + " | ".join(shares), end="")
    extra = " | bfloat16 s | bfloat16 / float32" * args.bfloat16
    print(f" | nescal s | nescal / bound{extra} |\n" + "|---:" * (12 + 2 * args.bfloat16) + "|")
    for batch in args.batch_sizes:
        m = measure(data, batch, args, max(sizes[1:-1]))
        bound, est = 3 * weights * len(data[1]) * m.pop("mm"), m["estimator"]
        m["skorch"], m["dropout"] = est - sum(m[p] for p in PHASES), est - m["no dropout"]
        cells = [f"{bound:.4g}", f"{est:.4g}", f"{est / bound:.2f}×"]
        cells += [f"{m[s] / est:.0%}" for s in shares]
        cells += [f"{m['nescal']:.4g}", f"{m['nescal'] / bound:.2f}×"]
        if args.bfloat16:
            cells += [f"{m['bfloat16']:.4g}", f"{m['bfloat16'] / est:.2f}×"]
        print(f"| {batch} | " + " | ".join(cells) + " |", flush=True)
    print("\nShares of the estimator's epoch (dropout's: inside forward and backward).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
