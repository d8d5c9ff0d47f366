"""scikit-learn's ``StratifiedGroupKFold`` with its choice of fold computed at once."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold

__all__: list[str] = []


class _FastStratifiedGroupKFold(StratifiedGroupKFold):
    """``StratifiedGroupKFold`` that scores the ``n_splits`` folds a group could join in
    one array operation instead of ``n_splits`` of them.

    scikit-learn places the groups one at a time, each in the fold that keeps the class
    proportions of the folds closest (the mean over classes of the standard deviation
    over folds), ties (``np.isclose``) to the smaller fold. Its loop over folds made 5
    folds of 39,000 groups take 5.3 s, most of it NumPy's per-call overhead (4.2 to 6.7 s
    of a 30 s time limit on letter). Here the same sums run in the same order on a
    ``(n_splits, n_splits, n_classes)`` array, so every score, and every fold, is
    scikit-learn's (a test compares them); the parameters are scikit-learn's.
    """

    def _find_best_fold(self, y_counts_per_fold, y_cnt, group_y_counts):
        k = self.n_splits
        proposed = np.repeat(y_counts_per_fold[None], k, axis=0)
        proposed[np.arange(k), np.arange(k)] += group_y_counts  # fold i with the group
        share = proposed / y_cnt  # fold f's share of each class, were the group in fold i
        # np.std(share, axis=1), then np.mean over classes: NumPy's own sums and divisions
        deviation = share - np.add.reduce(share, axis=1, keepdims=True) / k
        spread = np.sqrt(np.add.reduce(deviation * deviation, axis=1) / k)
        scores = (np.add.reduce(spread, axis=1) / spread.shape[1]).tolist()
        sizes = np.sum(y_counts_per_fold, axis=1).tolist()
        best, best_score, best_size = None, np.inf, np.inf
        for i, (score, size) in enumerate(zip(scores, sizes, strict=True)):
            # np.isclose(score, best_score), as plain floats (atol 1e-8, rtol 1e-5)
            close = best is not None and abs(score - best_score) <= 1e-8 + 1e-5 * abs(best_score)
            if score < best_score or (close and size < best_size):
                best, best_score, best_size = i, score, size
        return best
