"""NeSCal vs cross-entropy and label smoothing under input shift and on out-of-distribution rows.

Protocol, per dataset of the local suite and per seed (default 3 4 5, the confirm seeds
of the study): a stratified cap at ``--max-rows`` rows (the runner's cap, so the data
match ``nescal-bench`` runs with the same ``max_rows``), a stratified 60/20/20 split with
the tabular preprocessing fitted on the training rows (numeric columns standardised,
categoricals one-hot), then every method is trained with early stopping on the
validation rows and a temperature is fitted on the same validation rows
(``CalibratedTemperature`` around ``FrozenEstimator``). Each model is evaluated raw and
after temperature scaling (TS) on conditions built from the preprocessed test matrix,
seeded by the seed and the condition's name (so every method sees the same rows):

* ``clean``: the test rows;
* ``noise_0.5``, ``noise_1.0``: Gaussian noise of that standard deviation added to every
  entry (in units of each feature's training standard deviation);
* ``missing_20``: 20 % of the entries replaced by 0 (the training mean of a standardised
  column; for a one-hot column it means "not this category");

with test NLL, top-label ECE (15 bins), Brier and accuracy; and two out-of-distribution
sets as large as the test set,

* ``ood_shuffled``: every column of the test matrix permuted on its own (marginals kept,
  dependencies between features destroyed);
* ``ood_far``: the test rows multiplied by 4 (far from the training data, where ReLU
  networks extrapolate with growing confidence);

with the AUROC of telling test rows (0) from OOD rows (1) by predictive entropy, and the
mean max-probability on the OOD rows.

Every finished (dataset, seed, method) is appended to ``OUT/records.jsonl`` (a rerun
skips those already there); the paired comparisons across datasets (count of datasets
where a method beats the reference on seed-mean NLL, or AUROC for the OOD sets, median
relative change, Wilcoxon signed-rank p) and per-dataset tables go to ``OUT/summary.md``.

Examples
--------
Smoke run (seconds)::

    python benchmarks/shift.py --quick --out /tmp/shift_quick

The full study (19 datasets x 3 seeds x 3 methods: about 10 minutes on 2 cores)::

    python benchmarks/shift.py --out results/shift

Rebuild the summary from records, pooling several folders::

    python benchmarks/shift.py --summary-only --from results/shift results/shift_more
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

import numpy as np
from scipy.special import entr
from scipy.stats import wilcoxon
from sklearn.metrics import roc_auc_score

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.benchmark import (
    Split,
    evaluate_proba,
    fit_and_evaluate,
    list_local_datasets,
    load_local_dataset,
    stratified_split,
)
from nescal_sklearn.benchmark._data import _subsample
from nescal_sklearn.benchmark._fit import limit_threads

DEFAULT_SPECS: dict[str, dict] = {
    "ce": {"loss": "ce"},
    "label_smoothing": {"loss": "label_smoothing", "params": {"epsilon": 0.1}},
    # the package defaults, pinned so that records stay comparable if a default changes
    "nescal": {
        "loss": "nescal",
        "params": {"warmup": "auto", "divergence": "soft_target", "weight": 1.0},
    },
}

STAGES = ("raw", "ts")

Corruption = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def add_gaussian_noise(X: np.ndarray, rng: np.random.Generator, *, sd: float) -> np.ndarray:
    """``X`` plus independent N(0, sd^2) noise on every entry (same dtype as ``X``)."""
    noise = rng.standard_normal(X.shape).astype(X.dtype, copy=False)
    return X + np.asarray(sd, dtype=X.dtype) * noise


def zero_entries(X: np.ndarray, rng: np.random.Generator, *, fraction: float) -> np.ndarray:
    """A copy of ``X`` with ``round(fraction * X.size)`` entries, drawn uniformly without
    replacement, set to 0."""
    out = X.copy()
    chosen = rng.choice(X.size, size=round(fraction * X.size), replace=False)
    out.flat[chosen] = 0
    return out


def shuffle_columns(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A copy of ``X`` with each column permuted independently."""
    return np.column_stack([rng.permutation(column) for column in X.T]).astype(X.dtype)


def scale_rows(
    X: np.ndarray, rng: np.random.Generator | None = None, *, factor: float = 4.0
) -> np.ndarray:
    """``X`` multiplied by ``factor`` (``rng`` is unused; kept for a common signature)."""
    return X * np.asarray(factor, dtype=X.dtype)


SHIFTS: dict[str, Corruption] = {
    "clean": lambda X, rng: X,
    "noise_0.5": partial(add_gaussian_noise, sd=0.5),
    "noise_1.0": partial(add_gaussian_noise, sd=1.0),
    "missing_20": partial(zero_entries, fraction=0.2),
}

OOD_SETS: dict[str, Corruption] = {
    "ood_shuffled": shuffle_columns,
    "ood_far": partial(scale_rows, factor=4.0),
}


def condition_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of one condition: fixed by the seed and the condition's name."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def build_conditions(
    X_test: np.ndarray, seed: int, corruptions: dict[str, Corruption]
) -> dict[str, np.ndarray]:
    """Each corruption applied to ``X_test`` with its own seeded generator."""
    return {name: fn(X_test, condition_rng(seed, name)) for name, fn in corruptions.items()}


def predictive_entropy(proba: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of ``proba``."""
    return entr(np.asarray(proba, dtype=np.float64)).sum(axis=1)


def ood_metrics(proba_in: np.ndarray, proba_out: np.ndarray) -> dict[str, float]:
    """AUROC of in- (0) vs out-of-distribution (1) rows scored by predictive entropy,
    and the mean max-probability on the out-of-distribution rows."""
    labels = np.r_[np.zeros(len(proba_in)), np.ones(len(proba_out))]
    scores = np.r_[predictive_entropy(proba_in), predictive_entropy(proba_out)]
    return {
        "auroc": float(roc_auc_score(labels, scores)),
        "max_proba": float(np.mean(np.max(proba_out, axis=1))),
    }


def evaluate_model(model, split: Split, shifted: dict, ood: dict) -> dict[str, dict]:
    """Metrics of ``model`` on every shifted test matrix and every OOD set."""
    out = {
        name: evaluate_proba(split.y_test, model.predict_proba(X), split.classes)
        for name, X in shifted.items()
    }
    proba_in = model.predict_proba(split.X_test)
    for name, X in ood.items():
        out[name] = ood_metrics(proba_in, model.predict_proba(X))
    return out


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=None, help="manifest names (default: all)")
    parser.add_argument("--data-dir", default=None, help="folder with manifest.json")
    parser.add_argument(
        "--methods", nargs="*", default=list(DEFAULT_SPECS),
        help=f"method names: {sorted(DEFAULT_SPECS)} or any loss name",
    )
    parser.add_argument(
        "--method-spec", action="append", default=[], metavar="NAME=JSON",
        help='a named variant: NAME={"loss": "nescal", "params": {"weight": 3.0}}; '
        "repeatable, appended to --methods",
    )
    parser.add_argument(
        "--references", nargs="*", default=["ce", "label_smoothing"],
        help="methods every other is compared with (skipped when not recorded)",
    )
    parser.add_argument("--seeds", nargs="*", type=int, default=[3, 4, 5])
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--patience", type=int, default=10)
    parser.add_argument("--max-rows", type=int, default=3000, help="stratified subsample cap")
    parser.add_argument("--hidden", nargs="*", type=int, default=[256, 256])
    parser.add_argument("--threads", type=int, default=1, help="torch / BLAS threads per fit")
    parser.add_argument("--out", default="results/shift")
    parser.add_argument("--summary-only", action="store_true", help="rebuild summary.md, no fits")
    parser.add_argument(
        "--from", dest="sources", nargs="+", default=None, metavar="DIR",
        help="with --summary-only: folders whose records.jsonl are pooled (default: --out)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args(argv)
    args.specs = {name: DEFAULT_SPECS.get(name, {"loss": name}) for name in args.methods}
    for item in args.method_spec:
        name, _, spec = item.partition("=")
        args.specs[name] = json.loads(spec)
    args.methods = list(args.specs)
    if args.quick:
        args.datasets = args.datasets or ["diabetes"]
        args.seeds = [3]
        args.max_epochs = 3
        args.max_rows = 300
    return args


def make_estimator(method: str, seed: int, args) -> NeSCalClassifier:
    """The unfitted estimator of ``method``; its loss params become ``loss__<name>``."""
    spec = args.specs[method]
    loss_params = {f"loss__{k}": v for k, v in spec.get("params", {}).items()}
    est = NeSCalClassifier(
        loss=spec["loss"],
        random_state=seed,
        max_epochs=args.max_epochs,
        patience=args.patience,
        hidden_sizes=tuple(args.hidden),
    )
    return est.set_params(**loss_params) if loss_params else est


def load_split(name: str, seed: int, args) -> Split:
    """The capped (runner's stratified cap) and preprocessed 60/20/20 split of ``seed``."""
    data = load_local_dataset(name, args.data_dir)
    X, y = _subsample(data.X, np.asarray(data.y), args.max_rows)
    if hasattr(X, "reset_index"):
        X = X.reset_index(drop=True)
    return stratified_split(X, y, seed=seed)


def fit_one(method: str, seed: int, split: Split, conditions: tuple[dict, dict], args) -> dict:
    """Fit one method, temperature-scale it, and evaluate both on every condition."""
    with limit_threads(args.threads):
        result = fit_and_evaluate(make_estimator(method, seed, args), split, keep_models=True)
        shifted, ood = conditions
        stages = {
            "raw": evaluate_model(result.estimator, split, shifted, ood),
            "ts": evaluate_model(result.calibrated, split, shifted, ood),
        }
    return {
        "method": method,
        "spec": args.specs[method],
        **stages,
        "temperature": result.temperature,
        "fit_seconds": result.fit_seconds,
        **result.extra,
        "settings": {
            "max_rows": args.max_rows, "max_epochs": args.max_epochs,
            "patience": args.patience, "hidden": list(args.hidden), "threads": args.threads,
        },
    }


def record_key(rec: dict) -> tuple:
    return rec["dataset"], rec["seed"], rec["method"]


def read_records(folders: Iterable[str | Path]) -> list[dict]:
    """Records of the ``records.jsonl`` of each folder; a key seen twice counts once."""
    seen: dict[tuple, dict] = {}
    for folder in folders:
        path = Path(folder) / "records.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    seen.setdefault(record_key(rec), rec)
    return list(seen.values())


def run(args) -> list[dict]:
    """Fit every planned (dataset, seed, method) not yet recorded; return the plan's records."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / "records.jsonl"
    done = {record_key(rec): rec for rec in read_records([out])}
    names = args.datasets or [e["name"] for e in list_local_datasets(args.data_dir)]
    plan = [(d, s, m) for d in names for s in args.seeds for m in args.methods]
    todo = [key for key in plan if key not in done]
    print(f"{len(plan)} fits planned, {len(plan) - len(todo)} already recorded in {records_path}",
          file=sys.stderr, flush=True)
    current: tuple = (None, None, None)
    skipped: dict[str, str] = {}
    for i, (name, seed, method) in enumerate(todo, 1):
        if name in skipped:
            continue
        if current[0] != (name, seed):
            try:
                split = load_split(name, seed, args)
            except ValueError as error:  # e.g. a class too rare for a 3-way stratified split
                skipped[name] = str(error)
                print(f"skipping {name}: {error}", file=sys.stderr, flush=True)
                continue
            conditions = (
                build_conditions(split.X_test, seed, SHIFTS),
                build_conditions(split.X_test, seed, OOD_SETS),
            )
            current = ((name, seed), split, conditions)
        _, split, conditions = current
        start = time.perf_counter()
        rec = {"dataset": name, "seed": seed, **fit_one(method, seed, split, conditions, args)}
        with records_path.open("a") as handle:
            handle.write(json.dumps(rec) + "\n")
        done[(name, seed, method)] = rec
        print(
            f"[{i}/{len(todo)}] {name} seed={seed} {method}: "
            f"clean NLL {rec['raw']['clean']['nll']:.4f} -> TS {rec['ts']['clean']['nll']:.4f}, "
            f"ood_far AUROC {rec['raw']['ood_far']['auroc']:.3f} "
            f"[{time.perf_counter() - start:.1f} s, {rec.get('n_epochs')} ep]",
            file=sys.stderr, flush=True,
        )
    return [done[key] for key in plan if key in done and key[0] not in skipped]


# --------------------------------------------------------------------------- summary


def seed_means(records: list[dict]) -> dict:
    """(method, dataset) -> stage -> condition -> metric -> mean over seeds."""
    lists: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    for rec in records:
        for stage in STAGES:
            for condition, metrics in rec[stage].items():
                for metric, value in metrics.items():
                    lists[(rec["method"], rec["dataset"])][stage][condition][metric].append(value)
    return {
        key: {
            stage: {c: {m: float(np.mean(v)) for m, v in ms.items()} for c, ms in conds.items()}
            for stage, conds in stages.items()
        }
        for key, stages in lists.items()
    }


def _ordered(values: Iterable) -> list:
    return list(dict.fromkeys(values))


def compare(
    means: dict, method: str, reference: str | tuple[str, ...], stage: str, condition: str
) -> dict | None:
    """Paired comparison over the datasets both methods have: NLL (lower is better) on a
    shift condition, AUROC (higher is better) on an OOD set.

    A tuple ``reference`` is, per dataset, the best of its methods on that condition and
    stage (a hindsight choice that favours the reference)."""
    refs = (reference,) if isinstance(reference, str) else tuple(reference)
    datasets = [
        d for (m, d) in means
        if m == method and condition in means[(m, d)][stage]
        and all((r, d) in means and condition in means[(r, d)][stage] for r in refs)
    ]
    if not datasets:
        return None
    metric = "auroc" if "auroc" in means[(method, datasets[0])][stage][condition] else "nll"
    sign = -1.0 if metric == "auroc" else 1.0
    best = {
        d: min(refs, key=lambda r, d=d: sign * means[(r, d)][stage][condition][metric])
        for d in datasets
    }
    ours = np.array([means[(method, d)][stage][condition][metric] for d in datasets])
    theirs = np.array([means[(best[d], d)][stage][condition][metric] for d in datasets])
    changes = 100.0 * (ours - theirs) / theirs
    better = ours > theirs if metric == "auroc" else ours < theirs
    p = float("nan")
    if len(changes) >= 2 and np.any(changes != 0):
        p = float(wilcoxon(changes, zero_method="wilcox").pvalue)
    acc = None
    if metric == "nll":
        acc = float(np.median([
            means[(method, d)][stage][condition]["accuracy"]
            - means[(best[d], d)][stage][condition]["accuracy"]
            for d in datasets
        ]))
    return {
        "metric": metric, "n": len(datasets), "better": int(np.sum(better)),
        "median_change": float(np.median(changes)), "p": p, "accuracy_change": acc,
    }


def _comparison_lines(means, methods, conditions, reference) -> list[str]:
    refs = (reference,) if isinstance(reference, str) else tuple(reference)
    title = (
        f"`{reference}`" if isinstance(reference, str)
        else "the better of " + " and ".join(f"`{r}`" for r in refs) + " (per dataset)"
    )
    lines = [
        f"## Against {title}\n",
        "| method | condition | stage | metric | better on | median change | Wilcoxon p "
        "| median accuracy change |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for condition in conditions:
        for stage in STAGES:
            for method in methods:
                if method in refs:
                    continue
                c = compare(means, method, reference, stage, condition)
                if c is None:
                    continue
                acc = "–" if c["accuracy_change"] is None else f"{100 * c['accuracy_change']:+.2f} pt"
                word = "higher" if c["metric"] == "auroc" else "lower"
                lines.append(
                    f"| {method} | {condition} | {stage} | {c['metric'].upper()} | "
                    f"{word} on {c['better']}/{c['n']} | {c['median_change']:+.2f} % | "
                    f"{c['p']:.3g} | {acc} |"
                )
    return lines + [""]


def _dataset_table(means, methods, datasets, cell: Callable[[dict], str]) -> list[str]:
    lines = ["| dataset | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for d in datasets:
        cells = [cell(means[(m, d)]) if (m, d) in means else "–" for m in methods]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return lines + [""]


def _value(stages: dict, stage: str, condition: str, metric: str) -> str:
    value = stages[stage].get(condition, {}).get(metric)
    return "–" if value is None else f"{value:.4f}"


def summarise(records: list[dict], references: Iterable[str] = ("ce", "label_smoothing")) -> str:
    """Markdown summary of shift / OOD records: paired comparisons against each reference
    present, then per-dataset tables (seed means)."""
    means = seed_means(records)
    methods = _ordered(r["method"] for r in records)
    datasets = _ordered(r["dataset"] for r in records)
    seeds = sorted({r["seed"] for r in records})
    conditions = _ordered(c for r in records for c in r["raw"])
    oods = [c for c in conditions if any("auroc" in r["raw"].get(c, {}) for r in records)]
    shifts = [c for c in conditions if c not in oods]
    lines = [
        f"# Shift and OOD study: {len(datasets)} datasets, seeds {seeds}, "
        f"methods {', '.join(methods)}\n",
        "Shift conditions compare test NLL (better = lower); OOD sets compare the AUROC "
        "of telling test rows from OOD rows by predictive entropy (better = higher). "
        "Changes are relative to the reference, per dataset (mean over seeds); the median "
        "over datasets is shown.\n",
    ]
    references = [r for r in references if r in methods]
    for reference in references:
        lines += _comparison_lines(means, methods, conditions, reference)
    if len(references) > 1:
        lines += _comparison_lines(means, methods, conditions, tuple(references))
    lines.append("## Test NLL after temperature scaling, mean over seeds\n")
    for condition in shifts:
        lines.append(f"### {condition}\n")
        lines += _dataset_table(
            means, methods, datasets, lambda s, c=condition: _value(s, "ts", c, "nll")
        )
    lines.append("## OOD detection, mean over seeds (raw / after TS)\n")
    for condition in oods:
        for metric, title in (("auroc", "AUROC by predictive entropy"),
                              ("max_proba", "mean max-probability on the OOD rows")):
            lines.append(f"### {condition}: {title}\n")
            lines += _dataset_table(
                means, methods, datasets,
                lambda s, c=condition, m=metric: f"{_value(s, 'raw', c, m)} / {_value(s, 'ts', c, m)}",
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    if args.summary_only:
        records = read_records(args.sources or [args.out])
        if not records:
            print(f"no records in {args.sources or [args.out]}", file=sys.stderr)
            return 1
    else:
        records = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(records, args.references)
    (out / "summary.md").write_text(summary)
    print(summary)
    print(f"done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
