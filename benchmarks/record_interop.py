"""Record the ``tools/list`` answers of 21 third-party MCP servers into ``benchmarks/data/interop/``.

The interop sweep of issue 10: each server is started over stdio by :class:`McpClient`
and its tools are written as the server listed them (``name``, ``title``,
``description``, ``inputSchema``, ``annotations``), one file per server, with the
package and the exact version that answered. ``bench_interop.py``,
``bench_search.py`` and the tests read these files; nothing here runs in ``make test``.

The servers are never dependencies of this project. Install them outside the
repository: the PyPI ones one virtualenv each (their ``mcp`` pins conflict: some want
``mcp<2``, others ``mcp>=2.3``), the npm ones in one scratch folder. With the versions
recorded in the data::

    python benchmarks/record_interop.py --print-pypi | while read -r name specs; do
        python3 -m venv /tmp/interop-py/$name && /tmp/interop-py/$name/bin/pip install $specs
    done
    mkdir -p /tmp/interop-npm && cd /tmp/interop-npm && echo '{"private": true}' > package.json
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --ignore-scripts $(python benchmarks/record_interop.py --print-npm)
    python benchmarks/record_interop.py --py-root /tmp/interop-py --npm-root /tmp/interop-npm

``mcp-server-sqlite``, ``mcp-server-duckdb`` and ``cli-mcp-server`` use the ``mcp`` 1.x server API, gone in
2.x, and declare no upper bound: they get ``mcp<2`` pinned beside them (``pins``).
``--ignore-scripts`` because one dependency's install script downloads a browser, which
listing tools does not need. Servers that want an API key get a dummy one (they list
their tools without checking it); each server runs in a scratch folder of its own with
an empty database or workbook directory where it asks for one. A server that does not
start is reported and its old file, if any, is left as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agcore_tools import McpClient, StdioTransport

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "data" / "interop"
DUMMY_KEY = "dummy-key-for-listing-tools"


@dataclass(frozen=True)
class Server:
    """One server of the sweep: where it comes from and how it is started."""

    name: str
    registry: str  # "pypi" or "npm"
    package: str
    version: str
    entry: str  # console script (pypi) or the package's bin name (npm)
    args: Callable[[Path], list[str]] = lambda scratch: []
    env: Callable[[Path], dict[str, str]] = lambda scratch: {}
    note: str = ""
    pins: tuple[str, ...] = ()  # installed beside the package (PyPI)
    setup: Callable[[Path], None] | None = None  # prepares the scratch folder


SERVERS = [
    Server("time", "pypi", "mcp-server-time", "2026.10.19", "mcp-server-time"),
    Server("fetch", "pypi", "mcp-server-fetch", "2026.10.24", "mcp-server-fetch"),
    Server(
        "git", "pypi", "mcp-server-git", "2026.10.19", "mcp-server-git",
        args=lambda s: ["--repository", str(s)],
    ),
    Server(
        "sqlite", "pypi", "mcp-server-sqlite", "2025.4.25", "mcp-server-sqlite",
        args=lambda s: ["--db-path", str(s / "sweep.db")], pins=("mcp<2",),
        note="needs mcp<2: it uses the 1.x server API",
    ),
    Server(
        "duckdb", "pypi", "mcp-server-duckdb", "1.1.0", "mcp-server-duckdb",
        args=lambda s: ["--db-path", str(s / "sweep.duckdb")], pins=("mcp<2",),
        note="needs mcp<2: it uses the 1.x server API",
    ),
    Server(
        "excel", "pypi", "excel-mcp-server", "2.2.2", "excel-mcp-server",
        args=lambda s: ["stdio"], env=lambda s: {"EXCEL_FILES_PATH": str(s)},
    ),
    Server("markitdown", "pypi", "markitdown-mcp", "0.0.1a8", "markitdown-mcp"),
    Server(
        "arxiv", "pypi", "arxiv-mcp-server", "0.8.2", "arxiv-mcp-server",
        args=lambda s: ["--storage-path", str(s)],
    ),
    Server("duckduckgo", "pypi", "duckduckgo-mcp-server", "0.7.0", "duckduckgo-mcp-server"),
    Server("word", "pypi", "office-word-mcp-server", "1.1.11", "word_mcp_server"),
    Server(
        "cli", "pypi", "cli-mcp-server", "0.2.5", "cli-mcp-server",
        env=lambda s: {"ALLOWED_DIR": str(s)}, pins=("mcp<2",),
        note="needs mcp<2: it uses the 1.x server API",
    ),
    Server("calculator", "pypi", "mcp-server-calculator", "0.2.1", "mcp-server-calculator"),
    Server(
        "memory", "npm", "@modelcontextprotocol/server-memory", "2026.8.31",
        "mcp-server-memory", env=lambda s: {"MEMORY_FILE_PATH": str(s / "memory.jsonl")},
    ),
    Server(
        "sequential-thinking", "npm", "@modelcontextprotocol/server-sequential-thinking",
        "2026.8.31", "mcp-server-sequential-thinking",
    ),
    Server(
        "everything", "npm", "@modelcontextprotocol/server-everything", "2026.8.31",
        "mcp-server-everything", args=lambda s: ["stdio"],
    ),
    Server(
        "filesystem", "npm", "@modelcontextprotocol/server-filesystem", "2026.8.31",
        "mcp-server-filesystem", args=lambda s: [str(s)],
    ),
    Server(
        "playwright", "npm", "@playwright/mcp", "0.0.83", "playwright-mcp",
        args=lambda s: ["--headless", "--isolated", "--output-dir", str(s)],
        note="no browser is installed: listing tools does not launch one",
    ),
    Server(
        "context7", "npm", "@upstash/context7-mcp", "4.1.1", "context7-mcp",
        args=lambda s: ["--api-key", DUMMY_KEY], note="started with a dummy API key",
    ),
    Server(
        "notion", "npm", "@notionhq/notion-mcp-server", "2.5.2", "notion-mcp-server",
        env=lambda s: {"NOTION_TOKEN": DUMMY_KEY}, note="started with a dummy NOTION_TOKEN",
    ),
    Server(
        "desktop-commander", "npm", "@wonderwhy-er/desktop-commander", "0.2.52",
        "desktop-commander", env=lambda s: {"HOME": str(s)},
        note="HOME is a scratch folder: it writes its config there",
    ),
    Server(
        "github", "npm", "@modelcontextprotocol/server-github", "2025.4.8",
        "mcp-server-github", env=lambda s: {"GITHUB_PERSONAL_ACCESS_TOKEN": DUMMY_KEY},
        note="started with a dummy GITHUB_PERSONAL_ACCESS_TOKEN (deprecated package, last release)",
    ),
]  # fmt: skip


def installed_versions(server: Server, py_root: Path, npm_root: Path) -> tuple[str, str]:
    """The versions of the package and of its MCP SDK, read from the installation."""
    if server.registry == "pypi":
        python = py_root / server.name / "bin" / "python"
        code = (
            "import importlib.metadata as m; "
            f"print(m.version({server.package!r}), m.version('mcp'))"
        )
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, check=True, timeout=60
        ).stdout.split()
        return out[0], f"mcp {out[1]}"
    modules = npm_root / "node_modules"
    meta = json.loads((modules / server.package / "package.json").read_text(encoding="utf-8"))
    nested = modules / server.package / "node_modules" / "@modelcontextprotocol" / "sdk"
    sdk_dir = nested if nested.is_dir() else modules / "@modelcontextprotocol" / "sdk"
    sdk = json.loads((sdk_dir / "package.json").read_text(encoding="utf-8"))["version"]
    return str(meta["version"]), f"@modelcontextprotocol/sdk {sdk}"


def transport(server: Server, scratch: Path, py_root: Path, npm_root: Path) -> StdioTransport:
    env = server.env(scratch)
    if server.registry == "pypi":
        command = str(py_root / server.name / "bin" / server.entry)
        return StdioTransport(command, server.args(scratch), env=env, cwd=scratch)
    package_dir = npm_root / "node_modules" / server.package
    meta = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    bins = meta["bin"] if isinstance(meta["bin"], dict) else {server.entry: meta["bin"]}
    script = package_dir / bins[server.entry]
    node = shutil.which("node") or "node"
    return StdioTransport(node, [str(script), *server.args(scratch)], env=env, cwd=scratch)


def tool_object(info: Any) -> dict[str, Any]:
    """The tool as ``tools/list`` gave it, with its wire field names."""
    tool: dict[str, Any] = {"name": info.name}
    if info.title is not None:
        tool["title"] = info.title
    tool["description"] = info.description
    tool["inputSchema"] = dict(info.input_schema)
    if info.output_schema is not None:
        tool["outputSchema"] = dict(info.output_schema)
    tool["annotations"] = dict(info.annotations)
    return tool


async def list_tools(name: str, transport: StdioTransport) -> tuple[list[Any], dict[str, Any]]:
    """Start the server, read its tools and its ``serverInfo``, stop it."""
    client = McpClient(name, transport).with_timeout(60)
    try:
        await client.connect()
        return await client.tool_infos(), dict(client.server_info or {})
    finally:
        await client.close()


def record_one(server: Server, py_root: Path, npm_root: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"interop-{server.name}-") as tmp:
        scratch = Path(tmp)
        if server.name == "git":
            subprocess.run(["git", "init", "-q", str(scratch)], check=True, timeout=30)
        if server.setup is not None:
            server.setup(scratch)
        stdio = transport(server, scratch, py_root, npm_root)
        infos, info = asyncio.run(list_tools(server.name, stdio))
    version, sdk = installed_versions(server, py_root, npm_root)
    return {
        "server": server.name,
        "registry": server.registry,
        "package": server.package,
        "version": version,
        "sdk": sdk,
        "server_info": {k: info[k] for k in ("name", "version") if k in info},
        "note": server.note,
        "tools": [tool_object(i) for i in infos],
    }


def record(
    names: list[str], py_root: Path, npm_root: Path, out: Path, servers: list[Server] = SERVERS
) -> int:
    failed = 0
    out.mkdir(parents=True, exist_ok=True)
    for server in servers:
        if names and server.name not in names:
            continue
        try:
            data = record_one(server, py_root, npm_root)
        except Exception as exc:
            failed += 1
            print(f"{server.name}: did not start ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        if data["version"] != server.version:
            print(f"{server.name}: installed {data['version']}, expected {server.version}")
        path = out / f"{server.name}.json"
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{server.name}: {len(data['tools'])} tools ({server.package} {data['version']})")
    return failed


def cli(servers: list[Server], out: Path, description: str) -> argparse.Namespace:
    """The command line shared with ``record_search_corpus.py``: print or record ``servers``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--py-root", type=Path, help="one virtualenv per PyPI server, by name")
    parser.add_argument("--npm-root", type=Path, help="the folder npm installed into")
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--only", nargs="*", default=[], help="record only these servers")
    parser.add_argument("--print-pypi", action="store_true", help="print name=package==version")
    parser.add_argument("--print-npm", action="store_true", help="print package@version")
    args = parser.parse_args()
    if args.print_pypi or args.print_npm:
        for s in servers:
            if s.registry == "pypi" and args.print_pypi:
                print(s.name, f"{s.package}=={s.version}", *s.pins)
            elif s.registry == "npm" and args.print_npm:
                print(f"{s.package}@{s.version}")
        sys.exit(0)
    if args.py_root is None or args.npm_root is None:
        parser.error("--py-root and --npm-root are required to record")
    args.failed = record(args.only, args.py_root, args.npm_root, args.out, servers)
    return args


def main() -> None:
    args = cli(SERVERS, OUT, __doc__.splitlines()[0])
    sys.exit(1 if args.failed else 0)


if __name__ == "__main__":
    main()
