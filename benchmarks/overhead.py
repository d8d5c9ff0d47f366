"""What NeSCal costs: training-epoch time, predict time and model size against CE.

Every ratio is NeSCal / CE measured side by side in the same run, on the same data
and module (the default MLP). The fits run in rotation (``--rounds`` times each) and
each measure is the fastest epoch or call of its method: interference from other
processes only adds time, so the minimum is the steadiest estimate on a shared
machine. ``--loss-call`` times the loss call alone instead (cross-entropy plus the
penalty, forward and backward, per training batch). The graph-build scaling study
(10k to 1M rows, exact vs approximate) is ``benchmarks/graph_build.py``.

Examples
--------
Smoke run (seconds)::

    python benchmarks/overhead.py --quick

Default run (about two minutes on one core)::

    python benchmarks/overhead.py

The loss call of each penalty variant, in µs and as a ratio to cross-entropy::

    python benchmarks/overhead.py --loss-call

What ``early_stopping="refinement"`` adds to an epoch (the temperature solve on the
validation logits, against the epoch's own time)::

    python benchmarks/overhead.py --refinement
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import make_classification

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.losses import NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
from nescal_sklearn.penalties import NeighbourhoodSmoothing


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="NeSCal vs CE: epoch time, predict time, size.")
    for name, default in (
        ("rows", 20000),
        ("features", 50),
        ("classes", 10),
        ("epochs", 10),
        ("warmup", 2),
        ("neighbors", 10),
    ):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--aggregation", default="pairwise", choices=["pairwise", "mean"])
    parser.add_argument("--repeats", type=int, default=30, help="predict_proba timing repeats")
    parser.add_argument(
        "--rounds", type=int, default=2, help="fits of each method, run in rotation"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (0: torch's default); one thread keeps the ratios steady",
    )
    parser.add_argument(
        "--loss-call",
        action="store_true",
        help="time the loss call alone (µs per forward + backward, batch --batch-size)",
    )
    parser.add_argument("--batch-size", type=int, default=256, help="batch of --loss-call")
    parser.add_argument(
        "--refinement",
        action="store_true",
        help="time the refinement criterion's temperature solve against the epoch",
    )
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(rows=600, features=10, epochs=4, warmup=1, repeats=2, rounds=1)
    return args


def fit(loss, X, y, args) -> NeSCalClassifier:
    return NeSCalClassifier(
        loss=loss, max_epochs=args.epochs, early_stopping=False, random_state=0
    ).fit(X, y)


def best_times(fns: dict, repeats: int, calls: int = 1) -> dict:
    """Fastest time per call of each function, the functions run in rotation."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return best


def loss_call(args) -> int:
    """µs per loss call (CE + penalty, forward + backward) of each variant, and CE alone."""
    gen = torch.Generator().manual_seed(0)
    n, n_classes, k = args.rows, args.classes, args.neighbors
    batch = min(args.batch_size, n)
    neighbors = torch.randint(0, n, (n, k), generator=gen)
    initial = torch.log_softmax(3.0 * torch.randn(n, n_classes, generator=gen), dim=1)
    similarities = torch.rand(n, k, generator=gen)
    variants = {
        "soft_target (default)": dict(),
        "soft_target, adaptive=agreement": dict(adaptive="agreement"),
        "soft_target, adaptive=density": dict(adaptive="density", similarities=similarities),
        "soft_target, target_temperature=2": dict(target_temperature=2.0),
        "js pairwise": dict(divergence="js", aggregation="pairwise"),
        "js mean": dict(divergence="js", aggregation="mean"),
    }
    n_batches = 16
    rows = [torch.randperm(n, generator=gen)[:batch] for _ in range(n_batches)]
    logits = [3.0 * torch.randn(batch, n_classes, generator=gen) for _ in range(n_batches)]
    labels = [torch.randint(0, n_classes, (batch,), generator=gen) for _ in range(n_batches)]

    def step(penalty):
        def run():
            for i in range(n_batches):
                z = logits[i].requires_grad_(True)
                loss = F.cross_entropy(z, labels[i])
                if penalty is not None:
                    loss = loss + penalty(z, rows[i], labels[i])
                loss.backward()
                z.grad = None

        return run

    fns = {"cross-entropy alone": step(None)} | {
        name: step(NeighbourhoodSmoothing(neighbors, initial, **kw))
        for name, kw in variants.items()
    }
    best = best_times(fns, repeats=max(args.repeats * 4, 8))
    base = best["cross-entropy alone"]
    print(
        f"loss call, forward + backward: batch {batch}, {n_classes} classes, k={k}, "
        f"n={n}, {torch.get_num_threads()} thread(s); fastest of repeats"
    )
    print(f"{'loss':38s} {'µs/call':>9s} {'vs CE':>7s}")
    for name, seconds in best.items():
        label = name if name == "cross-entropy alone" else f"CE + {name}"
        print(f"{label:38s} {seconds / n_batches * 1e6:9.1f} {seconds / base:7.2f}")
    return 0


def refinement_cost(X, y, args) -> int:
    """Seconds of the per-epoch temperature solve against the epoch, CE, no early stop."""
    clf = NeSCalClassifier(
        loss="ce",
        max_epochs=args.epochs,
        early_stopping="refinement",
        patience=args.epochs,
        random_state=0,
    ).fit(X, y)
    solve, epoch = np.array(clf.history_[:, "refinement_seconds"]), np.array(clf.history_[:, "dur"])
    n_val = int(np.ceil(clf.check_params()["validation_fraction"] * len(y)))
    print(
        f"data: {args.rows} rows x {args.features} features, {args.classes} classes "
        f"({n_val} validation rows); default MLP, CE, {args.epochs} epochs; "
        f"{torch.get_num_threads()} thread(s)"
    )
    print(f"{'measure':42s} {'median':>10s} {'max':>10s}")
    print(f"{'temperature solve s per epoch':42s} {np.median(solve):10.4g} {solve.max():10.4g}")
    print(
        f"{'epoch s (training + validation + solve)':42s} {np.median(epoch):10.4g} {epoch.max():10.4g}"
    )
    print(f"{'solve / epoch':42s} {np.median(solve / epoch):10.4f} {np.max(solve / epoch):10.4f}")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.loss_call:
        return loss_call(args)
    warnings.simplefilter("ignore")
    X, y = make_classification(
        args.rows,
        args.features,
        n_informative=min(20, args.features - 2),
        n_redundant=0,
        n_classes=args.classes,
        n_clusters_per_class=1,
        random_state=0,
    )
    X = X.astype(np.float32)
    if args.refinement:
        return refinement_cost(X, y, args)
    losses = {
        "js": lambda: ExperimentalNeSCalLoss(
            warmup=args.warmup,
            n_neighbors=args.neighbors,
            aggregation=args.aggregation,
            divergence="js",
            weight=1.0,
        ),
        "nescal": lambda: NeSCalLoss(warmup=args.warmup, n_neighbors=args.neighbors),
        "ce": lambda: "ce",
    }
    # Epochs after the graph epoch: the penalty is on for NeSCal, CE runs the same epochs.
    after = slice(args.warmup + 1, args.epochs)
    fastest = dict.fromkeys(losses, float("inf"))
    fitted = {}
    for _ in range(max(args.rounds, 1)):
        for name, make in losses.items():
            fitted[name] = fit(make(), X, y, args)
            # The fastest epoch of each run: interference from other processes only adds time.
            fastest[name] = min(fastest[name], float(np.min(fitted[name].history_[after, "dur"])))
    nescal, ce = fitted["nescal"], fitted["ce"]
    graph_row = nescal.history_[args.warmup]
    predict = best_times(
        {"nescal": lambda: nescal.predict_proba(X), "ce": lambda: ce.predict_proba(X)}, args.repeats
    )
    print(
        f"data: {args.rows} rows x {args.features} features, {args.classes} classes; "
        f"default MLP; k={args.neighbors}; NeSCal = default soft target, JS = the "
        f"paper's penalty ({args.aggregation}); {torch.get_num_threads()} thread(s), "
        f"{max(args.rounds, 1)} fit(s) of each"
    )
    print(f"{'measure':42s} {'NeSCal':>10s} {'CE':>10s} {'ratio':>7s}")
    rows = [
        ("fastest epoch s after warm-up (default)", fastest["nescal"], fastest["ce"]),
        (f"fastest epoch s after warm-up (JS {args.aggregation})", fastest["js"], fastest["ce"]),
        ("predict_proba seconds (best of repeats)", predict["nescal"], predict["ce"]),
        ("pickle bytes of the fitted estimator", len(pickle.dumps(nescal)), len(pickle.dumps(ce))),
    ]
    for name, a, b in rows:
        print(f"{name:42s} {a:10.4g} {b:10.4g} {a / b:7.3f}")
    print(
        f"graph build (epoch {args.warmup + 1}): {graph_row['graph_seconds']:.3f} s "
        f"= {graph_row['graph_seconds'] / fastest['ce']:.2f} CE epochs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
