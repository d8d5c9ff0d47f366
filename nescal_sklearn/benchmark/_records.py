"""Fit records: one JSON file per finished fit, named by a stable hash, written atomically.

A file of ``records/`` counts as a finished fit only if it passes
:func:`check_record` (the keys and types that the report, ``compare``, model
selection and the time estimate read). Any other file there (truncated, empty, not
UTF-8, ``{}``, a missing key, a JSON list) is skipped with a
:class:`CorruptRecordWarning` naming it and what is wrong, and moved aside to
``records/corrupt/``, so that ``run --resume`` fits it again; ``failures/`` files
likewise (to ``failures/corrupt/``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import tempfile
import time
import warnings
import zlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._specs import BenchmarkWarning

__all__ = [
    "RECORD_FORMAT",
    "CorruptRecordWarning",
    "InvalidRecordError",
    "RecordStore",
    "check_failure",
    "check_record",
    "identity_differences",
    "library_versions",
    "record_key",
    "write_json_atomic",
]

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
    >>> from nescal_sklearn.benchmark._records import record_key
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
    >>> from nescal_sklearn.benchmark._records import identity_differences
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

    from .. import __version__

    return {
        "python": platform.python_version(),
        "nescal_sklearn": __version__,
        "torch": torch.__version__,
        "sklearn": sklearn.__version__,
        "numpy": numpy.__version__,
        "skorch": skorch.__version__,
    }


# --------------------------------------------------------------------------- schema
class InvalidRecordError(ValueError):
    """A record (or failure) file that does not have the layout the benchmark reads."""


class CorruptRecordWarning(BenchmarkWarning):
    """A file of ``records/`` or ``failures/`` was skipped (and moved aside) because it is
    not a valid record; the message names the file and what is wrong with it."""


_KEY = re.compile(r"^[0-9a-f]{20}$")


def _describe(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    for kind, text in kinds.items():
        if isinstance(value, kind):
            return text
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def _where(path: str) -> str:
    return f"'{path}'"


def _need(path: str, ok: bool, expected: str, value: Any) -> None:
    if not ok:
        shown = json.dumps(value) if isinstance(value, (int, float, str)) else _describe(value)
        raise InvalidRecordError(f"{_where(path)} is {shown}; expected {expected}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fields(path: str, value: Any, required: tuple[str, ...]) -> Mapping:
    if not isinstance(value, Mapping):
        if not path:
            raise InvalidRecordError(f"expected a JSON object, got {_describe(value)}")
        _need(path, False, "an object", value)
    missing = [key for key in required if key not in value]
    if missing:
        where = f" of {_where(path)}" if path else ""
        keys = ", ".join(f"'{key}'" for key in missing)
        raise InvalidRecordError(f"missing the key{'s' * (len(missing) > 1)} {keys}{where}")
    return value


def _stages(path: str, value: Any, check) -> set[str]:
    _fields(path, value, ("raw",))
    for stage, item in value.items():
        check(f"{path}.{stage}", item)
    return set(value)


def _metrics(path: str, value: Any) -> None:
    _fields(path, value, ())
    for name, number in value.items():
        _need(f"{path}.{name}", _is_number(number), "a number", number)


def _validation_stage(path: str, value: Any) -> None:
    _fields(path, value, ("nll",))
    _need(f"{path}.nll", _is_number(value["nll"]), "a number", value["nll"])


def _bins(path: str, value: Any) -> None:
    _fields(path, value, ("counts", "confidence", "accuracy"))
    for name in ("counts", "confidence", "accuracy"):
        items = value[name]
        ok = isinstance(items, list) and all(
            (_is_count if name == "counts" else lambda v: v is None or _is_number(v))(v)
            for v in items
        )
        _need(
            f"{path}.{name}",
            ok,
            "a list of counts" if name == "counts" else "a list of numbers or nulls",
            items,
        )


#: Keys every record has (what the report, ``compare``, model selection and the time
#: estimate read, and the rest of what :func:`~._fit.execute_fit` writes).
RECORD_KEYS = (
    "key", "dataset", "method", "point", "seed", "params", "identity", "data",
    "validation", "test", "reliability", "conditions", "fit", "calibrators",
    "environment", "run",
)  # fmt: skip

#: Keys every failure note has.
FAILURE_KEYS = ("key", "dataset", "method", "point", "seed", "error")

_DATA_COUNTS = ("n_train", "n_validation", "n_test", "n_features", "n_classes")


def _identification(record: Mapping, key: str | None) -> None:
    _need("key", isinstance(record["key"], str) and bool(_KEY.match(record["key"])),
          "20 hex digits", record["key"])  # fmt: skip
    if key is not None and record["key"] != key:
        raise InvalidRecordError(f"its 'key' is {record['key']!r}, not the file's name {key!r}")
    for name in ("dataset", "method"):
        _need(name, isinstance(record[name], str) and bool(record[name]), "a non-empty string",
              record[name])  # fmt: skip
    _need("point", isinstance(record["point"], Mapping), "an object", record["point"])
    _need("seed", _is_count(record["seed"]), "an int >= 0", record["seed"])


def check_record(
    record: Any,
    key: str | None = None,
    *,
    stages: Sequence[str] | None = None,
    metrics: Sequence[str] = (),
) -> dict:
    """Check that ``record`` has every key and type the benchmark reads; return it.

    Parameters
    ----------
    record : object
        A parsed record file.
    key : str or None, default=None
        The key its file name gives (``records/<key>.json``); the record's own ``key``
        must equal it.
    stages : sequence of str or None, default=None
        The stages (``"raw"`` and each calibrator) the record must have (those of the
        configuration that planned it); None checks only that ``test``, ``validation``
        and ``reliability`` have the same ones, ``"raw"`` among them.
    metrics : sequence of str, default=()
        Metrics every ``test`` stage must have (those a report shows).

    Raises
    ------
    InvalidRecordError
        Saying what is missing or wrong (the first problem found).

    Examples
    --------
    >>> from nescal_sklearn.benchmark._records import check_record
    >>> try:
    ...     check_record({})
    ... except ValueError as exc:
    ...     print(str(exc)[:60])
    missing the keys 'key', 'dataset', 'method', 'point', 'seed'
    """
    record = _fields("", record, RECORD_KEYS)
    _identification(record, key)
    for name in ("params", "identity", "fit", "calibrators", "environment"):
        _need(name, isinstance(record[name], Mapping), "an object", record[name])
    data = _fields("data", record["data"], (*_DATA_COUNTS, "split"))
    for name in _DATA_COUNTS:
        _need(f"data.{name}", _is_count(data[name]), "an int >= 0", data[name])
    _need("data.split", isinstance(data["split"], str), "a string", data["split"])
    found = _stages("test", record["test"], _metrics)
    # A calibrator that raised on this fit has {"error": ...} in 'calibrators' instead.
    failed = {
        name
        for name, summary in record["calibrators"].items()
        if isinstance(summary, Mapping) and "error" in summary
    }
    if failed & found:
        raise InvalidRecordError(
            f"'test' has the stages {sorted(failed & found)} that 'calibrators' says failed"
        )
    if stages is not None and found | failed != set(stages):
        raise InvalidRecordError(
            f"'test' has the stages {sorted(found)}"
            + (f" (and {sorted(failed)} failed)" if failed else "")
            + f"; its configuration has {sorted(stages)}"
        )
    for stage, values in record["test"].items():
        missing = [m for m in metrics if m not in values]
        if missing:
            raise InvalidRecordError(f"'test.{stage}' lacks the metrics {missing}")
    for section, check in (("validation", _validation_stage), ("reliability", _bins)):
        other = _stages(section, record[section], check)
        if other != found:
            raise InvalidRecordError(
                f"'{section}' has the stages {sorted(other)} but 'test' has {sorted(found)}"
            )
    _fields("conditions", record["conditions"], ())
    for name, by_stage in record["conditions"].items():
        _stages(f"conditions.{name}", by_stage, _metrics)
    run = _fields("run", record["run"], ("fit_seconds",))
    for name in ("fit_seconds", "calibration_seconds"):
        if name in run:
            ok = _is_number(run[name]) and math.isfinite(run[name]) and run[name] >= 0
            _need(f"run.{name}", ok, "a number of seconds >= 0", run[name])
    return dict(record)


def check_failure(failure: Any, key: str | None = None) -> dict:
    """Check a ``failures/`` note (the fit's identification and its ``error``); return it."""
    failure = _fields("", failure, FAILURE_KEYS)
    _identification(failure, key)
    _need("error", isinstance(failure["error"], str), "a string", failure["error"])
    return dict(failure)


def _unclosed(text: str) -> bool:
    """Whether ``text`` ends inside a string, object or array that it opened: a JSON
    document cut short (a cut anywhere in a record leaves its outer ``{`` open)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth < 0:
                return False  # closes more than it opened: malformed, not cut
    return in_string or depth > 0


def _parse(path: Path) -> Any:
    """The JSON of ``path``; InvalidRecordError saying why it cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidRecordError(f"cannot be read ({exc.strerror})") from None
    if not raw.strip():
        raise InvalidRecordError(f"an empty file ({len(raw)} bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        ends = "; no closing '}' (truncated?)" if _unclosed(text) else ""
        raise InvalidRecordError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{ends}"
        ) from None


# --------------------------------------------------------------------------- files
#: Temporary files are named ``.<stem>.p<pid>h<host hash>.<random>.tmp`` so that a
#: run removes only those whose writer is gone.
_TEMPORARY = re.compile(r"\.p(\d+)h([0-9a-f]{8})\.[^.]*\.tmp$")

#: A temporary file older than this is stale whoever wrote it (a write takes ms).
STALE_TEMPORARY_SECONDS = 3600.0


def _host_hash() -> str:
    return f"{zlib.crc32(platform.node().encode()):08x}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def _temporary_is_stale(path: Path) -> bool:
    match = _TEMPORARY.search(path.name)
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return False
    if age > STALE_TEMPORARY_SECONDS:
        return True
    if match is None or match.group(2) != _host_hash():
        return False  # another host's writer (or an unknown name): only by age
    pid = int(match.group(1))
    return pid != os.getpid() and not _pid_alive(pid)


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write ``payload`` as JSON to a temporary file beside ``path``, then ``os.replace`` it.

    A reader (or a killed writer) sees either no file or the whole file. The temporary
    file's name holds the writer's pid and host, so that a later run removes it only
    once its writer is gone.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.stem}.p{os.getpid()}h{_host_hash()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle, indent=1, sort_keys=True, allow_nan=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RecordStore:
    """The ``records/`` (finished fits) and ``failures/`` folders of a results directory.

    Parameters
    ----------
    root : path
        The results directory.

    Examples
    --------
    >>> import tempfile
    >>> from nescal_sklearn.benchmark import RecordStore
    >>> store = RecordStore(tempfile.mkdtemp())
    >>> store.write({"key": "0123456789abcdef0123", "seed": 0})
    >>> store.has("0123456789abcdef0123"), sorted(store.keys())
    (True, ['0123456789abcdef0123'])
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.records_dir = self.root / "records"
        self.failures_dir = self.root / "failures"

    def path(self, key: str) -> Path:
        return self.records_dir / f"{key}.json"

    def has(self, key: str) -> bool:
        return self.path(key).is_file()

    def keys(self) -> set[str]:
        """Names of the record files (``records/*.json``; temporary files are ignored),
        valid or not."""
        return self._names(self.records_dir)

    @staticmethod
    def _names(folder: Path) -> set[str]:
        if not folder.is_dir():
            return set()
        return {p.stem for p in folder.glob("*.json") if not p.name.startswith(".")}

    def write(self, record: Mapping[str, Any]) -> None:
        """Write a finished fit atomically, and drop any failure noted for its key."""
        write_json_atomic(self.path(record["key"]), record)
        (self.failures_dir / f"{record['key']}.json").unlink(missing_ok=True)

    def write_failure(self, failure: Mapping[str, Any]) -> None:
        write_json_atomic(self.failures_dir / f"{failure['key']}.json", failure)

    def read(self, key: str) -> dict:
        """The record of ``key``, checked (:func:`check_record`).

        Raises
        ------
        InvalidRecordError
            If the file is not a valid record (the message names the file).
        """
        path = self.path(key)
        try:
            return check_record(_parse(path), key)
        except InvalidRecordError as exc:
            raise InvalidRecordError(f"{path}: {exc}") from None

    def _load(self, folder: Path, check, *, move: bool) -> dict[str, dict]:
        found: dict[str, dict] = {}
        for key in sorted(self._names(folder)):
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
            target = corrupt / path.name
            n = 1
            while target.exists():
                target = corrupt / f"{path.stem}.{n}{path.suffix}"
                n += 1
            try:
                corrupt.mkdir(exist_ok=True)
                os.replace(path, target)
            except OSError as exc:
                message += f"; it could not be moved to {corrupt} ({exc.strerror})"
            else:
                message += f"; moved to {target}"
        if path.parent == self.records_dir and _KEY.match(path.stem):
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

        Records whose key is in ``planned`` must also have the ``stages`` and
        ``metrics`` of the configuration (see :func:`check_record`).
        """

        def check(record, key):
            if key in planned:
                return check_record(record, key, stages=stages, metrics=metrics)
            return check_record(record, key)

        return self._load(self.records_dir, check, move=move)

    def load_all(self, *, move: bool = False) -> Iterator[dict]:
        """Every valid record, in key order (invalid files skipped with a warning)."""
        yield from self.load(move=move).values()

    def failures(self, *, move: bool = False) -> list[dict]:
        """Every failure noted (fits that raised), in key order; invalid files are skipped
        with a :class:`CorruptRecordWarning` (moved to ``failures/corrupt/`` with ``move``)."""
        return list(self._load(self.failures_dir, check_failure, move=move).values())

    def remove_stale_temporaries(self) -> int:
        """Delete the temporary files whose writer is gone (its pid dead on this host, or
        the file older than :data:`STALE_TEMPORARY_SECONDS`); return how many.

        A temporary file of a live writer (a worker still finishing its fit) is kept.
        """
        count = 0
        for folder in (self.records_dir, self.failures_dir):
            if folder.is_dir():
                for tmp in folder.glob(".*.tmp"):
                    if _temporary_is_stale(tmp):
                        tmp.unlink(missing_ok=True)
                        count += 1
        return count
