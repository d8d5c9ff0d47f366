"""NeSCal vs cross-entropy (and any other registered loss) on the local dev suite.

Protocol: stratified 60/20/20 train / validation / test per seed; the validation part
serves early stopping (when on) and the temperature of ``CalibratedTemperature``;
test NLL, ECE, Brier and accuracy are reported raw and after temperature scaling.
Two training protocols: ``early_stopping`` (on validation NLL, best epoch restored)
and ``fixed`` (``--max-epochs`` epochs, no early stopping).

Every finished fit is appended to ``OUT/records.jsonl`` (a rerun skips fits already
there), and the summary tables are written to ``OUT/summary.md``.

Examples
--------
Smoke run (seconds)::

    python benchmarks/quality.py --quick

The full comparison (hours on 2 cores)::

    python benchmarks/quality.py --seeds 0 1 2 --out results/quality
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.benchmark import (
    fit_and_evaluate,
    list_local_datasets,
    load_local_dataset,
    stratified_split,
)

PROTOCOLS = ("early_stopping", "fixed")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=None, help="manifest names (default: all)")
    parser.add_argument("--data-dir", default=None, help="folder with manifest.json")
    parser.add_argument("--methods", nargs="*", default=["ce", "nescal"], help="loss names")
    parser.add_argument(
        "--method-spec", action="append", default=[], metavar="NAME=JSON",
        help='a named variant: NAME={"loss": "nescal", "params": {"warmup": "auto"}}; '
        "repeatable, appended to --methods",
    )
    parser.add_argument("--baseline", default="ce", help="method every other is compared with")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--protocols", nargs="*", default=list(PROTOCOLS), choices=PROTOCOLS)
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--max-rows", type=int, default=None, help="stratified subsample cap")
    parser.add_argument("--hidden", nargs="*", type=int, default=[256, 256])
    parser.add_argument(
        "--loss-param", action="append", default=[], metavar="NAME=VALUE",
        help="nested loss parameter for non-baseline methods, e.g. weight=2.0 (JSON value)",
    )
    parser.add_argument("--out", default="results/quality")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args(argv)
    args.specs = {name: {"loss": name, "params": {}} for name in args.methods}
    for item in args.method_spec:
        name, _, spec = item.partition("=")
        args.specs[name] = json.loads(spec)
    args.methods = list(args.specs)
    if args.baseline not in args.specs:
        parser.error(f"--baseline {args.baseline!r} is not among the methods {args.methods}")
    if args.quick:
        args.datasets = args.datasets or ["wdbc"]
        args.seeds = [0]
        args.max_epochs = 4
        args.hidden = [32]
        args.max_rows = args.max_rows or 300
    return args


def make_estimator(method: str, protocol: str, args) -> NeSCalClassifier:
    spec = args.specs[method]
    loss_params = {f"loss__{k}": v for k, v in spec.get("params", {}).items()}
    if method != args.baseline:
        for item in args.loss_param:
            key, _, value = item.partition("=")
            loss_params[f"loss__{key}"] = json.loads(value)
    est = NeSCalClassifier(
        loss=spec["loss"],
        hidden_sizes=tuple(args.hidden),
        max_epochs=args.max_epochs,
        early_stopping=protocol == "early_stopping",
    )
    return est.set_params(**loss_params) if loss_params else est


def subsample(X, y, max_rows: int | None, seed: int):
    """Stratified cap of ``max_rows`` rows; classes left with fewer than 3 rows (too few
    for the 3-way stratified split) are topped up from the rows left out."""
    if max_rows is None or len(y) <= max_rows:
        return X, y
    from sklearn.model_selection import train_test_split
    from sklearn.utils import _safe_indexing

    from nescal_sklearn.benchmark._data import top_up_rare_classes

    kept, dropped = train_test_split(
        np.arange(len(y)), train_size=max_rows, stratify=y, random_state=seed
    )
    kept = top_up_rare_classes(kept, dropped, y)
    return _safe_indexing(X, kept), y[kept]


def run(args) -> list[dict]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / "records.jsonl"
    done = {}
    if records_path.exists():
        for line in records_path.read_text().splitlines():
            rec = json.loads(line)
            done[(rec["dataset"], rec["protocol"], rec["method"], rec["seed"])] = rec
    names = args.datasets or [e["name"] for e in list_local_datasets(args.data_dir)]
    plan = [(d, p, m, s) for d in names for s in args.seeds for p in args.protocols for m in args.methods]
    todo = [key for key in plan if key not in done]
    print(f"{len(plan)} fits planned, {len(plan) - len(todo)} already recorded in {records_path}")
    cache: dict = {}
    skipped: dict[str, str] = {}
    for i, (name, protocol, method, seed) in enumerate(todo, 1):
        if name in skipped:
            continue
        if (name, seed) not in cache:
            cache.clear()
            data = load_local_dataset(name, args.data_dir)
            X, y = subsample(data.X, data.y.to_numpy(), args.max_rows, seed)
            try:
                cache[(name, seed)] = stratified_split(X, y, seed=seed)
            except ValueError as error:  # e.g. a class too rare for a 3-way stratified split
                skipped[name] = str(error)
                print(f"skipping {name}: {error}", flush=True)
                continue
        split = cache[(name, seed)]
        est = make_estimator(method, protocol, args).set_params(random_state=seed)
        result = fit_and_evaluate(est, split)
        rec = {
            "dataset": name, "protocol": protocol, "method": method, "seed": seed,
            "raw": result.raw, "after_ts": result.after_ts, "temperature": result.temperature,
            "fit_seconds": result.fit_seconds, **result.extra,
            "params": {k: repr(v) for k, v in est.get_params().items() if k.startswith("loss__")},
        }
        with records_path.open("a") as handle:
            handle.write(json.dumps(rec) + "\n")
        done[(name, protocol, method, seed)] = rec
        print(
            f"[{i}/{len(todo)}] {name} {protocol} {method} seed={seed}: "
            f"NLL {result.raw['nll']:.4f} -> TS {result.after_ts['nll']:.4f} "
            f"(T={result.temperature:.3f}) ECE {result.raw['ece']:.4f} "
            f"acc {result.raw['accuracy']:.4f} [{result.fit_seconds:.1f}s, "
            f"{result.extra.get('n_epochs')} ep]",
            flush=True,
        )
    names = [n for n in names if n not in skipped]
    records = [done[key] for key in plan if key[0] in names]
    summary = summarise(records, names, args)
    (out / "summary.md").write_text(summary)
    print(summary)
    return records


def _mean(records, stage, metric):
    return float(np.mean([r[stage][metric] for r in records]))


def summarise(records: list[dict], names: list[str], args) -> str:
    lines = []
    for protocol in args.protocols:
        lines.append(f"\n## Protocol: {protocol} (max_epochs={args.max_epochs}, seeds {args.seeds})\n")
        head = "| dataset | " + " | ".join(
            f"{m} NLL | {m} NLL+TS | {m} ECE | {m} ECE+TS | {m} acc" for m in args.methods
        ) + " |"
        lines += [head, "|---" * (1 + 5 * len(args.methods)) + "|"]
        changes = {m: {"raw": [], "after_ts": []} for m in args.methods if m != args.baseline}
        acc_changes = {m: [] for m in changes}
        for name in names:
            row = [name]
            by_method = {}
            for method in args.methods:
                recs = [r for r in records if r["dataset"] == name and r["protocol"] == protocol and r["method"] == method]
                by_method[method] = recs
                row += [
                    f"{_mean(recs, 'raw', 'nll'):.4f}", f"{_mean(recs, 'after_ts', 'nll'):.4f}",
                    f"{_mean(recs, 'raw', 'ece'):.4f}", f"{_mean(recs, 'after_ts', 'ece'):.4f}",
                    f"{_mean(recs, 'raw', 'accuracy'):.4f}",
                ]
            base = by_method[args.baseline]
            for method in changes:
                for stage in ("raw", "after_ts"):
                    b, m = _mean(base, stage, "nll"), _mean(by_method[method], stage, "nll")
                    changes[method][stage].append(100.0 * (m - b) / b)
                acc_changes[method].append(
                    _mean(by_method[method], "raw", "accuracy") - _mean(base, "raw", "accuracy")
                )
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        for method, stages in changes.items():
            for stage, values in stages.items():
                values = np.asarray(values)
                wins = int(np.sum(values < 0))
                p = wilcoxon(values).pvalue if len(values) >= 2 and np.any(values != 0) else float("nan")
                lines.append(
                    f"- {method} vs {args.baseline}, test NLL {stage.replace('_', ' ')}: lower on "
                    f"{wins}/{len(values)} datasets, median change {np.median(values):+.2f} %, "
                    f"Wilcoxon p = {p:.3g}"
                )
            lines.append(
                f"- {method} vs {args.baseline}, accuracy: median change "
                f"{100 * np.median(acc_changes[method]):+.2f} points"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    run(args)
    print(f"done in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
