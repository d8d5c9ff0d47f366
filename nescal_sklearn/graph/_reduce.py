"""Row normalisation and the optional PCA / UMAP reduction of embeddings."""

from __future__ import annotations

import warnings

import numpy as np

from .._compat.numba_cache import PYNNDESCENT_MODULES, UMAP_MODULES, enable_jit_cache

__all__ = ["l2_normalise", "reduce_embeddings", "default_n_components"]

_NORMALISE_ROWS = 65536


def l2_normalise(data: np.ndarray) -> np.ndarray:
    """A new float32 C-contiguous array of the rows of ``data`` scaled to unit L2 norm.

    Zero rows stay zero (no NaN). Norms are taken in float64, chunk by chunk.
    """
    out = np.empty(data.shape, dtype=np.float32)
    for start in range(0, data.shape[0], _NORMALISE_ROWS):
        block = np.asarray(data[start : start + _NORMALISE_ROWS], dtype=np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        norms[norms == 0] = 1.0
        out[start : start + _NORMALISE_ROWS] = block / norms[:, None]
    return out


def default_n_components(reduction: str, n_samples: int, n_features: int) -> int:
    """Default target dimension: 32 for PCA, 10 for UMAP (capped by the data's size)."""
    if reduction == "pca":
        return min(32, n_samples, n_features)
    return min(10, n_features, max(n_samples - 2, 1))


def reduce_embeddings(
    unit: np.ndarray, reduction: str, n_components: int, random_state: int | None
) -> np.ndarray:
    """PCA or UMAP (cosine metric) of unit rows, re-normalised to unit rows."""
    if reduction == "pca":
        from sklearn.decomposition import PCA

        reduced = PCA(n_components=n_components, random_state=random_state).fit_transform(unit)
    else:
        enable_jit_cache(PYNNDESCENT_MODULES + UMAP_MODULES)
        try:
            import umap
        except ImportError as exc:
            raise ImportError(
                "reduction='umap' needs umap-learn: pip install nescal-sklearn[umap]."
            ) from exc
        model = umap.UMAP(
            n_components=n_components,
            n_neighbors=min(15, unit.shape[0] - 1),
            metric="cosine",
            random_state=random_state,
            # umap-learn forces n_jobs=1 with a warning when seeded; say it up front.
            n_jobs=1 if random_state is not None else -1,
        )
        with warnings.catch_warnings():
            # Tiny sets make spectral initialisation fall back to random, with a warning.
            warnings.filterwarnings("ignore", message=".*[Ss]pectral.*")
            reduced = model.fit_transform(unit)
    return l2_normalise(reduced)
