"""scikit-learn's estimator checks on NeSCalClassifier: the defaults, cross-entropy and NeSCal.

The default estimator (only ``max_epochs`` lowered, for time) must pass them as it is: the
checks fit on about ten rows, where NeSCal's default ``n_neighbors=10`` is clamped to the
training rows with a warning (tests/test_estimator_usability.py).
"""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.losses import NeSCalLoss

SMALL = dict(hidden_sizes=(32,), max_epochs=30, lr=1e-2, batch_size=64, random_state=0)

EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": (
        "integer weights equal repeated rows in expectation, not exactly: mini-batch "
        "training draws different batches (and a different early-stopping split) for the "
        "repeated data; the expectation is tested in tests/test_sample_weight.py."
    ),
    "check_methods_subset_invariance": (
        "float32 matrix products differ in the last bits with the batch size (BLAS "
        "blocking), so logits of a row computed in a batch of 20 and of 60 differ at "
        "about 1e-7, over the check's rtol=1e-7; predictions and probabilities agree."
    ),
}


@parametrize_with_checks(
    [
        NeSCalClassifier(max_epochs=3),
        NeSCalClassifier(loss="ce", **SMALL),
        # The checks fit on as few as 10 rows: 3 neighbours leave room for the graph.
        NeSCalClassifier(loss=NeSCalLoss(n_neighbors=3), **SMALL),
    ],
    expected_failed_checks=lambda est: EXPECTED_FAILURES,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
