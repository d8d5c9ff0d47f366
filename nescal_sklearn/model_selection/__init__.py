"""The fold layer of the cross-fitted calibrators and ensembles: folds that keep groups and
copies together, the checks run before any fit, fitting an estimator on a fold (its
weights, its seed, its early-stopping rows) and the out-of-fold logits.

scikit-learn's name for the home of ``cross_val_predict``: the calibrators' ``cv`` mode
(:mod:`nescal_sklearn.calibration`) and :class:`~nescal_sklearn.ensemble.CrossFitClassifier`
both build on it, so both split the rows, and route the weights, by the same rules.
"""

from ._fitting import (
    fit_on_fold,
    seeded,
    takes_validation_rows,
    validated_sample_weight,
    weight_parameter,
)
from ._groups import duplicate_groups
from ._logits import estimator_logits, out_of_fold_logits
from ._splits import ROWS_PER_DISTINCT_ROW, check_partition, inner_split, make_folds

__all__ = [
    "ROWS_PER_DISTINCT_ROW",
    "check_partition",
    "duplicate_groups",
    "estimator_logits",
    "fit_on_fold",
    "inner_split",
    "make_folds",
    "out_of_fold_logits",
    "seeded",
    "takes_validation_rows",
    "validated_sample_weight",
    "weight_parameter",
]
