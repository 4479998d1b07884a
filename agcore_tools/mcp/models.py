"""Plain data the MCP client hands out: a server's tool, a log message, a progress update.

They carry wire values (JSON-compatible), not MCP SDK objects, so code that uses them
does not depend on the SDK's types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["McpLogMessage", "McpProgress", "McpToolInfo"]


@dataclass(frozen=True, slots=True)
class McpToolInfo:
    """One tool as an MCP server lists it.

    Example:
        >>> info = McpToolInfo("read_file", annotations={"readOnlyHint": True})
        >>> info.hint("readOnlyHint"), info.hint("openWorldHint")
        (True, None)
    """

    name: str
    """The server's name for the tool."""
    description: str = ""
    """What the tool does (empty when the server gives none)."""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """The JSON Schema of its arguments."""
    output_schema: Mapping[str, Any] | None = None
    """The JSON Schema of its ``structuredContent``, when it declares one."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """Its annotations with their wire names (``readOnlyHint``, ``destructiveHint``,
    ``idempotentHint``, ``openWorldHint``, ``title``); absent ones are missing.
    They are hints from the server, not guarantees."""
    title: str | None = None
    """A display name, when the server gives one."""

    def hint(self, name: str) -> bool | None:
        """A boolean annotation such as ``"readOnlyHint"``, or None when absent."""
        value = self.annotations.get(name)
        return value if isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class McpLogMessage:
    """A ``notifications/message`` log entry from a server.

    Example:
        >>> McpLogMessage("fs", "warning", "disk almost full").level
        'warning'
    """

    server_name: str
    """The client's name for the server."""
    level: str
    """The MCP log level: debug, info, notice, warning, error, critical, alert, emergency."""
    data: Any
    """The logged value (any JSON)."""
    logger: str | None = None
    """The server-side logger name, if given."""


@dataclass(frozen=True, slots=True)
class McpProgress:
    """A ``notifications/progress`` update for a tool call in flight.

    Example:
        >>> McpProgress("render", "draw", 3.0, 10.0).fraction
        0.3
    """

    server_name: str
    """The client's name for the server."""
    tool_name: str
    """The tool whose call reports progress."""
    progress: float
    """Progress so far (increases with each update)."""
    total: float | None = None
    """The value ``progress`` will reach, when known."""
    message: str | None = None
    """A human-readable status, when given."""

    @property
    def fraction(self) -> float | None:
        """``progress / total``, or None when the total is unknown."""
        return self.progress / self.total if self.total else None
