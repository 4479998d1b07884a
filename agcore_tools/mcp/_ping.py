"""Whether an MCP server still answers: one ping, read with what the HTTP layer saw.

Split from ``_connection`` because it is a job of its own: after a request failed with
no answer, and every ``ping_interval`` of a recovery policy, the connection asks
whether its server is alive, and the answer needs more than the ping's own outcome. An
HTTP server that forgot the session, or cannot be reached, is gone though the SDK
reports either as a JSON-RPC error; a client whose connections were all busy says
nothing of the server. :class:`AliveCheck` lets the failures that ask at once share
one ping. The connection keeps the state (whether it is ready, why it was lost).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._exchange import EXCHANGE, HttpExchange
from ._protocol import round_trip

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["PROBE_TIMEOUT", "AliveCheck", "ping"]

PROBE_TIMEOUT = 5.0
"""The longest wait for the answer to a ping sent to check a server after a stream failed."""


async def ping(client: Client, seconds: float, lost_reason: Callable[[], str | None]) -> str | None:
    """Ping the server (``server/discover`` on 2026-07-28, which has no ping): None
    if it answers anything, else why not. ``lost_reason`` is read once the ping found
    the connection closed: the reason the connection recorded meanwhile, if any."""
    import anyio
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    exchange = HttpExchange()
    token = EXCHANGE.set(exchange)
    try:
        with anyio.fail_after(seconds):
            await round_trip(client)
    except TimeoutError:
        return f"the server did not answer a ping within {seconds:g} s"
    except MCPError as exc:
        if exchange.session_gone:
            return f"the server no longer knows the session ({exchange.describe()})"
        if exchange.pool_full:
            return None  # every connection of the client was busy: the server may be fine
        if exchange.network_error is not None:
            return f"the server cannot be reached ({exchange.network_error})"
        if exc.code == CONNECTION_CLOSED:
            return lost_reason() or exc.message
        # Any other JSON-RPC answer, even an error, comes from a live server.
    finally:
        EXCHANGE.reset(token)
    return None


class AliveCheck:
    """The last check of one connection's server, shared by the failures that ask at
    once: a request that failed at ``failed_at`` reuses a check made after it, and
    waits for one running now.

    Example:
        >>> import asyncio
        >>> pings = []
        >>> async def probe() -> str | None:
        ...     pings.append(1)
        ...     return "gone"
        >>> async def two_failures() -> list[str | None]:
        ...     check = AliveCheck()
        ...     failed_at = time.monotonic()
        ...     return [await check.after(failed_at, probe), await check.after(failed_at, probe)]
        >>> asyncio.run(two_failures()), len(pings)
        (['gone', 'gone'], 1)
    """

    __slots__ = ("_lock", "_probed_at", "_result")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._probed_at = -math.inf
        self._result: str | None = None

    async def after(
        self, failed_at: float, probe: Callable[[], Awaitable[str | None]]
    ) -> str | None:
        """None if the server answered a ``probe`` made after ``failed_at``
        (``time.monotonic()``), else why it is gone; probes once if none was."""
        async with self._lock:
            if self._probed_at < failed_at:
                self._result = await probe()
                self._probed_at = time.monotonic()
            return self._result
