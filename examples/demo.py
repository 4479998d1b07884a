"""agcore_tools demo: an agent loop over the OpenAI SDK, with streamed tool events.

Run it with ``make demo`` (or ``python examples/demo.py [prompt]``).

- With ``OPENAI_API_KEY`` set it talks to that provider: ``OPENAI_BASE_URL`` picks an
  OpenAI-compatible server (DeepSeek, Qwen, Ollama, vLLM, ...) and ``AGCORE_MODEL``
  the model (default ``gpt-4o-mini``).
- Without it, a bundled offline server (:class:`agcore_tools.testing.ScriptedChatServer`)
  plays the model, and the first line of output says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Annotated, Any, Literal

from pydantic import Field

from agcore_tools import (
    AssistantTextDelta,
    CycleConfig,
    LlmCycle,
    PermissionChecker,
    PermissionConfig,
    ReasoningDelta,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools.testing import ScriptedChatServer, ScriptItem

PROMPT = "What's the weather in Paris and in Tokyo right now, and what is 120 EUR in yen?"

_WEATHER = {
    "paris": {"temp_c": 18, "sky": "light rain"},
    "tokyo": {"temp_c": 24, "sky": "sunny"},
    "beijing": {"temp_c": 21, "sky": "clear"},
}
_RATES = {("EUR", "JPY"): 162.4, ("USD", "JPY"): 149.8, ("EUR", "USD"): 1.084}


async def build_registry(stack: contextlib.AsyncExitStack) -> ToolRegistry:
    """The demo's tools. ``stack`` owns anything that must be closed at the end (an MCP
    client whose tools join this registry, for instance)."""
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))

    @registry.tool(permissions=["network"])
    async def get_weather(city: str, unit: Literal["C", "F"] = "C") -> dict[str, Any]:
        """Current weather for a city.

        Args:
            city: The city's name, e.g. "Paris".
            unit: "C" for Celsius or "F" for Fahrenheit.
        """
        await asyncio.sleep(0.05)  # a network call would take a while
        known = _WEATHER.get(city.lower())
        if known is None:
            raise ValueError(f"no weather station in {city!r}")
        temp = known["temp_c"] if unit == "C" else round(known["temp_c"] * 9 / 5 + 32)
        return {"city": city, "temperature": temp, "unit": unit, "sky": known["sky"]}

    @registry.tool
    def convert_currency(
        amount: Annotated[float, Field(gt=0, description="How much money.")],
        from_currency: Annotated[str, Field(description="ISO code, e.g. EUR.")],
        to_currency: Annotated[str, Field(description="ISO code, e.g. JPY.")],
    ) -> dict[str, Any]:
        """Convert money between currencies at today's rate."""
        pair = (from_currency.upper(), to_currency.upper())
        if pair not in _RATES:
            raise ValueError(f"no rate for {pair[0]}->{pair[1]}")
        rate = _RATES[pair]
        return {"amount": round(amount * rate, 2), "currency": pair[1], "rate": rate}

    # A later step adds an MCP server's tools to the same registry here, e.g.:
    #     client = await stack.enter_async_context(McpClient.stdio(...))
    #     registry.register_all(await client.into_tools())
    return registry


def offline_script() -> list[ScriptItem]:
    """What the offline model says: two tool turns, then the answer."""
    reply = ScriptedChatServer
    return [
        reply.reply_tool_calls(
            [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})],
            text="Let me check both cities at once.",
        ),
        reply.reply_tool_calls(
            [("convert_currency", {"amount": 120, "from_currency": "EUR", "to_currency": "JPY"})],
            text="Now the currency.",
        ),
        reply.reply_text(
            "Paris: 18 °C with light rain. Tokyo: 24 °C and sunny. "
            "120 EUR is about 19,488 JPY at today's rate of 162.4."
        ),
    ]


def _short(value: Any, limit: int = 90) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def show(cycle: LlmCycle, registry: ToolRegistry, prompt: str) -> None:
    """Run the loop and print every event as it happens."""
    print(f"user> {prompt}")
    at_line_start = True
    async with cycle.submit_stream_with_tools(prompt, registry) as events:
        async for event in events:
            match event:
                case AssistantTextDelta(text=text) | ReasoningDelta(text=text):
                    if at_line_start:
                        print("assistant> ", end="")
                    print(text, end="", flush=True)
                    at_line_start = False
                case TurnComplete(reason=reason, turn=turn):
                    if not at_line_start:
                        print()
                    print(f"  [turn {turn} ended: {reason.value}]")
                    at_line_start = True
                case ToolExecutionStarted(tool_name=name, input=args, call_id=call_id):
                    print(f"  -> {name}({_short(args)})  [{call_id}]")
                case ToolExecutionCompleted(tool_name=name, error=None, model_text=text) as done:
                    print(f"  <- {name}: {_short(text)}  ({done.duration * 1000:.1f} ms)")
                case ToolExecutionCompleted(tool_name=name, error=error):
                    print(f"  <- {name} failed: {error}")
    response = events.response
    if response is not None:
        usage = response.usage
        print(
            f"done: {response.turns} requests, {len(response.invocations)} tool calls, "
            f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens"
        )


async def main(argv: list[str]) -> None:
    prompt = " ".join(argv) or PROMPT
    async with contextlib.AsyncExitStack() as stack:
        registry = await build_registry(stack)
        if os.environ.get("OPENAI_API_KEY"):
            model = os.environ.get("AGCORE_MODEL", "gpt-4o-mini")
            where = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
            print(f"agcore_tools demo: talking to {where} with model {model}.")
            cycle = LlmCycle(CycleConfig(model), system_prompt="Be brief. Use the tools.")
        else:
            print(
                "agcore_tools demo: OFFLINE - no OPENAI_API_KEY is set, so a bundled scripted "
                "server plays the model (set OPENAI_API_KEY, and optionally OPENAI_BASE_URL "
                "and AGCORE_MODEL, to use a real one)."
            )
            server = stack.enter_context(ScriptedChatServer(offline_script(), chunk_chars=6))
            cycle = LlmCycle(CycleConfig("scripted-model"), client=server.client())
        await stack.enter_async_context(cycle)
        print(f"tools: {', '.join(registry.list_tools())}")
        await show(cycle, registry, prompt)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
