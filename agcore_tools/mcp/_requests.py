"""Sending one request of the protocol beyond tools: the client's timeout, its error
translation, capability checks, and list pagination with a bound on pages.

The public methods on :class:`~agcore_tools.McpClient` (resources, prompts, completion,
ping, log level, roots) come through here, so every one of them fails the way
``call_tool`` does: :class:`~agcore_tools.McpTimeoutError` after :attr:`timeout`,
:class:`~agcore_tools.McpNotInitializedError` when not connected, and
:class:`~agcore_tools.McpError` for protocol and HTTP errors and lost connections; and
they recover like it (a lost connection restarted, a forgotten session renewed).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

from .._aio import with_timeout
from ..error import McpError, ToolError
from ._exchange import EXCHANGE, HttpExchange

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import RequestParamsMeta

    from ._connection import Connection
    from .client import McpClient

__all__ = ["McpUsageError", "all_pages", "is_modern", "require_capability", "send"]

T = TypeVar("T")
X = TypeVar("X")

MAX_PAGES = 1000
"""Pages a list may have before the client gives up (a server that never ends a list)."""


class McpUsageError(ToolError, ValueError):
    """A call the client cannot make as asked (a mistake in the calling code)."""


class _Page(Protocol):
    next_cursor: str | None


P = TypeVar("P", bound=_Page)
Meta: TypeAlias = "RequestParamsMeta | None"
"""The ``_meta`` a request carries beyond what the SDK stamps (None: nothing)."""


async def send(
    owner: McpClient,
    what: str,
    call: Callable[[Client, Meta], Awaitable[T]],
    *,
    resend: bool = True,
) -> T:
    """Run ``call`` on the connected SDK client within the client's timeout.

    ``call`` gets the SDK client and the ``_meta`` to send with the request (see
    :attr:`Connection.request_meta`). Failures become the :class:`ToolError` that
    ``call_tool`` would raise for them, and recover like it (see ``_recover``): these
    requests read, so they are safe to send again after a restart. ``resend=False`` is
    for requests bound to the connection they started on (a subscription): they are
    never sent again, on a new connection or the same one.
    """
    from ._recover import send_again
    from .client import _BACKSTOP

    conn = await owner._ready(what)
    client = conn.client
    if client is None:  # the connection ended between the check and here
        raise owner._not_usable(conn, None, what)
    limit = owner.timeout
    started = time.monotonic()
    exchange = HttpExchange() if conn.http else None
    token = EXCHANGE.set(exchange)
    try:
        return await with_timeout(call(client, conn.request_meta), limit + _BACKSTOP)
    except Exception as exc:
        if not resend:
            raise await owner._translate(conn, exc, what, limit, None) from exc

        async def again(new: Connection, remaining: float) -> T:
            if new.client is None:
                raise owner._not_usable(new, None, what)
            return await with_timeout(call(new.client, new.request_meta), remaining + _BACKSTOP)

        return await send_again(
            owner,
            conn,
            exc,
            exchange,
            action=what,
            tool_name=None,
            limit=limit,
            started=started,
            safe=lambda: True,
            send=again,
        )
    finally:
        EXCHANGE.reset(token)


async def all_pages(
    owner: McpClient,
    what: str,
    fetch: Callable[[Client, str | None, Meta], Awaitable[P]],
    items: Callable[[P], Iterable[X]],
) -> list[X]:
    """Every item of a paginated list, following ``nextCursor`` for at most
    :data:`MAX_PAGES` pages; a cursor seen twice is an error, not a loop."""
    found: list[X] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await send(owner, what, _at(fetch, cursor))
        found.extend(items(page))
        cursor = page.next_cursor
        if cursor is None:
            return found
        if cursor in seen:
            raise McpError(owner.server_name, f"{what} repeated the cursor {cursor!r}")
        seen.add(cursor)
    raise McpError(owner.server_name, f"{what} returned more than {MAX_PAGES} pages")


def _at(
    fetch: Callable[[Client, str | None, Meta], Awaitable[P]], cursor: str | None
) -> Callable[[Client, Meta], Awaitable[P]]:
    return lambda client, meta: fetch(client, cursor, meta)


def require_capability(owner: McpClient, what: str, capability: str) -> Connection:
    """The ready connection, once its server has declared ``capability``
    (``resources``, ``prompts``, ``completions``, ``logging``)."""
    conn = owner._require(what)
    client = conn.client
    if client is None:
        raise owner._not_usable(conn, None, what)
    if getattr(client.server_capabilities, capability, None) is None:
        raise McpError(
            owner.server_name, f"cannot send {what}: the server does not offer {capability}"
        )
    return conn


def is_modern(client: Client) -> bool:
    """Whether the session speaks 2026-07-28 or later (``server/discover`` era)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return client.protocol_version in MODERN_PROTOCOL_VERSIONS
