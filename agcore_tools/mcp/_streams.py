"""Session streams: a read stream that reports its own end, so a dead server is noticed
with no call in flight, and the ``async with`` support the SDK's stream protocols ask of
every stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import Context
from types import TracebackType
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from mcp.client._transport import ReadStream, TransportStreams
    from mcp.shared.message import SessionMessage

__all__ = ["ClosedOnExit", "watch_end"]


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


class _WatchedReadStream(ClosedOnExit):
    """Forwards to ``inner``; awaits ``on_end`` once when the stream ends or is closed.

    The end is reported before it is passed on, so whoever reads the stream next sees
    the connection already marked with the reason ``on_end`` found.
    """

    __slots__ = ("_end_of_stream", "_ended", "_endings", "_inner", "_on_end")

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        on_end: Callable[[], Awaitable[None]],
    ) -> None:
        import anyio

        self._inner = inner
        self._on_end = on_end
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
            return await self._inner.receive()
        except self._endings:
            await self._end()
            raise

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except self._end_of_stream:
            await self._end()
            raise StopAsyncIteration from None
        except self._endings:
            await self._end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def watch_end(
    transport: AbstractAsyncContextManager[TransportStreams],
    on_end: Callable[[], Awaitable[None]],
) -> AsyncIterator[Any]:
    """Enter ``transport`` and yield its streams, the read one reporting its end to ``on_end``."""
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_end), write_stream
