"""The protocol's utilities, on either generation: ping, the server's log level, and
telling the server the client's roots changed.

2026-07-28 removed ``ping``, ``logging/setLevel`` and
``notifications/roots/list_changed``; each function here says what it does instead.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, cast

from ..error import McpUsageError, ToolConfigError
from ._protocol import LOG_LEVELS, is_modern, round_trip
from ._requests import Meta, require_capability
from ._session import Session

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import RequestParamsMeta

__all__ = ["notify_roots_changed", "ping", "set_log_level"]


async def ping(session: Session) -> float:
    """Seconds for one round trip: ``ping``, or ``server/discover`` on 2026-07-28
    sessions, where ``ping`` no longer exists and ``server/discover`` is the cheapest
    request every server answers."""

    async def timed(client: Client, _meta: Meta) -> float:
        started = time.perf_counter()
        await round_trip(client)
        return time.perf_counter() - started

    return await session.send("ping", timed)


def check_log_level(server_name: str, level: object) -> str | None:
    """``McpClient(log_level=...)``, once it is one of MCP's levels (in any case, as
    Python's logging spells them: ``"WARNING"``) or None, in lower case as MCP sends
    it: a misspelt one was taken and sent at every connect, for the server to refuse.

    Example:
        >>> check_log_level("demo", "WARNING")
        'warning'
        >>> check_log_level("demo", "loud")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: MCP server 'demo': log_level must be one of debug, info, notice, warning, error, critical, alert, emergency or None, got 'loud'
    """
    if level is None:
        return None
    if isinstance(level, str) and level.lower() in LOG_LEVELS:
        return level.lower()
    raise ToolConfigError(
        f"MCP server '{server_name}': log_level must be one of {', '.join(LOG_LEVELS)} or "
        f"None, got {level!r}"
    )


async def set_log_level(session: Session, level: str) -> None:
    """Ask for log messages at ``level`` and above (in any case: sent in lower case)."""
    if isinstance(level, str) and level.lower() in LOG_LEVELS:
        level = level.lower()
    else:
        raise McpUsageError(
            f"MCP server '{session.server_name}': unknown log level {level!r}; "
            f"use one of {', '.join(LOG_LEVELS)}"
        )
    conn = await session.ready("logging/setLevel")
    client = conn.client
    if client is not None and is_modern(client):
        # The level travels in each request's _meta; setLevel no longer exists.
        from mcp_types import LOG_LEVEL_META_KEY

        session.settings.log_level = session.chosen_log_level = level
        conn.request_meta = cast("RequestParamsMeta", {LOG_LEVEL_META_KEY: level})
        return
    import mcp_types as types

    await require_capability(session, "logging/setLevel", "logging")
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))  # type: ignore[arg-type]
    # Under the lock a reconnect's re-send of the chosen level takes too: sent while
    # that one waited for its answer, this level could reach the server first, and the
    # old level be its last. The re-send reads the level once it has the lock.
    async with session.level_lock:
        await session.send(
            "logging/setLevel",
            lambda c, _meta: c.session.send_request(request, types.EmptyResult),
        )
        session.settings.log_level = session.chosen_log_level = level
        current = session.conn
        if current is not None:
            current.chosen_log_level = level


async def notify_roots_changed(session: Session) -> bool:
    """Tell the server the roots changed; True when a notification was sent."""
    if session.settings.roots_handler is None:
        raise McpUsageError(
            f"MCP server '{session.server_name}': no roots_handler was given, so the server "
            "was not told of any roots; pass roots_handler= to McpClient"
        )
    conn = session.require("notifications/roots/list_changed")
    client = conn.client
    if client is not None and is_modern(client):
        # 2026-07-28 servers ask for roots within the request that needs them, so they
        # always get the handler's current answer: there is nothing to send.
        return False
    if "roots_handler" not in conn.answers:
        # Set after connecting: the server was told then that there are no roots.
        raise McpUsageError(
            f"MCP server '{session.server_name}': the roots_handler was set after "
            "connecting, and the server was told when connecting that this client has no "
            "roots; it takes effect at the next connection (close() and connect())"
        )
    import mcp_types as types

    await session.send(
        "notifications/roots/list_changed",
        lambda c, _meta: c.session.send_notification(types.RootsListChangedNotification()),
    )
    return True
