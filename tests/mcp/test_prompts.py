"""Prompts (list, get) and completion against the fixture server, over stdio and
Streamable HTTP, on both protocol generations."""

from __future__ import annotations

from typing import Any

import pytest

from agcore_tools import McpClient, McpError, StdioTransport, ToolError, ToolRegistry
from agcore_tools.mcp import McpCompletion, McpPrompt, McpPromptInfo

from .conftest import NODE_MODULES, SERVERS, require_node_modules, system_node

SDK_1_9 = NODE_MODULES / "mcp-sdk-1-9" / "package.json"  # the TypeScript SDK 1.9.0

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


async def test_a_prompt_whose_arguments_are_all_optional_is_got_without_any() -> None:
    # get_prompt(name) sent no "arguments", and the TypeScript SDK refused the request
    # ("expected object, received undefined"): so did the prompt tool a model called
    # without arguments. An empty map is sent now.
    require_node_modules(SDK_1_9)
    transport = StdioTransport(system_node(), [str(SERVERS / "optional_prompt.mjs")])
    async with McpClient("ts", transport, timeout=20) as client:
        for arguments in (None, {}):
            prompt = await client.get_prompt("wrapup", arguments)
            assert prompt.messages[0]["content"]["text"] == "Wrap up."
        tagged = await client.get_prompt("wrapup", {"tag": "v1"})
        assert tagged.messages[0]["content"]["text"] == "Wrap up and tag v1."
        registry = ToolRegistry()
        registry.register(client.prompt_tool())
        [name] = [entry.name for entry in registry.entries()]
        invocation = await registry.invoke(name, {"name": "wrapup"})
        assert invocation.output[0]["content"]["text"] == "Wrap up."
