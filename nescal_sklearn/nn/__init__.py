"""Networks for tabular rows: the default MLP, its building blocks, ensemble members."""

from ._layers import CategoricalEmbeddings, FrontScale, ParametricActivation, PBLDEmbeddings
from ._members import ensemble_logits, expand_member_graph, flatten_members, member_log_probs
from ._mlp import MemberLinear, TabularMLP, build_module
from ._tabm import TabMModule

__all__ = [
    "CategoricalEmbeddings",
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
    "member_log_probs",
]
