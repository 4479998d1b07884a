"""A server whose tool list holds malformed tools: they are left out, each with a
WARNING, and its other tools are listed and called as usual; a list with no valid tool
fails, naming the first fault.

Before, one malformed tool failed the whole ``tools/list`` answer in the MCP SDK, and
the server was unusable. Over stdio the server is the fixture server (or the paged
one) behind ``servers/tools_proxy.py``, which spoils its tool lists; over Streamable
HTTP it is a handwritten endpoint. ``legacy`` is the 2025-11-25 handshake, ``auto``
negotiates 2026-07-28.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agcore_tools import McpClient, McpError, StdioTransport, StreamableHttpTransport, ToolRegistry
from agcore_tools.mcp._tool_vetting import SLICE

from .conftest import SERVERS, QuietHandler, assert_no_stray_tasks, handwritten
from .test_faults import wait_for

pytestmark = pytest.mark.timeout(90)

ERAS = ["legacy", "auto"]
PROXY = SERVERS / "tools_proxy.py"
TIMEOUT = 20
OTHERS = "; the server's other tools are usable"

# What the client says of the tools that servers/tools_proxy.py's "some" adds.
LEFT_OUT = (
    "'bad_schema' (tools[1].inputSchema: Input should be a valid dictionary or instance of "
    "InputSchema)",
    "a tool without a valid name (tools[2].name: Input should be a valid string)",
    "'bad_description' (tools[3].description: Input should be a valid string)",
    "'bad_annotations' (tools[4].annotations.readOnlyHint: Input should be a valid boolean)",
    "'bad_icons' (tools[5].icons[0].src: Input should be a valid string)",
    "'bad_output' (tools[6].outputSchema: Input should be a valid dictionary or instance of "
    "OutputSchema)",
)


def proxied(mode: str, server: str = "fixture") -> StdioTransport:
    return StdioTransport(sys.executable, [str(PROXY), mode, server], stop_grace=1)


def left_out(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == level and "left out the malformed tool" in r.getMessage()
    ]


def warned(server: str, lines: tuple[str, ...]) -> list[str]:
    return [
        f"MCP server '{server}': tools/list: left out the malformed tool {x}{OTHERS}" for x in lines
    ]


@pytest.mark.parametrize("protocol", ERAS)
async def test_malformed_tools_are_left_out_and_the_others_are_called_through_a_registry(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = McpClient("odd", proxied("some"), protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        names = [d["function"]["name"] for d in registry.definitions()]
        assert {"echo", "weather", "word_count"} <= set(names)
        assert [n for n in names if n.startswith("bad_") or n == "42"] == []
        assert (await registry.invoke("echo", {"text": "still here"})).output == "still here"
        # weather declares an output schema, which the SDK checks its result against:
        # the SDK read the list without the malformed tools, and cached the rest.
        weather = await registry.invoke("weather", {"city": "Lima"})
        assert weather.output == {"city": "Lima", "temperature": 21.5}
    assert client.malformed_tools == LEFT_OUT
    assert left_out(caplog) == warned("odd", LEFT_OUT)
    await assert_no_stray_tasks()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_list_refreshed_on_list_changed_leaves_them_out_again_without_warning_again(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agcore_tools")
    client = McpClient("odd", proxied("some"), protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        await client.call_tool("add_tool", {"name": "fresh"})

        async def listed() -> bool:
            return "fresh" in [d["function"]["name"] for d in await client.definitions()]

        await wait_for(listed, "the list_changed notice to refresh the list")
        assert await client.call_tool("fresh") == "I am fresh"
        assert client.malformed_tools == LEFT_OUT
    assert left_out(caplog) == warned("odd", LEFT_OUT)  # once, for the first list
    assert left_out(caplog, logging.DEBUG)[: len(LEFT_OUT)] == warned("odd", LEFT_OUT)


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_tool_the_client_has_not_listed_is_called_though_the_sdk_lists_again_for_it(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The SDK lists the tools itself before it checks the result of a tool it has not
    # cached (for its output schema): that list is read without the malformed tools too.
    caplog.set_level(logging.DEBUG, logger="agcore_tools")
    client = McpClient("odd", proxied("some"), protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        await client.call_tool("add_routed_tool")  # registered without a list_changed
        assert await client.call_tool("routed", {"region": "eu"}) == "routed to eu"
    sdk_lists = [m for m in left_out(caplog, logging.DEBUG) if "(sent by the MCP SDK)" in m]
    assert sdk_lists and "'bad_schema'" in sdk_lists[0]
    assert left_out(caplog) == warned("odd", LEFT_OUT)


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_malformed_tool_on_a_later_page_is_left_out_naming_its_page(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = McpClient("paged", proxied("late", "paged"), protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        names = [d["function"]["name"] for d in await client.definitions()]
        assert len(names) == 25 and "late_bad" not in names
        assert await client.call_tool("tool_22") == "tool_22"  # on the last page
    fault = "Input should be a valid dictionary or instance of InputSchema"
    expected = (
        f"'late_bad' (tools[10].inputSchema on page 2: {fault})",
        f"'late_bad' (tools[5].inputSchema on page 3: {fault})",
    )
    assert client.malformed_tools == expected
    assert left_out(caplog) == warned("paged", expected)


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize(("server", "count"), [("fixture", None), ("paged", 25)])
async def test_a_list_with_no_valid_tool_fails_naming_the_first_fault(
    protocol: str, server: str, count: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    client = McpClient("odd", proxied("all", server), protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    with pytest.raises(McpError) as info:
        await client.connect()
    message = str(info.value)
    assert message.startswith(
        "MCP server 'odd': tools/list got an invalid answer: tools[0].inputSchema: Input "
        "should be a valid dictionary or instance of InputSchema (and "
    )
    if count is not None:
        assert message.endswith(f"(and {count - 1} more malformed tools)")
    assert "\n" not in message and not client.connected
    # pydantic's whole report stays on the error's cause.
    assert "ListToolsResult" in str(info.value.__cause__)
    assert left_out(caplog) == []
    await assert_no_stray_tasks()


# -- over Streamable HTTP ----------------------------------------------------------------

SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
GOOD: list[dict[str, Any]] = [
    {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        },
        "outputSchema": SUM_SCHEMA,
    },
    {
        "name": "shout",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
]
BAD: dict[str, Any] = {"name": "bad_schema", "inputSchema": "object"}
# 2026-07-28 answers carry these; a 2025-11-25 session drops them.
MODERN = {"resultType": "complete", "ttlMs": 60000, "cacheScope": "private"}


def _answer(method: str, params: dict[str, Any], tools: list[Any]) -> dict[str, Any] | None:
    if method == "server/discover":
        return {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "handwritten", "version": "1"},
            **MODERN,
        }
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "handwritten", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": tools, **MODERN}
    if method == "tools/call":
        args = params.get("arguments") or {}
        if params["name"] == "add":
            total = args["a"] + args["b"]
            text = [{"type": "text", "text": json.dumps({"sum": total})}]
            return {"content": text, "structuredContent": {"sum": total}, **MODERN}
        return {"content": [{"type": "text", "text": args["text"].upper()}], **MODERN}
    if method == "ping":
        return {}
    return None


@contextmanager
def tool_server(tools: list[Any]) -> Iterator[str]:
    """An MCP endpoint answering in JSON, whose tool list is ``tools``; yields its URL."""

    class Server(QuietHandler):
        def do_POST(self) -> None:
            sent = self.posted()
            if sent is None:
                return
            result = _answer(sent["method"], sent.get("params") or {}, tools)
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": sent["id"]}
            if result is None:
                answer["error"] = {"code": -32601, "message": "Method not found"}
            else:
                answer["result"] = result
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # no stream for notifications
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_GET

    with handwritten(Server) as url:
        yield url


@pytest.mark.parametrize("protocol", ERAS)
async def test_over_http_a_malformed_tool_is_left_out_and_the_others_are_called(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    with tool_server([GOOD[0], BAD, GOOD[1]]) as url:
        transport = StreamableHttpTransport(url)
        client = McpClient("web", transport, protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
        async with client:
            assert client.protocol_version == (
                "2025-11-25" if protocol == "legacy" else "2026-07-28"
            )
            registry = ToolRegistry()
            registry.register_all(client.into_tools())
            assert [d["function"]["name"] for d in registry.definitions()] == ["add", "shout"]
            assert (await registry.invoke("add", {"a": 2, "b": 3})).output == {"sum": 5}
            assert (await registry.invoke("shout", {"text": "hi"})).output == "HI"
    line = (
        "'bad_schema' (tools[1].inputSchema: Input should be a valid dictionary or instance "
        "of InputSchema)"
    )
    assert client.malformed_tools == (line,)
    assert left_out(caplog) == warned("web", (line,))
    await assert_no_stray_tasks()


@pytest.mark.parametrize("protocol", ERAS)
async def test_over_http_a_list_with_no_valid_tool_fails_naming_the_fault(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    with tool_server([BAD]) as url:
        transport = StreamableHttpTransport(url)
        client = McpClient("web", transport, protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
        with pytest.raises(McpError) as info:
            await client.connect()
    assert str(info.value) == (
        "MCP server 'web': tools/list got an invalid answer: tools[0].inputSchema: Input "
        "should be a valid dictionary or instance of InputSchema"
    )
    assert left_out(caplog) == []
    await assert_no_stray_tasks()


@pytest.mark.parametrize("protocol", ERAS)
async def test_over_http_a_long_list_is_vetted_in_slices_naming_each_tool_at_its_place(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Checked a slice at a time (SLICE tools), each tool named at its place in the answer.
    long = [{**GOOD[1], "name": f"shout_{i}"} for i in range(3 * SLICE)]
    long[2 * SLICE + 3 : 2 * SLICE + 3] = [BAD]
    with tool_server([*long, GOOD[0]]) as url:
        transport = StreamableHttpTransport(url)
        client = McpClient("web", transport, protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
        async with client:
            names = [d["function"]["name"] for d in await client.definitions()]
            assert len(names) == 3 * SLICE + 1 and "bad_schema" not in names
            assert await client.call_tool("add", {"a": 1, "b": 2}) == {"sum": 3}
    line = (
        f"'bad_schema' (tools[{2 * SLICE + 3}].inputSchema: Input should be a valid "
        "dictionary or instance of InputSchema)"
    )
    assert client.malformed_tools == (line,)
    assert left_out(caplog) == warned("web", (line,))
    await assert_no_stray_tasks()
