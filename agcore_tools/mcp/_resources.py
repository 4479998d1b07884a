"""Resources: list them (and their templates), read them, and follow their updates.

A subscription is one object on both protocol generations:

* through 2025-11-25, ``resources/subscribe`` asks for updates and
  ``resources/unsubscribe`` ends them; the server's ``notifications/resources/updated``
  reach the connection's message handler, which hands them to the open subscriptions
  (:class:`UpdateFeeds`);
* on 2026-07-28 those requests are gone: a ``subscriptions/listen`` stream naming the
  URI is the subscription, and its events are read from the stream.

Either way an update is a level trigger ("this changed, read it again if you care"),
so repeats that were not read yet are merged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from ..error import McpError, McpUsageError, ToolError
from ._connection import Connection
from ._feeds import Feed, UpdateFeeds
from ._protocol import is_modern
from ._requests import all_pages, require_capability
from ._results import blob_content, model_reads
from ._serverlog import safe_text
from ._session import Session
from ._state import State
from .models import McpResourceContents, McpResourceInfo, McpResourceTemplateInfo

if TYPE_CHECKING:
    from mcp.client.subscriptions import Subscription

__all__ = [
    "McpResourceSubscription",
    "UpdateFeeds",
    "contents_value",
    "list_resource_templates",
    "list_resources",
    "read_resource",
]

logger = logging.getLogger("agcore_tools.mcp")


async def list_resources(session: Session) -> list[McpResourceInfo]:
    """Every resource the server lists, all pages followed."""
    what = "resources/list"
    await require_capability(session, what, "resources")
    resources = await all_pages(
        session,
        what,
        lambda client, cursor, meta: client.list_resources(cursor=cursor, meta=meta),
        lambda page: page.resources,
    )
    return [
        McpResourceInfo(
            uri=r.uri,
            name=r.name,
            title=r.title,
            description=r.description or "",
            mime_type=r.mime_type,
            size=r.size,
            annotations=_wire(r.annotations),
        )
        for r in resources
    ]


async def list_resource_templates(session: Session) -> list[McpResourceTemplateInfo]:
    """Every resource template the server lists, all pages followed; none when it offers
    resources but answers -32601 (method not found) for their templates."""
    what = "resources/templates/list"
    await require_capability(session, what, "resources")
    try:
        templates = await all_pages(
            session,
            what,
            lambda client, cursor, meta: client.list_resource_templates(cursor=cursor, meta=meta),
            lambda page: page.resource_templates,
        )
    except McpError as exc:
        if not _method_not_found(exc):
            raise
        # Templates are optional within the capability: servers on the SDK's low-level
        # Server that registered no handler for them (mcp-dice) answer this way.
        logger.debug(
            "MCP server '%s' answered %s with -32601 (method not found): it has no templates",
            session.server_name,
            what,
        )
        return []
    return [
        McpResourceTemplateInfo(
            uri_template=t.uri_template,
            name=t.name,
            title=t.title,
            description=t.description or "",
            mime_type=t.mime_type,
            annotations=_wire(t.annotations),
        )
        for t in templates
    ]


async def read_resource(session: Session, uri: str) -> list[McpResourceContents]:
    """The parts of the resource at ``uri``."""
    _check_uri(session.server_name, uri)
    what = f"resources/read '{uri}'"
    await require_capability(session, what, "resources")
    result = await session.send(what, lambda client, meta: client.read_resource(uri, meta=meta))
    return [
        McpResourceContents(
            uri=part.uri,
            mime_type=part.mime_type,
            text=getattr(part, "text", None),
            blob=getattr(part, "blob", None),
        )
        for part in result.contents
    ]


def _method_not_found(error: McpError) -> bool:
    """Whether the server answered the request with -32601 (method not found)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import METHOD_NOT_FOUND

    cause = error.__cause__
    return isinstance(cause, MCPError) and cause.code == METHOD_NOT_FOUND


def contents_value(contents: Sequence[McpResourceContents]) -> Any:
    """What a model gets for a read: the text when every part is text (parts joined
    with newlines), else every part as typed JSON (``uri``, ``mimeType``, ``text`` or
    ``blob``), in order. A ``blob`` that is an image, a sound or a PDF (by its
    ``mimeType``) is an :class:`~agcore_tools.Image`, :class:`~agcore_tools.Audio` or
    :class:`~agcore_tools.File` there, as in a tool's result
    (:mod:`agcore_tools.mcp._results`): the model sees the picture, where it read its
    base64 text, cut at the result's byte limit.

    Example:
        >>> contents_value([McpResourceContents("shot://1", "image/png", blob="iVBORw0KGgo=")])
        [{'uri': 'shot://1', 'mimeType': 'image/png', 'blob': Image(media_type='image/png', size=8)}]
        >>> contents_value([McpResourceContents("a://z", "application/zip", blob="UEsDBA==")])
        [{'uri': 'a://z', 'mimeType': 'application/zip', 'blob': 'UEsDBA=='}]
    """
    if all(part.text is not None for part in contents):
        return "\n".join(part.text or "" for part in contents)
    return [_part_value(part) for part in contents]


def _part_value(part: McpResourceContents) -> dict[str, Any]:
    typed: dict[str, Any] = {
        key: value
        for key, value in (
            ("uri", part.uri),
            ("mimeType", part.mime_type),
            ("text", part.text),
            ("blob", part.blob),
        )
        if value is not None
    }
    media_type = part.mime_type or ""
    if part.blob is not None and model_reads(media_type):
        try:
            typed["blob"] = blob_content(part.blob, media_type, part.uri)
        except ToolError as exc:  # not base64, or a media type of the wrong kind
            logger.warning(
                "MCP resource %s has an unusable %s blob, given as base64 text: %s",
                safe_text(repr(part.uri), 200),
                safe_text(media_type, 100),
                exc,
            )
    return typed


class McpResourceSubscription:
    """Updates of one resource, from :meth:`McpClient.subscribe_resource`.

    An async context manager: entering subscribes (``resources/subscribe``, or a
    ``subscriptions/listen`` stream on 2026-07-28 servers), leaving unsubscribes (the
    ``resources/unsubscribe`` waits until the client's last open subscription to the
    same URI is left: the server holds one per URI). Inside,
    iterate it to get the URI of each update (the resource's own, or one of its
    sub-resources'); then read it again with :meth:`McpClient.read_resource`. Updates
    not read yet are merged per URI. The iteration ends when the client is closed, and
    raises :class:`~agcore_tools.McpError` when the connection is lost; a new
    connection needs a new subscription.

    Example:
        >>> async def follow(client) -> None:
        ...     async with client.subscribe_resource("file:///notes.txt") as updates:
        ...         async for uri in updates:
        ...             print((await client.read_resource(uri))[0].text)
    """

    def __init__(self, client: Any, uri: str, session: Session) -> None:
        _check_uri(session.server_name, uri)
        self.client = client
        """The :class:`~agcore_tools.McpClient` the subscription runs on."""
        self.uri = uri
        """The subscribed URI."""
        self._session = session
        self._conn: Connection | None = None
        self._feed: Feed | None = None
        self._listen: AbstractAsyncContextManager[Subscription] | None = None
        self._stream: Subscription | None = None

    async def __aenter__(self) -> Self:
        if self._conn is not None:
            raise McpUsageError(
                f"{self!r} is already open; make a new one with subscribe_resource()"
            )
        session, uri = self._session, self.uri
        conn = await require_capability(session, "resources/subscribe", "resources")
        client = conn.client
        capability = client.server_capabilities.resources if client is not None else None
        if client is None or capability is None or not capability.subscribe:
            raise McpError(
                session.server_name,
                f"cannot subscribe to '{uri}': the server offers no subscriptions",
            )
        if is_modern(client):
            await self._open_listen(session, client)
        else:
            await self._subscribe(session, conn)
        self._conn = conn
        return self

    async def _open_listen(self, session: Session, client: Any) -> None:
        listen = client.listen(resource_subscriptions=[self.uri])
        stream = await session.send(
            "subscriptions/listen", lambda _c, _m: listen.__aenter__(), resend=False
        )
        if self.uri not in (stream.honored.resource_subscriptions or ()):
            await listen.__aexit__(None, None, None)
            raise McpError(
                session.server_name,
                f"cannot subscribe to '{self.uri}': the server declined the subscription",
            )
        self._listen, self._stream = listen, stream

    async def _subscribe(self, session: Session, conn: Connection) -> None:
        import mcp_types as types

        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=self.uri))
        feed = conn.updates.open(self.uri)
        try:
            await session.send(
                f"resources/subscribe '{self.uri}'",
                lambda client, _m: client.session.send_request(request, types.EmptyResult),
                resend=False,
            )
        except BaseException:
            conn.updates.close(feed)
            raise
        self._feed = feed

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        listen, self._listen, self._stream = self._listen, None, None
        feed, self._feed = self._feed, None
        if listen is not None:
            await listen.__aexit__(None, None, None)
        if conn is None or feed is None:
            return
        last = conn.updates.close(feed)
        session = self._session
        if session.conn is not conn or not conn.usable:
            return  # the server forgot the subscription with the connection
        if not last:
            return  # the server's one subscription to the URI still feeds another
        import mcp_types as types

        request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=self.uri))
        try:
            await session.send(
                f"resources/unsubscribe '{self.uri}'",
                lambda client, _m: client.session.send_request(request, types.EmptyResult),
                resend=False,
            )
        except McpError as error:
            # Updates that still come are dropped: no subscription takes them.
            logger.warning("MCP server '%s': %s", session.server_name, error.message)

    def __aiter__(self) -> McpResourceSubscription:
        return self

    async def __anext__(self) -> str:
        conn = self._conn
        if conn is None:
            raise McpUsageError(f"iterate {self!r} inside 'async with', not before or after it")
        if self._feed is not None:
            uri = await self._feed.next()
            if uri is None:
                raise self._end(conn, self._feed.lost)
            return uri
        return await self._next_event(conn)

    async def _next_event(self, conn: Connection) -> str:
        from mcp.client.subscriptions import ResourceUpdated, SubscriptionLost

        stream = self._stream
        assert stream is not None
        while True:
            try:
                event = await stream.__anext__()
            except SubscriptionLost as exc:
                lost = conn.lost_reason or conn.secrets.mask(str(exc))
                raise self._end(conn, lost) from conn.secrets.masked(exc)
            if isinstance(event, ResourceUpdated):
                return event.uri

    def _end(self, conn: Connection, lost: str | None) -> BaseException:
        if conn.state is State.CLOSED or lost is None:
            return StopAsyncIteration()
        return McpError(
            self._session.server_name,
            f"the subscription to '{self.uri}' ended: connection lost ({lost})",
        )

    def __repr__(self) -> str:
        return f"<McpResourceSubscription {self.uri!r} on {self._session.server_name!r}>"


def _check_uri(server_name: str, uri: object) -> None:
    if not isinstance(uri, str) or not uri:
        raise McpUsageError(
            f"MCP server '{server_name}': a resource URI must be a non-empty string, got {uri!r}"
        )


def _wire(model: Any) -> dict[str, Any]:
    if model is None:
        return {}
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped
