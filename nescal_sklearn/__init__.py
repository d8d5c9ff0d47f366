"""nescal_sklearn: calibrated tabular neural classifiers for scikit-learn.

Public names are importable from the top level; each is loaded on first use
(PEP 562), so ``import nescal_sklearn`` is fast and ``nescal_sklearn.metrics`` works
without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._compat.lazy import lazy_exports

__version__ = "0.1.0.dev0"

_EXPORTS: dict[str, str] = {
    # estimator
    "NeSCalClassifier": "estimator",
    "make_tabular_pipeline": "estimator",
    # networks and preprocessing
    "TabularMLP": "nn",
    "RobustSmoothClipScaler": "preprocessing",
    "make_tabular_preprocessor": "preprocessing",
    # losses
    "NeSCalLoss": "losses",
    "CrossEntropyLoss": "losses",
    "TrainingLoss": "losses",
    "get_loss": "losses",
    # graph and penalties
    "build_knn_graph": "graph",
    "NeighbourhoodSmoothing": "penalties",
    "js_divergence": "penalties",
    # calibration
    "CalibratedTemperature": "calibration",
    "CalibratedVectorScaling": "calibration",
    "CalibratedMatrixScaling": "calibration",
    "CalibratedStructuredMatrixScaling": "calibration",
    "CalibratedIsotonic": "calibration",
    "CalibratedHistogramBinning": "calibration",
    "CalibratedEnsembleTemperature": "calibration",
    "CalibratedQuadraticScaling": "calibration",
    # cross-fitted ensembles and the recommended model
    "CrossFitClassifier": "ensemble",
    "make_recommended_classifier": "ensemble",
    # metrics, scorers, plotting
    "expected_calibration_error": "metrics",
    "classwise_calibration_error": "metrics",
    "maximum_calibration_error": "metrics",
    "local_calibration_error": "metrics",
    "refinement_log_loss": "metrics",
    "reliability_curve": "metrics",
    "debiased_calibration_error": "metrics",
    "bootstrap_ci": "metrics",
    "bootstrap_reliability_band": "metrics",
    "neg_expected_calibration_error": "scorers",
    "neg_classwise_calibration_error": "scorers",
    "neg_maximum_calibration_error": "scorers",
    "neg_local_calibration_error": "scorers",
    "neg_refinement_log_loss": "scorers",
    "neg_debiased_calibration_error": "scorers",
    "ReliabilityDisplay": "plotting",
    # diagnostics
    "neighbour_confidence_gap": "diagnostics",
    "fisher_laplacian_ratio": "diagnostics",
    "label_smoothing_bounds": "diagnostics",
    # exceptions
    "NeSCalError": "exceptions",
    "NotFittedError": "exceptions",
    "ParameterError": "exceptions",
    "PenaltyInactiveWarning": "exceptions",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from .calibration import (  # noqa: F401
        CalibratedEnsembleTemperature,
        CalibratedHistogramBinning,
        CalibratedIsotonic,
        CalibratedMatrixScaling,
        CalibratedQuadraticScaling,
        CalibratedStructuredMatrixScaling,
        CalibratedTemperature,
        CalibratedVectorScaling,
    )
    from .diagnostics import (  # noqa: F401
        fisher_laplacian_ratio,
        label_smoothing_bounds,
        neighbour_confidence_gap,
    )
    from .ensemble import CrossFitClassifier, make_recommended_classifier  # noqa: F401
    from .estimator import NeSCalClassifier, make_tabular_pipeline  # noqa: F401
    from .exceptions import (  # noqa: F401
        NeSCalError,
        NotFittedError,
        ParameterError,
        PenaltyInactiveWarning,
    )
    from .graph import build_knn_graph  # noqa: F401
    from .losses import CrossEntropyLoss, NeSCalLoss, TrainingLoss, get_loss  # noqa: F401
    from .metrics import (  # noqa: F401
        bootstrap_ci,
        bootstrap_reliability_band,
        classwise_calibration_error,
        debiased_calibration_error,
        expected_calibration_error,
        local_calibration_error,
        maximum_calibration_error,
        refinement_log_loss,
        reliability_curve,
    )
    from .nn import TabularMLP  # noqa: F401
    from .penalties import NeighbourhoodSmoothing, js_divergence  # noqa: F401
    from .plotting import ReliabilityDisplay  # noqa: F401
    from .preprocessing import RobustSmoothClipScaler, make_tabular_preprocessor  # noqa: F401
    from .scorers import (  # noqa: F401
        neg_classwise_calibration_error,
        neg_debiased_calibration_error,
        neg_expected_calibration_error,
        neg_local_calibration_error,
        neg_maximum_calibration_error,
        neg_refinement_log_loss,
    )
