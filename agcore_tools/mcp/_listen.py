"""The Streamable HTTP GET stream of a 2025-11-25 session, kept open by the client.

The server sends its notifications (``notifications/tools/list_changed`` among them)
and requests on this stream. The SDK opens it after the handshake and opens it again
when it ends, but gives up after two failures in a row (a proxy cutting it, a server
restarting), logging that at DEBUG only: the client stays connected, and tool list
changes are lost from then on.

:class:`ListenStream` sits in the HTTP guard (``_http``), below the SDK, and sees every
GET to the endpoint:

- a stream cut off (a network error in its body) is ended for the SDK as a server would
  end it, after it is reported lost: the SDK then opens it again at once, never giving up;
- once a stream was lost, a GET that fails (the server unreachable, or answering 429 or
  5xx) is sent again by the guard itself after a pause, 0.5 s doubling up to 30 s, until
  it opens or the connection ends;
- ``on_event`` hears ``"open"``, ``"lost"`` (with the reason), ``"ended"`` (the server
  ended it) and ``"none"`` (the server offers no GET stream, HTTP 405).

The SDK also sends a GET to resume a request's own SSE stream (its ``Last-Event-ID``
names an event of that stream) and gives that up after two failures, failing the
request. That GET is not the listen stream's (:meth:`ListenStream.owns`): kept coming
back, it held a call to a dead server for its whole timeout.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2

__all__ = ["REOPEN_DELAYS", "ListenStream", "StreamEvent"]

logger = logging.getLogger("agcore_tools.mcp")

REOPEN_DELAYS = (0.5, 30.0)
"""First and longest pause before sending a failed GET again, once a stream was lost."""

StreamEvent = Callable[[str, "str | None"], None]
"""Hears what becomes of the stream: the event (see the module docs) and its reason."""


class ListenStream:
    """Keeps the GET stream of one connection coming back (see the module docs)."""

    def __init__(self, on_event: StreamEvent, given_up: Callable[[], bool]) -> None:
        self._on_event = on_event
        self._given_up = given_up
        self._lost = False
        self._ids: deque[str] = deque(maxlen=_KEPT_IDS)

    def owns(self, request: httpx2.Request) -> bool:
        """Whether a GET opens the listen stream: it resumes no event, or one this
        stream carried (not one of a request's own stream)."""
        last = request.headers.get("last-event-id")
        return last is None or last in self._ids

    async def send(
        self,
        request: httpx2.Request,
        send: Callable[[httpx2.Request], Awaitable[httpx2.Response]],
        describe: Callable[[BaseException], str],
    ) -> httpx2.Response:
        """Send the SDK's GET, again after a pause while it fails once a stream was lost."""
        delay = REOPEN_DELAYS[0]
        while True:
            if self._given_up():
                raise httpx2.ConnectError("the client gave this connection up", request=request)
            try:
                response = await send(request)
            except httpx2.TransportError as exc:
                if not self._lost:
                    raise
                reason = describe(exc)
            else:
                status = response.status_code
                if status == 200:
                    self._lost = False
                    self._on_event("open", None)
                    if isinstance(response.stream, httpx2.AsyncByteStream):
                        response.stream = _Body(
                            response.stream, self._ended, describe, self._ids.append
                        )
                    return response
                if status == 405:
                    self._on_event("none", "the server offers no GET stream (HTTP 405)")
                    return response
                if not self._lost or (status < 500 and status != 429):
                    return response
                await response.aclose()
                reason = f"HTTP {status} {response.reason_phrase}"
            logger.debug("GET stream not reopened (%s); trying again in %g s", reason, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, REOPEN_DELAYS[1])

    def _ended(self, reason: str | None) -> None:
        self._lost = True
        self._on_event("lost" if reason is not None else "ended", reason)


_KEPT_IDS = 64
"""Event ids of the listen stream remembered, to know its reconnecting GET by them."""

_LINE_END = re.compile(rb"\r\n|\r|\n")


class _Body(httpx2.AsyncByteStream):
    """The body of a GET stream: a network error ends it (reported) instead of failing
    the SDK's reader, whose reconnection would give up after two of them. The event ids
    it carries are noted (``seen``)."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        ended: Callable[[str | None], None],
        describe: Callable[[BaseException], str],
        seen: Callable[[str], None],
    ) -> None:
        self._inner = inner
        self._ended = ended
        self._describe = describe
        self._seen = seen
        self._partial = b""

    def _note_ids(self, chunk: bytes) -> None:
        *lines, partial = _LINE_END.split(self._partial + chunk)
        for line in lines:
            if line.startswith(b"id:"):
                value = line[4:] if line.startswith(b"id: ") else line[3:]
                self._seen(value.decode("utf-8", "replace"))
        # Only the start of a line that may be an id is kept, never a long data line.
        self._partial = partial if len(partial) < 256 and b"id:".startswith(partial[:3]) else b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                self._note_ids(chunk)
                yield chunk
        except httpx2.TransportError as exc:
            self._ended(self._describe(exc))
            return
        self._ended(None)

    async def aclose(self) -> None:
        await self._inner.aclose()
