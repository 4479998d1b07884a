"""A server on the SDK's low-level ``Server`` that lists resources but registered no
``resources/templates/list`` handler, as ``mcp-dice`` does: it advertises resources and
answers -32601 (method not found) for their templates. Over stdio:
``python no_templates_server.py``.
"""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_resources(
    ctx: object, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri="dice://2d6", name="2d6", mime_type="text/plain")]
    )


async def read_resource(
    ctx: object, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    text = types.TextResourceContents(uri=params.uri, mime_type="text/plain", text="7")
    return types.ReadResourceResult(contents=[text])


server = Server("dice", on_list_resources=list_resources, on_read_resource=read_resource)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
