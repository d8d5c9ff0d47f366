"""A report as a list of blocks, rendered to Markdown and to one self-contained HTML file."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Heading", "Image", "Paragraph", "Table", "to_html", "to_markdown"]


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    align: list[str] = field(default_factory=list)  # "l" or "r" per column


@dataclass
class Image:
    path: str  # relative to the report's folder
    alt: str


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list) -> str:
    """Render ``blocks`` as GitHub-flavoured Markdown.

    Examples
    --------
    >>> from nescal_sklearn.benchmark._render import Heading, Table, to_markdown
    >>> print(to_markdown([Heading("Scores", 2), Table(["a", "b"], [["x", "1"]], ["l", "r"])]))
    ## Scores
    <BLANKLINE>
    | a | b |
    | --- | ---: |
    | x | 1 |
    <BLANKLINE>
    """
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}\n")
        elif isinstance(block, Paragraph):
            out.append(f"{block.text}\n")
        elif isinstance(block, Table):
            align = block.align or ["l"] * len(block.header)
            lines = ["| " + " | ".join(_md_cell(h) for h in block.header) + " |"]
            lines.append("| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
            out.append("\n".join(lines) + "\n")
        elif isinstance(block, Image):
            out.append(f"![{block.alt}]({block.path})\n")
    return "\n".join(out)


def _inline(text: str) -> str:
    """Escape, then turn Markdown ``**bold**`` and ``code`` spans into HTML."""
    text = html.escape(str(text))
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em;
       color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f2f2f2; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""


def to_html(blocks: list, base: Path, title: str) -> str:
    """Render ``blocks`` as one HTML page; images under ``base`` are embedded as data URIs."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
    ]
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            out.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Table):
            align = block.align or ["l"] * len(block.header)
            cells = "".join(
                f'<th class="{a}">{_inline(h)}</th>'
                for h, a in zip(block.header, align, strict=True)
            )
            out.append(f"<table><thead><tr>{cells}</tr></thead><tbody>")
            for row in block.rows:
                cells = "".join(
                    f'<td class="{a}">{_inline(c)}</td>' for c, a in zip(row, align, strict=True)
                )
                out.append(f"<tr>{cells}</tr>")
            out.append("</tbody></table>")
        elif isinstance(block, Image):
            data = base64.b64encode((base / block.path).read_bytes()).decode("ascii")
            out.append(
                f'<p><img alt="{html.escape(block.alt)}" src="data:image/png;base64,{data}"></p>'
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"
