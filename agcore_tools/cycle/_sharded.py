"""The transport behind :func:`~agcore_tools.cycle.sharded_http_client`.

httpcore's connection pool walks every request and every connection it holds each time a
request arrives or leaves, so one pool with ``n`` requests in flight costs O(n) per
request and O(n²) per burst. ``ShardedTransport`` spreads requests over ``k``
independent pools, so each walk covers about ``n / k`` of them. It adds no thread and no
task: each request runs in its caller's task, on one of the pools.

A request goes to the pool with the fewest responses open, the first such pool on a tie.
Round-robin would spread even a single sequential conversation over every pool, opening
one connection (with its TLS handshake, against a real API) per pool before any is
reused; least-open keeps a conversation at a time on one kept-alive connection, as the
SDK's default client does, and fans out only as requests overlap. A response counts as
open until its body is closed (streamed answers hold their connection that long).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from types import TracebackType

import httpx2

__all__ = ["ShardedTransport"]


class _OpenResponse(httpx2.AsyncByteStream):
    """A response body that tells its pool's counter when it is closed, once."""

    __slots__ = ("_body", "_release")

    def __init__(self, body: httpx2.AsyncByteStream, release: Callable[[], None]) -> None:
        self._body = body
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The body's own iterator: no extra generator step per chunk of a stream.
        return self._body.__aiter__()

    async def aclose(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()
        await self._body.aclose()


class ShardedTransport(httpx2.AsyncBaseTransport):
    """``shards`` HTTP connection pools behind one transport, each request to the least busy."""

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
        self.open_responses = [0] * shards
        """Per shard, the requests sent and the responses not yet closed."""
        self._releases = tuple(self._release_for(index) for index in range(shards))

    def _release_for(self, index: int) -> Callable[[], None]:
        open_responses = self.open_responses

        def release() -> None:
            open_responses[index] -= 1

        return release

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        open_responses = self.open_responses
        index = open_responses.index(min(open_responses))  # two C-level passes over k ints
        open_responses[index] += 1
        try:
            response = await self.shards[index].handle_async_request(request)
        except BaseException:
            open_responses[index] -= 1
            raise
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _OpenResponse(response.stream, self._releases[index])
        return response

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
