"""Reliability diagrams (matplotlib is imported only when something is drawn)."""

from ._reliability import ReliabilityDisplay, plot_classwise_reliability

__all__ = ["ReliabilityDisplay", "plot_classwise_reliability"]
