"""From a tool's output to what each API's model receives: text plus binary parts.

A tool's output may hold :class:`~agcore_tools.Image`, :class:`~agcore_tools.Audio`
and :class:`~agcore_tools.File` values (or raw image ``bytes``). :func:`render` turns
it into one text, with a label where each value was, and the list of values to send
beside it. Only the text is cut at the result byte limit; each value has its own
limit, and a value over it (or one the API cannot take) stays out with the reason in
its label.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import (
    Collection,
    ItemsView,
    Iterable,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from ._text import record_dump, record_fields, result_text, truncate_utf8
from ._unicode import scrub
from .content import (
    CONTENT_KINDS,
    CONTENT_TYPES,
    Audio,
    Content,
    File,
    Image,
    sniff_audio,
    sniff_image,
)
from .error import _BadContent, _NotJson

__all__ = [
    "ANY_SERVER",
    "MAX_ATTACHMENT_BYTES",
    "Attachment",
    "Rendered",
    "Server",
    "attachments_message",
    "function_call_output",
    "is_attachments_message",
    "normalise",
    "not_json_reason",
    "render",
]

logger = logging.getLogger("agcore_tools.toolcalls")

Api = Literal["chat", "responses"]

MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024
"""Default limit of each binary value a tool returns, in bytes."""

_BINARY = (bytes, bytearray, memoryview)
_SEQUENCES = (list, tuple, set, frozenset, deque, KeysView, ValuesView, ItemsView)
"""What is written as a JSON array: a binary value inside one is found there too."""
_HEADER = "Attachments of the tool results above:"
_CHAT_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


_SCALARS = frozenset({str, int, float, bool, type(None)})
_only_scalars = _SCALARS.issuperset
_TABLE = 32
"""Items past which a list or tuple is first looked at whole (see :func:`_plain_rows`)."""


def _holds_binary(value: Any) -> bool:
    # On every tool result: exact type checks first, the ABC check last (it is slow).
    kind = type(value)
    if kind in _SCALARS:
        return False
    if kind is dict:
        items: Any = value.values()
    elif kind is list or kind is tuple:
        if len(value) > _TABLE and _plain_rows(value):
            return False
        items = value
    elif isinstance(value, (*CONTENT_TYPES, *_BINARY)):
        return True
    elif isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, _SEQUENCES):
        items = value
    else:
        named = record_fields(value)
        if named is None:
            return False
        items = named.values()
    return _any_binary(items)


def _plain_rows(items: list[Any] | tuple[Any, ...]) -> bool:
    # Scalars, or dicts of scalars (a table's rows), looked at in C loops: one by one,
    # 300,000 rows cost 300,000 calls, three times as long (~120 ms against ~45 ms).
    kinds = set(map(type, items))
    if kinds <= _SCALARS:
        return True
    return kinds == {dict} and _only_scalars(
        map(type, chain.from_iterable(map(dict.values, items)))
    )


def _any_binary(items: Iterable[Any]) -> bool:
    for item in items:
        kind = type(item)
        if kind in _SCALARS:
            continue
        # A flat row (or list) answered here, without a call of its own.
        if kind is dict:
            if _only_scalars(map(type, item.values())):
                continue
        elif (kind is list or kind is tuple) and _only_scalars(map(type, item)):
            continue
        if _holds_binary(item):
            return True
    return False


def _from_bytes(data: bytes | bytearray | memoryview) -> Image | str:
    raw = bytes(data)
    media_type = sniff_image(raw)
    if media_type is not None:
        return Image(raw, media_type)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _BadContent(
            f"returned {len(raw)} bytes that are neither a PNG, JPEG, GIF or WebP image nor "
            "UTF-8 text; wrap them in Image(...), Audio(...) or File(...) with their media type"
        ) from None


def _type_name(value: Any) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"  # numpy.bool, not a "bool"


def _a(value: Any) -> str:
    name = _type_name(value)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _converted(value: Any) -> Any:
    """pydantic's fallback: a value it cannot write as JSON data it can (which it then
    writes in turn), or :class:`_NotJson`."""
    if isinstance(value, (KeysView, ValuesView, ItemsView, range)):  # d.values(), range(n)
        return list(value)
    # numpy's scalars and arrays (and tensors, pandas' Series) by their own methods,
    # never by importing numpy: .tolist() makes plain lists and Python scalars.
    for name in ("tolist", "item"):
        method = getattr(value, name, None)
        if not callable(method):
            continue
        try:
            plain = method()
        except Exception as exc:
            raise _NotJson(f"{name}() of {_a(value)} failed: {exc}", value) from exc
        if type(plain) is not type(value):  # numpy.longdouble's .tolist() is itself
            return plain
        break
    raise _NotJson(f"{_a(value)} is not JSON-compatible", value)


def _jsonable(value: Any) -> Any:
    try:
        return to_jsonable_python(value, fallback=_converted)
    except UnicodeEncodeError:
        # pydantic takes no lone surrogate in a key (a dict keyed by os.listdir's names
        # of files not named in UTF-8): U+FFFD there, as in the text the model reads.
        return to_jsonable_python(_keys_scrubbed(value), fallback=_converted)


def _keys_scrubbed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            scrub(key) if isinstance(key, str) else key: _keys_scrubbed(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_keys_scrubbed(item) for item in value]
    return value


def not_json_reason(result: Any, error: Exception) -> str:
    """Why ``result`` (a tool's value) cannot be JSON, for the tool's error message:
    the value at fault, its type and where it is (``error`` is what :func:`normalise`
    raised).

    Example:
        >>> from decimal import Decimal
        >>> result = {"stats": [Decimal("1.5"), object()]}
        >>> try:
        ...     normalise(result)
        ... except TypeError as exc:
        ...     print(not_json_reason(result, exc))
        returned an object at result['stats'][1], which is not JSON-compatible; convert it to a str, int, float, bool or None (or a list or dict of them)
    """
    if isinstance(error, RecursionError):
        return (
            f"returned {_a(result)} that is not JSON-compatible: it holds itself, or nests "
            "deeper than Python's recursion limit"
        )
    if not isinstance(error, _NotJson):  # pydantic's reason: a circular value, say
        return f"returned {_a(result)} that is not JSON-compatible: {error}"
    path = _path_to(result, error.value)
    if path is None:
        where = f"{_a(result)} holding {_a(error.value)}"
    elif path == "result":
        where = _a(error.value)
    else:
        where = f"{_a(error.value)} at {path}"
    if not error.message.endswith("is not JSON-compatible"):  # its tolist() failed
        return f"returned {where}, which is not JSON-compatible: {error.message}"
    return (
        f"returned {where}, which is not JSON-compatible; convert it to a str, int, float, "
        "bool or None (or a list or dict of them)"
    )


def _path_to(root: Any, target: Any) -> str | None:
    # Depth first, each container once (a cycle ends): the first place target is found.
    stack: list[tuple[Any, str]] = [(root, "result")]
    seen: set[int] = set()
    while stack:
        value, path = stack.pop()
        if value is target:
            return path
        if id(value) in seen or type(value) in _SCALARS:
            continue
        seen.add(id(value))
        if isinstance(value, Mapping):
            items = [(f"[{key!r}]", item) for key, item in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(f"[{index}]", item) for index, item in enumerate(value)]
        else:
            named = record_fields(value)
            items = [(f".{name}", item) for name, item in (named or {}).items()]
        stack.extend((item, path + step) for step, item in reversed(items))
    return None


def normalise(value: Any) -> Any:
    """``value`` as JSON-compatible data, keeping binary values as they are.

    A pydantic model or dataclass holding one is written as pydantic writes it (see
    :func:`~agcore_tools._text.record_dump`: excluded fields left out, aliases, computed
    fields and serializers as pydantic has them), each field that holds a binary value
    as that value. Raw bytes become an :class:`Image` (by magic number) or text
    (UTF-8); other bytes raise a ``ValueError`` that is also a ``ToolError``. Values
    without binary parts are converted by ``to_jsonable_python``, with dict views,
    ``range`` and numpy-style values (by their ``tolist()`` or ``item()``) as lists and
    scalars; a value still not JSON-compatible raises a ``TypeError`` that is also a
    ``ToolError`` (:func:`not_json_reason` says where it is: ``result['stats'][0]``).
    """
    if not _holds_binary(value):
        return _jsonable(value)
    if isinstance(value, CONTENT_TYPES):
        return value
    if isinstance(value, _BINARY):
        return _from_bytes(value)
    if isinstance(value, Mapping):
        return {_key(key): normalise(item) for key, item in value.items()}
    if isinstance(value, _SEQUENCES):
        return [normalise(item) for item in value]
    # A model or dataclass holding an image: as pydantic writes it, the image in its
    # place. Read field by field, an excluded field (a secret) would be sent, and its
    # aliases and computed fields lost.
    data = record_dump(value, _holds_binary, _converted)
    return normalise(data) if _holds_binary(data) else _jsonable(value)


def _key(key: Any) -> Any:
    # pydantic's own conversion of a key (5 -> "5"), as for dicts without binary values.
    return key if isinstance(key, str) else next(iter(_jsonable({key: None})))


@dataclass(frozen=True, slots=True)
class Attachment:
    """One binary value of a result, its label, and whether it is sent."""

    value: Content
    """The value; an image's media type is the one its bytes tell, whatever it was given."""
    label: str
    """``image 1``, ``audio 2``, ``file 1 (report.pdf)``: how the text refers to it."""
    dropped: str | None = None
    """Why it is not sent, or None when it is."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """What the model receives for one tool call: text, and the values sent beside it."""

    text: str
    """The result's text, labels included, cut at the text limit."""
    attachments: tuple[Attachment, ...] = ()
    """The values sent beside the text (dropped ones are only named in it)."""


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True, slots=True)
class Server:
    """What the server takes beside text: the kinds of binary value, from its profile."""

    name: str = "OpenAI"
    """The server profile's name, for the labels."""
    takes: Collection[str] = CONTENT_KINDS
    """The kinds it takes (``ServerProfile.content_parts``): ``image``, ``audio``, ``file``."""


ANY_SERVER = Server()
"""A server that takes every kind (OpenAI's), when no profile tells."""


def _why_not(value: Content, api: Api, max_bytes: int | None, server: Server) -> str | None:
    if max_bytes is not None and value.size > max_bytes:
        return f"it is larger than the {_size(max_bytes)} limit for binary tool results"
    if isinstance(value, Audio):
        if api == "responses":
            return "the Responses API takes no audio in tool results"
        if value.media_type not in _CHAT_AUDIO_FORMATS:
            return "Chat Completions takes WAV or MP3 audio only"
    kind = type(value).__name__.lower()
    if kind not in server.takes:
        # Sent anyway, the part would fail this request and every later one of the
        # conversation, which keeps it in its history.
        return f"the {server.name} server takes no {kind} in messages (its server profile says so)"
    # Bytes that are not what they claim (a proxy's HTML error page, an SVG): the API
    # would refuse the whole request, and every later one that holds the part.
    if isinstance(value, Image) and sniff_image(value.data) is None:
        return "it is not a PNG, JPEG, GIF or WebP image, the kinds the model APIs take"
    if isinstance(value, Audio) and sniff_audio(value.data) is None and _text_like(value.data):
        return "its bytes are text, not WAV or MP3 audio"
    kind = value.media_type.partition(";")[0].strip().lower()
    if kind == "application/pdf" and b"%PDF-" not in value.data[:1024]:
        # Readers take a header anywhere in the first 1,024 bytes (after a BOM, say).
        return "its bytes are not a PDF, though its media type says so"
    return None


def _text_like(data: bytes) -> bool:
    """Whether ``data`` starts as text (an HTML error page a proxy sent): the audio
    headers are not all known here (padding before an MP3's first frame, RF64), but
    audio is never text."""
    head = data[:512]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:  # cut inside a character at 512 bytes is text too
        if exc.start < len(head) - 3:
            return False
        text = head[: exc.start].decode("utf-8")
    return bool(text) and all(char.isprintable() or char in "\t\r\n" for char in text)


class _Labeller:
    """Numbers a result's binary values by kind and decides which are sent."""

    def __init__(self, api: Api, max_bytes: int | None, tool: str, server: Server) -> None:
        self.api, self.max_bytes, self.tool, self.server = api, max_bytes, tool, server
        self.counts: dict[str, int] = {}
        self.attachments: list[Attachment] = []

    def label(self, value: Content) -> str:
        if isinstance(value, Image):
            sniffed = sniff_image(value.data)
            if sniffed is not None and sniffed != value.media_type:
                # MCP servers label PNG bytes "image/jpg" and the like; strict APIs
                # refuse the whole request over a data URL whose type is wrong.
                value = replace(value, media_type=sniffed)
        if isinstance(value, Audio):
            heard = sniff_audio(value.data)
            if heard is not None and _CHAT_AUDIO_FORMATS.get(value.media_type) != _CHAT_AUDIO_FORMATS[heard]:  # fmt: skip
                # WAV bytes labelled audio/mpeg went out as format "mp3".
                value = replace(value, media_type=heard)
        if isinstance(value, File) and scrub(value.filename) is not value.filename:
            # A name os.listdir decoded (not UTF-8): no request could carry it.
            value = replace(value, filename=scrub(value.filename))
        kind = type(value).__name__.lower()
        self.counts[kind] = number = self.counts.get(kind, 0) + 1
        name = f"{kind} {number}"
        if isinstance(value, File):
            name += f" ({value.filename})"
        described = f"{name} ({value.media_type}, {_size(value.size)})"
        dropped = _why_not(value, self.api, self.max_bytes, self.server)
        self.attachments.append(Attachment(value, name, dropped))
        if dropped is not None:
            logger.warning("tool '%s': %s was not sent: %s", self.tool, described, dropped)
            return f"[{described} was not sent: {dropped}]"
        where = "in the next user message" if self.api == "chat" else "below"
        return f"[{described} is attached {where}]"

    def replace(self, value: Any) -> Any:
        """``value`` with each binary value replaced by its label (for JSON text)."""
        if isinstance(value, CONTENT_TYPES):
            return self.label(value)
        if isinstance(value, _BINARY):
            return self.replace(_from_bytes(value))
        if isinstance(value, Mapping):
            return {key: self.replace(item) for key, item in value.items()}
        if isinstance(value, _SEQUENCES):
            return [self.replace(item) for item in value]
        if record_fields(value) is None or not _holds_binary(value):
            return value
        data = record_dump(value, _holds_binary, _converted)  # as normalise() writes it
        return self.replace(data) if _holds_binary(data) else value


def render(
    output: Any,
    *,
    api: Api,
    max_text_bytes: int | None,
    max_attachment_bytes: int | None,
    tool: str,
    server: Server = ANY_SERVER,
) -> Rendered | None:
    """The text and binary values of ``output``; None when it holds no binary value.

    A binary value alone, or a list whose items are text and binary values, reads as
    its items in order, one per line; any other structure is JSON text with each
    binary value replaced by its label. The text always encodes as UTF-8 (lone
    surrogates become U+FFFD, in a ``File``'s name too). A value of a kind ``server``
    does not take is left out, as one over the size limit is.

    Raises the ``ToolError`` of :func:`normalise` for bytes of unknown kind.
    """
    if not _holds_binary(output):
        return None
    labeller = _Labeller(api, max_attachment_bytes, tool, server)
    if isinstance(output, (*CONTENT_TYPES, *_BINARY)):
        items: Sequence[Any] = [output]
    elif isinstance(output, (list, tuple)) and any(
        isinstance(item, (*CONTENT_TYPES, *_BINARY)) for item in output
    ):
        items = output
    else:
        items = [output]
    lines: list[str] = []
    for item in items:
        if isinstance(item, _BINARY):
            item = _from_bytes(item)
        if isinstance(item, str):
            lines.append(item)
        elif isinstance(item, CONTENT_TYPES):
            lines.append(labeller.label(item))
        else:
            lines.append(result_text(labeller.replace(item)))
    # Lone surrogates (a file name os.listdir decoded) as U+FFFD, as in a result without
    # binary values (calls._render.model_text): no request could carry them.
    text = truncate_utf8(scrub("\n".join(lines)), max_text_bytes)
    return Rendered(text, tuple(labeller.attachments))


def _sent(rendered: Rendered | None) -> list[Attachment]:
    if rendered is None:
        return []
    return [a for a in rendered.attachments if a.dropped is None]


def attachments_message(
    calls: Sequence[tuple[str, str]], results: Sequence[Rendered | None]
) -> dict[str, Any] | None:
    """The user message that carries a turn's binary values on Chat Completions.

    ``calls`` are ``(call_id, tool_name)`` pairs, in the order of ``results``. None
    when no value is to be sent. It goes right after the turn's tool messages.
    """
    parts: list[dict[str, Any]] = []
    for (call_id, name), rendered in zip(calls, results, strict=True):
        for attachment in _sent(rendered):
            where = f"{attachment.label} of tool call {call_id} ({name}):"
            parts.append({"type": "text", "text": where})
            parts.append(_chat_part(attachment.value))
    if not parts:
        return None
    return {"role": "user", "content": [{"type": "text", "text": _HEADER}, *parts]}


def _chat_part(value: Content) -> dict[str, Any]:
    if isinstance(value, Image):
        return {"type": "image_url", "image_url": {"url": value.data_url}}
    if isinstance(value, Audio):
        import base64

        data = base64.b64encode(value.data).decode("ascii")
        audio_format = _CHAT_AUDIO_FORMATS[value.media_type]
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    return {"type": "file", "file": {"file_data": value.data_url, "filename": value.filename}}


def function_call_output(rendered: Rendered) -> str | list[dict[str, Any]]:
    """The ``output`` of a Responses ``function_call_output`` item: the text, or the
    text then ``input_image`` / ``input_file`` parts when values are sent."""
    sent = _sent(rendered)
    if not sent:
        return rendered.text
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": rendered.text}]
    for attachment in sent:
        value = attachment.value
        if isinstance(value, Image):
            parts.append({"type": "input_image", "image_url": value.data_url})
        elif isinstance(value, File):
            parts.append(
                {"type": "input_file", "file_data": value.data_url, "filename": value.filename}
            )
    return parts


def is_attachments_message(message: Mapping[str, Any], previous: Mapping[str, Any] | None) -> bool:
    """Whether ``message`` is the user message :func:`attachments_message` made, right
    after the tool messages it belongs with (or after another such message: a resume
    that answers more calls of the turn adds its own)."""
    if message.get("role") != "user" or previous is None:
        return False
    if previous.get("role") != "tool" and not (
        previous.get("role") == "user" and _has_header(previous)
    ):
        return False
    return _has_header(message)


def _has_header(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    if not isinstance(content, list) or not content:
        return False
    first = content[0]
    return isinstance(first, Mapping) and first.get("text") == _HEADER
