"""agcore_tools demo: an agent loop over the OpenAI SDK, with local tools and an MCP
server's tools in one registry, and every event printed as it happens.

Run it with ``make demo`` (or ``python examples/demo.py [prompt]``).

- With ``OPENAI_API_KEY`` set it talks to that provider: ``OPENAI_BASE_URL`` picks an
  OpenAI-compatible server (DeepSeek, Qwen, Ollama, vLLM, ...) and ``AGCORE_MODEL``
  the model (default ``gpt-4o-mini``).
- Without it, a bundled offline server (:class:`agcore_tools.testing.ScriptedChatServer`)
  plays the model, and the first line of output says so.

The MCP server is ``examples/mcp_server.py``, started over stdio, so the demo needs no
network either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from _offline import model_client
from pydantic import Field
from streaming_console import print_events

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    McpClient,
    PermissionChecker,
    PermissionConfig,
    StdioTransport,
    ToolRegistry,
)
from agcore_tools.testing import ScriptedChatServer, ScriptItem

PROMPT = (
    "What's the weather in Paris and in Tokyo right now (Tokyo's in Fahrenheit too), "
    "and what is 120 EUR in yen?"
)
MCP_SERVER = Path(__file__).with_name("mcp_server.py")

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

    # The bundled MCP server's tools join the same registry. They say they are
    # read-only, so the default permission policy lets them run.
    server = McpClient("demo", StdioTransport(sys.executable, [str(MCP_SERVER)]))
    await stack.enter_async_context(server)  # connect() now, close() at the end
    registry.register_all(server.into_tools())
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
            [
                ("celsius_to_fahrenheit", {"celsius": 24}),  # an MCP tool
                ("convert_currency", {"amount": 120, "from_currency": "EUR", "to_currency": "JPY"}),
            ],
            text="Now Fahrenheit and the currency.",
        ),
        reply.reply_text(
            "Paris: 18 °C with light rain. Tokyo: 24 °C (75.2 °F) and sunny. "
            "120 EUR is about 19,488 JPY at today's rate of 162.4."
        ),
    ]


async def main(argv: list[str]) -> None:
    prompt = " ".join(argv) or PROMPT
    async with contextlib.AsyncExitStack() as stack:
        client, model = await stack.enter_async_context(
            model_client("agcore_tools demo", offline_script())
        )
        registry = await build_registry(stack)
        cycle = LlmCycle(
            CycleConfig(model), client=client, system_prompt="Be brief. Use the tools."
        )
        for category, entries in registry.groups().items():  # MCP tools: "mcp:<server>"
            print(f"tools ({category or 'local'}): {', '.join(e.name for e in entries)}")
        print(f"user> {prompt}")
        await print_events(cycle.submit_stream_with_tools(prompt, registry))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
