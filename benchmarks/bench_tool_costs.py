"""What the per-tool accounting costs a loop: the client CPU of counting one run's tool
costs, against the client CPU of the run itself.

The run is ``bench_cycle.py``'s conversation (3 requests, 5 parallel tool calls over 2
tools, Chat Completions, not streamed) against the in-process
:class:`~agcore_tools.testing.ScriptedChatServer`. The loop notes each request and
answer as references and counts once when the run ends (``CostMeter.settle``: the
definitions, the calls' arguments and results, the registry's stats). This script
replays the notes of a recorded run through a fresh ``CostMeter`` many times, so the
figure is the accounting alone, free of the server's and the network's noise, and
times the whole loop the same way (CPU of this thread, the server's thread excluded)
for the ratio. ``reconcile()`` counts every message of every request and runs only when
called; it is timed apart.

Run::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_tool_costs.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cycle import MODEL, PROMPT, add, by_progress, get_weather

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
from agcore_tools.cycle import _costs, _run
from agcore_tools.testing import ScriptedChatServer

US = 1e6


class Recorder(_costs.CostMeter):
    """A CostMeter that keeps what the loop told it, to replay."""

    made: ClassVar[list[Recorder]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args, self.kwargs = args, kwargs
        self.notes: list[tuple[Any, Any]] = []
        self.answers: list[Any] = []
        self.settle_args: tuple[Any, ...] = ()
        Recorder.made.append(self)

    def sent(self, messages: Any, definitions: Any) -> None:
        self.notes.append((list(messages), definitions))
        super().sent(messages, definitions)

    def answered(self, usage: Any) -> None:
        self.answers.append(usage)
        super().answered(usage)

    def settle(self, history: Any, start: int, invocations: Any) -> _costs.ToolCosts:
        if not self.settle_args:
            self.settle_args = (list(history), start, list(invocations))
        return super().settle(history, start, invocations)


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.tool(get_weather)
    tools.tool(add)
    return tools


async def loops(server: ScriptedChatServer, tools: ToolRegistry, n: int) -> list[float]:
    """Client CPU seconds of each of ``n`` runs."""
    config = CycleConfig(MODEL)
    cpu = []
    async with server.client(timeout=30.0) as client:
        for _ in range(n):
            cycle = LlmCycle(config, client=client)
            start = time.thread_time()
            await cycle.submit_with_tools(PROMPT, tools)
            cpu.append(time.thread_time() - start)
    return cpu


def replay(recorded: Recorder, tools: ToolRegistry, n: int) -> tuple[list[float], list[float]]:
    """Seconds of the accounting of one run, and of its reconcile(), ``n`` times each."""
    settle, reconcile = [], []
    history, start, invocations = recorded.settle_args
    for _ in range(n):
        begin = time.perf_counter()
        meter = _costs.CostMeter(MODEL, tools, None, None)
        for (messages, definitions), usage in zip(recorded.notes, recorded.answers, strict=True):
            meter.sent(messages, definitions)
            meter.answered(usage)
        costs = meter.settle(history, start, invocations)
        middle = time.perf_counter()
        costs.reconcile()
        end = time.perf_counter()
        settle.append(middle - begin)
        reconcile.append(end - middle)
    return settle, reconcile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    tools = registry()
    _run.CostMeter = Recorder  # type: ignore[misc]
    with ScriptedChatServer([by_progress], repeat=True) as server:
        cpu = asyncio.run(loops(server, tools, max(50, args.runs // 10)))
    recorded = Recorder.made[-1]
    settle, reconcile = replay(recorded, tools, args.runs)
    loop_us = statistics.median(cpu) * US
    settle_us = statistics.median(settle) * US
    reconcile_us = statistics.median(reconcile) * US
    requests = len(recorded.notes)
    print(f"one run: {requests} requests, 5 tool calls, 2 tools offered; medians")
    print(f"  loop, client CPU            {loop_us:8.1f} us")
    print(
        f"  accounting (settle)         {settle_us:8.1f} us  ({settle_us / loop_us:.1%} of the loop)"
    )
    print(f"  reconcile(), when called    {reconcile_us:8.1f} us")


if __name__ == "__main__":
    main()
