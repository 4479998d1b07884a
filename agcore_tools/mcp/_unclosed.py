"""What stops the server of an :class:`~agcore_tools.McpClient` dropped without ``close()``.

A connection runs in tasks of its event loop, which the loop holds for as long as the
server runs. If those tasks held the client too, a client nobody refers to any more (a
notebook cell run again, a client made per request and never closed) could never be
collected, and its server would run until the loop or the interpreter ends. So nothing
a connection's tasks hold refers to the client or its session: the connection reads the
client's settings through a weak reference and tells the session of tool list changes
through a weak method (:func:`weak_method`). Once the client is collected, the finalizer
armed by :func:`watch` stops the connection on its own loop and warns
(``ResourceWarning``), as an unclosed asyncio transport or aiohttp session does.

What the user holds keeps the client: its adapters (``into_tools()``, registered in a
registry), subscriptions and task handles all refer to it, so a client in use is never
closed this way.
"""

from __future__ import annotations

import asyncio
import os
import warnings
import weakref
from collections.abc import Callable
from typing import TypeVar

from ._connection import Connection
from ._state import State

__all__ = ["Tracked", "watch", "weak_method"]

A = TypeVar("A")

_STOPPING: set[asyncio.Task[None]] = set()
"""The stops under way (the loop keeps only weak references to tasks)."""


class Tracked:
    """The newest connection of a session and where it runs: what the client's finalizer
    needs, kept apart from the session, which refers to the client."""

    __slots__ = ("conn", "loop", "pid")

    def __init__(self) -> None:
        self.conn: Connection | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid = 0

    def follow(self, conn: Connection, loop: asyncio.AbstractEventLoop | None) -> None:
        """``conn`` is the session's connection from now on, running in ``loop``."""
        self.conn, self.loop, self.pid = conn, loop, os.getpid()


def watch(client: object, tracked: Tracked, server_name: str) -> None:
    """Stop ``tracked``'s connection, if it still runs, once ``client`` is collected."""
    finalizer = weakref.finalize(client, _collected, tracked, server_name)
    # At interpreter exit the loop's own shutdown stops what still runs.
    finalizer.atexit = False


def weak_method(method: Callable[[A], None]) -> Callable[[A], None]:
    """``method`` (a bound method) without a reference to its object: calls made once the
    object is gone do nothing.

    Example:
        >>> class Cache:
        ...     def clear(self, reason: str) -> None:
        ...         print("cleared:", reason)
        >>> cache = Cache()
        >>> clear = weak_method(cache.clear)
        >>> clear("changed")
        cleared: changed
        >>> del cache
        >>> clear("changed again")
    """
    ref = weakref.WeakMethod(method)

    def call(value: A) -> None:
        bound = ref()
        if bound is not None:
            bound(value)

    return call


def _collected(tracked: Tracked, server_name: str) -> None:
    # Runs wherever the garbage collector runs: any thread, the loop's own included.
    conn, loop = tracked.conn, tracked.loop
    if conn is None or loop is None or conn.state not in (State.STARTING, State.READY):
        return
    if tracked.pid != os.getpid():
        return  # a forked child's copy: the connection is the parent's
    child = conn.child
    what = f"server process {child.pid}" if child is not None else "its connection"
    try:
        loop.call_soon_threadsafe(_stop, conn)
        outcome = f"stopping {what}"
    except RuntimeError:  # the loop is closed: the server went with it
        outcome = "its event loop is closed"
    # Warned after scheduling: with warnings turned into errors, the stop still happens.
    warnings.warn(
        f"unclosed McpClient {server_name!r} was garbage-collected ({outcome}); close it "
        "with `await client.close()`, `client.close_sync()` or `async with`",
        ResourceWarning,
        stacklevel=1,
    )


def _stop(conn: Connection) -> None:
    task = asyncio.get_running_loop().create_task(conn.stop(), name="mcp-client:unclosed")
    _STOPPING.add(task)
    task.add_done_callback(_STOPPING.discard)
