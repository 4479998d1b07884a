"""Answers the client cannot take: over ``max_message_size`` (on every transport, a
compressed one counted as it inflates), or nested deeper than the JSON parser reads.
Either fails the call it answers at once, with a recoverable error that says why, and
the connection goes on; nothing of such an answer is kept beyond the limit.

Over stdio the server is the fixture server behind ``servers/answer_proxy.py``, which
spoils the answers to one tool; over Streamable HTTP it is ``servers/fault_server.py``,
whose ``answer`` control has the next ``tools/call`` answered with a text of the test's
(``fail`` does so with an HTTP error). The limits are small, and so are the answers.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import tracemalloc
from collections.abc import Awaitable
from typing import Any

import pytest

from agcore_tools import McpClient, McpError, StdioTransport, StreamableHttpTransport

from .conftest import SERVERS, FaultServer
from .test_faults import ERAS, client_for

pytestmark = pytest.mark.timeout(90)

ANSWERS = SERVERS / "answer_proxy.py"
LIMIT = 64 * 1024
BIG = 200_000  # bytes of text in an answer over LIMIT
TIMEOUT = 20  # far above PROMPT: a call that waited for its timeout fails the test
PROMPT = 5.0
TOO_LARGE = "failed: the answer exceeded the 65536 byte limit, so it was dropped; "
TOO_DEEP = (
    "failed: the answer is nested deeper than 201 levels, which the JSON parser does not "
    "read, so it was dropped"
)


def spoiling(fault: str, method: str = "tools/call", *tool: str, **options: Any) -> McpClient:
    """A client of the fixture server over stdio, whose answers to ``method`` (of
    ``tool``) ``answer_proxy.py`` spoils with ``fault``."""
    transport = StdioTransport(
        sys.executable,
        [str(ANSWERS), fault, method, *tool],
        env={"ANSWER_BYTES": str(BIG)},
        stop_grace=1,
        max_message_size=LIMIT,
    )
    return McpClient("big", transport, timeout=TIMEOUT, **options)


# -- stdio --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("fault", ["huge", "huge-id-last", "unended"])
async def test_an_answer_over_the_limit_fails_its_call_at_once_over_stdio_and_the_next_works(
    protocol: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # "unended": the answer's line does not end until the server writes its next line,
    # which it does only when asked again; the call must not wait for that.
    async with spoiling(fault, "tools/call", "echo", protocol=protocol) as client:
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert time.monotonic() - started < PROMPT
        message = str(info.value)
        assert message.startswith(f"MCP server 'big': tools/call 'echo' {TOO_LARGE}")
        assert "StdioTransport(max_message_size=...) raises the limit" in message
        assert info.value.is_recoverable() and info.value.may_have_run
        assert "exceeded the 65536 byte limit; dropped, the request fails" in caplog.text
        # The rest of that line was dropped, and the lines after it are read whole.
        assert client.connected
        assert await client.call_tool("weather", {"city": "Lima"}) == {
            "city": "Lima",
            "temperature": 21.5,
        }
        assert await client.call_tool("weather", {"city": "Oslo"}) == {
            "city": "Oslo",
            "temperature": 21.5,
        }


async def test_a_notification_over_the_limit_is_dropped_and_fails_no_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with spoiling("huge-log", "tools/call", "echo", protocol="legacy") as client:
        assert await client.call_tool("echo", {"text": "mine"}) == "mine"
    assert "wrote a message that exceeded the 65536 byte limit to stdout; dropped" in caplog.text
    assert "not JSON-RPC" not in caplog.text


@pytest.mark.parametrize("protocol", ERAS)
async def test_an_answer_nested_too_deeply_fails_its_call_at_once_over_stdio(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    # It used to be skipped as stray output ("logs belong on stderr"), and the call
    # waited out its timeout.
    async with spoiling("deep", "tools/call", "echo", protocol=protocol) as client:
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert time.monotonic() - started < PROMPT
        assert str(info.value).startswith(f"MCP server 'big': tools/call 'echo' {TOO_DEEP}; ")
        assert info.value.is_recoverable()
        assert "not JSON-RPC" not in caplog.text
        assert client.connected
        assert await client.call_tool("weather", {"city": "Lima"}) == {
            "city": "Lima",
            "temperature": 21.5,
        }


@pytest.mark.parametrize(
    ("fault", "problem"),
    [("huge-bad-id", TOO_LARGE), ("huge-bad-id-last", TOO_LARGE), ("deep-bad-id-last", TOO_DEEP)],
)
async def test_an_unreadable_answer_whose_id_is_no_json_fails_the_calls_not_the_connection(
    fault: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An id that only looks like JSON (07, "\q7") made the line reader raise: the
    # connection was lost, and the server stopped. Its id unknown, the answer fails the
    # requests waiting, as one whose id is not found does.
    async with spoiling(fault, "tools/call", "echo", protocol="legacy") as client:
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert time.monotonic() - started < PROMPT
        assert str(info.value).startswith(f"MCP server 'big': tools/call 'echo' {problem}")
        assert info.value.is_recoverable()
        assert "with no id found in it, to stdout; dropped" in caplog.text
        assert "connection lost" not in caplog.text
        assert client.connected
        assert await client.call_tool("weather", {"city": "Lima"}) == {
            "city": "Lima",
            "temperature": 21.5,
        }


async def test_a_tool_list_nested_too_deeply_fails_the_start_at_once() -> None:
    client = spoiling("deep", "tools/list", protocol="legacy")
    started = time.monotonic()
    with pytest.raises(McpError, match=f"tools/list {TOO_DEEP}"):
        await client.connect()
    assert time.monotonic() - started < PROMPT


# -- Streamable HTTP ----------------------------------------------------------------------


def text_answer(text: str) -> str:
    result = {"content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": "__ID__", "result": result}).replace(
        '"__ID__"', "__ID__"
    )


def limited(server: FaultServer, protocol: str) -> McpClient:
    transport = StreamableHttpTransport(server.url, max_message_size=LIMIT)
    return client_for(server, protocol, transport=transport, timeout=TIMEOUT)


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("compressed", [False, True])
async def test_a_json_answer_over_the_limit_fails_its_call_at_once_counted_inflated(
    fault_server: FaultServer, protocol: str, compressed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # 200 KB of "x" gzip to a few hundred bytes: the limit counts what the SDK would read.
    async with limited(fault_server, protocol) as client:
        await fault_server.control(
            "answer", raw=text_answer("x" * BIG), gzip=compressed, **{"as": "json"}
        )
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert time.monotonic() - started < PROMPT
        message = str(info.value)
        assert message.startswith(f"MCP server 'faulty': tools/call 'echo' {TOO_LARGE}")
        assert "StreamableHttpTransport(max_message_size=...) raises the limit" in message
        assert info.value.is_recoverable()
        assert "exceeded the 65536 byte limit; dropped, the request fails" in caplog.text
        assert client.connected
        assert await client.call_tool("echo", {"text": "next"}) == "next"


async def test_the_warning_of_a_dropped_answer_hides_the_urls_key(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The warning named the server by its URL as given: the key in its query with it.
    url = f"{fault_server.url}?token=S3CRET-url-token&v=2"
    transport = StreamableHttpTransport(url, max_message_size=LIMIT)
    async with client_for(fault_server, "legacy", transport=transport) as client:
        await fault_server.control("answer", raw=text_answer("x" * BIG), **{"as": "json"})
        with caplog.at_level(logging.WARNING, "agcore_tools.mcp"), pytest.raises(McpError):
            await client.call_tool("echo", {"text": "mine"})
    assert f"MCP server at {fault_server.url}?token=***&v=***: the answer to request" in caplog.text
    assert "S3CRET" not in caplog.text


@pytest.mark.parametrize("form", ["json", "sse"])
async def test_a_compressed_answer_is_read_and_its_id_checked(
    fault_server: FaultServer, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with limited(fault_server, "legacy") as client:
        await fault_server.control("answer", raw=text_answer("y" * 1000), gzip=True, **{"as": form})
        assert await client.call_tool("echo", {"text": "mine"}) == "y" * 1000
        # An answer with another id was passed on unchecked when compressed.
        await fault_server.control("wrong-id", id=999999, gzip=True, **{"as": form})
        with pytest.raises(McpError, match=r"mismatched id \(999999, not "):
            await client.call_tool("echo", {"text": "mine"})
        assert [r for r in caplog.records if r.levelno == logging.WARNING]
        assert client.connected


@pytest.mark.parametrize("form", ["json", "sse"])
async def test_an_answer_nested_too_deeply_fails_its_call_as_over_stdio(
    fault_server: FaultServer, form: str
) -> None:
    deep = text_answer("z").replace(
        '"result": {', '"result": {"_meta": ' + "[" * 250 + "]" * 250 + ", "
    )
    async with limited(fault_server, "legacy") as client:
        await fault_server.control("answer", raw=deep, **{"as": form})
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert str(info.value).startswith(f"MCP server 'faulty': tools/call 'echo' {TOO_DEEP}; ")
        assert info.value.is_recoverable()
        assert client.connected


async def test_a_too_deep_sse_answer_whose_id_is_no_json_fails_its_call_as_malformed(
    fault_server: FaultServer,
) -> None:
    # Its id (07, last) made the guard raise inside the SSE stream, which the SDK read
    # as "SSE stream ended without a response": now the event goes on to the SDK, as
    # one whose id is not found, and the call fails naming what is wrong with it.
    result = '{"_meta": ' + "[" * 250 + "]" * 250 + ', "content": []}'
    deep = '{"jsonrpc": "2.0", "result": ' + result + ', "id": 0__ID__}'
    async with limited(fault_server, "legacy") as client:
        await fault_server.control("answer", raw=deep, **{"as": "sse"})
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert "an SSE event of the server's answer is malformed: Invalid JSON: recursion " in (
            str(info.value)
        )
        assert client.connected
        assert await client.call_tool("echo", {"text": "next"}) == "next"


async def test_an_error_answers_body_is_read_no_further_than_the_limit(
    fault_server: FaultServer,
) -> None:
    said = "bad argument: " + "w" * BIG
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": said}}
    async with limited(fault_server, "legacy") as client:
        await fault_server.control(
            "fail",
            status=400,
            method="tools/call",
            body=json.dumps(error),
            headers={"content-type": "application/json"},
        )
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert info.value.status_code == 400
        # Cut at the limit, the body is no JSON-RPC error the SDK reads: the status and
        # the start of the body (what the client reads of any failed answer) remain.
        assert "w" * 1000 not in str(info.value)
        assert client.connected


async def peak_memory(action: Awaitable[Any]) -> int:
    """The most memory Python held at once while ``action`` ran, above what it held
    before."""
    tracemalloc.start()
    try:
        await action
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("gzip", "repeat"), [(False, 32 * 1024), (True, 100 * 1024)], ids=["plain", "gzip"]
)
async def test_a_redirects_body_is_read_no_further_than_the_limit(
    fault_server: FaultServer, gzip: bool, repeat: int
) -> None:
    # The SDK drains the body of a redirect it follows, and the guard had decoded it
    # whole: a 100 KiB gzip body on a 307 held 100 MiB, whatever max_message_size.
    async with limited(fault_server, "legacy") as client:
        await fault_server.control(
            "fail",
            status=307,
            method="tools/call",
            headers={"location": fault_server.url},
            body="r" * 1024,
            repeat=repeat,
            gzip=gzip,
        )
        held = await peak_memory(client.call_tool("echo", {"text": "mine"}))
        assert held < 8 * MIB, f"{held / MIB:.1f} MiB"
        # The redirect was followed: the call was answered where it led.
        assert client.connected
        assert await client.call_tool("echo", {"text": "next"}) == "next"


async def test_the_closing_deletes_body_is_read_no_further_than_the_limit(
    fault_server: FaultServer,
) -> None:
    client = limited(fault_server, "legacy")
    await client.connect()
    try:
        await fault_server.control(
            "fail-delete", status=200, body="d" * 1024, repeat=100 * 1024, gzip=True
        )
    finally:
        held = await peak_memory(client.close())
    assert held < 8 * MIB, f"{held / MIB:.1f} MiB"
