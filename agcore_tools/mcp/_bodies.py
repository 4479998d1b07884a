"""Answers' bodies as the guard in ``_http`` hands them to the SDK: decoded, cut, with
their start read ahead (:func:`peek`, for an error's reason), or due by a deadline
(:func:`due_by`).

httpx2 decodes a compressed body in the client, after every transport, so the guard
would see, and count, only the compressed bytes: a 300 KiB gzip body inflates to 300
MiB once there. :func:`decode_here` has it decoded in the transport instead, by httpx2's
own decoders (every coding the client asks for, a bounded piece at a time), and the
client then reads it as sent uncompressed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2

from .._aio import with_timeout

__all__ = ["BodyCut", "decode_here", "due_by", "peek"]


class BodyCut:
    """A failed answer's body, cut after ``limit`` bytes, for ``_http._Checked``: its
    status is the error, and a body past the limit adds nothing but memory.

    Example:
        >>> cut = BodyCut(5)
        >>> cut.feed(b"abc"), cut.done, cut.feed(b"defg"), cut.done
        (b'abc', False, b'de', True)
    """

    __slots__ = ("_left", "done")

    def __init__(self, limit: int) -> None:
        self._left = limit
        self.done = False
        """Whether the limit is reached: the rest is not read."""

    def feed(self, chunk: bytes) -> bytes:
        """What of ``chunk`` is within the limit."""
        passed = chunk[: self._left]
        self._left -= len(passed)
        self.done = self._left <= 0
        return passed

    def end(self) -> bytes:
        """Nothing: what came was passed on as it came."""
        return b""


class _Decoded(httpx2.AsyncByteStream):
    """The body of ``raw``, a response over a compressed stream, decoded as it is read."""

    def __init__(self, raw: httpx2.Response) -> None:
        self._raw = raw

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._raw.aiter_bytes():
            yield piece

    async def aclose(self) -> None:
        await self._raw.aclose()


def decode_here(request: httpx2.Request, response: httpx2.Response) -> None:
    """Have ``response``'s body, if compressed, decoded as it is read from its stream:
    the client then takes it as sent uncompressed (without ``Content-Encoding``)."""
    if response.headers.get("content-encoding", "identity").strip().lower() == "identity":
        return
    stream = response.stream
    if not isinstance(stream, httpx2.AsyncByteStream):
        return
    raw = httpx2.Response(
        response.status_code, headers=response.headers, stream=stream, request=request
    )
    response.stream = _Decoded(raw)
    del response.headers["content-encoding"]
    response.headers.pop("content-length", None)


class _Replayed(httpx2.AsyncByteStream):
    """A body whose first chunks were read already: those, then the rest."""

    def __init__(
        self, read: list[bytes], rest: AsyncIterator[bytes] | None, inner: httpx2.AsyncByteStream
    ) -> None:
        self._read = read
        self._rest = rest
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._read:
            yield chunk
        if self._rest is not None:
            async for chunk in self._rest:
                yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


async def peek(response: httpx2.Response, size: int, wait: float) -> bytes:
    """The first ``size`` bytes (or so) of the body, or what came of them within
    ``wait`` seconds. The SDK then reads the body whole, or, when it was late, only
    what came: it reads a JSON error body to its end, which would wait for the rest."""
    stream = response.stream
    if not isinstance(stream, httpx2.AsyncByteStream):
        return b""
    if response.headers.get("content-encoding", "identity") != "identity":
        return b""  # compressed (not an MCP POST's answer): the client decodes it
    read: list[bytes] = []
    chunks = aiter(stream)
    rest: AsyncIterator[bytes] | None = chunks
    try:
        if await with_timeout(_read_into(read, chunks, size), wait):
            rest = None
    except TimeoutError:
        # Cut there: closing the response (the SDK does) drops its connection.
        rest = None
    finally:
        response.stream = _Replayed(read, rest, stream)
    return b"".join(read)[:size]


async def _read_into(read: list[bytes], chunks: AsyncIterator[bytes], size: int) -> bool:
    """Append chunks to ``read`` until it holds ``size`` bytes; True if the body ended
    first (or broke, which the SDK would have met too)."""
    try:
        while sum(map(len, read)) < size:
            read.append(await anext(chunks))
    except (StopAsyncIteration, httpx2.TransportError):
        return True
    return False


class _Due(httpx2.AsyncByteStream):
    """A body that must have come whole by ``deadline`` (the event loop's clock)."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, deadline: float, request: httpx2.Request, late: str
    ) -> None:
        self._inner = inner
        self._deadline = deadline
        self._request = request
        self._late = late

    async def __aiter__(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        chunks = aiter(self._inner)
        while True:
            left = max(0.0, self._deadline - loop.time())
            try:
                chunk = await with_timeout(anext(chunks), left)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                # Not read on: closing the response (the SDK does) drops its connection.
                raise httpx2.ReadTimeout(self._late, request=self._request) from exc
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def due_by(request: httpx2.Request, response: httpx2.Response, deadline: float, late: str) -> None:
    """Have ``response``'s body fail with ``httpx2.ReadTimeout`` (saying ``late``) when
    it has not come whole by ``deadline`` (``loop.time()``). httpx2's own read timeout
    bounds each wait for a chunk, not the body: a server that sends its headers and
    then holds the body, or sends it a byte at a time, would hold its reader for as
    long as it likes."""
    stream = response.stream
    if isinstance(stream, httpx2.AsyncByteStream):
        response.stream = _Due(stream, deadline, request, late)
