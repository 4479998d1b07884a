"""Prompts (list, get) and completion against the fixture server, over stdio and
Streamable HTTP, on both protocol generations."""

from __future__ import annotations

from typing import Any

import pytest

from agcore_tools import McpClient, McpError, StdioTransport, ToolError
from agcore_tools.mcp import McpCompletion, McpPrompt, McpPromptInfo

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_list_get_and_complete(make_client: Any, protocol: str) -> None:
    async with make_client(protocol=protocol) as client:
        prompts = {p.name: p for p in await client.list_prompts()}
        assert set(prompts) == {"greet", "trip"}
        assert prompts["trip"] == McpPromptInfo(
            name="trip",
            title="Trip",
            description="Plan a trip.",
            arguments=({"name": "country", "required": True}, {"name": "city", "required": False}),
        )
        assert await client.get_prompt("greet", {"name": "Ann"}) == McpPrompt(
            name="greet",
            description="Greet someone.",
            messages=({"role": "user", "content": {"type": "text", "text": "Say hello to Ann."}},),
        )
        trip = await client.get_prompt("trip", {"country": "Peru", "city": "Cusco"})
        assert [(m["role"], m["content"]["text"]) for m in trip.messages] == [
            ("user", "Plan a trip to Cusco, Peru."),
            ("assistant", "Where would you like to stay?"),
        ]
        with pytest.raises(McpError, match="prompts/get 'greet' failed: "):
            await client.get_prompt("greet")  # its argument is required

        assert await client.complete("country", "F", prompt="trip") == McpCompletion(
            ("France",), total=1, has_more=False
        )
        cities = await client.complete("city", "L", prompt="trip", context={"country": "France"})
        assert cities.values == ("Lyon", "Lille")
        notes = await client.complete("name", "g", resource_template="fixture://notes/{name}")
        assert notes.values == ("groceries", "gifts", "garden")
        assert (await client.complete("name", "", prompt="greet")).values == ()


async def test_mistakes_in_the_call_are_value_errors() -> None:
    client = McpClient("x", StdioTransport("unused"))
    with pytest.raises(ValueError, match="exactly one of prompt= and resource_template="):
        await client.complete("city", "L")
    with pytest.raises(ValueError, match="exactly one of prompt= and resource_template="):
        await client.complete("city", "L", prompt="trip", resource_template="a://{city}")
    with pytest.raises(ToolError, match="prompt 'trip' arguments must be strings; 'days' is not"):
        await client.get_prompt("trip", {"country": "Peru", "days": 3})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="a prompt name must be a non-empty string"):
        await client.get_prompt("")
