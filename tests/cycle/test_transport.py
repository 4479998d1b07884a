"""sharded_http_client: requests spread over independent pools, with no thread of its own."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import httpx2
import pytest
import trustme
from openai import OpenAI

from agcore_tools import CycleConfig, LlmConfigError, LlmCycle, LlmError, ToolRegistry
from agcore_tools.cycle import sharded_http_client
from agcore_tools.cycle._sharded import ShardedTransport, shared_ssl_context

from .conftest import S

_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }
).encode()


class CountingServer:
    """A loopback HTTP/1.1 server answering ``{}`` (or :attr:`body`) that counts the
    connections it accepts."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""
        self.body = b"{}"
        self.writers: list[asyncio.StreamWriter] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
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
                writer.write(_ANSWER % (len(self.body), self.body))
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
        # Since Python 3.12 the server's exit waits for every connection to end, and a
        # pool the library keeps for the process (its own clients' on the library's
        # loop) holds one open: the server ends them, as it would at shutdown.
        for writer in state.writers:
            writer.close()


async def test_sequential_requests_reuse_one_kept_alive_connection(counting):
    # As the SDK's default client does: a lone conversation never fans out over the
    # pools (against a real API each new connection is a TLS handshake).
    client = sharded_http_client(shards=4, connections_per_shard=8)
    try:
        for _ in range(12):
            response = await asyncio.wait_for(client.post(counting.url, content=b"x"), 5)
            assert response.json() == {}
    finally:
        await asyncio.wait_for(client.aclose(), 5)
    assert counting.connections == 1


async def test_overlapping_requests_go_to_the_least_busy_shard(counting):
    transport = ShardedTransport(shards=4, connections_per_shard=8)
    client = httpx2.AsyncClient(transport=transport)
    try:
        async with AsyncExitStack() as open_bodies:
            for expected in ([1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [2, 1, 1, 1]):
                request = client.build_request("POST", counting.url, content=b"x")
                response = await asyncio.wait_for(client.send(request, stream=True), 5)
                open_bodies.push_async_callback(response.aclose)
                assert transport.open_responses == expected
        assert transport.open_responses == [0, 0, 0, 0]  # each closed body gave its shard back
    finally:
        await asyncio.wait_for(client.aclose(), 5)
    assert counting.connections == 5  # one per response open at once


async def test_a_failed_request_gives_its_shard_back():
    transport = ShardedTransport(shards=2, connections_per_shard=2)
    client = httpx2.AsyncClient(transport=transport)
    try:
        with pytest.raises(httpx2.ConnectError):
            # Port 9 on loopback: nothing listens there, so the connection is refused.
            await asyncio.wait_for(client.post("http://127.0.0.1:9/", content=b"x"), 5)
        assert transport.open_responses == [0, 0]
    finally:
        await asyncio.wait_for(client.aclose(), 5)


async def test_concurrent_requests_stay_within_each_shards_limit(counting):
    client = sharded_http_client(shards=3, connections_per_shard=2)
    try:
        await asyncio.wait_for(
            asyncio.gather(*(client.post(counting.url, content=b"x") for _ in range(30))), 10
        )
    finally:
        await asyncio.wait_for(client.aclose(), 5)
    assert 3 <= counting.connections <= 6


async def test_cycles_made_per_request_from_one_sync_client_reuse_one_connection(counting):
    # The sync guide's pattern. Each cycle's twin of the sync client had a pool of its
    # own: a new connection (a TLS handshake, against a real API) per request, besides
    # the CA bundle loaded again for each cycle.
    counting.body = _COMPLETION
    client = OpenAI(base_url=counting.url + "v1", api_key="-", max_retries=0)

    def ask() -> str:
        with LlmCycle(CycleConfig("m"), client=client) as cycle:
            return cycle.submit_sync("Hi").text

    for _ in range(5):  # in a thread: this loop serves the requests meanwhile
        assert await asyncio.wait_for(asyncio.to_thread(ask), 10) == "hi"
    assert counting.connections == 1


async def test_a_cycles_own_client_reads_the_certificates_at_its_first_request(
    counting, monkeypatch, tmp_path
):
    # They were read in LlmCycle(), on the app's event loop in an async handler (25 ms
    # of CPU and more, each time); now once per process, in a worker thread. A file
    # that is missing shows when the first request needs them, with a clear error.
    missing = tmp_path / "no-such-bundle.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    monkeypatch.setenv("OPENAI_BASE_URL", counting.url + "v1")
    monkeypatch.setenv("OPENAI_API_KEY", "-")
    counting.body = _COMPLETION
    cycle = LlmCycle(CycleConfig("m"))
    try:
        with pytest.raises(LlmError) as caught:
            await asyncio.wait_for(cycle.submit("Hi"), 10)
    finally:
        await asyncio.wait_for(cycle.close(), 5)
    assert f"cannot load the TLS certificates (SSL_CERT_FILE={str(missing)!r}" in str(caught.value)
    assert isinstance(caught.value.__cause__, LlmConfigError)
    assert isinstance(caught.value.__cause__.__cause__, FileNotFoundError)
    assert counting.connections == 0  # nothing was sent


async def test_certificates_that_failed_to_load_are_read_again_at_the_next_request(
    counting, monkeypatch, tmp_path
):
    # The failed build was kept for the process: once the CA file was missing (a volume
    # mounted late, a bundle an init step writes), every later request failed with the
    # same error, though the file was there by then.
    bundle = tmp_path / "late-bundle.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.setenv("OPENAI_BASE_URL", counting.url + "v1")
    monkeypatch.setenv("OPENAI_API_KEY", "-")
    counting.body = _COMPLETION
    cycle = LlmCycle(CycleConfig("m"))
    try:
        with pytest.raises(LlmError, match="cannot load the TLS certificates"):
            await asyncio.wait_for(cycle.submit("Hi"), 10)
        assert counting.connections == 0
        trustme.CA().cert_pem.write_to_path(str(bundle))
        # The same client asks again: its pools were never made, so it builds anew.
        assert (await asyncio.wait_for(cycle.submit("Hi"), 10)).text == "hi"
    finally:
        await asyncio.wait_for(cycle.close(), 5)
    assert counting.connections == 1
    context = await asyncio.wait_for(shared_ssl_context(), 10)
    assert context is await asyncio.wait_for(shared_ssl_context(), 10)  # now kept


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
        # its address there), a pool bounded whatever the number of conversations, and
        # at most one of the library's pool, which loaded the token counter once for
        # all twenty (when this test runs first in its process).
        assert asyncio.all_tasks() == {asyncio.current_task()}
        added = set(threading.enumerate()) - before
        loop_pool = {t for t in added if t.name.startswith("asyncio_")}
        library_pool = {t for t in added if t.name.startswith("agcore-tool_")}
        assert added == loop_pool | library_pool, added
        assert len(loop_pool) <= min(32, (os.cpu_count() or 1) + 4)
        assert len(library_pool) <= 1, library_pool
    finally:
        await asyncio.wait_for(client.close(), 5)


class HoldingServer:
    """Answers ``GET .../models`` once ``hold`` requests are in, counting connections and
    recording each request line (a proxy sees the absolute URL there)."""

    def __init__(self, hold: int) -> None:
        self.hold = hold
        self.connections = 0
        self.request_lines: list[bytes] = []
        self._arrived = 0
        self._all_in = asyncio.Event()

    def next_round(self) -> None:
        self._arrived = 0
        self._all_in = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        body = b'{"object": "list", "data": []}'
        answer = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        )
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.request_lines.append(head.split(b"\r\n", 1)[0])
                self._arrived += 1
                if self._arrived >= self.hold:
                    self._all_in.set()
                await asyncio.wait_for(self._all_in.wait(), 10)
                writer.write(answer % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed the connection
        finally:
            writer.close()


@pytest.fixture
async def holding(monkeypatch) -> AsyncIterator[tuple[HoldingServer, str]]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    state = HoldingServer(hold=150)
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    async with server:
        yield state, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        server.close()


async def test_a_cycles_own_client_keeps_every_connection_alive_under_load(holding, monkeypatch):
    # The SDK's default client keeps 100 connections alive: a second burst of 150
    # would open 50 more. The client LlmCycle builds is sharded and keeps them all.
    state, url = holding
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    cycle = LlmCycle(CycleConfig("m"))
    assert cycle.client is not None
    try:
        for _ in range(2):
            state.next_round()
            await asyncio.wait_for(
                asyncio.gather(*(cycle.client.models.list() for _ in range(150))), 20
            )
    finally:
        await asyncio.wait_for(cycle.close(), 5)
    assert state.connections == 150


async def test_a_cycles_own_client_goes_through_the_proxy_the_environment_names(
    holding, monkeypatch
):
    state, url = holding
    state.hold = 1
    monkeypatch.setenv("HTTP_PROXY", url)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://upstream.invalid/v1")
    cycle = LlmCycle(CycleConfig("m"))
    assert cycle.client is not None
    try:
        await asyncio.wait_for(cycle.client.models.list(), 10)
    finally:
        await asyncio.wait_for(cycle.close(), 5)
    assert state.request_lines == [b"GET http://upstream.invalid/v1/models HTTP/1.1"]


def test_a_client_of_ones_own_gets_the_sharding_hint_once_at_debug():
    script = (
        "import logging\n"
        "from openai import AsyncOpenAI\n"
        "from agcore_tools import CycleConfig, LlmCycle\n"
        "logging.basicConfig(level=logging.DEBUG, format='%(levelname)s %(message)s')\n"
        "client = AsyncOpenAI(api_key='-', base_url='http://127.0.0.1:9/v1')\n"
        "for _ in range(3):\n"
        "    LlmCycle(CycleConfig('m'), client=client)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    hints = [line for line in done.stderr.splitlines() if "sharded_http_client()" in line]
    assert len(hints) == 1, done.stderr
    assert hints[0].startswith("DEBUG ")
