"""The resource updates of handshake-era subscriptions, fed from the connection's message
handler (``notifications/resources/updated``) to the open
:class:`~agcore_tools.mcp.McpResourceSubscription` objects.

A leaf: the connection holds one :class:`UpdateFeeds`, and the subscriptions, which
send requests through the session, read from it.
"""

from __future__ import annotations

import asyncio

__all__ = ["Feed", "UpdateFeeds"]


class Feed:
    """The updates of one handshake-era subscription, merged per URI until read."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.pending: dict[str, None] = {}
        self.ended = False
        self.lost: str | None = None
        self._wake = asyncio.Event()

    def covers(self, uri: str) -> bool:
        # The spec allows an update to name a sub-resource of the subscribed URI.
        if uri == self.uri:
            return True
        base = self.uri
        return uri.startswith(base) and (base.endswith("/") or uri[len(base)] in "/?#")

    def push(self, uri: str) -> None:
        self.pending[uri] = None
        self._wake.set()

    def end(self, lost: str | None) -> None:
        self.ended, self.lost = True, lost
        self._wake.set()

    async def next(self) -> str | None:
        """The next updated URI, or None once the feed has ended."""
        while True:
            if self.pending:
                uri = next(iter(self.pending))
                del self.pending[uri]
                return uri
            if self.ended:
                return None
            self._wake.clear()
            await self._wake.wait()


class UpdateFeeds:
    """A connection's open handshake-era subscriptions, fed from its message handler."""

    def __init__(self) -> None:
        self._feeds: list[Feed] = []
        self._ended: tuple[str | None] | None = None

    def open(self, uri: str) -> Feed:
        """A new feed for ``uri`` (already ended if the connection has)."""
        feed = Feed(uri)
        if self._ended is not None:
            feed.end(self._ended[0])
        else:
            self._feeds.append(feed)
        return feed

    def close(self, feed: Feed) -> bool:
        """Stop feeding ``feed``; True when no other open feed follows its URI (the
        server holds one subscription per URI, which can end now).

        Example:
            >>> feeds = UpdateFeeds()
            >>> first, second = feeds.open("file:///a"), feeds.open("file:///a")
            >>> feeds.close(first), feeds.close(second)
            (False, True)
        """
        if feed in self._feeds:
            self._feeds.remove(feed)
        return all(other.uri != feed.uri for other in self._feeds)

    def deliver(self, uri: str) -> None:
        """A ``notifications/resources/updated`` for ``uri`` arrived."""
        for feed in self._feeds:
            if feed.covers(uri):
                feed.push(uri)

    def end(self, lost: str | None) -> None:
        """The connection is over: closed (``lost`` None) or lost for that reason."""
        if self._ended is None:
            self._ended = (lost,)
        feeds, self._feeds = self._feeds, []
        for feed in feeds:
            feed.end(self._ended[0])
