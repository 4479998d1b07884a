"""Rich notebook reprs: small Markdown and HTML tables and text blocks, escaped and bounded.

``html`` and ``json`` load on the first repr, not with ``import agcore_tools``: the
registry imports this module, and ``html`` brings its table of 2,000 entities.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MAX_CELL = 120
"""Characters a table cell shows before it is cut with an ellipsis."""
MAX_TEXT = 4000
"""Characters of free text (a model's answer) shown before it is cut."""
MAX_ROWS = 100
"""Messages a transcript shows; older ones are summarised in one line."""


def short(value: Any, limit: int = MAX_CELL) -> str:
    """One line of at most ``limit`` characters describing ``value``."""
    if isinstance(value, str):
        text = value
    else:
        import json

        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escape(text: str, quote: bool = True) -> str:
    import html

    return html.escape(text, quote=quote)


def _md_escape(text: str) -> str:
    # Backslashes first, so cell text cannot forge an escape; HTML so tags show as text.
    return _escape(text.replace("\\", "\\\\"), quote=False)


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], limit: int = MAX_CELL
) -> str:
    """A GitHub-flavoured Markdown table; pipes in cells are escaped, cells cut at ``limit``."""

    def cell(value: Any) -> str:
        return _md_escape(short(value, limit)).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    caption: str = "",
    limit: int = MAX_CELL,
) -> str:
    """An HTML table with every cell escaped and cut at ``limit`` characters."""
    head = "".join(f"<th>{_escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{_escape(short(v, limit))}</td>" for v in row) + "</tr>"
        for row in rows
    )
    cap = f"<caption>{_escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` (line breaks kept) cut at ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


MAX_FIELD = 1000
"""Characters of one field's ``repr`` in :func:`bounded_repr` before it is cut."""


def bounded_repr(record: Any) -> str:
    """A dataclass's ``repr`` with each field's value cut at :data:`MAX_FIELD` characters
    (saying how many were left out): the plain text a notebook keeps next to the tables,
    which the full ``repr`` of a large output would swell by megabytes."""
    parts = []
    for item in dataclasses.fields(record):
        if item.repr:
            parts.append(f"{item.name}={clip(repr(getattr(record, item.name)), MAX_FIELD)}")
    return f"{type(record).__qualname__}({', '.join(parts)})"


def markdown_quote(text: str, limit: int = MAX_TEXT) -> str:
    """A Markdown block quote of free text: its Markdown renders, its HTML shows as text."""
    lines = clip(text, limit).splitlines() or [""]
    return "\n".join(f"> {_escape(line, quote=False)}" if line.strip() else ">" for line in lines)


def html_text(text: str, limit: int = MAX_TEXT) -> str:
    """Free text as an escaped, wrapping ``<pre>`` block."""
    escaped = _escape(clip(text, limit))
    return f'<pre style="white-space: pre-wrap">{escaped}</pre>'


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text of a list of parts
    (other parts show as ``[type]``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        pieces = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif isinstance(part, Mapping):
                pieces.append(f"[{part.get('type', 'part')}]")
            else:
                pieces.append(str(part))
        return " ".join(pieces)
    return short(content)


def call_text(name: Any, arguments: Any, call_id: Any = None) -> str:
    """One tool call on one line: ``name(arguments) [call_id]``."""
    text = f"{name}({short(arguments, MAX_CELL)})"
    return f"{text} [{call_id}]" if call_id else text


def message_rows(messages: Sequence[Any]) -> list[tuple[int, str, str]]:
    """``(index, role, content)`` rows of a chat history, one line each.

    Assistant rows list their tool calls (``name(arguments) [id]``), after any text;
    tool rows name the tool that produced them. Only the last :data:`MAX_ROWS`
    messages get rows.
    """
    names: dict[Any, Any] = {}
    rows: list[tuple[int, str, str]] = []
    first_shown = max(0, len(messages) - MAX_ROWS)
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            if index >= first_shown:
                rows.append((index, "?", short(message)))
            continue
        role = str(message.get("role", "?"))
        parts: list[str] = []
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(f"(reasoning: {short(reasoning, 60)})")
        text = content_text(message.get("content"))
        if role == "tool":
            call_id = message.get("tool_call_id")
            parts.append(f"{names.get(call_id, 'tool')} [{call_id}] → {text}")
        elif text:
            parts.append(text)
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                parts.append(f"→ {short(call)}")
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            call_id = call.get("id")
            names[call_id] = function.get("name")
            parts.append("→ " + call_text(function.get("name"), function.get("arguments"), call_id))
        if index >= first_shown:
            rows.append((index, role, " ".join(parts)))
    return rows


REGISTRY_HEADERS = ("name", "description", "permissions", "tags", "category", "calls", "failures")
"""The columns of a ``ToolRegistry``'s notebook table."""


def registry_rows(entries: Iterable[Any]) -> list[tuple[Any, ...]]:
    """A ``ToolRegistry``'s notebook table: one row per ``ToolEntry``, in
    :data:`REGISTRY_HEADERS`."""
    return [
        (
            e.name,
            e.tool.description,
            ", ".join(p.name for p in e.declared_permissions()) or "-",
            ", ".join(e.tags) or "-",
            e.category or "-",
            e.stats.calls,
            e.stats.failures,
        )
        for e in entries
    ]


def invocation_rows(inv: Any) -> list[tuple[str, Any]]:
    """A ``ToolInvocation``'s notebook view: tool, input, output or error, duration, id."""
    outcome = ("output", inv.output) if inv.ok else ("error", str(inv.error))
    rows = [("tool", inv.tool_name), ("input", inv.input), outcome]
    rows.append(("duration", f"{inv.duration * 1000:.2f} ms"))
    if inv.call_id:
        rows.append(("call id", inv.call_id))
    return rows
