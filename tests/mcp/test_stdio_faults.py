"""stdio servers that end oddly (issue 25, items 6 and 7): the exit code comes as soon
as the server process exits, whoever holds its pipes, and the client's own signal is
not reported as the reason a server ended."""

from __future__ import annotations

import sys
import time

import pytest

from agcore_tools import McpClient, McpError, McpNotInitializedError, StdioTransport

from .test_faults import wait_for

pytestmark = pytest.mark.timeout(60)

# A hand-written server: answers the handshake and tools/list; on tools/call it closes
# its stdout and lives on (it ignores the end of stdin too).
CLOSES_STDOUT = """
import json, os, sys, time
for raw in sys.stdin:
    message = json.loads(raw)
    if 'id' not in message:
        continue
    method = message['method']
    if method == 'initialize':
        result = {'protocolVersion': '2025-11-25', 'capabilities': {'tools': {}},
                  'serverInfo': {'name': 'quiet', 'version': '1'}}
    elif method == 'tools/list':
        result = {'tools': [{'name': 'hush', 'inputSchema': {'type': 'object'}}]}
    elif method == 'tools/call':
        os.close(1)
        break
    else:
        result = {}
    print(json.dumps({'jsonrpc': '2.0', 'id': message['id'], 'result': result}), flush=True)
time.sleep(60)
"""


async def test_a_server_that_exits_during_start_up_is_reported_at_once_though_a_child_holds_its_pipes() -> (
    None
):
    # It starts a process that inherits stdout and stderr, reads the initialize
    # request, and exits: stdout stays open as long as the other process lives.
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen(['sleep', '60'])\n"
        "sys.stdin.readline()\n"
        "print('fatal: no config file', file=sys.stderr, flush=True)\n"
        "sys.exit(3)\n"
    )
    client = McpClient(
        "wrapper", StdioTransport(sys.executable, ["-c", code], stop_grace=0.5), timeout=20
    )
    started = time.monotonic()
    with pytest.raises(McpError) as info:
        await client.connect()
    assert time.monotonic() - started < 5, "the exit must not wait for the 20 s timeout"
    message = str(info.value)
    assert "exited with code 3 during start-up" in message
    assert "stderr: fatal: no config file" in message
    assert "handshake" not in message


async def test_a_server_that_closes_stdout_and_lives_on_is_not_said_to_be_killed_by_signal_15() -> (
    None
):
    transport = StdioTransport(sys.executable, ["-c", CLOSES_STDOUT], stop_grace=0.2)
    client = McpClient("quiet", transport, protocol="legacy", timeout=20, recovery=None)
    async with client:
        with pytest.raises(McpError) as info:
            await client.call_tool("hush", {})
        # Said while the client waits for its exit, or once it has stopped it.
        assert "connection lost (closed its stdout" in str(info.value)
        assert "signal 15" not in str(info.value)

        async def stopped() -> bool:
            try:
                await client.call_tool("hush", {})
            except McpNotInitializedError as exc:
                return "stopped by the client" in str(exc)
            return False

        # The client stops the server (stdin closed, then SIGTERM) and says so.
        await wait_for(stopped, "the client to stop the server")
        with pytest.raises(McpNotInitializedError) as info:
            await client.call_tool("hush", {})
        message = str(info.value)
        assert "closed its stdout and was stopped by the client (SIGTERM)" in message
        assert "signal 15" not in message
