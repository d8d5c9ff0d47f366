"""The recommended model made quick for tests: its networks train a few epochs."""

from __future__ import annotations

from sklearn.pipeline import Pipeline

from nescal_sklearn import NeSCalClassifier
from nescal_sklearn.ensemble import make_recommended_classifier


def quick_recommended(recipe: str | None = None) -> Pipeline:
    """``make_recommended_classifier(random_state=0, recipe=recipe)`` whose networks train
    5 epochs, a NeSCal network's penalty from the third."""
    model = make_recommended_classifier(random_state=0, recipe=recipe)
    for _, member in model[-1].estimators:
        if isinstance(member, NeSCalClassifier):
            member.set_params(max_epochs=5)
            if member.loss == "nescal":
                member.set_params(loss__warmup=2)
    return model
