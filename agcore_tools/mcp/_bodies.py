"""Answers' bodies as the guard in ``_http`` hands them to the SDK: decoded, or cut.

httpx2 decodes a compressed body in the client, after every transport, so the guard
would see, and count, only the compressed bytes: a 300 KiB gzip body inflates to 300
MiB once there. :func:`decode_here` has it decoded in the transport instead, by httpx2's
own decoders (every coding the client asks for, a bounded piece at a time), and the
client then reads it as sent uncompressed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

__all__ = ["BodyCut", "decode_here"]


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
