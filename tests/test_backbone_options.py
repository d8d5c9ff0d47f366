"""NeSCalClassifier's backbone options: built-in ensembles, periodic embeddings,
learning-rate schedules; and ``module`` by import path in a config."""

from __future__ import annotations

import math
import pickle
import re
import sys
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris

from nescal_sklearn import NeSCalClassifier, NeSCalLoss
from nescal_sklearn.losses.experimental import ExperimentalNeSCalLoss
from nescal_sklearn.nn import MemberLinear

FAST = dict(max_epochs=4, hidden_sizes=(16,), batch_size=32, random_state=0)


def _mixed():
    """Iris with two one-hot-like binary columns appended (never embedded or scaled)."""
    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    binary = (rng.random((len(y), 2)) < 0.5).astype(float)
    return np.hstack([X, binary]).astype(np.float32), y


@pytest.mark.determinism
def test_built_in_ensemble_predicts_the_mean_of_its_members():
    X, y = _mixed()
    clf = NeSCalClassifier(
        NeSCalLoss(warmup=2, n_neighbors=5), module_kwargs={"n_members": 3}, **FAST
    ).fit(X, y)
    assert clf.penalty_status_ == "penalised"
    assert sum(isinstance(m, MemberLinear) for m in clf.module_.modules()) == 2
    with torch.no_grad():
        members = torch.softmax(clf.module_(torch.as_tensor(X)), -1).numpy()
    assert members.shape == (len(y), 3, 3)
    assert not np.allclose(members[:, 0], members[:, 1])  # members differ
    np.testing.assert_allclose(clf.predict_proba(X), members.mean(1), atol=1e-6)
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize("member_graph", ["shared", "per_member"])
def test_member_graph_options_train(member_graph):
    X, y = _mixed()
    loss = ExperimentalNeSCalLoss(warmup=2, n_neighbors=5, member_graph=member_graph)
    clf = NeSCalClassifier(loss, module_kwargs={"n_members": 2}, **FAST).fit(X, y)
    assert clf.penalty_status_ == "penalised"
    assert clf.history_[-1]["train_penalty"] > 0


def test_periodic_embedding_embeds_only_numeric_columns():
    X, y = _mixed()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NeSCalClassifier("ce", module_kwargs={"numeric_embedding": "periodic"}, **FAST).fit(
            X, y
        )
    assert clf.module_.embedded_index.tolist() == [0, 1, 2, 3]
    assert clf.module_.passed_index.tolist() == [4, 5]
    from rtdl_num_embeddings import PeriodicEmbeddings

    assert isinstance(clf.module_.embedding, PeriodicEmbeddings)
    assert clf.predict_proba(X).shape == (len(y), 3)


def test_periodic_embedding_without_its_extra_names_the_install_line(monkeypatch):
    X, y = _mixed()
    monkeypatch.setitem(sys.modules, "rtdl_num_embeddings", None)  # as if not installed
    message = (
        "numeric_embedding='periodic' needs the rtdl_num_embeddings package, which the "
        "periodic extra brings: pip install 'nescal-sklearn[periodic]'"
    )
    clf = NeSCalClassifier("ce", module_kwargs={"numeric_embedding": "periodic"}, **FAST)
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        clf.fit(X, y)


@pytest.mark.parametrize("schedule", ["cosine", "flat_cosine"])
def test_lr_schedule_sets_each_epochs_learning_rate(schedule):
    X, y = _mixed()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = NeSCalClassifier(
            "ce",
            lr_schedule=schedule,
            early_stopping=False,
            lr=1e-3,
            **{**FAST, "max_epochs": 4},
        ).fit(X, y)
    lrs = clf.history_[:, "event_lr"]
    if schedule == "cosine":
        expected = [1e-3 * 0.5 * (1 + math.cos(math.pi * e / 4)) for e in range(4)]
    else:
        expected = [1e-3, 1e-3, 1e-3 * 1.0, 1e-3 * 0.5]
    np.testing.assert_allclose(lrs, expected, rtol=1e-6)


def test_backbone_options_need_the_default_module():
    X, y = _mixed()
    with pytest.raises(ValueError, match="lr_schedule"):
        NeSCalClassifier(lr_schedule="linear").fit(X, y)


def test_config_module_by_import_path():
    from nescal_bench import ConfigError, LossMethod, validate_config
    from nescal_sklearn.nn import TabMModule

    method = LossMethod("ce")
    for path in (
        "nescal_sklearn.nn.TabMModule",
        "nescal_sklearn.benchmark.TabMModule",
    ):  # old path too
        assert method.build({"module": path}, seed=0).module is TabMModule
    for value, message in (
        ("numpy.ndarray", "torch.nn.Module subclass"),
        ("nowhere.Module", "cannot import"),
    ):
        data = {
            "datasets": [{"sklearn": "iris"}],
            "recipe": "2026-12-04",
            "confirm_seeds": [0],
            "methods": [{"loss": "ce", "params": {"module": value}}],
        }
        with pytest.raises(ConfigError, match=message):
            validate_config(data, check_files=False)
