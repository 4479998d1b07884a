"""The ``subscriptions/listen`` stream a 2026-07-28 connection keeps open for tool list
changes, opened again whenever it ends; and how a failure is told in one line."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ._serverlog import safe_text
from ._stream_state import NotificationStream

if TYPE_CHECKING:
    import anyio.abc
    from mcp import Client

__all__ = ["describe", "leaf", "listen_tools_changed"]

logger = logging.getLogger("agcore_tools.mcp")

_RELISTEN_DELAYS = (0.5, 30.0)
"""First and longest pause before opening the tools/list_changed stream again."""


async def listen_tools_changed(
    client: Client,
    stream: NotificationStream,
    *,
    task_status: anyio.abc.TaskStatus[None],
) -> None:
    """Keep a ``subscriptions/listen`` stream for tool list changes open, telling
    ``stream`` how it stands.

    2026-07-28 servers send ``notifications/tools/list_changed`` only on such a
    stream; earlier ones send it unasked. A stream that ends (a proxy's idle
    timeout, a server restart) is opened again after a pause that grows while
    streams keep ending soon after opening; changes may have been missed in
    between, so the tool list cache is cleared each time.
    """
    import anyio
    from mcp.client.subscriptions import SubscriptionLost
    from mcp.shared.exceptions import MCPError

    started = False
    delay = _RELISTEN_DELAYS[0]
    while True:
        opened_at = time.monotonic()
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                if not started:
                    started = True
                    task_status.started()
                else:
                    stream.event("open", None)
                async for _event in subscription:
                    # The notification itself reaches the connection's message handler
                    # too (the SDK tees it); iterating keeps the backlog drained.
                    pass
            ending = "the server closed it"
            stream.event("ended", None)
        except (MCPError, SubscriptionLost, TimeoutError, RuntimeError) as exc:
            if not started:
                stream.event("none", f"no tools/list_changed subscription ({describe(exc)})")
                task_status.started()
                return
            ending = describe(exc)
            stream.event("lost", ending)
        # A stream that lasted resets the pause; one that ended at once doubles it.
        lasted = time.monotonic() - opened_at
        delay = _RELISTEN_DELAYS[0] if lasted > _RELISTEN_DELAYS[1] else delay
        logger.debug(
            "MCP server '%s': the tools/list_changed stream ended (%s); reopening in %g s",
            stream.server_name,
            ending,
            delay,
        )
        await anyio.sleep(delay)
        delay = min(delay * 2, _RELISTEN_DELAYS[1])


def describe(exc: BaseException) -> str:
    """One line naming the innermost real cause, looking inside exception groups, its
    control characters escaped (the SDK's errors may quote a server), not cut: it is
    masked where it is used.

    Example:
        >>> describe(ValueError("bad port\\nmore"))
        'ValueError: bad port'
        >>> print(describe(RuntimeError("refused \\x1b[2J")))
        RuntimeError: refused \\x1b[2J
    """
    inner = leaf(exc)
    text = str(inner).strip() or "(no message)"
    line = f"{type(inner).__name__}: {text}".splitlines()[0]
    return safe_text(line, len(line))


def leaf(exc: BaseException) -> BaseException:
    """The innermost exception of ``exc`` (the first real one inside exception groups)."""
    inner: list[BaseException] | None = getattr(exc, "exceptions", None)
    if inner:
        real = [e for e in inner if not isinstance(e, asyncio.CancelledError)]
        return leaf(real[0] if real else inner[0])
    return exc
