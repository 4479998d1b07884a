"""Tool arguments and results as span content: JSON text that never holds binary data
and never raises; and the bound of every string put on a span.

A leaf module under the spans of the registry (``_otel``) and of the MCP client
(``mcp/_trace``). A content attribute is written once the call has run, so writing it
must never change the call's outcome: a value that cannot be written as JSON is
recorded as a placeholder naming why. Binary values are named by kind, media type and
size, never by their bytes, as ``gen_ai.input.messages`` names an image part by type:
:class:`~agcore_tools.Image`, :class:`~agcore_tools.Audio`, :class:`~agcore_tools.File`,
raw ``bytes``, and the base64 data of an MCP image or audio part or resource blob kept
as typed JSON.

Every string the library puts on a span or in its failure log lines is cut to a bound,
with a note of its full length (:func:`bounded`): a status description, a tool's
description or an id at :data:`TEXT_CHARS`, content at the ``max_content_chars`` of
:func:`~agcore_tools.configure_tracing`. OpenTelemetry's own attribute limit does not
cover a status description, and one span of several megabytes makes an OTLP export
batch too large for the collector, which then drops every span in it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from ._text import record_dump, record_fields
from ._unicode import scrub, scrub_json
from .content import CONTENT_TYPES, File

__all__ = ["CONTENT_CHARS", "TEXT_CHARS", "bounded", "content_json"]

logger = logging.getLogger("agcore_tools.otel")

TEXT_CHARS = 4096
"""The most characters of a status description, a tool description, an id or a
failure's log line on a span or in a log."""
CONTENT_CHARS = 16384
"""The default most characters of each text, tool argument and tool result in a content
attribute (``configure_tracing(max_content_chars=...)``)."""

_SCALARS = (str, int, float, bool, type(None))
_BINARY = (bytes, bytearray, memoryview)
# Deeper values are cut: a self-referencing structure must not recurse without end.
_MAX_DEPTH = 64


def bounded(text: str, limit: int | None) -> str:
    """``text`` cut to at most ``limit`` characters (None: not cut), ending with a note
    of its full length.

    Example:
        >>> bounded("x" * 100, 40)
        'xxxxxxxxxxxxxxxxxxxxxxxxxxx… (100 chars)'
        >>> bounded("short", 40)
        'short'
    """
    if limit is None or len(text) <= limit:
        return text
    marker = f"… ({len(text):,} chars)"
    return text[: max(limit - len(marker), 0)] + marker


def content_json(value: Any, limit: int | None = CONTENT_CHARS) -> str:
    """``value`` as JSON text for a content attribute (a string as it is), cut at
    ``limit`` characters (see :func:`bounded`); never raises.

    Example:
        >>> from agcore_tools import Image
        >>> content_json({"chart": Image(b"GIF89a" + bytes(10)), "n": 1})
        '{"chart":{"type":"image","media_type":"image/gif","size":16},"n":1}'
        >>> content_json(b"\\xff\\xfe")
        '{"type":"bytes","size":2}'
        >>> content_json("as it is")
        'as it is'
    """
    if isinstance(value, str):
        # A lone surrogate (a file name os.listdir decoded) as U+FFFD, as the model
        # reads it: OTLP's protobuf cannot encode it, nor to_json write it.
        return bounded(scrub(value), limit)
    try:
        stubbed = _stubbed(value, 0)
        try:
            text = to_json(stubbed, fallback=str, inf_nan_mode="null").decode("utf-8")
        except PydanticSerializationError:
            # A lone surrogate pydantic met only as it wrote a value (a Path's name, a
            # str() fallback's text): once more, its JSON form scrubbed.
            scrubbed = _scrubbed_json(stubbed)
            if scrubbed is None:
                raise
            text = scrubbed
    except Exception as exc:  # noqa: BLE001 - recorded as the placeholder, never raised
        # The span notes the failure; the call it describes has already run as it ran.
        logger.debug("span content not recorded: %s", type(exc).__name__)
        return f"[not recorded: {type(exc).__name__}]"
    return bounded(text, limit)


def _stubbed(value: Any, depth: int) -> Any:
    """``value`` with its binary parts replaced by stubs (itself when it has none)."""
    return _walk(value, depth)[0]


def _scrubbed_json(value: Any) -> str | None:
    """``value`` as JSON text, each string's lone surrogates as U+FFFD; None if it
    cannot be written even so."""
    try:
        plain = to_jsonable_python(value, fallback=lambda v: scrub(str(v)), inf_nan_mode="null")
        return to_json(scrub_json(plain), inf_nan_mode="null").decode("utf-8")
    except Exception:  # noqa: BLE001 - the caller records the first failure
        return None


def _key(key: Any) -> Any:
    return scrub(key) if isinstance(key, str) else key


def _walk(value: Any, depth: int) -> tuple[Any, bool]:
    """``value`` with stubs for its binary parts, and whether any part was replaced."""
    if isinstance(value, str):
        scrubbed = scrub(value)
        return scrubbed, scrubbed is not value
    if isinstance(value, _SCALARS):
        return value, False
    if depth >= _MAX_DEPTH:
        return f"[deeper than {_MAX_DEPTH} levels]", True
    if isinstance(value, CONTENT_TYPES):
        stub: dict[str, Any] = {"type": type(value).__name__.lower()}
        stub["media_type"] = value.media_type
        if isinstance(value, File):
            stub["filename"] = value.filename
        stub["size"] = value.size
        return stub, True
    if isinstance(value, _BINARY):
        return {"type": "bytes", "size": memoryview(value).nbytes}, True
    if isinstance(value, Mapping):
        part = _mcp_part(value)
        if part is not None:
            return part, True
        items = {_key(key): _walk(item, depth + 1) for key, item in value.items()}
        if any(changed for _, changed in items.values()) or not all(map(items.__contains__, value)):
            return {key: item for key, (item, _) in items.items()}, True
        return value, False
    if isinstance(value, (list, tuple, set, frozenset)):
        walked = [_walk(item, depth + 1) for item in value]
        if any(changed for _, changed in walked):
            return [item for item, _ in walked], True
        return value, False
    named = record_fields(value)
    if named is None:
        return value, False  # written by pydantic (or as str)
    if any(_walk(item, depth + 1)[1] for item in named.values()):
        # As pydantic writes it, stubs in place: an excluded field (a secret) stays out.
        dumped = record_dump(value, lambda item: _walk(item, depth + 1)[1], str)
        stubbed, changed = _walk(dumped, depth)
        if changed:
            return stubbed, True
    # A model without binary parts keeps pydantic's own form (aliases, serializers).
    return value, False


def _mcp_part(value: Mapping[Any, Any]) -> dict[str, Any] | None:
    """The stub of an MCP image or audio part, or of resource contents with a blob,
    as :mod:`agcore_tools.mcp` keeps them in typed JSON (base64 data), else None."""
    media_type = value.get("mimeType")
    kind, data, blob = value.get("type"), value.get("data"), value.get("blob")
    if kind in ("image", "audio") and isinstance(data, str) and "mimeType" in value:
        return {"type": kind, "media_type": media_type, "size": _base64_size(data)}
    if isinstance(blob, str) and "uri" in value:
        stub = {"type": "blob", "media_type": media_type, "size": _base64_size(blob)}
        return {**value, "blob": stub}
    return None


def _base64_size(data: str) -> int:
    """The decoded size of base64 text (without decoding it)."""
    return len(data.rstrip("=")) * 3 // 4
