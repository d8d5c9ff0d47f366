"""The ``nescal-bench`` console script: :func:`nescal_bench.cli.main`.

Without the lab's ``bench`` extra, importing ``nescal_bench`` (any module of it) raises a
``ModuleNotFoundError`` whose message is the extra's install command; the command prints
it as its error, exit status 2, instead of a traceback. So this module lives outside the
package.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    """Run ``nescal-bench``; return its exit status."""
    try:
        from nescal_bench.cli import main as command
    except ModuleNotFoundError as exc:
        if exc.name != "nescal_bench":  # not the lab's own check: a broken install
            raise
        print(f"nescal-bench: error: {exc}", file=sys.stderr)
        return 2
    return command()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
