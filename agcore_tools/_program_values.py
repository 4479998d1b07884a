"""What a code-mode program receives of a tool's call: the output made a value the
sandbox takes (media as a short text naming it, a structured value as its listing
says), and a settled result in the form the sandbox resumes with.

:mod:`agcore_tools._code_mode` runs the program and its calls; this module only shapes
their results, with no state of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from ._returns import wraps_plain_value
from .base import BaseTool
from .content import CONTENT_TYPES

__all__ = ["WRAPPED_AGAIN", "as_listed", "program_value", "settled"]

WRAPPED_AGAIN: ContextVar[bool] = ContextVar("agcore_tools_wrapped_again", default=True)
"""Whether a plain value an MCP adapter unwrapped for the model reaches a program as
the ``{"result": v}`` its listing promises. A Temporal workflow started before keeps
the value as it came on replay (``workflow.patched``)."""


def program_value(value: Any, tool: str) -> Any:
    """A tool's output as a program receives it: an image, sound or file (or bytes that
    are no UTF-8 text) becomes a short text naming it, since a program can do nothing
    with pixels, and their bytes are no JSON.

    Example:
        >>> from agcore_tools import Image
        >>> shot = program_value({"shot": Image(b"GIF89a" + bytes(10))}, "snap")["shot"]
        >>> shot.split(":")[0]
        "[image/gif image of 16 bytes from tool 'snap'"
    """
    if isinstance(value, CONTENT_TYPES):
        kind = type(value).__name__.lower()
        return (
            f"[{value.media_type} {kind} of {value.size} bytes from tool '{tool}': a program "
            "cannot see it; call the tool directly to show it to the model]"
        )
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return f"[{len(raw)} bytes of binary data from tool '{tool}': a program cannot read them]"  # fmt: skip
    if isinstance(value, Mapping):
        return {key: program_value(item, tool) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [program_value(item, tool) for item in value]
    return value


def as_listed(output: Any, tool: BaseTool | None) -> Any:
    """An object-returning tool's output as its listing says: an MCP tool's
    ``structuredContent`` sent with images or sounds arrives as ``[object, *media]``
    (see :mod:`agcore_tools.mcp._results`), and a program, which cannot see the media,
    gets the object alone; a plain value the adapter unwrapped for the model arrives
    as ``v``, and a program gets ``{"result": v}``."""
    schema = tool.output_schema if tool is not None else None
    if (
        isinstance(schema, Mapping)
        and schema.get("type") == "object"
        and isinstance(output, list)
        and len(output) > 1
        and isinstance(output[0], Mapping)
        and all(_media(part) for part in output[1:])
    ):
        return output[0]
    if wraps_plain_value(schema) and not isinstance(output, Mapping) and WRAPPED_AGAIN.get():
        return {"result": output}
    return output


def _media(part: Any) -> bool:
    """Whether ``part``, beside an MCP tool's structured value, is media a program
    cannot see: an image, sound or file; an embedded resource's blob; or an image or
    audio part kept as the server sent it (its data was no base64 of its type)."""
    if isinstance(part, CONTENT_TYPES):
        return True
    if not isinstance(part, Mapping):
        return False
    resource = part.get("resource")
    if part.get("type") == "resource" and isinstance(resource, Mapping):
        return "blob" in resource
    return part.get("type") in ("image", "audio") and "data" in part


def settled(entry: Mapping[str, Any]) -> dict[str, Any]:
    if "error" in entry:
        kind, message = entry["error"]
        return {"exc_type": kind, "message": message}
    return {"return_value": entry["value"]}
