"""Networks for tabular rows: the default MLP, its building blocks, ensemble members."""

from ._dropout import FastDropout
from ._layers import CategoricalEmbeddings, FrontScale, ParametricActivation, PBLDEmbeddings
from ._members import ensemble_logits, expand_member_graph, flatten_members, member_log_probs
from ._mlp import (
    CATEGORICAL_EMBEDDING_MIN_SIZE,
    MemberLinear,
    TabularMLP,
    build_module,
    layout_kwargs,
)
from ._tabm import TabMModule

__all__ = [
    "CATEGORICAL_EMBEDDING_MIN_SIZE",
    "CategoricalEmbeddings",
    "FastDropout",
    "FrontScale",
    "MemberLinear",
    "PBLDEmbeddings",
    "ParametricActivation",
    "TabMModule",
    "TabularMLP",
    "build_module",
    "ensemble_logits",
    "expand_member_graph",
    "flatten_members",
    "layout_kwargs",
    "member_log_probs",
]
