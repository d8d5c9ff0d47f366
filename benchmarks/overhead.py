"""What NeSCal costs: training-epoch time, predict time and model size against CE.

Every ratio is NeSCal / CE measured side by side in the same run, on the same data
and module (the default MLP). The graph-build scaling study (10k to 1M rows, exact
vs approximate) is ``benchmarks/graph_build.py``.

Examples
--------
Smoke run (seconds)::

    python benchmarks/overhead.py --quick

Default run (about a minute on 2 cores)::

    python benchmarks/overhead.py
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_classification

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.losses import NeSCalLoss


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="NeSCal vs CE: epoch time, predict time, size.")
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--neighbors", type=int, default=10)
    parser.add_argument("--aggregation", default="pairwise", choices=["pairwise", "mean"])
    parser.add_argument("--repeats", type=int, default=30, help="predict_proba timing repeats")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.features, args.epochs, args.warmup, args.repeats = 600, 10, 4, 1, 2
    return args


def fit(loss, X, y, args) -> NeSCalClassifier:
    return NeSCalClassifier(
        loss=loss, max_epochs=args.epochs, early_stopping=False, random_state=0
    ).fit(X, y)


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    args = parse_args(argv)
    warnings.simplefilter("ignore")
    X, y = make_classification(
        args.rows, args.features, n_informative=min(20, args.features - 2), n_redundant=0, n_classes=args.classes,
        n_clusters_per_class=1, random_state=0,
    )
    X = X.astype(np.float32)
    js = fit(
        NeSCalLoss(
            warmup=args.warmup, n_neighbors=args.neighbors, aggregation=args.aggregation,
            divergence="js", weight=1.0,
        ),
        X, y, args,
    )
    nescal = fit(NeSCalLoss(warmup=args.warmup, n_neighbors=args.neighbors), X, y, args)
    ce = fit("ce", X, y, args)
    # Epochs after the graph epoch: the penalty is on for NeSCal, CE runs the same epochs.
    after = slice(args.warmup + 1, args.epochs)
    # The fastest epoch of each run: interference from other processes only adds time.
    dur_js = np.min(js.history_[after, "dur"])
    dur_nescal = np.min(nescal.history_[after, "dur"])
    dur_ce = np.min(ce.history_[after, "dur"])
    graph_row = nescal.history_[args.warmup]
    predict_nescal = best_time(lambda: nescal.predict_proba(X), args.repeats)
    predict_ce = best_time(lambda: ce.predict_proba(X), args.repeats)
    size_nescal, size_ce = len(pickle.dumps(nescal)), len(pickle.dumps(ce))
    print(f"data: {args.rows} rows x {args.features} features, {args.classes} classes; "
          f"default MLP; k={args.neighbors}; NeSCal = default soft target, JS = the "
          f"paper's penalty ({args.aggregation})")
    print(f"{'measure':42s} {'NeSCal':>10s} {'CE':>10s} {'ratio':>7s}")
    rows = [
        ("fastest epoch s after warm-up (default)", dur_nescal, dur_ce),
        (f"fastest epoch s after warm-up (JS {args.aggregation})", dur_js, dur_ce),
        ("predict_proba seconds (best of repeats)", predict_nescal, predict_ce),
        ("pickle bytes of the fitted estimator", size_nescal, size_ce),
    ]
    for name, a, b in rows:
        print(f"{name:42s} {a:10.4g} {b:10.4g} {a / b:7.3f}")
    print(f"graph build (epoch {args.warmup + 1}): {graph_row['graph_seconds']:.3f} s "
          f"= {graph_row['graph_seconds'] / dur_ce:.2f} CE epochs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
