"""The transports a cassette's ``http_client`` uses (httpx2, imported on first use)."""

from __future__ import annotations

import base64
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

from ._tape_http import KEPT_HEADERS, HttpTape, decode_body, encode_body, request_entry

__all__ = ["RecordingTransport", "ReplayTransport"]


class _Tee(httpx2.AsyncByteStream):
    """A response body passed on chunk by chunk and kept, whole, once it ends."""

    def __init__(self, body: httpx2.AsyncByteStream, done: Callable[[bytes, bool], None]) -> None:
        self._body = body
        self._chunks: list[bytes] = []
        self._done: Callable[[bytes, bool], None] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._body:
            self._chunks.append(chunk)
            yield chunk
        self._finish(True)

    def _finish(self, complete: bool) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(b"".join(self._chunks), complete)

    async def aclose(self) -> None:
        self._finish(False)
        await self._body.aclose()


def _decoded(body: bytes, encoding: str) -> bytes | None:
    if encoding in ("", "identity"):
        return body
    try:
        if encoding == "gzip":
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            return zlib.decompress(body)
    except zlib.error:
        return None
    return None


class RecordingTransport(httpx2.AsyncBaseTransport):
    """Sends each request through ``inner`` and records it and its response on ``tape``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, tape: HttpTape) -> None:
        self.inner = inner
        """The real transport."""
        self.tape = tape
        """Where interactions are recorded."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        interaction: dict[str, Any] = {
            "kind": "http",
            "request": request_entry(request, body, self.tape.secrets),
        }
        self.tape.record(interaction)
        # An uncompressed answer is kept as readable JSON and events.
        request.headers["accept-encoding"] = "identity"
        response = await self.inner.handle_async_request(request)
        headers = {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers}
        encoding = response.headers.get("content-encoding", "").lower()

        def done(raw: bytes, complete: bool) -> None:
            body = _decoded(raw, encoding)
            kept: dict[str, Any] = {"status": response.status_code, "headers": headers}
            if body is None:  # an encoding this module cannot undo: keep it as it came
                kept["headers"] = {**headers, "content-encoding": encoding}
                kept["base64"] = base64.b64encode(raw).decode()
            else:
                kept.update(encode_body(headers.get("content-type", ""), body))
            if not complete:
                kept["incomplete"] = True
            interaction["response"] = kept

        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _Tee(response.stream, done)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class ReplayTransport(httpx2.AsyncBaseTransport):
    """Answers each request from ``tape``; opens no connection."""

    def __init__(self, tape: HttpTape) -> None:
        self.tape = tape
        """The recorded interactions."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = self.tape.play(request_entry(request, body, set()))
        return httpx2.Response(
            response.get("status", 200),
            headers=response.get("headers", {}),
            content=decode_body(response),
            request=request,
        )
