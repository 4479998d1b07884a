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

The pools are made at the first request, with one TLS context for the whole process
(:func:`shared_ssl_context`): building one loads the CA bundle, about 25 ms of CPU,
which a cycle per request would otherwise pay each time, on the app's event loop.

:class:`LibraryPooled` is the transport of the clients ``LlmCycle`` builds itself: on
agcore_tools' own loop (the ``*_sync`` methods) they share one pool, so a cycle per
request reuses kept-alive connections as one sync ``OpenAI`` client would.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import ssl
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from types import TracebackType

import httpx2

from .. import _sync
from .._aio import submit_sync, with_timeout
from ..error import LlmConfigError

__all__ = ["LibraryPooled", "ShardedTransport", "shared_ssl_context"]

logger = logging.getLogger("agcore_tools.cycle")

SSL_CONTEXT_TIMEOUT = 60.0
"""Seconds a request waits for the process's TLS context to be built (it reads the CA
bundle from disk, in a worker thread)."""

# By the environment variables httpx2 builds it from: a context per value, as a client
# built after the app set SSL_CERT_FILE would have. Futures of the tool pool, so that
# requests on any loop wait for one build.
_contexts: dict[tuple[str | None, str | None], Future[ssl.SSLContext]] = {}
_contexts_lock = threading.Lock()


def _forget_unbuilt() -> None:
    # A forked child has none of its parent's threads, so none of their builds; a
    # context already built is only settings, the child's too.
    global _contexts_lock
    for key in [key for key, built in _contexts.items() if not built.done()]:
        del _contexts[key]
    _contexts_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # pragma: no branch - absent on Windows only
    os.register_at_fork(after_in_child=_forget_unbuilt)


def _forget_failed(key: tuple[str | None, str | None], built: Future[ssl.SSLContext]) -> None:
    # A failure may pass (a CA file mounted or written late, EMFILE under load): the
    # requests already waiting for this build get its error, and the next one builds
    # again rather than the whole process failing on it for good.
    if built.cancelled() or built.exception() is not None:
        with _contexts_lock:
            if _contexts.get(key) is built:
                del _contexts[key]


async def shared_ssl_context() -> ssl.SSLContext:
    """httpx2's default TLS context (the CA bundle, or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``), built once per process in a worker thread; an ``SSLContext`` is
    safe to share between connections, clients and threads. A build that failed is not
    kept: the next call builds it again.

    Raises ``httpx2.ConnectTimeout`` past :data:`SSL_CONTEXT_TIMEOUT`, as a connection
    attempt would, and :class:`~agcore_tools.error.LlmConfigError` (a ``ValueError``)
    when the certificates cannot be read (a ``SSL_CERT_FILE`` naming no file).

    Example:
        >>> first = asyncio.run(shared_ssl_context())
        >>> first is asyncio.run(shared_ssl_context()), first.verify_mode == ssl.CERT_REQUIRED
        (True, True)
    """
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _contexts_lock:
        building = _contexts.get(key)
        started = building is None
        if building is None:
            building = _contexts[key] = submit_sync(httpx2.create_ssl_context)
    if started:  # outside the lock: a build already over runs the callback here, at once
        building.add_done_callback(functools.partial(_forget_failed, key))
    try:
        if building.done():
            return building.result()
        # Shielded: one request cancelled (or out of time) leaves the build to the others.
        return await with_timeout(
            asyncio.shield(asyncio.wrap_future(building)), SSL_CONTEXT_TIMEOUT
        )
    except TimeoutError as exc:  # before OSError, of which it is one
        raise httpx2.ConnectTimeout(
            f"the TLS certificates did not load within {SSL_CONTEXT_TIMEOUT:g} s"
        ) from exc
    except OSError as exc:  # ssl.SSLError too
        raise LlmConfigError(
            f"cannot load the TLS certificates (SSL_CERT_FILE={key[0]!r}, "
            f"SSL_CERT_DIR={key[1]!r}): {type(exc).__name__}: {exc}; point them at a CA "
            "bundle, or unset them for the system's"
        ) from exc


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
        self._limits = httpx2.Limits(
            # Keep-alive as large as the pool: a busy pool that may keep fewer idle
            # connections than it has open closes and reopens them under load.
            max_connections=connections_per_shard,
            max_keepalive_connections=connections_per_shard,
        )
        # Made at the first request: the TLS context they need is built off the loop.
        self._shards: tuple[httpx2.AsyncHTTPTransport, ...] = ()
        self.open_responses = [0] * shards
        """Per shard, the requests sent and the responses not yet closed."""
        self._releases = tuple(self._release_for(index) for index in range(shards))

    async def _pools(self) -> tuple[httpx2.AsyncHTTPTransport, ...]:
        if not self._shards:
            context = await shared_ssl_context()
            if not self._shards:  # not made by a request that waited with this one
                self._shards = tuple(
                    httpx2.AsyncHTTPTransport(verify=context, limits=self._limits)
                    for _ in self.open_responses
                )
        return self._shards

    def _release_for(self, index: int) -> Callable[[], None]:
        open_responses = self.open_responses

        def release() -> None:
            open_responses[index] -= 1

        return release

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        shards = self._shards or await self._pools()
        open_responses = self.open_responses
        index = open_responses.index(min(open_responses))  # two C-level passes over k ints
        open_responses[index] += 1
        try:
            response = await shards[index].handle_async_request(request)
        except BaseException:
            open_responses[index] -= 1
            raise
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _OpenResponse(response.stream, self._releases[index])
        return response

    async def __aenter__(self) -> ShardedTransport:
        for shard in await self._pools():
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
            for shard in self._shards:
                stack.push_async_callback(shard.aclose)

    async def close(self) -> None:
        """:meth:`aclose`, under the name the wind-down at exit calls."""
        await self.aclose()


# The pool the clients LlmCycle builds share on the library's loop, with that loop: a
# forked child's library loop is a new one, and the parent's pool stays the parent's.
_library_pool: tuple[asyncio.AbstractEventLoop, ShardedTransport] | None = None


class LibraryPooled(httpx2.AsyncBaseTransport):
    """The transport of a client the library builds (an ``LlmCycle``'s client from the
    environment, or a sync client's async twin).

    On agcore_tools' own loop, where the ``*_sync`` methods run, every such client
    sends through one :class:`ShardedTransport` of 64 pools of 16 connections, closed
    at interpreter exit: a cycle made and closed per request (as a sync app does)
    reuses kept-alive connections, as one sync ``OpenAI`` client would. On any other
    loop the client has a pool of its own, made at its first request there and closed
    with it: no hook tells when an app's loop closes, and connections must not outlive
    their loop. Closing the client leaves the shared pool open for the others; closing
    it after the loop of its own pool has closed drops that pool (its connections ended
    with their loop, and nothing can run on it to close them).
    """

    def __init__(self) -> None:
        self._own: ShardedTransport | None = None
        self._own_loop: Callable[[], asyncio.AbstractEventLoop | None] = _no_loop

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        global _library_pool
        loop = asyncio.get_running_loop()
        if _sync.is_library_loop(loop):
            # Only ever read and set on the library loop's one thread.
            if _library_pool is None or _library_pool[0] is not loop:
                _library_pool = (loop, ShardedTransport(64, 16))
                _sync.close_at_exit(_library_pool[1])
            transport = _library_pool[1]
        else:
            if self._own is None:
                self._own, self._own_loop = ShardedTransport(64, 16), weakref.ref(loop)
            transport = self._own
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        own, self._own = self._own, None
        if own is None:
            return
        loop = self._own_loop()
        if loop is None or loop.is_closed():  # asyncio.run() ended before the close
            logger.debug("a cycle's own connection pool outlived its event loop; dropped")
            return
        await own.aclose()


def _no_loop() -> asyncio.AbstractEventLoop | None:
    return None
