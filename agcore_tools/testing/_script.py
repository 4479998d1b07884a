"""What a scripted server's script holds, and what it captures of each request."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["CapturedRequest", "Pause", "RawResponse", "RawStream", "Reply", "ScriptItem"]


@dataclass(frozen=True)
class Reply:
    """A normal assistant answer, served as JSON or SSE as the request asks.

    Example:
        >>> Reply(text="Hi").finish_reason is None  # "stop", or "tool_calls" with calls
        True
    """

    text: str | None = None
    """The assistant's text (None: ``content: null``)."""
    tool_calls: Sequence[tuple[str, Any, str | None]] = ()
    """``(name, arguments, id)`` triples; a dict is sent as JSON text, a str as is, and
    a None id gets a unique ``call_<n>``."""
    reasoning: str | None = None
    """``reasoning_content`` (DeepSeek/Qwen style), or None."""
    finish_reason: str | None = None
    """Overrides the natural ``stop``/``tool_calls``."""
    usage: Mapping[str, int] | None = None
    """The usage object; a small default when None."""
    delay: float = 0.0
    """Seconds to wait before answering (a disconnect meanwhile is recorded)."""


@dataclass(frozen=True)
class RawResponse:
    """An exact non-streamed response: status, headers and a JSON (or bytes) body.

    Example:
        >>> RawResponse(503, {"error": {"message": "busy"}}, {"Retry-After": "1"}).status
        503
    """

    status: int = 200
    """The HTTP status code."""
    body: Any = None
    """A JSON-able body, or bytes sent as they are."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers; a ``content-type`` among them replaces the default one."""


@dataclass(frozen=True)
class Pause:
    """A step of a :class:`RawStream`: wait, noticing if the client disconnects.

    Example:
        >>> slow = RawStream([": keep-alive", Pause(0.5), {"choices": []}])
        >>> slow.events[1].seconds
        0.5
    """

    seconds: float
    """How long to wait."""


@dataclass(frozen=True)
class RawStream:
    """An exact SSE response. Dicts become ``data:`` events, strings are sent as
    lines (``": keep-alive"``, ``"data: [DONE]"``), :class:`Pause` waits.

    Example:
        >>> RawStream([": keep-alive", {"choices": []}]).done
        True
    """

    events: Sequence[Mapping[str, Any] | str | Pause]
    """The events, in order."""
    done: bool = True
    """Whether to end with ``data: [DONE]``."""
    status: int = 200
    """The HTTP status code."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers; a ``content-type`` among them replaces the default one."""
    drop_connection: bool = False
    """Close the connection after the events, without ending the HTTP body: a network
    failure mid-stream, as the client sees it."""


ScriptItem: TypeAlias = (
    Reply | RawResponse | RawStream | Callable[["CapturedRequest"], "ScriptItem"]
)
"""What a script holds; a callable picks the answer per request."""


@dataclass
class CapturedRequest:
    """One request the server received.

    Example:
        >>> request = CapturedRequest(0, "POST", "/v1/chat/completions", {}, b'{"model": "m"}')
        >>> request.json, request.stream
        ({'model': 'm'}, False)
    """

    index: int
    """Its position among the server's requests, from 0."""
    method: str
    """The HTTP method."""
    path: str
    """The request path, e.g. ``/v1/chat/completions``."""
    headers: dict[str, str]
    """Headers, with lower-case names."""
    body: bytes
    """The raw body."""
    disconnected: bool = False
    """True once the client closed the connection before the response was complete."""
    completed: bool = False
    """True once the whole response was written."""
    script_error: Exception | None = None
    """What went wrong in the script answering it: the exception its function raised,
    or a ``TypeError`` for an item that cannot be served. The client got a 500 naming
    it, marked not to be retried, and no later script item was used."""

    @property
    def json(self) -> Any:
        """The body parsed as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None

    @property
    def stream(self) -> bool:
        """Whether the request asked for a stream."""
        body = self.json
        return isinstance(body, dict) and bool(body.get("stream"))
