"""A low-level MCP server for list behaviour: 25 tools over pages of 10, a tools/list
counter, a protocol error (a JSON-RPC error answer to tools/call), and an optional ttlMs
hint (``--ttl-ms``); 25 resources and 25 prompts over pages of 10, a resource-template
list whose cursor never ends, a resource read answered with a JSON-RPC error
(``paged://fail/CODE``); with ``--task-tool`` a 26th tool that requires
task-augmented execution (SEP-1686); with ``--tools-only``, no resources or prompts (nor
their capabilities)."""

from __future__ import annotations

import argparse
import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

PAGE = 10
NAMES = ["count_lists", "protocol_error", *(f"tool_{i:02d}" for i in range(23))]
lists_served = 0


def _tool(name: str) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    execution = types.ToolExecution(task_support="required") if name == "research" else None
    return types.Tool(
        name=name, description=f"The {name} tool.", input_schema=schema, execution=execution
    )


def _page(params: types.PaginatedRequestParams | None, total: int) -> tuple[range, str | None]:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = min(start + PAGE, total)
    return range(start, end), (str(end) if end < total else None)


async def list_resources(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    numbers, cursor = _page(params, 25)
    resources = [types.Resource(uri=f"paged://{i:02d}", name=f"r{i:02d}") for i in numbers]
    return types.ListResourcesResult(resources=resources, next_cursor=cursor)


async def read_resource(
    ctx: Any, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    # paged://fail/CODE is answered with a JSON-RPC error of that code (a server's own,
    # such as -32000); any other resource reads as its URI.
    uri = str(params.uri)
    if uri.startswith("paged://fail/"):
        raise MCPError(int(uri.removeprefix("paged://fail/")), "the archive is offline")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=uri)])


async def list_prompts(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    numbers, cursor = _page(params, 25)
    prompts = [types.Prompt(name=f"p{i:02d}") for i in numbers]
    return types.ListPromptsResult(prompts=prompts, next_cursor=cursor)


async def list_templates(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    # A broken server: the same cursor again and again.
    template = types.ResourceTemplate(uri_template="paged://{n}", name="n")
    return types.ListResourceTemplatesResult(resource_templates=[template], next_cursor="again")


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    global lists_served
    start = int(params.cursor) if params is not None and params.cursor else 0
    if start == 0:
        lists_served += 1
    end = start + PAGE
    cursor = str(end) if end < len(NAMES) else None
    return types.ListToolsResult(tools=[_tool(n) for n in NAMES[start:end]], next_cursor=cursor)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "protocol_error":
        # By default a refusal of the call (-32602, as TypeScript servers on the low-level
        # Server answer a wrong argument); else the code and message asked for, as mcp-go
        # answers a failed handler (code 0), echoing $API_TOKEN from the environment as a
        # server failing on its credential does.
        args = params.arguments or {}
        message = str(args.get("message", "this tool always answers with a protocol error"))
        message = message.replace("$API_TOKEN", os.environ.get("API_TOKEN", ""))
        raise MCPError(int(args.get("code", types.INVALID_PARAMS)), message)
    if params.name == "research" and params.task is None:
        # What a server does with a task-requiring tool called without a task.
        raise MCPError(types.METHOD_NOT_FOUND, "tool 'research' requires task augmentation")
    text = str(lists_served) if params.name == "count_lists" else params.name
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ttl-ms", type=int, default=None)
    parser.add_argument("--task-tool", action="store_true")
    parser.add_argument("--tools-only", action="store_true")  # no resources, no prompts
    options = parser.parse_args()
    if options.task_tool:
        NAMES.append("research")
    hints = {"tools/list": CacheHint(ttl_ms=options.ttl_ms)} if options.ttl_ms is not None else None
    # Capabilities follow the handlers given: without these, the server offers neither.
    others: dict[str, Any] = (
        {}
        if options.tools_only
        else {
            "on_list_resources": list_resources,
            "on_read_resource": read_resource,
            "on_list_resource_templates": list_templates,
            "on_list_prompts": list_prompts,
        }
    )
    server: Server[Any] = Server(
        "paged", on_list_tools=list_tools, on_call_tool=call_tool, cache_hints=hints, **others
    )

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
