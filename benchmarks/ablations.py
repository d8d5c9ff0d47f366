"""NeSCal's ablation grid (issue 14): run the per-factor configs, then a table and a figure each.

One command runs every factor and writes the tables and figures (``docs/ablations.md``)::

    python benchmarks/ablations.py --jobs 2

Each factor is one runner config, ``benchmarks/configs/ablation_<factor>.json``: CE, the
default NeSCal (``loss: "nescal"`` with the recipe's settings) and the variants of that one
factor, on the 19 dev datasets capped at 3000 rows, temperature scaling, confirm seeds
3-5. All of them write to the same results folder (``results/ablations``): a record's key
is a hash of the fit's stated settings, so CE and the default, which every config
lists under the same names, are fitted once and found again by the other configs
(``nescal-bench run CONFIG --resume``). The runner's own ``report.md`` is not written
(the folder is shared); this script reports per factor, from the plan of each config:

* a markdown table: per variant, the median paired change of test NLL after temperature
  scaling against the default (seed means per dataset), the datasets where it is lower /
  tied / higher (a tie: within the config's ``report.tie_tolerance``), the two-sided
  Wilcoxon signed-rank p-value of the changes, the raw NLL change, the accuracy change,
  the fit time (median seconds per fit, and the median ratio to the default's fit on the
  same dataset), the wall time of the epoch cache's extra forward passes per fit where
  the records hold it (``fit.cache_seconds``), and the fits the penalty never trained;
  CE closes each table as the reference the default is measured against;
* ``ablation_<factor>.png``: the paired change of each variant (and CE) against the
  default, one point per dataset (``nescal-bench compare``'s dot plot).

Every number comes from the lab's results frame (``nescal_bench.studies``).
``--no-run`` reports from the records alone; ``--factors`` picks factors; ``--quick`` is
a smoke run (iris and wine, one seed, a tiny network, a fixed 2-epoch warm-up so that
the penalty is on) into ``OUT/results``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from nescal_bench.studies import (
    config_frame,
    load_study_config,
    markdown_table,
    median,
    plot_changes,
    run_configs,
    versus,
)

ROOT = Path(__file__).resolve().parents[1]
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
    parser.add_argument("--factors", nargs="+", choices=FACTORS, default=list(FACTORS))
    parser.add_argument("--jobs", type=int, default=1, help="parallel fits (runner --jobs)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "ablations")
    parser.add_argument("--no-run", action="store_true", help="report from existing records only")
    parser.add_argument("--quick", action="store_true", help="smoke run into OUT/results")
    return parser.parse_args(argv)


def _fixed_warmup(data: dict) -> None:
    """A fixed warm-up within the smoke run's 10 epochs: the penalty is on."""
    for method in data["methods"]:
        if method.get("loss") in ("nescal", "nescal_experimental"):
            method.setdefault("params", {}).setdefault("warmup", 2)


def labels(config) -> dict[str, str]:
    """``method -> setting`` as the tables show it: what each variant sets that the default
    does not, and the default's value of it (the recipe's, where the config states none)."""
    from nescal_sklearn.estimator import get_recipe

    params = {m.name: dict(m.params) for m in config.methods}
    base = params.get(DEFAULT, {})
    changes = {
        m: {k: v for k, v in p.items() if base.get(k, object()) != v}
        for m, p in params.items()
        if m not in (DEFAULT, CE)
    }
    recipe = get_recipe(config.recipe)
    defaults = {**recipe.params, **recipe.loss_params["nescal_experimental"]}
    parts = [
        f"{k}={base[k]!r}"
        if k in base
        else f"{k}={DEFAULT_NOTES.get(k, repr(defaults.get(k.removeprefix('loss__'))))}"
        for k in sorted({k for c in changes.values() for k in c})
    ]
    out = {
        CE: "cross-entropy (reference)",
        DEFAULT: "default: " + ", ".join(parts) if parts else "default",
    }
    return {**out, **{m: ", ".join(f"{k}={v!r}" for k, v in c.items()) for m, c in changes.items()}}


def factor_table(config, frame):
    """One row per method (the default, each variant, CE) against the default."""
    fits = frame.drop_duplicates("key")
    seconds = fits.groupby(["method", "dataset"])["fit_seconds"].mean().unstack("method")
    cache = fits.groupby(["method", "dataset"])["cache_seconds"].mean().unstack("method")
    compared = versus(frame, DEFAULT, stage="temperature", tolerance=config.report.tie_tolerance)
    names = labels(config)
    order = [DEFAULT, *(m.name for m in config.methods if m.name not in (DEFAULT, CE)), CE]
    rows = []
    for method in (m for m in order if m in seconds):
        c = compared.get(method)  # None for the default: the reference
        if c is None:
            cells = ["reference" if method == DEFAULT else "no paired datasets", *["–"] * 4]
        else:
            cmp, (w, t, lo) = c["comparison"], c["wtl"]
            cells = [
                f"{cmp.median_change:+.2f} %",
                f"{w} / {t} / {lo} of {len(cmp.datasets)}",
                f"{cmp.p_value:.3g}" if np.isfinite(cmp.p_value) else "n/a",
                "–" if c["raw"] is None else f"{c['raw'].median_change:+.2f} %",
                f"{c['accuracy']:+.2f} pt",
            ]
        ratio = median((seconds[method] / seconds[DEFAULT]).dropna())
        ratio = "–" if np.isnan(ratio) else f"{ratio:.2f}×"
        status = fits.loc[fits["method"] == method, "penalty_status"]
        cache_cell = f"{median(cache[method].dropna()):.2f}" if cache[method].notna().any() else "–"
        if method == "nescal_cache_epoch" and cache_cell == "–":
            cache_cell = "not recorded"
        rows.append(
            [
                method,
                names.get(method, ""),
                *cells,
                f"{median(seconds[method].dropna()):.1f}",
                "1 (reference)" if method == DEFAULT else ratio,
                cache_cell,
                f"{int((status.notna() & (status != 'penalised')).sum())}/{len(status)}",
            ]
        )
    columns = [
        "variant",
        "setting",
        "median change of test NLL after TS",
        "lower / tied / higher",
        "Wilcoxon p",
        "median change, raw NLL",
        "median accuracy change",
        "fit s (median)",
        "fit time vs default",
        "cache s per fit",
        "fits not penalised",
    ]
    return rows, compared, markdown_table(columns, rows)


def main(argv=None) -> int:
    args = parse_args(argv)
    quick = QUICK if args.quick else None  # a smoke run into OUT/results
    configs = {
        f: load_study_config(
            ROOT / "benchmarks" / "configs" / f"ablation_{f}.json",
            quick,
            args.out / "results",
            _fixed_warmup,
            run=not args.no_run,  # --no-run: the records alone, no data, no anchor imported
        )
        for f in args.factors
    }
    if not args.no_run:
        run_configs(list(configs.values()), jobs=args.jobs, report=False)  # the folder is shared
    args.out.mkdir(parents=True, exist_ok=True)
    sections = [
        "# NeSCal ablations: one factor at a time around the default",
        "",
        "Test NLL after TS, paired per dataset (mean over the confirm seeds) "
        "against the default NeSCal; the change is `100 (variant - default) / default`. "
        "Regenerate with `python benchmarks/ablations.py --no-run`.",
        "",
    ]
    for factor, config in configs.items():
        frame = config_frame(config)
        if DEFAULT not in set(frame["method"]):
            sections += [f"## {factor}", "", f"No records of the default in {config.output}.", ""]
            continue
        rows, compared, table = factor_table(config, frame)
        sections += [
            f"## {factor}",
            "",
            f"`{config.name}`: {frame['dataset'].nunique()} datasets, "
            f"confirm seeds {frame.attrs['seeds']}.",
            "",
            table,
            "",
        ]
        # the per-dataset change of each variant (and CE) against the default, as a dot plot
        shown = {r[0]: compared[r[0]]["comparison"] for r in rows if r[0] in compared}
        if shown:
            figure = args.out / f"ablation_{factor}.png"
            figure.write_bytes(
                plot_changes(
                    shown,
                    "the default NeSCal",
                    axis_label="test NLL",
                    stage_label="after TS",
                    limit=LIMIT,
                )
            )
            sections += [f"![{factor}]({figure.name})", ""]
            print(f"wrote {figure}")
    text = "\n".join(sections)
    (args.out / "ablations.md").write_text(text)
    print(f"wrote {args.out / 'ablations.md'}\n\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
