"""From an MCP ``CallToolResult`` to the value a tool call returns.

* ``isError: true``: :class:`~agcore_tools.ToolExecutionError` carrying the text, so a
  model can read what went wrong and try again.
* ``structuredContent`` present: that object.
* Only text parts, none with annotations: the text, several parts joined with newlines
  ("" when empty).
* Any other part (image, audio, resource, resource_link), or a text part with
  ``annotations`` (``audience``, ``priority``, ``lastModified``): the list of every part
  as typed JSON (``{"type": "image", "data": ..., "mimeType": ...}``, ``{"type":
  "text", "text": ..., "annotations": {...}}``), text parts included, in order, so
  nothing is dropped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..error import ToolExecutionError

if TYPE_CHECKING:
    from mcp_types import CallToolResult

__all__ = ["result_value"]


def result_value(result: CallToolResult, tool_name: str) -> Any:
    """The value of a tool call, or :class:`ToolExecutionError` when ``isError`` is set."""
    content = result.content
    if result.is_error:
        text = _text_only(content, annotated=True)
        if text is None or not text.strip():
            text = json.dumps(_parts(content) or result.structured_content, default=str)
        raise ToolExecutionError(tool_name, text)
    if result.structured_content is not None:
        return result.structured_content
    text = _text_only(content)
    return text if text is not None else _parts(content)


def _text_only(content: list[Any], *, annotated: bool = False) -> str | None:
    # An error's message is its text, annotated or not; a value keeps annotations.
    texts = []
    for part in content:
        if getattr(part, "type", None) != "text":
            return None
        if part.annotations is not None and not annotated:
            return None
        texts.append(part.text)
    return "\n".join(texts)


def _parts(content: list[Any]) -> list[dict[str, Any]]:
    return [part.model_dump(by_alias=True, mode="json", exclude_none=True) for part in content]
