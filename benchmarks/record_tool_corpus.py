"""Record the tool lists of MCP reference servers into ``benchmarks/data/tool_corpus.json``.

The corpus is what ``bench_search.py`` searches: the Chat Completions definitions each
server's ``tools/list`` returns, as :meth:`McpClient.list_tools` gives them. Servers:
the npm reference servers ``server-everything`` and ``server-filesystem`` (from
``node_modules``, ``npm ci``), and the PyPI ones ``mcp-server-time``, ``mcp-server-git``,
``mcp-server-fetch`` and ``mcp-server-sqlite``, installed in a scratch venv (never a
dependency of this project)::

    python -m venv /tmp/mcp-servers
    /tmp/mcp-servers/bin/pip install mcp-server-time mcp-server-git mcp-server-fetch mcp-server-sqlite
    python benchmarks/record_tool_corpus.py --servers-bin /tmp/mcp-servers/bin

A server that does not start is left out, with a message saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from agcore_tools import McpClient, StdioTransport

ROOT = Path(__file__).resolve().parents[1]
NPM = ROOT / "node_modules" / "@modelcontextprotocol"
OUT = ROOT / "benchmarks" / "data" / "tool_corpus.json"


def servers(bin_dir: Path, scratch: Path) -> dict[str, StdioTransport]:
    node = shutil.which("node") or "node"
    return {
        "everything": StdioTransport(node, [str(NPM / "server-everything/dist/index.js")]),
        "filesystem": StdioTransport(
            node, [str(NPM / "server-filesystem/dist/index.js"), str(scratch)]
        ),
        "time": StdioTransport(str(bin_dir / "mcp-server-time"), []),
        "git": StdioTransport(str(bin_dir / "mcp-server-git"), []),
        "fetch": StdioTransport(str(bin_dir / "mcp-server-fetch"), []),
        "sqlite": StdioTransport(
            str(bin_dir / "mcp-server-sqlite"), ["--db-path", str(scratch / "bench.db")]
        ),
    }


async def record(bin_dir: Path) -> dict[str, list[dict[str, Any]]]:
    corpus: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, transport in servers(bin_dir, Path(scratch)).items():
            client = McpClient(name, transport).with_timeout(30)
            try:
                await client.connect()
                corpus[name] = await client.list_tools()
            except Exception as exc:
                print(f"{name}: left out ({type(exc).__name__}: {exc})", file=sys.stderr)
            finally:
                await client.close()
    return corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers-bin", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    corpus = asyncio.run(record(args.servers_bin))
    args.out.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, tools in corpus.items():
        print(f"{name}: {len(tools)} tools")


if __name__ == "__main__":
    main()
