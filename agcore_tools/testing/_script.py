"""What a scripted server's script holds, and what it captures of each request."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..error import LlmUsageError

__all__ = [
    "CapturedRequest",
    "Pause",
    "RawResponse",
    "RawStream",
    "Reply",
    "ScriptItem",
    "described",
    "tool_call_triples",
]

_CALLS = "(name, arguments) or (name, arguments, id) tuples"


def described(value: Any) -> str:
    """``value``'s repr, cut to 60 characters, after its type's name unless it starts so."""
    text, kind = repr(value), type(value).__name__
    text = text if len(text) <= 60 else text[:57] + "..."
    return text if text.startswith(kind) else f"{kind} {text}"


def _many(value: Any) -> bool:
    """Whether ``value`` is a collection of items (not a text, a mapping or one item)."""
    return isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping)


def tool_call_triples(calls: Any, where: str) -> tuple[tuple[str, Any, str | None], ...]:
    """``calls``, given as ``(name, arguments[, id])`` tuples, as ``(name, arguments, id)``
    triples; a mistake in them raises :class:`~agcore_tools.LlmUsageError` (a
    ``TypeError``) naming it."""
    if isinstance(calls, tuple) and calls and isinstance(calls[0], str):
        raise LlmUsageError(
            f"{where} takes a list of {_CALLS}, got one tuple {calls!r:.60}: wrap it in a list"
        )
    if not _many(calls):
        raise LlmUsageError(f"{where} takes a list of {_CALLS}, got {described(calls)}")
    triples = []
    for call in calls:
        if not isinstance(call, tuple | list) or len(call) not in (2, 3):
            raise LlmUsageError(f"{where} takes {_CALLS}, got {described(call)}")
        call_id = call[2] if len(call) == 3 else None
        if not isinstance(call[0], str) or not isinstance(call_id, str | None):
            raise LlmUsageError(f"{where}: a call's name and id are strings, got {call!r:.60}")
        triples.append((call[0], call[1], call_id))
    return tuple(triples)


def _check_text(value: Any, what: str) -> None:
    if not isinstance(value, str | None):
        raise LlmUsageError(f"{what} is a str or None, got {described(value)}")


def _check_status(status: Any, what: str) -> None:
    if not isinstance(status, int) or isinstance(status, bool):
        raise LlmUsageError(f"{what} status is an int (an HTTP status), got {described(status)}")


def _check_seconds(value: Any, what: str) -> None:
    # A str or a negative number failed in the server, which dropped the connection.
    if not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0:
        raise LlmUsageError(f"{what} is a number of seconds, 0 or more, got {described(value)}")


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

    def __post_init__(self) -> None:
        _check_text(self.text, "a Reply's text")
        _check_text(self.reasoning, "a Reply's reasoning")
        _check_text(self.finish_reason, "a Reply's finish_reason")
        _check_seconds(self.delay, "a Reply's delay")
        object.__setattr__(self, "tool_calls", tool_call_triples(self.tool_calls, "Reply"))


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

    def __post_init__(self) -> None:
        _check_status(self.status, "a RawResponse's")


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

    def __post_init__(self) -> None:
        _check_seconds(self.seconds, "a Pause")


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

    def __post_init__(self) -> None:
        if not _many(self.events):
            raise LlmUsageError(
                f"RawStream takes a list of events (dicts, strings, Pause), got "
                f"{described(self.events)}: wrap one event in a list"
            )
        _check_status(self.status, "a RawStream's")


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
