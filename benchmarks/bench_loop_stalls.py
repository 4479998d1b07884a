"""Event-loop stalls: a sync tool's ~5 MB result, and 300,000 progress reports.

Why: an app that serves many conversations from one event loop answers none of them
while the loop is held up. A sync tool runs in a worker thread, so its own work does
not hold the loop; what the library does with its result (validating it, writing it as
JSON for the model, caching it) and with its progress reports may. The CHANGELOG's
fixes (large results' text made off the loop, a run of items at a time; a thread's
reports travelling together) were measured with scratch scripts; this is the
reproducible version, with the peers side by side.

Run with the benchmark venv (``make bench`` creates it)::

    .venv-bench/bin/python benchmarks/bench_loop_stalls.py

The measure: a ticker task sleeps 1 ms (``asyncio.sleep(0.001)``) in a loop and
records the largest gap between two of its wake-ups while one path runs, until it has
woken twice after the path ended. A free loop shows ~1.1 ms (the sleep itself); a
gap of 30 ms means nothing else on the loop ran for 30 ms. The wall time of the path
is reported beside it. Before each path the heap is collected (``gc.collect``; the
peers' imports and the result itself are frozen out of it with ``gc.freeze`` after the
warm-up), so a collection counts against the path whose garbage caused it.

Paths, all in one process, in interleaved rounds whose order is shuffled each round
(medians over rounds):

(a) A sync tool returning ~5 MB of rows (60,000 dicts of four fields, built once and
    returned as is, so the tool's own work is nil):

    - floor: ``asyncio.to_thread(tool)``, the thread hop alone;
    - agcore_tools ``registry.invoke``, and the same through an async tool returning
      the rows (the library converts its result too, on the loop or, a large one, in
      a worker thread); ``registry.run_tool_calls`` (the tool message, cut to 16 KiB
      as the model reads it); one tool turn of ``LlmCycle.submit_with_tools`` against
      ``agcore_tools.testing.ScriptedChatServer`` (a tool call, then a text answer); a
      ``ResultCache`` tool through ``invoke``, first call (runs and stores) then second
      call (a hit), with a fresh key each round;
    - openai-agents: ``function_tool(tool).on_invoke_tool(ToolContext, "{}")``, as its
      runner calls it; and the same followed by ``ItemHelpers.tool_call_output_item``,
      which its runner calls next to make the model's item (a tool without an output
      schema: ``str()`` of the output, after looking at each item for an image or file);
    - pydantic-ai: ``ToolManager.handle_call`` of a ``FunctionToolset`` (one run step's
      manager, as in ``bench_core.py``), and ``Agent.run`` with a ``FunctionModel`` that
      calls the tool and, on the next request, reads the tool's return as pydantic-ai's
      Chat Completions model does (``ToolReturnPart.model_response_str_and_user_content``)
      before answering: a whole tool turn without HTTP;
    - langchain-core: ``@tool`` ``.ainvoke(args)`` (the raw output), and
      ``.ainvoke(tool_call)`` (a ``ToolMessage``, its content the output as JSON);
    - fastmcp: ``Client(server).call_tool`` over the in-memory transport to a
      ``FastMCP`` server's sync tool (the server writes the result, the client reads
      it back, both on this loop).

    Each row names the agcore_tools path it is compared with (the one producing the
    same thing: the raw output, the text for the model, a tool turn) and gives both
    ratios to it.

(b) A sync tool making 300,000 progress reports (``ctx.report_progress`` in a tight
    loop): through ``registry.invoke`` with an ``on_event`` listener that counts the
    reports and checks their order (a listener that kept all 300,000 events would time
    the garbage collector walking them: 60-100 ms stalls, whatever the library), and
    streamed, ``LlmCycle.submit_stream_with_tools`` with a consumer
    that awaits ``asyncio.sleep(0.001)`` per ``ToolProgress`` (a UI redrawing). No peer
    rows: openai-agents and pydantic-ai have no progress reports from a tool;
    langchain-core's nearest is ``dispatch_custom_event``, a generic callback event,
    not a progress report; fastmcp's ``Context.report_progress`` is a coroutine, for a
    tool running on the loop: a sync tool could reach it only through
    ``anyio.from_thread.run``, a blocking round trip to the loop per report, which is
    no like-for-like path.

Peers whose package is missing are skipped, not faked. Options: ``--quick`` (two
rounds, for a smoke run), ``--rounds N``, ``--json PATH`` (default
``benchmarks/results/bench_loop_stalls.json``), ``--no-progress`` / ``--no-results``
to skip a part.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from run_info import machine, versions

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    ResultCache,
    ToolContext,
    ToolPolicy,
    ToolProgress,
    ToolRegistry,
)
from agcore_tools.testing import ScriptedChatServer

ROOT = Path(__file__).resolve().parent.parent
MS = 1e3
TICK = 0.001
ROW_COUNT = 60_000
REPORTS = 300_000

# The tools' result, built once in main() and returned as is by every tool.
ROWS: list[dict[str, Any]] = []


def export_rows() -> list[dict[str, Any]]:
    """Export every customer row."""
    return ROWS


async def export_rows_async() -> list[dict[str, Any]]:
    """Export every customer row, from an async tool."""
    return ROWS


def make_rows() -> list[dict[str, Any]]:
    return [
        {"id": i, "name": f"customer {i}", "email": f"c{i}@example.com", "city": "Paris"}
        for i in range(ROW_COUNT)
    ]


# A case is one call: a coroutine function of the round number, returning something
# check() can look at.
Call = Callable[[int], Awaitable[Any]]


@dataclass
class Case:
    name: str
    call: Call
    check: Callable[[Any], bool]
    vs: str = ""  # the agcore_tools path it is compared with
    note: str = ""
    part: str = "result"
    stalls: list[float] = field(default_factory=list)  # seconds, one per round
    walls: list[float] = field(default_factory=list)

    @property
    def stall_ms(self) -> float:
        return statistics.median(self.stalls) * MS

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.walls) * MS


# A unit is what runs together in a round: one case, or a cache's store then its hit.
Unit = list[Case]


def is_rows(value: Any) -> bool:
    return isinstance(value, list) and len(value) == ROW_COUNT and value[-1]["id"] == ROW_COUNT - 1


def is_rows_text(text: Any) -> bool:
    return isinstance(text, str) and text.startswith(('[{"id": 0,', '[{"id":0,'))


# -- the ticker ----------------------------------------------------------------------


class Ticker:
    """Sleeps ``TICK`` at a time and keeps the longest gap between two wake-ups."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.last = time.perf_counter()
        self.ticks = 0
        self._settled: tuple[int, asyncio.Event] | None = None

    async def run(self) -> None:
        clock, sleep = time.perf_counter, asyncio.sleep
        self.last = clock()
        while True:
            await sleep(TICK)
            now = clock()
            gap = now - self.last
            self.last = now
            self.ticks += 1
            if gap > self.worst:
                self.worst = gap
            if self._settled is not None and self.ticks >= self._settled[0]:
                self._settled[1].set()

    def reset(self) -> None:
        self.worst = 0.0
        self.last = time.perf_counter()

    async def settle(self) -> None:
        """Wait for two more wake-ups: a stall at the very end of a path is counted."""
        settled = asyncio.Event()
        self._settled = (self.ticks + 2, settled)
        await settled.wait()
        self._settled = None


async def measure(ticker: Ticker, path: Case, round_no: int) -> Any:
    gc.collect()
    await asyncio.sleep(0.02)
    ticker.reset()
    started = time.perf_counter()
    result = await path.call(round_no)
    wall = time.perf_counter() - started
    await ticker.settle()
    path.stalls.append(ticker.worst)
    path.walls.append(wall)
    return result


# -- agcore_tools --------------------------------------------------------------------


def tool_call(name: str, args: str = "{}") -> list[dict[str, Any]]:
    return [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]


def agcore_units(server: ScriptedChatServer, client: Any) -> list[Unit]:
    registry = ToolRegistry()
    registry.tool(name="export_rows")(export_rows)
    registry.tool(name="export_rows_async")(export_rows_async)

    def export_rows_cached(key: int) -> list[dict[str, Any]]:
        """Export every customer row (cached)."""
        return ROWS

    registry.tool(name="export_rows_cached", policy=ToolPolicy(cache=ResultCache(ttl=3600)))(
        export_rows_cached
    )
    S = ScriptedChatServer
    keys = iter(range(10**9))
    cache_key = 0

    async def to_thread(_: int) -> Any:
        return await asyncio.to_thread(export_rows)

    async def invoke(_: int) -> Any:
        return (await registry.invoke("export_rows", {})).output

    async def invoke_async(_: int) -> Any:
        return (await registry.invoke("export_rows_async", {})).output

    async def run_tool_calls(_: int) -> Any:
        return (await registry.run_tool_calls(tool_call("export_rows")))[0]["content"]

    async def cycle_turn(_: int) -> Any:
        server.add(S.reply_tool_calls([("export_rows", {})]), S.reply_text("exported"))
        cycle = LlmCycle(CycleConfig("m"), client=client)
        response = await cycle.submit_with_tools("Export the customers.", registry)
        tool_message = next(m for m in cycle.messages if m.get("role") == "tool")
        return response.text, tool_message["content"]

    async def cache_store(_: int) -> Any:
        nonlocal cache_key
        cache_key = next(keys)
        done = await registry.invoke("export_rows_cached", {"key": cache_key})
        return done.cached, done.output

    async def cache_hit(_: int) -> Any:
        done = await registry.invoke("export_rows_cached", {"key": cache_key})
        return done.cached, done.output

    invoke_name = "agcore_tools invoke"
    return [
        [
            Case(
                "floor: asyncio.to_thread(tool)",
                to_thread,
                is_rows,
                invoke_name,
                "the thread hop alone, no library",
            )
        ],
        [Case(invoke_name, invoke, is_rows)],
        [
            Case(
                "agcore_tools invoke, async tool",
                invoke_async,
                is_rows,
                invoke_name,
                "the same rows returned by an async tool, on the loop",
            )
        ],
        [
            Case(
                "agcore_tools run_tool_calls",
                run_tool_calls,
                is_rows_text,
                note="the tool message, cut to 16 KiB",
            )
        ],
        [
            Case(
                "agcore_tools LlmCycle tool turn",
                cycle_turn,
                lambda r: r[0] == "exported" and is_rows_text(r[1]),
                note="submit_with_tools, ScriptedChatServer: tool call, then text",
            )
        ],
        [
            Case(
                "agcore_tools ResultCache: store",
                cache_store,
                lambda r: r[0] is False and is_rows(r[1]),
                invoke_name,
                "invoke, first call: runs the tool, stores its JSON",
            ),
            Case(
                "agcore_tools ResultCache: hit",
                cache_hit,
                lambda r: r[0] is True and is_rows(r[1]),
                invoke_name,
                "invoke, second call: parses the stored JSON",
            ),
        ],
    ]


def progress_units(server: ScriptedChatServer, client: Any) -> list[Unit]:
    registry = ToolRegistry()

    @registry.tool
    def index_files(count: int, ctx: ToolContext) -> int:
        """Index the files, reporting after each."""
        report = ctx.report_progress
        for done in range(1, count + 1):
            report(done, count)
        return count

    S = ScriptedChatServer

    async def on_event(_: int) -> Any:
        # A listener that counts and checks the order, as a progress bar reads: one that
        # kept all 300,000 events would time the garbage collector walking them.
        heard = 0
        in_order = True

        def listener(event: Any) -> None:
            nonlocal heard, in_order
            heard += 1
            if event.progress != heard:
                in_order = False

        done = await registry.invoke(
            "index_files", {"count": REPORTS}, ToolContext(on_event=listener)
        )
        return done.output, heard, in_order

    async def streamed(_: int) -> Any:
        server.add(
            S.reply_tool_calls([("index_files", {"count": REPORTS})]), S.reply_text("indexed")
        )
        cycle = LlmCycle(CycleConfig("m"), client=client)
        read = 0
        async with cycle.submit_stream_with_tools("Index the files.", registry) as events:
            async for event in events:
                if isinstance(event, ToolProgress):
                    read += 1
                    await asyncio.sleep(0.001)  # a UI redrawing
        text = events.response.text if events.response else None
        return text, read

    return [
        [
            Case(
                "agcore_tools invoke, on_event listener",
                on_event,
                lambda r: r == (REPORTS, REPORTS, True),
                note="every report heard, in order",
                part="progress",
            )
        ],
        [
            Case(
                "agcore_tools streamed, submit_stream_with_tools",
                streamed,
                lambda r: r[0] == "indexed" and r[1] > 0,
                note="consumer sleeps 1 ms per ToolProgress read",
                part="progress",
            )
        ],
    ]


# -- peers ---------------------------------------------------------------------------


def openai_agents_units() -> list[Unit]:
    try:
        from agents import ItemHelpers, function_tool
        from agents.tool_context import ToolContext as AgentsToolContext
        from openai.types.responses import ResponseFunctionToolCall
    except ImportError:
        return []
    sdk_tool = function_tool(export_rows)
    on_invoke = sdk_tool.on_invoke_tool
    # No output schema by default (output_json_schema is None), so its runner makes the
    # model's item with ItemHelpers.tool_call_output_item(call, output) alone.
    assert sdk_tool.output_json_schema is None
    tool_call = ResponseFunctionToolCall(
        arguments="{}", call_id="call_1", name="export_rows", type="function_call"
    )

    async def call(_: int) -> Any:
        ctx: AgentsToolContext[Any] = AgentsToolContext(
            context=None, tool_name="export_rows", tool_call_id="call_1", tool_arguments="{}"
        )
        return await on_invoke(ctx, "{}")

    async def call_and_item(_: int) -> Any:
        ctx: AgentsToolContext[Any] = AgentsToolContext(
            context=None, tool_name="export_rows", tool_call_id="call_1", tool_arguments="{}"
        )
        output = await on_invoke(ctx, "{}")
        return ItemHelpers.tool_call_output_item(tool_call, output)["output"]

    return [
        [
            Case(
                "openai-agents on_invoke_tool",
                call,
                is_rows,
                "agcore_tools invoke",
                "function_tool, ToolContext per call (as its runner does)",
            )
        ],
        [
            Case(
                "openai-agents on_invoke_tool + output item",
                call_and_item,
                lambda r: isinstance(r, str) and r.startswith("[{'id': 0,"),
                "agcore_tools run_tool_calls",
                "then ItemHelpers.tool_call_output_item: str() of the output",
            )
        ],
    ]


async def pydantic_ai_units() -> list[Unit]:
    try:
        from pydantic_ai import Agent, RunContext
        from pydantic_ai.messages import (
            ModelMessage,
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.tool_manager import ToolManager
        from pydantic_ai.toolsets import FunctionToolset
        from pydantic_ai.usage import RequestUsage, RunUsage
    except ImportError:
        return []
    toolset = FunctionToolset([export_rows])
    run_ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = await ToolManager(toolset=toolset).for_run_step(run_ctx)

    async def handle_call(_: int) -> Any:
        return await manager.handle_call(ToolCallPart(tool_name="export_rows", args="{}"))

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [
            p
            for p in (last.parts if isinstance(last, ModelRequest) else [])
            if isinstance(p, ToolReturnPart)
        ]
        # A real model's response says what it used: without it, FunctionModel would
        # estimate the usage by reading every message, which no real model does.
        usage = RequestUsage(input_tokens=100, output_tokens=10)
        if not returns:
            call = ToolCallPart(tool_name="export_rows", args="{}")
            return ModelResponse(parts=[call], usage=usage)
        # What pydantic-ai's Chat Completions model does with a tool return before it
        # sends the request, on the loop: the model reads text.
        texts = [p.model_response_str_and_user_content()[0] for p in returns]
        return ModelResponse(parts=[TextPart(f"exported {len(texts[0])} characters")], usage=usage)

    agent = Agent(FunctionModel(respond), tools=[export_rows])

    async def agent_turn(_: int) -> Any:
        return (await agent.run("Export the customers.")).output

    return [
        [
            Case(
                "pydantic-ai ToolManager.handle_call",
                handle_call,
                is_rows,
                "agcore_tools invoke",
                "one run step's manager, JSON args",
            )
        ],
        [
            Case(
                "pydantic-ai Agent.run tool turn",
                agent_turn,
                lambda r: (
                    isinstance(r, str) and r.startswith("exported ") and int(r.split()[1]) > 10**6
                ),
                "agcore_tools LlmCycle tool turn",
                "FunctionModel reading the return as its OpenAI chat model does; no HTTP",
            )
        ],
    ]


def langchain_units() -> list[Unit]:
    try:
        from langchain_core.messages import ToolMessage
        from langchain_core.tools import tool as lc_tool
    except ImportError:
        return []
    lc_export = lc_tool(export_rows)

    async def ainvoke(_: int) -> Any:
        return await lc_export.ainvoke({})

    async def ainvoke_call(_: int) -> Any:
        message = await lc_export.ainvoke(
            {"name": "export_rows", "args": {}, "id": "call_1", "type": "tool_call"}
        )
        assert isinstance(message, ToolMessage)
        return message.content

    return [
        [Case("langchain @tool.ainvoke(args)", ainvoke, is_rows, "agcore_tools invoke")],
        [
            Case(
                "langchain @tool.ainvoke(tool_call)",
                ainvoke_call,
                is_rows_text,
                "agcore_tools run_tool_calls",
                "a ToolMessage: the whole output as JSON",
            )
        ],
    ]


async def fastmcp_units(stack: contextlib.AsyncExitStack) -> list[Unit]:
    try:
        from fastmcp import Client, FastMCP
    except ImportError:
        return []
    server = FastMCP("bench")
    server.tool(export_rows)
    client = await stack.enter_async_context(Client(server))

    async def call(_: int) -> Any:
        result = await client.call_tool("export_rows", {})
        return result.data

    return [
        [
            Case(
                "fastmcp Client.call_tool (in memory)",
                call,
                is_rows,
                "agcore_tools run_tool_calls",
                "server writes the result as JSON, client reads it back",
            )
        ]
    ]


# -- running -------------------------------------------------------------------------


async def run(rounds: int, results: bool, progress: bool) -> list[Case]:
    global ROWS
    ROWS = make_rows()
    ticker_task: asyncio.Task[None] | None = None
    async with contextlib.AsyncExitStack() as stack:
        server = stack.enter_context(ScriptedChatServer([]))
        client = await stack.enter_async_context(server.client())
        units: list[Unit] = []
        if results:
            units += agcore_units(server, client)
            units += openai_agents_units()
            units += await pydantic_ai_units()
            units += langchain_units()
            units += await fastmcp_units(stack)
        if progress:
            units += progress_units(server, client)
        ticker = Ticker()
        ticker_task = asyncio.create_task(ticker.run())
        # Warm-up: lazy imports, thread pools, the HTTP connection; and each result checked.
        for unit in units:
            for path in unit:
                got = await path.call(-1)
                if not path.check(got):
                    raise SystemExit(f"{path.name} returned {str(got)[:200]!r}")
        gc.collect()
        gc.freeze()
        for round_no in range(rounds):
            order = list(units)
            random.shuffle(order)
            for unit in order:
                for path in unit:
                    got = await measure(ticker, path, round_no)
                    if not path.check(got):  # outside the timed window
                        raise SystemExit(f"{path.name} returned {str(got)[:200]!r}")
            print(f"  round {round_no + 1}/{rounds} done", file=sys.stderr)
        ticker_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker_task
    return [path for unit in units for path in unit]


# -- report --------------------------------------------------------------------------


def table(title: str, paths: list[Case]) -> list[dict[str, Any]]:
    by_name = {p.name: p for p in paths}
    print(f"\n{title}")
    print(
        f"  {'path':<48}{'stall ms':>9}{'(min-max)':>18}{'wall ms':>9}"
        f"{'stall ×':>9}{'wall ×':>8}  vs"
    )
    rows = []
    for path in paths:
        base = by_name.get(path.vs)
        stall_x = path.stall_ms / base.stall_ms if base else None
        wall_x = path.wall_ms / base.wall_ms if base else None
        spread = f"({min(path.stalls) * MS:.1f}-{max(path.stalls) * MS:.1f})"
        print(
            f"  {path.name:<48}{path.stall_ms:>9.1f}{spread:>18}{path.wall_ms:>9.1f}"
            f"{_x(stall_x):>9}{_x(wall_x):>8}  {path.vs if base else ''}"
        )
        rows.append(
            {
                "name": path.name,
                "stall_median_ms": round(path.stall_ms, 2),
                "stall_min_ms": round(min(path.stalls) * MS, 2),
                "stall_max_ms": round(max(path.stalls) * MS, 2),
                "wall_median_ms": round(path.wall_ms, 2),
                "rounds": len(path.stalls),
                "vs": path.vs if base else None,
                "stall_ratio": round(stall_x, 3) if stall_x is not None else None,
                "wall_ratio": round(wall_x, 3) if wall_x is not None else None,
                "note": path.note,
            }
        )
    return rows


def _x(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two rounds (smoke run)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 9)")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/bench_loop_stalls.json"
    )
    parser.add_argument("--no-results", action="store_true", help="skip part (a)")
    parser.add_argument("--no-progress", action="store_true", help="skip part (b)")
    opts = parser.parse_args()
    rounds = opts.rounds or (2 if opts.quick else 9)

    results: dict[str, Any] = {
        "benchmark": "loop_stalls",
        "command": ".venv-bench/bin/python benchmarks/bench_loop_stalls.py",
        "measure": "longest gap between wake-ups of a task sleeping 1 ms, median over rounds",
        "rounds": rounds,
        "machine": machine(),
        "versions": versions(
            "agcore-tools",
            "pydantic",
            "pydantic-core",
            "openai",
            "openai-agents",
            "pydantic-ai-slim",
            "langchain-core",
            "fastmcp",
            "mcp",
        ),
    }
    m = results["machine"]
    print(f"Python {m['python']} on {m['platform']}, {m['cpus']} CPUs ({m['cpu']})")
    print(f"  load average {m['load_average']}")
    print("  " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))

    paths = asyncio.run(run(rounds, not opts.no_results, not opts.no_progress))
    size = len(json.dumps(ROWS, ensure_ascii=False))
    results["result_bytes"] = size
    print(
        f"\nLongest event-loop stall (gap between 1 ms ticks; free loop ≈ 1.1 ms), {rounds} rounds"
    )
    part_a = [p for p in paths if p.part == "result"]
    part_b = [p for p in paths if p.part == "progress"]
    if part_a:
        title = f"(a) a sync tool's result of {size / 1e6:.1f} MB ({ROW_COUNT:,} rows)"
        results["large_result"] = table(title, part_a)
    if part_b:
        title = f"(b) a sync tool making {REPORTS:,} progress reports"
        results["progress"] = table(title, part_b)

    opts.json.parent.mkdir(parents=True, exist_ok=True)
    opts.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nJSON: {opts.json.relative_to(ROOT) if opts.json.is_relative_to(ROOT) else opts.json}")


if __name__ == "__main__":
    main()
