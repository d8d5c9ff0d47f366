"""Small helpers shared by the benchmark tests."""

from __future__ import annotations

import inspect


def deterministic(record: dict) -> dict:
    """A record without its timing and host (the ``run`` section)."""
    return {k: v for k, v in record.items() if k != "run"}


def set_default(monkeypatch, function, name, value):
    """Change the default of parameter ``name`` of ``function`` for one test."""
    if function.__kwdefaults__ and name in function.__kwdefaults__:
        monkeypatch.setitem(function.__kwdefaults__, name, value)
        return
    params = inspect.signature(function).parameters.values()
    positional = [p.name for p in params if p.default is not p.empty and p.kind != p.KEYWORD_ONLY]
    defaults = list(function.__defaults__)
    defaults[positional.index(name)] = value
    monkeypatch.setattr(function, "__defaults__", tuple(defaults))
