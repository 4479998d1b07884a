"""The transport behind :func:`~agcore_tools.cycle.sharded_http_client`.

httpcore's connection pool walks every request and every connection it holds each time a
request arrives or leaves, so one pool with ``n`` requests in flight costs O(n) per
request and O(n²) per burst. ``ShardedTransport`` spreads requests round-robin over
``k`` independent pools, so each walk covers about ``n / k`` of them. It adds no thread
and no task: each request runs in its caller's task, on one of the pools.
"""

from __future__ import annotations

import contextlib
import itertools
from types import TracebackType

import httpx2

__all__ = ["ShardedTransport"]


class ShardedTransport(httpx2.AsyncBaseTransport):
    """``shards`` HTTP connection pools behind one transport, used round-robin."""

    def __init__(self, shards: int, connections_per_shard: int) -> None:
        # One TLS context for all: building one loads the CA bundle (tens of ms).
        context = httpx2.create_ssl_context()  # the default client's
        limits = httpx2.Limits(
            # Keep-alive as large as the pool: a busy pool that may keep fewer idle
            # connections than it has open closes and reopens them under load.
            max_connections=connections_per_shard,
            max_keepalive_connections=connections_per_shard,
        )
        self.shards = tuple(
            httpx2.AsyncHTTPTransport(verify=context, limits=limits) for _ in range(shards)
        )
        self._next = itertools.cycle(self.shards).__next__

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._next().handle_async_request(request)

    async def __aenter__(self) -> ShardedTransport:
        for shard in self.shards:
            await shard.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        # Every shard is closed even if one fails (the exit stack runs each callback).
        async with contextlib.AsyncExitStack() as stack:
            for shard in self.shards:
                stack.push_async_callback(shard.aclose)
