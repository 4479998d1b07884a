"""What holding a 2025-11-25 question costs a loop's MCP call that asks none.

With no ``elicitation_handler`` on a 2025-11-25 connection, a call the loop makes (its
context has a call id) runs as its own asyncio task, so that a question the server
asks on the connection can pause the loop while the call waits (see
``agcore_tools/mcp/_input_pause.py``). This measures that hop: the same adapter, the
same fixture server over stdio, called with and without a call id, alternating, 200
calls a round.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_question_cost.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from agcore_tools import McpClient, StdioTransport, ToolContext, ToolRegistry

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "servers" / "fixture_server.py"
CALLS = 200


async def main(rounds: int) -> None:
    server = StdioTransport(sys.executable, [str(FIXTURE)])
    async with McpClient("fx", server, protocol="legacy") as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        tool = registry.get("echo")
        assert tool is not None
        found: dict[str, list[tuple[float, float]]] = {"no call id": [], "loop call": []}
        for _ in range(rounds):
            for kind in found:
                wall, cpu = time.perf_counter(), time.process_time()
                for n in range(CALLS):
                    ctx = ToolContext(call_id=f"c{n}") if kind == "loop call" else ToolContext()
                    await tool.execute({"text": "hi"}, ctx)
                found[kind].append(
                    ((time.perf_counter() - wall) / CALLS, (time.process_time() - cpu) / CALLS)
                )
        base_wall = statistics.median(w for w, _ in found["no call id"])
        base_cpu = statistics.median(c for _, c in found["no call id"])
        for kind, rows in found.items():
            wall = statistics.median(w for w, _ in rows)
            cpu = statistics.median(c for _, c in rows)
            print(
                f"{kind:12} wall {wall * 1e3:.3f} ms ({wall / base_wall:.2f}x)  "
                f"CPU {cpu * 1e3:.3f} ms ({cpu / base_cpu:.2f}x)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    asyncio.run(main(parser.parse_args().rounds))
