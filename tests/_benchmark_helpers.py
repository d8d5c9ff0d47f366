"""Small helpers shared by the benchmark tests."""

from __future__ import annotations

import inspect
import time

from sklearn.linear_model import LogisticRegression


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


def table_rows(markdown: str, after: str = "") -> list[list[str]]:
    """The cells of the first Markdown table after the text ``after`` (header row first)."""
    text = markdown.split(after, 1)[1] if after else markdown
    rows, started = [], False
    for line in text.splitlines():
        if line.startswith("|"):
            started = True
            if not set(line) <= set("|:- "):  # not the separator row
                rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif started:
            break
    return rows


def squeeze(markdown: str) -> str:
    """``DataFrame.to_markdown``'s padded tables as ``| a | b |`` rows and ``|---|---|``."""
    lines = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if all(set(cell) <= set(":-") and cell for cell in cells):
                cells = ["---"] * len(cells)
                lines.append("|" + "|".join(cells) + "|")
                continue
            line = "| " + " | ".join(cells) + " |"
        lines.append(line)
    return "\n".join(lines) + ("\n" if markdown.endswith("\n") else "")


class ColdStartLogistic(LogisticRegression):
    """Logistic regression whose first fit in a process takes 0.5 s more (a cold start:
    the one-off costs of a process's first torch fit), the later fits no more; each fit
    appends its number of rows to ``rows``."""

    cold = True
    rows: list[int] = []

    def fit(self, X, y, sample_weight=None):
        ColdStartLogistic.rows.append(len(X))
        if ColdStartLogistic.cold:
            ColdStartLogistic.cold = False
            time.sleep(0.5)
        return super().fit(X, y, sample_weight)
