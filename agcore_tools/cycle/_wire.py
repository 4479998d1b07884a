"""Opening and closing the model's HTTP stream, reading its chunks as plain dicts.

The SDK turns every streamed chunk into pydantic models (a ``ChatCompletionChunk``, its
choices, its delta and each tool call delta) that the loop would read a few fields of
once and drop: that construction is most of what a streamed turn costs the client
beyond the transport. So the loop asks the SDK for the same stream with the chunks
left as the dicts the JSON decoder made (``with_raw_response``, then
``parse(to=AsyncStream[object])``, both public SDK API). The SDK still sends the
request, decodes the SSE, raises ``APIError`` for an error event and reads the
connection to its end at ``[DONE]``; :class:`~agcore_tools.cycle._stream.TurnBuilder`
reads dicts and SDK objects alike.
"""

from __future__ import annotations

import logging
from typing import Any

from .._aio import with_timeout
from ..error import LlmError

__all__ = ["close_stream", "open_stream"]

logger = logging.getLogger("agcore_tools.cycle")

CLOSE_TIMEOUT = 5.0
"""Seconds allowed for closing an abandoned HTTP stream."""

_EVENT_STREAM = "text/event-stream"
_SNIPPET = 100  # characters of an unexpected body quoted in an error


async def open_stream(completions: Any, params: dict[str, Any]) -> tuple[Any, Any]:
    """Send a streamed request through ``completions`` (the SDK's ``chat.completions``);
    return the stream of chunk dicts and its first chunk (None for an empty stream).

    The first chunk is read here so that a failure before it (a status error, a
    connection reset) is one the caller's retry policy can still retry.
    """
    from openai import AsyncStream

    raw = await completions.with_raw_response.create(**params)
    content_type = raw.headers.get("content-type", "")
    sse = _EVENT_STREAM in content_type.lower()
    if not sse:
        # Read whole, so that it can be quoted if no event parses out of it (the SSE
        # decoder would read it all anyway, and iterates the kept bytes the same).
        await raw.http_response.aread()
    response = raw.parse(to=AsyncStream[object])
    try:
        first = await response.__anext__()
    except StopAsyncIteration:
        if sse:
            return response, None
        await close_stream(response)
        # Not an empty stream (which llama-cpp-python's refusal of a streamed "auto"
        # tool choice is): an HTML error or login page, or a body of another API.
        raise LlmError(
            f"the model's response is not an event stream: the server answered "
            f"{content_type or 'without a content type'}, starting "
            f"{raw.http_response.text[:_SNIPPET]!r}"
        ) from None
    except BaseException:
        await close_stream(response)
        raise
    return response, first


async def close_stream(response: Any) -> None:
    """Close ``response`` (dropping its HTTP connection if unread), within a bound."""
    try:
        await with_timeout(response.close(), CLOSE_TIMEOUT)
    except TimeoutError:
        logger.warning("closing the model's HTTP stream took over %.0f s; gave up", CLOSE_TIMEOUT)
