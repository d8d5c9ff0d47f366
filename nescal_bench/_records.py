"""Fit records: one JSON file per finished fit, named by a stable hash, written atomically.

A file of ``records/`` counts as a finished fit only if it passes :func:`check_record`
(the pydantic schema :class:`Record`: the keys and types that the report, ``compare``,
model selection and the time estimate read, every metric a finite number). Any other
file there (truncated, empty, not UTF-8, ``{}``, a missing key, a NaN metric, a JSON
list, a symbolic link) is skipped with a :class:`CorruptRecordWarning` naming it and
what is wrong, and moved aside to ``records/corrupt/``, so that ``run --resume`` fits it
again; ``failures/`` files likewise (to ``failures/corrupt/``).

Only the runner that holds the output folder's lock writes into it (workers send their
records back), each file through a temporary file and ``os.replace``; so every
temporary file found by a runner that holds the lock was left by a dead writer. No
file is ever written through a symbolic link found in an output folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AllowInfNan,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictInt,
    StrictStr,
    ValidationInfo,
    model_validator,
)

from ._base import BenchmarkWarning, RunError, parse

#: Version of the record layout and of the protocol; part of every key.
RECORD_FORMAT = 3


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces (the text a key hashes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def record_key(identity: Mapping[str, Any]) -> str:
    """Stable hash (20 hex digits of SHA-256) of a fit's identity and :data:`RECORD_FORMAT`.

    The identity (built by the plan) holds the dataset source and its row cap, the
    split settings, the method's name and kind, the estimator's class, the parameters
    the configuration states (the recipe included, for ``NeSCalClassifier``), the
    seed, the calibrators, the evaluation conditions and the thread count; key order
    does not matter. Neither the library's version nor its defaults are part of it, and
    neither are the reported metrics (every metric is recorded).

    Examples
    --------
    >>> from nescal_bench._records import record_key
    >>> record_key({"seed": 0, "dataset": "iris"}) == record_key({"dataset": "iris", "seed": 0})
    True
    >>> len(record_key({"seed": 0}))
    20
    """
    payload = canonical_json({"format": RECORD_FORMAT, **identity})
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def identity_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The fields where two identities differ, as ``path: old -> new`` (dotted paths).

    Examples
    --------
    >>> from nescal_bench._records import identity_differences
    >>> identity_differences({"params": {"lr": 0.1}, "seed": 0},
    ...                      {"params": {"lr": 0.01}, "seed": 0, "threads": 1})
    ['params.lr: 0.1 -> 0.01', 'threads: (absent) -> 1']
    """
    before, after = _flatten(old), _flatten(new)

    def show(flat, path):
        return canonical_json(flat[path]).strip('"') if path in flat else "(absent)"

    paths = sorted(set(before) | set(after))
    return [
        f"{path}: {show(before, path)} -> {show(after, path)}"
        for path in paths
        if canonical_json(before.get(path)) != canonical_json(after.get(path))
        or (path in before) != (path in after)
    ]


def library_versions() -> dict[str, str]:
    """Versions of Python and of the libraries a fit's numbers depend on."""
    import numpy
    import sklearn
    import skorch
    import torch

    from nescal_sklearn import __version__

    versions = {module.__name__: module.__version__ for module in (torch, sklearn, numpy, skorch)}
    return {"python": platform.python_version(), "nescal_sklearn": __version__, **versions}


class InvalidRecordError(ValueError):
    """A record (or failure) file that does not have the layout the benchmark reads."""


class CorruptRecordWarning(BenchmarkWarning):
    """A file of ``records/`` or ``failures/`` was skipped (and moved aside) because it is
    not a valid record; the message names the file and what is wrong with it."""


Finite = Annotated[float, Strict(), AllowInfNan(False)]
Count = Annotated[StrictInt, Field(ge=0)]
Text = Annotated[StrictStr, Field(min_length=1)]
Metrics = dict[str, Finite]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Bins(_Open):
    counts: list[Count]
    confidence: list[Finite | None]
    accuracy: list[Finite | None]


class Stage(_Open):
    nll: Finite


class Data(_Open):
    split: StrictStr
    n_train: Count
    n_validation: Count
    n_test: Count
    n_features: Count
    n_classes: Count


class Run(_Open):
    fit_seconds: Annotated[Finite, Field(ge=0)]
    calibration_seconds: Annotated[Finite, Field(ge=0)] = 0.0


class Failure(_Open):
    """What a ``failures/`` note holds: the fit's identification and its ``error``.

    Validated with the context ``{"key": ...}``, the key its file name gives, which the
    note's own ``key`` must equal.
    """

    key: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{20}$")]
    dataset: Text
    method: Text
    point: dict
    seed: Count
    error: StrictStr

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        return value

    @model_validator(mode="after")
    def _named_by_its_key(self, info: ValidationInfo) -> Failure:
        key = (info.context or {}).get("key")
        if key is not None and self.key != key:
            raise ValueError(f"its 'key' is {self.key!r}, not the file's name {key!r}")
        return self


class Record(Failure):
    """The layout of a record (see ``docs/benchmark_runner.md``); every metric finite.

    ``test``, ``validation`` and ``reliability`` have the same stages, ``"raw"`` among
    them, and none that ``calibrators`` says failed. The validation context may add
    ``stages`` (those of the configuration that planned it: each measured or failed) and
    ``metrics`` (every ``test`` stage has them).
    """

    error: None = None
    params: dict
    identity: dict
    data: Data
    validation: dict[str, Stage]
    test: dict[str, Metrics]
    reliability: dict[str, Bins]
    conditions: dict[str, dict[str, Metrics]]
    fit: dict
    calibrators: dict
    environment: dict
    run: Run

    @model_validator(mode="after")
    def _same_stages(self, info: ValidationInfo) -> Record:
        found = set(self.test)
        failed = {n for n, s in self.calibrators.items() if isinstance(s, dict) and "error" in s}
        for section in ("validation", "reliability"):
            stages = getattr(self, section)
            if set(stages) != found or "raw" not in found:
                raise ValueError(
                    f"'{section}' has the stages {sorted(stages)} but 'test' has {sorted(found)}"
                )
        if failed & found:
            raise ValueError(
                f"'test' has the stages {sorted(failed & found)} that 'calibrators' says failed"
            )
        context = info.context or {}
        planned = context.get("stages")
        if planned is not None and found | failed != set(planned):
            also = f" (and {sorted(failed)} failed)" if failed else ""
            raise ValueError(
                f"'test' has the stages {sorted(found)}{also}; its configuration has "
                f"{sorted(planned)}"
            )
        for stage, values in self.test.items():
            missing = [m for m in context.get("metrics", ()) if m not in values]
            if missing:
                raise ValueError(f"'test.{stage}' lacks the metrics {missing}")
        return self


def check_failure(failure: Any, key: str | None = None) -> dict:
    """Check a ``failures/`` note (:class:`Failure`); return it."""
    parse(Failure, failure, error=InvalidRecordError, context={"key": key})
    return dict(failure)


def check_record(
    record: Any,
    key: str | None = None,
    *,
    stages: Sequence[str] | None = None,
    metrics: Sequence[str] = (),
) -> dict:
    """Check that ``record`` has every key and type the benchmark reads (:class:`Record`);
    return it.

    Parameters
    ----------
    record : object
        A parsed record file.
    key : str or None, default=None
        The key its file name gives (``records/<key>.json``); the record's own ``key``
        must equal it.
    stages : sequence of str or None, default=None
        The stages (``"raw"`` and each calibrator) the record must have, or have failed
        (those of the configuration that planned it); None checks only that ``test``,
        ``validation`` and ``reliability`` have the same ones, ``"raw"`` among them.
    metrics : sequence of str, default=()
        Metrics every ``test`` stage must have (those a report shows).

    Raises
    ------
    InvalidRecordError
        Saying what is missing or wrong (the first problem found).

    Examples
    --------
    >>> from nescal_bench import check_record
    >>> try:
    ...     check_record({"key": "0123456789abcdef0123"})
    ... except ValueError as exc:
    ...     print(exc)
    dataset: required key missing
    """
    context = {"key": key, "stages": stages, "metrics": metrics}
    parse(Record, record, error=InvalidRecordError, context=context)
    return dict(record)


def _parse(path: Path) -> Any:
    """The JSON of ``path``; InvalidRecordError saying why it cannot be read."""
    if path.is_symlink() or not path.is_file():
        what = "a symbolic link, which is never followed" if path.is_symlink() else "not a file"
        raise InvalidRecordError(what)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidRecordError(f"cannot be read ({exc.strerror})") from None
    if not raw.strip():
        raise InvalidRecordError(f"an empty file ({len(raw)} bytes)")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidRecordError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


# --------------------------------------------------------------------------- files
def real_dir(path: Path, *, replace: bool = False) -> Path:
    """``path`` as a real directory (created): a symbolic link there is refused (a
    RunError), or with ``replace`` removed first, never written through."""
    if path.is_symlink():
        if not replace:
            raise RunError(
                f"{path} is a symbolic link; nescal-bench never writes through one: remove it"
            )
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, payload: Any) -> None:
    """Write ``payload`` (bytes, text, or an object as JSON) to a temporary file beside
    ``path``, then ``os.replace`` it: a reader (or a killed writer) sees either no file or
    the whole file, and a symbolic link at ``path`` is replaced, not written through."""
    if not isinstance(payload, (bytes, str)):
        payload = json.dumps(payload, indent=1, sort_keys=True, allow_nan=True) + "\n"
    data = payload.encode() if isinstance(payload, str) else payload
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RecordStore:
    """The ``records/`` (finished fits) and ``failures/`` folders of a results directory.

    Examples
    --------
    >>> import tempfile
    >>> from nescal_bench import RecordStore
    >>> store = RecordStore(tempfile.mkdtemp())
    >>> store.write({"key": "0123456789abcdef0123", "seed": 0})
    >>> store.path("0123456789abcdef0123").is_file(), sorted(store.keys())
    (True, ['0123456789abcdef0123'])
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.records_dir = self.root / "records"
        self.failures_dir = self.root / "failures"

    def path(self, key: str) -> Path:
        return self.records_dir / f"{key}.json"

    def keys(self) -> set[str]:
        """Names of the record files (``records/*.json``), valid or not."""
        return self._names(self.records_dir)

    @staticmethod
    def _names(folder: Path) -> set[str]:
        if not folder.is_dir():
            return set()
        return {p.stem for p in folder.glob("*.json") if not p.name.startswith(".")}

    def write(self, record: Mapping[str, Any]) -> None:
        """Write a finished fit atomically, and drop any failure noted for its key."""
        write_atomic(real_dir(self.records_dir) / f"{record['key']}.json", record)
        if self.failures_dir.is_dir() and not self.failures_dir.is_symlink():
            (self.failures_dir / f"{record['key']}.json").unlink(missing_ok=True)

    def write_failure(self, failure: Mapping[str, Any]) -> None:
        write_atomic(real_dir(self.failures_dir) / f"{failure['key']}.json", failure)

    def read(self, key: str) -> dict:
        """The record of ``key``, checked (:func:`check_record`); InvalidRecordError
        naming the file if it is not a valid record."""
        path = self.path(key)
        try:
            return check_record(_parse(path), key)
        except InvalidRecordError as exc:
            raise InvalidRecordError(f"{path}: {exc}") from None

    def _load(self, folder: Path, check, *, move: bool) -> dict[str, dict]:
        found: dict[str, dict] = {}
        for key in sorted(self._names(folder) if not folder.is_symlink() else ()):
            path = folder / f"{key}.json"
            try:
                found[key] = check(_parse(path), key)
            except InvalidRecordError as exc:
                self._set_aside(path, str(exc), move)
        return found

    def _set_aside(self, path: Path, problem: str, move: bool) -> None:
        """Warn about a file that is not a valid record, moving it to ``corrupt/``."""
        what = "record" if path.parent == self.records_dir else "failure note"
        message = f"{path}: skipped, not a valid {what}: {problem}"
        if move:
            corrupt = path.parent / "corrupt"
            target, n = corrupt / path.name, 1
            while target.exists() or target.is_symlink():
                target, n = corrupt / f"{path.stem}.{n}{path.suffix}", n + 1
            try:
                os.replace(path, real_dir(corrupt, replace=True) / target.name)
            except OSError as exc:
                message += f"; it could not be moved to {corrupt} ({exc.strerror})"
            else:
                message += f"; moved to {target}"
        if path.parent == self.records_dir and len(path.stem) == 20:
            message += "; run --resume fits it again"
        warnings.warn(message, CorruptRecordWarning, stacklevel=4)

    def load(
        self,
        *,
        move: bool = True,
        planned: Collection[str] = (),
        stages: Sequence[str] | None = None,
        metrics: Sequence[str] = (),
    ) -> dict[str, dict]:
        """Every valid record, by key; each invalid file is skipped with a
        :class:`CorruptRecordWarning` and, with ``move``, moved to ``records/corrupt/``.
        Records whose key is in ``planned`` must also have the ``stages`` and ``metrics``
        of the configuration (see :func:`check_record`)."""

        def check(record, key):
            if key in planned:
                return check_record(record, key, stages=stages, metrics=metrics)
            return check_record(record, key)

        return self._load(self.records_dir, check, move=move)

    def failures(self, *, move: bool = False) -> list[dict]:
        """Every failure noted (fits that raised), in key order; invalid files are skipped
        with a :class:`CorruptRecordWarning` (moved to ``failures/corrupt/`` with ``move``)."""
        return list(self._load(self.failures_dir, check_failure, move=move).values())

    def remove_temporaries(self) -> int:
        """Delete the temporary files of ``records/`` and ``failures/`` (call it only while
        holding the output folder's lock: every writer is then gone); return how many."""
        folders = [
            f for f in (self.records_dir, self.failures_dir) if f.is_dir() and not f.is_symlink()
        ]
        found = [tmp for folder in folders for tmp in folder.glob(".*.tmp")]
        for tmp in found:
            tmp.unlink(missing_ok=True)
        return len(found)
