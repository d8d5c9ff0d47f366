"""Corruptions at severities 1-5: the column layout, each corruption against an independent
computation, severity monotonicity, seeding, configuration, and a run compared pooled."""

from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _benchmark_helpers import squeeze
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import rankdata
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split

from nescal_bench import (
    CompareError,
    ConfigError,
    RecordStore,
    compare_markdown,
    load_config,
    plan_run,
    results_frame,
    run_benchmark,
    validate_config,
)
from nescal_bench._conditions import (
    CategorySwap,
    ConditionContext,
    ConditionSkipped,
    FeatureNoise,
    MissingValues,
    PCShift,
    ScaleDrift,
    condition_rng,
)
from nescal_bench._data import preprocess_split
from nescal_bench._records import check_record
from nescal_bench._stats import relative_change, wilcoxon_p
from nescal_sklearn import make_tabular_preprocessor

# Floats from BLAS, solvers and stored records: CI runs these again under a second
# OpenBLAS kernel (.ci/run), so a tolerance tighter than round-off shows up there.
pytestmark = pytest.mark.numerical

CORRUPTIONS = (FeatureNoise, MissingValues, ScaleDrift, CategorySwap, PCShift)


def mixed_frame(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Three numeric columns (one with missing values, one far from 0), two categorical
    ones (one with missing values), and labels that depend on both kinds."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    colour = rng.choice(["red", "green", "blue"], size=n, p=[0.5, 0.3, 0.2]).astype(object)
    frame = pd.DataFrame(
        {
            "a": a,
            "b": 2 * a + rng.normal(scale=0.5, size=n),
            "c": 100 + 10 * rng.exponential(size=n),
            "colour": colour,
            "size": pd.Categorical(rng.choice(["s", "m", "l", "xl"], size=n)),
        }
    )
    frame.loc[rng.random(n) < 0.05, "c"] = np.nan
    frame.loc[rng.random(n) < 0.05, "colour"] = np.nan
    y = (a + (colour == "red") + rng.normal(scale=0.5, size=n) > 0.7).astype(int)
    return frame, y


def _parts(y: np.ndarray):
    rest, test = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y, random_state=0)
    train, val = train_test_split(rest, test_size=0.25, stratify=y[rest], random_state=0)
    return train, val, test


@pytest.fixture(scope="module")
def mixed():
    frame, y = mixed_frame()
    train, val, test = _parts(y)
    split = preprocess_split(frame, y, train, val, test)
    preprocessor = make_tabular_preprocessor().fit(frame.iloc[train])
    return ConditionContext(split, "mixed"), preprocessor


@pytest.fixture(scope="module")
def context(mixed):
    return mixed[0]


def _rows(cls, severity: int, context, seed: int = 0, family: str = "f"):
    return cls(f"{family}@{severity}", severity).apply(context, condition_rng(seed, family))


# --------------------------------------------------------------------------- layout
def test_layout_imputes_what_the_fitted_pipeline_imputes(mixed):
    context, preprocessor = mixed
    names = preprocessor.get_feature_names_out()
    assert [names[j] for j in context.numeric] == ["a", "b", "c"]
    prefixes = [{names[j].rsplit("_", 1)[0] for j in group} for group in context.groups]
    assert prefixes == [{"colour"}, {"size"}]
    # a raw row with every value missing, through the fitted pipeline
    empty = pd.DataFrame(
        {
            "a": [np.nan],
            "b": [np.nan],
            "c": [np.nan],
            "colour": [np.nan],
            "size": pd.Categorical([np.nan], categories=["s", "m", "l", "xl"]),
        }
    )
    imputed = preprocessor.transform(empty)[0]
    np.testing.assert_allclose(context.imputed_row, imputed, rtol=1e-12)
    assert abs(context.imputed_row[2]) > 0.05  # the median, not the mean (which would be 0)


def test_layout_skips_the_columns_the_imputers_drop():
    frame, y = mixed_frame(n=200)
    frame["empty_number"] = np.nan  # all missing: both imputers drop such columns
    frame["empty_text"] = pd.Series([np.nan] * len(frame), dtype=object)
    train, val, test = _parts(y)
    split = preprocess_split(frame, y, train, val, test)
    preprocessor = make_tabular_preprocessor().fit(frame.iloc[train])
    names = preprocessor.get_feature_names_out()
    assert [names[j] for j in split.layout.numeric] == ["a", "b", "c"]
    assert len(split.layout.groups) == 2
    assert len(split.imputed_row) == split.layout.n_features == split.X_train.shape[1]


@pytest.mark.parametrize("kind", ["array", "numeric frame"])
def test_a_plain_array_or_numeric_frame_is_all_numeric_imputed_at_the_mean(kind):
    # A frame without categorical columns keeps the rule the stored records of
    # missing_values were measured with: a missing entry at 0, the training mean.
    X = np.random.default_rng(0).exponential(size=(60, 4))
    y = np.arange(60) % 2
    split = preprocess_split(X if kind == "array" else pd.DataFrame(X), y, *_parts(y))
    context = ConditionContext(split)
    assert split.layout is None and split.imputed_row is None
    assert context.numeric.tolist() == [0, 1, 2, 3] and context.groups == ()
    assert context.imputed_row.tolist() == [0.0] * 4


# --------------------------------------------------------------------------- monotonicity
@pytest.mark.parametrize("cls", CORRUPTIONS, ids=lambda c: c.kind)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_higher_severity_never_changes_fewer_entries_or_moves_them_less(cls, seed, context):
    X = context.X_test.astype(np.float64)
    moved = [np.abs(_rows(cls, s, context, seed).astype(np.float64) - X) for s in range(1, 6)]
    for lower, higher in zip(moved[:-1], moved[1:], strict=True):
        assert np.all(lower <= higher)
        assert np.all((lower > 0) <= (higher > 0))  # the changed entries only grow
    assert moved[0].sum() > 0 and moved[-1].sum() > moved[0].sum()


@pytest.mark.parametrize("cls", CORRUPTIONS, ids=lambda c: c.kind)
def test_corruptions_are_fixed_by_seed_and_family(cls, context):
    first = _rows(cls, 3, context, seed=3)
    np.testing.assert_array_equal(first, _rows(cls, 3, context, seed=3))
    # another seed, or another family, draws other numbers (pc_shift draws only a sign)
    assert len({_rows(cls, 3, context, seed=s).tobytes() for s in range(3, 9)}) > 1
    assert len({_rows(cls, 3, context, 3, family=f).tobytes() for f in "fghijk"}) > 1
    assert first.dtype == np.float32 and first.shape == context.X_test.shape
    # every severity of a family draws from the generator of (seed, family)
    one, four = cls("noise@1", 1), cls("noise@4", 4)
    assert one.stream == four.stream == one.family == "noise"
    assert cls("custom", 2).family == "custom"
    expected = np.random.default_rng([3, zlib.crc32(b"noise")])
    assert condition_rng(3, four.stream).integers(10**9) == expected.integers(10**9)


# --------------------------------------------------------------------------- each corruption
def test_feature_noise_is_in_training_sds_on_numeric_columns_only():
    frame, y = mixed_frame(n=4000, seed=1)
    split = preprocess_split(frame, y, *_parts(y))
    context = ConditionContext(split)
    numeric = context.numeric
    sd = split.X_train[:, numeric].std(axis=0, dtype=np.float64)
    draws = []
    for severity, scale in zip(range(1, 6), (0.25, 0.5, 1.0, 1.5, 2.0), strict=True):
        out = _rows(FeatureNoise, severity, context)
        noise = out[:, numeric].astype(np.float64) - context.X_test[:, numeric]
        draws.append(noise / (scale * sd))  # standard normal, the same at every severity
        np.testing.assert_allclose(draws[-1], draws[0], atol=1e-4 / scale)
        others = np.setdiff1d(np.arange(out.shape[1]), numeric)
        np.testing.assert_array_equal(out[:, others], context.X_test[:, others])
    assert abs(draws[0].mean()) < 0.05 and abs(draws[0].std() - 1) < 0.04  # 2400 draws


def test_missing_values_share_and_imputed_values():
    frame, y = mixed_frame(n=4000, seed=2)
    split = preprocess_split(frame, y, *_parts(y))
    context = ConditionContext(split)
    X, numeric = context.X_test, context.numeric
    fill = context.imputed_row.astype(np.float32)
    for severity, share in zip(range(1, 6), (0.1, 0.2, 0.35, 0.5, 0.7), strict=True):
        out = _rows(MissingValues, severity, context)
        before, after = X[:, numeric], out[:, numeric]
        changed = after != before
        assert np.all((after == fill[numeric])[changed])  # a missing entry is the imputed median
        assert abs(changed.sum() / (before != fill[numeric]).sum() - share) < 0.04  # 4 sd
        for group in context.groups:
            filled = int(np.argmax(fill[group]))
            changed = np.any(out[:, group] != X[:, group], axis=1)
            assert np.all(out[changed][:, group].argmax(axis=1) == filled)  # the mode
            elsewhere = X[:, group].argmax(axis=1) != filled
            assert abs(changed.sum() / elsewhere.sum() - share) < 0.08  # 4 sd


def test_scale_drift_rescales_a_growing_subset_around_the_mean(context):
    X = context.X_test.astype(np.float64)
    numeric = context.numeric
    mean = context.split.X_train[:, numeric].mean(axis=0, dtype=np.float64)
    settings_ = ((0.2, 2.0), (0.4, 3.0), (0.6, 4.0), (0.8, 5.0), (1.0, 6.0))
    for severity, (share, factor) in enumerate(settings_, start=1):
        out = _rows(ScaleDrift, severity, context).astype(np.float64)
        changed = np.flatnonzero(np.any(out[:, numeric] != X[:, numeric], axis=0))
        assert len(changed) == math.ceil(share * len(numeric))
        for j in changed:
            ratio = (out[:, numeric[j]] - mean[j]) / (X[:, numeric[j]] - mean[j])
            assert np.allclose(ratio, factor, rtol=1e-5) or np.allclose(
                ratio, 1 / factor, rtol=1e-5
            )
        untouched = np.setdiff1d(np.arange(X.shape[1]), numeric[changed])
        np.testing.assert_array_equal(out[:, untouched], X[:, untouched])


def test_category_swap_moves_a_share_to_another_seen_category():
    frame, y = mixed_frame(n=4000, seed=3)
    context = ConditionContext(preprocess_split(frame, y, *_parts(y)))
    X = context.X_test
    for severity, share in zip(range(1, 6), (0.1, 0.25, 0.4, 0.6, 0.8), strict=True):
        out = _rows(CategorySwap, severity, context)
        for group in context.groups:
            assert np.all(out[:, group].sum(axis=1) == 1)  # still one category
            swapped = np.any(out[:, group] != X[:, group], axis=1)
            assert abs(swapped.mean() - share) < 0.07  # 4 sd of 800 draws
            assert np.all(out[swapped][:, group].argmax(1) != X[swapped][:, group].argmax(1))
        numeric = context.numeric
        np.testing.assert_array_equal(out[:, numeric], X[:, numeric])


def test_pc_shift_moves_every_row_along_sklearns_first_component(context):
    numeric = context.numeric
    pca = PCA(n_components=1).fit(context.split.X_train[:, numeric].astype(np.float64))
    n = len(context.split.X_train)
    sd = math.sqrt(pca.explained_variance_[0] * (n - 1) / n)  # ddof=0 along the component
    for severity, c in zip(range(1, 6), (0.5, 1.0, 1.5, 2.0, 3.0), strict=True):
        out = _rows(PCShift, severity, context).astype(np.float64)
        shift = out - context.X_test
        np.testing.assert_allclose(shift, np.broadcast_to(shift[0], shift.shape), atol=1e-5)
        np.testing.assert_allclose(
            np.abs(shift[0, numeric]), c * sd * np.abs(pca.components_[0]), atol=1e-5
        )
        assert np.all(shift[:, np.setdiff1d(np.arange(out.shape[1]), numeric)] == 0)


def test_corruptions_skip_datasets_without_their_columns(mixed):
    numeric_only = ConditionContext(preprocess_split(*_numeric_data()))
    with pytest.raises(ConditionSkipped, match="^the dataset has no categorical features$"):
        _rows(CategorySwap, 1, numeric_only)
    frame, y = mixed_frame()
    categorical = ConditionContext(preprocess_split(frame[["colour", "size"]], y, *_parts(y)))
    for cls in (FeatureNoise, ScaleDrift, PCShift):
        with pytest.raises(ConditionSkipped, match="^the dataset has no numeric features$"):
            _rows(cls, 1, categorical)
    assert not np.array_equal(_rows(MissingValues, 1, categorical), categorical.X_test)


def _numeric_data():
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = np.arange(60) % 2
    return (X, y, *_parts(y))


# --------------------------------------------------------------------------- configuration
def _validate(conditions):
    return validate_config(
        {
            "datasets": [{"sklearn": "iris"}],
            "methods": [{"estimator": "sklearn.linear_model.LogisticRegression"}],
            "confirm_seeds": [0],
            "conditions": conditions,
        },
        check_files=False,
        check_params=False,
    )


def test_a_family_entry_expands_into_one_condition_per_severity():
    config = _validate(
        [
            {"name": "noise", "kind": "feature_noise", "severities": [1, 3, 5]},
            {"kind": "pc_shift", "severities": [2]},
            {"kind": "category_swap", "severity": 4},
            {"name": "mine", "kind": "scale_drift", "severity": 1},
        ]
    )
    names = [c.name for c in config.conditions]
    assert names == ["noise@1", "noise@3", "noise@5", "pc_shift@2", "category_swap@4", "mine"]
    assert [c.severity for c in config.conditions] == [1, 3, 5, 2, 4, 1]
    assert config.conditions[1].to_json() == {
        "name": "noise@3",
        "kind": "feature_noise",
        "severity": 3,
    }
    again = validate_config(config.to_json(), check_files=False, check_params=False)
    assert again.conditions == config.conditions


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"kind": "feature_noise", "severity": 6},
            "conditions[0].severity: input should be less than or equal to 5, got 6",
        ),
        (
            {"kind": "feature_noise", "severity": 2.0},
            "conditions[0].severity: input should be a valid integer, got 2.0",
        ),
        (
            {"kind": "scale_drift", "severities": [0, 2]},
            "conditions[0].severities[0]: input should be greater than or equal to 1, got 0",
        ),
        (
            {"kind": "scale_drift", "severities": []},
            "conditions[0].severities: list should have at least 1 item after validation, not 0, got []",
        ),
        (
            {"kind": "scale_drift", "severities": [1, 1]},
            "conditions[0].severities: expected distinct severities, got [1, 1]",
        ),
        (
            {"kind": "pc_shift", "severity": 1, "severities": [1]},
            "conditions[0].severity: give either 'severity' or 'severities', not both",
        ),
        ({"kind": "pc_shift"}, "conditions[0].severity: required key missing"),
        ({"kind": "pc_shift", "severity": 1, "sd": 2}, "conditions[0].sd: unknown key"),
        (
            {"kind": "blur", "severity": 1},
            "conditions[0].kind: expected one of ['gaussian_noise', 'missing_entries', 'shuffled_columns', 'scaled_rows', 'feature_noise', 'missing_values', 'scale_drift', 'category_swap', 'pc_shift', 'foreign_rows', 'held_out_class'], got \"blur\"",
        ),
    ],
)
def test_config_errors_name_the_value(entry, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _validate([entry])


def test_an_expanded_name_taken_twice_names_both_entries():
    conditions = [
        {"name": "noise", "kind": "feature_noise", "severities": [1, 2]},
        {"name": "noise@2", "kind": "pc_shift", "severity": 2},
    ]
    message = "conditions[1].name: duplicate condition name 'noise@2' (also conditions[0])"
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _validate(conditions)


# --------------------------------------------------------------------------- a run
def write_local_dataset(data_dir: Path, name: str, frame: pd.DataFrame, y) -> None:
    """Add a parquet file and its manifest entry to a local data folder."""
    data_dir.mkdir(parents=True, exist_ok=True)
    frame.assign(target=np.asarray(y)).to_parquet(data_dir / f"{name}.parquet")
    manifest = data_dir / "manifest.json"
    entries = json.loads(manifest.read_text()) if manifest.is_file() else []
    n_numeric = frame.select_dtypes("number").shape[1]
    entries.append(
        {
            "name": name,
            "file": f"{name}.parquet",
            "n_rows": len(frame),
            "n_features": frame.shape[1],
            "n_numeric": n_numeric,
            "n_categorical": frame.shape[1] - n_numeric,
            "n_classes": len(np.unique(y)),
        }
    )
    manifest.write_text(json.dumps(entries))


FAMILIES = [
    {"name": "noise", "kind": "feature_noise", "severities": [1, 2, 3, 4, 5]},
    {"name": "swap", "kind": "category_swap", "severities": [1, 2, 3, 4, 5]},
    {"kind": "missing_values", "severity": 3},
    {"name": "ood_far", "kind": "scaled_rows"},
]


@pytest.fixture(scope="module")
def corrupted_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("corruptions")
    write_local_dataset(tmp_path / "data", "mixed", *mixed_frame(n=300))
    data = {
        "name": "corruptions",
        "output": str(tmp_path / "results"),
        "data_dir": str(tmp_path / "data"),
        "datasets": [{"sklearn": "iris"}, {"local": "mixed"}],
        "recipe": "2026-12-04",
        "methods": [
            {"name": "ce", "loss": "ce"},
            {"name": "logreg", "estimator": "sklearn.linear_model.LogisticRegression"},
        ],
        "calibrators": ["temperature"],
        "conditions": FAMILIES,
        "confirm_seeds": [3],
        "budget": {"max_epochs": 2, "hidden_sizes": [8]},
    }
    (tmp_path / "corruptions.json").write_text(json.dumps(data))
    config = load_config(tmp_path / "corruptions.json")
    run_benchmark(config, progress=False, report=False)
    return config


def test_records_of_a_run_pass_the_record_check_and_note_skips(corrupted_run):
    records = list(RecordStore(corrupted_run.output).load(move=False).values())
    assert len(records) == 4
    names = [c.name for c in corrupted_run.conditions]
    assert len(names) == 12
    for record in records:
        check_record(record, record["key"], stages=corrupted_run.stages)
        skipped = record["skipped_conditions"]
        if record["dataset"] == "sklearn-iris":
            assert skipped == {
                f"swap@{s}": "the dataset has no categorical features" for s in range(1, 6)
            }
        else:
            assert skipped == {}
        assert set(record["conditions"]) == set(names) - set(skipped)
        assert record["run"]["evaluation_seconds"] > 0


def _float64(model, X):
    proba = model.predict_proba(X).astype(np.float64)
    return proba / proba.sum(axis=1, keepdims=True)


@pytest.mark.determinism
def test_recorded_metrics_are_those_of_the_family_generator(corrupted_run):
    from sklearn.base import clone
    from sklearn.metrics import log_loss

    from nescal_bench._sources import load_benchmark_data

    task = next(
        t
        for t in plan_run(corrupted_run).confirm_fixed
        if t.method.name == "logreg" and t.dataset.name == "mixed"
    )
    record = RecordStore(corrupted_run.output).read(task.key)
    split, _ = task.dataset.split(
        load_benchmark_data(task.dataset, task.data), 3, task.splits, None
    )
    model = clone(task.estimator).fit(split.X_train, split.y_train)
    context = ConditionContext(split)
    for condition in corrupted_run.conditions[:10]:  # noise@1..5 and swap@1..5
        family = condition.name.split("@")[0]
        rows = condition.apply(context, np.random.default_rng([3, zlib.crc32(family.encode())]))
        nll = log_loss(split.y_test, _float64(model, rows))
        # The runner's fit ran at one BLAS thread, this one at the process's count; L-BFGS
        # (tol=1e-4) then stops at a slightly different point of the same flat optimum.
        assert record["conditions"][condition.name]["raw"]["nll"] == pytest.approx(nll, rel=1e-6)


def test_compare_pools_a_family_over_dataset_condition_pairs(corrupted_run, capsys):
    pooled = results_frame([corrupted_run.output])
    families = {}
    for name, c in pooled.attrs["conditions"].items():
        if hasattr(c, "family"):
            families.setdefault(c.family, []).append(name)
    assert families == {
        "noise": [f"noise@{s}" for s in range(1, 6)],
        "swap": [f"swap@{s}" for s in range(1, 6)],
        "missing_values": ["missing_values@3"],
    }
    text = squeeze(compare_markdown(pooled, references=["ce"], condition="noise"))
    assert text.startswith(
        "# Paired comparisons pooled over 5 conditions (`noise@1`, `noise@2`, `noise@3`, "
        "`noise@4`, `noise@5`), confirm seeds [3], 2 datasets\n"
    )
    # the paired changes by hand: one per (dataset, severity)
    records = list(RecordStore(corrupted_run.output).load(move=False).values())
    value = {
        (r["method"], r["dataset"], s): r["conditions"][f"noise@{s}"]["raw"]["nll"]
        for r in records
        for s in range(1, 6)
    }
    keys = [(d, s) for d in ("sklearn-iris", "mixed") for s in range(1, 6)]
    ours = np.array([value[("logreg", d, s)] for d, s in keys])
    theirs = np.array([value[("ce", d, s)] for d, s in keys])
    changes = relative_change(ours, theirs)
    row = re.search(
        r"\| logreg \| raw \| (\d+)/(\d+) \| \d+ / \d+ / \d+ \| ([-+][\d.]+) % \| ([\d.e-]+|nan) \|",
        text,
    )
    assert row is not None
    assert int(row[1]) == int(np.sum(ours < theirs)) and int(row[2]) == 10
    assert float(row[3]) == pytest.approx(np.median(changes), abs=0.006)
    assert float(row[4]) == pytest.approx(wilcoxon_p(changes), rel=1e-3)
    # average ranks over the 10 pairs: by hand with scipy's rankdata
    ranks = np.mean([rankdata([value[("ce", d, s)], value[("logreg", d, s)]]) for d, s in keys], 0)
    assert f"| raw | 10 | {ranks[0]:.2f} | {ranks[1]:.2f} |" in text
    assert "## NLL, mean over the 5 conditions, after temperature scaling" in text
    # a family that only one dataset has pairs over its 5 severities there
    swap = squeeze(compare_markdown(pooled, references=["ce"], condition="swap"))
    assert re.search(r"\| logreg \| raw \| \d/5 \|", swap)
    # the command line takes a family name too
    from nescal_bench.cli import main

    assert (
        main(["compare", corrupted_run.output, "--condition", "noise", "--references", "ce"]) == 0
    )
    assert "(dataset, condition) pair" in capsys.readouterr().out


def test_compare_refuses_pooling_shift_with_ood_or_an_unknown_family(corrupted_run):
    pooled = results_frame([corrupted_run.output])
    message = (
        "the conditions ['noise@1', 'ood_far'] record different metrics; pool shifted test rows "
        "or out-of-distribution sets, not both"
    )
    with pytest.raises(CompareError, match=f"^{re.escape(message)}$"):
        compare_markdown(pooled, condition=["noise@1", "ood_far"])
    with pytest.raises(CompareError, match=r"families \['noise', 'swap', 'missing_values'\]$"):
        compare_markdown(pooled, condition="blur")
    single = compare_markdown(pooled, references=["ce"], condition="noise@2")
    assert single.startswith("# Paired comparisons under `noise@2`, confirm seeds [3], 2 datasets")
    assert "Average ranks" not in single
