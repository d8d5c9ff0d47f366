"""NeSCal's ablation grid (issue 14): run the per-factor configs, then a table and a figure each.

One command runs every factor and writes the tables and figures (``docs/ablations.md``)::

    python benchmarks/ablations.py --jobs 2

Each factor is one runner config, ``benchmarks/configs/ablation_<factor>.json``: CE, the
default NeSCal (``loss: "nescal"`` with the package defaults) and the variants of that one
factor, on the 19 dev datasets capped at 3000 rows, temperature scaling, confirm seeds
3-5. All of them write to the same results folder (``results/ablations``): a record's key
is a hash of the fit's resolved settings, so CE and the default, which every config
lists under the same names, are fitted once and found again by the other configs
(``nescal-bench run CONFIG --resume``, which this script always passes). The runner's own
``report.md`` is not written (the folder is shared); this script reports per factor,
from the plan of each config:

* a markdown table: per variant, the median paired change of test NLL after temperature
  scaling against the default (seed means per dataset), the datasets where it is lower /
  tied / higher (a tie: within the config's ``report.tie_tolerance``), the two-sided
  Wilcoxon signed-rank p-value of the changes, the raw NLL change, the accuracy change,
  the fit time (median seconds per fit, and the median ratio to the default's fit on the
  same dataset), the wall time of the epoch cache's extra forward passes per fit where
  the records hold it (``fit.cache_seconds``), and the fits the penalty never trained;
  CE closes each table as the reference the default is measured against;
* ``ablation_<factor>.png``: the paired change of each variant (and CE) against the
  default, one point per dataset, the median marked.

The statistics are the runner's compare machinery (``paired_comparison``,
``wins_ties_losses``, ``PooledResults``). ``--no-run`` reports from the records alone;
``--factors`` picks factors; ``--quick`` is a smoke run (iris and wine, one seed, a tiny
network, a fixed 2-epoch warm-up so that the penalty is on) into ``OUT/results``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "benchmarks" / "configs"
#: The factors, in report order; each is ``benchmarks/configs/ablation_<factor>.json``.
FACTORS = ("k", "warmup", "schedule", "reduction", "embedding", "cache", "search", "graph")
#: Method names every ablation config uses for the reference NeSCal and cross-entropy.
DEFAULT, CE = "nescal", "ce"
#: How a default value reads in a table, where the bare value would not say enough.
DEFAULT_NOTES = {
    "embedding_layer": "None (the output layer's input: the last hidden layer)",
    "graph_method": "'auto' (exact below 20 000 rows)",
    "warmup": "'auto' (validation-NLL plateau)",
}
#: The smoke run of ``--quick``.
QUICK = {
    "datasets": [{"sklearn": "iris"}, {"sklearn": "wine"}],
    "confirm_seeds": [0],
    "budget": {"max_epochs": 10, "patience": 3, "hidden_sizes": [16], "threads": 1},
}
#: Changes beyond this many percent are drawn at the edge of a figure, as triangles.
LIMIT = 30.0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--factors", nargs="+", choices=FACTORS, default=list(FACTORS), help="factors to run"
    )
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (runner --jobs)")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "figures" / "ablations",
        help="folder of the figures and ablations.md",
    )
    parser.add_argument("--no-run", action="store_true", help="report from existing records only")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: iris and wine, 1 seed, results in OUT"
    )
    parser.add_argument(
        "--calibrator", default="temperature", help="the post-hoc stage called 'after TS'"
    )
    parser.add_argument(
        "--configs", type=Path, default=CONFIGS, help="folder of the ablation_<factor>.json files"
    )
    return parser.parse_args(argv)


# -- configs ---------------------------------------------------------------------------------


def load_factor_config(path: Path, quick: bool, out: Path):
    """The validated config of one factor (made a smoke run with ``quick``)."""
    from nescal_sklearn.benchmark import validate_config

    data = json.loads(path.read_text())
    if quick:
        data.update(json.loads(json.dumps(QUICK)))
        data["output"] = str(out / "results")
        for method in data["methods"]:
            if method.get("loss") in ("nescal", "nescal_experimental"):
                method.setdefault("params", {}).setdefault("warmup", 2)
    return validate_config(data, default_name=path.stem)


def varied(config) -> dict[str, dict[str, object]]:
    """``method -> {parameter: value}``: what each method sets that the default does not."""
    methods = {m.name: dict(m.params) for m in config.methods}
    base = methods.get(DEFAULT, {})
    return {
        name: {k: v for k, v in params.items() if base.get(k, _MISSING) != v}
        for name, params in methods.items()
        if name not in (DEFAULT, CE)
    }


_MISSING = object()


def library_default(name: str, recipe: str):
    """The value ``recipe`` gives a NeSCal loss or ``NeSCalClassifier`` parameter."""
    from nescal_sklearn.estimator import get_recipe

    name = name.removeprefix("loss__")
    settings = get_recipe(recipe)
    loss = settings.loss_params["nescal_experimental"]
    return loss[name] if name in loss else settings.params.get(name)


def labels(config) -> dict[str, str]:
    """``method -> setting`` as the tables show it."""
    changes = varied(config)
    base = {m.name: dict(m.params) for m in config.methods}.get(DEFAULT, {})
    names = sorted({k for params in changes.values() for k in params})
    out = {CE: "cross-entropy (reference)"}
    parts = []
    for name in names:
        if name in base:
            parts.append(f"{name}={base[name]!r}")
        else:
            value = library_default(name, config.budget.recipe)
            parts.append(f"{name}={DEFAULT_NOTES.get(name, repr(value))}")
    out[DEFAULT] = "default: " + ", ".join(parts) if parts else "default"
    for method, params in changes.items():
        out[method] = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return out


# -- results -------------------------------------------------------------------------------------


def pooled_results(config, store_records: dict[str, dict]):
    """The confirm-seed records of ``config``'s plan, pooled as ``nescal-bench compare`` does."""
    from nescal_sklearn.benchmark import RunResults, plan_run
    from nescal_sklearn.benchmark._compare import PooledResults

    plan = plan_run(config)
    records = {k: r for k, r in store_records.items() if k in plan.index.keys()}
    results = RunResults(Path(config.output), plan.config, plan.index, records)
    pooled = PooledResults(seeds=list(config.confirm_seeds), stages=list(config.stages))
    timings: dict[tuple[str, str], list[dict]] = {}
    for dataset, by_method in results.reported().items():
        for method, found in by_method.items():
            for record in found:
                pooled.add(record)
                timings.setdefault((method, dataset), []).append(
                    {
                        "fit_seconds": record["run"]["fit_seconds"],
                        "cache_seconds": record.get("fit", {}).get("cache_seconds"),
                    }
                )
    return pooled, timings


def write_report(path: Path, sections: list[str]) -> None:
    """Write the report's lines to ``path`` and print them."""
    text = "\n".join(sections)
    path.write_text(text)
    print(f"wrote {path}\n")
    print(text)


def _fmt_p(p: float) -> str:
    return "n/a" if np.isnan(p) else f"{p:.3g}"


def factor_rows(config, pooled, timings, stage: str) -> list[dict]:
    """One row per method (the default, each variant, CE) with its comparison to the default."""
    from nescal_sklearn.benchmark._stats import paired_comparison, wins_ties_losses

    names = labels(config)
    methods = [m.name for m in config.methods if m.name not in (DEFAULT, CE)]
    default_nll = pooled.means(DEFAULT, "clean", stage, "nll")
    default_raw = pooled.means(DEFAULT, "clean", "raw", "nll")
    default_acc = pooled.means(DEFAULT, "clean", stage, "accuracy")
    default_fit = _mean_timing(timings, DEFAULT, "fit_seconds")
    rows = []
    for method in [DEFAULT, *methods, CE]:
        row = {"method": method, "setting": names.get(method, ""), "comparison": None}
        fit = _mean_timing(timings, method, "fit_seconds")
        row["fit_median"] = float(np.median(list(fit.values()))) if fit else np.nan
        ratios = [fit[d] / default_fit[d] for d in fit if d in default_fit and default_fit[d] > 0]
        row["fit_ratio"] = float(np.median(ratios)) if ratios else np.nan
        cache = _mean_timing(timings, method, "cache_seconds")
        row["cache_seconds"] = float(np.median(list(cache.values()))) if cache else None
        counts = pooled.penalty.get(method, {})
        row["fits"] = sum(len(v) for (m, _), v in timings.items() if m == method)
        row["not_penalised"] = sum(n for s, n in counts.items() if s != "penalised")
        if method != DEFAULT:
            values = pooled.means(method, "clean", stage, "nll")
            accuracy = pooled.means(method, "clean", stage, "accuracy")
            c = paired_comparison(
                values,
                {DEFAULT: default_nll},
                greater_is_better=False,
                accuracy=(accuracy, {DEFAULT: default_acc}),
            )
            raw = paired_comparison(
                pooled.means(method, "clean", "raw", "nll"),
                {DEFAULT: default_raw},
                greater_is_better=False,
            )
            row["comparison"], row["raw"] = c, raw
            if c is not None:
                row["wtl"] = wins_ties_losses(
                    [values[d] for d in c.datasets],
                    [default_nll[d] for d in c.datasets],
                    greater_is_better=False,
                    tolerance=config.report.tie_tolerance,
                )
        rows.append(row)
    return rows


def _mean_timing(timings, method: str, key: str) -> dict[str, float]:
    """``dataset -> mean over seeds`` of a timing (datasets whose records all have it)."""
    out = {}
    for (m, dataset), entries in timings.items():
        values = [e[key] for e in entries]
        if m == method and values and all(v is not None for v in values):
            out[dataset] = float(np.mean(values))
    return out


def factor_table(rows: list[dict], stage_label: str) -> str:
    lines = [
        f"| variant | setting | median change of test NLL {stage_label} | lower / tied / higher "
        "| Wilcoxon p | median change, raw NLL | median accuracy change | fit s (median) "
        "| fit time vs default | cache s per fit | fits not penalised |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        c = row["comparison"]
        cache = "–" if row["cache_seconds"] is None else f"{row['cache_seconds']:.2f}"
        if row["method"] == "nescal_cache_epoch" and row["cache_seconds"] is None:
            cache = "not recorded"
        timing = (
            f"{row['fit_median']:.1f} | "
            + ("1 (reference)" if row["method"] == DEFAULT else _ratio(row["fit_ratio"]))
            + f" | {cache} | {row['not_penalised']}/{row['fits']}"
        )
        if row["method"] == DEFAULT:
            cells = "reference | – | – | – | –"
        elif c is None:
            cells = "no paired datasets | – | – | – | –"
        else:
            wins, ties, losses = row["wtl"]
            raw = row["raw"]
            accuracy = "–" if c.accuracy_change is None else f"{100 * c.accuracy_change:+.2f} pt"
            cells = (
                f"{c.median_change:+.2f} % | {wins} / {ties} / {losses} of {len(c.datasets)} | "
                f"{_fmt_p(c.p_value)} | "
                + ("–" if raw is None else f"{raw.median_change:+.2f} %")
                + f" | {accuracy}"
            )
        lines.append(f"| {row['method']} | {row['setting']} | {cells} | {timing} |")
    return "\n".join(lines)


def _ratio(value: float) -> str:
    return "–" if np.isnan(value) else f"{value:.2f}×"


def draw(factor: str, rows: list[dict], path: Path, stage_label: str) -> Path | None:
    """Strip plot of the per-dataset change against the default, the median marked."""
    shown = [r for r in rows if r["comparison"] is not None]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 * len(shown) + 2.0, 4.2))
    rng = np.random.default_rng(0)
    for i, row in enumerate(shown):
        c = row["comparison"]
        colour = "0.55" if row["method"] == CE else f"C{i}"
        xs = i + rng.uniform(-0.15, 0.15, len(c.changes))
        ys = np.clip(c.changes, -LIMIT, LIMIT)
        inside = np.abs(c.changes) <= LIMIT
        ax.scatter(xs[inside], ys[inside], s=20, color=colour, alpha=0.8)
        for x, y, raw in zip(xs[~inside], ys[~inside], c.changes[~inside], strict=True):
            ax.scatter([x], [y], marker="^" if raw > 0 else "v", s=36, color=colour)
        median = float(np.clip(c.median_change, -LIMIT, LIMIT))
        ax.hlines(median, i - 0.3, i + 0.3, color="black", linewidth=2.5)
        ax.annotate(
            f"{c.median_change:+.2f} %\n{c.n_better}/{len(c.datasets)} lower\np={_fmt_p(c.p_value)}",
            (i + 0.32, median),
            fontsize=7,
            va="center",
        )
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(shown)), [r["method"] for r in shown], rotation=20, ha="right")
    ax.set_xlim(-0.5, len(shown) - 0.1)
    ax.set_ylabel(f"test NLL {stage_label}: change vs default NeSCal (%)")
    ax.set_title(f"ablation: {factor} (one point per dataset; bar: median)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- main ----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    from nescal_sklearn.benchmark import RecordStore, run_benchmark

    configs = {
        factor: load_factor_config(args.configs / f"ablation_{factor}.json", args.quick, args.out)
        for factor in args.factors
    }
    if not args.no_run:
        for config in configs.values():
            # Resume always: the folder is shared, the other configs' records are reused.
            run_benchmark(config, jobs=args.jobs, resume=True, stream=sys.stderr, report=False)
    stage = args.calibrator
    stage_label = "after TS" if stage == "temperature" else f"after {stage}"
    outputs = {Path(c.output).resolve() for c in configs.values()}
    records: dict[str, dict] = {}
    for output in sorted(outputs):
        if (output / "records").is_dir():
            records.update(RecordStore(output).load(move=False))
    args.out.mkdir(parents=True, exist_ok=True)
    sections = [
        "# NeSCal ablations: one factor at a time around the default",
        "",
        f"Test NLL {stage_label}, paired per dataset (mean over the confirm seeds) against "
        "the default NeSCal; the change is `100 (variant - default) / default`. "
        "Regenerate with `python benchmarks/ablations.py --no-run`.",
        "",
    ]
    for factor, config in configs.items():
        pooled, timings = pooled_results(config, records)
        if DEFAULT not in pooled.methods:
            sections += [f"## {factor}", "", f"No records of the default in {config.output}.", ""]
            continue
        rows = factor_rows(config, pooled, timings, stage)
        figure = draw(factor, rows, args.out / f"ablation_{factor}.png", stage_label)
        sections += [
            f"## {factor}",
            "",
            f"`{config.name}`: {len(pooled.datasets)} datasets, confirm seeds {pooled.seeds}.",
            "",
            factor_table(rows, stage_label),
            "",
        ]
        if figure is not None:
            sections += [f"![{factor}]({figure.name})", ""]
            print(f"wrote {figure}")
    write_report(args.out / "ablations.md", sections)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
