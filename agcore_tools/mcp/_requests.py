"""Helpers for the requests of the protocol beyond tools: capability checks, and lists
followed over every page.

The public methods on :class:`~agcore_tools.McpClient` (resources, prompts, completion,
ping, log level, roots) send through :meth:`Session.send`, so every one of them fails
the way ``call_tool`` does: :class:`~agcore_tools.McpTimeoutError` after
:attr:`timeout`, :class:`~agcore_tools.McpNotInitializedError` when not connected, and
:class:`~agcore_tools.McpError` for protocol and HTTP errors and lost connections; and
they recover like it (a lost connection restarted, a forgotten session renewed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from ..error import McpError, McpUsageError
from ._connection import Connection
from ._protocol import Page, pages
from ._session import Meta, Session

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpUsageError", "Meta", "all_pages", "offers", "require_capability"]

X = TypeVar("X")
P = TypeVar("P", bound=Page)


async def all_pages(
    session: Session,
    what: str,
    fetch: Callable[[Client, str | None, Meta], Awaitable[P]],
    items: Callable[[P], Iterable[X]],
) -> list[X]:
    """Every item of the paginated list ``what``, each page sent with :meth:`Session.send`
    (see ``_protocol.pages`` for the bound on pages)."""
    listed = await pages(
        session.server_name, what, lambda cursor: session.send(what, _at(fetch, cursor))
    )
    return [item for page in listed for item in items(page)]


def _at(
    fetch: Callable[[Client, str | None, Meta], Awaitable[P]], cursor: str | None
) -> Callable[[Client, Meta], Awaitable[P]]:
    return lambda client, meta: fetch(client, cursor, meta)


def offers(session: Session, capability: str) -> bool | None:
    """Whether the connected server declared ``capability``; None while not connected
    (capabilities are known from the handshake on).

    Example:
        >>> from agcore_tools import McpClient, StdioTransport
        >>> print(offers(Session(McpClient("demo", StdioTransport("server"))), "prompts"))
        None
    """
    client = session.client
    if client is None:
        return None
    return getattr(client.server_capabilities, capability, None) is not None


async def require_capability(session: Session, what: str, capability: str) -> Connection:
    """The ready connection, once its server has declared ``capability``
    (``resources``, ``prompts``, ``completions``, ``logging``): restarted first if it
    was lost (:meth:`Session.ready`), as a call's is, since the capabilities are the
    new server's."""
    conn = await session.ready(what)
    client = conn.client
    if client is None:
        raise session.not_usable(conn, None, what)
    if getattr(client.server_capabilities, capability, None) is None:
        # Recoverable, as the server's own refusal would be: the connection is fine,
        # and a model that asked (the get_prompt tool) reads why and goes on.
        raise McpError(
            session.server_name,
            f"cannot send {what}: the server does not offer {capability}",
            recoverable=True,
        )
    return conn
