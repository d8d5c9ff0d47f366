"""Theory checks on trained models: neighbour confidence gap, Fisher–Laplacian form, label-smoothing bounds."""

from ._display import DiagnosticDisplay, plot_diagnostics
from ._fisher import BASES, DISTANCES, FisherLaplacianRatio, fisher_laplacian_ratio, perturbed_pairs
from ._label_smoothing import LabelSmoothingBounds, label_smoothing_bounds
from ._neighbour_gap import NeighbourConfidenceGap, neighbour_confidence_gap

__all__ = [
    "BASES",
    "DISTANCES",
    "DiagnosticDisplay",
    "FisherLaplacianRatio",
    "LabelSmoothingBounds",
    "NeighbourConfidenceGap",
    "fisher_laplacian_ratio",
    "label_smoothing_bounds",
    "neighbour_confidence_gap",
    "perturbed_pairs",
    "plot_diagnostics",
]
