"""``nescal-bench``: run, validate, report and compare config-driven benchmarks.

Usage::

    nescal-bench run CONFIG [--dry-run] [--estimate-from RESULTS_DIR ...] [--jobs N]
                            [--resume] [--offline]
    nescal-bench report RESULTS_DIR
    nescal-bench validate CONFIG
    nescal-bench compare RESULTS_DIR... [--confirm-seeds S ...] [--references M ...]
                         [--best-of M ...] [--condition NAME] [--metric NAME]
                         [--methods M ...] [--stages STAGE ...] [--tolerance PCT]
                         [--ratio COLUMN ...] [--plot PNG] [--plot-methods M ...]
    nescal-bench calibrators RESULTS_DIR... [--confirm-seeds S ...] [--methods M ...]
                             [--reference STAGE] [--tolerance PCT]

Exit status:

* 0 on success;
* 1 when some fits failed (they are in ``OUTPUT/failures/`` and the report, and
  ``--resume`` retries them);
* 2 without the lab's extra (the message is its install command), for a bad config or
  command line, an unusable output directory (a file, a NUL in the path, no write
  permission, the data folder), an output directory that holds files nescal-bench did
  not write, or records without ``--resume``, or is locked by another run, an OpenML
  task that cannot be loaded (or, with ``--offline``, is not cached), a comparison that
  cannot be made; nothing is written then (``config.json`` included);
* 130 when interrupted (Ctrl-C): every finished fit is recorded, the interrupted ones
  are not, the worker processes are stopped, and ``--resume`` continues.

Warnings (a record file that is not a valid record and was moved aside, confirm seeds
shared with the search seeds) are printed as ``nescal-bench: warning: ...`` on stderr.
All the work is done by :mod:`nescal_bench`; this module only parses arguments and
prints. ``report``, ``compare`` and ``validate`` (for configs without
``NeSCalClassifier`` methods, whose parameters the library checks) import neither torch
nor skorch. A config is code: ``run`` imports the import paths it names; ``validate``
imports only those of nescal_sklearn, nescal_bench, scikit-learn and the ``bench``
extra, and lists the others.
"""

from __future__ import annotations

import argparse
import sys
import warnings

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nescal-bench", description="Config-driven calibration benchmarks of nescal_sklearn."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    flag = {"action": "store_true"}
    run = commands.add_parser("run", help="run every fit of a config, then write the report")
    run.add_argument("config", metavar="CONFIG", help="JSON configuration file")
    run.add_argument(
        "--dry-run",
        **flag,
        help="print the plan and train nothing; the time estimate, if any, comes from the fit "
        "times of existing records (--resume, --estimate-from)",
    )
    run.add_argument(
        "--estimate-from",
        nargs="+",
        default=[],
        metavar="RESULTS_DIR",
        help="with --dry-run: results folders whose records' fit times give the estimate",
    )
    run.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel fits (joblib)")
    run.add_argument("--resume", **flag, help="skip fits already recorded")
    run.add_argument(
        "--offline", **flag, help="load only cached OpenML tasks (an uncached one stops the run)"
    )
    report = commands.add_parser("report", help="(re)write report.md and report.html")
    report.add_argument("results_dir", metavar="RESULTS_DIR", help="the 'output' of a run")
    validate = commands.add_parser(
        "validate", help="check a config and exit (imports no path outside the lab's packages)"
    )
    validate.add_argument("config", metavar="CONFIG", help="JSON configuration file")
    compare = commands.add_parser(
        "compare", help="paired comparisons of methods across datasets (markdown)"
    )
    calibrators = commands.add_parser(
        "calibrators", help="the post-hoc calibrators of a run side by side (markdown)"
    )
    tolerances = {  # percent
        compare: (
            1.0,
            "beside the strict count, count at this tie tolerance (default: 1; 0: none)",
        ),
        calibrators: (
            5.0,
            "a fit is hurt when calibration raises its test NLL by more (default: 5)",
        ),
    }
    for command, (tolerance, meaning) in tolerances.items():
        folders = {"nargs": "+", "metavar": "RESULTS_DIR", "help": "results folders (pooled)"}
        command.add_argument("results_dirs", **folders)
        seeds = "confirm seeds to use (default: each folder's own)"
        command.add_argument("--confirm-seeds", nargs="+", type=int, metavar="S", help=seeds)
        methods = "only these methods (default: all; compare keeps its references)"
        command.add_argument("--methods", nargs="+", metavar="M", help=methods)
        command.add_argument(
            "--tolerance", type=float, default=tolerance, metavar="PCT", help=meaning
        )
    both = ["ce", "label_smoothing"]
    compare.add_argument(
        "--references",
        nargs="+",
        default=both,
        metavar="M",
        help="methods every other is compared with (skipped when absent)",
    )
    compare.add_argument(
        "--best-of",
        nargs="*",
        default=both,
        metavar="M",
        help="also compare with the per-dataset better of these methods (none: skip)",
    )
    compare.add_argument(
        "--condition",
        default="clean",
        metavar="NAME",
        help="an evaluation condition of the runs (default: the clean test rows)",
    )
    compare.add_argument(
        "--metric",
        metavar="NAME",
        help="metric compared (default: nll, or the condition's own, e.g. auroc for OOD rows)",
    )
    compare.add_argument(
        "--stages",
        nargs="+",
        metavar="STAGE",
        help="only these stages: raw and calibrator names or labels (default: all)",
    )
    compare.add_argument(
        "--plot",
        metavar="PNG",
        help="also draw the per-dataset changes against the first reference to this PNG",
    )
    compare.add_argument(
        "--plot-methods",
        nargs="+",
        metavar="M",
        help="methods drawn by --plot (default: every method but the references)",
    )
    compare.add_argument(
        "--ratio",
        action="append",
        default=[],
        metavar="COLUMN",
        help="add the median over datasets of the ratio method / reference of this run column "
        "(fit_seconds, predict_seconds, model_bytes, ...); repeatable",
    )
    calibrators.add_argument(
        "--reference",
        default="temperature",
        metavar="STAGE",
        help="the calibrator the others are compared with (default: temperature)",
    )
    return parser


def _calibrators(args) -> int:
    from ._compare import calibrators_markdown, subset
    from ._results import results_frame

    frame = subset(results_frame(args.results_dirs, args.confirm_seeds), args.methods)
    print(calibrators_markdown(frame, reference=args.reference, tolerance=args.tolerance), end="")
    return 0


def _compare(args) -> int:
    from ._compare import compare_markdown, plot_comparison, subset
    from ._results import results_frame

    pooled, methods = results_frame(args.results_dirs, args.confirm_seeds), args.methods
    if methods is not None:  # with the references the results have
        extra = [m for m in [*args.references, *args.best_of] if m in set(pooled["method"])]
        methods = list(dict.fromkeys([*methods, *extra]))
    pooled = subset(pooled, methods, args.stages)
    under = {"condition": args.condition, "metric": args.metric}
    options = {"tolerance": args.tolerance / 100, "ratios": args.ratio, **under}
    print(
        compare_markdown(pooled, references=args.references, best_of=args.best_of, **options),
        end="",
    )
    if args.plot is not None:
        drawn = args.plot_methods or sorted(set(pooled["method"]) - set(args.references))
        plot_comparison(pooled, drawn, args.references[0], args.plot, **under)
        print(f"\nFigure: {args.plot}")
    return 0


def _show_warnings(category: type[Warning]):
    """A ``warnings.showwarning`` printing ``category`` as ``nescal-bench: warning: ...``."""
    original = warnings.showwarning

    def show(message, kind, filename, lineno, file=None, line=None):
        if issubclass(kind, category):
            print(f"nescal-bench: warning: {message}", file=sys.stderr)
        else:
            original(message, kind, filename, lineno, file, line)

    return show


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nescal-bench``; returns the exit status.

    Examples
    --------
    >>> from nescal_bench.cli import main
    >>> main(["validate", "no/such/config.json"])
    2
    """
    args = _parser().parse_args(argv)
    from ._base import BenchmarkWarning

    with warnings.catch_warnings():
        warnings.simplefilter("default", BenchmarkWarning)
        warnings.showwarning = _show_warnings(BenchmarkWarning)
        return _main(args)


def _main(args) -> int:
    from ._base import ConfigError, RunError
    from ._compare import CompareError
    from ._config import load_config
    from ._openml import OpenMLUnavailableError
    from ._report import write_report
    from ._runner import dry_run, run_benchmark

    try:
        if args.command == "report":
            paths = write_report(args.results_dir)
            print(f"{paths['headline']}\nReport: {paths['markdown']} and {paths['html']}")
            return 0
        if args.command == "compare":
            return _compare(args)
        if args.command == "calibrators":
            return _calibrators(args)
        config = load_config(args.config, imports=args.command == "run")
        if args.command == "validate":
            n_points = sum(len(m.points()) for m in config.methods)
            print(
                f"{args.config}: valid ({len(config.datasets)} datasets, {len(config.methods)} methods, "
                f"{n_points} grid points, {len(config.calibrators)} calibrators, {len(config.conditions)} conditions)"
            )
            for where, ref in config.deferred:
                print(
                    f"{where}: {ref!r} is not imported by validate; run imports it (a config is code)"
                )
            return 0
        if args.jobs < 1:
            raise ConfigError("--jobs", f"expected int >= 1, got {args.jobs}")
        # the settings that the run and its dry run share
        options = {"jobs": args.jobs, "resume": args.resume, "offline": args.offline}
        if args.dry_run:
            print(dry_run(config, **options, estimate_from=args.estimate_from))
            return 0
        if args.estimate_from:
            raise ConfigError("--estimate-from", "only used with --dry-run")
        summary = run_benchmark(config, **options)
    except (CompareError, ConfigError, RunError, OpenMLUnavailableError, OSError) as exc:
        print(f"nescal-bench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "nescal-bench: interrupted; every finished fit is recorded, rerun with --resume to continue.",
            file=sys.stderr,
        )
        return 130
    print(
        f"{summary.report['headline']}\nReport: {summary.report['markdown']} and {summary.report['html']}"
    )
    if summary.failures:
        print(
            f"{len(summary.failures)} fit(s) failed; see {summary.output / 'failures'} (rerun with --resume to "
            "retry them).",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
