"""The read_resource and get_prompt adapters: in a guarded registry, and in the tool
loop, where a model follows a resource_link a tool returned."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import pytest

from agcore_tools import (
    CycleConfig,
    Image,
    InvalidArgumentsError,
    LlmCycle,
    McpClient,
    McpError,
    McpPermissionPolicy,
    Permission,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    StdioTransport,
    ToolRegistry,
)
from agcore_tools.error import McpUsageError
from agcore_tools.mcp import McpPromptInfo
from agcore_tools.testing import ScriptedChatServer as S

from .conftest import PAGED, fixture_stdio

pytestmark = pytest.mark.timeout(60)


def test_adapters_describe_themselves() -> None:
    client = McpClient("docs", StdioTransport("unused"))
    reader, prompts = client.resource_reader_tool(), client.prompt_tool(prefix="d")
    assert (reader.name, prompts.name) == ("read_resource", "d__get_prompt")
    assert reader.parameters["required"] == ["uri"]
    assert prompts.parameters["required"] == ["name"]
    assert "'docs'" in reader.description and "resource_link" in reader.description
    assert reader.required_permissions == prompts.required_permissions == (Permission.READ,)
    assert reader.category == "mcp:docs" and reader.tags == ("mcp",)
    distrust = McpPermissionPolicy(trust_annotations=False, extra=["network"])
    assert client.resource_reader_tool(policy=distrust).required_permissions == (
        Permission.WRITE,
        Permission.DELETE,
        Permission.NETWORK,
    )


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_adapters_in_a_guarded_registry(make_client: Any, protocol: str) -> None:
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))
    async with make_client(protocol=protocol) as client:
        registry.register_all(client.into_tools(prefix=True))
        registry.register_all([client.resource_reader_tool(prefix=True), client.prompt_tool()])
        parts = (await registry.invoke("fixture__link", {})).result()
        link = next(p for p in parts if isinstance(p, dict) and p["type"] == "resource_link")
        read = await registry.invoke("fixture__read_resource", {"uri": link["uri"]})
        assert read.result() == "A fixture server."
        logo = await registry.invoke("fixture__read_resource", {"uri": "fixture://logo"})
        assert logo.result() == [
            {"uri": "fixture://logo", "mimeType": "image/png", "blob": Image(b"\x89PNG\r\n\x1a\n")}
        ]
        prompt = await registry.invoke(
            "get_prompt", {"name": "trip", "arguments": {"country": "Peru"}}
        )
        assert [m["role"] for m in prompt.result()] == ["user", "assistant"]
        assert prompt.result()[0]["content"]["text"] == "Plan a trip to the capital, Peru."

        bad = await registry.invoke("fixture__read_resource", {"url": "fixture://readme"})
        assert isinstance(bad.error, InvalidArgumentsError) and bad.error.is_recoverable()
        assert "uri: Field required" in str(bad.error)
        bad = await registry.invoke("get_prompt", {"name": "trip", "arguments": ["Peru"]})
        assert isinstance(bad.error, InvalidArgumentsError)
        # The server refusing a wrong URI or a missing argument: the model's mistake,
        # which it reads (the connection is fine).
        bad = await registry.invoke("fixture__read_resource", {"uri": "fixture://nope"})
        assert isinstance(bad.error, McpError) and bad.error.is_recoverable()
        assert "resources/read 'fixture://nope' failed: " in str(bad.error)
        bad = await registry.invoke("get_prompt", {"name": "trip"})
        assert isinstance(bad.error, McpError) and bad.error.is_recoverable()
        assert "prompts/get 'trip' failed: " in str(bad.error)

        guarded = ToolRegistry(PermissionChecker(PermissionConfig()))
        strict = McpPermissionPolicy(trust_annotations=False)
        guarded.register(client.resource_reader_tool(policy=strict))
        with pytest.raises(PermissionDeniedError, match="needs 'write'"):
            await guarded.invoke("read_resource", {"uri": "fixture://readme"})


async def test_a_model_follows_a_resource_link() -> None:
    registry = ToolRegistry()
    script = [
        S.reply_tool_calls([("link", {}, "call_link")]),
        S.reply_tool_calls([("read_resource", {"uri": "fixture://readme"}, "call_read")]),
        S.reply_text("It is a fixture server."),
    ]
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        registry.register_all([*client.into_tools(), client.resource_reader_tool()])
        with S(script) as server:
            cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
            try:
                response = await cycle.submit_with_tools("What is the server?", registry)
            finally:
                await asyncio.wait_for(cycle.client.close(), 5)
            last = server.requests[-1].json
    assert response.text == "It is a fixture server."
    answers = {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}
    assert '"uri":"fixture://readme"' in answers["call_link"]
    assert answers["call_read"] == "A fixture server."


async def test_a_model_sees_an_image_resource_as_an_image() -> None:
    # A screenshot read through read_resource reached the model as base64 JSON text
    # (7,481 characters for a 5 KB PNG), cut at the result's byte limit when larger.
    registry = ToolRegistry()
    script = [
        S.reply_tool_calls([("read_resource", {"uri": "fixture://logo"}, "call_read")]),
        S.reply_text("A PNG."),
    ]
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        registry.register(client.resource_reader_tool())
        with S(script) as server:
            cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
            try:
                await cycle.submit_with_tools("What is the logo?", registry)
            finally:
                await asyncio.wait_for(cycle.client.close(), 5)
            sent = server.requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["content"] == (
        '[{"uri":"fixture://logo","mimeType":"image/png","blob":"[image 1 (image/png, 8 B) '
        'is attached in the next user message]"}]'
    )
    logo = Image(b"\x89PNG\r\n\x1a\n")
    assert {"type": "image_url", "image_url": {"url": logo.data_url}} in sent[3]["content"]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_server_without_prompts_or_resources(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: get_prompt's refusal (the client's own capability check) stopped the tool
    # loop, while read_resource's (the server's -32601) reached the model. Both are the
    # client's own check now, and recoverable when called directly too.
    registry = ToolRegistry()
    transport = StdioTransport(sys.executable, [str(PAGED), "--tools-only"])
    async with McpClient("units", transport, protocol=protocol) as client:  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, logger="agcore_tools.mcp"):
            registry.register(client.prompt_tool(prefix=True))
            registry.register(client.resource_reader_tool(prefix=True))
        assert [r.getMessage() for r in caplog.records] == [
            "MCP server 'units' offers no prompts: prompt_tool() makes a tool whose every "
            "call fails; leave it out for this server",
            "MCP server 'units' offers no resources: resource_reader_tool() makes a tool "
            "whose every call fails; leave it out for this server",
        ]
        prompt = await registry.invoke("units__get_prompt", {"name": "convert_recipe"})
        assert isinstance(prompt.error, McpError) and prompt.error.is_recoverable()
        assert str(prompt.error) == (
            "MCP server 'units': cannot send prompts/get 'convert_recipe': the server does "
            "not offer prompts"
        )
        read = await registry.invoke("units__read_resource", {"uri": "units://tables"})
        assert isinstance(read.error, McpError) and read.error.is_recoverable()
        refused = (
            "MCP server 'units': cannot send resources/read 'units://tables': the server "
            "does not offer resources"
        )
        assert str(read.error) == refused
        with pytest.raises(McpError) as info:
            await client.read_resource("units://tables")
        assert str(info.value) == refused and info.value.is_recoverable()
        with pytest.raises(McpError) as info:
            await client.list_resources()
        assert str(info.value) == (
            "MCP server 'units': cannot send resources/list: the server does not offer resources"
        )
        assert info.value.is_recoverable()
        assert client.connected


@pytest.mark.parametrize("code", [-32000, -32001])
async def test_a_servers_own_error_with_a_code_the_sdk_also_uses_reaches_the_model(
    code: int,
) -> None:
    # The SDK uses -32000 for a closed connection and -32001 for its own timeout; servers
    # use them for their own errors. Before: over stdio, a lost connection (or a
    # timeout), which stopped the tool loop.
    registry = ToolRegistry()
    transport = StdioTransport(sys.executable, [str(PAGED)], stop_grace=1)
    async with McpClient("archive", transport) as client:
        registry.register(client.resource_reader_tool())
        read = await registry.invoke("read_resource", {"uri": f"paged://fail/{code}"})
        assert type(read.error) is McpError and read.error.is_recoverable()
        assert str(read.error) == (
            f"MCP server 'archive': resources/read 'paged://fail/{code}' failed: the archive "
            f"is offline (code {code})"
        )
        assert client.connected
        assert await client.read_resource("paged://01")


def test_no_warning_before_the_capabilities_are_known(caplog: pytest.LogCaptureFixture) -> None:
    client = McpClient("later", StdioTransport(sys.executable, [str(PAGED), "--tools-only"]))
    with caplog.at_level(logging.WARNING, logger="agcore_tools.mcp"):
        client.prompt_tool()
        client.resource_reader_tool()
    assert not caplog.records


async def test_get_prompt_is_offered_strict_with_its_arguments_as_pairs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: arguments as a map with free keys, so a strict registry offered it
    # non-strict, with a warning the user could do nothing about.
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        registry = ToolRegistry(strict=True)
        registry.register(client.prompt_tool())
        with caplog.at_level(logging.WARNING):
            [offered] = [d["function"] for d in registry.definitions()]
        assert not caplog.records
        assert offered["strict"] is True
        [pairs, _] = offered["parameters"]["properties"]["arguments"]["anyOf"]
        assert pairs["items"]["required"] == ["name", "value"]

        # As a strict model sends them: every pair whole, arguments left out as null.
        trip = {"name": "trip", "arguments": [{"name": "country", "value": "Peru"}]}
        got = await registry.invoke("get_prompt", trip)
        assert got.result()[0]["content"]["text"] == "Plan a trip to the capital, Peru."
        greet = await registry.invoke("get_prompt", {"name": "greet", "arguments": None})
        # greet without its required argument: the server refuses it, and the model reads why.
        assert isinstance(greet.error, McpError) and greet.error.is_recoverable()
        twice = {"name": "trip", "arguments": [{"name": "country", "value": "a"}] * 2}
        bad = await registry.invoke("get_prompt", twice)
        assert isinstance(bad.error, InvalidArgumentsError)
        assert "arguments: 'country' is given twice" in str(bad.error)


async def test_get_prompt_made_with_the_servers_prompts_names_them() -> None:
    # Before: "Get a prompt of the MCP server 'fixture' by name", and no name in sight.
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        tool = client.prompt_tool(prefix=True, prompts=await client.list_prompts())
    assert tool.description.endswith(
        "Returns the prompt's messages. Its prompts (? marks an optional argument):\n"
        "- greet(name): Greet someone.\n"
        "- trip(country, city?): Plan a trip."
    )
    properties = tool.parameters["properties"]
    assert properties["name"]["enum"] == ["greet", "trip"]
    assert properties["arguments"]["items"]["properties"]["name"]["enum"] == [
        "name",
        "country",
        "city",
    ]


def test_get_prompt_describes_twenty_prompts_and_names_the_rest() -> None:
    client = McpClient("many", StdioTransport("unused"))
    prompts = [
        McpPromptInfo(f"p{i}", description=f"Prompt {i}.\nMore.", arguments=({"name": "x"},))
        for i in range(25)
    ]
    tool = client.prompt_tool(prompts=prompts)
    lines = tool.description.splitlines()
    assert lines[1:3] == ["- p0(x?): Prompt 0.", "- p1(x?): Prompt 1."]
    assert len(lines) == 22 and lines[-1] == "... and 5 more, named in the enum of name."
    assert tool.parameters["properties"]["name"]["enum"] == [f"p{i}" for i in range(25)]
    assert client.prompt_tool(prompts=[]).description.endswith("The server lists no prompts.")
    with pytest.raises(McpUsageError, match=r"takes the list that await client\.list_prompts\(\)"):
        client.prompt_tool(prompts="p0")  # type: ignore[arg-type]
