"""Re-measure the bad-input tables of a reliability review (the A1-A4 cases of §9).

The review (``reliability-ed7ab4a.md``) lists every bad or edge input it fed the
library as a markdown table row: an id, the input, the *exact call*, its verdict and
the outcome it saw. The calls are evaluated after the table's preamble (§8). This
script reads both from the review at run time, runs every call again on the package
as it is now, classifies the outcome mechanically, and prints the review's §1a summary
table again, re-measured, with one line per case whose category changed.

Classification of one call (the review's categories):

* it raised, and the innermost traceback frame is in torch, numpy, skorch or scipy:
  **raw**;
* it raised elsewhere (nescal_sklearn, scikit-learn's validation, Python's argument
  check): **clear** when the message names an argument of the call (a keyword it
  passes, or the name of a positional argument of the function it calls; when the call
  passes ``X_val``, ``y_val`` or ``sample_weight_val``, the message must name one of
  those), else **unclear**. When the exception and the message are the ones the review
  saw, the review's clear/unclear verdict is kept: whether an unchanged message is
  misleading is the reviewer's judgement (such cases are counted as "kept");
* no answer within ``--timeout`` seconds, or the worker died: **crash/hang**;
* it returned: **accepted**; "with a warning" when a warning other than a
  ``RuntimeWarning``/``DeprecationWarning`` or a deprecated-parameter ``FutureWarning``
  was raised. The review's silently-wrong and questionable cases are re-checked by an
  explicit assertion on the result (:data:`SILENT`, :data:`QUESTIONABLE`): an accepted
  case whose assertion still holds, with no warning, keeps that verdict; any returned
  ``"proba"`` that is not finite is silently wrong too.

Calls written for the old API are translated (:data:`CALL_EDITS`); deprecated
parameters (``n_members=`` at top level) still run unchanged.

Examples
--------
Every table (about a minute on one core)::

    python tools/reliability_audit.py

A few cases, each listed::

    python tools/reliability_audit.py --ids E095,E136,E232 --list
"""

from __future__ import annotations

import argparse
import ast
import inspect
import multiprocessing
import re
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REVIEW = Path("../shared/reviews/reliability-ed7ab4a.md")

#: Table titles of §9 and preamble titles of §8, per part.
PARTS = {
    "A1": ("#### A1 NeSCalClassifier", "#### Preamble of A1"),
    "A2": ("#### A2 calibrators", "#### Preamble of A2"),
    "A3": ("#### A3 metrics", "#### Preamble of A3"),
    "A4": ("#### A4 weights routing", "#### Preamble of A4"),
}

#: The columns of the review's §1a table, in order.
CATEGORIES = (
    "clear",
    "unclear",
    "raw",
    "crash/hang",
    "SILENTLY WRONG",
    "legit",
    "legit, warns",
    "questionable",
)
HEADER = (
    "| part | cases | clear error | unclear error | raw traceback (torch/numpy/skorch) | "
    "crash/hang | SILENTLY WRONG | accepted: legit | accepted: legit, with a warning | "
    "accepted: questionable (no warning) |"
)

#: The review's verdict words -> categories.
VERDICTS = {
    "clear": "clear",
    "UNCLEAR": "unclear",
    "RAW": "raw",
    "HANG": "crash/hang",
    "**SILENTLY WRONG**": "SILENTLY WRONG",
    "ok": "legit",
    "ok (warns)": "legit, warns",
    "questionable": "questionable",
}

#: Top-level packages whose innermost frame makes an error raw.
RAW_PACKAGES = ("torch", "numpy", "skorch", "scipy")

#: Data arguments that make a message naming ``X`` or ``y`` misleading.
VALIDATION_ARGUMENTS = ("X_val", "y_val", "sample_weight_val")

#: Methods whose positional arguments are ``X`` (and ``y``).
DATA_METHODS = frozenset(
    {
        "fit",
        "predict",
        "predict_proba",
        "decision_function",
        "score",
        "transform",
        "fit_transform",
    }
)

#: Old-API calls, rewritten before they run: (pattern, replacement).
CALL_EDITS = (
    # the fitted attribute categorical_groups_ is gone: the embedded one-hot groups are
    # the layout's groups of at least 10 columns, when the network embeds any
    (r"(\w+(?:\[-1\])?)\.categorical_groups_", r"embedded_groups(\1)"),
)

#: Added after every preamble: the helpers the translations and assertions use.
HELPERS = """
import numpy as _np
def embedded_groups(est):
    from nescal_sklearn.estimator._classifier import CATEGORICAL_EMBEDDING_MIN_SIZE
    if getattr(est.module_, "categorical", None) is None:
        return []
    return [list(g) for g in est.column_layout_.groups if len(g) >= CATEGORICAL_EMBEDDING_MIN_SIZE]
def saturated(P):
    P = _np.asarray(P)
    return bool(((P == 0.0) | (P == 1.0)).any())
"""

#: Extra helpers per part (for the assertions).
PART_HELPERS = {
    "A2": """
_Pn = LRA.predict_proba(Xa[400:]); _yn = ya[400:]
NLL_LRA = float(-_np.log(_np.clip(_Pn[_np.arange(len(_yn)), _yn], 1e-300, 1)).mean())
""",
}

#: Silently-wrong cases of the review: an expression of ``result`` (what the call
#: returned) that is true while the case is still wrong.
SILENT = {
    "E136": "np.shape(result['proba'])[1] != len(result['classes'])",
    "E139": "not np.isfinite(result['proba']).all()",
    "E229": "not np.isfinite(result['proba']).all()",
    "E231": "not np.isfinite(result['proba']).all()",
    "E232": "np.array_equal(result['proba'], fit(CE())['proba'])",
    "E233": "np.array_equal(result['proba'], fit(CE())['proba'])",
    "E234": "np.array_equal(result['proba'], fit(NS())['proba'])",
    **{
        i: "result['class3_predicted_after'] < result['class3_predicted_before'] / 2 "
        "or result['nll_after'] > 1.5 * result['nll_before']"
        for i in ("T057", "T071", "T072", "T073", "T074")
    },
    "T079": "result['proba'].min() < 1e-6",
    "T082": "result['nll_after'] > 1.5 * NLL_LRA",
    "T083": "result['nll_after'] > 1.5 * NLL_LRA",
    "M055": "abs(result) < 1e-12",
    "M097": "result[3] == 0.0",
}

#: Questionable cases of the review: true while the case is still questionable.
QUESTIONABLE = {
    **dict.fromkeys(
        ("E018", "E236", "E071", "E026", "E027", "E079", "E080", "E106", "E228", "E160"),
        "True",
    ),
    "E210": "True",
    **{i: "saturated(result['proba'])" for i in ("E030", "E151", "E152", "E154")},
    "T063": "saturated(result['proba'])",
    "T078": "saturated(result['proba'])",
    "M111": "True",
    "M149": "True",
}

#: Warnings that do not address a silently-wrong or questionable case.
INCIDENTAL_WARNINGS = ("PenaltyInactiveWarning:",)

#: Why a case's category changed by design (printed after its line).
NOTES = {
    "E044": "None now means 'the recipe's value' (recipes)",
    "E051": "None now means 'the recipe's value' (recipes)",
    "E114": "None now means 'the recipe's value' (recipes)",
}


@dataclass(frozen=True)
class Case:
    """One row of a §9 table."""

    id: str
    input: str
    call: str
    verdict: str
    outcome: str


@dataclass
class Outcome:
    """What one call did now (filled in by the worker)."""

    kind: str  # "raised", "returned" or "hang"
    error: str = ""
    message: str = ""
    frame: str = ""
    package: str = ""
    names: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    deprecations: int = 0
    silent: bool | None = None
    questionable: bool | None = None
    bad_proba: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


# -- reading the review ------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def read_review(path: Path) -> dict[str, tuple[str, list[Case], list[str]]]:
    """The preamble, the cases and the §1a summary row of each part A1-A4.

    Parameters
    ----------
    path : Path
        The review's markdown file.

    Returns
    -------
    dict
        ``{"A1": (preamble source, [Case, ...], summary cells), ...}``.
    """
    text = path.read_text(encoding="utf-8")
    parts = {}
    for part, (table_title, preamble_title) in PARTS.items():
        start = text.index(preamble_title)
        code = text.index("```python", start) + len("```python")
        preamble = text[code : text.index("```", code)]
        start = text.index(table_title)
        end = text.find("\n#### ", start + 1)
        end = text.find("\n### ", start + 1) if end == -1 else end
        cases = []
        for line in text[start:end].splitlines():
            if re.match(r"\| [A-Z]\d{3} \|", line):
                id_, what, call, verdict, outcome = _cells(line)[:5]
                cases.append(Case(id_, what, call.strip("`"), verdict, outcome))
        summary = next(
            _cells(line)
            for line in text.splitlines()
            if line.startswith(f"| {part} ") and "|" in line[5:]
        )
        parts[part] = (preamble, cases, summary)
    return parts


def translate(call: str) -> str:
    """The call in today's API (:data:`CALL_EDITS`)."""
    for pattern, replacement in CALL_EDITS:
        call = re.sub(pattern, replacement, call)
    return call


# -- the worker: runs the calls of one part in one process -------------------------------


def _argument_names(call: str, namespace: dict) -> tuple[str, ...]:
    """The argument names a call passes: its keywords (``loss__k`` also as ``k``) and the
    parameter names of positional arguments (``X``, ``y`` for estimator methods)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(call, mode="eval")):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg is not None:
                names.add(keyword.arg)
                names.add(keyword.arg.rsplit("__", 1)[-1])
        if isinstance(node.func, ast.Attribute) and node.func.attr in DATA_METHODS:
            names.update(("X", "y"))
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "set_params":
            continue
        elif isinstance(node.func, ast.Name) and node.args:
            function = namespace.get(node.func.id)
            try:
                parameters = list(inspect.signature(function).parameters)
            except (TypeError, ValueError):
                continue
            names.update(parameters[: len(node.args)])
    return tuple(sorted(names))


def _summarise_warnings(caught) -> tuple[tuple[str, ...], int]:
    kept, deprecations = [], 0
    for w in caught:
        message = str(w.message)
        if issubclass(w.category, FutureWarning) and "is deprecated" in message:
            deprecations += 1
        elif not issubclass(w.category, RuntimeWarning | DeprecationWarning):
            kept.append(f"{w.category.__name__}: {message}")
    return tuple(kept), deprecations


def _has_bad_proba(result) -> bool:
    """Whether a returned ``"proba"`` (top level, or in a returned list) is not finite."""
    import numpy as np

    items = result if isinstance(result, list | tuple) else [result]
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("proba"), np.ndarray):
            proba = item["proba"]
            if proba.dtype.kind == "f" and not np.isfinite(proba).all():
                return True
    return False


def _package(filename: str) -> str:
    parts = Path(filename).parts
    if "nescal_sklearn" in parts:
        return "nescal_sklearn"
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return parts[parts.index(marker) + 1]
    return Path(filename).name


def run_call(case: Case, namespace: dict) -> Outcome:
    """Run one case's call in ``namespace`` (the preamble's) and describe the outcome."""
    call = translate(case.call)
    names = _argument_names(call, namespace)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = eval(call, namespace)  # noqa: S307 - the review's exact call
        except BaseException as exc:  # noqa: BLE001 - every outcome is recorded
            if isinstance(exc, KeyboardInterrupt) and "interrupted" not in str(exc):
                raise
            frames = traceback.extract_tb(exc.__traceback__)
            innermost = frames[-1]
            kept, deprecations = _summarise_warnings(caught)
            return Outcome(
                kind="raised",
                error=type(exc).__name__,
                message=" ".join(str(exc).split()),
                frame=f"{innermost.filename}:{innermost.lineno} ({innermost.name})",
                package=_package(innermost.filename),
                names=names,
                warnings=kept,
                deprecations=deprecations,
                seconds=time.perf_counter() - started,
            )
    kept, deprecations = _summarise_warnings(caught)
    outcome = Outcome(
        kind="returned",
        names=names,
        warnings=kept,
        deprecations=deprecations,
        bad_proba=_has_bad_proba(result),
        seconds=time.perf_counter() - started,
    )
    checks = {"silent": SILENT.get(case.id), "questionable": QUESTIONABLE.get(case.id)}
    for name, expression in checks.items():
        if expression is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                value = bool(eval(expression, {**namespace, "result": result}))  # noqa: S307
            except Exception as exc:  # noqa: BLE001 - an assertion that fails to run
                outcome.notes.append(f"check {expression!r} failed: {exc!r}")
                value = None
        setattr(outcome, name, value)
    return outcome


def worker(part: str, preamble: str, connection) -> None:
    """Exec ``preamble`` once, then answer every case sent on ``connection``."""
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict[str, Any] = {"__name__": f"audit_{part}"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(preamble + HELPERS + PART_HELPERS.get(part, ""), namespace)  # noqa: S102
    connection.send("ready")
    while True:
        case = connection.recv()
        if case is None:
            return
        connection.send(run_call(case, namespace))


class Worker:
    """A worker process for one part, restarted after a hang or a crash."""

    def __init__(self, part: str, preamble: str, startup_timeout: float) -> None:
        self.part, self.preamble, self.startup_timeout = part, preamble, startup_timeout
        self.process = None
        self.connection = None

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self.process = context.Process(
            target=worker, args=(self.part, self.preamble, theirs), daemon=True
        )
        self.process.start()
        self.connection = ours
        if not ours.poll(self.startup_timeout) or ours.recv() != "ready":
            self.stop()
            raise RuntimeError(f"the {self.part} preamble did not run")

    def run(self, case: Case, timeout: float) -> Outcome:
        if self.process is None:
            self._start()
        started = time.perf_counter()
        try:
            self.connection.send(case)
            if self.connection.poll(timeout):
                return self.connection.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            pass
        self.stop()
        return Outcome(kind="hang", seconds=time.perf_counter() - started)

    def stop(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                self.process.kill()
            self.process.join()
        self.process = self.connection = None

    def close(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.connection.send(None)
            self.process.join(timeout=30)
        self.stop()


# -- classification -----------------------------------------------------------------------


def _review_message(outcome: str) -> str | None:
    """``"Type: message"`` of a raised outcome cell, without its ellipsis; else None."""
    if outcome.startswith(("returned", "no result")):
        return None
    return " ".join(outcome.split(" [at ")[0].rstrip("…").split())


def names_an_argument(message: str, names: Iterable[str]) -> bool:
    """Whether ``message`` names one of ``names`` as a word.

    When the call passes ``X_val``, ``y_val`` or ``sample_weight_val``, only those
    count: a message about ``X`` is then about the wrong argument.
    """
    names = set(names)
    if names & set(VALIDATION_ARGUMENTS):
        names &= set(VALIDATION_ARGUMENTS)
    return any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", message) for name in names)


def categorize(case: Case, outcome: Outcome) -> tuple[str, bool]:
    """The category of an outcome, and whether the review's verdict was kept.

    Parameters
    ----------
    case : Case
        The review's row (its verdict and outcome).
    outcome : Outcome
        What the call did now.

    Returns
    -------
    category : str
        One of :data:`CATEGORIES`.
    kept : bool
        True when the review's clear/unclear verdict was kept for an unchanged message.
    """
    if outcome.kind == "hang":
        return "crash/hang", False
    if outcome.kind == "raised":
        if outcome.package in RAW_PACKAGES:
            return "raw", False
        category = (
            "clear"
            if names_an_argument(f"{outcome.error}: {outcome.message}", outcome.names)
            else "unclear"
        )
        before = VERDICTS.get(case.verdict)
        seen = _review_message(case.outcome)
        now = f"{outcome.error}: {outcome.message}"
        if before in ("clear", "unclear") and seen and now.startswith(seen) and before != category:
            return before, True
        return category, False
    warned = bool(outcome.warnings)
    if case.id in SILENT or case.id in QUESTIONABLE:
        # the penalty notice of a 3-epoch NeSCal fit does not address these cases
        warned = any(not w.startswith(INCIDENTAL_WARNINGS) for w in outcome.warnings)
    if not warned and (outcome.silent or outcome.bad_proba):
        return "SILENTLY WRONG", False
    if not warned and outcome.questionable:
        return "questionable", False
    return ("legit, warns" if warned else "legit"), False


# -- the report ---------------------------------------------------------------------------


def summary_row(part: str, categories: Sequence[str]) -> str:
    counts = Counter(categories)
    cells = [part, str(len(categories)), *(str(counts[c]) for c in CATEGORIES)]
    return "| " + " | ".join(cells) + " |"


def describe(outcome: Outcome) -> str:
    if outcome.kind == "hang":
        return f"no answer within the timeout ({outcome.seconds:.0f} s)"
    if outcome.kind == "raised":
        text = f"{outcome.error}: {outcome.message}"
        text = text if len(text) <= 220 else text[:219] + "…"
        frame = outcome.frame.split("site-packages/")[-1].replace(f"{ROOT}/", "")
        return f"{text} [at {frame}]"
    # the warning that addresses the case first
    shown = sorted(outcome.warnings, key=lambda w: w.startswith(INCIDENTAL_WARNINGS))
    warned = f"; warns: {shown[0][:160]}" if shown else ""
    return f"returned{warned}"


def audit(
    review: Path, parts: Sequence[str], ids: set[str] | None, timeout: float, listing: bool
) -> Iterator[str]:
    """Run the cases and yield the report's lines."""
    tables = read_review(review)
    rows_now, rows_before, changes, kept_total, deprecated_total = [], [], [], 0, 0
    listed = []
    for part in parts:
        preamble, cases, summary = tables[part]
        if ids is not None:
            cases = [case for case in cases if case.id in ids]
        if not cases:
            continue
        pool = Worker(part, preamble, startup_timeout=max(timeout, 300.0))
        categories, before = [], []
        try:
            for case in cases:
                outcome = pool.run(case, timeout)
                category, kept = categorize(case, outcome)
                kept_total += kept
                deprecated_total += outcome.deprecations > 0
                categories.append(category)
                before.append(VERDICTS[case.verdict])
                line = f"{case.id}: {VERDICTS[case.verdict]} -> {category}: {describe(outcome)}"
                if case.id in NOTES:
                    line += f" ({NOTES[case.id]})"
                for name, holds in (
                    ("silently-wrong", outcome.silent),
                    ("questionable", outcome.questionable),
                ):
                    if holds is not None:
                        line += f" [{name} check: {'still holds' if holds else 'cleared'}]"
                for note in outcome.notes:
                    line += f" [{note}]"
                if category != VERDICTS[case.verdict]:
                    changes.append(line)
                listed.append(line)
        finally:
            pool.close()
        rows_now.append(summary_row(f"{part} now", categories))
        if ids is None:
            rows_before.append("| " + " | ".join([f"{part} review", *summary[1:]]) + " |")
        else:
            rows_before.append(summary_row(f"{part} review", before))
    yield HEADER
    yield "|" + "---|" * 10
    for before, now in zip(rows_before, rows_now, strict=True):
        yield before
        yield now
    yield ""
    yield (
        f"{len(changes)} cases changed category; {kept_total} unchanged messages kept the "
        f"review's clear/unclear verdict; {deprecated_total} calls used a deprecated "
        "parameter (FutureWarning, not counted as a warning)."
    )
    yield from changes
    if listing:
        yield ""
        yield "every case:"
        yield from listed


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--review",
        type=Path,
        default=REVIEW,
        help="the review's markdown (relative paths from the repository root)",
    )
    parser.add_argument(
        "--parts", default="A1,A2,A3,A4", help="comma-separated parts (default: all four)"
    )
    parser.add_argument("--ids", default=None, help="comma-separated case ids to run only")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--list", action="store_true", help="print every case's line")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    review = args.review if args.review.is_absolute() else ROOT / args.review
    if not review.is_file():
        print(f"--review {str(args.review)!r}: no such file ({review}).", file=sys.stderr)
        return 2
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        print(f"--parts: unknown part(s) {unknown}; expected {sorted(PARTS)}.", file=sys.stderr)
        return 2
    ids = None if args.ids is None else {i.strip() for i in args.ids.split(",") if i.strip()}
    for line in audit(review, parts, ids, args.timeout, args.list):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
