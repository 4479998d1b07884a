"""A real Temporal worker, in its own process, for the tests in this directory.

``python tests/temporal/worker_process.py ADDRESS QUEUE MODEL_URL WORKDIR IDENTITY
[MAX_ACTIVITIES]`` serves ``QUEUE`` with :class:`ToolLoopWorkflow` and the tools below,
writes ``WORKDIR/ready-IDENTITY`` once polling, and stops on SIGTERM. Every tool call
appends one JSON line to ``WORKDIR/calls.jsonl`` (tool, workflow id, worker), which is
how the tests count executions across processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

from agcore_tools import ToolContext, ToolRegistry

MAX_RESULT_BYTES = 4096
MEET_TIMEOUT = 30.0


def build_registry(workdir: Path, identity: str) -> ToolRegistry:
    """The tools every test worker serves."""
    registry = ToolRegistry()

    def record(tool: str, ctx: ToolContext) -> None:
        line = json.dumps({"tool": tool, "run": ctx.session_id, "worker": identity})
        with (workdir / "calls.jsonl").open("a") as log:  # one short append: atomic
            log.write(line + "\n")

    @registry.tool
    def add(a: int, b: int, ctx: ToolContext) -> int:
        """Add two integers."""
        record("add", ctx)
        return a + b

    @registry.tool
    def meet(name: str, ctx: ToolContext) -> str:
        """Return once two calls of this tool of the same run are running at once."""
        record("meet", ctx)
        (workdir / f"meet-{ctx.session_id}-{name}").touch()
        deadline = time.monotonic() + MEET_TIMEOUT
        while len(list(workdir.glob(f"meet-{ctx.session_id}-*"))) < 2:
            if time.monotonic() > deadline:
                raise TimeoutError("the other call never came")
            time.sleep(0.01)  # waits on the other call's file, bounded above
        return f"{name} met"

    @registry.tool
    def dump(size: int, ctx: ToolContext) -> str:
        """Return `size` bytes of text."""
        record("dump", ctx)
        return "x" * size

    @registry.tool(needs_approval=True)
    def remove(path: str, ctx: ToolContext) -> str:
        """Remove a file (asks first)."""
        record("remove", ctx)
        return f"removed {path}"

    return registry


async def serve(
    address: str, queue: str, model_url: str, workdir: Path, identity: str, slots: int | None
) -> None:
    from openai import AsyncOpenAI
    from temporalio.client import Client

    from agcore_tools.temporal import ToolActivities, worker

    client = await Client.connect(address)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    activities = ToolActivities(
        build_registry(workdir, identity),
        AsyncOpenAI(base_url=model_url, api_key="-", max_retries=0),
        max_result_bytes=MAX_RESULT_BYTES,
    )
    options = {"max_concurrent_activities": slots} if slots else {}
    async with worker(
        client,
        queue,
        activities,
        identity=identity,
        # A killed worker's cached runs move to the others quickly.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        **options,
    ):
        (workdir / f"ready-{identity}").touch()
        await stop.wait()


if __name__ == "__main__":
    address, queue, model_url, workdir, identity, *rest = sys.argv[1:]
    slots = int(rest[0]) if rest else None
    os.environ.setdefault("OPENAI_API_KEY", "-")
    asyncio.run(serve(address, queue, model_url, Path(workdir), identity, slots))
