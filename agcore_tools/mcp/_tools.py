"""The tool cache of an :class:`~agcore_tools.McpClient`: listing the server's tools.

``tools/list`` is followed over every page (see ``_protocol.pages``) once per
connection, then served from the cache until the server says the list changed
(``notifications/tools/list_changed``), the client's ``tools_ttl`` or the server's
own ``ttlMs`` runs out, or :meth:`ToolCache.invalidate` is called. Concurrent readers
share one fetch. A malformed tool is left out of the list (see ``_tool_vetting``),
with a WARNING; a list with no tool left fails, as an invalid answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError, to_json

from .._aio import with_timeout
from ..base import tool_definition
from ..error import McpError, McpUsageError, ToolConfigError
from ._connection import Connection
from ._exchange import EXCHANGE, HttpExchange
from ._protocol import pages
from ._recover import cause_of, is_safe_to_repeat, send_again, shown
from ._sending import translate
from ._session import BACKSTOP, Session
from ._tool_vetting import LISTING, Listing, MalformedTool
from .models import McpToolInfo

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import ListToolsResult

__all__ = ["ToolCache", "check_arguments", "check_ttl", "definition"]

logger = logging.getLogger("agcore_tools.mcp")


class _PageFailed(Exception):
    """A page of ``tools/list`` failed: the SDK's exception and the request's HTTP outcome."""

    def __init__(self, exc: Exception, exchange: HttpExchange | None) -> None:
        super().__init__(exc)
        self.exc = exc
        self.exchange = exchange


def check_ttl(server_name: str, ttl: object) -> float | None:
    """``McpClient(tools_ttl=...)``, once it is seconds (0 or more: 0 fetches the list
    before each use) or None: a negative one was taken, and meant 0.

    Example:
        >>> check_ttl("demo", 60), check_ttl("demo", None)
        (60, None)
        >>> check_ttl("demo", -1)
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: MCP server 'demo': tools_ttl must be seconds (0 or more) or None, got -1
    """
    if ttl is None or (isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl >= 0):
        return ttl
    raise ToolConfigError(
        f"MCP server '{server_name}': tools_ttl must be seconds (0 or more) or None, got {ttl!r}"
    )


class ToolCache:
    """The tools of one session's server, as last listed.

    Example:
        >>> from agcore_tools import McpClient, StdioTransport
        >>> from agcore_tools.mcp._session import Session
        >>> cache = ToolCache(Session(McpClient("demo", StdioTransport("server"))))
        >>> cache.infos is None, cache.safe_to_repeat("anything")
        (True, False)
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        """The session the lists are fetched through."""
        self.infos: list[McpToolInfo] | None = None
        """The tools as last listed (None before the first list)."""
        self.malformed: tuple[MalformedTool, ...] = ()
        """The tools the last list left out as malformed (all it listed, if it failed
        for want of a valid one)."""
        self._fresh_until = -1.0
        self._generation = 0
        self._started = 0  # fetches started, counted
        self._ended = 0  # the count of the last fetch that ended with a list
        self._lock = asyncio.Lock()

    def invalidate(self, reason: str | None) -> None:
        """Make the next read fetch the list again (``reason`` is logged; None: silently).
        Logged at INFO only when it clears a list still fresh: a server that floods
        ``tools/list_changed`` notices costs one line per list fetched, not per notice."""
        was_fresh = self.infos is not None and time.monotonic() < self._fresh_until
        self._generation += 1
        self._fresh_until = -1.0
        if reason is not None:
            logger.log(
                logging.INFO if was_fresh else logging.DEBUG,
                "MCP server '%s': %s; tool list cache cleared",
                self.session.server_name,
                reason,
            )

    def new_loop(self) -> None:
        """The session moved to another event loop: take a lock of the new one."""
        self._lock = asyncio.Lock()

    def safe_to_repeat(self, tool_name: str) -> bool:
        """Whether the listed tool ``tool_name`` is annotated safe to call twice."""
        infos = self.infos or []
        return any(i.name == tool_name and is_safe_to_repeat(i.annotations) for i in infos)

    async def prime(self, conn: Connection) -> None:
        """List the tools of a connection that just started, if its server has tools, by
        the deadline of its start (``conn.deadline``).

        One tools/list then: ``into_tools()`` can work without awaiting, and the SDK
        learns the tools' output schemas before the first call.
        """
        client = conn.client
        if client is not None and client.server_capabilities.tools is not None:
            await self._fetch(conn, deadline=conn.deadline)

    async def current(self) -> list[McpToolInfo]:
        """The tools, from the cache while it is fresh, else listed again."""
        conn = await self.session.ready("tools/list")
        if self.infos is not None and time.monotonic() < self._fresh_until:
            return list(self.infos)
        asked = self._started
        async with self._lock:
            # Another task may have fetched while this one waited for the lock: a list
            # still fresh, or one whose fetch started after this read asked, which is as
            # current as a fetch of its own (it came after any change notice this read
            # could know of). So readers that wait share one fetch, however often the
            # server says its list changed meanwhile: they all fetched again in turn.
            if self.infos is not None and time.monotonic() < self._fresh_until:
                return list(self.infos)
            if self.infos is not None and self._ended > asked:
                return list(self.infos)
            return list(await self._fetch(conn, recover=True))

    async def _fetch(
        self, conn: Connection, *, recover: bool = False, deadline: float | None = None
    ) -> list[McpToolInfo]:
        """The tools listed on ``conn``, each page within the client's timeout, and all
        of them by ``deadline`` (``time.monotonic()``) if given."""
        session = self.session
        client = conn.client
        if client is None:
            raise session.not_usable(conn, None, "tools/list")
        generation = self._generation
        self._started += 1
        number = self._started
        started = time.monotonic()
        limit = session.settings.timeout

        def bound() -> float:
            if deadline is None:
                return limit
            return min(limit, max(0.0, deadline - time.monotonic()))

        listing = Listing()
        try:
            listed = await pages(
                session.server_name,
                "tools/list",
                lambda cursor: _page(client, conn.http, cursor, bound(), listing),
            )
        except _PageFailed as failed:
            exc, exchange = failed.exc, failed.exchange
            if not recover:
                error = await translate(session, conn, exc, exchange, "tools/list", limit, None)
                raise error from cause_of(error, exc, conn)

            # A restart fetches the whole list itself (cursors need not survive it).
            async def fetch_again(new: Connection, remaining: float) -> list[McpToolInfo]:
                if new is not conn:
                    return list(self.infos or [])
                return await self._fetch(conn)

            return await send_again(
                session,
                conn,
                exc,
                exchange,
                action="tools/list",
                tool_name=None,
                limit=limit,
                started=started,
                safe=lambda: True,
                send=fetch_again,
            )
        infos = [_info(tool) for page in listed for tool in page.tools]
        self._left_out(conn, listing.malformed, bool(infos))
        ttl = session.settings.tools_ttl
        for page in listed:
            ttl = _shorter(ttl, _server_ttl(page))
        self.infos = infos
        self._ended = max(self._ended, number)
        # A change notice that arrived during the fetch leaves the list stale, as does
        # a notification stream being reopened (a change may come meanwhile, unheard).
        if generation == self._generation and conn.stream.state != "lost":
            self._fresh_until = started + ttl if ttl is not None else float("inf")
        return infos

    def _left_out(self, conn: Connection, malformed: list[MalformedTool], kept: bool) -> None:
        """Log the tools a list left out (at DEBUG those the last list left out too), or
        fail the list when it kept none: all its tools are malformed."""
        server_name = self.session.server_name
        said_before = {str(tool) for tool in self.malformed}
        self.malformed = tuple(malformed)
        if malformed and not kept:
            first = malformed[0]
            more = len(malformed) - 1
            tail = f" (and {more} more malformed tool{'s' if more > 1 else ''})" if more else ""
            error = McpError(
                server_name,
                f"tools/list got an invalid answer: {first.place}: {first.reason}{tail}",
            )
            raise error from (shown(first.error, conn) if first.error is not None else None)
        for tool in malformed:
            logger.log(
                logging.DEBUG if str(tool) in said_before else logging.WARNING,
                "MCP server '%s': tools/list: left out the malformed tool %s; the server's "
                "other tools are usable",
                server_name,
                tool,
            )


async def _page(
    client: Client, http: bool, cursor: str | None, limit: float, listing: Listing
) -> ListToolsResult:
    exchange = HttpExchange() if http else None
    token = EXCHANGE.set(exchange)
    listed = LISTING.set(listing)  # what the answer leaves out goes there (_tool_vetting)
    try:
        return await with_timeout(client.list_tools(cursor=cursor), limit + BACKSTOP)
    except Exception as exc:
        raise _PageFailed(exc, exchange) from exc
    finally:
        LISTING.reset(listed)
        EXCHANGE.reset(token)


def definition(info: McpToolInfo) -> dict[str, Any]:
    """A listed tool as a Chat Completions tool param, with the server's own name.

    Example:
        >>> definition(McpToolInfo("echo", "Echo the text."))["function"]["name"]
        'echo'
    """
    return tool_definition(info.name, info.description, dict(info.input_schema))


def _server_ttl(page: ListToolsResult) -> float | None:
    # Only 2026-07-28 sessions carry ttlMs; the SDK strips it from older ones, so a
    # field never set on the model means "no hint".
    if "ttl_ms" not in page.model_fields_set:
        return None
    return page.ttl_ms / 1000.0


def _shorter(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _info(tool: Any) -> McpToolInfo:
    annotations = (
        tool.annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
        if tool.annotations is not None
        else {}
    )
    return McpToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations,
        title=tool.title,
        task_support=tool.execution.task_support if tool.execution is not None else None,
        meta=tool.meta or {},
    )


def check_arguments(method: str, name: object, args: object) -> None:
    """Refuse what cannot be a tool's arguments before anything is sent (it never ran)."""
    if not isinstance(name, str) or not name:
        raise McpUsageError(f"{method}(): the tool's name must be a non-empty string, got {name!r}")
    if args is None:
        return
    if isinstance(args, Mapping) and all(isinstance(k, str) for k in args):
        try:
            # What the SDK does when it builds the request; failing there would read as a
            # call that may have run, though nothing was sent.
            to_json(args)
        except PydanticSerializationError as exc:
            raise McpUsageError(
                f"{method}('{name}'): an argument cannot be sent as JSON ({exc})"
            ) from exc
        return
    hint = " (a JSON string: pass json.loads() of it)" if isinstance(args, (str, bytes)) else ""
    raise McpUsageError(
        f"{method}('{name}'): arguments must be a mapping of names to values, got "
        f"{type(args).__name__}{hint}"
    )
