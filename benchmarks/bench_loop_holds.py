"""What two checks of large inputs cost, and how long they hold the event loop.

Run it with the project's venv (it needs no peers)::

    .venv/bin/python benchmarks/bench_loop_holds.py

1. Vetting a ``tools/list`` answer (``agcore_tools.mcp._tool_vetting``): ``timeit``
   of ``vet`` (best of five) on the largest recorded server
   (``benchmarks/data/search_corpus/linear.json``, 198 tools), on all 1,477 recorded
   tools in one answer (``search_corpus`` and ``interop``), and on those with one
   malformed tool in the middle, for each protocol version; and the longest gap
   between two turns of a task spinning on ``asyncio.sleep(0)`` while the session's
   read stream passes the answer on (``ToolListVetting.received``; best of three).
2. Checking an MCP tool's arguments against its input schema (an array of integers):
   ``McpTool.check_arguments`` on 100,000 bad items and on 100,000 valid ones (best of
   three), and the longest gap as above while ``McpTool.execute`` refuses 100,000
   valid items and one bad one (nothing is sent: the check refuses first).

Figures for an older tree: run this file with that tree first on ``PYTHONPATH`` (the
read stream's vetting was not awaitable before the slices; both are handled).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agcore_tools import InvalidArgumentsError

DATA = Path(__file__).resolve().parent / "data"
MODERN = {"resultType": "complete", "ttlMs": 60000, "cacheScope": "private"}
BAD_TOOL = {"name": "bad_schema", "inputSchema": "object"}
SCHEMA = {
    "type": "object",
    "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
    "required": ["ids"],
}


def _tools(*corpora: str) -> list[Any]:
    tools: list[Any] = []
    for corpus in corpora:
        for path in sorted((DATA / corpus).glob("*.json")):
            tools += json.loads(path.read_text())["tools"]
    return tools


async def _longest_gap(work: Callable[[], Any]) -> float:
    """The longest gap between two turns of a spinning task while ``work()`` runs."""
    longest, done = 0.0, False
    last = time.perf_counter()

    async def spin() -> None:
        nonlocal longest, last
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now

    spinner = asyncio.create_task(spin())
    await asyncio.sleep(0)
    last = time.perf_counter()
    try:
        result = work()
        if inspect.isawaitable(result):
            await result
    except InvalidArgumentsError:  # the refusal is the path measured
        pass
    done = True
    await spinner
    return longest


def vetting() -> None:
    """Part 1: the ``tools/list`` answer's vetting."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    from agcore_tools.mcp._tool_vetting import ToolListVetting, vet

    linear = json.loads((DATA / "search_corpus" / "linear.json").read_text())["tools"]
    every = _tools("search_corpus", "interop")
    answers = {
        "linear": linear,
        "all": every,
        "all, 1 bad": [*every[:700], BAD_TOOL, *every[700:]],
    }
    for version, rest in (("2025-11-25", {}), ("2026-07-28", MODERN)):
        for label, tools in answers.items():
            answer = {"tools": tools, **rest}
            number = 20 if len(tools) < 500 else 3

            def vetted(answer: dict[str, Any] = answer, version: str = version) -> Any:
                return vet(answer, version)

            runs = timeit.repeat(vetted, number=number, repeat=5)

            def received(answer: dict[str, Any] = answer, version: str = version) -> Any:
                vetting = ToolListVetting("bench", lambda: version)
                vetting.sent(1)
                reply = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result=answer)
                return vetting.received(SessionMessage(reply))

            gap = min(asyncio.run(_longest_gap(received)) for _ in range(3))
            print(
                f"vet {version} {label:10} {len(tools):5} tools: "
                f"{min(runs) / number * 1e3:6.2f} ms; loop held at most {gap * 1e3:6.2f} ms"
            )


def arguments() -> None:
    """Part 2: an MCP tool's argument check."""
    from agcore_tools import McpClient, McpToolInfo, StdioTransport, ToolContext
    from agcore_tools.mcp import McpTool

    info = McpToolInfo("purge", input_schema=SCHEMA)
    tool = McpTool(McpClient("demo", StdioTransport("unused")), info, "demo__purge", [])
    refusal: InvalidArgumentsError | None = None
    for label, args in (
        ("100,000 bad items", {"ids": ["x"] * 100_000}),
        ("100,000 valid items", {"ids": list(range(100_000))}),
    ):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            try:
                tool.check_arguments(args)
            except InvalidArgumentsError as exc:
                refusal = exc
            best = min(best, time.perf_counter() - start)
        print(f"check_arguments, {label}: {best * 1e3:.0f} ms")
    if refusal is not None:
        print(f"  the refusal: {refusal.reason} | {refusal.errors[-1]}")
    late = {"ids": [*range(100_000), "x"]}
    gap = min(
        asyncio.run(_longest_gap(lambda: tool.execute(late, ToolContext()))) for _ in range(3)
    )
    print(f"execute, 100,000 valid items and a bad one: loop held at most {gap * 1e3:.0f} ms")


if __name__ == "__main__":
    vetting()
    arguments()
