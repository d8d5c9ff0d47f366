"""AutoGluon as an anchor method of the lab: :class:`AutoGluonClassifier`, a scikit-learn
classifier around `AutoGluon <https://auto.gluon.ai>`_'s ``TabularPredictor``.

``autogluon.tabular`` comes with the ``autogluon`` extra (``pip install -e
".[bench,autogluon]"``, a venv of its own: it pins pandas and scikit-learn below the
newest), and is imported only by ``fit``: a configuration that names the method is read,
validated and reported without it.

Its ``time_limit`` can follow another method's fit time: ``{"from_method": "rec"}`` in a
configuration's params is resolved by the runner, per dataset and seed, to the fit
seconds that the records of method ``rec`` hold (:mod:`._plan`), so that "AutoGluon at
the recommended model's time" is one line of a config.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._adapters import _import

#: The label column of the frames given to AutoGluon (the features are ``x0, x1, ...``).
LABEL = "label"


def _frame(X):
    import pandas as pd

    return pd.DataFrame(np.asarray(X), columns=[f"x{j}" for j in range(X.shape[1])])


class AutoGluonClassifier(ClassifierMixin, BaseEstimator):
    """AutoGluon's ``TabularPredictor``, fitted on the rows it is given.

    ``fit(X, y)`` trains ``TabularPredictor(label, eval_metric=eval_metric,
    problem_type="binary" or "multiclass").fit(rows, presets=presets,
    time_limit=time_limit, num_cpus=n_threads)``: AutoGluon holds out its own
    validation rows, so the lab fits it on the training and validation rows
    (``"fit_on": "train+validation"``), as it fits the recommended model.

    Parameters
    ----------
    presets : str, default="medium_quality"
        AutoGluon's preset (its models, bagging and stacking).
    eval_metric : str, default="log_loss"
        The metric AutoGluon selects and weighs its models on.
    time_limit : float or None, default=None
        Seconds AutoGluon may train for (None: no limit). A configuration may give
        ``{"from_method": NAME}``, which the runner replaces by the fit seconds of method
        ``NAME`` on the same dataset and seed before the fit.
    n_threads : int or None, default=None
        CPUs AutoGluon uses (its ``num_cpus``); None means 1, except in the runner,
        which sets the fit's thread budget.
    verbosity : int, default=0
        AutoGluon's verbosity (0: silent; up to 4).
    random_state : int or None, default=None
        Seed of AutoGluon's split of its validation rows (its learner's
        ``random_state``; None: 0). Its models keep their own default seeds. Every
        class is kept, however few its rows (AutoGluon would drop a class of fewer
        than 10 training rows, and predict no probability for it).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    predictor_ : autogluon.tabular.TabularPredictor
        The fitted predictor. Its models live in a temporary folder, removed when this
        object is garbage-collected (or at exit): a pickled copy predicts only while
        the original lives, and the pickle's size (a record's ``run.model_bytes``)
        leaves the models on disk out.
    path_ : str
        That folder.
    models_ : list of str
        The names of the models AutoGluon trained (its leaderboard's, the ensemble
        included). A record of the lab keeps them (``fit.models``), so a study shows
        which families ran within the time limit.
    n_features_in_ : int
        Number of features seen in ``fit``.
    """

    _parameter_constraints: dict = {
        "presets": [str],
        "eval_metric": [str],
        "time_limit": [Interval(Real, 0, None, closed="neither"), None],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
        "verbosity": [Interval(Integral, 0, 4, closed="both")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        *,
        presets: str = "medium_quality",
        eval_metric: str = "log_loss",
        time_limit: float | None = None,
        n_threads: int | None = None,
        verbosity: int = 0,
        random_state: int | None = None,
    ) -> None:
        self.presets = presets
        self.eval_metric = eval_metric
        self.time_limit = time_limit
        self.n_threads = n_threads
        self.verbosity = verbosity
        self.random_state = random_state

    @classmethod
    def check_dependencies(cls) -> None:
        """Raise ImportError, saying how to install it, when autogluon.tabular is missing."""
        _import("autogluon.tabular", "AutoGluonClassifier", extra="bench,autogluon")

    def _validate_params(self) -> None:
        if isinstance(self.time_limit, dict):
            raise ValueError(
                f"time_limit={self.time_limit!r} is resolved by 'nescal-bench run' from the "
                "records of that method; outside the runner, pass seconds or None."
            )
        super()._validate_params()

    def fit(self, X, y):
        """Train AutoGluon's models on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows (numeric; the lab's preprocessed arrays).
        y : array-like of shape (n_samples,)
            Their labels.

        Returns
        -------
        self : AutoGluonClassifier
        """
        self._validate_params()
        tabular = _import("autogluon.tabular", "AutoGluonClassifier", extra="bench,autogluon")
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan")
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                f"AutoGluonClassifier needs at least 2 classes in y; got {self.classes_.tolist()}."
            )
        self.path_ = tempfile.mkdtemp(prefix="nescal-autogluon-")
        weakref.finalize(self, shutil.rmtree, self.path_, ignore_errors=True)
        self.predictor_ = tabular.TabularPredictor(
            label=LABEL,
            problem_type="binary" if len(self.classes_) == 2 else "multiclass",
            eval_metric=self.eval_metric,
            path=self.path_,
            verbosity=self.verbosity,
            # every class kept, however rare (AutoGluon drops those under 10 rows)
            learner_kwargs={"random_state": self.random_state or 0, "label_count_threshold": 1},
        )
        self.predictor_.fit(
            _frame(X).assign(**{LABEL: encoded}),
            presets=self.presets,
            time_limit=self.time_limit,
            num_cpus=self.n_threads or 1,
        )
        self.models_ = self.predictor_.model_names()
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, one column per class of ``classes_`` (in that order).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to predict.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "predictor_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan")
        proba = self.predictor_.predict_proba(_frame(X), as_multiclass=True)
        # AutoGluon's columns are the encoded labels it saw; reorder them as 0 .. K-1
        return proba[list(range(len(self.classes_)))].to_numpy(dtype=np.float64)

    def predict(self, X) -> np.ndarray:
        """The class of highest probability, from ``classes_``."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
