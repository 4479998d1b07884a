"""The drop-in path: an app that already drives the OpenAI SDK's Chat Completions itself.

Run it with ``python examples/openai_chat_loop.py [question ...]``. The app keeps its
own loop and history; agcore_tools only supplies the ``tools`` parameter
(``registry.definitions()``) and answers the model's tool calls
(``registry.run_tool_calls(message.tool_calls)`` returns the ``tool`` messages to
append). Failures, such as an unknown order here, become error text the model reads.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from _offline import model_client
from openai import AsyncOpenAI

from agcore_tools import ToolRegistry
from agcore_tools.testing import ScriptedChatServer, ScriptItem

QUESTIONS = ["Where is my order A1001?", "And order B2002?"]

registry = ToolRegistry()

ORDERS = {"A1001": {"status": "shipped", "carrier": "DHL", "eta": "2026-12-05"}}


@registry.tool
def order_status(order_id: str) -> dict[str, str]:
    """Look up the delivery status of an order.

    Args:
        order_id: The order number, such as "A1001".
    """
    if order_id not in ORDERS:
        raise LookupError(f"no order {order_id!r}")
    return ORDERS[order_id]


async def answer(client: AsyncOpenAI, model: str, messages: list[Any]) -> str:
    """The app's own loop: ask, run the tool calls, ask again, until the model answers."""
    while True:
        completion = await client.chat.completions.create(
            model=model, messages=messages, tools=registry.definitions()
        )
        message = completion.choices[0].message
        # content "" rather than null: llama-cpp-python's server rejects null.
        messages.append({**message.to_dict(), "content": message.content or ""})
        if not message.tool_calls:
            return message.content or ""
        messages.extend(await registry.run_tool_calls(message.tool_calls))


def offline_script() -> list[ScriptItem]:
    """One lookup per question; the second order does not exist."""
    reply = ScriptedChatServer
    return [
        reply.reply_tool_calls([("order_status", {"order_id": "A1001"})]),
        reply.reply_text("Order A1001 has shipped with DHL and should arrive on 5 December."),
        reply.reply_tool_calls([("order_status", {"order_id": "B2002"})]),
        reply.reply_text("I can't find an order B2002. Could you check the number?"),
    ]


async def main(questions: list[str]) -> None:
    async with model_client("chat completions drop-in", offline_script()) as (client, model):
        messages: list[Any] = [{"role": "system", "content": "You are a shop's support bot."}]
        for question in questions:
            print(f"user> {question}")
            messages.append({"role": "user", "content": question})
            print(f"assistant> {await answer(client, model, messages)}")
    tool_results = [m["content"] for m in messages if m["role"] == "tool"]
    print(f"tool results the model read: {tool_results}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or QUESTIONS))
