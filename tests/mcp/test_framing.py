"""The stdio framing (``agcore_tools/mcp/_framing.py``) on real child processes' pipes."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import mcp_types as types
import pytest
from anyio.abc import Process
from mcp.shared.message import SessionMessage

from agcore_tools import McpClient, McpError, StdioTransport
from agcore_tools.mcp._framing import LineReader, LineWriter
from agcore_tools.mcp._matching import JsonBodyCheck, PendingIds, SseCheck

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def child(code: str) -> AsyncIterator[Process]:
    process = await anyio.open_process([sys.executable, "-c", code])
    try:
        yield process
    finally:
        if process.returncode is None:
            # Some children exit on their own; one may do so between the check and the kill.
            with suppress(ProcessLookupError):
                process.kill()
        await process.aclose()


def ping(request_id: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


async def test_lines_cut_across_reads_or_sharing_one_arrive_whole_and_in_order() -> None:
    # A message written in three pieces with pauses between them (so they are read
    # apart), then three lines in one write: a blank one, one that is not JSON-RPC
    # (skipped), and a message; then stdout ends.
    code = (
        "import sys, time\n"
        "out = sys.stdout.buffer\n"
        'line = b\'{"jsonrpc": "2.0", "id": 1, "result": {"text": "\' + b\'x\' * 100000 + b\'"}}\\n\'\n'
        "for piece in (line[:10], line[10:70000], line[70000:]):\n"
        "    out.write(piece); out.flush(); time.sleep(0.05)\n"
        'out.write(b\'\\n{"not": "json-rpc"}\\n{"jsonrpc": "2.0", "method": "notifications/initialized"}\\n\')\n'
        "out.flush()\n"
    )
    async with child(code) as process:
        assert process.stdout is not None
        reader = LineReader(process.stdout)
        with anyio.fail_after(20):
            items = [item async for item in reader]
    assert len(items) == 2 and reader.skipped == 1  # the line that is not JSON-RPC
    first, last = items
    assert isinstance(first, SessionMessage)
    assert isinstance(first.message, types.JSONRPCResponse)
    assert first.message.id == 1 and first.message.result == {"text": "x" * 100000}
    assert isinstance(last, SessionMessage)
    assert isinstance(last.message, types.JSONRPCNotification)
    assert last.message.method == "notifications/initialized"


async def test_each_message_is_written_as_one_line() -> None:
    # The child echoes the lines it reads back in reverse order, once stdin ends.
    code = "import sys\nlines = sys.stdin.buffer.readlines()\nsys.stdout.buffer.writelines(reversed(lines))\n"
    async with child(code) as process:
        assert process.stdin is not None and process.stdout is not None
        writer = LineWriter(process.stdin, process.stdout)
        for request_id in (1, 2, 3):
            await writer.send(ping(request_id))
        await process.stdin.aclose()
        with anyio.fail_after(20):
            items = [item async for item in LineReader(process.stdout)]
    ids = [
        item.message.id
        for item in items
        if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest)
    ]
    assert ids == [3, 2, 1] and len(items) == 3


async def test_a_child_that_stops_reading_ends_the_read_side_at_once() -> None:
    # It closes stdin but keeps stdout open: only the failed write can end the reading.
    code = "import os, sys, time\nos.close(0)\nprint('closed', file=sys.stderr, flush=True)\ntime.sleep(60)\n"
    async with child(code) as process:
        assert (
            process.stdin is not None and process.stdout is not None and process.stderr is not None
        )
        said = b""
        with anyio.fail_after(20):
            while b"closed" not in said:
                said += await process.stderr.receive()
        reader = LineReader(process.stdout)
        writer = LineWriter(process.stdin, process.stdout)
        started = time.monotonic()
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.send, ping(1))
                with pytest.raises(anyio.EndOfStream):
                    await reader.receive()
        assert time.monotonic() - started < 5
        # Later sends are dropped too: the session fails their requests, not the writer.
        await writer.send(ping(2))


async def test_after_close_a_writer_refuses_and_a_reader_ends() -> None:
    async with child("import time\ntime.sleep(60)\n") as process:
        assert process.stdin is not None and process.stdout is not None
        writer = LineWriter(process.stdin, process.stdout)
        reader = LineReader(process.stdout)
        async with writer, reader:
            pass
        with pytest.raises(anyio.ClosedResourceError):
            await writer.send(ping(1))
        with pytest.raises(anyio.EndOfStream):
            await reader.receive()


async def test_a_call_to_a_server_that_stopped_reading_fails_at_once_not_at_its_timeout() -> None:
    # A hand-written server: it answers the handshake, closes its stdin when asked for
    # the tool list (before answering it), and then only sleeps.
    code = (
        "import json, os, sys, time\n"
        "for raw in sys.stdin:\n"
        "    message = json.loads(raw)\n"
        "    if 'id' not in message:\n"
        "        continue\n"
        "    if message['method'] == 'initialize':\n"
        "        result = {'protocolVersion': '2025-11-25', 'capabilities': {'tools': {}},\n"
        "                  'serverInfo': {'name': 'deaf', 'version': '1'}}\n"
        "    elif message['method'] == 'tools/list':\n"
        "        os.close(0)\n"
        "        result = {'tools': [{'name': 'echo', 'inputSchema': {'type': 'object'}}]}\n"
        "    else:\n"
        "        result = {}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': message['id'], 'result': result}), flush=True)\n"
        "    if message['method'] == 'tools/list':\n"
        "        time.sleep(60)\n"
    )
    client = McpClient(
        "deaf",
        StdioTransport(sys.executable, ["-c", code], stop_grace=0.2),
        protocol="legacy",
        timeout=30,
    )
    async with client:
        started = time.monotonic()
        with pytest.raises(McpError, match="deaf"):
            await client.call_tool("echo", {})
        assert time.monotonic() - started < 5
        assert not client.connected


# A hand-written server on 2025-11-25 that prints a FastMCP-style banner to stdout first,
# with the token its environment gives it, and answers the handshake and the tool list.
BANNER_SERVER = (
    "import json, os, sys\n"
    "banner = '\\u256d\\u2500 \\U0001f680 Server started on stdio \\x1b[32m\\u2713\\x1b[0m token '\n"
    "line = banner + os.environ['API_TOKEN'] + ' ' + '\\u2500' * 250 + '\\u256e\\n'\n"
    "sys.stdout.buffer.write(line.encode())\n"
    "sys.stdout.flush()\n"
    "for raw in sys.stdin:\n"
    "    message = json.loads(raw)\n"
    "    if 'id' not in message:\n"
    "        continue\n"
    "    if message['method'] == 'initialize':\n"
    "        result = {'protocolVersion': '2025-11-25', 'capabilities': {'tools': {}},\n"
    "                  'serverInfo': {'name': 'banner', 'version': '1'}}\n"
    "    else:\n"
    "        result = {'tools': []}\n"
    "    print(json.dumps({'jsonrpc': '2.0', 'id': message['id'], 'result': result}), flush=True)\n"
)


async def test_a_non_ascii_banner_on_stdout_is_logged_as_text_escaped_masked_and_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The warning showed the line's bytes repr cut at 200 repr characters: a box-drawing
    # banner read b'\xe2\x95\xad\xe2\x94\x80...', about 16 of its characters.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    transport = StdioTransport(
        sys.executable,
        ["-c", BANNER_SERVER],
        env={"API_TOKEN": "S3CRETt0ken99"},
        stop_grace=0.5,
    )
    async with McpClient("banner", transport, protocol="legacy", timeout=30) as client:
        assert await client.definitions() == []
    head = "\u256d\u2500 \U0001f680 Server started on stdio \x1b[32m\u2713\x1b[0m token *** "
    kept = 200 - len(head)
    shown = head.replace("\x1b", "\\x1b") + "\u2500" * kept + f"... [cut {251 - kept} chars]"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "MCP server 'banner' wrote a line to stdout that is not JSON-RPC; skipped (stdout "
        f"carries MCP messages only, logs belong on stderr): {shown}"
    ]


LONE_SURROGATE = b'{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "great \\ud83d"}]}}'
"""An answer whose text was cut inside an emoji by JavaScript's JSON.stringify: a lone
surrogate escape, which pydantic's parser (the SDK's) refuses."""


async def test_a_stdio_answer_with_a_lone_surrogate_escape_arrives_with_u_fffd() -> None:
    # Before, the answer was logged as stray output and skipped: its call waited for
    # its timeout, and the tool loop stopped.
    line = LONE_SURROGATE + b"\n"
    code = f"import sys\nsys.stdout.buffer.write({line!r})\nsys.stdout.flush()\n"
    async with child(code) as process:
        assert process.stdout is not None
        reader = LineReader(process.stdout)
        with anyio.fail_after(20):
            items = [item async for item in reader]
    assert reader.skipped == 0
    [answer] = items
    assert isinstance(answer, SessionMessage)
    dumped = answer.message.model_dump(by_alias=True, exclude_none=True)
    assert dumped["result"]["content"][0]["text"] == "great \ufffd"


def test_an_http_answer_with_a_lone_surrogate_escape_is_passed_on_with_u_fffd() -> None:
    body = JsonBodyCheck(1, "test")
    assert body.feed(LONE_SURROGATE) == b""
    assert json.loads(body.end())["result"]["content"][0]["text"] == "great \ufffd"
    events = SseCheck(1, "test")
    passed = events.feed(b"event: message\nid: e41\nretry: 500\ndata: " + LONE_SURROGATE + b"\n\n")
    # Its other fields kept: the SDK resumes a dropped stream from the id.
    assert passed.startswith(b"event: message\nid: e41\nretry: 500\ndata: {")
    data = passed.split(b"data: ", 1)[1]
    assert json.loads(data)["result"]["content"][0]["text"] == "great \ufffd"


async def test_an_invalid_stdio_answer_with_a_lone_surrogate_fails_its_call_at_once() -> None:
    pending = PendingIds("MCP server 'demo'")
    pending.sent(1, "tools/call")
    line = b'{"jsonrpc": "2.0", "id": 1, "error": {"message": "cut \\ud83d"}}\n'
    code = f"import sys\nsys.stdout.buffer.write({line!r})\nsys.stdout.flush()\n"
    async with child(code) as process:
        assert process.stdout is not None
        reader = LineReader(process.stdout, pending=pending)
        with anyio.fail_after(20):
            items = [item async for item in reader]
    # Before, it was skipped as stray output, and the call waited for its timeout.
    assert reader.skipped == 0 and len(items) == 1
