"""The recorded ``tools/list`` answers of the interop sweep, as registry tools.

``benchmarks/data/interop/<server>.json`` (written by ``record_interop.py``) holds each
server's tools as the server listed them. :func:`adapters` turns them into the same
:class:`McpTool` adapters ``McpClient.into_tools(prefix=True)`` makes, on a client that
is never connected: the registry sees exactly what it would see live.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agcore_tools import BaseTool, McpClient, StdioTransport
from agcore_tools.mcp._adapter import make_adapters
from agcore_tools.mcp.models import McpToolInfo

ROOT = Path(__file__).resolve().parents[1]
INTEROP = ROOT / "benchmarks" / "data" / "interop"
SEARCH_CORPUS = ROOT / "benchmarks" / "data" / "search_corpus"
"""The servers recorded for tool search only (``record_search_corpus.py``)."""

# The sweep's order: the PyPI servers, then the npm ones (as issue 10 lists them).
ORDER = [
    "time", "fetch", "git", "sqlite", "duckdb", "excel", "markitdown", "arxiv", "duckduckgo",
    "word", "cli", "calculator", "memory", "sequential-thinking", "everything", "filesystem",
    "playwright", "context7", "notion", "desktop-commander", "github",
]  # fmt: skip


def load() -> list[dict[str, Any]]:
    """Every recorded server, in the sweep's order."""
    found = {p.stem: p for p in INTEROP.glob("*.json")}
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    return [json.loads(found[n].read_text(encoding="utf-8")) for n in names]


def load_corpus() -> list[dict[str, Any]]:
    """The interop servers, then those recorded for tool search, by name."""
    extra = sorted(SEARCH_CORPUS.glob("*.json"))
    return load() + [json.loads(p.read_text(encoding="utf-8")) for p in extra]


def infos(server: dict[str, Any]) -> list[McpToolInfo]:
    """The server's tools as :class:`McpToolInfo`, as ``McpClient.tool_infos`` gives them."""
    return [
        McpToolInfo(
            name=t["name"],
            description=t.get("description") or "",
            input_schema=t["inputSchema"],
            output_schema=t.get("outputSchema"),
            annotations=t.get("annotations") or {},
            title=t.get("title"),
        )
        for t in server["tools"]
    ]


def adapters(server: dict[str, Any]) -> list[BaseTool]:
    """The server's tools as ``into_tools(prefix=True)`` registers them (``server__tool``)."""
    client = McpClient(server["server"], StdioTransport("recorded-not-started"))
    return make_adapters(client, infos(server), server["server"], client.permission_policy)
