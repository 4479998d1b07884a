"""The recorded ``tools/list`` answers of the interop sweep (``benchmarks/data/interop``,
written by ``benchmarks/record_interop.py``), registered as ``McpClient.into_tools``
registers live ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agcore_tools import McpClient, StdioTransport, ToolRegistry
from agcore_tools.mcp._adapter import make_adapters
from agcore_tools.mcp.models import McpToolInfo

INTEROP = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "interop"
SERVERS = sorted(p.stem for p in INTEROP.glob("*.json"))
SEARCH_CORPUS = INTEROP.parent / "search_corpus"
CORPUS_SERVERS = sorted(p.stem for p in SEARCH_CORPUS.glob("*.json"))
"""The servers recorded for the tool search evaluation, none of them in the sweep."""
EVERY_SERVER = SERVERS + CORPUS_SERVERS
"""The sweep's 21 servers and the search corpus's 36, recorded apart."""


def recorded(server: str) -> dict[str, Any]:
    """The recorded answer of one server, of the sweep or of the search corpus."""
    folder = INTEROP if server in SERVERS else SEARCH_CORPUS
    data: dict[str, Any] = json.loads((folder / f"{server}.json").read_text(encoding="utf-8"))
    return data


def registry_of(server: str, **options: Any) -> ToolRegistry:
    """The server's recorded tools, registered as ``into_tools(prefix=True)`` would."""
    data = recorded(server)
    infos = [
        McpToolInfo(
            t["name"],
            t.get("description") or "",
            t["inputSchema"],
            output_schema=t.get("outputSchema"),
            annotations=t["annotations"],
        )
        for t in data["tools"]
    ]
    client = McpClient(server, StdioTransport("recorded-not-started"))
    registry = ToolRegistry(**options)
    registry.register_all(make_adapters(client, infos, server, client.permission_policy))
    return registry
