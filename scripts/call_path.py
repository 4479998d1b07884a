"""Print the modules one tool call travels through, from the loop to the function and back.

A profiler hook records every call and return between modules of ``agcore_tools``
while ``LlmCycle.submit_with_tools`` runs one tool call against the offline scripted
server. Only the tool turn is kept: from the moment the loop hands the model's tool
calls on, to the moment their results are back in the loop. The output is the path
(each move into another module, ``>`` down into a call, ``<`` back up a return) and the
modules entered more than once by a call, which docs/architecture.md reports.

    PYTHONPATH=. .venv/bin/python scripts/call_path.py
"""

from __future__ import annotations

import asyncio
import logging
import sys
from types import FrameType
from typing import Any

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
from agcore_tools.testing import ScriptedChatServer

logger = logging.getLogger("call_path")

registry = ToolRegistry()


@registry.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    moves.append(("=", "the function"))
    return a + b


moves: list[tuple[str, str]] = []
_THIS = __name__


def _module(frame: FrameType | None) -> str | None:
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("agcore_tools") or name == _THIS:
            return name
        frame = frame.f_back  # a frame of the SDK or asyncio: whose call is it
    return None


def _hook(frame: FrameType, event: str, arg: Any) -> None:
    if event not in ("call", "return"):
        return
    here = frame.f_globals.get("__name__", "")
    if not here.startswith("agcore_tools"):
        return
    other = _module(frame.f_back)
    if other is None or other == here:
        return
    moves.append((">", here) if event == "call" else ("<", other))


async def main() -> None:
    with ScriptedChatServer() as server:
        server.add(server.reply_tool_calls([("add", {"a": 2, "b": 3}, "call_1")]))
        server.add(server.reply_text("5"))
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig("test-model"), client=client)
            await cycle.submit_with_tools("2 + 3?", registry)  # warm: imports, caches
            moves.clear()
            server.add(server.reply_tool_calls([("add", {"a": 2, "b": 3}, "call_2")]))
            server.add(server.reply_text("5"))
            sys.setprofile(_hook)
            try:
                await cycle.submit_with_tools("2 + 3?", registry)
            finally:
                sys.setprofile(None)


def tool_turn(path: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The moves from the first entry into the registry's side of the loop (the tool
    turn) until the function's result is back in the module that started it."""
    marks = [i for i, (_, m) in enumerate(path) if m == "the function"]
    if not marks:
        return path
    start = marks[0]
    # Walk back to the loop module's last call down before the function ran.
    depth = 0
    for i in range(marks[0] - 1, -1, -1):
        kind, _ = path[i]
        depth += 1 if kind == "<" else -1 if kind == ">" else 0
        start = i
        if path[i][1].startswith("agcore_tools.cycle.cycle") or depth < -30:
            break
    end = marks[-1]
    for i in range(marks[-1] + 1, len(path)):
        end = i
        if path[i] == ("<", path[start][1]):
            break
    return path[start : end + 1]


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    asyncio.run(main())
    # Only moves made for the tool call: drop the HTTP round trips' bookkeeping.
    path = [(k, m) for k, m in moves if not m.startswith("agcore_tools.testing")]
    turn = tool_turn(path)
    entered: dict[str, int] = {}
    for kind, module in turn:
        if kind == ">":
            entered[module] = entered.get(module, 0) + 1
    short = [f"{k}{m.removeprefix('agcore_tools.')}" for k, m in turn]
    logger.info("%d moves: %s", len(turn), " ".join(short))
    modules = sorted({m for _, m in turn if m.startswith("agcore_tools")})
    logger.info("%d modules: %s", len(modules), ", ".join(modules))
    again = {m: n for m, n in entered.items() if n > 1}
    logger.info("entered more than once: %s", again or "none")
