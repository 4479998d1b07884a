"""Resources: list (pages), templates, read, and subscriptions, against the fixture
servers over stdio and Streamable HTTP, on both protocol generations."""

from __future__ import annotations

import asyncio
import base64
import logging
import sys
from typing import Any

import pytest

from agcore_tools import (
    Audio,
    File,
    Image,
    McpClient,
    McpError,
    McpNotInitializedError,
    StdioTransport,
)
from agcore_tools.mcp import McpResourceContents, McpResourceInfo, McpResourceTemplateInfo
from agcore_tools.mcp._resources import UpdateFeeds, contents_value

from .conftest import PAGED, SERVERS, assert_no_stray_tasks, fixture_stdio

pytestmark = pytest.mark.timeout(60)

ERAS = pytest.mark.parametrize("protocol", ["auto", "legacy"])


def _paged(protocol: str) -> McpClient:
    transport = StdioTransport(sys.executable, [str(PAGED)])
    return McpClient("paged", transport, timeout=15, protocol=protocol)  # type: ignore[arg-type]


@ERAS
async def test_list_templates_and_read(make_client: Any, protocol: str) -> None:
    async with make_client(protocol=protocol) as client:
        resources = {r.uri: r for r in await client.list_resources()}
        assert set(resources) == {"fixture://readme", "fixture://logo", "fixture://counter"}
        assert resources["fixture://readme"] == McpResourceInfo(
            uri="fixture://readme",
            name="readme",
            description="What this server is.",
            mime_type="text/plain",
            annotations={"audience": ["user"], "priority": 0.5},
        )
        assert await client.list_resource_templates() == [
            McpResourceTemplateInfo(
                uri_template="fixture://notes/{name}",
                name="note",
                description="A note.",
                mime_type="text/plain",
            )
        ]
        assert await client.read_resource("fixture://readme") == [
            McpResourceContents("fixture://readme", "text/plain", text="A fixture server.")
        ]
        (logo,) = await client.read_resource("fixture://logo")
        assert logo.text is None and logo.mime_type == "image/png"
        assert logo.data == b"\x89PNG\r\n\x1a\n" and base64.b64decode(logo.blob or "") == logo.data
        (filled,) = await client.read_resource("fixture://notes/milk")
        assert filled.text == "Note milk"
        with pytest.raises(McpError, match="resources/read 'fixture://nope' failed: "):
            await client.read_resource("fixture://nope")


@ERAS
async def test_lists_follow_every_page_and_refuse_a_repeated_cursor(protocol: str) -> None:
    async with _paged(protocol) as client:
        resources = await client.list_resources()
        assert [r.uri for r in resources] == [f"paged://{i:02d}" for i in range(25)]
        prompts = await client.list_prompts()
        assert [p.name for p in prompts] == [f"p{i:02d}" for i in range(25)]
        with pytest.raises(McpError, match="resources/templates/list repeated the cursor 'again'"):
            await client.list_resource_templates()


@ERAS
async def test_a_server_with_resources_but_no_templates_handler_lists_none(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    # As mcp-dice (the SDK's low-level Server): resources advertised, -32601 for templates.
    caplog.set_level("DEBUG", logger="agcore_tools.mcp")
    transport = StdioTransport(sys.executable, [str(SERVERS / "no_templates_server.py")])
    client = McpClient("dice", transport, timeout=15, protocol=protocol)  # type: ignore[arg-type]
    async with client:
        assert [r.uri for r in await client.list_resources()] == ["dice://2d6"]
        assert await client.list_resource_templates() == []
        assert client.connected
    assert (
        "MCP server 'dice' answered resources/templates/list with -32601 (method not found): "
        "it has no templates"
    ) in caplog.messages


async def test_requests_need_a_connection_and_a_capability() -> None:
    client = McpClient("fixture", fixture_stdio())
    with pytest.raises(McpNotInitializedError, match="cannot send resources/list: not connected"):
        await client.list_resources()
    with pytest.raises(ValueError, match="a resource URI must be a non-empty string"):
        await client.read_resource("")


@ERAS
async def test_a_subscription_yields_updates_until_it_is_left(
    make_client: Any, protocol: str
) -> None:
    async with make_client(protocol=protocol) as client:
        async with client.subscribe_resource("fixture://counter") as updates:
            if protocol == "legacy":  # resources/subscribe reached the server
                assert await client.call_tool("subscriptions") == {"result": ["fixture://counter"]}
            assert await client.call_tool("bump") == "1"
            assert await asyncio.wait_for(anext(updates), 10) == "fixture://counter"
            assert (await client.read_resource("fixture://counter"))[0].text == "1"
            # Updates not read yet are merged: two bumps, one update.
            await client.call_tool("bump")
            await client.call_tool("bump")
            assert await asyncio.wait_for(anext(updates), 10) == "fixture://counter"
            assert (await client.read_resource("fixture://counter"))[0].text == "3"
        if protocol == "legacy":  # and resources/unsubscribe on the way out
            assert await client.call_tool("subscriptions") == {"result": []}
        with pytest.raises(ValueError, match="inside 'async with'"):
            await anext(updates)
    await assert_no_stray_tasks()


@ERAS
async def test_leaving_one_of_two_subscriptions_to_a_uri_keeps_the_other(
    make_client: Any, protocol: str
) -> None:
    async with make_client(protocol=protocol) as client:
        async with client.subscribe_resource("fixture://counter") as kept:
            async with client.subscribe_resource("fixture://counter") as left:
                await client.call_tool("bump")
                assert await asyncio.wait_for(anext(left), 10) == "fixture://counter"
                assert await asyncio.wait_for(anext(kept), 10) == "fixture://counter"
            if protocol == "legacy":  # the server's one subscription to the URI stays
                assert await client.call_tool("subscriptions") == {"result": ["fixture://counter"]}
            await client.call_tool("bump")
            assert await asyncio.wait_for(anext(kept), 10) == "fixture://counter"
        if protocol == "legacy":  # the last one out unsubscribes
            assert await client.call_tool("subscriptions") == {"result": []}
    await assert_no_stray_tasks()


@ERAS
async def test_a_subscription_ends_with_the_connection(protocol: str) -> None:
    client = McpClient("fixture", fixture_stdio(), timeout=15, protocol=protocol)  # type: ignore[arg-type]
    await client.connect()
    async with client.subscribe_resource("fixture://counter") as updates:
        await client.close()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(updates), 10)

    await client.connect()
    try:
        async with client.subscribe_resource("fixture://counter") as updates:
            with pytest.raises(McpError):
                await client.call_tool("die", {"code": 3})
            with pytest.raises(McpError, match="subscription to 'fixture://counter' ended"):
                await asyncio.wait_for(anext(updates), 10)
    finally:
        await client.close()


@ERAS
async def test_a_server_without_subscriptions_is_refused(protocol: str) -> None:
    async with _paged(protocol) as client:
        with pytest.raises(McpError, match="the server offers no subscriptions"):
            async with client.subscribe_resource("paged://01"):
                pass


def test_update_feeds_match_sub_resources_and_merge_repeats() -> None:
    async def run() -> None:
        feeds = UpdateFeeds()
        folder, other = feeds.open("file:///docs"), feeds.open("file:///docs2")
        for uri in ("file:///docs/a", "file:///docs/a", "file:///docs", "file:///x"):
            feeds.deliver(uri)
        assert [await folder.next(), await folder.next()] == ["file:///docs/a", "file:///docs"]
        assert other.pending == {}
        assert feeds.close(other)  # the last feed of its URI
        feeds.end("exited with code 1")
        assert await folder.next() is None and folder.lost == "exited with code 1"
        late = feeds.open("file:///docs")  # after the end: ended at once
        assert await late.next() is None

    asyncio.run(run())


def test_contents_value_is_text_or_typed_parts(caplog: pytest.LogCaptureFixture) -> None:
    text = McpResourceContents("a://1", "text/plain", text="one")
    blob = McpResourceContents("a://2", "application/octet-stream", blob="AAE=")
    assert contents_value([text, text]) == "one\none"
    assert contents_value([text, blob]) == [
        {"uri": "a://1", "mimeType": "text/plain", "text": "one"},
        {"uri": "a://2", "mimeType": "application/octet-stream", "blob": "AAE="},
    ]
    # An image, a sound or a PDF is what a model sees, not base64 text it reads.
    media = [
        McpResourceContents("screenshot://inv", "image/png", blob="iVBORw0KGgo="),
        McpResourceContents("memo://1", "audio/wav", blob="UklGRg=="),
        McpResourceContents("file:///q3%20final.pdf", "application/pdf", blob="JVBERi0xLjc="),
    ]
    assert contents_value(media) == [
        {"uri": "screenshot://inv", "mimeType": "image/png", "blob": Image(b"\x89PNG\r\n\x1a\n")},
        {"uri": "memo://1", "mimeType": "audio/wav", "blob": Audio(b"RIFF", "audio/wav")},
        {
            "uri": "file:///q3%20final.pdf",
            "mimeType": "application/pdf",
            "blob": File(b"%PDF-1.7", "application/pdf", filename="q3 final.pdf"),
        },
    ]
    # Data that is no base64 stays as the server sent it, with a warning.
    broken = McpResourceContents("shot://2", "image/png", blob="not base64!")
    with caplog.at_level(logging.WARNING, logger="agcore_tools.mcp"):
        assert contents_value([broken]) == [
            {"uri": "shot://2", "mimeType": "image/png", "blob": "not base64!"}
        ]
    assert "MCP resource 'shot://2' has an unusable image/png blob" in caplog.text


@ERAS
async def test_resources_and_prompts_restart_a_server_that_died(protocol: str) -> None:
    # Their capability check wanted a live connection: after a crash every read,
    # list or prompt failed "not connected" until a tools/call restarted the server.
    client = McpClient("fixture", fixture_stdio(), timeout=15, protocol=protocol)  # type: ignore[arg-type]
    async with client:
        with pytest.raises(McpError):
            await client.call_tool("die", {"code": 3})
        [part] = await client.read_resource("fixture://readme")
        assert part.text == "A fixture server."
        with pytest.raises(McpError):
            await client.call_tool("die", {"code": 3})
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        assert "Say hello to Ada." in str(prompt)
