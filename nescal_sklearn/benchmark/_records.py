"""Fit records: one JSON file per finished fit, named by a stable hash, written atomically."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "RECORD_FORMAT",
    "RecordStore",
    "identity_differences",
    "library_versions",
    "record_key",
    "write_json_atomic",
]

#: Version of the record layout and of the protocol; part of every key.
RECORD_FORMAT = 2


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces (the text a key hashes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def record_key(identity: Mapping[str, Any]) -> str:
    """Stable hash (20 hex digits of SHA-256) of a fit's identity and :data:`RECORD_FORMAT`.

    The identity (built by the plan) holds the dataset source and its row cap, the
    split settings, the method's name, the estimator's class and *resolved*
    parameters (every default included, ``random_state`` being the seed), the seed,
    the calibrators, the evaluation conditions, the ``nescal_sklearn`` version and
    the thread count; key order does not matter. The reported metrics are not part
    of it (every metric is recorded).

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


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write ``payload`` as JSON to a temporary file beside ``path``, then ``os.replace`` it.

    A reader (or a killed writer) sees either no file or the whole file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
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
    >>> store.write({"key": "abc", "seed": 0})
    >>> store.has("abc"), [r["seed"] for r in store.load_all()]
    (True, [0])
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
        """Keys of the finished fits (temporary files are ignored)."""
        if not self.records_dir.is_dir():
            return set()
        return {p.stem for p in self.records_dir.glob("*.json") if not p.name.startswith(".")}

    def write(self, record: Mapping[str, Any]) -> None:
        """Write a finished fit atomically, and drop any failure noted for its key."""
        write_json_atomic(self.path(record["key"]), record)
        (self.failures_dir / f"{record['key']}.json").unlink(missing_ok=True)

    def write_failure(self, failure: Mapping[str, Any]) -> None:
        write_json_atomic(self.failures_dir / f"{failure['key']}.json", failure)

    def read(self, key: str) -> dict:
        with self.path(key).open() as handle:
            return json.load(handle)

    def load_all(self) -> Iterator[dict]:
        """Every finished record, in key order."""
        for key in sorted(self.keys()):
            yield self.read(key)

    def failures(self) -> list[dict]:
        """Every failure noted (fits that raised), in key order."""
        if not self.failures_dir.is_dir():
            return []
        return [
            json.loads(path.read_text())
            for path in sorted(self.failures_dir.glob("*.json"))
            if not path.name.startswith(".")
        ]

    def remove_stale_temporaries(self) -> int:
        """Delete temporary files left by a killed writer; return how many."""
        count = 0
        for folder in (self.records_dir, self.failures_dir):
            if folder.is_dir():
                for tmp in folder.glob(".*.tmp"):
                    tmp.unlink(missing_ok=True)
                    count += 1
        return count
