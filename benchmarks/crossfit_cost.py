"""What the recommended model costs: its fit time at ``n_jobs=2`` against HGB + TS.

For each dataset (capped at 3000 rows, 80 % of them fitted, as in the out-of-fold study),
the script times, in the same run and on the same rows:

* HistGradientBoosting (scikit-learn's defaults) fitted on 75 % of the rows, then the
  package's temperature on the other 25 % (HGB + TS as users run it);
* ``make_recommended_classifier(n_jobs=2)`` fitted on all of them (the folds' members in
  two joblib workers, one thread each), preprocessing included;

and prints each time, the ratio of the two, and the median ratio (the issue's bar: at
most 8× in median). Wall seconds, best of ``--repeats`` runs each::

    python benchmarks/crossfit_cost.py                 # the 19 dev datasets
    python benchmarks/crossfit_cost.py --datasets phoneme wdbc --repeats 1

The machine should be otherwise idle: the ratio compares two parallel workers with one
thread of gradient boosting and temperature scaling.
"""

from __future__ import annotations

import argparse
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=None, help="local names (the dev suite)")
    parser.add_argument("--data-dir", type=Path, default=DATA, help="parquet + manifest.json")
    parser.add_argument("--max-rows", type=int, default=3000, help="rows per dataset")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs; the best is kept")
    parser.add_argument("--out", type=Path, default=None, help="write the table here too")
    parser.add_argument("--recipe", default=None, help="the recommended model's (the newest)")
    parser.add_argument("--backend", default="loky", help="joblib's: loky, or dask (2 workers)")
    return parser.parse_args(argv)


def _rows(name: str, data_dir: Path, max_rows: int, seed: int = 0):
    import pandas as pd
    from sklearn.model_selection import train_test_split

    frame = pd.read_parquet(data_dir / f"{name}.parquet")
    y = frame.pop("target").astype(str).to_numpy()
    if len(y) > max_rows:
        frame, _, y, _ = train_test_split(
            frame, y, train_size=max_rows, stratify=_strata(y), random_state=seed
        )
    X, _, y, _ = train_test_split(frame, y, test_size=0.2, stratify=_strata(y), random_state=seed)
    # a class of a few rows (shuttle's rarest) cannot be in both of HGB + TS's parts: the
    # timing drops it, for both models
    classes, counts = np.unique(y, return_counts=True)
    kept = np.isin(y, classes[counts >= 10])
    return X[kept], y[kept]


def _strata(y):
    """``y`` to stratify on, or None where a class has a single row (shuttle)."""
    return y if np.unique(y, return_counts=True)[1].min() > 1 else None


def _best(fit, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fit()
        times.append(time.perf_counter() - start)
    return min(times)


def hgb_ts(X, y):
    """HGB on 75 % of the rows, the package's temperature on the other 25 %."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.frozen import FrozenEstimator
    from sklearn.model_selection import train_test_split
    from threadpoolctl import threadpool_limits

    from nescal_sklearn import CalibratedTemperature, make_tabular_pipeline

    X_fit, X_cal, y_fit, y_cal = train_test_split(
        X, y, test_size=0.25, stratify=_strata(y), random_state=0
    )
    with threadpool_limits(1):
        model = make_tabular_pipeline(HistGradientBoostingClassifier(random_state=0))
        model.fit(X_fit, y_fit)
        return CalibratedTemperature(FrozenEstimator(model)).fit(X_cal, y_cal)


def recommended(X, y, recipe=None, backend="loky"):
    """The recommended model, its members on two joblib workers of ``backend``."""
    from joblib import parallel_backend

    from nescal_sklearn import make_recommended_classifier

    with parallel_backend(backend):
        return make_recommended_classifier(random_state=0, n_jobs=2, recipe=recipe).fit(X, y)


def main(argv=None) -> int:
    args = parse_args(argv)
    names = args.datasets
    if names is None:  # the study's datasets
        from nescal_bench import SUITES

        names = SUITES["dev"]
    lines = [
        f"| dataset | rows | HGB + TS s | recommended (n_jobs=2, {args.backend}) s | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    if args.backend == "dask":  # two single-threaded workers, as n_jobs=2 on loky
        from distributed import Client

        client = Client(n_workers=2, threads_per_worker=1)
    ratios = []
    for name in names:
        X, y = _rows(name, args.data_dir, args.max_rows)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = _best(lambda X=X, y=y: hgb_ts(X, y), args.repeats)
            fit = partial(recommended, X, y, args.recipe, args.backend)
            ours = _best(fit, args.repeats)
        ratios.append(ours / base)
        lines.append(f"| {name} | {len(y)} | {base:.2f} | {ours:.2f} | {ours / base:.1f}× |")
        print(lines[-1], flush=True)
    if args.backend == "dask":
        client.close()
    lines.append(f"| median | | | | {np.median(ratios):.1f}× |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out is not None:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
