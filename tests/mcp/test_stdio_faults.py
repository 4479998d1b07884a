"""stdio servers that end oddly (issue 25, item 7): the client's own signal is not
reported as the reason a server ended. (A server that exits during start-up while a
child holds its pipes is case 12 of test_fault_matrix.py.)"""

from __future__ import annotations

import sys

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
