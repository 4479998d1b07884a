"""The Streamable HTTP transport: the SDK's client over an httpx2 client we configure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

    from .transport import StreamableHttpTransport

__all__ = ["open_streamable_http"]

_CONNECT_TIMEOUT = 30.0
# A server may hold an SSE response open while a tool runs: reads get the SDK's
# long default; the client's own per-request timeout is what bounds a call.
_SSE_READ_TIMEOUT = 300.0


@asynccontextmanager
async def open_streamable_http(
    transport: StreamableHttpTransport,
) -> AsyncIterator[TransportStreams]:
    """Yield the (read, write) message streams of a Streamable HTTP connection."""
    # httpx2 is the MCP SDK's HTTP client; the SDK documents passing a configured
    # httpx2.AsyncClient as the way to set headers.
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        headers=dict(transport.headers or {}),
        auth=transport.auth,
        timeout=httpx2.Timeout(_CONNECT_TIMEOUT, read=_SSE_READ_TIMEOUT),
    )
    async with http, streamable_http_client(transport.url, http_client=http) as streams:
        yield streams
