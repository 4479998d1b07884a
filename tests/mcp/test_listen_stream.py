"""While the 2025-11-25 GET stream is away, the tool list is read afresh (issue 25,
item 2). That it comes back however often it is cut is case 7 of test_fault_matrix.py.

The server is ``servers/fault_server.py``, behind the byte proxy of ``_faultproxy.py``,
which cuts the GET stream's connection, or refuses new ones.
"""

from __future__ import annotations

import pytest

from agcore_tools import McpClient, StreamableHttpTransport

from ._faultproxy import FaultProxy
from .conftest import FaultServer
from .conftest import wait_until as until

pytestmark = pytest.mark.timeout(90)

SDK_ATTEMPTS = 2
"""Failures in a row after which the SDK gives the GET stream up
(mcp.client.streamable_http.MAX_RECONNECTION_ATTEMPTS)."""


async def names(client: McpClient) -> list[str]:
    return [tool["function"]["name"] for tool in await client.definitions()]


def test_the_sdk_still_gives_up_after_two_failures() -> None:
    from mcp.client.streamable_http import MAX_RECONNECTION_ATTEMPTS

    assert MAX_RECONNECTION_ATTEMPTS == SDK_ATTEMPTS


async def test_while_the_stream_is_away_tool_lists_are_read_afresh(
    fault_server: FaultServer,
) -> None:
    async with FaultProxy(fault_server.port) as proxy:
        transport = StreamableHttpTransport(proxy.url)
        async with McpClient("away", transport, protocol="legacy", timeout=20) as client:
            await proxy.wait_gets(1)
            proxy.refuse_gets = True
            proxy.cut_gets()
            await until(lambda: client.notification_stream == "lost", "the loss to be seen")
            await proxy.wait_gets(3)  # the SDK's reopening, then the client's own, refused
            assert "unheard" not in await names(client)
            await client.call_tool("add_tool", {"name": "unheard"})  # its notice is lost
            assert "unheard" in await names(client)
            assert client.notification_stream == "lost"
            proxy.refuse_gets = False
            # The client's pauses: 0.5, 1, 2 s... up to 30 s.
            await until(lambda: client.notification_stream == "open", "the stream back")
            assert client.connected
