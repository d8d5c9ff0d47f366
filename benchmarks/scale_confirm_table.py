"""The per-dataset table of the full-size study of the recipe of 2026-12-06, and its bars.

Reads the records of ``benchmarks/configs/scale_confirm.json`` (no fit) and prints, per
set where ``new`` ran on every seed (the seed mean of each figure; "–" where a method has
not run on every seed yet), the fit time of
``new`` (the recommended recipe of 2026-12-06) and ``rec`` (2026-12-05), test NLL
changes, serving time and pickle size of the lean model (``new_lean``) against HGB + TS,
and the longest fit under the 30 s budget (``new_budget``); its last row holds the
medians of the per-dataset values (never ratios of medians). Then the bars of the
config's description that no ``nescal-bench compare`` call prints: (1) the median fit
seconds per 10,000 training rows, (3) the sets where the lean model predicts within 2x
HGB + TS's time, (5) the budget's fits over 31.5 s. The table is also written to
``--out``.

The roles' methods are scale_confirm's names by default; another study names its own
(``--new``, ``--lean``, ``--budget``, ``--rec``, ``--hgb``): a recipe that serves
refitted members is its own lean model (``--lean`` the same method as ``--new``).

Examples
--------
    python benchmarks/scale_confirm_table.py
    python benchmarks/scale_confirm_table.py --results benchmarks/results/scale_confirm --out /tmp/t.md
    python benchmarks/scale_confirm_table.py --results benchmarks/results/budget_confirm --seeds 2 \\
        --new cv2_refit_cap150k --lean cv2_refit_cap150k --budget cap150k_budget --out /tmp/t.md
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from nescal_bench import load_results, results_frame, unit_table
from nescal_bench.studies import markdown_table

#: The roles of the table and scale_confirm's method for each.
ROLES = {"new": "new", "lean": "new_lean", "budget": "new_budget", "rec": "rec", "hgb": "hgb"}
#: The budget of ``new_budget`` and the bar's tolerance over it.
TIME_LIMIT, TOLERANCE = 30.0, 0.05


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="benchmarks/results/scale_confirm")
    parser.add_argument("--out", default="docs/figures/scale/confirm_per_dataset.md")
    parser.add_argument("--seeds", type=int, default=3, help="seeds a set needs to count")
    for role, method in ROLES.items():
        parser.add_argument(f"--{role}", default=method, help=f"the {role} method ({method})")
    return parser.parse_args(argv)


def per_dataset(
    folder: str, seeds: int, roles: dict[str, str] = ROLES
) -> tuple[list[str], dict[str, tuple[np.ndarray, str]]]:
    """The complete sets and, per column, their values and format; ``roles`` names each
    role's method."""
    nll = unit_table(results_frame([folder]), ["clean"], "raw", "nll")  # seed means
    nll = nll.reindex(columns=list(roles.values())).set_axis(list(roles), axis=1)
    runs = defaultdict(list)
    for record in load_results(folder).records.values():
        for role, method in roles.items():
            if record["method"] == method:
                runs[record["dataset"], role].append(record)
    sets = [s for s in nll.index if len(runs[s, "new"]) == seeds]

    def run(method, key, reduce=np.mean):  # per set, over its seeds (NaN: not all run)
        done = [[r["run"][key] for r in runs[s, method]] for s in sets]
        return np.array([reduce(v) if len(v) == seeds else np.nan for v in done])

    def data(key):
        return np.array([runs[s, "new"][0]["data"][key] for s in sets])

    def change(method, reference):
        done = ~np.isnan(run(method, "fit_seconds") + run(reference, "fit_seconds"))
        value = 100 * (nll.loc[sets, method] / nll.loc[sets, reference] - 1).to_numpy()
        return np.where(done, value, np.nan)

    rows, n_test = data("n_train") + data("n_validation"), data("n_test")
    fit, lean, hgb = (
        run("new", "fit_seconds"),
        run("lean", "predict_seconds"),
        run("hgb", "predict_seconds"),
    )
    rec_fit = run("rec", "fit_seconds")
    columns = {
        "rows fitted": (rows, "{:.0f}"),
        "new fit s": (fit, "{:.1f}"),
        "new s / 10k rows": (1e4 * fit / rows, "{:.1f}"),
        "rec s / 10k rows": (1e4 * rec_fit / rows, "{:.1f}"),
        "new fit × rec's": (fit / rec_fit, "{:.2f}"),
        "NLL new vs rec": (change("new", "rec"), "{:+.2f} %"),
        "NLL lean vs new": (change("lean", "new"), "{:+.2f} %"),
        "lean predict ms / 1k rows": (1e6 * lean / n_test, "{:.2f}"),
        "HGB + TS predict ms / 1k rows": (1e6 * hgb / n_test, "{:.2f}"),
        "lean predict × HGB + TS's": (lean / hgb, "{:.2f}"),
        "new predict × HGB + TS's": (run("new", "predict_seconds") / hgb, "{:.2f}"),
        "lean pickle MB": (run("lean", "model_bytes") / 1e6, "{:.2f}"),
        "new pickle MB": (run("new", "model_bytes") / 1e6, "{:.2f}"),
        f"budget: longest fit s (limit {TIME_LIMIT:g})": (
            run("budget", "fit_seconds", np.max),
            "{:.1f}",
        ),
    }
    return sets, columns


def main(argv=None) -> None:
    args = parse_args(argv)
    roles = {role: getattr(args, role) for role in ROLES}
    sets, columns = per_dataset(args.results, args.seeds, roles)
    if not sets:
        print(f"no set has new on {args.seeds} seeds yet")
        return

    def show(value, form):
        return "–" if np.isnan(value) else form.format(value)

    rows = [[s, *(show(v[i], f) for v, f in columns.values())] for i, s in enumerate(sets)]
    medians = [
        show(np.nanmedian(v) if (~np.isnan(v)).any() else np.nan, f) for v, f in columns.values()
    ]
    table = markdown_table(["dataset", *columns], [*rows, ["median", *medians]])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table + "\n")
    print(table)
    values = [v for v, _ in columns.values()]
    per_10k, lean_ratio, budget = values[2], values[9], values[-1]
    bound = TIME_LIMIT * (1 + TOLERANCE)

    def counted(v):  # the sets where the figure exists
        return int((~np.isnan(v)).sum())

    print(f"sets where new ran on {args.seeds} seeds: {len(sets)} ({', '.join(sets)})")
    print(f"(1) median fit s per 10,000 rows of new: {np.median(per_10k):.2f} (bar: at most 8)")
    within = int(np.sum(lean_ratio <= 2))
    print(f"(3) lean predict within 2x HGB + TS's: {within} of {counted(lean_ratio)} (bar: 6 of 8)")
    over = int(np.sum(budget > bound))
    print(f"(5) sets with a budget fit over {bound:g} s: {over} of {counted(budget)} (bar: none)")


if __name__ == "__main__":
    main()
