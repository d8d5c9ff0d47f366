"""What a built-in ensemble costs: fit and predict_proba time of
``NeSCalClassifier(module_kwargs={"n_members": k})``.

Prints, for k in 1, 2, 4, 8, the seconds per training epoch (cross-entropy, no early
stopping, so every k trains the same number of epochs) and per ``predict_proba`` call on
the test rows, each the median of ``--repeats`` runs, and their ratio to k = 1 measured in
the same run. One torch thread (the estimator's default)::

    python benchmarks/ensemble_cost.py            # 20 000 x 30 rows, MLP 256-256
    python benchmarks/ensemble_cost.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="training rows (and test rows)")
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--members", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 600 rows, 1 epoch")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    return parser.parse_args(argv)


def measure(k: int, X, y, X_test, epochs: int, hidden: tuple[int, ...]) -> tuple[float, float]:
    """Seconds per epoch of a fit, and seconds of one predict_proba on ``X_test``."""
    from nescal_sklearn import NeSCalClassifier

    clf = NeSCalClassifier(
        "ce",
        module_kwargs={"n_members": k},
        hidden_sizes=hidden,
        max_epochs=epochs,
        early_stopping=False,
        random_state=0,
    )
    start = time.perf_counter()
    clf.fit(X, y)
    fit = (time.perf_counter() - start) / epochs
    start = time.perf_counter()
    clf.predict_proba(X_test)
    return fit, time.perf_counter() - start


def main(argv=None) -> int:
    args = parse_args(argv)
    rows, epochs, repeats, hidden = args.rows, args.epochs, args.repeats, (256, 256)
    if args.quick:
        rows, epochs, repeats, hidden = 600, 1, 1, (16,)
    X, y = make_classification(
        2 * rows, n_features=args.features, n_informative=10, n_classes=3, random_state=0
    )
    X = X.astype(np.float32)
    X_train, y_train, X_test = X[:rows], y[:rows], X[rows:]
    members = [1, 4] if args.quick else args.members
    results = {}
    for k in members:
        runs = [measure(k, X_train, y_train, X_test, epochs, hidden) for _ in range(repeats)]
        results[k] = tuple(float(np.median(v)) for v in zip(*runs, strict=True))
    lines = [
        f"{rows} training rows x {args.features} features, MLP {hidden}, 1 thread, median of {repeats} runs",
        "",
        "| members | s per epoch | ratio to n_members=1 | predict_proba s | ratio to n_members=1 |",
        "|---|---|---|---|---|",
    ]
    fit1, pred1 = results[members[0]]
    for k, (fit, pred) in results.items():
        lines.append(
            f"| n_members={k} | {fit:.3f} | {fit / fit1:.2f}× | {pred:.4f} | {pred / pred1:.2f}× |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
