"""A large tool result in the loop: its text for the model is made off the event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agcore_tools import BaseTool, ToolContext, ToolRegistry

from .conftest import S, assert_history_valid, tool_messages

ROWS = [{"id": n, "name": f"customer {n}", "email": f"c{n}@example.com"} for n in range(60_000)]


class Export(BaseTool):
    """Returns ``marker`` and rows as they are (as an MCP tool's result comes)."""

    name, description = "export", "Export rows."

    def __init__(self, marker: Any) -> None:
        self.marker = marker
        self.parameters = {"type": "object", "properties": {"rows": {"type": "integer"}}}

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return [self.marker, *ROWS[: args["rows"]]]


class Seen:
    """Written with ``str`` (pydantic's fallback): notes the thread that wrote it."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def __str__(self) -> str:
        self.threads.append(threading.get_ident())
        return "seen"


async def test_the_loop_makes_a_large_results_text_off_the_event_loop(serve, make_cycle):
    # It was made on the loop, which a 5 MB result held up for about 100 ms; a small
    # result is still made at once, on the loop.
    seen = Seen()
    registry = ToolRegistry()
    registry.register(Export(seen))
    server = serve(
        S.reply_tool_calls([("export", {"rows": 3}, "c_small")]),
        S.reply_tool_calls([("export", {"rows": 60_000}, "c_large")]),
        S.reply_text("Done."),
    )
    cycle = make_cycle(server, max_result_bytes=300)
    await cycle.submit_with_tools("Export", registry)
    small, large = seen.threads
    assert small == threading.get_ident() and large != small
    for text in tool_messages(cycle.messages).values():
        assert text.startswith('["seen",{"id":0,"name":"customer 0"')
        assert len(text.encode()) <= 300


class Held:
    """Written with ``str``: in a worker thread, waits until the test lets it go."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.loop_thread = loop, threading.get_ident()
        self.writing = asyncio.Event()
        self.go = threading.Event()

    def __str__(self) -> str:
        if threading.get_ident() != self.loop_thread:
            self.loop.call_soon_threadsafe(self.writing.set)
            self.go.wait(10)
        return "held"


async def test_a_loop_cancelled_while_a_results_text_is_made_still_answers_with_it(
    serve, make_cycle
):
    # The call ran: the history must not tell the model it did not complete.
    held = Held(asyncio.get_running_loop())
    registry = ToolRegistry()
    registry.register(Export(held))
    server = serve(S.reply_tool_calls([("export", {"rows": 60_000}, "c1")]))
    cycle = make_cycle(server, max_result_bytes=300)
    task = asyncio.create_task(cycle.submit_with_tools("Export", registry))
    try:
        await asyncio.wait_for(held.writing.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    finally:
        held.go.set()
    text = tool_messages(cycle.messages)["c1"]
    assert text.startswith('["held",{"id":0,"name":"customer 0"') and len(text.encode()) <= 300
    assert_history_valid(cycle.messages)
