"""sharded_http_client: requests spread over independent pools, with no thread of its own."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator

import pytest

from agcore_tools import CycleConfig, LlmConfigError, LlmCycle, ToolRegistry
from agcore_tools.cycle import sharded_http_client

from .conftest import S

_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class CountingServer:
    """A loopback HTTP/1.1 server answering ``{}`` that counts the connections it accepts."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.lower().split(b"\r\n")
                        if line.startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(_ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed the connection
        finally:
            writer.close()


@pytest.fixture
async def counting() -> AsyncIterator[CountingServer]:
    state = CountingServer()
    server = await asyncio.start_server(state._handle, "127.0.0.1", 0)
    state.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    async with server:
        yield state
        server.close()


async def test_sequential_requests_go_round_robin_over_the_shards(counting):
    client = sharded_http_client(shards=4, connections_per_shard=8)
    try:
        for _ in range(12):
            response = await asyncio.wait_for(client.post(counting.url, content=b"x"), 5)
            assert response.json() == {}
    finally:
        await asyncio.wait_for(client.aclose(), 5)
    # One kept-alive connection per shard; a single pool would have reused one.
    assert counting.connections == 4


async def test_a_single_pool_reuses_one_connection_for_the_same_requests(counting):
    # The contrast that makes the test above meaningful.
    client = sharded_http_client(shards=1, connections_per_shard=8)
    try:
        for _ in range(12):
            await asyncio.wait_for(client.post(counting.url, content=b"x"), 5)
    finally:
        await asyncio.wait_for(client.aclose(), 5)
    assert counting.connections == 1


async def test_concurrent_requests_stay_within_each_shards_limit(counting):
    client = sharded_http_client(shards=3, connections_per_shard=2)
    try:
        await asyncio.wait_for(
            asyncio.gather(*(client.post(counting.url, content=b"x") for _ in range(30))), 10
        )
    finally:
        await asyncio.wait_for(client.aclose(), 5)
    assert 3 <= counting.connections <= 6


@pytest.mark.parametrize(("shards", "per_shard"), [(0, 10), (4, 0)])
def test_a_pool_of_nothing_is_refused(shards, per_shard):
    with pytest.raises(LlmConfigError, match="shards >= 1") as caught:
        sharded_http_client(shards, per_shard)
    assert isinstance(caught.value, ValueError)


async def test_many_conversations_share_it_with_no_thread_and_no_task_left(serve):
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3"), repeat=True)
    registry = ToolRegistry()

    @registry.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    from openai import AsyncOpenAI

    http_client = sharded_http_client(shards=4, connections_per_shard=4)
    client = AsyncOpenAI(api_key="test", base_url=server.base_url, http_client=http_client)
    before = set(threading.enumerate())
    try:
        cycles = [LlmCycle(CycleConfig("test-model"), client=client) for _ in range(20)]
        answers = await asyncio.wait_for(
            asyncio.gather(*(c.submit_with_tools("1 + 2?", registry) for c in cycles)), 20
        )
        assert [a.text for a in answers] == ["3"] * 20
        # Idle cycles hold no task, and no thread is per conversation: the only new
        # threads are the event loop's default executor (opening a connection resolves
        # its address there), a pool bounded whatever the number of conversations.
        assert asyncio.all_tasks() == {asyncio.current_task()}
        added = set(threading.enumerate()) - before
        assert all(t.name.startswith("asyncio_") for t in added), added
        assert len(added) <= min(32, (os.cpu_count() or 1) + 4)
    finally:
        await asyncio.wait_for(client.close(), 5)
