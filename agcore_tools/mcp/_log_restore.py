"""The log level chosen with ``set_log_level()``, asked for again on each new
handshake-era connection: a new session starts at the server's default level.

It is sent by a task of the connection, once the connection is up, with a time bound
of its own: a server slow to answer ``logging/setLevel`` must not make a reconnect
(and the call waiting on it) wait for it or time out. The task ends with the
connection, which cancels it if it still waits. It sends the level chosen when it
sends, under a lock ``set_log_level()`` holds while it sends its own: a level the app
chose during a reconnect is the server's last, never the one it replaced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._protocol import is_modern
from ._relisten import describe

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["needs_restore", "restore_log_level"]

logger = logging.getLogger("agcore_tools.mcp")


def needs_restore(client: Client) -> bool:
    """Whether a chosen level is to be sent to ``client``'s server: a handshake-era one
    that offers logging (2026-07-28 sessions carry the level in each request's
    ``_meta`` instead)."""
    return not is_modern(client) and client.server_capabilities.logging is not None


async def restore_log_level(
    client: Client,
    level: Callable[[], str | None],
    lock: asyncio.Lock,
    seconds: float,
    server_name: str,
    mask: Callable[[str], str],
) -> None:
    """Send ``logging/setLevel`` with the level chosen now (``level()``), under ``lock``
    (which ``set_log_level()`` holds while it sends its own, so the latest level is the
    last the server gets), waiting at most ``seconds`` for the lock and as long again
    for the answer; a failure is logged at WARNING (masked with ``mask``), never raised,
    since it must not end the connection it runs in. A ``set_log_level()`` that holds
    the lock past ``seconds`` sends the latest level itself: nothing is sent then."""
    import anyio
    import mcp_types as types

    chosen = level()
    try:
        with anyio.fail_after(seconds):
            await lock.acquire()
    except TimeoutError:
        logger.debug(
            "MCP server '%s': a set_log_level() in progress held the level for %g s after "
            "reconnecting; the level it sends is left to it",
            server_name,
            seconds,
        )
        return
    try:
        chosen = level()  # a set_log_level() that held the lock may have changed it
        if chosen is None:
            return
        params = types.SetLevelRequestParams(level=chosen)  # type: ignore[arg-type]
        request = types.SetLevelRequest(params=params)
        with anyio.fail_after(seconds):
            await client.session.send_request(request, types.EmptyResult)
    except TimeoutError:
        logger.warning(
            "MCP server '%s': did not answer logging/setLevel within %g s after reconnecting; "
            "its log level may be its default, not '%s'",
            server_name,
            seconds,
            chosen,
        )
    except Exception as exc:  # noqa: BLE001 - logged, not raised: the connection goes on
        logger.warning(
            "MCP server '%s': could not set its log level to '%s' again after reconnecting: %s",
            server_name,
            chosen,
            mask(describe(exc)),
        )
    finally:
        lock.release()
