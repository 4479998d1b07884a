"""The loopback server of ``bench_mcp.py``: an MCPServer with one tiny tool.

Over stdio by default; ``--http-fd FD`` serves Streamable HTTP (uvicorn) on a socket
the benchmark already bound.
"""

from __future__ import annotations

import argparse
import asyncio
import socket

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", log_level="WARNING")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Return the text."""
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http-fd", type=int, default=None)
    options = parser.parse_args()
    if options.http_fd is None:
        server.run()
        return
    import uvicorn

    sock = socket.socket(fileno=options.http_fd)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
