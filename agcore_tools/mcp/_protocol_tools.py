"""Two optional tools that give a model the server's resources and prompts.

``read_resource`` lets a model follow the ``resource_link`` parts that tools return (and
read any resource whose URI it knows); ``get_prompt`` lets it fetch a server's prompt.
Both are plain :class:`~agcore_tools.BaseTool` adapters that call through the client,
registered next to :meth:`McpClient.into_tools`.

Their permissions come from the client's permission policy, applied to what the
protocol says of them: ``readOnlyHint: true, openWorldHint: false`` (reading a resource
or a prompt changes nothing). The default policy therefore requires ``read``; a policy
that does not trust annotations requires what it requires of every tool.

``get_prompt`` takes a prompt's arguments as a list of ``{name, value}`` pairs, which
strict mode can describe (a map with free keys it cannot). Made with the server's
prompts (``prompts=await client.list_prompts()``), its description names them and
their arguments, and ``name`` and each pair's ``name`` are enums of them: a snapshot of
that list, so a prompt the server adds later needs the tool made again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ..base import BaseTool, ToolContext
from ..error import InvalidArgumentsError, McpError, McpUsageError
from ..permission import Permission
from ._adapter import adapter_name
from ._recover import refused_by_server
from ._resources import contents_value
from .models import McpPrompt, McpPromptInfo, McpResourceContents, McpToolInfo
from .policy import PermissionPolicy

__all__ = ["ProtocolCaller", "prompt_tool", "resource_reader_tool"]

T = TypeVar("T")

logger = logging.getLogger("agcore_tools.mcp")

_READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
_DESCRIBED = 20  # prompts described a line each in get_prompt's description
_NAMED = 200  # more names than this (prompts', or their arguments') get no enum


class ProtocolCaller(Protocol):
    """What these adapters need of their client (:class:`~agcore_tools.McpClient` is one)."""

    @property
    def server_name(self) -> str:
        """Names the server in messages and categories."""
        ...

    async def read_resource(self, uri: str) -> list[McpResourceContents]:
        """The parts of the resource at ``uri``."""
        ...

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> McpPrompt:
        """The prompt ``name``, filled in with ``arguments``."""
        ...


class _ProtocolTool(BaseTool):
    """An adapter for a protocol request other than ``tools/call``."""

    def __init__(
        self, client: ProtocolCaller, info: McpToolInfo, name: str, policy: PermissionPolicy
    ):
        self.client = client
        """The client the requests go through."""
        self.info = info
        """The adapter described as a tool (what the permission policy judged)."""
        self.name = name
        self.description = info.description
        self.parameters = dict(info.input_schema)
        self.required_permissions = Permission.parse_all(policy(info))
        self.tags = ("mcp",)
        self.category = f"mcp:{client.server_name}"

    def _string(self, args: dict[str, Any], key: str) -> str:
        value = args.get(key)
        if not isinstance(value, str) or not value:
            problem = "Field required" if value is None else "must be a non-empty string"
            raise InvalidArgumentsError(self.name, f"{key}: {problem}", errors=[(key, problem)])
        return value

    async def _asked(self, request: Awaitable[T]) -> T:
        """``request``'s answer; a server's refusal of it (an unknown URI or prompt, a
        missing argument: the model's mistake) becomes recoverable, so the model reads
        it and can try again. So is the client's refusal to send it to a server that
        does not offer prompts (made recoverable where it is raised). Other failures
        keep their meaning."""
        try:
            return await request
        except McpError as exc:
            if not refused_by_server(exc):
                raise
            raise McpError(
                exc.server_name, exc.reason, tool_name=self.name, recoverable=True
            ) from exc.__cause__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} on {self.client.server_name!r}>"


class ResourceReaderTool(_ProtocolTool):
    """``resources/read`` as a tool: ``{"uri": ...}`` in, the resource's content out."""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Read the resource; text when it is all text, else its parts as typed JSON,
        an image, a sound or a PDF attached for the model to see."""
        uri = self._string(args, "uri")
        return contents_value(await self._asked(self.client.read_resource(uri)))


class PromptTool(_ProtocolTool):
    """``prompts/get`` as a tool: a prompt's name and arguments in, its messages out."""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Get the prompt; its messages as MCP sends them (role and typed content)."""
        name = self._string(args, "name")
        arguments = self._pairs(args.get("arguments") or {})
        # Prompt arguments are strings on the wire; a model may well send 3 for "3". A
        # null is an argument left out, as strict mode's nullable optional ones are.
        values = {
            k: v if isinstance(v, str) else json.dumps(v)
            for k, v in arguments.items()
            if v is not None
        }
        prompt = await self._asked(self.client.get_prompt(name, values))
        return [dict(message) for message in prompt.messages]

    def _pairs(self, arguments: Any) -> dict[str, Any]:
        # The schema's pairs, or a map of them (as the schema had it before, and as a
        # direct invoke() may still send).
        if isinstance(arguments, dict):
            return arguments
        pairs = arguments if isinstance(arguments, list) else [None]
        values: dict[str, Any] = {}
        for pair in pairs:
            if not isinstance(pair, dict) or not isinstance(pair.get("name"), str):
                problem = 'must be a list of {"name": ..., "value": ...} pairs'
            elif pair["name"] in values:
                problem = f"{pair['name']!r} is given twice"
            else:
                values[pair["name"]] = pair.get("value")
                continue
            raise InvalidArgumentsError(
                self.name, f"arguments: {problem}", errors=[("arguments", problem)]
            )
        return values


def _warn_unoffered(server: str, offered: bool | None, capability: str, built: str) -> None:
    # Not refused: an app that registers these for every server of a config file
    # would fail to start on the first server with tools alone; the model reads a
    # recoverable error should it call the tool all the same.
    if offered is False:
        logger.warning(
            "MCP server '%s' offers no %s: %s() makes a tool whose every call fails; "
            "leave it out for this server",
            server,
            capability,
            built,
        )


def resource_reader_tool(
    client: ProtocolCaller,
    prefix: str | None,
    policy: PermissionPolicy,
    *,
    offered: bool | None = None,
) -> BaseTool:
    """The ``read_resource`` adapter of ``client``; ``offered`` says whether the server
    declared resources (None: not known), and False logs a warning."""
    server = client.server_name
    _warn_unoffered(server, offered, "resources", "resource_reader_tool")
    info = McpToolInfo(
        name="read_resource",
        description=(
            f"Read a resource of the MCP server '{server}' by its URI, such as the uri of "
            "a resource_link that one of its tools returned. Returns the text, or the "
            "parts (text, or base64 blob) as JSON; an image, a sound or a PDF is attached "
            "for you to see."
        ),
        input_schema={
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
            "required": ["uri"],
            "additionalProperties": False,
        },
        annotations=_READ_ONLY,
    )
    return ResourceReaderTool(client, info, adapter_name(info.name, prefix), policy)


def prompt_tool(
    client: ProtocolCaller,
    prefix: str | None,
    policy: PermissionPolicy,
    *,
    offered: bool | None = None,
    prompts: Sequence[McpPromptInfo] | None = None,
) -> BaseTool:
    """The ``get_prompt`` adapter of ``client``; ``offered`` says whether the server
    declared prompts (None: not known), and False logs a warning. ``prompts`` (the
    server's, from ``list_prompts()``) are named in its description and schema."""
    server = client.server_name
    _warn_unoffered(server, offered, "prompts", "prompt_tool")
    if prompts is not None and (
        isinstance(prompts, str)
        or not isinstance(prompts, Sequence)
        or not all(isinstance(p, McpPromptInfo) for p in prompts)
    ):
        raise McpUsageError(
            f"MCP server '{server}': prompt_tool(prompts=...) takes the list that "
            f"await client.list_prompts() returns, got {type(prompts).__name__}"
        )
    listed = list({p.name: p for p in prompts or ()}.values())
    named = prompts is not None and 0 < len(listed) <= _NAMED
    prompt_name: dict[str, Any] = {"type": "string", "description": "The prompt's name."}
    argument_name: dict[str, Any] = {"type": "string", "description": "The argument's name."}
    argument_names = list(dict.fromkeys(str(a.get("name")) for p in listed for a in p.arguments))
    if named:
        prompt_name["enum"] = [p.name for p in listed]
        if 0 < len(argument_names) <= _NAMED:
            argument_name["enum"] = argument_names
    info = McpToolInfo(
        name="get_prompt",
        description=(
            f"Get a prompt of the MCP server '{server}' by name, filled in with its "
            "arguments. Returns the prompt's messages." + _listing(listed, prompts, named)
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": prompt_name,
                "arguments": {
                    "type": "array",
                    "description": "The prompt's arguments, each as its name and value.",
                    "items": {
                        "type": "object",
                        "properties": {"name": argument_name, "value": {"type": "string"}},
                        "required": ["name", "value"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        annotations=_READ_ONLY,
    )
    return PromptTool(client, info, adapter_name(info.name, prefix), policy)


def _listing(listed: list[McpPromptInfo], prompts: object, named: bool) -> str:
    """The prompts, a line each (the first :data:`_DESCRIBED`): ``name(argument,
    optional?): the first line of its description``."""
    if prompts is None:
        return ""
    if not listed:
        return " The server lists no prompts."
    lines = []
    for prompt in listed[:_DESCRIBED]:
        arguments = ", ".join(
            f"{a.get('name')}{'' if a.get('required') else '?'}" for a in prompt.arguments
        )
        about = (prompt.description.strip().splitlines() or [""])[0]
        about = about if len(about) <= 100 else about[:97] + "..."
        lines.append(f"\n- {prompt.name}({arguments})" + (f": {about}" if about else ""))
    rest = len(listed) - _DESCRIBED
    if rest > 0:
        lines.append(f"\n... and {rest} more" + (", named in the enum of name." if named else "."))
    return " Its prompts (? marks an optional argument):" + "".join(lines)
