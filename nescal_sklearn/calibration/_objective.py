"""Negative log-likelihood on logits and the L-BFGS driver shared by the calibrators.

Everything here is plain numpy/scipy and works on label-encoded targets ``y`` (integers
in ``[0, n_classes)``) and logits of shape ``(n_samples, n_classes)``. The NLL itself
(:func:`weighted_nll`) is the metrics room's, re-exported here for the calibrators.
Inside :func:`solve_until`, the driver stops at a deadline and raises
:class:`SolverPastDeadline`: a time budget's way to bound a map's fit without a
``deadline`` in every map's ``fit``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import ThreadpoolController

from ..metrics.logits import normalised_weights, shifted_exp, weighted_nll

__all__ = [
    "SolverPastDeadline",
    "minimize_from_identity",
    "nll_and_logit_gradient",
    "solve_until",
    "weighted_nll",
]

#: The ``time.time()`` at which :func:`minimize_from_identity` stops (None: never).
_DEADLINE: ContextVar[float | None] = ContextVar("solver_deadline", default=None)


class SolverPastDeadline(TimeoutError):
    """:func:`minimize_from_identity` passed the deadline of :func:`solve_until`."""


@contextmanager
def solve_until(deadline: float | None) -> Iterator[None]:
    """Within the block, :func:`minimize_from_identity` raises :class:`SolverPastDeadline`
    at its first iteration that ends after ``deadline`` (on ``time.time``'s clock; None:
    no deadline)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def nll_and_logit_gradient(
    logits: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """Return :func:`weighted_nll` and its gradient with respect to ``logits``."""
    weights = normalised_weights(logits.shape[0], sample_weight)
    exp, sums, row_max = shifted_exp(logits)
    true_logit = np.take_along_axis(logits, y[:, None], axis=1)[:, 0]
    loss = float(weights @ (np.log(sums) + row_max - true_logit))
    grad = exp / sums[:, None]
    grad[np.arange(y.size), y] -= 1.0
    return loss, grad * weights[:, None]


@cache
def _threadpool_controller() -> ThreadpoolController:
    return ThreadpoolController()


def minimize_from_identity(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0: np.ndarray,
    *,
    what: str,
    max_iter: int = 5000,
) -> np.ndarray:
    """Minimise ``fun`` (returning value and gradient) with L-BFGS-B, starting at ``x0``.

    ``x0`` is the identity map, where the calibrator leaves the model unchanged. The
    returned point is never worse than ``x0``, which is what makes the held-in NLL of a
    calibrator whose penalty vanishes at the identity never rise. Inside
    :func:`solve_until`, an iteration that ends after its deadline raises
    :class:`SolverPastDeadline`.
    """
    deadline = _DEADLINE.get()

    def stop_at_deadline(intermediate_result):
        if time.time() > deadline:
            raise StopIteration

    start_value = fun(x0)[0]
    # These problems are tiny: multi-threaded BLAS inside L-BFGS-B only adds overhead.
    with _threadpool_controller().limit(limits=1, user_api="blas"):
        result = minimize(
            fun,
            x0,
            method="L-BFGS-B",
            jac=True,
            options={"maxiter": max_iter, "gtol": 1e-8, "ftol": 0.0},
            callback=None if deadline is None else stop_at_deadline,
        )
    if result.status == 99:  # the callback's StopIteration
        raise SolverPastDeadline(f"{what}: passed its deadline after {result.nit} iterations.")
    if result.status == 1:
        warnings.warn(
            f"{what}: L-BFGS-B stopped after {result.nit} iterations without converging "
            f"({result.message}).",
            ConvergenceWarning,
            stacklevel=3,
        )
    if not np.isfinite(result.fun) or result.fun > start_value:
        return np.array(x0, dtype=np.float64)
    return np.asarray(result.x, dtype=np.float64)
