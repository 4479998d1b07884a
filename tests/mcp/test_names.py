"""McpClient's public names: ``definitions()`` (the old ``list_tools()``), the settable
``timeout`` (the old ``with_timeout()``), ``StreamableHttpTransport(max_message_size=)``
(the old ``max_sse_event_size``), and the DeprecationWarning each old name gives."""

from __future__ import annotations

import dataclasses

import pytest

from agcore_tools import McpClient, StdioTransport, StreamableHttpTransport, ToolConfigError

from .conftest import fixture_stdio


def make_client() -> McpClient:
    return McpClient("fixture", fixture_stdio(), timeout=15)


async def test_definitions_lists_the_tools_as_chat_completions_params() -> None:
    async with make_client() as client:
        definitions = await client.definitions()
        names = [d["function"]["name"] for d in definitions]
        assert "echo" in names and "weather" in names
        assert all(d["type"] == "function" for d in definitions)
        assert await client.refresh_tools() == definitions


async def test_list_tools_still_works_and_names_definitions() -> None:
    async with make_client() as client:
        with pytest.warns(DeprecationWarning, match=r"McpClient\.definitions\(\)") as caught:
            listed = await client.list_tools()
        assert listed == await client.definitions()
    assert caught[0].filename == __file__  # points at the caller


def test_definitions_sync_and_the_deprecated_list_tools_sync() -> None:
    client = make_client()
    with client:
        definitions = client.definitions_sync()
        assert "echo" in [d["function"]["name"] for d in definitions]
        with pytest.warns(DeprecationWarning, match=r"McpClient\.definitions_sync\(\)"):
            assert client.list_tools_sync() == definitions


def test_timeout_is_a_settable_property() -> None:
    client = McpClient("x", StdioTransport("server"))
    client.timeout = 2.5
    assert client.timeout == 2.5
    with pytest.raises(ToolConfigError, match="timeout must be a positive number"):
        client.timeout = 0
    assert client.timeout == 2.5
    for sloppy in (True, "5"):  # True read as 1 s, as StreamableHttpTransport refuses it
        with pytest.raises(ToolConfigError, match=f"got {sloppy!r}"):
            McpClient("x", StdioTransport("server"), timeout=sloppy)  # type: ignore[arg-type]


def test_with_timeout_still_works_and_names_the_timeout_property() -> None:
    client = McpClient("x", StdioTransport("server"))
    with pytest.warns(DeprecationWarning, match=r"McpClient\.timeout") as caught:
        assert client.with_timeout(4) is client
    assert client.timeout == 4.0
    assert caught[0].filename == __file__


def test_max_sse_event_size_still_works_and_names_max_message_size() -> None:
    url = "http://127.0.0.1:1/mcp"
    with pytest.warns(
        DeprecationWarning, match=r"use StreamableHttpTransport\(max_message_size"
    ) as caught:
        old = StreamableHttpTransport(url, max_sse_event_size=1024)
    assert caught[0].filename == __file__
    assert old == StreamableHttpTransport(url, max_message_size=1024)
    assert dataclasses.replace(old, max_message_size=2048).max_message_size == 2048
    with pytest.warns(DeprecationWarning, match=r"StreamableHttpTransport\.max_message_size"):
        assert old.max_sse_event_size == 1024
    with pytest.warns(DeprecationWarning), pytest.raises(ToolConfigError, match="not both"):
        StreamableHttpTransport(url, max_message_size=4096, max_sse_event_size=1024)
