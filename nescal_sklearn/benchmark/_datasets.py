"""Local tabular datasets: parquet files described by a ``manifest.json``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

__all__ = ["DEFAULT_DATA_DIR", "LocalDataset", "list_local_datasets", "load_local_dataset"]

#: Where the development suite lives, relative to the repository root; the
#: ``NESCAL_DATA_DIR`` environment variable overrides it.
DEFAULT_DATA_DIR = Path("..") / "shared" / "data"


def _data_dir(data_dir: str | os.PathLike | None) -> Path:
    if data_dir is not None:
        return Path(data_dir)
    return Path(os.environ.get("NESCAL_DATA_DIR", DEFAULT_DATA_DIR))


@dataclass(frozen=True)
class LocalDataset:
    """A dataset loaded from the local suite.

    Attributes
    ----------
    name : str
        Manifest name.
    X : pandas.DataFrame
        Features (numeric and ``category`` columns, missing values as NaN).
    y : pandas.Series
        Labels (column ``target``).
    info : dict
        The manifest entry.
    """

    name: str
    X: pd.DataFrame
    y: pd.Series
    info: dict


def list_local_datasets(data_dir: str | os.PathLike | None = None) -> list[dict]:
    """Return the manifest entries of the local suite (``data_dir/manifest.json``).

    Parameters
    ----------
    data_dir : path or None, default=None
        Folder holding ``manifest.json``; None uses ``$NESCAL_DATA_DIR`` or
        ``../shared/data``.
    """
    path = _data_dir(data_dir) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"No manifest.json in data_dir={str(path.parent)!r} (resolved to "
            f"{str(path.parent.resolve())!r}); pass data_dir or set NESCAL_DATA_DIR."
        )
    with path.open() as handle:
        return json.load(handle)


def load_local_dataset(name: str, data_dir: str | os.PathLike | None = None) -> LocalDataset:
    """Load one dataset of the local suite by its manifest name.

    Parameters
    ----------
    name : str
        Manifest name, e.g. ``"credit-g"``.
    data_dir : path or None, default=None
        Folder holding ``manifest.json`` and the parquet files.

    Returns
    -------
    LocalDataset
    """
    entries = {entry["name"]: entry for entry in list_local_datasets(data_dir)}
    if name not in entries:
        raise ValueError(f"Unknown dataset name={name!r}; the manifest lists {sorted(entries)}.")
    entry = entries[name]
    frame = pd.read_parquet(_data_dir(data_dir) / entry["file"])
    y = frame.pop("target")
    if isinstance(y.dtype, pd.CategoricalDtype):
        y = y.astype(str)
    return LocalDataset(name=name, X=frame, y=y, info=entry)
