"""The package's recommended model for calibrated tabular probabilities, in one line."""

from ._factory import make_recommended_classifier

__all__ = ["make_recommended_classifier"]
