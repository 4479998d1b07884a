"""The first connection to a stdio server on the MCP Python SDK 1.6.0 (as chroma-mcp
pins it), with ``protocol="auto"``: how long ``McpClient`` takes to connect.

Such a server fails on the ``server/discover`` probe but exits only once another line
reaches its stdin; the client's pings end that wait (``mcp/_stdio.nudge_probe``).
Each run is a new process, since a process remembers a server the probe breaks and
skips the probe for it afterwards. Needs the venv ``make old-mcp-sdk`` builds (in
``~/.cache/agcore-tools/mcp-sdk-1.6.0``, or ``AGCORE_OLD_MCP_PYTHON``).

Run from the repository's root::

    .venv/bin/python benchmarks/bench_probe.py            # median of 5 runs
    .venv/bin/python benchmarks/bench_probe.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from agcore_tools import McpClient, StdioTransport

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "mcp" / "servers" / "old_sdk_server.py"
OLD_PYTHON = Path(
    os.environ.get("AGCORE_OLD_MCP_PYTHON")
    or Path.home() / ".cache" / "agcore-tools" / "mcp-sdk-1.6.0" / "bin" / "python"
)


async def first_connect() -> float:
    start = time.perf_counter()
    async with McpClient(
        "old", StdioTransport(str(OLD_PYTHON), [str(SERVER)]), timeout=60
    ) as client:
        took = time.perf_counter() - start
        if await client.call_tool("add", {"a": 1, "b": 2}) != "3":
            raise RuntimeError("the SDK 1.6 server answered add(1, 2) wrongly")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        sys.stdout.write(f"{asyncio.run(first_connect()):.3f}\n")
        return
    if not OLD_PYTHON.exists():
        raise SystemExit(f"no MCP Python SDK 1.6.0 venv at {OLD_PYTHON}: run `make old-mcp-sdk`")
    times = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, __file__, "--once"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        times.append(float(out.stdout))
    print(
        f"first connect to an MCP Python SDK 1.6.0 server, {args.runs} runs (s): "
        f"median {statistics.median(times):.2f}, min {min(times):.2f}, max {max(times):.2f}"
    )


if __name__ == "__main__":
    main()
