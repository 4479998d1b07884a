"""The first difference between a recorded request body and a replayed one.

Tool results may differ: a test can change what a tool returns while the model's
recorded answers stay the same. So a Chat Completions ``tool`` message's ``content``
and a Responses ``function_call_output`` item's ``output`` are not compared, nor a
user message the loop adds after tool results to carry their attachments. A secret the
recording replaced with ``[scrubbed]`` matches any text in its place.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MISSING", "SCRUBBED", "first_difference", "json_path", "scrubbed_match"]

SCRUBBED = "[scrubbed]"
"""What a recording writes in place of a secret."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Missing:
    """A value absent on one side."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()
"""Stands for a key or item one side does not have."""


def json_path(parts: list[str | int]) -> str:
    """``["messages", 3, "content"]`` as ``messages[3].content``.

    Example:
        >>> json_path(["messages", 3, "content"]), json_path(["a b"]), json_path([])
        ('messages[3].content', '["a b"]', '(body)')
    """
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.match(part):
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text or "(body)"


def _tool_result(item: Any) -> str | None:
    """The key of a message holding a tool's result, which may differ, or None."""
    if not isinstance(item, dict):
        return None
    if item.get("role") == "tool":
        return "content"
    if item.get("type") == "function_call_output":
        return "output"
    return None


def _attachments(item: Any) -> bool:
    """Whether ``item`` is a user message carrying the images of tool results."""
    if not isinstance(item, dict) or item.get("role") != "user":
        return False
    content = item.get("content")
    return isinstance(content, list) and bool(content)


def first_difference(
    recorded: Any, got: Any, path: list[str | int] | None = None
) -> tuple[list[str | int], Any, Any] | None:
    """Where ``got`` first differs from ``recorded``: (path, recorded value, got value).

    Dicts are walked in the recorded order of their keys (then the extra keys of
    ``got``), lists item by item; tool results are skipped (see the module).

    Example:
        >>> recorded = {"messages": [{"role": "user", "content": "hi"}], "model": "m"}
        >>> first_difference(recorded, {"messages": [{"role": "user", "content": "yo"}],
        ...                              "model": "m"})
        (['messages', 0, 'content'], 'hi', 'yo')
        >>> tool = {"role": "tool", "tool_call_id": "c1", "content": "18"}
        >>> first_difference({"messages": [tool]},
        ...                  {"messages": [dict(tool, content="19")]}) is None
        True
        >>> first_difference({"key": "k=[scrubbed];"}, {"key": "k=sk-123;"}) is None
        True
    """
    path = [] if path is None else path
    if isinstance(recorded, dict) and isinstance(got, dict):
        skip = _tool_result(recorded) if _tool_result(recorded) == _tool_result(got) else None
        for key in [*recorded, *(k for k in got if k not in recorded)]:
            if key == skip:
                continue
            found = first_difference(
                recorded.get(key, MISSING), got.get(key, MISSING), [*path, key]
            )
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(got, list):
        for index in range(max(len(recorded), len(got))):
            mine = recorded[index] if index < len(recorded) else MISSING
            theirs = got[index] if index < len(got) else MISSING
            if _attachments(mine) and _attachments(theirs) and _after_tool(recorded, index):
                continue
            found = first_difference(mine, theirs, [*path, index])
            if found is not None:
                return found
        return None
    if type(recorded) is type(got) and recorded == got:
        return None
    if isinstance(recorded, str) and isinstance(got, str) and scrubbed_match(recorded, got):
        return None
    numbers = isinstance(recorded, int | float) and isinstance(got, int | float)
    if numbers and not isinstance(recorded, bool) and not isinstance(got, bool) and recorded == got:
        return None  # 1 and 1.0: JSON does not tell them apart
    return path, recorded, got


def scrubbed_match(recorded: str, got: str) -> bool:
    """Whether ``got`` is ``recorded`` with each ``[scrubbed]`` standing for some text.

    Example:
        >>> scrubbed_match("/v1/[scrubbed]/chat", "/v1/tok-123/chat")
        True
        >>> scrubbed_match("/v1/[scrubbed]/chat", "/v2/tok-123/chat")
        False
    """
    if SCRUBBED not in recorded:
        return False
    pattern = ".+?".join(re.escape(part) for part in recorded.split(SCRUBBED))
    return re.fullmatch(pattern, got, re.DOTALL) is not None


def _after_tool(items: list[Any], index: int) -> bool:
    return index > 0 and _tool_result(items[index - 1]) is not None
