"""From an MCP ``CallToolResult`` to the value a tool call returns.

* ``isError: true``: :class:`~agcore_tools.ToolExecutionError` carrying the text (the
  connection's secrets masked; as an error, which apps log, its control characters
  escaped and cut past 2,000 characters), so a model can read what went wrong and try
  again.
* ``structuredContent`` present: that object; with image or audio parts (or resource
  blobs a model reads, as below) beside it, a list of the object and those parts, so no
  picture is lost. A string in the object that repeats such a part's base64 data (or
  its ``data:`` URL), as server-filesystem's ``read_media_file`` sends, becomes a short
  label such as ``"[image/png image, attached]"``, so the model gets the picture once,
  as a picture, and not again as base64 text. (A code-mode program, which cannot see
  media, gets the object alone.) For a model (:data:`READ_BY_MODEL`), a plain value
  that FastMCP or the MCP Python SDK wrapped as ``{"result": v}`` is ``v`` when the
  text parts say the same (a list's also when they say its items, one part each, as
  the MCP Python SDK sends a list): a note reads as its text, not as one line of JSON
  with every newline and quote escaped. For a tool that renders an app
  (:data:`CONTENT_FOR_MODEL`), the object is the app's, and the parts below are the
  value (the object when there are none, or only blank text).
* Only text parts, none with annotations: the text, several parts joined with newlines
  ("" when empty).
* Any other part, or a text part with ``annotations`` (``audience``, ``priority``,
  ``lastModified``): the list of every part, in order: text parts as strings (as typed
  JSON, ``{"type": "text", "text": ..., "annotations": {...}}``, when annotated), image
  and audio parts as :class:`~agcore_tools.Image` and :class:`~agcore_tools.Audio`
  (which a model then sees as images and sounds), the others (resource,
  resource_link) as typed JSON (``{"type": "resource", "resource": {...}}``), so
  nothing is dropped. An embedded resource whose ``blob`` is an image, a sound or a PDF
  (by its ``mimeType``) keeps its typed JSON, its ``blob`` an ``Image``, ``Audio`` or
  :class:`~agcore_tools.File` (named after the uri's last segment): the model sees the
  picture or the document, and reads the uri beside it, where it read 16 KB of cut
  base64 text.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ..content import CONTENT_TYPES, Audio, Content, File, Image
from ..error import ToolError, ToolExecutionError
from ._error_text import quoted

if TYPE_CHECKING:
    from mcp_types import CallToolResult

__all__ = ["CONTENT_FOR_MODEL", "READ_BY_MODEL", "blob_content", "model_reads", "result_value"]

logger = logging.getLogger("agcore_tools.mcp")

READ_BY_MODEL: ContextVar[bool] = ContextVar("agcore_mcp_read_by_model", default=False)
"""True while an adapter whose tool's output schema wraps a plain value
(:func:`~agcore_tools._returns.wraps_plain_value`) makes a call: its value is what the
model reads. :meth:`McpClient.call_tool` itself returns the ``structuredContent`` as
documented, and a code-mode program gets ``{"result": v}`` back (``_code_mode``)."""


CONTENT_FOR_MODEL: ContextVar[bool] = ContextVar("agcore_mcp_content_for_model", default=False)
"""True while an adapter of a tool that renders an app (MCP Apps
:attr:`~agcore_tools.McpToolInfo.renders_app`) makes a call: its ``structuredContent``
is the app's data, kept out of the model's context, and the content parts are the
value (the object when they are none or blank text). :meth:`McpClient.call_tool`
itself, the app's path, returns the ``structuredContent`` as documented."""


def result_value(
    result: CallToolResult, tool_name: str, *, hide: Callable[[str], str] | None = None
) -> Any:
    """The value of a tool call, or :class:`ToolExecutionError` when ``isError`` is set,
    its text shown by ``hide``: the client's connections pass theirs, which masks their
    secrets, since a tool that failed may quote the credential it was sent, as a
    server's error answer may; then made safe to log (``_error_text.quoted``)."""
    content = result.content
    if result.is_error:
        text = _text_only(content, annotated=True)
        if text is None or not text.strip():
            text = json.dumps(_typed(content) or result.structured_content, default=str)
        raise ToolExecutionError(tool_name, quoted(text, str if hide is None else hide))
    if result.structured_content is not None and not (
        CONTENT_FOR_MODEL.get() and _says_something(content)
    ):
        parts = [part for part in content if _binary(part) is not None]
        if not parts:
            if READ_BY_MODEL.get():
                return _unwrapped(result.structured_content, content)
            return result.structured_content
        media = [_value(part, tool_name) for part in parts]
        labels = _attached_labels(parts, media)
        return [_without_copies(result.structured_content, labels), *media]
    text = _text_only(content)
    return text if text is not None else [_value(part, tool_name) for part in content]


def _says_something(content: list[Any]) -> bool:
    """Whether the parts hold more than blank text: an app's tool that sends its page's
    data with an empty text part leaves the model the data, not an empty answer."""
    return any(_kind(part) != "text" or part.text.strip() for part in content)


def _unwrapped(structured: dict[str, Any], content: list[Any]) -> Any:
    """``v`` of ``{"result": v}`` when the text parts say the same (``v`` itself, or its
    JSON), or, for a list, when there is one part per item and each says its item (the
    MCP Python SDK sends ``["ops", "db"]`` as the parts ``ops`` and ``db``); else
    ``structured``: a server's own text that differs (a summary) is not the value, and
    an object stays one, as a program gets it back (``_code_mode``)."""
    value = structured.get("result")
    texts = _texts(content)
    if list(structured) != ["result"] or texts is None or isinstance(value, dict):
        return structured
    if _says("\n".join(texts), value):
        return value
    if isinstance(value, list) and len(texts) == len(value) and all(map(_says, texts, value)):
        return value
    return structured


def _says(text: str, value: Any) -> bool:
    """Whether ``text`` is ``value`` itself (a string) or its JSON."""
    if isinstance(value, str):
        return text == value
    try:
        return _canonical(json.loads(text)) == _canonical(value)
    except (ValueError, RecursionError):  # not JSON, or too deep: not the value's JSON
        return False


def _canonical(value: Any) -> str:
    # 1 and true, 1 and 1.0, are the same to ==, not to a model reading the JSON.
    return json.dumps(value, sort_keys=True)


_MEDIA: dict[str, type[Image] | type[Audio]] = {"image": Image, "audio": Audio}
_PDF = "application/pdf"  # the one kind of file the model APIs read


def model_reads(media_type: str) -> bool:
    """Whether a resource's blob of ``media_type`` is one a model sees: an image, a
    sound or a PDF.

    Example:
        >>> [model_reads(t) for t in ("image/png", "audio/wav", "application/pdf", "application/zip")]
        [True, True, True, False]
    """
    return media_type.split("/")[0] in _MEDIA or media_type == _PDF


def blob_content(data: str, media_type: str, uri: str) -> Content:
    """A resource's base64 ``data`` of a ``media_type`` :func:`model_reads`, as the
    model is to see it: an :class:`~agcore_tools.Image`, an
    :class:`~agcore_tools.Audio`, or a :class:`~agcore_tools.File` named after the last
    segment of ``uri``. Raises :class:`~agcore_tools.error.ToolError` (a ValueError)
    when ``data`` is not base64 or not of that kind.

    Example:
        >>> blob_content("JVBERi0xLjc=", "application/pdf", "file:///reports/q3%20final.pdf")
        File(media_type='application/pdf', filename='q3 final.pdf', size=8)
    """
    kind = media_type.split("/")[0]
    if kind in _MEDIA:
        return _MEDIA[kind].from_base64(data, media_type)
    # file:///reports/q3%20final.pdf -> "q3 final.pdf"; File names it "file.pdf" if none.
    name = posixpath.basename(unquote(urlsplit(uri).path))
    return File.from_base64(data, media_type, filename=name)


def _binary(part: Any) -> tuple[str, str] | None:
    """The base64 data and media type of a part a model sees as binary content: an
    image or audio part, or an embedded resource's blob that is an image, a sound or a
    PDF; None for any other part."""
    kind = _kind(part)
    if kind in _MEDIA:
        return part.data, part.mime_type
    if kind != "resource":
        return None
    blob, media_type = getattr(part.resource, "blob", None), part.resource.mime_type or ""
    if isinstance(blob, str) and model_reads(media_type):
        return blob, media_type
    return None


def _kind(part: Any) -> Any:
    return getattr(part, "type", None)


def _text_only(content: list[Any], *, annotated: bool = False) -> str | None:
    texts = _texts(content, annotated=annotated)
    return None if texts is None else "\n".join(texts)


def _texts(content: list[Any], *, annotated: bool = False) -> list[str] | None:
    # An error's message is its text, annotated or not; a value keeps annotations.
    texts = []
    for part in content:
        if _kind(part) != "text":
            return None
        if part.annotations is not None and not annotated:
            return None
        texts.append(part.text)
    return texts


def _value(part: Any, tool_name: str) -> Any:
    kind = _kind(part)
    if kind == "text" and part.annotations is None:
        return part.text
    binary = _binary(part)
    if binary is not None:
        try:
            if kind in _MEDIA:
                return _MEDIA[kind].from_base64(*binary)
            # The uri and media type stay beside the value, in the part's own shape.
            typed = part.model_dump(
                by_alias=True, mode="json", exclude_none=True, exclude={"resource": {"blob"}}
            )
            typed["resource"]["blob"] = blob_content(*binary, str(part.resource.uri))
            return typed
        except ToolError as exc:  # not base64, or a media type of the wrong kind
            logger.warning("MCP tool '%s' sent an unusable %s part: %s", tool_name, kind, exc)
    return part.model_dump(by_alias=True, mode="json", exclude_none=True)


def _content(value: Any) -> Content | None:
    # The binary value _value made of a part: itself, or a resource's blob.
    if isinstance(value, CONTENT_TYPES):
        return value
    if isinstance(value, dict) and isinstance(value.get("resource"), dict):
        blob = value["resource"].get("blob")
        return blob if isinstance(blob, CONTENT_TYPES) else None
    return None


def _attached_labels(parts: list[Any], values: list[Any]) -> dict[str, str]:
    # Only a part that became Image, Audio or File is attached; a part kept as typed JSON
    # still carries its data, so a copy of it in the structured value is not a duplicate.
    labels: dict[str, str] = {}
    for part, value in zip(parts, values, strict=True):
        content, binary = _content(value), _binary(part)
        if content is not None and binary is not None:
            data, media_type = binary
            label = f"[{media_type} {type(content).__name__.lower()}, attached]"
            labels[data] = label
            labels[f"data:{media_type};base64,{data}"] = label
    return labels


def _without_copies(value: Any, labels: dict[str, str]) -> Any:
    if isinstance(value, str):
        return labels.get(value, value)
    if isinstance(value, dict):
        return {key: _without_copies(item, labels) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_copies(item, labels) for item in value]
    return value


def _typed(content: list[Any]) -> list[dict[str, Any]]:
    return [part.model_dump(by_alias=True, mode="json", exclude_none=True) for part in content]
