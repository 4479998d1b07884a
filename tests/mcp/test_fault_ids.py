"""Answers matched to their requests (issue 25, item 4): a server that answers a call
with a wrong id gets no call to take the answer, and the call fails at once, saying so.
(An unknown id over HTTP, as JSON and SSE, is case 11 of test_fault_matrix.py.)

Over Streamable HTTP the server is ``servers/fault_server.py`` (its ``wrong-id``
control answers the next ``tools/call`` with a stray result, as ``application/json``
or SSE); over stdio it is the fixture server behind ``servers/id_proxy.py``, which
rewrites the id of one tool's answers. ``legacy`` is the 2025-11-25 handshake,
``auto`` negotiates 2026-07-28.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agcore_tools import McpClient, McpError, StdioTransport, StreamableHttpTransport

from .conftest import SERVERS, FaultServer, QuietHandler, assert_no_stray_tasks, handwritten
from .test_faults import ERAS, client_for, wait_for

pytestmark = pytest.mark.timeout(90)

PROXY = SERVERS / "id_proxy.py"
# Far above the client's timeouts' margin: a call that waited for its timeout fails this.
TIMEOUT = 20
PROMPT = 5.0


def mismatch_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "protocol violation" in r.getMessage()
    ]


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("form", ["json", "sse"])
async def test_an_answer_with_another_pending_calls_id_reaches_neither_call(
    fault_server: FaultServer,
    protocol: str,
    form: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    marker = tmp_path / "started"
    async with client_for(fault_server, protocol, timeout=TIMEOUT) as client:
        held = asyncio.create_task(client.call_tool("hold", {"seconds": 30, "marker": str(marker)}))
        await wait_for(lambda: asyncio.to_thread(marker.exists), "the held call to start")
        # The next call is answered with the held call's id: a stray answer for it.
        await fault_server.control("wrong-id", id=None, **{"as": form})
        started = time.monotonic()
        with pytest.raises(McpError, match="the server answered with a mismatched id"):
            await client.call_tool("echo", {"text": "mine"})
        assert time.monotonic() - started < PROMPT
        assert mismatch_logged(caplog)
        # The stray answer did not reach the held call either: it still waits for its own.
        await asyncio.sleep(0)
        assert not held.done()
        held.cancel()
        with pytest.raises(asyncio.CancelledError):
            await held
        assert client.connected
        assert await client.call_tool("echo", {"text": "next"}) == "next"


@pytest.mark.parametrize("protocol", ERAS)
async def test_an_answer_with_an_unknown_id_fails_the_call_at_once_over_stdio(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = StdioTransport(sys.executable, [str(PROXY), "echo", "999999"], stop_grace=1)
    client = McpClient("ids", transport, protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert time.monotonic() - started < PROMPT
        message = str(info.value)
        assert "tools/call 'echo' failed: the server answered with a mismatched id (999999" in (
            message
        )
        assert [m for m in mismatch_logged(caplog) if "999999" in m]
        assert client.connected
        assert await client.call_tool("weather", {"city": "Lima"}) == {
            "city": "Lima",
            "temperature": 21.5,
        }
    await assert_no_stray_tasks()


@pytest.mark.parametrize("protocol", ERAS)
async def test_over_stdio_a_stray_answer_fails_every_waiting_call_it_may_be_for(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = StdioTransport(sys.executable, [str(PROXY), "echo", "999999"], stop_grace=1)
    client = McpClient("ids", transport, protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        calls = [client.call_tool("echo", {"text": f"n{i}"}) for i in range(3)]
        started = time.monotonic()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert time.monotonic() - started < PROMPT
        assert all(isinstance(r, McpError) for r in results), results
        assert all("mismatched id (999999" in str(r) for r in results)
        assert client.connected


def test_the_sse_check_passes_events_unchanged_however_the_bytes_are_cut() -> None:
    from agcore_tools.mcp._matching import SseCheck

    stream = (
        b": a comment\r\n\r\n"
        b'event: message\r\ndata: {"jsonrpc": "2.0", "method": "notifications/progress"}\r\n\r\n'
        b'id: 7\ndata: {"jsonrpc": "2.0",\ndata:  "id": 5, "result": {}}\n\n'
        b'data: {"jsonrpc": "2.0", "id": 999999, "result": {}}\r\r'
        b"data: cut off"
    )
    for size in (1, 2, 3, 7, len(stream)):
        check = SseCheck(5, "test")
        out = b"".join(check.feed(stream[i : i + size]) for i in range(0, len(stream), size))
        out += check.end()
        kept, replaced = out.split(b'event: message\ndata: {"jsonrpc": "2.0", "id": 5, "error"')
        assert kept == stream[: stream.index(b'data: {"jsonrpc": "2.0", "id": 999999')]
        assert b"mismatched id (999999, not 5)" in replaced
        assert replaced.endswith(b"\n\ndata: cut off")


# -- a malformed answer (issue 25, item 7) -------------------------------------------------


@pytest.mark.parametrize(
    ("form", "what"),
    [
        ("json", "the server's answer (application/json) is malformed"),
        ("sse", "an SSE event of the server's answer is malformed"),
    ],
)
@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        ('{"jsonrpc": "2.0", "id": 1, "result":', "Invalid JSON: EOF while parsing a value"),
        ('{"jsonrpc": "2.0", "id": 1, "answer": {}}', "JSONRPCRequest.method: Field required"),
    ],
)
async def test_a_malformed_answer_is_named_in_one_line_without_pydantic_noise(
    fault_server: FaultServer, form: str, what: str, raw: str, complaint: str
) -> None:
    async with client_for(fault_server, "legacy", timeout=TIMEOUT) as client:
        await fault_server.control("malformed", raw=raw, **{"as": form})
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        message = str(info.value)
        assert message.startswith(f"MCP server 'faulty': tools/call 'echo' failed: {what}: ")
        assert complaint in message
        assert "\n" not in message
        assert "pydantic" not in message and "[type=" not in message
        assert "input_value" not in message
        # pydantic's whole report stays on the SDK's error, the cause.
        assert "errors.pydantic.dev" in str(info.value.__cause__)
        assert client.connected


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("form", ["json", "sse", "http-400"])
async def test_a_servers_own_parse_error_is_its_refusal_not_a_malformed_answer(
    fault_server: FaultServer, protocol: str, form: str
) -> None:
    # The SDK reports an answer it cannot parse with -32700, as a server reports a
    # request it cannot parse. Before: the server's -32700 read as "the server's answer
    # is malformed", unrecoverable, and said the call may have run.
    error = {"code": -32700, "message": "Parse error: unexpected end of input\u202e"}
    async with client_for(fault_server, protocol, timeout=TIMEOUT) as client:
        if form == "http-400":  # as the SDK's own 2026-07-28 server answers it
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error})
            headers = {"content-type": "application/json"}
            await fault_server.control(
                "fail", status=400, method="tools/call", body=body, headers=headers
            )
        else:
            raw = json.dumps({"jsonrpc": "2.0", "id": 0, "error": error})
            await fault_server.control(
                "answer", raw=raw.replace('"id": 0', '"id": __ID__'), **{"as": form}
            )
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        refused = info.value
        assert refused.is_recoverable() and refused.may_have_run is False
        status = "HTTP 400 Bad Request: " if form == "http-400" else ""
        assert str(refused) == (
            f"MCP server 'faulty': tools/call 'echo' was refused by the server: {status}Parse "
            "error: unexpected end of input\\u202e (code -32700); the call was not run"
        )
        assert await client.call_tool("echo", {"text": "again"}) == "again"
        assert client.connected


def test_the_sse_check_holds_back_no_more_than_the_event_size_limit() -> None:
    from agcore_tools.mcp._matching import SseCheck

    check = SseCheck(5, "test", limit=64)
    big = b'data: {"jsonrpc": "2.0", "id": 999999, "result": {"text": "' + b"x" * 100
    assert check.feed(big[:50]) == b""
    # Past the limit, the event passes unchecked (the SDK's limit then fails it).
    assert check.feed(big[50:]) == big
    assert check.feed(b'"}}\n\n') == b'"}}\n\n'
    assert check.end() == b""


# -- an answer the SDK cannot read, over stdio ----------------------------------------------

ANSWERS = SERVERS / "answer_proxy.py"


@pytest.mark.parametrize(
    ("protocol", "fault", "complaint"),
    [
        ("legacy", "no-code", 'its "error" has no "code"'),
        ("legacy", "null-result", 'its "result" is null, not an object'),
        ("legacy", "no-jsonrpc", 'it has no "jsonrpc": "2.0"'),
        ("auto", "no-code", 'its "error" has no "code"'),
    ],
)
async def test_an_invalid_answer_to_a_call_fails_it_at_once_over_stdio_saying_why(
    protocol: str, fault: str, complaint: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = StdioTransport(
        sys.executable, [str(ANSWERS), fault, "tools/call", "echo"], stop_grace=1
    )
    client = McpClient("bad", transport, protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "mine"})
        assert time.monotonic() - started < PROMPT
        message = str(info.value)
        assert f"tools/call 'echo' got an invalid answer: {complaint}" in message
        assert info.value.may_have_run and not info.value.recoverable
        assert [m for m in mismatch_logged(caplog) if "(tools/call) is not valid JSON-RPC" in m]
        # Not taken for stray output: the connection goes on.
        assert client.connected
        assert await client.call_tool("weather", {"city": "Lima"}) == {
            "city": "Lima",
            "temperature": 21.5,
        }


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_json_log_line_carrying_a_waiting_calls_id_is_skipped_not_taken_for_its_answer(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A JSON logger on stdout writes {"level": ..., "id": 3, ...}: no answer, even with
    # an "error" field, so the call waits for its real answer.
    transport = StdioTransport(
        sys.executable, [str(ANSWERS), "json-log", "tools/call", "echo"], stop_grace=1
    )
    client = McpClient("logs", transport, protocol=protocol, timeout=TIMEOUT)  # type: ignore[arg-type]
    async with client:
        assert await client.call_tool("echo", {"text": "mine"}) == "mine"
        assert await client.call_tool("echo", {"text": "again"}) == "again"
    assert mismatch_logged(caplog) == []
    skipped = [
        r.getMessage() for r in caplog.records if "is not JSON-RPC; skipped" in r.getMessage()
    ]
    assert skipped and "handling tool call" in skipped[0]


async def test_a_tool_list_with_a_malformed_tool_leaves_it_out_naming_it_and_what_is_wrong(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: "tools/list got an invalid answer: 1 validation error for ListToolsResult",
    # naming neither the tool nor the fault (pydantic's detail was on the next lines);
    # then the connect failed, naming them, and none of the server's tools was usable.
    transport = StdioTransport(
        sys.executable, [str(ANSWERS), "bad-schema", "tools/list"], stop_grace=1
    )
    async with McpClient("odd", transport, protocol="legacy", timeout=TIMEOUT) as client:
        assert await client.call_tool("echo", {"text": "mine"}) == "mine"
    [line] = client.malformed_tools
    assert line.startswith("'word_count' (tools[1].inputSchema: Input should be a valid dictionary")
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"MCP server 'odd': tools/list: left out the malformed tool {line}")
    await assert_no_stray_tasks()


async def test_an_invalid_answer_to_the_handshake_fails_the_start_at_once_saying_why() -> None:
    transport = StdioTransport(
        sys.executable, [str(ANSWERS), "no-jsonrpc", "initialize"], stop_grace=1
    )
    client = McpClient("bad", transport, protocol="legacy", timeout=TIMEOUT)
    started = time.monotonic()
    with pytest.raises(McpError) as info:
        await client.connect()
    assert time.monotonic() - started < PROMPT
    assert 'the handshake got an invalid answer: it has no "jsonrpc": "2.0"' in str(info.value)
    await assert_no_stray_tasks()


# A server whose initialize answer lacks "capabilities" (and serverInfo's "version"),
# which the SDK's InitializeResult requires; server/discover is a method it does not know.
NO_CAPABILITIES = {"protocolVersion": "2025-06-18", "serverInfo": {"name": "mini"}}
RAW_SERVER = f"""\
import json, sys
for line in sys.stdin:
    sent = json.loads(line)
    if "id" not in sent:
        continue
    if sent["method"] == "initialize":
        out = {{"jsonrpc": "2.0", "id": sent["id"], "result": {NO_CAPABILITIES!r}}}
    else:
        error = {{"code": -32601, "message": "Method not found"}}
        out = {{"jsonrpc": "2.0", "id": sent["id"], "error": error}}
    print(json.dumps(out), flush=True)
"""
INVALID = "the handshake got an invalid answer: capabilities: Field required (and 1 more error)"


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_handshake_answer_the_sdks_model_refuses_is_named_not_read_as_an_exit(
    protocol: str, tmp_path: Path
) -> None:
    # Before: "`python server.py` exited with code 0 during start-up" (the client had
    # closed its stdin), or "ValidationError: 2 validation errors for InitializeResult"
    # when it had not exited yet; the fault was only in the cause.
    server = tmp_path / "server.py"
    server.write_text(RAW_SERVER)
    transport = StdioTransport(sys.executable, [str(server)], stop_grace=1)
    with pytest.raises(McpError) as info:
        await McpClient("mini", transport, protocol=protocol, timeout=TIMEOUT).connect()
    assert str(info.value) == (
        f"MCP server 'mini': cannot connect to `{sys.executable} {server}`: {INVALID}"
    )
    await assert_no_stray_tasks()


@contextmanager
def answering_server() -> Iterator[str]:
    """An HTTP endpoint that answers as ``RAW_SERVER`` does; yields its URL."""

    class Raw(QuietHandler):
        def do_POST(self) -> None:
            sent = self.posted()
            if sent is None:
                return
            if sent["method"] == "initialize":
                out = {"jsonrpc": "2.0", "id": sent["id"], "result": NO_CAPABILITIES}
            else:
                error = {"code": -32601, "message": "Method not found"}
                out = {"jsonrpc": "2.0", "id": sent["id"], "error": error}
            body = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with handwritten(Raw) as url:
        yield url


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_handshake_answer_the_sdks_model_refuses_over_http_is_named(
    protocol: str,
) -> None:
    # Before: "cannot connect to ...: ValidationError: 1 validation error for
    # InitializeResult", naming neither the field nor the fault.
    with answering_server() as url, pytest.raises(McpError) as info:
        transport = StreamableHttpTransport(url)
        await McpClient("mini", transport, protocol=protocol, timeout=TIMEOUT).connect()
    assert str(info.value) == f"MCP server 'mini': cannot connect to {url}: {INVALID}"
    assert "input_value" not in str(info.value)
    await assert_no_stray_tasks()
