"""The dry-run time estimate: dataset sizes x epochs x a measured per-row cost.

How it is computed:

* *Calibration fits* measure the cost of training: a ``NeSCalClassifier(loss="ce")``
  with the config's ``hidden_sizes`` and ``batch_size`` is trained on random data
  of 32 features (256 and 2048 training rows, a quarter as many validation rows
  scored every epoch by an early stopping that never triggers), on
  ``budget.threads`` threads, for 1 and for 4 epochs. These four fits separate a
  fixed cost per fit, a fixed cost per epoch (callbacks, logging) and a cost per
  row and epoch. When a method uses the neighbour graph (NeSCal), the same fits
  with ``loss="nescal"`` give its costs. The configured calibrators are then fitted
  on the validation rows and the metrics computed: that time is added to every fit.
* A neural fit costs ``fixed + max_epochs x (per_epoch + per_row_epoch x (n_train +
  n_validation / 4))``, the per-row cost scaled by the MLP's multiply-adds for the
  dataset's features and classes relative to the calibration fits': an upper bound on
  training, since early stopping usually ends it before ``max_epochs``; preprocessing
  (one-hot columns count as one feature here) and test predictions are not counted.
* A scikit-learn method is timed once on 2000 random rows of 32 features, scaled
  linearly with ``n_train``, plus the post-hoc time.
* The wall time divides the sum by the number of parallel jobs (with a scheduler,
  only the total is shown).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.frozen import FrozenEstimator

from ._config import BenchmarkConfig, MethodSpec
from ._fit import _aligned_proba, _metrics, _reliability, limit_threads
from ._registry import calibrator_class

__all__ = ["estimate_seconds"]

_SMALL, _ROWS, _VAL_ROWS, _FEATURES = 256, 2048, 512, 32
_WEIGHT = 1 + 1 / 16  # training rows + (a quarter as many validation rows) / 4


def _synthetic(n_rows: int, seed: int = 0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n_rows, _FEATURES)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=n_rows) > 0).astype(int)
    return X, y


def _post_hoc_seconds(config: BenchmarkConfig, model, X, y) -> float:
    """Time of the configured calibrators and of the metrics on ``X``."""
    classes = np.unique(y)
    start = time.perf_counter()
    stages = [model]
    for spec in config.calibrators:
        stages.append(calibrator_class(spec.name)(FrozenEstimator(model), **spec.params).fit(X, y))
    for fitted in stages:
        proba = _aligned_proba(fitted, X, classes)
        _metrics(y, proba, classes)
        _reliability(y, proba, classes)
    return time.perf_counter() - start


def _neural_cost(config: BenchmarkConfig, loss: str) -> tuple[float, float, float]:
    """(fixed seconds per fit, seconds per epoch, seconds per row-epoch) of ``loss``."""
    from ..estimator import NeSCalClassifier

    params = {
        k: (tuple(v) if k == "hidden_sizes" else v)
        for k, v in config.budget.estimator_params().items()
        if k in ("hidden_sizes", "batch_size", "device")
    }
    seconds = {}
    with limit_threads(config.budget.threads):
        # the first fit warms up (imports, allocations) and is not used
        for rows, epochs in ((_SMALL, 1), (_SMALL, 1), (_SMALL, 4), (_ROWS, 1), (_ROWS, 4)):
            X, y = _synthetic(rows)
            X_val, y_val = _synthetic(rows // 4, seed=1)
            model = NeSCalClassifier(
                loss=loss, max_epochs=epochs, patience=100, random_state=0, **params
            )
            if loss == "nescal":
                model.set_params(loss__warmup=0)
            start = time.perf_counter()
            model.fit(X, y, X_val=X_val, y_val=y_val)
            seconds[rows, epochs] = time.perf_counter() - start
        post_hoc = _post_hoc_seconds(config, model, X_val, y_val)
    per_epoch = {r: max(seconds[r, 4] - seconds[r, 1], 0.0) / 3 for r in (_SMALL, _ROWS)}
    # validation rows (a quarter of the training rows) count a quarter each
    per_row_epoch = max(per_epoch[_ROWS] - per_epoch[_SMALL], 0.0) / ((_ROWS - _SMALL) * _WEIGHT)
    epoch_fixed = max(per_epoch[_SMALL] - per_row_epoch * _SMALL * _WEIGHT, 0.0)
    fixed = max(seconds[_SMALL, 1] - per_epoch[_SMALL], 0.0) + post_hoc
    return fixed, epoch_fixed, per_row_epoch


def _sklearn_cost(config: BenchmarkConfig, method: MethodSpec) -> tuple[float, float]:
    """(fixed seconds per fit, seconds per training row) of a scikit-learn method."""
    from ._fit import build_estimator

    X, y = _synthetic(2000)
    estimator = build_estimator(method, method.estimator_params(method.points()[0]), 0)
    with limit_threads(config.budget.threads):
        start = time.perf_counter()
        estimator.fit(X, y)
        per_row = (time.perf_counter() - start) / len(y)
        X_val, y_val = _synthetic(_VAL_ROWS, seed=1)
        return _post_hoc_seconds(config, estimator, X_val, y_val), per_row


def _width_factor(config: BenchmarkConfig, size: dict) -> float:
    """Multiply-adds of the MLP for a dataset's features and classes, relative to the
    calibration fits' (32 features, 2 classes)."""
    from ..estimator import NeSCalClassifier

    hidden = list(config.budget.hidden_sizes or NeSCalClassifier().hidden_sizes)

    def flops(n_in: int, n_out: int) -> int:
        widths = [n_in, *hidden, n_out]
        return sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))

    return flops(size["features"], size["classes"]) / flops(_FEATURES, 2)


def estimate_seconds(config: BenchmarkConfig, fits_per_pair: dict, sizes: dict) -> dict:
    """Estimated CPU seconds of the run.

    Parameters
    ----------
    config : BenchmarkConfig
        With OpenML suites expanded.
    fits_per_pair : dict
        ``(dataset name, method name) -> number of fits``.
    sizes : dict
        ``dataset name -> {"rows": ...}``.

    Returns
    -------
    dict
        ``total`` seconds, ``costs`` (loss -> (fixed seconds per fit, per epoch and
        per row-epoch), from the calibration fits) and ``per_method`` seconds.
    """
    neural_losses = {m.loss for m in config.methods if m.is_neural}
    costs = {}
    if neural_losses:
        costs["ce"] = _neural_cost(config, "ce")
        if "nescal" in neural_losses:
            costs["nescal"] = _neural_cost(config, "nescal")
    epochs = config.budget.max_epochs or 100
    per_method: dict[str, float] = {}
    for method in config.methods:
        fixed, per_row = (0.0, 0.0) if method.is_neural else _sklearn_cost(config, method)
        total = 0.0
        for dataset in config.datasets:
            rows = sizes[dataset.name]["rows"]
            n_train = rows * config.splits.train
            n_val = rows * config.splits.validation
            fits = fits_per_pair.get((dataset.name, method.name), 0)
            if method.is_neural:
                fixed, per_epoch, per_row_epoch = costs.get(method.loss, costs["ce"])
                per_row_epoch *= _width_factor(config, sizes[dataset.name])
                rows_per_epoch = n_train + n_val / 4
                total += fits * (fixed + epochs * (per_epoch + per_row_epoch * rows_per_epoch))
            else:
                total += fits * (fixed + per_row * n_train)
        per_method[method.name] = total
    return {
        "total": sum(per_method.values()),
        "costs": costs,
        "per_method": per_method,
    }
