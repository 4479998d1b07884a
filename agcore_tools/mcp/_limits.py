"""Answers the client cannot take: larger than ``max_message_size``, or nested deeper
than the JSON parser reads.

Such an answer is not parsed, so its id is not known the usual way. Over stdio one line
carries each message and the client must tell which waiting request it answers from
what it has read of it: :func:`answer_id` looks for its top-level ``"id"`` among the
plain members at the start of the line (``{"jsonrpc": "2.0", "id": 3, "result": ...``,
as SDKs write them) or, once the line has ended, at its end (``..., "id": 3}``, as
the JSON-RPC specification's examples do). Over HTTP the answer to a POST is for the
request POSTed. The request then fails at once with an error answer built here, which
:func:`over_limit_reason` recognises: a recoverable error, since the server is fine and
only this answer could not be taken.

Kept free of SDK and httpx imports: the framing and the guard load it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

__all__ = [
    "HEAD",
    "JSON_DEPTH",
    "TAIL",
    "answer_id",
    "over_limit_answer",
    "over_limit_reason",
    "too_deep",
    "too_large",
]

JSON_DEPTH = 201
"""The deepest nesting of arrays and objects that pydantic-core's JSON parser (the
SDK's, and this library's) reads.

Example:
    >>> from pydantic_core import from_json
    >>> len(str(from_json("[" * JSON_DEPTH + "]" * JSON_DEPTH)))
    403
    >>> from_json("[" * (JSON_DEPTH + 1) + "]" * (JSON_DEPTH + 1))
    Traceback (most recent call last):
    ...
    ValueError: recursion limit exceeded at line 1 column 202
"""
HEAD = 4096
"""Bytes of the start of a line that cannot be parsed searched for its id."""
TAIL = 512
"""Bytes of its end searched for it."""

_OVER_LIMIT = "agcore_tools.answer_over_limit"
"""The key in the error's ``data`` that marks an answer standing in for one over a limit."""
_INTERNAL_ERROR = -32603  # mcp_types.INTERNAL_ERROR

_STRING = rb'"(?:[^"\\]|\\.)*"'
_SCALAR = rb"(?:" + _STRING + rb"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)"
_OPEN = re.compile(rb"\s*\{")
_PLAIN_MEMBER = re.compile(rb"\s*(" + _STRING + rb")\s*:\s*(" + _SCALAR + rb")\s*,")
_NESTED_MEMBER = re.compile(rb"\s*(" + _STRING + rb")\s*:\s*[\[{]")
# The id as the last member, or before a last "jsonrpc": the closing brace that ends
# the line closes the object it is a member of, so it is a top-level member.
_LAST_ID = re.compile(
    rb'[{,]\s*"id"\s*:\s*(-?\d+|' + _STRING + rb')\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z'
)


def too_large(limit: int, setting: str) -> tuple[str, str]:
    """What is wrong with an answer over ``limit`` bytes, and the fix (``setting`` is
    the transport's class name), for :func:`over_limit_answer`.

    Example:
        >>> too_large(1024, "StdioTransport")
        ('exceeded the 1024 byte limit', '; StdioTransport(max_message_size=...) raises the limit')
    """
    return (
        f"exceeded the {limit} byte limit",
        f"; {setting}(max_message_size=...) raises the limit",
    )


def too_deep() -> tuple[str, str]:
    """What is wrong with an answer nested deeper than :data:`JSON_DEPTH` levels (no
    setting changes it), for :func:`over_limit_answer`."""
    return f"is nested deeper than {JSON_DEPTH} levels, which the JSON parser does not read", ""


def over_limit_answer(request_id: Any, problem: tuple[str, str]) -> dict[str, Any]:
    """The JSON-RPC error answer, for request ``request_id``, that stands in for an
    answer with ``problem`` (from :func:`too_large` or :func:`too_deep`).

    Example:
        >>> answer = over_limit_answer(3, too_large(1024, "StdioTransport"))
        >>> over_limit_reason(answer["error"]["data"], answer["error"]["message"])
        'the answer exceeded the 1024 byte limit, so it was dropped; StdioTransport(max_message_size=...) raises the limit'
    """
    what, fix = problem
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": _INTERNAL_ERROR,
            "message": f"the answer {what}, so it was dropped{fix}",
            "data": {_OVER_LIMIT: True},
        },
    }


def over_limit_reason(data: Any, message: str) -> str | None:
    """``message`` if ``data`` (an error answer's) marks one of :func:`over_limit_answer`,
    else None."""
    if isinstance(data, dict) and _OVER_LIMIT in data:
        return message
    return None


def answer_id(head: bytes, tail: bytes | None) -> tuple[Literal["answer", "other", "unknown"], Any]:
    """What a line that cannot be parsed is, from ``head``, its start, and ``tail``, its
    end (None while it has not come): ``("answer", id)``; ``("unknown", None)``, an
    answer whose id is not found, or is not JSON; or ``("other", None)``, no answer.

    An answer's ``"result"`` or ``"error"`` is an object, and that object is what makes
    a line long or deep: so only the plain members before the first nested one are
    read at the start, and that nested one must be the ``"result"`` or ``"error"``
    (a ``"method"``, or ``"params"``, or a log line's long text make no answer). At the
    end, only the last plain members are read: nothing nested is taken for the
    answer's own id.

    Example:
        >>> answer_id(b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"id": 1', None)
        ('answer', 7)
        >>> answer_id(b'{"jsonrpc": "2.0", "result": {"items": [{"id": 1', None)
        ('unknown', None)
        >>> answer_id(b'{"jsonrpc": "2.0", "result": {"items": [{"id": 1', b'}]}, "id": "a7"}\\n')
        ('answer', 'a7')
        >>> answer_id(b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {', None)
        ('other', None)
        >>> answer_id(b'{"level": "info", "id": 7, "msg": "xxxxxxxx', None)
        ('other', None)
        >>> answer_id(b'{"jsonrpc": "2.0", "id": 007, "result": {"content": [{"id": 1', b"}]}}")
        ('unknown', None)
    """
    opened = _OPEN.match(head)
    if opened is None:
        return "other", None  # not a JSON object: stray output
    plain: dict[bytes, bytes] = {}
    position = opened.end()
    while (member := _PLAIN_MEMBER.match(head, position)) is not None:
        plain[member.group(1)] = member.group(2)
        position = member.end()
    nested = _NESTED_MEMBER.match(head, position)
    first = nested.group(1) if nested is not None else None
    if b'"method"' in plain or first not in (b'"result"', b'"error"'):
        return "other", None
    found = plain.get(b'"id"')
    if found is None and tail is not None and (last := _LAST_ID.search(tail)) is not None:
        found = last.group(1)
    if found is None:
        return "unknown", None
    try:
        return "answer", json.loads(found)
    except ValueError:
        # The patterns take what only looks like JSON (007, "\q"): no request has
        # such an id, and the reader must go on; so it is an id not found.
        return "unknown", None
