"""TabM (Gorishniy et al., "TabM: Advancing Tabular Deep Learning with Parameter-Efficient
Ensembling", ICLR 2025) as a torch module for ``NeSCalClassifier(module=TabMModule)``.

It returns one set of logits per ensemble member, shape ``(n, k, n_classes)``, which the
estimator handles like its own ``n_members``. The ``tabm`` package is imported only when
a module is built; without it, that raises an ImportError saying ``pip install tabm``.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from .._params import check_int

__all__ = ["TabMModule"]


def _import_tabm():
    """``tabm``, or an ImportError saying how to install it."""
    try:
        import tabm
    except ImportError as exc:
        raise ImportError(
            f"TabMModule needs the tabm package, which is not installed ({exc}); install it "
            "with `pip install tabm`"
        ) from exc
    return tabm


#: TabM's architecture types (``tabm.TabM``'s ``arch_type``).
TABM_ARCH_TYPES = ("tabm", "tabm-mini", "tabm-packed")
#: Numeric feature embeddings of :class:`TabMModule`.
TABM_NUMERIC_EMBEDDINGS = (None, "periodic")


class TabMModule(nn.Module):
    """TabM as a network for ``NeSCalClassifier``: ``k`` members' logits per row.

    TabM (Gorishniy et al., ICLR 2025) is an ensemble of ``k`` MLPs that share most
    of their weights (BatchEnsemble) and train in parallel on the same batches. This
    module builds it with ``tabm.TabM.make`` (the ``tabm`` package), every input
    column numeric (one-hot encode the categorical ones first, as
    ``make_tabular_preprocessor`` does), ``d_out=n_classes`` and ReLU activations.

    Parameters
    ----------
    n_features : int
        Number of input columns.
    n_classes : int
        Number of classes (2 for a binary problem: one logit per class).
    k : int, default=32
        Number of ensemble members.
    n_blocks : int or None, default=None
        Number of hidden blocks (linear, ReLU, dropout). None takes ``TabM.make``'s
        default: 3, or 2 with ``numeric_embedding="periodic"`` (the TabM README: "When
        using embeddings ... the default depth can be reduced to 2").
    d_block : int, default=512
        Width of every block.
    dropout : float, default=0.1
        Dropout rate of every block, in [0, 1).
    arch_type : {"tabm", "tabm-mini", "tabm-packed"}, default="tabm"
        ``"tabm"``: BatchEnsemble in every linear layer (shared weight, per-member
        scalings and biases); ``"tabm-mini"``: one shared MLP after a per-member
        scaling of the input; ``"tabm-packed"``: ``k`` independent MLPs.
    numeric_embedding : {None, "periodic"}, default=None
        ``"periodic"`` embeds every column with
        ``rtdl_num_embeddings.PeriodicEmbeddings(n_features, lite=False)`` (its
        defaults: 48 frequencies, 24 dimensions per column; as in TabM's example
        notebook), shared by the members, before the backbone.

    Attributes
    ----------
    tabm : tabm.TabM
        The TabM network. ``tabm.output`` is its output layer (one linear layer per
        member, ``tabm.LinearEnsemble``).
    k : int
        Number of ensemble members.

    Notes
    -----
    Defaults are those of ``tabm.TabM.make`` (tabm 0.0.3) and the TabM README's
    suggested starting point: ``k=32``, 3 blocks of width 512, dropout 0.1, ReLU; the
    first per-member scaling is initialised with random signs (``"normal"`` with an
    embedding), the others with ones. The README's training settings to go with them
    are AdamW with learning rate 0.002 and weight decay 0.0003; they are the
    estimator's, not this module's.

    Shapes: input ``(n, n_features)`` (float), output ``(n, k, n_classes)``. The input
    of the output layer (:attr:`embedding_layer_name`) is the backbone's last
    representation, ``(n, k, d_block)``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tabm")
    >>> import torch
    >>> from nescal_sklearn.nn import TabMModule
    >>> module = TabMModule(5, 3, k=4, d_block=16)
    >>> module(torch.zeros(2, 5)).shape
    torch.Size([2, 4, 3])
    >>> module.embedding_layer_name
    'tabm.output'
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        *,
        k: int = 32,
        n_blocks: int | None = None,
        d_block: int = 512,
        dropout: float = 0.1,
        arch_type: str = "tabm",
        numeric_embedding: str | None = None,
    ) -> None:
        super().__init__()
        n_features = check_int("n_features", n_features, low=1)
        n_classes = check_int("n_classes", n_classes, low=2)
        k = check_int("k", k, low=1)
        if n_blocks is not None:
            n_blocks = check_int("n_blocks", n_blocks, low=1)
        d_block = check_int("d_block", d_block, low=1)
        if (
            not isinstance(dropout, numbers.Real)
            or isinstance(dropout, bool)
            or not 0 <= dropout < 1
        ):
            raise ValueError(f"dropout must be a float in [0, 1); got {dropout!r}.")
        if arch_type not in TABM_ARCH_TYPES:
            raise ValueError(
                f"arch_type must be one of {list(TABM_ARCH_TYPES)}; got {arch_type!r}."
            )
        if numeric_embedding not in TABM_NUMERIC_EMBEDDINGS:
            raise ValueError(
                f"numeric_embedding must be None or 'periodic'; got {numeric_embedding!r}."
            )
        tabm = _import_tabm()
        num_embeddings = None
        if numeric_embedding == "periodic":
            import rtdl_num_embeddings  # a dependency of tabm

            num_embeddings = rtdl_num_embeddings.PeriodicEmbeddings(n_features, lite=False)
        kwargs = {"n_blocks": n_blocks} if n_blocks is not None else {}
        self.tabm = tabm.TabM.make(
            n_num_features=n_features,
            d_out=n_classes,
            num_embeddings=num_embeddings,
            k=k,
            d_block=d_block,
            dropout=float(dropout),
            arch_type=arch_type,
            **kwargs,
        )
        self.n_features = n_features
        self.n_classes = n_classes

    @property
    def k(self) -> int:
        """Number of ensemble members."""
        return self.tabm.k

    @property
    def embedding_layer_name(self) -> str:
        """Dotted name (as in ``named_modules()``) of the output layer.

        Its forward receives the backbone's last representation, of shape
        ``(n, k, d_block)``: NeSCal builds its neighbour graph on it.
        """
        return "tabm.output"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of every member.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)
            Float features.

        Returns
        -------
        logits : torch.Tensor of shape (n, k, n_classes)
        """
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(
                f"TabMModule expects input of shape (n, {self.n_features}); got {tuple(x.shape)}."
            )
        return self.tabm(x)
