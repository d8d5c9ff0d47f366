"""Workarounds for third-party libraries, kept apart from the layers that need them.

Every room may import from here; nothing here imports a room of nescal_sklearn.
"""
