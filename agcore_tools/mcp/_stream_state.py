"""Where a connection's notification stream stands, in a module without the HTTP client.

The connection keeps this state for every transport and era (``McpClient.
notification_stream``), so it must not import ``httpx2``: ``import agcore_tools`` stays
light. What keeps the 2025-11-25 GET stream coming back is in ``_listen``, which the
HTTP transport alone imports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

__all__ = ["NotificationStream"]

logger = logging.getLogger("agcore_tools.mcp")


class NotificationStream:
    """The state of the stream a connection's notifications come on: ``"open"``,
    ``"lost"`` (being reopened) or ``"none"`` (the server offers none), as told by
    :meth:`event` (2025-11-25: the GET stream's :class:`ListenStream`; 2026-07-28: the
    ``subscriptions/listen`` loop of ``_connection``).

    It logs a WARNING when the stream is lost, and tells ``on_tools_changed`` (None:
    silently) that the tool list must be read afresh; once the stream is back, it tells
    it again, with the reason the tool cache logs (INFO).
    """

    def __init__(
        self,
        server_name: str,
        on_tools_changed: Callable[[str | None], None],
        ready: Callable[[], bool],
    ) -> None:
        self.server_name = server_name
        self.state: Literal["open", "lost", "none"] = "open"
        self._tools_changed = on_tools_changed
        self._ready = ready

    def event(self, event: str, reason: str | None) -> None:
        """``"open"``, ``"lost"`` (a failure, ``reason`` says which), ``"ended"`` (the
        server ended it) or ``"none"`` (the server offers none; ``reason`` says how)."""
        name = self.server_name
        if event == "open":
            if self.state == "lost":
                # Always at INFO, as the loss was a WARNING: the cache's own line drops to
                # DEBUG when the list was no longer fresh, as it is while the stream is lost.
                logger.info(
                    "MCP server '%s': the notification stream is back; tool list cache cleared",
                    name,
                )
                self._tools_changed(None)
            self.state = "open"
        elif event == "none":
            self.state = "none"
            if reason is not None:
                logger.info(
                    "MCP server '%s': %s; tool lists are refreshed by TTL or refresh_tools() only",
                    name,
                    reason,
                )
        elif self.state != "lost" and self._ready():
            self.state = "lost"
            if event == "lost":
                logger.warning(
                    "MCP server '%s': the notification stream was lost (%s); reopening it, "
                    "and listing tools afresh on each read until it is back",
                    name,
                    reason,
                )
            else:
                logger.debug("MCP server '%s': the server ended the notification stream", name)
            self._tools_changed(None)
