"""examples/mcp_server.py, the demo's bundled server, works through McpClient."""

from __future__ import annotations

import sys

import pytest

from agcore_tools import (
    McpClient,
    McpError,
    PermissionChecker,
    PermissionConfig,
    StdioTransport,
    ToolExecutionError,
    ToolRegistry,
)

from .conftest import ROOT


async def test_the_demo_server_serves_its_tools() -> None:
    transport = StdioTransport(sys.executable, [str(ROOT / "examples" / "mcp_server.py")])
    async with McpClient("demo", transport, timeout=15) as client:
        names = [d["function"]["name"] for d in await client.list_tools()]
        assert names == ["text_stats", "capital_of", "celsius_to_fahrenheit"]
        assert await client.call_tool("capital_of", {"country": "Japan"}) == "Tokyo"
        assert await client.call_tool("text_stats", {"text": "Hi there. Bye!"}) == {
            "words": 3,
            "characters": 14,
            "sentences": 2,
        }
        with pytest.raises(ToolExecutionError, match="unknown country 'Atlantis'"):
            await client.call_tool("capital_of", {"country": "Atlantis"})
        # Read-only, closed-world tools pass the default permission policy.
        registry = ToolRegistry(PermissionChecker(PermissionConfig()))
        registry.register_all(client.into_tools(prefix=True))
        converted = await registry.invoke("demo__celsius_to_fahrenheit", {"celsius": 100})
        assert converted.result() == "212 °F"


async def test_the_demo_server_serves_resources_prompts_and_completions() -> None:
    transport = StdioTransport(sys.executable, [str(ROOT / "examples" / "mcp_server.py")])
    async with McpClient("demo", transport, timeout=15) as client:
        assert (client.instructions or "").startswith("Offline demo tools")
        assert [r.uri for r in await client.list_resources()] == ["demo://capitals"]
        (table,) = await client.read_resource("demo://capitals")
        assert (table.text or "").splitlines()[0] == "France: Paris"
        assert (await client.read_resource("demo://capitals/Peru"))[0].text == "Lima"
        with pytest.raises(McpError, match="unknown country 'atlantis'"):
            await client.read_resource("demo://capitals/atlantis")
        prompt = await client.get_prompt("weekend_trip", {"country": "Kenya"})
        assert prompt.messages[0]["content"]["text"].startswith("Plan a weekend in the capital")
        completion = await client.complete("country", "", prompt="weekend_trip")
        assert completion.values == ("France", "Germany", "Japan", "Kenya", "Peru")
