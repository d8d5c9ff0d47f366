"""``nescal-bench``: run, validate and report config-driven benchmarks.

Usage::

    nescal-bench run CONFIG [--dry-run] [--jobs N] [--scheduler ADDRESS] [--resume]
    nescal-bench report RESULTS_DIR
    nescal-bench validate CONFIG

Exit status: 0 on success, 1 when some fits failed, 2 for a bad config or command,
130 when interrupted (Ctrl-C).
All the work is done by :mod:`nescal_sklearn.benchmark`; this module only parses
arguments and prints.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nescal-bench",
        description="Config-driven calibration benchmarks of nescal_sklearn.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run every fit of a config, then write the report")
    run.add_argument("config", metavar="CONFIG", help="JSON configuration file")
    run.add_argument(
        "--dry-run", action="store_true", help="print the plan and a time estimate, train nothing"
    )
    run.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel fits (joblib)")
    run.add_argument(
        "--scheduler", metavar="ADDRESS", help="dask.distributed scheduler, e.g. tcp://host:8786"
    )
    run.add_argument("--resume", action="store_true", help="skip fits already recorded")

    report = commands.add_parser("report", help="(re)write report.md and report.html")
    report.add_argument("results_dir", metavar="RESULTS_DIR", help="the 'output' of a run")

    validate = commands.add_parser("validate", help="check a config and exit")
    validate.add_argument("config", metavar="CONFIG", help="JSON configuration file")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nescal-bench``; returns the exit status.

    Examples
    --------
    >>> from nescal_sklearn.cli import main
    >>> main(["validate", "no/such/config.json"])
    2
    """
    args = _parser().parse_args(argv)
    from .benchmark import (
        ConfigError,
        OpenMLUnavailableError,
        RunError,
        dry_run,
        load_config,
        run_benchmark,
        write_report,
    )

    try:
        if args.command == "report":
            paths = write_report(args.results_dir)
            print(paths["headline"])
            print(f"Report: {paths['markdown']} and {paths['html']}")
            return 0
        config = load_config(args.config)
        if args.command == "validate":
            n_points = sum(len(m.points()) for m in config.methods)
            print(
                f"{args.config}: valid ({len(config.datasets)} datasets, {len(config.methods)} "
                f"methods, {n_points} grid points, {len(config.calibrators)} calibrators)"
            )
            return 0
        if args.jobs < 1:
            raise ConfigError("--jobs", f"expected int >= 1, got {args.jobs}")
        if args.dry_run:
            print(dry_run(config, jobs=args.jobs, scheduler=args.scheduler))
            return 0
        summary = run_benchmark(
            config, jobs=args.jobs, scheduler=args.scheduler, resume=args.resume
        )
    except (ConfigError, RunError, OpenMLUnavailableError, FileNotFoundError) as exc:
        print(f"nescal-bench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "nescal-bench: interrupted; every finished fit is recorded, rerun with --resume "
            "to continue.",
            file=sys.stderr,
        )
        return 130
    print(summary.report["headline"])
    print(f"Report: {summary.report['markdown']} and {summary.report['html']}")
    if summary.failures:
        print(
            f"{len(summary.failures)} fit(s) failed; see {summary.output / 'failures'} "
            "(rerun with --resume to retry them).",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
