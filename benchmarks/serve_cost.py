"""What serving the recommended model costs: its predictions against HGB + TS's.

On one full-size dataset (the 60/20/20 split of seed 0), the script fits, in one run:

* ``hgb``: HistGradientBoosting on the training rows, and a temperature on the validation
  rows (HGB + TS, the anchor);
* ``cross-fitted``: the recommended model's ensemble (``CrossFitClassifier`` with the
  recipe's members, ``n_jobs=2``) on the training and validation rows;
* ``lean``: the same with ``refit=True`` (one model per member, refitted on all rows);

then times ``predict_proba`` on the test rows (the fastest of ``--repeats`` calls, in
milliseconds per 1,000 rows, every pool on ``--threads`` threads as in the lab's
full-size study), each member of the lean model alone, and the cost of one
call of the two ways of setting a network's threads: ``limit_threads`` (torch's, and every
BLAS and OpenMP pool's through threadpoolctl, which scans the process's libraries) and
``torch_threads`` (torch's alone, what prediction uses)::

    python benchmarks/serve_cost.py --dataset magic-telescope
    python benchmarks/serve_cost.py --quick   # smoke run (600 synthetic rows, seconds)

The machine should be otherwise idle: the times are wall times.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.frozen import FrozenEstimator

from nescal_bench import load_local_dataset, stratified_split
from nescal_sklearn import CalibratedTemperature, make_recommended_classifier
from nescal_sklearn.estimator import limit_threads, torch_threads


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="magic-telescope", help="a local dataset")
    parser.add_argument("--recipe", default=None, help="the recommended model's (the newest)")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls; the best is kept")
    parser.add_argument("--threads", type=int, default=2, help="every pool's, as the lab's")
    parser.add_argument("--quick", action="store_true", help="smoke run on 600 rows")
    return parser.parse_args(argv)


def split_rows(dataset: str, quick: bool):
    """Training, validation and test rows (float32) and labels of the split of seed 0."""
    data = None if quick else load_local_dataset(dataset)
    X, y = make_classification(600, random_state=0) if quick else (data.X, np.asarray(data.y))
    s = stratified_split(X, y, seed=0)
    rows = [np.asarray(part, dtype=np.float32) for part in (s.X_train, s.X_val, s.X_test)]
    return rows, [np.asarray(part) for part in (s.y_train, s.y_val)]


def best_ms(call, repeats: int) -> float:
    """The fastest of ``repeats`` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def fit_models(rows, labels, args) -> dict:
    """HGB + TS, and the recommended ensemble cross-fitted and lean (with fit seconds)."""
    (X_train, X_val, _), (y_train, y_val) = rows, labels
    X_fit, y_fit = np.concatenate([X_train, X_val]), np.concatenate([y_train, y_val])
    ensemble = make_recommended_classifier(random_state=0, n_jobs=2, recipe=args.recipe)[-1]
    if args.quick:
        ensemble.set_params(nescal__max_epochs=3, nescal__loss__warmup=1)
    models, seconds = {}, {}
    start = time.perf_counter()
    hgb = HistGradientBoostingClassifier(random_state=0).fit(X_train, y_train)
    models["hgb"] = CalibratedTemperature(FrozenEstimator(hgb)).fit(X_val, y_val)
    seconds["hgb"] = time.perf_counter() - start
    for name, refit in (("cross-fitted", False), ("lean", True)):
        start = time.perf_counter()
        models[name] = clone(ensemble).set_params(refit=refit).fit(X_fit, y_fit)
        seconds[name] = time.perf_counter() - start
    return {"models": models, "seconds": seconds}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.dataset, args.repeats = "600 synthetic rows", 2
    rows, labels = split_rows(args.dataset, args.quick)
    with limit_threads(args.threads):
        return report(rows, labels, args)


def report(rows, labels, args) -> int:
    """Fit the models and print the table (under the run's thread limit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = fit_models(rows, labels, args)
    X_test, per = rows[2], 1000 / len(rows[2])
    print(f"{args.dataset}: {len(labels[0]) + len(labels[1])} rows fitted, {len(X_test)} test rows")
    print("\n| model | fit s | predict ms / 1000 rows | × HGB + TS's |\n|---|---:|---:|---:|")
    times = {}
    for name, model in fitted["models"].items():
        times[name] = per * best_ms(lambda m=model: m.predict_proba(X_test), args.repeats)
        ratio = times[name] / times["hgb"]
        print(f"| {name} | {fitted['seconds'][name]:.1f} | {times[name]:.2f} | {ratio:.2f}× |")
    lean = fitted["models"]["lean"]
    print("\nThe lean model's members (weight, predict ms / 1000 rows):\n")
    for (name, _), weight, member in zip(
        lean.estimators, lean.weights_, lean.refitted_, strict=True
    ):
        if member is not None:
            ms = per * best_ms(lambda m=member: m.predict_proba(X_test), args.repeats)
            print(f"* {name}: weight {weight:.2f}, {ms:.2f} ms")
    best_ms(_enter_exit(limit_threads), 1)  # threadpoolctl's first scan loads its libraries
    scan = best_ms(_enter_exit(limit_threads), args.repeats)
    light = best_ms(_enter_exit(torch_threads), args.repeats)
    print(f"\nOne call: limit_threads {scan:.3f} ms, torch_threads {light:.3f} ms (best of")
    print(f"{args.repeats}); a network's prediction sets its threads once per call.")
    return 0


def _enter_exit(context):
    def call():
        with context(1):
            pass

    return call


if __name__ == "__main__":
    raise SystemExit(main())
