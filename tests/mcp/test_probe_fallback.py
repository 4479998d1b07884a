"""``protocol="auto"`` against servers the ``server/discover`` probe breaks: the start-up
is tried once more with the ``initialize`` handshake alone (see ``mcp/_handshake.py``).

The real case is a server on the MCP Python SDK 1.6.0 (as chroma-mcp pins it), run from
the venv ``make old-mcp-sdk`` builds; the others are servers made to fail here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import (
    McpClient,
    McpError,
    McpTimeoutError,
    StdioTransport,
    StreamableHttpTransport,
)

from .conftest import (
    FIXTURE,
    OLD_SDK,
    SERVERS,
    FaultServer,
    QuietHandler,
    handwritten,
    live_children,
    old_sdk_python,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)


def probe_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agcore_tools.mcp" and "protocol probe" in r.getMessage()
    ]


def launcher(tmp_path: Path, body: str) -> StdioTransport:
    """A stdio server that notes each start in ``starts`` beside it, then runs ``body``."""
    script = tmp_path / "server.py"
    log = tmp_path / "starts"
    script.write_text(f"with open({str(log)!r}, 'a') as log:\n    log.write('start\\n')\n{body}")
    return StdioTransport(sys.executable, [str(script)], stop_grace=0.5)


EXITS_ON_ANY_REQUEST = (
    "import sys\n"
    "sys.stdin.readline()\n"
    "print(\"ClientRequest.method | Input should be 'ping' [input_value='server/discover']\","
    " file=sys.stderr)\n"
    "sys.exit(1)\n"
)
"""A server that exits on its first request, saying what SDK 1.x servers say of the
probe: on the probe, and on the handshake alone too."""


def starts(tmp_path: Path) -> int:
    log = tmp_path / "starts"
    return len(log.read_text().splitlines()) if log.exists() else 0


async def test_a_server_on_the_mcp_python_sdk_1_6_connects_and_later_starts_skip_the_probe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # It exits (code 1) on server/discover; the client starts it again with initialize.
    # Its restarts, and new clients of the same command, go straight to the handshake:
    # rmcp (the Rust SDK) exits on the probe too, and every new client started it twice
    # and logged the WARNING again. The server exits on the probe only once another line
    # comes: the client's ping, a second in (see test_..._pinged_into_exiting).
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp")
    script = tmp_path / "old.py"
    script.write_text(
        f"with open({str(tmp_path / 'starts')!r}, 'a') as log:\n    log.write('start\\n')\n"
        f"import runpy\nrunpy.run_path({str(OLD_SDK)!r}, run_name='__main__')\n"
    )
    python = str(old_sdk_python())
    before = live_children()
    transport = StdioTransport(python, [str(script)], stop_grace=1)
    async with McpClient("old", transport, timeout=60) as client:
        assert client.protocol_version == "2024-11-05"
        # Text: SDK 1.6.0 has no structured output yet.
        assert await client.call_tool("add", {"a": 1, "b": 2}) == "3"
        assert live_children() - before == {client.pid}, "the first process is gone"
        assert starts(tmp_path) == 2
        [warning] = probe_warnings(caplog)
        assert "exited with code 1 on the server/discover protocol probe" in warning
        assert 'McpClient(..., protocol="legacy") skips the probe' in warning

        first = client.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await wait_until(lambda: not client.connected, "the death to be noticed")
        assert await client.call_tool("add", {"a": 2, "b": 2}) == "4"
        assert client.pid != first
        assert starts(tmp_path) == 3, "started again without the probe"
    # Its transport made afresh, as load_mcp_servers does for each new client.
    transport = StdioTransport(python, [str(script)], stop_grace=1)
    async with McpClient("old2", transport, timeout=60) as client:
        assert client.protocol_version == "2024-11-05"
        assert await client.call_tool("add", {"a": 1, "b": 2}) == "3"
    assert starts(tmp_path) == 4, "a new client started it once, without the probe"
    assert len(probe_warnings(caplog)) == 1


async def test_a_probe_failure_is_a_warning_once_per_server_then_debug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that exits on the handshake too is not remembered, and each new client
    # probes it again: the WARNING is not repeated.
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp")
    for _ in range(2):
        with pytest.raises(McpError, match="second attempt"):
            await McpClient("old", launcher(tmp_path, EXITS_ON_ANY_REQUEST), timeout=20).connect()
    assert starts(tmp_path) == 4
    levels = [
        r.levelno
        for r in caplog.records
        if r.name == "agcore_tools.mcp" and "protocol probe" in r.getMessage()
    ]
    assert levels == [logging.WARNING, logging.DEBUG]


LEGACY_ONLY = """\
import json, pathlib, sys

mode = (pathlib.Path(__file__).parent / "mode").read_text()
if mode == "broken":
    sys.exit("config.toml not found")
for raw in sys.stdin:
    message = json.loads(raw)
    method = message.get("method")
    if method == "server/discover" and mode == "stuck":
        # As an old MCP Python SDK does: the probe fails validation, and the process
        # exits only once its stdin reader thread gets another line.
        (pathlib.Path(__file__).parent / "after_probe").write_text(sys.stdin.readline())
        print("ClientRequest.method | Input should be 'ping' [input_value='server/discover']", file=sys.stderr)
        sys.exit(1)
    if method == "server/discover":
        print(f"expect initialized request, but received: {method}", file=sys.stderr)
        sys.exit(1)
    if "id" not in message:
        continue
    if method == "initialize":
        version = message["params"]["protocolVersion"]
        info = {"name": "rmcp-like", "version": "1"}
        reply = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        reply = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        reply = {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": reply}), flush=True)
"""
"""A stdio server as rmcp's are: it exits on any first request but initialize. Started
with ``broken`` in the ``mode`` file beside it, it exits at once for its own reason;
with ``stuck``, it exits on the probe only once the next line comes, noting that line
in ``after_probe``."""


async def test_a_remembered_server_that_fails_the_handshake_alone_is_probed_again(
    tmp_path: Path,
) -> None:
    # What the process remembered may be out of date (the server was upgraded, or
    # broke): a failed start-up with the handshake alone lets the next client probe.
    mode = tmp_path / "mode"
    mode.write_text("legacy")
    async with McpClient("rmcp", launcher(tmp_path, LEGACY_ONLY), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
    assert starts(tmp_path) == 2
    mode.write_text("broken")
    with pytest.raises(McpError, match=r"config\.toml not found"):
        await McpClient("rmcp", launcher(tmp_path, LEGACY_ONLY), timeout=20).connect()
    assert starts(tmp_path) == 3, "started once, with the handshake alone"
    mode.write_text("legacy")
    async with McpClient("rmcp", launcher(tmp_path, LEGACY_ONLY), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
    assert starts(tmp_path) == 5, "probed again, then started with the handshake"
    async with McpClient("rmcp", launcher(tmp_path, LEGACY_ONLY), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
    assert starts(tmp_path) == 6, "remembered again"


async def test_a_server_stuck_after_failing_the_probe_is_pinged_into_exiting(
    tmp_path: Path,
) -> None:
    # Without the ping the line it waits for is initialize, sent after the SDK's 10 s
    # wait for the probe's answer.
    (tmp_path / "mode").write_text("stuck")
    async with McpClient("stuck", launcher(tmp_path, LEGACY_ONLY), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        assert [d["function"]["name"] for d in await client.definitions()] == ["echo"]
    after = json.loads((tmp_path / "after_probe").read_text())
    assert after == {"jsonrpc": "2.0", "id": "agcore-nudge-1", "method": "ping"}
    assert starts(tmp_path) == 2


async def test_a_server_slow_to_read_the_probe_answers_it_and_the_pings_go_unseen(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # It reads stdin only after 2.5 s (an npx download, say): the pings queue behind the
    # probe, it answers all of them, and their answers reach neither the SDK nor a log.
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp")
    script = tmp_path / "slow.py"
    script.write_text(
        "import runpy, sys, time\ntime.sleep(2.5)\n"
        f"sys.argv = [{str(FIXTURE)!r}]\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n"
    )
    async with McpClient(
        "slow", StdioTransport(sys.executable, [str(script)]), timeout=20
    ) as client:
        assert client.protocol_version == "2026-07-28"
        assert await client.call_tool("echo", {"text": "hi"}) == "hi"
    pinged = [r for r in caplog.records if "probe is unanswered" in r.getMessage()]
    assert len(pinged) >= 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


ANSWERS_A_PING_TWICE = """\
import json, sys

def send(message):
    print(json.dumps({"jsonrpc": "2.0", **message}), flush=True)

probe = None
for raw in sys.stdin:
    message = json.loads(raw)
    method = message.get("method")
    if method == "server/discover":
        probe = message["id"]  # held until the first ping
    elif method == "ping" and probe is not None:
        send({"id": message["id"], "result": {}})
        send({"id": message["id"], "result": {}})
        send({"id": probe, "error": {"code": -32601, "message": "Method not found"}})
        probe = None
    elif method == "initialize":
        version = message["params"]["protocolVersion"]
        info = {"name": "twice", "version": "1"}
        send({"id": message["id"], "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}})
    elif method == "tools/list":
        send({"id": message["id"], "result": {"tools": []}})
    elif "id" in message:
        send({"id": message["id"], "result": {}})
"""


async def test_a_ping_answered_twice_fails_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The second answer to the framing's own ping is dropped too: it must not read as
    # an answer no request has, which fails the requests waiting.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with McpClient("twice", launcher(tmp_path, ANSWERS_A_PING_TWICE), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
    assert starts(tmp_path) == 1
    assert [r.getMessage() for r in caplog.records] == []


async def test_a_server_that_exits_on_the_probe_and_on_the_handshake_names_both(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    client = McpClient("old", launcher(tmp_path, EXITS_ON_ANY_REQUEST), timeout=20)
    with pytest.raises(McpError) as info:
        await client.connect()
    assert starts(tmp_path) == 2
    assert str(info.value) == (
        "MCP server 'old': "
        f"`{sys.executable} {tmp_path / 'server.py'}` exited with code 1 during start-up "
        "(second attempt, with the initialize handshake alone; the first, with the "
        "server/discover probe, exited with code 1); stderr: ClientRequest.method | "
        "Input should be 'ping' [input_value='server/discover']"
    )
    assert len(probe_warnings(caplog)) == 1


async def test_a_server_that_exits_for_its_own_reason_is_started_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Its stderr does not name the probe: starting it again would only repeat its error.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    crash = "import sys\nsys.stdin.readline()\nsys.exit('config.toml not found')\n"
    with pytest.raises(McpError) as info:
        await McpClient("broken", launcher(tmp_path, crash), timeout=20).connect()
    assert starts(tmp_path) == 1
    assert str(info.value).endswith(
        "exited with code 1 during start-up; stderr: config.toml not found"
    )
    assert probe_warnings(caplog) == []


@pytest.mark.parametrize("fault", ["unknown", "unknown-no-code"])
async def test_a_probe_answered_with_an_error_or_an_invalid_answer_falls_back_at_once(
    fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # As a 2025-era server answers a method it does not know: the SDK sends initialize
    # on the same connection, and nothing is started again.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    args = [str(SERVERS / "answer_proxy.py"), fault, "server/discover"]
    transport = StdioTransport(sys.executable, args, stop_grace=1)
    async with McpClient("old", transport, timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        assert await client.call_tool("echo", {"text": "hi"}) == "hi"
    assert probe_warnings(caplog) == []


SDK_1X = """\
import json, os, sys

seen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seen")


def note(line):
    with open(seen, "a") as file:
        file.write(line + "\\n")


def log(*lines):
    sys.stderr.write("".join(line + "\\n" for line in lines))
    sys.stderr.flush()


note("-- start")
log("INFO - Starting the server (STDIO)")
for raw in sys.stdin:
    message = json.loads(raw)
    method = message.get("method")
    note(method)
    if "id" not in message:
        continue
    if method == "server/discover":
        log(
            "WARNING - Failed to validate request: 30 validation errors for ClientRequest",
            *(
                f"Request{n}.method\\n  Input should be 'm{n}' [type=literal_error, "
                "input_value='server/discover', input_type=str]"
                for n in range(30)
            ),
        )
        reply = {"error": {"code": -32602, "message": "Invalid request parameters", "data": ""}}
    elif method == "initialize":
        version = message["params"]["protocolVersion"]
        info = {"name": "sdk1x", "version": "1"}
        capabilities = {"tools": {}}
        reply = {"result": {"protocolVersion": version, "capabilities": capabilities, "serverInfo": info}}
    elif method == "tools/list":
        log("INFO - Processing request of type ListToolsRequest")
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("crash", "echo")]
        reply = {"result": {"tools": tools}}
    elif method == "tools/call" and message["params"]["name"] == "crash":
        log(
            "INFO - Processing request of type CallToolRequest",
            "Traceback (most recent call last):",
            '  File "server.py", line 40, in crash',
            "OSError: [Errno 28] No space left on device",
        )
        os._exit(1)
    elif method == "tools/call":
        reply = {"result": {"content": [{"type": "text", "text": "pong"}]}}
    else:
        reply = {"result": {}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}), flush=True)
"""
"""A stdio server as those on the MCP Python SDK 1.9 and later 1.x releases are: it logs
a validation error of many lines on stderr for the server/discover probe, answers it
with an error, and takes the initialize handshake on the same connection. Its ``crash``
tool logs a stack and exits. It notes each start and each method it gets in ``seen``,
beside it."""


async def test_a_server_that_refused_the_probe_and_took_the_handshake_is_not_probed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Each restart sent server/discover again, and the server logged its dump again.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with McpClient("sdk1x", launcher(tmp_path, SDK_1X), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        with pytest.raises(McpError, match="connection lost"):
            await client.call_tool("crash", {})
        assert await client.call_tool("echo", {}) == "pong"  # on a new process
        assert client.protocol_version == "2025-11-25"
    first, second = [
        start.splitlines() for start in (tmp_path / "seen").read_text().split("-- start\n")[1:]
    ]
    assert first[:2] == ["server/discover", "initialize"]
    assert second[0] == "initialize" and "server/discover" not in second
    assert second[-1] == "tools/call"
    assert probe_warnings(caplog) == []


async def test_the_lines_a_server_logs_for_the_probe_are_left_out_of_its_stderr_tail(
    tmp_path: Path,
) -> None:
    # They were the tail's first 10 lines, and 10 of its last 20 when the server
    # crashed soon after: a crash's message read as if a validation error caused it.
    # The line it wrote at start, before the report, stays.
    async with McpClient("sdk1x", launcher(tmp_path, SDK_1X), timeout=20) as client:
        started = "INFO - Starting the server (STDIO)"
        probe = "... 61 lines for the server/discover probe ..."
        listed = "INFO - Processing request of type ListToolsRequest"
        assert client.stderr_tail == f"{started} | {probe} | {listed}"
        with pytest.raises(McpError, match="connection lost"):
            await client.call_tool("crash", {})
        assert client.stderr_tail.split(" | ") == [
            started,
            probe,
            listed,
            "INFO - Processing request of type CallToolRequest",
            "Traceback (most recent call last):",
            '  File "server.py", line 40, in crash',
            "OSError: [Errno 28] No space left on device",
        ]


TS_LIKE = """\
import json, os, sys

sys.stderr.write("Error: SEARCH_API_KEY is not set; search will fail\\n")
sys.stderr.flush()
for raw in sys.stdin:
    message = json.loads(raw)
    method = message.get("method")
    if "id" not in message:
        continue
    if method == "initialize":
        info = {"name": "ts", "version": "1"}
        version = message["params"]["protocolVersion"]
        reply = {"result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}}
    elif method == "tools/list":
        reply = {"result": {"tools": [{"name": "search", "inputSchema": {"type": "object"}}]}}
    elif method == "tools/call":
        sys.stderr.write("Traceback (most recent call last):\\n  File \\"server.py\\", line 40, in search\\n")
        sys.stderr.write("TypeError: 'NoneType' object is not subscriptable\\n")
        sys.stderr.flush()
        os._exit(1)
    else:
        reply = {"error": {"code": -32601, "message": f"Method not found: {method}"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}), flush=True)
"""
"""A stdio server as those on the TypeScript SDK of the 2025 era are: it answers the
server/discover probe with -32601 and writes nothing about it. It warns at start that its
key is missing; its ``search`` tool then fails on it and exits."""


async def test_a_server_that_refused_the_probe_quietly_keeps_its_start_up_lines_in_its_tail(
    tmp_path: Path,
) -> None:
    # Every start-up line of a stdio server that took the handshake after the probe was
    # left out of its tail ("... 1 lines before the handshake ..."), though it wrote
    # nothing for the probe: the line that told why it crashed was gone.
    warned = "Error: SEARCH_API_KEY is not set; search will fail"
    async with McpClient("search", launcher(tmp_path, TS_LIKE), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.stderr_tail == warned
        with pytest.raises(McpError, match="connection lost"):
            await client.call_tool("search", {})
        assert client.stderr_tail.split(" | ") == [
            warned,
            "Traceback (most recent call last):",
            '  File "server.py", line 40, in search',
            "TypeError: 'NoneType' object is not subscriptable",
        ]


async def test_an_http_server_failing_the_probe_and_the_handshake_is_tried_again(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The probe's POST and the SDK's initialize after it get a 500; a new connection
    # with the handshake alone gets through.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    await fault_server.control("fail", status=500, times=2)
    async with McpClient("flaky", StreamableHttpTransport(fault_server.url), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        assert await client.call_tool("echo", {"text": "hi"}) == "hi"
    [warning] = probe_warnings(caplog)
    assert 'failed: HTTP 500 Internal Server Error: "injected failure" on the server/discover' in (
        warning
    )


async def test_an_http_server_failing_both_attempts_names_both(
    fault_server: FaultServer,
) -> None:
    await fault_server.control("fail", status=500, times=3)
    with pytest.raises(McpError) as info:
        await McpClient("flaky", StreamableHttpTransport(fault_server.url), timeout=20).connect()
    assert str(info.value) == (
        f"MCP server 'flaky': cannot connect to {fault_server.url}: HTTP 500 Internal Server "
        'Error: "injected failure" (second attempt, with the initialize handshake alone; the '
        "first, with the server/discover probe, failed: HTTP 500 Internal Server Error: "
        '"injected failure")'
    )
    assert info.value.status_code == 500


async def test_an_http_server_refusing_the_client_is_not_tried_again(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    await fault_server.control("token", token="s3cret-t0ken")
    with pytest.raises(McpError, match="HTTP 401"):
        await McpClient("locked", StreamableHttpTransport(fault_server.url), timeout=20).connect()
    assert probe_warnings(caplog) == []


async def test_an_http_server_dropping_the_connection_is_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One of the server failures that earn the second attempt (the client's own errors
    # do not: see tests/mcp/test_http.py), each on a new connection.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    accepted = 0

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        length = head.split("content-length:", 1)[1].split("\r\n", 1)[0]
        await reader.readexactly(int(length))
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    try:
        with pytest.raises(McpError) as info:
            await McpClient("dropping", StreamableHttpTransport(url), timeout=20).connect()
    finally:
        server.close()
        await server.wait_closed()
    dropped = "RemoteProtocolError: Server disconnected without sending a response."
    assert str(info.value) == (
        f"MCP server 'dropping': cannot connect to {url}: {dropped} (second attempt, with "
        f"the initialize handshake alone; the first, with the server/discover probe, "
        f"failed: {dropped})"
    )
    assert len(probe_warnings(caplog)) == 1
    assert accepted == 2


@contextmanager
def echoing_server(
    status: int, code: int = -32603, message: str | None = None, *, cut: bool = False
) -> Iterator[str]:
    """An HTTP endpoint answering every request with ``status`` and a JSON-RPC error
    with ``code`` that repeats the request's ``Authorization`` header (or says
    ``message``), its last character cut off if ``cut`` (no JSON then); yields its URL."""

    class Echo(QuietHandler):
        def do_POST(self) -> None:
            sent = self.posted()
            if sent is None:
                return
            said = {
                "code": code,
                "message": message or f"refused {self.headers.get('Authorization')}",
            }
            body = json.dumps({"jsonrpc": "2.0", "id": sent["id"], "error": said}).encode()
            body = body[:-1] if cut else body
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with handwritten(Echo) as url:
        yield url


@pytest.mark.parametrize("status", [500, 200])
async def test_a_token_the_server_echoes_on_the_probe_is_in_no_log_record_of_the_retry(
    caplog: pytest.LogCaptureFixture, status: int
) -> None:
    # The retry logged the probe's failure at DEBUG with the SDK's error as the server
    # sent it (the token in the traceback), and an error answer's words in its WARNING,
    # where every other record and error of a failed start-up was masked.
    caplog.set_level(logging.DEBUG, logger="agcore_tools")
    secret = "ghp_S3CRETt0ken00"
    with echoing_server(status) as url:
        transport = StreamableHttpTransport(url, {"Authorization": f"Bearer {secret}"})
        with pytest.raises(McpError) as info:
            await McpClient("echoing", transport, timeout=20).connect()
    assert "refused ***" in str(info.value)
    [warning] = probe_warnings(caplog)  # the second attempt was made
    assert "on the server/discover protocol probe" in warning
    assert any("the probe's failure" in r.getMessage() and r.exc_info for r in caplog.records)
    formatter = logging.Formatter()
    for record in caplog.records:
        shown = formatter.format(record)  # the message with its args, and the traceback
        assert secret not in shown, shown
    assert secret not in "".join(traceback.format_exception(info.value))


SAID = "upstream identity service timed out"
"""A server's own error with a code the MCP SDK uses too."""


@pytest.mark.parametrize("code", [-32000, -32001, -32700])
async def test_a_servers_own_error_with_a_code_the_sdk_uses_refuses_the_handshake(
    tmp_path: Path, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Its -32001 was read as the SDK's timeout, its -32000 as the SDK's closed
    # connection: the error said the server "exited with code 0 during start-up" (it
    # exits once the client closes its stdin), and not what the server said. Its -32700
    # (it could not parse the request) read as the SDK's report of a malformed answer.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    answer_all = (
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    sent = json.loads(line)\n"
        "    if 'id' in sent:\n"
        f"        said = {{'code': {code}, 'message': {SAID!r}}}\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': sent['id'], 'error': said}), flush=True)\n"
    )
    with pytest.raises(McpError) as info:
        await McpClient("srv", launcher(tmp_path, answer_all), timeout=20).connect()
    assert str(info.value) == (
        f"MCP server 'srv': cannot connect to `{sys.executable} {tmp_path / 'server.py'}`: "
        f"the server refused the handshake: {SAID} (code {code})"
    )
    assert starts(tmp_path) == 1 and probe_warnings(caplog) == []


@pytest.mark.parametrize("code", [-32001, -32700])
async def test_an_http_servers_own_error_with_a_code_the_sdk_uses_at_start_up_is_its_answer(
    caplog: pytest.LogCaptureFixture, code: int
) -> None:
    # Read as the SDK's timeout: not tried again without the probe, as an error answer
    # is, and the error did not say the server refused the handshake. Its -32700 read
    # as the SDK's report of a malformed answer.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    with echoing_server(200, code=code, message=SAID) as url, pytest.raises(McpError) as info:
        await McpClient("srv", StreamableHttpTransport(url), timeout=20).connect()
    assert str(info.value) == (
        f"MCP server 'srv': cannot connect to {url}: the server refused the handshake: "
        f"{SAID} (code {code}) (second attempt, with the initialize handshake alone; the "
        f"first, with the server/discover probe, failed: {SAID} (code {code}))"
    )
    [warning] = probe_warnings(caplog)
    assert f"failed: {SAID} (code {code}) on the server/discover protocol probe" in warning


async def test_an_answer_the_sdk_cannot_parse_at_start_up_is_named_without_its_echo(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The error quoted the SDK's parse error whole, as "the server refused the
    # handshake": pydantic's report echoes the answer cut short in the middle, a token in
    # it too, so the mask missed the part left ("...3CRETt0ken00"); in the WARNING too.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    secret = "ghp_S3CRETt0ken00"
    with echoing_server(200, cut=True) as url:
        transport = StreamableHttpTransport(url, {"Authorization": f"Bearer {secret}"})
        with pytest.raises(McpError) as info:
            await McpClient("srv", transport, timeout=20).connect()
    malformed = "the server's answer (application/json) is malformed: Invalid JSON: EOF while"
    assert str(info.value).startswith(
        f"MCP server 'srv': cannot connect to {url}: the handshake got an invalid answer: "
        f"{malformed} parsing an object at line 1 column "
    )
    assert f"the first, with the server/discover probe, failed: {malformed}" in str(info.value)
    [warning] = probe_warnings(caplog)
    for shown in (str(info.value), warning):
        assert secret[-8:] not in shown and "input_value" not in shown, shown


GATE = SERVERS / "initialize_gate.py"


def gated(tmp_path: Path, *args: str) -> StdioTransport:
    """The fixture server behind ``initialize_gate.py``, noting each start in ``starts``."""
    env = {"GATE_STARTS": str(tmp_path / "starts")}
    return StdioTransport(sys.executable, [str(GATE), *args], env=env, stop_grace=0.5)


def initialize_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agcore_tools.mcp" and "connecting again with the initialize" in r.getMessage()
    ]


async def test_a_server_that_lists_its_tools_in_the_2025_shape_on_2026_is_connected_with_the_handshake(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # @mcp-z/server 2.2.3 (@mcp-z/mcp-pdf): server/discover answered with 2026-07-28, then
    # tools/list without resultType, ttlMs and cacheScope, which the SDK refuses, so
    # connect() failed ("tools/list got an invalid answer: cacheScope: Field required
    # (and 2 more errors)"), though protocol="legacy" made it work.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    script = str(SERVERS / "older_shape_lists.py")
    transport = StdioTransport(sys.executable, [script], stop_grace=0.5)
    async with McpClient("pdf", transport, timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        assert "echo" in [tool.name for tool in client.into_tools()]
        assert await client.call_tool("echo", {"text": "one"}) == "one"
    [warning] = initialize_warnings(caplog)
    assert "then refused tools/list: its answer lacks cacheScope, resultType and ttlMs" in warning
    assert 'protocol="legacy"' in warning


async def test_a_server_that_wants_initialize_after_the_probe_is_connected_again_with_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # kglite-mcp-server 0.21: server/discover and tools/list answered on 2026-07-28, then
    # every tools/call refused with -32600 "initialize is required", unrun. Nothing
    # connected again, and nothing named protocol="legacy", which made it work.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with McpClient("kg", gated(tmp_path), timeout=20) as client:
        assert client.protocol_version == "2026-07-28"
        assert "echo" in [tool.name for tool in client.into_tools()]
        # Two calls refused at once: one connects again, both are sent again.
        both = await asyncio.gather(
            client.call_tool("echo", {"text": "one"}), client.call_tool("echo", {"text": "two"})
        )
        assert both == ["one", "two"]
        assert client.protocol_version == "2025-11-25"
        assert starts(tmp_path) == 2
        [warning] = initialize_warnings(caplog)
        assert warning == (
            "MCP server 'kg' agreed on protocol 2026-07-28, which has no initialize "
            "handshake, then refused tools/call 'echo': initialize is required (code "
            "-32600); connecting again with the initialize handshake "
            '(McpClient(..., protocol="legacy") uses it from the start)'
        )
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == [
            r for r in caplog.records if "connecting again with the initialize" in r.getMessage()
        ]

        # Remembered: a restart uses the handshake at once.
        first = client.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await wait_until(lambda: not client.connected, "the death to be noticed")
        assert await client.call_tool("echo", {"text": "three"}) == "three"
        assert client.protocol_version == "2025-11-25"
        assert starts(tmp_path) == 3
        assert len(initialize_warnings(caplog)) == 1


async def test_a_new_client_of_a_server_that_wants_initialize_uses_it_from_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp")
    async with McpClient("kg", gated(tmp_path), timeout=20) as client:
        assert await client.call_tool("echo", {"text": "one"}) == "one"
    assert starts(tmp_path) == 2
    async with McpClient("kg", gated(tmp_path), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        assert await client.call_tool("echo", {"text": "two"}) == "two"
    assert starts(tmp_path) == 3
    assert len(initialize_warnings(caplog)) == 1


async def test_a_read_refused_for_want_of_initialize_is_sent_again_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with McpClient("kg", gated(tmp_path, "resources/read"), timeout=20) as client:
        (readme,) = await client.read_resource("fixture://readme")
        assert readme.text == "A fixture server."
        assert client.protocol_version == "2025-11-25"
    [warning] = initialize_warnings(caplog)
    assert "then refused resources/read 'fixture://readme': initialize is required" in warning


async def test_a_call_refused_again_after_the_handshake_names_both_refusals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with McpClient("kg", gated(tmp_path, "always"), timeout=20) as client:
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "hi"})
        assert str(info.value) == (
            "MCP server 'kg': tools/call 'echo' was refused by the server: initialize is "
            "required (code -32600) (second attempt, after connecting again with the "
            "initialize handshake; the first, without it, was refused: initialize is "
            "required (code -32600)); the call was not run"
        )
        assert info.value.may_have_run is False and info.value.is_recoverable()
        assert starts(tmp_path) == 2
        assert len(initialize_warnings(caplog)) == 1
        # The handshake's session is not left for another: the next refusal is the error.
        with pytest.raises(McpError, match=r"\(code -32600\); the call was not run$"):
            await client.call_tool("echo", {"text": "hi"})
        assert starts(tmp_path) == 2


async def test_a_tool_list_refused_for_want_of_initialize_is_listed_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # connect() lists the tools: a server refusing that until initialize failed it.
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with McpClient("kg", gated(tmp_path, "tools/list"), timeout=20) as client:
        assert client.protocol_version == "2025-11-25"
        assert "echo" in [tool.name for tool in client.into_tools()]
        assert await client.call_tool("echo", {"text": "hi"}) == "hi"
    assert starts(tmp_path) == 2
    [warning] = initialize_warnings(caplog)
    assert "then refused tools/list: initialize is required (code -32600)" in warning


async def test_a_tool_list_refused_again_after_the_handshake_names_both_refusals(
    tmp_path: Path,
) -> None:
    client = McpClient("kg", gated(tmp_path, "always", "tools/list"), timeout=20)
    with pytest.raises(McpError) as info:
        await client.connect()
    assert str(info.value) == (
        "MCP server 'kg': tools/list failed: initialize is required (code -32600) (second "
        "attempt, after connecting again with the initialize handshake; the first, without "
        "it, was refused: initialize is required (code -32600))"
    )
    assert not client.connected and starts(tmp_path) == 2


async def test_close_while_a_refusal_waits_to_connect_again_starts_no_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A refused read's new handshake waits for the calls in flight; close() then ended
    # that wait, a second server was started after close(), and the read's caller got a
    # bare CancelledError when close() cancelled that start (or, with a server quick to
    # start, close() returned with the client connected again).
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    seen = tmp_path / "seen"
    transport = StdioTransport(
        sys.executable,
        [str(GATE), "resources/read"],
        env={"GATE_STARTS": str(tmp_path / "starts"), "GATE_SEEN": str(seen)},
        stop_grace=0.5,
    )

    async def until(condition: Any, what: str) -> None:
        deadline = time.monotonic() + 15
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.02)

    client = McpClient("kg", transport, timeout=20)
    await client.connect()
    try:
        slow = asyncio.create_task(client.call_tool("slow", {"seconds": 60}))
        await until(
            lambda: seen.exists() and "tools/call slow" in seen.read_text(), "the slow call"
        )
        read = asyncio.create_task(client.read_resource("fixture://readme"))
        await until(lambda: initialize_warnings(caplog), "the refusal's new handshake")
        await asyncio.wait_for(client.close(), 10)
        assert not client.connected
        for call in (slow, read):
            with pytest.raises(McpError):
                await asyncio.wait_for(call, 10)
        assert starts(tmp_path) == 1
    finally:
        await client.close()


# -- the initialize handshake after the probe, over HTTP, and its deadline ---------------

STOPPED = 1.5
"""What a start-up that timed out may take beyond its timeout: stopping what it started
(the stdio gate and its server end once their stdin closes), and the loop's latency."""


def silent_after_the_first(tmp_path: Path, refused: str) -> StdioTransport:
    """The gate refusing ``refused`` 3 s late; started again, it answers nothing."""
    env = {"GATE_STARTS": str(tmp_path / "starts"), "GATE_DELAY": "3", "GATE_SILENT_FROM": "2"}
    return StdioTransport(sys.executable, [str(GATE), refused], env=env, stop_grace=0.5)


async def test_connect_keeps_to_its_timeout_when_it_connects_again_with_initialize(
    tmp_path: Path,
) -> None:
    # The second connection, with the initialize handshake after the refused tools/list,
    # had a timeout of its own: connect() took the time of the first (3 s and more here)
    # on top of its 8 s timeout, and could take three times it (its tools/list had one).
    client = McpClient("kg", silent_after_the_first(tmp_path, "tools/list"), timeout=8)
    started = time.monotonic()
    with pytest.raises(McpTimeoutError) as info:
        await client.connect()
    took = time.monotonic() - started
    assert took < 8 + STOPPED, f"connect() took {took:.2f} s"
    assert starts(tmp_path) == 2
    assert str(info.value).endswith(
        "did not complete the MCP handshake within 8 s; it never answered initialize (second "
        "attempt, after connecting again with the initialize handshake; the first, without "
        "it, was refused: initialize is required (code -32600))"
    )
    assert not client.connected


async def test_connect_keeps_to_its_timeout_listing_tools_after_the_second_handshake(
    tmp_path: Path,
) -> None:
    # The tools/list after the second handshake had a timeout of its own too: refused
    # (again) 4 s late, as the first was, it failed after 8 s and the two start-ups,
    # past the 8 s timeout.
    env = {"GATE_STARTS": str(tmp_path / "starts"), "GATE_DELAY": "4"}
    transport = StdioTransport(
        sys.executable, [str(GATE), "always", "tools/list"], env=env, stop_grace=0.5
    )
    client = McpClient("kg", transport, timeout=8)
    started = time.monotonic()
    with pytest.raises(McpTimeoutError) as info:
        await client.connect()
    took = time.monotonic() - started
    assert took < 8 + STOPPED, f"connect() took {took:.2f} s"
    assert "within 8 s" in str(info.value) or "timed out after 8 s" in str(info.value)
    assert str(info.value).endswith(
        "(second attempt, after connecting again with the initialize handshake; the first, "
        "without it, was refused: initialize is required (code -32600))"
    )


async def test_connect_over_http_keeps_to_its_timeout_when_it_connects_again_with_initialize(
    fault_server: FaultServer,
) -> None:
    await fault_server.control("wants-initialize", methods=["tools/list"], delay=3)
    # The second connection's initialize is answered with headers and no body, ever.
    json_headers = {"content-type": "application/json"}
    await fault_server.control(
        "fail", method="initialize", status=200, stall_after=0, headers=json_headers
    )
    client = McpClient("kg", StreamableHttpTransport(fault_server.url), timeout=6)
    started = time.monotonic()
    with pytest.raises(McpTimeoutError) as info:
        await client.connect()
    took = time.monotonic() - started
    assert took < 6 + STOPPED, f"connect() took {took:.2f} s"
    assert str(info.value) == (
        f"MCP server 'kg': {fault_server.url} did not complete the MCP handshake within 6 s "
        "(second attempt, after connecting again with the initialize handshake; the first, "
        "without it, was refused: initialize is required (code -32600))"
    )


async def test_a_call_keeps_to_its_timeout_when_it_connects_again_with_initialize(
    fault_server: FaultServer,
) -> None:
    # The new connection is made in a task of its own, which the call leaves at its
    # deadline; close() then ends it.
    async with McpClient("kg", StreamableHttpTransport(fault_server.url), timeout=20) as client:
        await fault_server.control("wants-initialize", delay=1.5)
        json_headers = {"content-type": "application/json"}
        await fault_server.control(
            "fail", method="initialize", status=200, stall_after=0, headers=json_headers
        )
        started = time.monotonic()
        with pytest.raises(McpTimeoutError) as info:
            await client.call_tool("echo", {"text": "hi"}, timeout=3)
        took = time.monotonic() - started
        assert took < 3 + 0.5, f"the call took {took:.2f} s"
        assert str(info.value).startswith(
            "MCP server 'kg': tools/call 'echo' timed out after 3 s, waiting for the server "
            "to start again (second attempt, after connecting again with the initialize "
            "handshake; the first, without it, was refused: initialize is required (code "
            "-32600))"
        )
        assert info.value.may_have_run is False
        started = time.monotonic()
    took = time.monotonic() - started
    assert took < 1.5, f"close() took {took:.2f} s"


@pytest.mark.parametrize(
    ("refused", "status"), [("tools/call", 200), ("tools/list", 200), ("tools/call", 400)]
)
async def test_an_http_server_that_wants_initialize_after_the_probe_is_connected_again_with_it(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture, refused: str, status: int
) -> None:
    # The stdio case above, over Streamable HTTP: the 2026-07-28 requests carry no
    # session, and the server refuses them until a session made by initialize (its
    # refusal with HTTP 400, as 2026-07-28 servers answer a request they refuse, too).
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    await fault_server.control("wants-initialize", methods=[refused], status=status)
    async with McpClient("kg", StreamableHttpTransport(fault_server.url), timeout=20) as client:
        if refused == "tools/call":
            assert client.protocol_version == "2026-07-28"
        both = await asyncio.gather(
            client.call_tool("echo", {"text": "one"}), client.call_tool("echo", {"text": "two"})
        )
        assert both == ["one", "two"]
        assert client.protocol_version == "2025-11-25"
        assert "echo" in [tool.name for tool in client.into_tools()]
        [warning] = initialize_warnings(caplog)
        action = "tools/call 'echo'" if refused == "tools/call" else "tools/list"
        assert f"then refused {action}: initialize is required (code -32600)" in warning
        assert len((await fault_server.control("state"))["sessions"]) == 1

        # Remembered over HTTP too: the next connection uses the handshake at once.
        fault_server.restart()
        assert await client.call_tool("echo", {"text": "three"}) == "three"
        assert client.protocol_version == "2025-11-25"
        assert len(initialize_warnings(caplog)) == 1
