"""The estimator cases of the reliability review of ed7ab4a, each on its full message.

``/work/shared/reviews/reliability-ed7ab4a.md`` fed ``NeSCalClassifier`` bad and edge
inputs (its table A1) and found 7 silently-wrong results (§1e), 9 raw tracebacks, 5
unclear errors and 15 questionable acceptances (§3). Each case is built as in the
review's preamble (§8), called as in its table, and pinned on the full text of the error
or warning it gives now. The ids are the review's. Here: the sample weights that leave
nothing to train or to stop on (E232-E234).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state

from nescal_sklearn import NeSCalClassifier

# -- the review's preamble of A1 ----------------------------------------------------------

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 4))
W = rng.normal(size=(4, 3))
y = np.argmax(X @ W + 0.5 * rng.normal(size=(60, 3)), axis=1)  # class counts 20/27/13
BASE = dict(hidden_sizes=(8,), max_epochs=3, batch_size=32, random_state=0, n_threads=1)


def E(**kw) -> NeSCalClassifier:
    return NeSCalClassifier(**{**BASE, **kw})


def NS(**kw) -> NeSCalClassifier:
    """NeSCal whose neighbour graph is built (after one warm-up epoch)."""
    return E(**kw).set_params(loss__warmup=1, loss__n_neighbors=3)


def CE(**kw) -> NeSCalClassifier:
    return E(loss="ce", **kw)


def fit(est: NeSCalClassifier, X=X, y=y, **kw) -> NeSCalClassifier:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the deprecated top-level options
        return est.fit(X, y, **kw)


def _split_rows() -> tuple[np.ndarray, np.ndarray]:
    """The training and held-out rows of early stopping with random_state=0, in the order
    ``fit`` draws them."""
    r = check_random_state(0)
    r.randint(np.iinfo(np.int32).max)
    return train_test_split(np.arange(60), test_size=12, stratify=y, random_state=r)


TRAIN, _valid = _split_rows()
VALID = np.sort(_valid)
VAL_ONLY = np.isin(np.arange(60), VALID).astype(float)  # 1 on the 12 held-out rows


def full(message: str) -> str:
    """A ``match`` pattern for exactly ``message``."""
    return f"^{re.escape(message)}$"


def _rows(rows) -> str:
    return "[" + ", ".join(str(int(i)) for i in rows) + "]"


# -- §1e: the silently-wrong cases -------------------------------------------------------


def _zero_training_weights_message() -> str:
    return (
        "sample_weight (times class_weight) is zero on every one of the 48 training rows: its "
        f"positive weights are all on rows {_rows(VALID)}, which early_stopping='nll' holds "
        "out for validation (validation_fraction=0.2), so nothing would be learnt. Give some "
        "other rows a positive weight, pass the validation rows as X_val and y_val, or "
        "early_stopping=False."
    )


@pytest.mark.parametrize(
    "make",
    [pytest.param(CE, id="E232"), pytest.param(NS, id="E234")],
)
def test_zero_weight_on_every_training_row_names_the_rows(make):
    """All positive weight on the held-out rows: it used to train unweighted."""
    with pytest.raises(ValueError, match=full(_zero_training_weights_message())):
        fit(make(), sample_weight=VAL_ONLY)


def test_zero_weight_on_every_held_out_row_says_what_early_stopping_watches():
    """E233: the weighted validation NLL would be 0/0; it used to watch the unweighted one."""
    message = (
        "early_stopping='nll' watches the validation NLL weighted by sample_weight (times "
        "class_weight) on the 12 rows it holds out (validation_fraction=0.2): rows "
        f"{_rows(VALID)}. sample_weight is zero on every one of them, so that NLL is undefined "
        "(0/0). Give some of these rows a positive weight, pass X_val and y_val, or "
        "early_stopping=False."
    )
    with pytest.raises(ValueError, match=full(message)):
        fit(CE(), sample_weight=1.0 - VAL_ONLY)


def test_zero_held_out_weights_name_the_refinement_criterion():
    message = (
        "early_stopping='refinement' watches the validation NLL after temperature scaling "
        "weighted by sample_weight (times class_weight) on the 12 rows it holds out "
        f"(validation_fraction=0.2): rows {_rows(VALID)}. sample_weight is zero on every one "
        "of them, so that NLL is undefined (0/0). Give some of these rows a positive weight, "
        "pass X_val and y_val, or early_stopping=False."
    )
    with pytest.raises(ValueError, match=full(message)):
        fit(CE(early_stopping="refinement"), sample_weight=1.0 - VAL_ONLY)


def test_long_row_lists_are_abbreviated():
    """Of 30 held-out rows the message names 20, then the count."""
    r = check_random_state(0)
    r.randint(np.iinfo(np.int32).max)
    _, valid = train_test_split(np.arange(60), test_size=30, stratify=y, random_state=r)
    weights = np.isin(np.arange(60), valid).astype(float)
    shown = ", ".join(str(i) for i in np.sort(valid)[:20])
    message = (
        "sample_weight (times class_weight) is zero on every one of the 30 training rows: its "
        f"positive weights are all on rows [{shown}, ... (30 rows)], which "
        "early_stopping='nll' holds out for validation (validation_fraction=0.5), so nothing "
        "would be learnt. Give some other rows a positive weight, pass the validation rows as "
        "X_val and y_val, or early_stopping=False."
    )
    with pytest.raises(ValueError, match=full(message)):
        fit(CE(validation_fraction=0.5), sample_weight=weights)


def test_weights_zero_on_some_held_out_rows_still_fit():
    """Partly zero weights on either side are legitimate (the check is not too eager)."""
    weights = np.ones(60)
    weights[VALID[:6]] = 0.0
    weights[TRAIN[:20]] = 0.0
    assert fit(CE(), sample_weight=weights).predict_proba(X).shape == (60, 3)
