"""Responses matched to their requests: an answer with a mismatched id is dropped.

A JSON-RPC response names its request by id, and a client must never hand one
request's answer to another: that is how results leak between calls. A response whose
id names no request of ours, or another one than the request it answers, is a protocol
violation. It is dropped, logged at WARNING, and the request it came for fails at once
with "the server answered with a mismatched id" (an error answer built here, which
:func:`mismatch_reason` recognises), instead of waiting out its timeout.

Where the request is known:

- Streamable HTTP: each request's answer comes on the response to its own POST, as
  ``application/json`` or as an SSE stream. :class:`JsonBodyCheck` and
  :class:`SseCheck` read those bytes (the guard in ``_http`` feeds them) before the
  SDK does. They must: on an SSE stream the SDK writes the POST's request id over the
  id of any response it reads, so past it a stray answer looks like the right one.
- stdio: one stream carries every answer, so the id is the only correlation.
  :class:`PendingIds` follows the requests written and the answers read. An answer
  with an id never issued is dropped; it fails the pending request, or every pending
  one when several wait (no one can tell which it answers). An answer carrying the id
  of another pending request cannot be told from an answer out of order, and is taken.
  An answer the SDK cannot read (an ``error`` without ``code``, ``"result": null``, no
  ``"jsonrpc"``) that carries a pending request's id fails that request at once with
  "got an invalid answer" (:func:`invalid_reason` recognises it), instead of being
  skipped as stray output while the request waits out its timeout. A line counts as
  an answer only if it has ``"result"`` or ``"error"``, and, without
  ``"jsonrpc": "2.0"``, no other members than an answer's: a JSON log line that merely
  has an ``"id"`` stays stray output. A line over the size limit, or nested deeper than
  the JSON parser reads, is not parsed: :meth:`PendingIds.unreadable` fails the request
  it answers at once (see ``_limits``).

Kept free of SDK and httpx imports at module level: the framing and the guard load it.
JSON is read with ``pydantic_core.from_json``, a few microseconds per answer.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pydantic_core import from_json

from .._unicode import scrub_json
from ._limits import HEAD, TAIL, answer_id, over_limit_answer, too_deep, too_large

__all__ = [
    "JsonBodyCheck",
    "PendingIds",
    "SseCheck",
    "coerce_id",
    "invalid_reason",
    "mismatch_answer",
    "mismatch_reason",
]

logger = logging.getLogger("agcore_tools.mcp")

_MARK = "agcore_tools.mismatched_id"
"""The key in the error's ``data`` that marks an answer built here."""
_INVALID = "agcore_tools.invalid_answer"
"""The key in the error's ``data`` that marks an answer standing in for an invalid one."""
_INTERNAL_ERROR = -32603  # mcp_types.INTERNAL_ERROR
_ANSWER_MEMBERS = frozenset({"jsonrpc", "id", "result", "error"})
_LONG_LIVED = frozenset({"subscriptions/listen"})
"""Requests answered only when they end: never taken as the one a stray answer is for."""


def coerce_id(value: Any) -> Any:
    """A request id as the SDK correlates it: ``"7"`` and ``7`` are one id.

    Example:
        >>> coerce_id("7"), coerce_id("a"), coerce_id(7)
        (7, 'a', 7)
    """
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


def mismatch_answer(expected: Any, answered: Any, waiting: int = 1) -> dict[str, Any]:
    """The JSON-RPC error answer, for request ``expected``, that replaces an answer
    carrying ``answered``; ``waiting`` requests were pending (stdio) when it came.

    Example:
        >>> mismatch_answer(5, 999999)["error"]["message"]
        'the server answered with a mismatched id (999999, not 5); the answer was dropped'
    """
    if waiting > 1:
        detail = (
            f"the server answered with a mismatched id ({answered!r}, which no request has, "
            f"while {waiting} requests were waiting); the answer was dropped"
        )
    else:
        detail = (
            f"the server answered with a mismatched id ({answered!r}, not {expected!r}); "
            "the answer was dropped"
        )
    return {
        "jsonrpc": "2.0",
        "id": expected,
        "error": {"code": _INTERNAL_ERROR, "message": detail, "data": {_MARK: answered}},
    }


def mismatch_reason(data: Any, message: str) -> str | None:
    """``message`` if ``data`` (an error answer's) marks an answer built here, else None."""
    if isinstance(data, dict) and _MARK in data:
        return message
    return None


def invalid_reason(data: Any, message: str) -> str | None:
    """``message`` (what is wrong with the answer) if ``data`` (an error answer's) marks
    one standing in for an invalid answer, else None.

    Example:
        >>> pending = PendingIds("MCP server 'demo'")
        >>> pending.sent(3, "tools/call")
        >>> [answer] = pending.invalid(b'{"jsonrpc": "2.0", "id": 3, "error": {"message": "x"}}')
        >>> invalid_reason(answer["error"]["data"], answer["error"]["message"])
        'its "error" has no "code"'
    """
    if isinstance(data, dict) and _INVALID in data:
        return message
    return None


def _answer_problem(message: dict[str, Any]) -> str:
    """What makes ``message``, a JSON object with an id and a ``"result"`` or an
    ``"error"``, no valid JSON-RPC answer (its values are not shown: they may hold
    anything).

    Example:
        >>> _answer_problem({"jsonrpc": "2.0", "id": 1, "result": None})
        'its "result" is null, not an object'
        >>> _answer_problem({"id": 1, "result": {}})
        'it has no "jsonrpc": "2.0"'
    """
    if message.get("jsonrpc") != "2.0":
        return 'it has no "jsonrpc": "2.0"'
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict):
            return f'its "error" is {_kind(error)}, not an object'
        code, text = error.get("code"), error.get("message")
        if code is None:
            return 'its "error" has no "code"'
        if type(code) is not int:
            return f'its "error" has a "code" that is {_kind(code)}, not an integer'
        if not isinstance(text, str):
            return f'its "error" has a "message" that is {_kind(text)}, not a string'
    elif not isinstance(message["result"], dict):
        return f'its "result" is {_kind(message["result"])}, not an object'
    return "it does not match the JSON-RPC answer schema"


def _looks_like_answer(message: dict[str, Any]) -> bool:
    """Whether ``message``, a JSON object read from stdout, is meant as a JSON-RPC answer.

    It must carry ``"result"`` or ``"error"`` (what makes an answer one) and no
    ``"method"``. Without ``"jsonrpc": "2.0"`` it must also hold nothing but the
    answer's members: a JSON logger's line often has an ``"id"`` and may have an
    ``"error"``, but also a level, a message or a time, and must stay stray output
    instead of failing the request whose id it happens to carry.

    Example:
        >>> _looks_like_answer({"id": 3, "result": None})
        True
        >>> _looks_like_answer({"level": "info", "id": 3, "msg": "handling tool call"})
        False
        >>> _looks_like_answer({"level": "error", "id": 3, "error": "disk slow"})
        False
    """
    if "method" in message or ("result" not in message and "error" not in message):
        return False
    return message.get("jsonrpc") == "2.0" or message.keys() <= _ANSWER_MEMBERS


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _violation(where: str, expected: Any, answered: Any) -> None:
    logger.warning(
        "MCP protocol violation from %s: the answer to request %r carried id %r; dropped",
        where,
        expected,
        answered,
    )


def without_lone_surrogates(payload: bytes) -> bytes | None:
    """``payload``, JSON that pydantic's parser refuses only for its lone surrogate
    escapes, with each as U+FFFD; None for any other payload.

    JavaScript's ``JSON.stringify`` of a string cut inside an emoji, and Python's
    ``json.dumps`` of a file name that is no UTF-8, write a lone ``\\udXXX`` escape. The
    SDK's strict parser refuses the whole message: a stdio answer would be taken for
    stray output (its call waiting for its timeout), an HTTP one would fail as
    malformed. The model reads such text as U+FFFD everywhere else (``_unicode.scrub``).

    Example:
        >>> without_lone_surrogates(b'{"text": "cut \\\\ud83d"}').decode()
        '{"text": "cut \ufffd"}'
        >>> without_lone_surrogates(b'{"text": "fine"}') is None
        True
    """
    if b"\\u" not in payload:
        return None
    try:
        # Decoded strictly first: json.loads(bytes) would let raw surrogate bytes
        # (no UTF-8 at all) through as well.
        value = json.loads(payload.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    scrubbed = scrub_json(value)
    if scrubbed is value:  # nothing to scrub: refused for another reason
        return None
    return json.dumps(scrubbed, ensure_ascii=False).encode("utf-8")


def _stray_id(payload: bytes, expected: Any) -> tuple[bool | None, Any, bytes | None]:
    """(True, the id, _) if ``payload`` is a JSON-RPC answer whose id is not
    ``expected``; (None, None, None) if it is nested too deeply to parse. The third item
    is the payload to pass on in its place: itself with its lone surrogates as U+FFFD
    when only they kept it from parsing (see :func:`without_lone_surrogates`), else
    None."""
    try:
        message = from_json(payload)  # pydantic's parser: several times json.loads' speed
    except ValueError as exc:
        # Too deep: the SDK's parser would say "malformed".
        if "recursion limit" in str(exc):
            return None, None, None
        fixed = without_lone_surrogates(payload)
        if fixed is None:
            return False, None, None  # not JSON: the SDK reports it
        stray, answered, _ = _stray_id(fixed, expected)
        return stray, answered, fixed
    if not isinstance(message, dict) or "method" in message:
        return False, None, None  # a request or notification from the server, or a batch
    if "result" not in message and "error" not in message:
        return False, None, None
    answered = message.get("id")
    if answered is None and "error" in message:
        return False, None, None  # "could not read your request": JSON-RPC's id null
    if coerce_id(answered) == coerce_id(expected):
        return False, None, None
    return True, answered, None


def _stand_in(where: str, expected: Any, problem: tuple[str, str]) -> bytes:
    """The error answer to request ``expected`` that stands in for one with ``problem``."""
    logger.warning(
        "%s: the answer to request %r %s; dropped, the request fails", where, expected, problem[0]
    )
    return json.dumps(over_limit_answer(expected, problem)).encode()


class JsonBodyCheck:
    """The ``application/json`` answer to one POSTed request, checked once it is whole,
    or, once it passes ``limit`` bytes, replaced by an error answer at once (``done``:
    the rest is not to be read)."""

    __slots__ = ("_chunks", "_expected", "_limit", "_size", "_where", "done")

    def __init__(self, expected: Any, where: str, limit: int | None = None) -> None:
        self._expected = expected
        self._where = where
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self.done = False
        """Whether what was passed on stands for the whole body."""

    def feed(self, chunk: bytes) -> bytes:
        """Keep ``chunk``; nothing is passed on before the end, unless the body is over
        the limit: then the error answer that stands for it.

        Example:
            >>> check = JsonBodyCheck(5, "test", limit=16)
            >>> check.feed(b'{"jsonrpc": "2.0", "id": 5, '), check.done
            (b'{"jsonrpc": "2.0", "id": 5, "error": {"code": -32603, "message": "the answer exceeded the 16 byte limit, so it was dropped; StreamableHttpTransport(max_message_size=...) raises the limit", "data": {"agcore_tools.answer_over_limit": true}}}', True)
        """
        self._size += len(chunk)
        if self._limit is not None and self._size > self._limit:
            self._chunks.clear()
            self.done = True
            problem = too_large(self._limit, "StreamableHttpTransport")
            return _stand_in(self._where, self._expected, problem)
        self._chunks.append(chunk)
        return b""

    def end(self) -> bytes:
        """The body, or an error answer in its place if it answers another id (or is
        nested too deeply to read)."""
        body = b"".join(self._chunks)
        stray, answered, fixed = _stray_id(body, self._expected)
        body = body if fixed is None else fixed
        if stray is None:
            return _stand_in(self._where, self._expected, too_deep())
        if not stray:
            return body
        _violation(self._where, self._expected, answered)
        return json.dumps(mismatch_answer(self._expected, answered)).encode()


# A blank line ends an SSE event; a line ends with CRLF, LF or CR (a CR at the end of
# what has arrived may be the first half of a CRLF, which is harmless here: the event
# before it is complete either way, and the bytes are passed on unchanged).
_EVENT_END = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")
_LINE = re.compile(rb"\r\n|\r|\n")


class SseCheck:
    """The SSE answer to one POSTed request, passed on an event at a time: an answer
    event carrying another id is replaced by an error answer for the request."""

    __slots__ = ("_buffer", "_expected", "_limit", "_scanned", "_unchecked", "_where")

    done = False
    """Never: the SDK reads every event of the stream."""

    def __init__(self, expected: Any, where: str, limit: int | None = None) -> None:
        self._expected = expected
        self._where = where
        self._limit = limit
        """The most bytes of one event held back: past it, the rest passes unchecked,
        and the SDK's own limit on an event's size (the same) fails the stream."""
        self._buffer = bytearray()
        self._scanned = 0
        self._unchecked = False

    def feed(self, chunk: bytes) -> bytes:
        """What can be passed on now: the complete events (checked) among what arrived."""
        if self._unchecked:
            return chunk
        buffer = self._buffer
        buffer += chunk
        out: list[bytes] = []
        start = 0
        # Search only what was not searched before (less the 3 bytes a split end spans),
        # so a 20 MiB event arriving in 64 KiB chunks is scanned once, not 320 times.
        position = max(0, self._scanned - 3)
        while (found := _EVENT_END.search(buffer, position)) is not None:
            end = found.end()
            out.append(self._checked(bytes(buffer[start:end])))
            start = position = end
        del buffer[:start]
        self._scanned = len(buffer)
        if self._limit is not None and len(buffer) > self._limit:
            self._unchecked = True
            out.append(bytes(buffer))
            buffer.clear()
        return b"".join(out)

    def end(self) -> bytes:
        """The rest: an event the stream ended in the middle of (the SDK's to judge)."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest

    def _checked(self, event: bytes) -> bytes:
        kind = b"message"
        data: list[bytes] = []
        for line in _LINE.split(event):
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                kind = value
        if kind != b"message" or not data:
            return event
        payload = b"\n".join(data)
        stray, answered, fixed = _stray_id(payload, self._expected)
        if fixed is not None:
            payload, event = fixed, _with_data(event, fixed)
        if stray is None and answer_id(payload[:HEAD], payload[-TAIL:])[0] == "answer":
            answer = _stand_in(self._where, self._expected, too_deep()).decode()
            return f"event: message\ndata: {answer}\n\n".encode()
        if not stray:
            return event
        _violation(self._where, self._expected, answered)
        answer = json.dumps(mismatch_answer(self._expected, answered))
        return f"event: message\ndata: {answer}\n\n".encode()


def _with_data(event: bytes, data: bytes) -> bytes:
    """SSE ``event`` with ``data`` in place of its data lines; its other fields (``id``,
    ``retry``: the SDK resumes a dropped stream from them) kept."""
    fields = [line for line in _LINE.split(event) if line and not line.startswith(b"data")]
    return b"\n".join([*fields, b"data: " + data]) + b"\n\n"


class PendingIds:
    """The requests written to a stdio server and not yet answered (see module docs)."""

    __slots__ = ("_methods", "_newest", "_own", "_where")

    def __init__(self, where: str) -> None:
        self._where = where
        self._methods: dict[Any, str] = {}
        self._newest = -1
        """The highest integer id issued: the SDK counts up from 0."""
        self._own: set[Any] = set()
        """Requests the framing wrote itself (a few pings), whose answers no one awaits."""

    def sent(self, request_id: Any, method: str) -> None:
        """A request was written."""
        key = coerce_id(request_id)
        self._methods[key] = method
        if isinstance(key, int) and key > self._newest:
            self._newest = key

    def waiting(self) -> list[str]:
        """The methods of the requests written and not answered (nor given up), oldest first.

        Example:
            >>> pending = PendingIds("MCP server 'demo'")
            >>> pending.sent(0, "server/discover")
            >>> pending.waiting()
            ['server/discover']
        """
        return list(self._methods.values())

    def own(self, request_id: Any) -> None:
        """The framing wrote a request of its own: its answer is dropped, not passed on.

        Example:
            >>> pending = PendingIds("MCP server 'demo'")
            >>> pending.own("agcore-nudge-1")
            >>> pending.answered("agcore-nudge-1"), pending.waiting()
            ([], [])
            >>> pending.answered("agcore-nudge-1")  # answered twice: still no one's
            []
        """
        self._own.add(coerce_id(request_id))

    def cancelled(self, request_id: Any) -> None:
        """The client gave the request up: its answer, if one comes, is late, not stray."""
        self._methods.pop(coerce_id(request_id), None)

    def answered(self, request_id: Any) -> list[dict[str, Any]] | None:
        """An answer carrying ``request_id`` was read: None to pass it on, else the error
        answers to deliver in its place (none when no request waits)."""
        key = coerce_id(request_id)
        if self._methods.pop(key, None) is not None:
            return None
        if key in self._own:
            # Kept: a second answer to it would otherwise fail the requests waiting.
            return []
        if key is None or (isinstance(key, int) and 0 <= key <= self._newest):
            return None  # a late answer, to a request the client stopped waiting for
        waiting = [k for k, method in self._methods.items() if method not in _LONG_LIVED]
        logger.warning(
            "MCP protocol violation from %s: an answer carried id %r, which no request has "
            "(%d waiting); dropped",
            self._where,
            request_id,
            len(waiting),
        )
        for k in waiting:
            del self._methods[k]
        return [mismatch_answer(k, request_id, len(waiting)) for k in waiting]

    def invalid(self, line: bytes) -> list[dict[str, Any]] | None:
        """A line that is no valid JSON-RPC message: if it is an answer carrying a pending
        request's id, the error answer that fails that request at once; if it is nested
        too deeply to parse, what :meth:`unreadable` makes of it; else None (stray
        output, to be skipped)."""
        try:
            message = from_json(line)
        except ValueError as exc:
            if "recursion limit" not in str(exc):
                return None
            return self.unreadable(line[:HEAD], line[-TAIL:], too_deep())
        if not isinstance(message, dict) or not _looks_like_answer(message):
            return None  # stray output, such as a JSON log line that has an "id" field
        request_id = message.get("id")
        if type(request_id) not in (int, str):
            return None  # no id, or one that no request of the SDK's (integers) has
        key = coerce_id(request_id)
        if key in self._own:
            return []  # the framing's own ping: nobody awaits it
        method = self._methods.pop(key, None)
        if method is None:
            return None  # a late answer to a request given up, or no answer of ours
        problem = _answer_problem(message)
        logger.warning(
            "MCP protocol violation from %s: the answer to request %r (%s) is not valid "
            "JSON-RPC (%s); the request fails",
            self._where,
            request_id,
            method,
            problem,
        )
        return [
            {
                "jsonrpc": "2.0",
                "id": key,
                "error": {"code": _INTERNAL_ERROR, "message": problem, "data": {_INVALID: True}},
            }
        ]

    def unreadable(
        self, head: bytes, tail: bytes | None, problem: tuple[str, str]
    ) -> list[dict[str, Any]] | None:
        """A line that cannot be parsed for ``problem`` (see ``_limits``), of which
        ``head`` is the start and ``tail`` the end (None: not read yet): the error
        answers that fail at once the request it answers (every waiting one when its
        id is not found, as for an unknown id), none for a line that answers none, or
        None while that cannot be told before its end.

        Example:
            >>> from ._limits import too_large
            >>> pending = PendingIds("MCP server 'demo'")
            >>> pending.sent(3, "tools/call")
            >>> head = b'{"jsonrpc": "2.0", "id": 3, "result": {"content": [{"text": "xxxx'
            >>> [answer] = pending.unreadable(head, None, too_large(1024, "StdioTransport"))
            >>> answer["id"], answer["error"]["message"][:40], pending.waiting()
            (3, 'the answer exceeded the 1024 byte limit,', [])
        """
        kind, answered = answer_id(head, tail)
        what = problem[0]
        if kind == "other":
            logger.warning("%s wrote a message that %s to stdout; dropped", self._where, what)
            return []
        if kind == "unknown":
            if tail is None:
                return None
            waiting = [k for k, method in self._methods.items() if method not in _LONG_LIVED]
            logger.warning(
                "%s wrote an answer that %s, with no id found in it, to stdout; dropped, "
                "and the %d requests waiting fail",
                self._where,
                what,
                len(waiting),
            )
            for k in waiting:
                del self._methods[k]
            return [over_limit_answer(k, problem) for k in waiting]
        key = coerce_id(answered)
        method = self._methods.pop(key, None) if type(answered) in (int, str) else None
        if method is None:
            logger.warning(
                "%s wrote an answer that %s, for request %r, which none waits for; dropped",
                self._where,
                what,
                answered,
            )
            return []
        logger.warning(
            "%s: the answer to request %r (%s) %s; dropped, the request fails",
            self._where,
            answered,
            method,
            what,
        )
        return [over_limit_answer(key, problem)]
