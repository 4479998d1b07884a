"""A call whose OpenAI client is closed (the app's own, or the one a cycle made and its
``close()`` closed mid-call) fails at once with ``LlmUsageError``, never with the HTTP
client's bare ``RuntimeError`` or as a dropped connection, and is never retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from openai import APIConnectionError, AsyncOpenAI, OpenAI

from agcore_tools import CycleConfig, LlmCycle
from agcore_tools.error import LlmUsageError
from agcore_tools.testing import Pause, RawStream, ScriptedChatServer

Serve = Callable[..., ScriptedChatServer]
CONFIG = CycleConfig("test-model", retry_initial_delay=0.01)
CLOSED = "the OpenAI client was closed before or while this call's model request was sent"


def client_of(server: ScriptedChatServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def owning(server: ScriptedChatServer) -> LlmCycle:
    """A cycle over a client of its own making (the async twin of a sync client), which
    its close() closes."""
    return LlmCycle(CONFIG, client=OpenAI(base_url=server.base_url, api_key="sk-test"))


@pytest.mark.parametrize("stream", [False, True], ids=["submit", "submit_stream"])
async def test_a_cycle_given_a_closed_client_refuses_the_call(serve: Serve, stream: bool) -> None:
    server = serve(ScriptedChatServer.reply_text("never sent"))
    client = client_of(server)
    await client.close()
    cycle = LlmCycle(CONFIG, client=client)
    with pytest.raises(LlmUsageError, match=CLOSED) as raised:
        if stream:
            async for _ in cycle.submit_stream("hi"):
                pass
        else:
            await cycle.submit("hi")
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert server.requests == []


async def test_a_cycle_closed_while_a_response_streams_in_ends_the_call_with_a_usage_error(
    serve: Serve,
) -> None:
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]))
    cycle = owning(server)
    first = asyncio.Event()

    async def read() -> None:
        async for _ in cycle.submit_stream("hi"):
            first.set()

    call = asyncio.ensure_future(read())
    await asyncio.wait_for(first.wait(), 10)
    await cycle.close()
    with pytest.raises(LlmUsageError, match=CLOSED) as raised:
        await asyncio.wait_for(call, 10)
    assert isinstance(raised.value.__cause__, APIConnectionError)


async def test_a_request_cut_by_its_cycles_close_is_not_retried(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]))
    cycle = owning(server)
    call = asyncio.ensure_future(cycle.submit("hi"))
    await server.wait_for(lambda: bool(server.requests), 10)  # it waits for its answer
    with caplog.at_level(logging.WARNING, logger="agcore_tools.cycle"):
        await cycle.close()
        with pytest.raises(LlmUsageError, match=CLOSED):
            await asyncio.wait_for(call, 10)
    assert [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()] == []
    assert len(server.requests) == 1
