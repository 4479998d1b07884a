"""Plain data the MCP client hands out: a server's tools, resources and prompts, what
reading or getting them returns, completions, log messages and progress updates.

They carry wire values (JSON-compatible), not MCP SDK objects, so code that uses them
does not depend on the SDK's types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "McpCompletion",
    "McpLogMessage",
    "McpProgress",
    "McpPrompt",
    "McpPromptInfo",
    "McpResourceContents",
    "McpResourceInfo",
    "McpResourceTemplateInfo",
    "McpTaskStatus",
    "McpToolInfo",
]


@dataclass(frozen=True, slots=True)
class McpToolInfo:
    """One tool as an MCP server lists it.

    Example:
        >>> info = McpToolInfo("read_file", annotations={"readOnlyHint": True})
        >>> info.hint("readOnlyHint"), info.hint("openWorldHint")
        (True, None)
        >>> McpToolInfo("save_pdf", meta={"ui": {"visibility": ["app"]}}).app_only
        True
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
    task_support: str | None = None
    """Its ``execution.taskSupport`` (2025-11-25 servers): ``"forbidden"``, ``"optional"``
    or ``"required"``; None when absent. :meth:`McpClient.into_tools` offers tools that
    require tasks (SEP-1686) too: their adapters run each call as a task, as
    :meth:`McpClient.start_task` does."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Its ``_meta`` as the server sent it (extensions' data, such as the MCP Apps
    ``ui`` key); empty when it sent none."""

    def hint(self, name: str) -> bool | None:
        """A boolean annotation such as ``"readOnlyHint"``, or None when absent."""
        value = self.annotations.get(name)
        return value if isinstance(value, bool) else None

    @property
    def app_only(self) -> bool:
        """Whether the server offers the tool to its app alone, not to the model: its
        MCP Apps visibility (``_meta.ui.visibility``, or the older flat
        ``_meta["ui/visibility"]``) lists ``"app"`` without ``"model"``. Such a tool is
        for the app the server renders (an iframe's callbacks): :meth:`McpClient.into_tools`
        and :meth:`McpClient.definitions` leave it out, and :meth:`McpClient.call_tool`
        still calls it. No visibility, or an empty one, means both.

        Example:
            >>> McpToolInfo("show", meta={"ui": {"visibility": ["model", "app"]}}).app_only
            False
            >>> McpToolInfo("poll", meta={"ui/visibility": ["app"]}).app_only
            True
        """
        ui = self.meta.get("ui")
        seen = ui.get("visibility") if isinstance(ui, Mapping) else None
        if seen is None:
            seen = self.meta.get("ui/visibility")
        return isinstance(seen, (list, tuple)) and bool(seen) and "model" not in seen

    @property
    def renders_app(self) -> bool:
        """Whether the tool has an app the host renders: its MCP Apps ``ui://`` page
        (``_meta.ui.resourceUri``, or the older flat ``_meta["ui/resourceUri"]``). Such
        a tool's ``structuredContent`` is its app's data, which MCP Apps keeps out of the
        model's context, and its text is what the model is to read: the adapters of
        :meth:`McpClient.into_tools` give the model (and a code-mode program) the text.

        Example:
            >>> McpToolInfo("display_pdf", meta={"ui": {"resourceUri": "ui://pdf/app.html"}}).renders_app
            True
            >>> McpToolInfo("list_pdfs").renders_app
            False
        """
        ui = self.meta.get("ui")
        page = ui.get("resourceUri") if isinstance(ui, Mapping) else None
        if page is None:
            page = self.meta.get("ui/resourceUri")
        return isinstance(page, str) and bool(page)


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
    """The logged value (any JSON), as the server sent it: not masked, escaped, cut or
    rate-limited as on the ``agcore_tools.mcp.server`` logger, so a callback that logs
    it must do that itself (``logger.info("%r", message.data)`` escapes it)."""
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


@dataclass(frozen=True, slots=True)
class McpTaskStatus:
    """Where an MCP task stands (``tasks/get``), as plain JSON-able values.

    Times are the server's ISO 8601 strings, as sent; ``poll_interval`` and ``ttl``
    are seconds (the wire's milliseconds divided by 1000).

    Example:
        >>> status = McpTaskStatus("t-1", "working", message="step 1/3", poll_interval=0.5)
        >>> status.terminal, status.message
        (False, 'step 1/3')
        >>> McpTaskStatus("t-1", "completed").terminal
        True
    """

    task_id: str
    """The server's id of the task."""
    status: str
    """``"working"``, ``"input_required"``, ``"completed"``, ``"failed"`` or ``"cancelled"``."""
    message: str | None = None
    """The server's ``statusMessage``, when it gives one."""
    poll_interval: float | None = None
    """Seconds the server suggests between two polls, when it says."""
    ttl: float | None = None
    """Seconds the server keeps the task after its creation (None: unlimited or unsaid)."""
    created_at: str | None = None
    """When the task was created (ISO 8601, as the server sent it)."""
    updated_at: str | None = None
    """When its status last changed (ISO 8601, as the server sent it)."""

    @property
    def terminal(self) -> bool:
        """True once the task has ended: completed, failed or cancelled."""
        return self.status in ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class McpResourceInfo:
    """One resource as an MCP server lists it (``resources/list``).

    Example:
        >>> info = McpResourceInfo("file:///notes.txt", "notes", mime_type="text/plain")
        >>> info.uri, info.annotations
        ('file:///notes.txt', {})
    """

    uri: str
    """Its URI, which :meth:`McpClient.read_resource` reads."""
    name: str
    """The server's name for it."""
    title: str | None = None
    """A display name, when the server gives one."""
    description: str = ""
    """What it holds (empty when the server gives no description)."""
    mime_type: str | None = None
    """Its MIME type, when known."""
    size: int | None = None
    """Its size in bytes (before base64), when known."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """Its annotations with their wire names (``audience``, ``priority``,
    ``lastModified``); absent ones are missing."""


@dataclass(frozen=True, slots=True)
class McpResourceTemplateInfo:
    """A family of resources, addressed by an RFC 6570 URI template
    (``resources/templates/list``).

    Example:
        >>> template = McpResourceTemplateInfo("weather://{city}", "weather")
        >>> template.uri_template.replace("{city}", "paris")
        'weather://paris'
    """

    uri_template: str
    """The URI template, such as ``weather://{city}``; fill it in to get a readable URI."""
    name: str
    """The server's name for it."""
    title: str | None = None
    """A display name, when the server gives one."""
    description: str = ""
    """What its resources hold (empty when the server gives no description)."""
    mime_type: str | None = None
    """The MIME type of all its resources, when they share one."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """Its annotations with their wire names; absent ones are missing."""


@dataclass(frozen=True, slots=True)
class McpResourceContents:
    """One part of what ``resources/read`` returned: text, or a base64 blob.

    Example:
        >>> McpResourceContents("file:///a.txt", "text/plain", text="héllo").data
        b'h\\xc3\\xa9llo'
        >>> McpResourceContents("file:///a.bin", blob="AAE=").data
        b'\\x00\\x01'
    """

    uri: str
    """The URI of this part (a sub-resource's, possibly)."""
    mime_type: str | None = None
    """Its MIME type, when known."""
    text: str | None = None
    """The text, for a text part (None for a blob)."""
    blob: str | None = None
    """The base64 data, for a binary part (None for text)."""

    @property
    def data(self) -> bytes:
        """The content as bytes: the text in UTF-8, or the blob decoded."""
        if self.blob is not None:
            import base64

            return base64.b64decode(self.blob)
        return (self.text or "").encode()


@dataclass(frozen=True, slots=True)
class McpPromptInfo:
    """One prompt (template) as an MCP server lists it (``prompts/list``).

    Example:
        >>> info = McpPromptInfo("review", arguments=({"name": "code", "required": True},))
        >>> [argument["name"] for argument in info.arguments]
        ['code']
    """

    name: str
    """The name :meth:`McpClient.get_prompt` takes."""
    title: str | None = None
    """A display name, when the server gives one."""
    description: str = ""
    """What it is for (empty when the server gives no description)."""
    arguments: tuple[Mapping[str, Any], ...] = ()
    """Its arguments with their wire fields (``name``, and ``title``, ``description``,
    ``required`` when given)."""


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """A prompt filled in by the server (``prompts/get``): messages ready for a model.

    Example:
        >>> prompt = McpPrompt("greet", messages=(
        ...     {"role": "user", "content": {"type": "text", "text": "Say hi to Ann."}},))
        >>> prompt.messages[0]["content"]["text"]
        'Say hi to Ann.'
    """

    name: str
    """The prompt's name."""
    description: str = ""
    """The server's description of the result (empty when none)."""
    messages: tuple[Mapping[str, Any], ...] = ()
    """The messages, as MCP sends them: ``{"role": "user" | "assistant", "content":
    part}``, the part being typed JSON (``{"type": "text", "text": ...}``, or an image,
    audio, resource or resource_link part)."""


@dataclass(frozen=True, slots=True)
class McpCompletion:
    """Suggested values for a prompt or resource-template argument (``completion/complete``).

    Example:
        >>> McpCompletion(("Paris", "Peru"), total=2).values
        ('Paris', 'Peru')
    """

    values: tuple[str, ...] = ()
    """Up to 100 suggestions, best first."""
    total: int | None = None
    """How many suggestions exist in all, when the server says."""
    has_more: bool | None = None
    """Whether there are more than ``values``, when the server says."""
