"""A real Temporal worker, in its own process, for the tests in this directory.

``python tests/temporal/worker_process.py ADDRESS QUEUE MODEL_URL WORKDIR IDENTITY
[--slots N] [--mcp] [--tasks URL]`` serves ``QUEUE`` with :class:`ToolLoopWorkflow` and the tools
below, writes ``WORKDIR/ready-IDENTITY`` once polling, and stops on SIGTERM. With
``--mcp`` it is a tools-only worker whose tools are the MCP fixture server's, over the
one connection it holds; with ``--tasks URL``, the task server's at URL. Every tool call
appends one JSON line to ``WORKDIR/calls.jsonl`` (tool, workflow id, worker), which is
how the tests count executions across processes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

from agcore_tools import (
    Image,
    McpClient,
    StdioTransport,
    StreamableHttpTransport,
    ToolContext,
    ToolRegistry,
)

MAX_RESULT_BYTES = 4096
MEET_TIMEOUT = 30.0
MCP_FIXTURE = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "fixture_server.py"


def build_registry(workdir: Path, identity: str) -> ToolRegistry:
    """The tools every test worker serves."""
    registry = ToolRegistry()

    def record(tool: str, ctx: ToolContext) -> None:
        line = json.dumps({"tool": tool, "run": ctx.session_id, "worker": identity})
        # One short append: never interleaved with another worker's line (O_APPEND), but a
        # reader can meet it half-written, so conftest.calls() reads complete lines only.
        with (workdir / "calls.jsonl").open("a") as log:
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
    def snap(ctx: ToolContext) -> Image:
        """Take a screenshot (a 16-byte GIF)."""
        record("snap", ctx)
        return Image(b"GIF89a" + bytes(10))

    @registry.tool
    def dump(size: int, ctx: ToolContext) -> str:
        """Return `size` bytes of text."""
        record("dump", ctx)
        return "x" * size

    @registry.tool
    async def stall(ctx: ToolContext) -> str:
        """Never finish on its own (its activity has a 1 s timeout)."""
        record("stall", ctx)
        await asyncio.Event().wait()
        return "unreachable"

    @registry.tool
    async def gate(name: str, ctx: ToolContext) -> str:
        """Return once the test creates WORKDIR/open-NAME (its activity: 2 s, 3 tries)."""
        record("gate", ctx)
        try:
            deadline = time.monotonic() + MEET_TIMEOUT
            while not (workdir / f"open-{name}").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the gate never opened")
                await asyncio.sleep(0.01)  # waits on the test's file, bounded above
            return f"{name} open"
        finally:
            record("gate-end", ctx)  # the attempt ended: returned, raised or cancelled

    @registry.tool(needs_approval=True)
    def remove(path: str, ctx: ToolContext) -> str:
        """Remove a file (asks first)."""
        record("remove", ctx)
        return f"removed {path}"

    return registry


async def serve(
    address: str,
    queue: str,
    model_url: str,
    workdir: Path,
    identity: str,
    slots: int | None,
    mcp: bool,
    tasks: str | None = None,
) -> None:
    from openai import AsyncOpenAI
    from temporalio.client import Client

    from agcore_tools.temporal import ToolActivities, ToolActivityOptions, worker

    client = await Client.connect(address)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    options = {"max_concurrent_activities": slots} if slots else {}
    async with contextlib.AsyncExitStack() as stack:
        if tasks is not None:
            # Tools only: the task server's (tests/mcp/servers/task_server.py), over HTTP.
            server = McpClient("ci", StreamableHttpTransport(tasks), protocol="legacy")
            await stack.enter_async_context(server)
            registry = ToolRegistry()
            registry.register_all(server.into_tools(prefix=True))
            activities = ToolActivities(registry)
        elif mcp:
            server = McpClient("fx", StdioTransport(sys.executable, [str(MCP_FIXTURE)]))
            await stack.enter_async_context(server)
            registry = ToolRegistry()
            registry.register_all(server.into_tools(prefix=True))
            activities = ToolActivities(registry)
        else:
            activities = ToolActivities(
                build_registry(workdir, identity),
                AsyncOpenAI(base_url=model_url, api_key="-", max_retries=0),
                options={
                    "stall": ToolActivityOptions(timeout=1, max_attempts=1),
                    "gate": ToolActivityOptions(timeout=2, max_attempts=3),
                },
                max_result_bytes=MAX_RESULT_BYTES,
            )
        running = worker(
            client,
            queue,
            activities,
            workflows=not mcp and tasks is None,
            identity=identity,
            # A killed worker's cached runs move to the others quickly.
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
            **options,
        )
        await stack.enter_async_context(running)
        (workdir / f"ready-{identity}").touch()
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for name in ("address", "queue", "model_url", "workdir", "identity"):
        parser.add_argument(name)
    parser.add_argument("--slots", type=int)
    parser.add_argument("--mcp", action="store_true")
    parser.add_argument("--tasks", metavar="URL", help="a tools-only worker for the task server")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "-")
    asyncio.run(
        serve(
            args.address,
            args.queue,
            args.model_url,
            Path(args.workdir),
            args.identity,
            args.slots,
            args.mcp,
            args.tasks,
        )
    )
