"""Workarounds for third-party libraries, kept apart from the layers that need them (the
numba cache, :mod:`.numba_cache`; workers that outlive their parent, :mod:`.orphans`), and
the lazy re-exports (PEP 562) that the package ``__init__`` files share (:mod:`.lazy`).

Every room may import from here; nothing here imports a room of nescal_sklearn.
"""
