"""Rich notebook reprs: small Markdown and HTML tables, escaped and bounded."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

MAX_CELL = 120
"""Characters a table cell shows before it is cut with an ellipsis."""


def short(value: Any, limit: int = MAX_CELL) -> str:
    """One line of at most ``limit`` characters describing ``value``."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; pipes in cells are escaped."""

    def cell(value: Any) -> str:
        return short(value).replace("\\", "\\\\").replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """An HTML table with every cell escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(short(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
