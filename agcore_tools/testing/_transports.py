"""The transports a cassette's ``http_client`` uses (httpx2, imported on first use)."""

from __future__ import annotations

import base64
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

from ..error import CassetteError
from ._tape_http import KEPT_HEADERS, HttpTape, decode_body, encode_body, request_entry

__all__ = ["RecordingTransport", "ReplayTransport"]


def _error_name(exc: httpx2.TransportError) -> str:
    """The name of the nearest httpx2 class of ``exc``, which a replay raises again."""
    for kind in type(exc).__mro__:
        if getattr(httpx2, kind.__name__, None) is kind:
            return str(kind.__name__)
    return "TransportError"


def _replayed_error(name: str, request: httpx2.Request) -> httpx2.TransportError:
    kind = getattr(httpx2, name, None)
    if not (isinstance(kind, type) and issubclass(kind, httpx2.TransportError)):
        raise CassetteError(f"the cassette records an unknown transport error {name!r}")
    return kind(f"{name} (replayed from the cassette)", request=request)


class _Tee(httpx2.AsyncByteStream):
    """A response body passed on chunk by chunk and kept, whole, once it ends."""

    def __init__(
        self, body: httpx2.AsyncByteStream, done: Callable[[bytes, bool, str | None], None]
    ) -> None:
        self._body = body
        self._chunks: list[bytes] = []
        self._done: Callable[[bytes, bool, str | None], None] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._body:
                self._chunks.append(chunk)
                yield chunk
        except httpx2.TransportError as exc:  # the connection dropped mid-body
            self._finish(False, _error_name(exc))
            raise
        self._finish(True)

    def _finish(self, complete: bool, error: str | None = None) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(b"".join(self._chunks), complete, error)

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
        try:
            response = await self.inner.handle_async_request(request)
        except httpx2.TransportError as exc:  # a timeout, a refused connection: replayed too
            interaction["response"] = {"error": _error_name(exc)}
            raise
        headers = {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers}
        encoding = response.headers.get("content-encoding", "").lower()

        def done(raw: bytes, complete: bool, error: str | None) -> None:
            body = _decoded(raw, encoding)
            kept: dict[str, Any] = {"status": response.status_code, "headers": headers}
            if body is None:  # an encoding this module cannot undo: keep it as it came
                kept["headers"] = {**headers, "content-encoding": encoding}
                kept["base64"] = base64.b64encode(raw).decode()
            else:
                kept.update(encode_body(headers.get("content-type", ""), body))
            if not complete:
                kept["incomplete"] = True
            if error is not None:
                kept["error"] = error
            interaction["response"] = kept

        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _Tee(response.stream, done)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Cut(httpx2.AsyncByteStream):
    """A body that ends with the error that cut it when it was recorded."""

    def __init__(self, body: bytes, error: httpx2.TransportError) -> None:
        self._body = body
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body
        raise self._error


class ReplayTransport(httpx2.AsyncBaseTransport):
    """Answers each request from ``tape``; opens no connection.

    A request that failed in the transport when it was recorded (a timeout, say) raises
    the same httpx2 error; a body cut short raises :class:`httpx2.RemoteProtocolError`
    (or the error recorded) after its bytes.
    """

    def __init__(self, tape: HttpTape) -> None:
        self.tape = tape
        """The recorded interactions."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = self.tape.play(request_entry(request, body, set()))
        error = response.get("error")
        if error is not None and "status" not in response:
            raise _replayed_error(error, request)
        if error is None and not response.get("incomplete"):
            return httpx2.Response(
                response.get("status", 200),
                headers=response.get("headers", {}),
                content=decode_body(response),
                request=request,
            )
        cut = _replayed_error(error or "RemoteProtocolError", request)
        return httpx2.Response(
            response.get("status", 200),
            headers=response.get("headers", {}),
            stream=_Cut(decode_body(response), cut),
            request=request,
        )
