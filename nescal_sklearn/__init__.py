"""nescal_sklearn: calibrated tabular neural classifiers for scikit-learn."""

__version__ = "0.1.0.dev0"
