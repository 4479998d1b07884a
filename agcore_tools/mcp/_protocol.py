"""What the two protocol generations differ in, the protocol's log levels, and the one
loop that follows a paginated list.

Kept free of SDK imports at module level and of the rest of the client: the connection,
the session, the tool cache and the request helpers all read these, so one copy serves
them all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..error import McpError

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["LOG_LEVELS", "MAX_PAGES", "PROBE", "Page", "is_modern", "pages", "round_trip"]

PROBE = "server/discover"
"""The request of the 2026-07-28 version probe, which a server of an older protocol may
refuse, fail on, or leave unanswered (see ``_handshake``)."""

MAX_PAGES = 1000
"""Pages a list may have before the client gives up (a server that never ends a list)."""

LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
"""MCP's log levels (RFC 5424's), least severe first, each with the Python level its
messages are logged at."""


def is_modern(client: Client) -> bool:
    """Whether the session speaks 2026-07-28 or later (``server/discover`` era)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return client.protocol_version in MODERN_PROTOCOL_VERSIONS


async def round_trip(client: Client) -> None:
    """The cheapest request every server answers: ``ping``, or ``server/discover`` on
    2026-07-28 sessions, where ``ping`` no longer exists."""
    if is_modern(client):
        await client.session.send_discover(client.protocol_version)
    else:
        await client.session.send_ping()


class Page(Protocol):
    """One page of a paginated list: what matters here is where the next one starts."""

    @property
    def next_cursor(self) -> str | None: ...


P = TypeVar("P", bound=Page)


async def pages(
    server_name: str, what: str, fetch: Callable[[str | None], Awaitable[P]]
) -> list[P]:
    """Every page of the list ``what``: ``fetch`` gets each page's cursor (None for the
    first), for at most :data:`MAX_PAGES` pages; a cursor seen twice is an error, not
    a loop.

    Example:
        >>> import asyncio
        >>> from types import SimpleNamespace as Page
        >>> book = {None: Page(next_cursor="2"), "2": Page(next_cursor=None)}
        >>> async def fetch(cursor): return book[cursor]
        >>> len(asyncio.run(pages("demo", "tools/list", fetch)))
        2
    """
    found: list[P] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        found.append(page)
        cursor = page.next_cursor
        if cursor is None:
            return found
        if cursor in seen:
            raise McpError(server_name, f"{what} repeated the cursor {cursor!r}")
        seen.add(cursor)
    raise McpError(server_name, f"{what} returned more than {MAX_PAGES} pages")
