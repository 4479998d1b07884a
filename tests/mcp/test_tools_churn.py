"""A server whose tool list keeps changing (a ``notifications/tools/list_changed``
before each ``tools/list`` it answers): reads of the tool list share fetches, and the
list read is still current. Against a real MCPServer over stdio."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from agcore_tools import McpClient, StdioTransport

from .conftest import SERVERS, assert_no_stray_tasks, fixture_stdio

pytestmark = pytest.mark.timeout(60)

READERS = 20


def churn_client() -> McpClient:
    transport = StdioTransport(sys.executable, [str(SERVERS / "churn_server.py")])
    return McpClient("churn", transport, protocol="legacy", timeout=15)


async def test_reads_while_the_list_keeps_changing_share_fetches() -> None:
    # Each fetch was made stale by the notice that came with it, so each of the waiting
    # readers fetched again in turn: 20 readers, 20 tools/list.
    async with churn_client() as client:
        before = int(await client.call_tool("listed"))
        lists = await asyncio.gather(*(client.tool_infos() for _ in range(READERS)))
        fetched = int(await client.call_tool("listed")) - before
        assert fetched <= 2, f"{READERS} readers sent {fetched} tools/list"
        assert all(sorted(i.name for i in infos) == ["add", "flood", "listed"] for infos in lists)
        assert await client.call_tool("add", {"name": "late"}) == "added late"
        assert "late" in [i.name for i in await client.tool_infos()]
    await assert_no_stray_tasks()


async def test_a_flood_of_change_notices_is_one_info_line_per_list(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Each notice logged an INFO line, a flood of them as many: only one that clears a
    # list still fresh is at INFO now, the rest (nothing left to clear) at DEBUG.
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp")
    async with churn_client() as client:
        await client.tool_infos()
        before = int(await client.call_tool("listed"))
        assert await client.call_tool("flood", {"count": 200}) == "sent 200"
        await client.tool_infos()  # the notices came before the call's answer
        assert int(await client.call_tool("listed")) - before <= 1
    cleared = [r for r in caplog.records if "tool list cache cleared" in r.getMessage()]
    assert len(cleared) >= 200
    assert len([r for r in cleared if r.levelno >= logging.INFO]) <= 1


async def test_a_change_notice_after_a_fresh_list_is_logged_and_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The fixture server notices only when a tool is added: the cache was fresh then.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp")
    async with McpClient("fixture", fixture_stdio(), protocol="legacy", timeout=15) as client:
        assert "added_later" not in [i.name for i in await client.tool_infos()]
        assert await client.call_tool("add_tool", {"name": "added_later"}) == "added added_later"
        assert "added_later" in [i.name for i in await client.tool_infos()]
    assert "MCP server 'fixture': the server's tool list changed; tool list cache cleared" in [
        r.getMessage() for r in caplog.records if r.levelno == logging.INFO
    ]
