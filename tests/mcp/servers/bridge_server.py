"""A low-level MCP server that, like an OpenAPI bridge, declares input schemas and never
checks arguments against them: it acts on whatever a call carries. Over stdio:
``python bridge_server.py``.

``delete_pet`` (``petId`` an integer), ``list_pets`` (no key but ``limit`` and ``tag``),
``add_pet`` (an optional ``tag`` and a nested optional ``owner.phone``) and ``refund``
(an ``amount`` in cents, ``multipleOf: 0.01``, and OpenAPI 3.0's ``nullable`` ``note``)
answer with the request they would send to the pet API. ``received`` answers with the arguments of
every call the server got before it, as JSON: what reached the server, and so what a
bridge would have sent on.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SCHEMAS: dict[str, dict[str, Any]] = {
    "delete_pet": {
        "type": "object",
        "properties": {"petId": {"type": "integer", "description": "The pet's id."}},
        "required": ["petId"],
    },
    "list_pets": {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "maximum": 100},
            "tag": {"type": "string"},
        },
        "additionalProperties": False,
    },
    "add_pet": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tag": {"type": "string"},
            "owner": {
                "type": "object",
                "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
                "required": ["email"],
                "additionalProperties": False,
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    "refund": {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "minimum": 0, "multipleOf": 0.01},
            "note": {"type": "string", "nullable": True},
        },
        "required": ["amount"],
        "additionalProperties": False,
    },
    "received": {"type": "object", "properties": {}},
}

calls: list[list[Any]] = []


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [types.Tool(name=name, input_schema=schema) for name, schema in SCHEMAS.items()]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "received":
        text = json.dumps(calls)
    else:
        calls.append([params.name, args])
        if params.name == "delete_pet":
            text = f"DELETE /pets/{args.get('petId')}"
        elif params.name == "list_pets":
            text = "GET /pets?" + "&".join(f"{k}={v}" for k, v in args.items())
        elif params.name == "refund":
            text = f"POST /refunds {json.dumps(args)}"
        else:
            text = f"POST /pets {json.dumps(args)}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def main() -> None:
    server: Server[Any] = Server("bridge", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
