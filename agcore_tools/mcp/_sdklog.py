"""The MCP SDK's log records about the client's own connections, routed to its logger.

Some failures the client handles itself are also logged by the SDK, louder and less
clearly: every 2025-11-25 session renewal logs a WARNING ("Session termination failed",
the closing ``DELETE`` to a server that forgot the session or stopped answering), and a
connection the client gives up (a frozen server) an ERROR with a traceback ("Error in
post_writer"), and an answer that is no MCP message (an HTML login page, bad SSE)
an ERROR with a traceback too. The client's own line says what happened ("connection lost: ...",
"starting it again"); these records go to the ``agcore_tools.mcp`` logger at DEBUG,
traceback kept, so an application's log carries that one line.

Only records logged inside a connection's owner task (and the SDK tasks it starts)
are routed: :data:`CONNECTION` names its server there, with what masks its secrets,
since the SDK quotes what the server sent (an answer echoing the request's token). The
SDK used by other code in the same process logs as before.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import NamedTuple, Protocol

__all__ = ["CONNECTION", "Routed", "install"]

logger = logging.getLogger("agcore_tools.mcp")


class Masker(Protocol):
    """What hides a connection's secrets (its ``SentSecrets``)."""

    def mask(self, text: str) -> str: ...

    def masked(self, exc: BaseException) -> BaseException: ...


class Routed(NamedTuple):
    """The connection whose owner task (or an SDK task it started) runs."""

    server: str
    secrets: Masker


CONNECTION: ContextVar[Routed | None] = ContextVar("agcore_tools_mcp_connection", default=None)
"""The connection whose owner task (or an SDK task it started) runs, if any."""

_ROUTED = {
    "mcp.client.streamable_http": (
        "Session termination failed",
        "Error in post_writer",
        # An answer that is no MCP message (a login page, a proxy's error, bad SSE):
        # the SDK hands the call an error, which the client's own message reports.
        "Error parsing SSE message",
        "Error parsing JSON response",
        "Unexpected content type",
    ),
}
"""SDK logger name: the beginnings of the messages routed."""


class _Router(logging.Filter):
    """Routes the records of :data:`_ROUTED` logged inside a connection (see the module docs)."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        routed = CONNECTION.get()
        if routed is None:
            return True
        message = record.getMessage()
        if not message.startswith(self.prefixes):
            return True
        error = record.exc_info[1] if record.exc_info else None
        logger.debug(
            "MCP server '%s': the MCP SDK reported: %s",
            routed.server,
            routed.secrets.mask(message),
            exc_info=routed.secrets.masked(error) if error is not None else None,
        )
        return False


_installed = False


def install() -> None:
    """Add the router to the SDK's loggers, once per process."""
    global _installed
    if _installed:
        return
    _installed = True
    for name, prefixes in _ROUTED.items():
        logging.getLogger(name).addFilter(_Router(prefixes))
