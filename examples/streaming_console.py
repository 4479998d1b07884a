"""A streaming console UI: the model's text as it arrives, and each tool call live.

Run it with ``python examples/streaming_console.py [prompt]``. The tools take
different times, so the calls of one turn finish in a different order than they
started: the ``<-`` lines appear as each call ends, not when the turn ends.

``print_events`` is the printer the demo (``examples/demo.py``) uses too.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from _offline import model_client

from agcore_tools import (
    AssistantTextDelta,
    ChatResponse,
    CycleConfig,
    EventStream,
    LlmCycle,
    ReasoningDelta,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools.testing import ScriptedChatServer, ScriptItem

PROMPT = "Check the three mirrors and tell me which one is the fastest."


def _short(value: Any, limit: int = 90) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def print_events(events: EventStream) -> ChatResponse | None:
    """Print every event of a ``submit_stream_with_tools`` call as it happens."""
    at_line_start = True
    async with events:  # leaving early (Ctrl-C, an error) stops the tools and the stream
        async for event in events:
            match event:
                case AssistantTextDelta(text=text) | ReasoningDelta(text=text):
                    if at_line_start:
                        print("assistant> ", end="")
                    print(text, end="", flush=True)
                    at_line_start = False
                case TurnComplete(finish_reason=reason, turn=turn):
                    if not at_line_start:
                        print()
                    print(f"  [turn {turn} ended: {reason.value}]")
                    at_line_start = True
                case ToolExecutionStarted(tool_name=name, input=args, call_id=call_id):
                    print(f"  -> {name}({_short(args)})  [{call_id}]", flush=True)
                case ToolExecutionCompleted(tool_name=name, error=None, model_text=text) as done:
                    print(f"  <- {name}: {_short(text)}  ({done.duration * 1000:.0f} ms)")
                case ToolExecutionCompleted(tool_name=name, error=error):
                    print(f"  <- {name} failed: {error}")
    response = events.response
    if response is not None:
        usage = response.usage
        print(
            f"done: {response.turns} requests, {len(response.invocations)} tool calls, "
            f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens"
        )
    return response


registry = ToolRegistry()

MIRRORS = {"eu": 0.30, "us": 0.10, "asia": 0.20}  # seconds each probe takes


@registry.tool(permissions=["network"])
async def ping_mirror(region: str) -> dict[str, Any]:
    """Measure the round-trip time to a download mirror.

    Args:
        region: One of "eu", "us" or "asia".
    """
    seconds = MIRRORS[region]
    await asyncio.sleep(seconds)  # a real probe would wait on the network
    return {"region": region, "rtt_ms": round(seconds * 1000)}


def offline_script() -> list[ScriptItem]:
    """One turn with three concurrent calls, then the answer."""
    reply = ScriptedChatServer
    return [
        reply.reply_tool_calls(
            [("ping_mirror", {"region": region}) for region in MIRRORS],
            text="Probing all three at once.",
        ),
        reply.reply_text("The us mirror is the fastest at 100 ms (asia 200 ms, eu 300 ms)."),
    ]


async def main(argv: list[str]) -> None:
    prompt = " ".join(argv) or PROMPT
    async with model_client("streaming console", offline_script()) as (client, model):
        cycle = LlmCycle(CycleConfig(model), client=client)
        print(f"user> {prompt}")
        await print_events(cycle.submit_stream_with_tools(prompt, registry))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
