"""What ``NeSCalClassifier(n_threads=...)`` is worth: fit time alone and side by side.

Measures the wall time of one fit of a cross-entropy MLP (``--rows`` x ``--features``,
``--epochs`` epochs, no early stopping) in three settings, each at ``n_threads=1`` and at
``n_threads=None`` (the process's torch default: as many threads as cores):

* **alone**: one fit, nothing else running (of this script);
* **side by side**: ``--jobs`` fits at once in joblib workers (loky), as
  ``GridSearchCV(n_jobs=...)`` runs them;
* **grid search**: a real ``GridSearchCV(n_jobs=--jobs)`` over two learning rates, 2-fold
  (four fits), timed end to end.

Every figure is printed with its ratio to ``n_threads=1`` measured in the same run, so a
slower or faster machine changes the seconds but not the comparison. Each setting runs
``--rounds`` times in rotation and keeps its fastest round (other processes only add
time). The default of ``n_threads`` is chosen from these figures (docs/nescal.md,
"Threads").

Examples
--------
Smoke run (seconds)::

    python benchmarks/threads.py --quick

The documented run (about 3 minutes on 2 cores)::

    python benchmarks/threads.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.datasets import make_classification
from sklearn.model_selection import GridSearchCV

from nescal_sklearn import NeSCalClassifier


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fit time at n_threads=1 vs torch's default.")
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2, help="fits side by side")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.features, args.epochs, args.rounds = 600, 8, 2, 1
    return args


def _model(n_threads, epochs: int) -> NeSCalClassifier:
    return NeSCalClassifier(
        loss="ce",
        early_stopping=False,
        max_epochs=epochs,
        lr=1e-3,
        n_threads=n_threads,
        random_state=0,
    )


def alone(n_threads, X, y, args) -> float:
    """Seconds of one fit."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _model(n_threads, args.epochs).fit(X, y)
    return time.perf_counter() - start


def side_by_side(n_threads, X, y, args) -> float:
    """Wall time of the slowest of ``--jobs`` simultaneous fits (each one's own fit time)."""
    jobs = (delayed(alone)(n_threads, X, y, args) for _ in range(args.jobs))
    return max(Parallel(n_jobs=args.jobs, backend="loky")(jobs))


def grid_search(n_threads, X, y, args) -> float:
    search = GridSearchCV(
        _model(n_threads, args.epochs), {"lr": [1e-3, 3e-3]}, cv=2, n_jobs=args.jobs
    )
    start = time.perf_counter()
    search.fit(X, y)
    return time.perf_counter() - start


SETTINGS = {"alone": alone, "side by side": side_by_side, "grid search": grid_search}


def main(argv=None) -> int:
    args = parse_args(argv)
    X, y = make_classification(
        n_samples=args.rows,
        n_features=args.features,
        n_informative=args.features // 2,
        n_classes=3,
        random_state=0,
    )
    X = X.astype(np.float32)
    print(
        f"{args.rows} rows x {args.features} features, {args.epochs} CE epochs, "
        f"{os.cpu_count()} cores, {args.jobs} jobs side by side, best of {args.rounds} rounds"
    )
    # An untimed warm-up of every setting: imports, torch's first calls, loky's workers.
    warm = argparse.Namespace(**{**vars(args), "epochs": 1})
    for run in SETTINGS.values():
        for n_threads in (1, None):
            run(n_threads, X[:500], y[:500], warm)
    best: dict = {}
    for _ in range(args.rounds):
        for setting, run in SETTINGS.items():
            for n_threads in (1, None):
                key = (setting, n_threads)
                best[key] = min(best.get(key, np.inf), run(n_threads, X, y, args))
    print(f"{'setting':<14} {'n_threads=1':>12} {'n_threads=None':>15} {'ratio None/1':>13}")
    for setting in SETTINGS:
        one, default = best[(setting, 1)], best[(setting, None)]
        print(f"{setting:<14} {one:>11.2f}s {default:>14.2f}s {default / one:>12.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
