"""Cycles on one client share its retry-less copy (cycle/_requester.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agcore_tools import CycleConfig, LlmCycle
from agcore_tools.testing import ScriptedChatServer

from .conftest import S


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting the work handed to its threads."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


async def test_a_new_cycle_on_a_used_client_makes_no_thread_hop(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    # A fresh SDK client probes the platform in a worker thread before its first
    # request; a copy per cycle paid that hop once per conversation.
    server = serve(S.reply_text("one"), S.reply_text("two"))
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    async with server.client(timeout=10.0) as client:
        first = LlmCycle(CycleConfig("m"), client=client)
        assert (await first.submit("Hi")).text == "one"
        before = executor.submitted
        second = LlmCycle(CycleConfig("m"), client=client)
        assert (await second.submit("Hi again")).text == "two"
    assert executor.submitted == before


async def test_a_setting_changed_on_the_client_reaches_the_next_cycle(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    server = serve(S.reply_text("one"), S.reply_text("two"))
    async with server.client(timeout=10.0, max_retries=5) as client:
        await LlmCycle(CycleConfig("m"), client=client).submit("Hi")
        client.api_key = "sk-rotated"
        await LlmCycle(CycleConfig("m"), client=client).submit("Hi again")
        assert client.max_retries == 5  # the caller's client is left as it was
    keys = [request.headers["authorization"] for request in server.requests]
    assert keys[1] == "Bearer sk-rotated" != keys[0]
