"""
Quickstart: NeSCal vs cross-entropy on a tabular dataset
========================================================

Fits the same MLP with NeSCal and with plain cross-entropy (early stopping on a
validation split), plus two scikit-learn anchors, temperature-scales each on the
validation split, and prints test NLL / ECE / Brier / accuracy raw and after
temperature scaling. Writes ``OUT/quickstart.md`` (the table) and
``OUT/reliability.png`` (a reliability diagram of both neural models).

Everything used here is public API: ``NeSCalClassifier``, ``CalibratedTemperature``
around scikit-learn's ``FrozenEstimator``, the metrics of ``nescal_sklearn.metrics``,
``ReliabilityDisplay`` and ``make_tabular_preprocessor``. The data is one of
scikit-learn's bundled sets, or a set of the local suite (a parquet file named in
``DATA_DIR/manifest.json``). Run from the repository root::

    python examples/quickstart.py --dataset breast_cancer --out results/quickstart
    python examples/quickstart.py --dataset phoneme --data-dir ../shared/data
"""

# %%
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import sklearn.datasets  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.frozen import FrozenEstimator  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from nescal_sklearn import (  # noqa: E402
    CalibratedTemperature,
    NeSCalClassifier,
    ReliabilityDisplay,
    make_tabular_preprocessor,
)
from nescal_sklearn.metrics import (  # noqa: E402
    brier_score_loss,
    expected_calibration_error,
    log_loss,
)

#: The datasets bundled with scikit-learn that ``--dataset`` accepts by name.
BUNDLED = ("breast_cancer", "digits", "iris", "wine")


def load(name: str, data_dir: str | None):
    """Features (a DataFrame) and labels of a bundled set or of a local parquet file."""
    if name in BUNDLED:
        return getattr(sklearn.datasets, f"load_{name}")(return_X_y=True, as_frame=True)
    import pandas as pd

    folder = Path(data_dir or os.environ.get("NESCAL_DATA_DIR", "../shared/data"))
    entry = next(e for e in json.loads((folder / "manifest.json").read_text()) if e["name"] == name)
    frame = pd.read_parquet(folder / entry["file"])
    return frame.drop(columns="target"), frame["target"].astype(str)


def split_and_preprocess(X, y, seed: int):
    """A stratified 60/20/20 split; the preprocessing is fitted on the training rows."""
    y = np.asarray(y)
    rest, test = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y, random_state=seed)
    train, val = train_test_split(rest, test_size=0.25, stratify=y[rest], random_state=seed)
    preprocess = make_tabular_preprocessor().fit(X.iloc[train])

    def part(rows):
        return np.asarray(preprocess.transform(X.iloc[rows]), dtype=np.float32), y[rows]

    (X_train, y_train), (X_val, y_val), (X_test, y_test) = part(train), part(val), part(test)
    return SimpleNamespace(X_train=X_train, y_train=y_train, X_val=X_val, y_val=y_val,
                           X_test=X_test, y_test=y_test, classes=np.unique(y))  # fmt: skip


def evaluate(model, split) -> dict[str, float]:
    """NLL, top-label ECE (15 bins), Brier (sum over classes) and accuracy on the test rows."""
    proba = model.predict_proba(split.X_test)
    labels = model.classes_
    return {
        "nll": log_loss(split.y_test, proba, labels=labels),
        "ece": expected_calibration_error(split.y_test, proba, labels=labels),
        "brier": brier_score_loss(split.y_test, proba, labels=labels, scale_by_half=False),
        "accuracy": float(np.mean(labels[np.argmax(proba, axis=1)] == split.y_test)),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="NeSCal vs cross-entropy on a tabular dataset.")
    parser.add_argument(
        "--dataset",
        default="breast_cancer",
        help=f"one of {BUNDLED}, or a name in DATA_DIR/manifest.json",
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-epochs", type=int, default=60)
    parser.add_argument("--out", default="results/quickstart")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # %% Data: stratified 60/20/20 split, preprocessing fitted on the training rows.
    split = split_and_preprocess(*load(args.dataset, args.data_dir), seed=args.seed)
    print(
        f"{args.dataset}: {len(split.y_train)} train / {len(split.y_val)} validation / "
        f"{len(split.y_test)} test rows, {split.X_train.shape[1]} features, "
        f"{len(split.classes)} classes"
    )

    # %% Models: the same MLP trained with NeSCal and with cross-entropy. The neural
    # models early-stop on the validation rows, which also fit the temperature.
    common = dict(max_epochs=args.max_epochs, random_state=args.seed)
    models = {
        "NeSCal": NeSCalClassifier(**common),
        "Cross-entropy": NeSCalClassifier(loss="ce", **common),
        "LogisticRegression": LogisticRegression(max_iter=2000),
        "HistGradientBoosting": HistGradientBoostingClassifier(random_state=args.seed),
    }
    fitted, scaled = {}, {}
    for name, model in models.items():
        start = time.perf_counter()
        if isinstance(model, NeSCalClassifier):
            model.fit(split.X_train, split.y_train, X_val=split.X_val, y_val=split.y_val)
        else:
            model.fit(split.X_train, split.y_train)
        fitted[name] = model
        # %% Temperature scaling around the frozen model, fitted on the validation rows.
        scaled[name] = CalibratedTemperature(FrozenEstimator(model)).fit(split.X_val, split.y_val)
        print(f"  fitted {name} in {time.perf_counter() - start:.1f} s")

    # %% Table: test metrics raw and after temperature scaling (TS).
    header = "| model | NLL | NLL after TS | ECE | ECE after TS | Brier | accuracy | T |"
    rows = [header, "|---|---|---|---|---|---|---|---|"]
    for name in models:
        raw, ts = evaluate(fitted[name], split), evaluate(scaled[name], split)
        rows.append(
            f"| {name} | {raw['nll']:.4f} | {ts['nll']:.4f} | "
            f"{100 * raw['ece']:.2f} % | {100 * ts['ece']:.2f} % | "
            f"{raw['brier']:.4f} | {100 * raw['accuracy']:.2f} % | "
            f"{float(scaled[name].temperature_):.3f} |"
        )
    table = "\n".join(rows)
    print(table)

    # %% Reliability diagram of both neural models on the test rows.
    fig, ax = plt.subplots(figsize=(6, 6))
    for name in ("Cross-entropy", "NeSCal"):
        ReliabilityDisplay.from_estimator(
            fitted[name], split.X_test, split.y_test, name=name, ax=ax
        )
    ax.set_title(f"{args.dataset}: test reliability (top label)")
    figure_path = out / "reliability.png"
    fig.savefig(figure_path, dpi=120, bbox_inches="tight")
    (out / "quickstart.md").write_text(
        f"# Quickstart: {args.dataset}, seed {args.seed}\n\n{table}\n\n![reliability](reliability.png)\n"
    )
    print(f"wrote {out / 'quickstart.md'} and {figure_path}")


if __name__ == "__main__":
    main()
