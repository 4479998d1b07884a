"""The drop-in path with the OpenAI Responses API (``client.responses.create``).

Run it with ``python examples/openai_responses_loop.py [question]``.
``registry.definitions(api="responses")`` gives the flat function-tool shape the
Responses API takes, and ``registry.run_tool_calls(response.output)`` runs the
``function_call`` items (other output items are skipped) and returns the
``function_call_output`` items to send back. With ``previous_response_id`` the server
keeps the conversation, so only the outputs are sent.

The Responses API is OpenAI's; most OpenAI-compatible servers speak only Chat
Completions (see ``openai_chat_loop.py``).
"""

from __future__ import annotations

import asyncio
import sys

from _offline import model_client

from agcore_tools import ToolRegistry
from agcore_tools.testing import ScriptedChatServer, ScriptItem

QUESTION = "How much is 250 USD in euros and in pounds?"

registry = ToolRegistry()

RATES = {("USD", "EUR"): 0.9225, ("USD", "GBP"): 0.7871}


@registry.tool(permissions=["network"])
async def exchange_rate(base: str, quote: str) -> float:
    """Today's exchange rate: how many ``quote`` units one ``base`` unit buys.

    Args:
        base: ISO currency code, such as "USD".
        quote: ISO currency code, such as "EUR".
    """
    return RATES[base.upper(), quote.upper()]


def offline_script() -> list[ScriptItem]:
    """Both rates at once, then the answer."""
    reply = ScriptedChatServer
    return [
        reply.reply_tool_calls(
            [
                ("exchange_rate", {"base": "USD", "quote": "EUR"}),
                ("exchange_rate", {"base": "USD", "quote": "GBP"}),
            ]
        ),
        reply.reply_text("250 USD is about 230.63 EUR (at 0.9225) or 196.78 GBP (at 0.7871)."),
    ]


async def main(question: str) -> None:
    async with model_client("responses drop-in", offline_script()) as (client, model):
        tools = registry.definitions(api="responses")
        print(f"user> {question}")
        response = await client.responses.create(model=model, input=question, tools=tools)
        while outputs := await registry.run_tool_calls(response.output):
            for output in outputs:
                print(f"  {output['call_id']} -> {output['output']}")
            response = await client.responses.create(
                model=model, input=outputs, previous_response_id=response.id, tools=tools
            )
        print(f"assistant> {response.output_text}")


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or QUESTION))
