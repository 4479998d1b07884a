"""Session streams: a read stream that reports its own end, so a dead server is noticed
with no call in flight; a write stream on which a courtesy cancel never holds up its
sender; the answers to ``tools/list`` vetted on their way (``_tool_vetting``); the
``serverInfo`` a ``server/discover`` answer carries outside its ``_meta``
(:class:`DiscoverAnswer`); and the ``async with`` support the SDK's stream protocols ask
of every stream."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import Context
from types import TracebackType
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from ._matching import coerce_id
from ._protocol import LOG_LEVELS, PROBE
from ._tool_vetting import ToolListVetting

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import anyio.abc
    from mcp.client._transport import ReadStream, TransportStreams, WriteStream
    from mcp.shared.message import SessionMessage


__all__ = ["CANCEL_WRITE_TIMEOUT", "ClosedOnExit", "DiscoverAnswer", "watch_end"]

logger = logging.getLogger("agcore_tools.mcp")

CANCEL_WRITE_TIMEOUT = 5.0
"""Seconds a courtesy cancel may wait, in the background, for the transport to take it
(the SDK's own bound for that write, ``_ABANDON_WRITE_TIMEOUT``)."""
_CANCELLED = "notifications/cancelled"
_LIST_TOOLS = "tools/list"


class DiscoverAnswer:
    """The ``serverInfo`` at the top level of a server's ``server/discover`` answer.

    The 2026-07-28 spec puts the server's name and version in the answer's ``_meta``
    (``io.modelcontextprotocol/serverInfo``), and the SDK reads only that; the C#
    SDK's servers send a top-level ``serverInfo``, as ``initialize`` answers have it,
    which the SDK's model drops. The write stream tells :meth:`sent` the probe's id,
    the read stream :meth:`received` what comes while it waits.

    Example:
        >>> from mcp.shared.message import SessionMessage
        >>> from mcp_types import JSONRPCResponse
        >>> answer = DiscoverAnswer()
        >>> answer.sent(1)
        >>> info = {"name": "Template MCP Server", "version": "0.0.12"}
        >>> reply = JSONRPCResponse(jsonrpc="2.0", id=1, result={"serverInfo": info})
        >>> _ = answer.received(SessionMessage(reply))
        >>> answer.server_info
        {'name': 'Template MCP Server', 'version': '0.0.12'}
    """

    __slots__ = ("_id", "server_info", "waiting")

    def __init__(self) -> None:
        self._id: Any = None
        self.waiting = False
        """True while the probe's answer has not come (read for every message)."""
        self.server_info: dict[str, Any] | None = None
        """The top-level ``serverInfo`` of the answer, if it had a valid one."""

    def sent(self, request_id: Any) -> None:
        """The probe went out with ``request_id``."""
        self._id, self.waiting = coerce_id(request_id), True

    def received(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        """``item``, read from the server, unchanged; the probe's answer is read."""
        from mcp_types import Implementation, JSONRPCError, JSONRPCResponse
        from pydantic import ValidationError

        message = getattr(item, "message", None)
        if not isinstance(message, (JSONRPCResponse, JSONRPCError)):
            return item
        if coerce_id(message.id) != self._id:
            return item
        self.waiting = False
        result = getattr(message, "result", None)
        raw = result.get("serverInfo") if isinstance(result, dict) else None
        if raw is not None:
            try:  # display-only, as the SDK reads the _meta stamp: an invalid one is none
                info = Implementation.model_validate(raw)
            except ValidationError:
                return item
            self.server_info = info.model_dump(mode="json", exclude_none=True)
        return item


class ClosedOnExit:
    """``async with`` support: the stream is closed on leaving the block."""

    __slots__ = ()

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


_LEVEL_ALIASES = {
    "warn": "warning",
    "err": "error",
    "crit": "critical",
    "fatal": "critical",
    "emerg": "emergency",
    "panic": "emergency",
    "information": "info",
    "informational": "info",
    "trace": "debug",
    "verbose": "debug",
}
"""The levels servers send outside MCP's eight, as the MCP level they mean (after
lower-casing: ``"INFO"`` is ``"info"``)."""


def mend_log_level(
    item: SessionMessage | Exception, notification: type[Any]
) -> SessionMessage | Exception:
    """``item`` (read from the server), a ``notifications/message`` whose level is
    spelt otherwise than MCP's (``"warn"``, ``"INFO"``, ``"trace"``) given the MCP
    level it means. The SDK refused such a message: the app's log got a WARNING with a
    traceback in its place (at any rate, past the 200 a second the server's messages
    are held to) and ``on_log`` nothing. ``notification``: the SDK's
    ``JSONRPCNotification``.

    Example:
        >>> from mcp.shared.message import SessionMessage
        >>> from mcp_types import JSONRPCNotification
        >>> said = JSONRPCNotification(
        ...     jsonrpc="2.0", method="notifications/message", params={"level": "WARN", "data": 1}
        ... )
        >>> mend_log_level(SessionMessage(said), JSONRPCNotification).message.params
        {'level': 'warning', 'data': 1}
    """
    if isinstance(item, Exception):
        return item
    message: Any = item.message
    if not isinstance(message, notification) or message.method != "notifications/message":
        return item
    params = message.params
    level = params.get("level") if isinstance(params, dict) else None
    if not isinstance(level, str) or level in LOG_LEVELS:
        return item
    meant = level.strip().lower()
    meant = _LEVEL_ALIASES.get(meant, meant)
    if meant not in LOG_LEVELS:
        return item  # no level it plainly means: the SDK says what is wrong
    mended = message.model_copy(update={"params": {**params, "level": meant}})
    return dataclasses.replace(item, message=mended)


class _WatchedReadStream(ClosedOnExit):
    """Forwards to ``inner``; awaits ``on_end`` once when the stream ends or is closed.
    While a ``tools/list`` request waits, what comes passes through ``vetting``; while
    the ``server/discover`` probe waits, through ``discover``.

    The end is reported before it is passed on, so whoever reads the stream next sees
    the connection already marked with the reason ``on_end`` found.
    """

    __slots__ = (
        "_discover",
        "_end_of_stream",
        "_ended",
        "_endings",
        "_inner",
        "_notification",
        "_on_end",
        "_vetting",
        "_waiting",
    )

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        on_end: Callable[[], Awaitable[None]],
        vetting: ToolListVetting | None = None,
        discover: DiscoverAnswer | None = None,
    ) -> None:
        import anyio
        from mcp_types import JSONRPCNotification

        self._notification = JSONRPCNotification
        self._discover = discover
        self._inner = inner
        self._on_end = on_end
        self._vetting = vetting
        # Read for every message: an empty dict (nothing listed) costs a test of it.
        self._waiting = vetting.waiting if vetting is not None else {}
        self._ended = False
        # Looked up once: receive() runs for every message.
        self._end_of_stream = anyio.EndOfStream
        self._endings = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)

    @property
    def last_context(self) -> Context | None:
        # The HTTP transport's stream records each message's sender context here and
        # the SDK's dispatcher reads it back; forward it.
        context: Context | None = getattr(self._inner, "last_context", None)
        return context

    async def _end(self) -> None:
        if not self._ended:
            self._ended = True
            await self._on_end()

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except self._endings:
            await self._end()
            raise
        if self._discover is not None and self._discover.waiting:
            item = self._discover.received(item)
        item = mend_log_level(item, self._notification)
        if self._waiting and self._vetting is not None:
            return await self._vetting.received(item)
        return item

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except self._end_of_stream:
            await self._end()
            raise StopAsyncIteration from None
        except self._endings:
            await self._end()
            raise
        if self._discover is not None and self._discover.waiting:
            item = self._discover.received(item)
        item = mend_log_level(item, self._notification)
        if self._waiting and self._vetting is not None:
            return await self._vetting.received(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CourteousWriteStream(ClosedOnExit):
    """Forwards to ``inner``, except that a ``notifications/cancelled`` is handed to a
    task of its own, so its sender goes on at once; tells ``vetting`` of the
    ``tools/list`` requests and of the cancels, and ``discover`` of the probe.

    The SDK writes a courtesy cancel when a request is abandoned (its caller timed out
    or was cancelled), in the caller's task and shielded from cancellation, for up to
    5 s. Over HTTP the transport takes one message at a time and POSTs a notification
    before taking the next, so behind a server that stopped answering the write waits
    those 5 s, and the caller's timeout is overrun by as much. Sent from its own task,
    the cancel still goes out (within :data:`CANCEL_WRITE_TIMEOUT`, or it is given up
    and logged), after the request it cancels, and the caller returns in time.
    """

    __slots__ = ("_discover", "_inner", "_tasks", "_vetting")

    def __init__(
        self,
        inner: WriteStream[SessionMessage],
        tasks: anyio.abc.TaskGroup,
        vetting: ToolListVetting | None = None,
        discover: DiscoverAnswer | None = None,
    ) -> None:
        self._discover = discover
        self._inner = inner
        self._tasks = tasks
        self._vetting = vetting

    async def send(self, item: SessionMessage, /) -> None:
        message: Any = item.message
        method = getattr(message, "method", None)
        if method == _CANCELLED:
            if self._vetting is not None:
                self._vetting.cancelled(message.params)
            self._tasks.start_soon(self._send_late, item)
            return
        if method == _LIST_TOOLS and self._vetting is not None and hasattr(message, "id"):
            # Before it is sent: its answer may be read before send() returns.
            self._vetting.sent(message.id)
        elif method == PROBE and self._discover is not None and hasattr(message, "id"):
            self._discover.sent(message.id)
        await self._inner.send(item)

    async def _send_late(self, item: SessionMessage) -> None:
        import anyio

        with anyio.move_on_after(CANCEL_WRITE_TIMEOUT) as scope:
            try:
                await self._inner.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                logger.debug("courtesy cancel not sent: the connection has closed")
        if scope.cancelled_caught:
            logger.debug(
                "courtesy cancel not sent within %g s: the transport is blocked",
                CANCEL_WRITE_TIMEOUT,
            )

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def watch_end(
    transport: AbstractAsyncContextManager[TransportStreams],
    on_end: Callable[[], Awaitable[None]],
    vetting: ToolListVetting | None = None,
    discover: DiscoverAnswer | None = None,
) -> AsyncIterator[Any]:
    """Enter ``transport`` and yield its streams, the read one reporting its end to
    ``on_end``, the write one sending courtesy cancels from tasks of their own (ended
    with the transport), the answers to ``tools/list`` passing through ``vetting``, the
    answer to ``server/discover`` through ``discover``."""
    import anyio

    async with transport as (read_stream, write_stream), anyio.create_task_group() as tasks:
        yield (
            _WatchedReadStream(read_stream, on_end, vetting, discover),
            _CourteousWriteStream(write_stream, tasks, vetting, discover),
        )
        tasks.cancel_scope.cancel()
