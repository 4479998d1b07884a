"""Tool policies through the registry: concurrency caps (alone and per resource), rate
limits (waiting and refusing), circuit breakers, the result cache, the idempotency key
and the order the checks run in."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from agcore_tools import (
    BaseTool,
    Breaker,
    FunctionTool,
    InvalidArgumentsError,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    RateLimit,
    ResultCache,
    ToolBreakerChanged,
    ToolConfigError,
    ToolContext,
    ToolExecutionError,
    ToolPolicy,
    ToolRegistry,
    ToolTimeoutError,
    ToolUnavailableError,
    tool,
)
from agcore_tools._clock import CLOCK
from agcore_tools._policy_book import _BOUND, own_state
from agcore_tools.policies import MemoryCacheStore, MemoryRateStore
from agcore_tools.testing import StaticTool

from ._policy_tools import flaky_charge


class Gauge:
    """How many calls run at once, as the tools themselves see it."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    async def hold(self, seconds: float) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now -= 1


async def test_a_concurrency_cap_holds_across_200_concurrent_batches() -> None:
    registry = ToolRegistry()
    gauge = Gauge()

    @registry.tool(policy=ToolPolicy(concurrency=3))
    async def query(n: int) -> int:
        """Query."""
        await gauge.hold(0.001)
        return n

    # 200 callers sharing the registry, each with its own batch, as 200 loops would.
    batches = [registry.invoke_all([("query", {"n": i})], timeout=30) for i in range(200)]
    results = await asyncio.gather(*batches)
    assert [r[0].output for r in results] == list(range(200))
    assert gauge.peak == 3


async def test_tools_naming_one_resource_share_its_cap() -> None:
    registry = ToolRegistry()
    gauge = Gauge()
    db = ToolPolicy(concurrency=1, resource="orders-db")

    @registry.tool(policy=db)
    async def insert(n: int) -> int:
        """Insert."""
        await gauge.hold(0.002)
        return n

    @registry.tool(policy=db)
    async def delete(n: int) -> int:
        """Delete."""
        await gauge.hold(0.002)
        return n

    calls = [("insert" if i % 2 else "delete", {"n": i}) for i in range(20)]
    results = await registry.invoke_all(calls)
    assert all(r.ok for r in results) and gauge.peak == 1


def test_a_concurrency_cap_holds_and_hands_slots_over_across_event_loops() -> None:
    # A registry is shared by the loops that use it: two threads' asyncio.run, or an
    # app's loop and the library's. A slot freed in one loop was handed to a waiter of
    # the other with a call that loop never saw, and both waited forever.
    registry = ToolRegistry()
    lock = threading.Lock()
    running, peak, done = [0], [0], []

    @registry.tool(policy=ToolPolicy(concurrency=1))
    async def write(i: int) -> int:
        """One writer at a time."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.01)
        with lock:
            running[0] -= 1
        return i

    def worker() -> None:
        async def main() -> None:
            for i in range(5):
                done.append((await registry.invoke("write", {"i": i})).ok)

        asyncio.run(main())

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    assert done == [True] * 10
    assert peak[0] == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_inherit_the_slots_its_parent_s_calls_hold() -> None:
    # The parent's call holds the only slot at fork time; the child has no such call,
    # so nothing would ever give the slot back there.
    code = textwrap.dedent(
        """
        import asyncio, os, sys, threading
        from agcore_tools import ToolPolicy, ToolRegistry

        registry = ToolRegistry()
        holding, release = threading.Event(), threading.Event()

        @registry.tool(policy=ToolPolicy(concurrency=1))
        def work(x: int) -> int:
            "Work."
            if x == 1:
                holding.set()
                release.wait(30)
            return x * 2

        busy = threading.Thread(target=registry.invoke_sync, args=("work", {"x": 1}))
        busy.start()
        assert holding.wait(10)
        pid = os.fork()
        if pid == 0:
            call = asyncio.wait_for(registry.invoke("work", {"x": 2}), 10.0)
            os._exit(0 if asyncio.run(call).output == 4 else 1)
        _, status = os.waitpid(pid, 0)
        release.set()
        busy.join(10)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


async def test_waiting_for_a_slot_counts_against_the_timeout() -> None:
    registry = ToolRegistry()
    # The first call holds the slot until the second has timed out (not for 0.3 s: a
    # test descheduled that long gave the second call a free slot).
    entered, release = asyncio.Event(), asyncio.Event()

    @registry.tool(policy=ToolPolicy(concurrency=1))
    async def hold(first: bool) -> str:
        """Hold the slot."""
        if first:
            entered.set()
            await release.wait()
        return "done"

    holding = asyncio.ensure_future(registry.invoke_all([("hold", {"first": True})], timeout=5))
    await asyncio.wait_for(entered.wait(), 5)  # the first call has the slot
    [second] = await registry.invoke_all([("hold", {"first": False})], timeout=0.1)
    release.set()
    [first] = await holding
    assert first.ok and isinstance(second.error, ToolTimeoutError)
    # The second never got its slot: it timed out waiting, and never ran; the model is
    # told so (not "it may have run in part"), and the error agrees with the invocation.
    assert first.may_have_run is True and second.may_have_run is False
    assert second.error.may_have_run is False
    assert str(second.error) == (
        "tool 'hold' failed: timed out after 0.1 s waiting for its turn; it never started"
    )
    assert registry.entry("hold").guard.slots.running == 0  # type: ignore[union-attr]
    assert not registry.entry("hold").guard.slots.waiters  # type: ignore[union-attr]


@pytest.mark.parametrize("where", ["tool", "batch"])
async def test_a_sync_tool_past_its_timeout_keeps_its_slot_until_its_thread_ends(
    where: str,
) -> None:
    # Its thread cannot be stopped, so it runs on; the slot used to be freed at once,
    # and concurrency=1 saw two calls running.
    registry = ToolRegistry()
    release = threading.Event()
    try:

        @registry.tool(policy=ToolPolicy(concurrency=1), timeout=0.05 if where == "tool" else None)
        def block(tag: str) -> str:
            """Wait for the test."""
            release.wait(10)
            return tag

        slots = registry.entry("block").guard.slots  # type: ignore[union-attr]
        batch_timeout = 5.0 if where == "tool" else 0.05
        [timed_out] = await registry.invoke_all([("block", {"tag": "a"})], timeout=batch_timeout)
        assert isinstance(timed_out.error, ToolTimeoutError)
        assert slots.running == 1  # the thread still runs, and holds the slot
        # The tool's own timeout bounds a wait for its slot too: long enough here.
        block.timeout = 10.0 if where == "tool" else None
        waiting = asyncio.ensure_future(registry.invoke_all([("block", {"tag": "b"})], timeout=10))
        for _ in range(100):
            if slots.waiters:
                break
            await asyncio.sleep(0.01)
        assert len(slots.waiters) == 1  # the second call waits for it
        release.set()
        [second] = await asyncio.wait_for(waiting, 10)
        assert second.output == "b"
    finally:
        release.set()
    assert slots.running == 0 and not slots.waiters


async def test_a_tools_own_timeout_bounds_its_wait_for_a_slot() -> None:
    # Only the caller's timeout (60 s here) used to bound the wait: the second call
    # waited for the whole of the first's thread.
    registry = ToolRegistry()
    release = threading.Event()
    try:

        @registry.tool(policy=ToolPolicy(concurrency=1), timeout=0.2)
        def crawl(tag: str) -> str:
            """Hang until the test lets go."""
            release.wait(10)
            return tag

        slots = registry.entry("crawl").guard.slots  # type: ignore[union-attr]
        batch = registry.invoke_all([("crawl", {"tag": "a"}), ("crawl", {"tag": "b"})], timeout=60)
        first, second = await asyncio.wait_for(batch, 5)
        assert isinstance(first.error, ToolTimeoutError) and first.may_have_run is True
        assert isinstance(second.error, ToolTimeoutError) and second.may_have_run is False
        assert str(second.error) == (
            "tool 'crawl' failed: timed out after 0.2 s waiting for its turn; it never started"
        )
        assert slots.running == 1 and not slots.waiters  # the first's thread holds it
    finally:
        release.set()
    for _ in range(500):
        if slots.running == 0:
            break
        await asyncio.sleep(0.01)
    assert slots.running == 0


async def test_invoke_records_a_timeout_that_ends_while_the_call_waits_for_a_slot() -> None:
    # invoke() raised this ToolTimeoutError (the same timeout during the run is
    # recorded), so code checking invocation.ok failed only under load.
    registry = ToolRegistry()
    release = asyncio.Event()
    db = ToolPolicy(concurrency=1, resource="db")

    @registry.tool(policy=db)
    async def migrate() -> str:
        """Hold the database until the test lets go."""
        await release.wait()
        return "migrated"

    @registry.tool(policy=db, timeout=0.2)
    async def render(page: int) -> str:
        """Render a page."""
        return f"page {page}"

    holding = asyncio.ensure_future(registry.invoke("migrate", {}))
    await asyncio.sleep(0)  # it runs, holding the slot
    try:
        waited = await asyncio.wait_for(registry.invoke("render", {"page": 1}), 10)
    finally:
        release.set()
    assert isinstance(waited.error, ToolTimeoutError) and waited.may_have_run is False
    assert str(waited.error) == (
        "tool 'render' failed: timed out after 0.2 s waiting for its turn; it never started"
    )
    assert (await holding).output == "migrated"
    assert registry.entry("render").stats.calls == 0  # type: ignore[union-attr]


async def test_a_tools_own_timeout_bounds_its_wait_for_a_rate_turn() -> None:
    # The second call's turn comes in 30 s, past its own timeout: refused at once,
    # where it used to wait for the turn and run.
    registry = ToolRegistry()

    @registry.tool(policy=ToolPolicy(rate=RateLimit(1, per=30.0)), timeout=0.5)
    async def lookup(n: int) -> int:
        """Look a number up."""
        return n

    batch = registry.invoke_all([("lookup", {"n": 1}), ("lookup", {"n": 2})], timeout=60)
    first, second = await asyncio.wait_for(batch, 5)
    assert first.output == 1
    assert isinstance(second.error, ToolUnavailableError) and second.may_have_run is False
    assert "no turn before its timeout" in str(second.error)


async def test_the_wait_for_a_turn_counts_against_the_tools_own_timeout() -> None:
    # The second call waits about 1 s for its turn, leaving about 2 s of its 3 s to run:
    # it used to get the whole 3 s after its wait. Its run never ends on its own, so a
    # loaded machine's pauses only shorten what is left of it (a pause over 2 s, in its
    # wait, would leave it none).
    registry = ToolRegistry()
    runs: list[float] = []

    @registry.tool(policy=ToolPolicy(rate=RateLimit(1, per=1.0)), timeout=3.0)
    async def fetch(n: int) -> int:
        """Fetch; the second call never finishes."""
        if n == 1:
            return n
        began = time.perf_counter()
        try:
            await asyncio.Event().wait()
        finally:
            runs.append(time.perf_counter() - began)
        return n

    batch = registry.invoke_all([("fetch", {"n": 1}), ("fetch", {"n": 2})], timeout=60)
    first, second = await asyncio.wait_for(batch, 10)
    assert first.output == 1
    assert isinstance(second.error, ToolTimeoutError) and second.may_have_run is True
    assert str(second.error).startswith("tool 'fetch' failed: timed out after 3 s; it may")
    [ran] = runs
    assert ran < 2.5  # about 2 s; 3 s when the wait was not counted


async def test_a_rate_limit_spaces_calls_evenly_after_the_burst() -> None:
    registry = ToolRegistry()
    starts: list[float] = []

    @registry.tool(policy=ToolPolicy(rate=RateLimit(20, per=1.0, burst=2)))
    async def ping() -> str:
        """Ping."""
        starts.append(time.perf_counter())
        return "pong"

    began = time.perf_counter()
    results = await registry.invoke_all([("ping", {})] * 12, timeout=5)
    assert all(r.ok for r in results)
    offsets = sorted(s - began for s in starts)
    # Two at once (the burst), then one every 50 ms: call k never starts before
    # (k - 1) x 50 ms (a sleep never ends early), so the rate is never exceeded.
    assert offsets[1] < 0.04
    assert all(offset >= (k - 1) * 0.05 - 0.002 for k, offset in enumerate(offsets) if k >= 2)
    assert offsets[-1] < 1.0  # and the calls are not held back much longer than that


async def test_over_the_rate_a_call_is_refused_at_once_when_told_not_to_wait() -> None:
    registry = ToolRegistry()

    @registry.tool(policy=ToolPolicy(rate=RateLimit(2, per=60.0, wait=False)))
    def send(text: str) -> str:
        """Send."""
        return text

    results = await registry.invoke_all([("send", {"text": str(i)}) for i in range(3)])
    assert [r.ok for r in results] == [True, True, False]
    error = results[2].error
    assert isinstance(error, ToolUnavailableError) and error.is_recoverable()
    assert results[2].may_have_run is False
    assert str(error) == (
        "tool 'send' is unavailable: over its rate limit of 2 call(s) per 60 s; try again in 30 s"
    )
    with pytest.raises(ToolUnavailableError):  # invoke() raises it, like a refusal
        await registry.invoke("send", {"text": "x"})


@pytest.mark.parametrize(
    ("limit", "reading"),
    [
        (RateLimit(1, per=3600.0, wait=False), 1083.454189058),  # a VM's uptime
        (RateLimit(10, per=1.0, wait=False), 5000.25),
        (RateLimit(5, per=1.0, wait=False), 1_733_000_000.5),  # a UNIX time
    ],
)
async def test_a_burst_within_the_limit_is_never_refused_by_rounding(
    limit: RateLimit, reading: float
) -> None:
    # In floating point, (now + interval) - capacity * interval - now came out a hair
    # above zero at these readings, and wait=False refused the burst's last call.
    token = CLOCK.set(lambda: reading)
    try:
        registry = ToolRegistry()

        @registry.tool(policy=ToolPolicy(rate=limit))
        def send_sms(to: str) -> str:
            """Send a text message."""
            return "sent"

        calls = [("send_sms", {"to": str(i)}) for i in range(limit.capacity + 1)]
        results = await registry.invoke_all(calls)
        assert [r.ok for r in results] == [True] * limit.capacity + [False]
    finally:
        CLOCK.reset(token)


async def test_a_long_wait_reads_in_whole_seconds() -> None:
    # .3g wrote an hour as "3.6e+03 s", which the model reading it misreads.
    moment = [5000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()

        @registry.tool(policy=ToolPolicy(rate=RateLimit(24, per=86400.0, burst=1, wait=False)))
        def daily_report(day: str) -> str:
            """Build a report (24 a day)."""
            return "report"

        @registry.tool(policy=ToolPolicy(breaker=Breaker(failures=1, window=60, cool_down=1234.5)))
        def billing(account: str) -> str:
            """Billing lookup."""
            raise RuntimeError("billing API down")

        [_, refused] = await registry.invoke_all([("daily_report", {"day": "mon"})] * 2)
        assert str(refused.error).endswith("; try again in 3600 s")
        await registry.invoke("billing", {"account": "a"})
        with pytest.raises(ToolUnavailableError, match=r"; try again in 1234 s$"):
            await registry.invoke("billing", {"account": "a"})
        moment[0] += 1229.0  # 5.5 s left: tenths still matter
        with pytest.raises(ToolUnavailableError, match=r"; try again in 5\.5 s$"):
            await registry.invoke("billing", {"account": "a"})
    finally:
        CLOCK.reset(token)


async def test_a_call_that_would_wait_past_its_timeout_is_refused_without_waiting() -> None:
    registry = ToolRegistry()

    @registry.tool(policy=ToolPolicy(rate=RateLimit(1, per=10.0)))
    def slow_api() -> str:
        """Call a slow API."""
        return "ok"

    first, second = await registry.invoke_all([("slow_api", {}), ("slow_api", {})], timeout=1.0)
    assert first.ok
    assert isinstance(second.error, ToolUnavailableError)
    assert "no turn before its timeout" in str(second.error)


class NotingMemoryStore(MemoryRateStore):
    """The memory store, saying when it reserved a turn."""

    def __init__(self) -> None:
        super().__init__()
        self.reserved = asyncio.Event()

    def reserve_now(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        wait = super().reserve_now(key, limit, max_wait)
        self.reserved.set()
        return wait


class GivingBackStore:
    """A store of the app's own, with the optional give_back; says when it reserved."""

    def __init__(self) -> None:
        self.inner = MemoryRateStore()
        self.reserved = asyncio.Event()
        self.given_back: list[str] = []

    async def reserve(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        wait = await self.inner.reserve(key, limit, max_wait)
        self.reserved.set()
        return wait

    async def give_back(self, key: str, limit: RateLimit) -> None:
        self.given_back.append(key)
        await self.inner.give_back(key, limit)


@pytest.mark.parametrize("store_type", [NotingMemoryStore, GivingBackStore])
async def test_a_call_cancelled_while_it_waits_for_its_turn_gives_the_turn_back(
    store_type: type[NotingMemoryStore | GivingBackStore],
) -> None:
    moment = [0.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        store = store_type()
        registry = ToolRegistry()

        @registry.tool(policy=ToolPolicy(rate=RateLimit(1, per=60.0, store=store)))
        def lookup(tag: str) -> str:
            """Look up."""
            return tag

        assert (await registry.invoke("lookup", {"tag": "A"})).ok
        store.reserved.clear()
        waiting = asyncio.ensure_future(
            registry.invoke_all([("lookup", {"tag": "B"})], timeout=120)
        )
        await asyncio.wait_for(store.reserved.wait(), 5)  # B has a turn, 60 s away
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # B never started: its turn is C's, a minute after A's (not two).
        moment[0] = 60.0
        [late] = await registry.invoke_all([("lookup", {"tag": "C"})], timeout=1.0)
        assert late.output == "C", late.error
        if isinstance(store, GivingBackStore):
            assert store.given_back == ["tool:lookup"]
    finally:
        CLOCK.reset(token)


async def test_a_call_out_of_time_waiting_for_a_slot_gives_its_turn_back() -> None:
    moment = [0.0]
    token = CLOCK.set(lambda: moment[0])
    release = asyncio.Event()
    try:
        registry = ToolRegistry()

        @registry.tool(policy=ToolPolicy(rate=RateLimit(2, per=60.0), concurrency=1))
        async def hold(tag: str) -> str:
            """Hold the slot until released."""
            await release.wait()
            return tag

        slots = registry.entry("hold").guard.slots  # type: ignore[union-attr]
        holding = asyncio.ensure_future(registry.invoke_all([("hold", {"tag": "A"})], timeout=10))
        for _ in range(100):
            if slots.running:
                break
            await asyncio.sleep(0.01)
        # B takes the second turn of the burst, then times out waiting for the slot.
        [refused] = await registry.invoke_all([("hold", {"tag": "B"})], timeout=0.05)
        assert isinstance(refused.error, ToolTimeoutError) and not refused.may_have_run
        release.set()
        [first] = await holding
        # B's turn came back: C starts at once (it would have waited 30 s, past its timeout).
        [third] = await registry.invoke_all([("hold", {"tag": "C"})], timeout=1.0)
        assert first.ok and third.output == "C", third.error
    finally:
        release.set()
        CLOCK.reset(token)


async def test_the_breaker_opens_hides_the_tool_refuses_then_a_probe_closes_it() -> None:
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])  # the library's clock, which tests may set
    try:
        registry = ToolRegistry()
        runs = flaky_charge(registry)

        @registry.tool
        def other() -> str:
            """Another tool."""
            return "fine"

        seen: list[Any] = []
        ctx = ToolContext(on_event=seen.append)
        for i in range(5):
            [inv] = await registry.invoke_all([("charge", {"ok": False}, f"c{i}")], ctx=ctx)
            assert inv.error is not None
        assert [d["function"]["name"] for d in registry.definitions()] == ["other"]
        assert registry.unavailable_tools() == ["charge"]
        assert seen == [ToolBreakerChanged("charge", "c4", "open", 30.0)]

        moment[0] += 29.0
        [refused] = await registry.invoke_all([("charge", {"ok": True}, "c5")], ctx=ctx)
        assert isinstance(refused.error, ToolUnavailableError) and len(runs) == 5
        assert "try again in 1 s" in str(refused.error)

        moment[0] += 1.0  # the cool-down is over: offered again, one probe let through
        assert [d["function"]["name"] for d in registry.definitions()] == ["charge", "other"]
        [probe] = await registry.invoke_all([("charge", {"ok": True}, "c6")], ctx=ctx)
        assert probe.output == "charged" and runs[-1] is True
        assert seen[-1] == ToolBreakerChanged("charge", "c6", "closed")
        assert registry.unavailable_tools() == []
    finally:
        CLOCK.reset(token)


async def test_a_failed_probe_opens_the_breaker_again_and_bad_arguments_never_count() -> None:
    moment = [0.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()

        @registry.tool(policy=ToolPolicy(breaker=Breaker(failures=2, window=10, cool_down=5)))
        def fetch(url: str) -> str:
            """Fetch a page."""
            raise ConnectionError(url)

        for _ in range(3):  # the model's mistakes say nothing about the tool
            [bad] = await registry.invoke_all([("fetch", {"nope": 1})])
            assert bad.error is not None
        assert registry.unavailable_tools() == []
        await registry.invoke_all([("fetch", {"url": "a"}), ("fetch", {"url": "b"})])
        assert registry.unavailable_tools() == ["fetch"]
        moment[0] += 5.0
        [probe] = await registry.invoke_all([("fetch", {"url": "c"})])
        assert "ConnectionError" in str(probe.error)
        assert registry.unavailable_tools() == ["fetch"]  # open for another cool-down
    finally:
        CLOCK.reset(token)


class Abort(BaseException):
    """Stands for what a tool may raise that is no Exception: pytest.fail()'s and
    pytest.skip()'s outcomes, KeyboardInterrupt, gevent's Timeout."""


async def test_a_call_stopped_by_a_base_exception_frees_its_slot_and_its_probe() -> None:
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()

        @registry.tool(policy=ToolPolicy(concurrency=1))
        def export(rows: int) -> str:
            """Export rows (sync: its exception comes back from its worker thread)."""
            if rows < 0:
                raise Abort("bad input")
            return f"{rows} rows"

        @registry.tool(policy=ToolPolicy(breaker=Breaker(failures=1, window=60, cool_down=10)))
        async def lookup(x: int) -> int:
            """Look something up."""
            if x == 1:
                raise RuntimeError("service down")
            if x == 2:
                raise Abort("odd")
            return x

        with pytest.raises(Abort):
            await registry.invoke("export", {"rows": -1})
        entry = registry.entry("export")
        assert entry is not None and entry.guard is not None and entry.guard.slots is not None
        assert entry.guard.slots.running == 0  # its slot was lost for good
        assert (entry.stats.calls, entry.stats.failures) == (1, 1)
        done = await asyncio.wait_for(registry.invoke("export", {"rows": 5}), 10)
        assert done.output == "5 rows"

        await registry.invoke("lookup", {"x": 1})
        assert registry.unavailable_tools() == ["lookup"]
        moment[0] += 11.0  # cool-down over: the next call is the probe
        with pytest.raises(Abort):
            await registry.invoke("lookup", {"x": 2})
        # The probe ended without an outcome: the next call probes (it was refused, "one
        # probe call ... which is running", for the life of the registry).
        probe = await registry.invoke("lookup", {"x": 3})
        assert probe.output == 3 and registry.unavailable_tools() == []
    finally:
        CLOCK.reset(token)


async def test_timeouts_count_as_failures_but_waiting_for_a_turn_does_not() -> None:
    registry = ToolRegistry()
    breaker = Breaker(failures=2, window=60.0, cool_down=60.0)

    @registry.tool(policy=ToolPolicy(breaker=breaker, concurrency=1))
    async def hang(seconds: float) -> str:
        """Hang."""
        await asyncio.sleep(seconds)
        return "late"

    # One runs and times out; the other only waited for the slot: one failure.
    await registry.invoke_all([("hang", {"seconds": 1}), ("hang", {"seconds": 0})], timeout=0.1)
    assert registry.unavailable_tools() == []
    await registry.invoke_all([("hang", {"seconds": 1})], timeout=0.1)
    assert registry.unavailable_tools() == ["hang"]


async def test_identical_calls_within_the_ttl_run_once_and_failures_are_never_cached() -> None:
    moment = [0.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        runs: list[str] = []

        @registry.tool(version="2", policy=ToolPolicy(cache=ResultCache(ttl=60)))
        def lookup(order_id: str, verbose: bool = False) -> dict[str, Any]:
            """Look an order up."""
            runs.append(order_id)
            if order_id == "bad":
                raise KeyError(order_id)
            return {"id": order_id, "status": "shipped", "verbose": verbose}

        @registry.tool
        def stamp(order_id: str) -> str:
            """Not idempotent: no cache."""
            runs.append(f"stamp {order_id}")
            return order_id

        first = await registry.invoke("lookup", {"order_id": "A1"})
        again = await registry.invoke("lookup", {"order_id": "A1"})
        assert runs == ["A1"] and again.cached and not first.cached
        assert again.may_have_run is False and registry.entry("lookup").stats.calls == 1
        assert again.output == first.output and again.output is not first.output
        again.output["status"] = "edited"  # a caller's edit never reaches the cache
        assert (await registry.invoke("lookup", {"order_id": "A1"})).output["status"] == "shipped"
        await registry.invoke("lookup", {"order_id": "A1", "verbose": True})  # other arguments
        assert runs == ["A1", "A1"]
        for _ in range(2):
            assert not (await registry.invoke("lookup", {"order_id": "bad"})).ok
        assert runs.count("bad") == 2
        for _ in range(2):
            await registry.invoke("stamp", {"order_id": "A1"})
        assert runs.count("stamp A1") == 2
        moment[0] += 61.0  # past the TTL
        await registry.invoke("lookup", {"order_id": "A1"})
        assert runs.count("A1") == 3
    finally:
        CLOCK.reset(token)


class CountingCacheStore:
    """A cache store in memory that notes how far a ticking task had got at each write."""

    def __init__(self, ticks: list[int]) -> None:
        self.ticks = ticks
        self.texts: dict[str, str] = {}
        self.written_at: list[int] = []

    async def get(self, key: str) -> str | None:
        return self.texts.get(key)

    async def set(self, key: str, value: str, ttl: float) -> None:
        self.written_at.append(self.ticks[0])
        self.texts[key] = value


async def test_a_large_result_is_written_to_the_cache_off_the_event_loop() -> None:
    # json.dumps of megabytes of rows ran on the loop (about 40 ms for 5 MB); a small
    # result is still written at once.
    ticks = [0]
    store = CountingCacheStore(ticks)
    returned_at: list[int] = []
    registry = ToolRegistry()
    rows = [{"id": n, "name": f"customer {n}", "city": "Zürich"} for n in range(60_000)]

    @registry.tool(policy=ToolPolicy(cache=ResultCache(ttl=60, store=store)))
    async def export(count: int) -> list[dict[str, Any]]:
        """Export rows."""
        returned_at.append(ticks[0])
        return rows[:count]

    async def tick() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(tick())
    try:
        for count in (3, 60_000):
            first = await registry.invoke("export", {"count": count})
            again = await registry.invoke("export", {"count": count})
            assert again.cached and again.output == first.output == rows[:count]
    finally:
        ticking.cancel()
    small, large = store.written_at
    # A bounded store write (ResultCache.store_timeout) runs in a task of its own on
    # Python 3.10 (see _aio.with_timeout): one turn of the loop, not a worker thread.
    hop = 1 if sys.version_info < (3, 11) else 0
    assert small == returned_at[0] + hop  # nothing else ran between the tool's end and its write
    assert large > returned_at[1]  # the loop went on while it was written
    assert list(store.texts.values())[1] == json.dumps(rows, ensure_ascii=False)


CELL = '''
@registry.tool(tags=["pricing"], policy=own)
def with_vat(price: float) -> float:
    """The price with VAT."""
    return price * 1.02  # the bug: VAT is 20 %
'''


@pytest.mark.parametrize("where", ["own", "group"])
async def test_a_redefined_or_replaced_tool_never_answers_from_the_old_codes_cache(
    where: str,
) -> None:
    # A notebook cell edited and run again replaced the tool, but its cached results
    # (the key holds the name and version, neither of which changed) were the old
    # code's for up to ttl seconds; unregister() and registering again kept them too.
    registry = ToolRegistry()
    cache = ToolPolicy(cache=ResultCache(ttl=300))
    if where == "group":
        registry.set_policy(cache, tag="pricing")
    namespace = {"registry": registry, "own": cache if where == "own" else None}
    exec(compile(CELL, "<ipython-input-3>", "exec"), namespace)
    assert (await registry.invoke("with_vat", {"price": 100})).output == 102.0
    assert (await registry.invoke("with_vat", {"price": 100})).cached

    fixed = CELL.replace("price * 1.02", "price * 1.20")
    exec(compile(fixed, "<ipython-input-3>", "exec"), namespace)  # run again, edited
    again = await registry.invoke("with_vat", {"price": 100})
    assert (again.output, again.cached) == (120.0, False)

    registry.unregister("with_vat")
    exec(compile(CELL, "<ipython-input-4>", "exec"), namespace)  # the old code, anew
    back = await registry.invoke("with_vat", {"price": 100})
    assert (back.output, back.cached) == (102.0, False)


def test_a_cache_on_a_tool_that_needs_approval_is_refused() -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolConfigError, match="needs approval"):

        @registry.tool(needs_approval=True, policy=ToolPolicy(cache=ResultCache(60)))
        def refund(order_id: str) -> str:
            """Refund."""
            return order_id

    assert "refund" not in registry


async def test_a_tools_own_policy_holds_in_every_registry_that_holds_the_tool() -> None:
    # The state was each registry's: the same tool in a chat and a batch registry ran
    # two calls at once under concurrency=1, and had two rate buckets and two breakers.
    moment = [2000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        release = asyncio.Event()
        runs: list[int] = []

        async def write(row: int) -> int:
            """Write a row (the database takes one writer)."""
            runs.append(row)
            await release.wait()
            return row

        policy = ToolPolicy(concurrency=1, rate=RateLimit(3, per=60, wait=False))
        write_row = FunctionTool(write, name="write_row", policy=policy)

        async def fail(x: int) -> int:
            """Fail."""
            raise RuntimeError("down")

        breaker = ToolPolicy(breaker=Breaker(failures=1, window=60, cool_down=30))
        flaky = FunctionTool(fail, name="flaky", policy=breaker)
        chat, batch = ToolRegistry(), ToolRegistry()
        chat.register_all([write_row, flaky])
        batch.register_all([write_row, flaky])

        first = asyncio.ensure_future(chat.invoke("write_row", {"row": 1}))
        await asyncio.sleep(0)  # it runs, holding the slot
        second = asyncio.ensure_future(batch.invoke("write_row", {"row": 2}))
        await asyncio.sleep(0)  # it waits for the slot the other registry's call holds
        assert runs == [1]
        release.set()
        assert [(await first).output, (await second).output] == [1, 2]
        [third, fourth] = await batch.invoke_all([("write_row", {"row": 3})] * 2)
        assert third.ok and isinstance(fourth.error, ToolUnavailableError)  # 3 a minute

        await chat.invoke("flaky", {"x": 1})
        assert chat.unavailable_tools() == batch.unavailable_tools() == ["flaky"]

        # A registry's group rule stays its own: the other registry's calls never see it.
        chat.set_policy(ToolPolicy(concurrency=5), names=["write_row"])
        chat_guard, batch_guard = (r.entry("write_row").guard for r in (chat, batch))  # type: ignore[union-attr]
        assert chat_guard is not None and batch_guard is not None
        assert chat_guard.slots is not batch_guard.slots
        assert chat_guard.rate_store is batch_guard.rate_store  # the tool's own part
    finally:
        CLOCK.reset(token)


async def test_group_policies_apply_to_tools_now_and_later_and_override_the_tools_own() -> None:
    registry = ToolRegistry()

    @registry.tool(tags=["db"], policy=ToolPolicy(concurrency=4, breaker=Breaker()))
    def read_rows() -> int:
        """Read."""
        return 1

    applied = registry.set_policy(ToolPolicy(concurrency=1, resource="db"), tag="db")
    assert [e.name for e in applied] == ["read_rows"]

    @registry.tool(tags=["db"])
    def write_rows() -> int:
        """Write."""
        return 1

    read, write = registry.entry("read_rows"), registry.entry("write_rows")
    assert read is not None and write is not None
    assert read.policy == ToolPolicy(concurrency=1, resource="db", breaker=Breaker())
    assert read.guard is not None and write.guard is not None
    assert read.guard.slots is write.guard.slots
    with pytest.raises(ToolConfigError, match="needs a group"):
        registry.set_policy(ToolPolicy(concurrency=1))
    with pytest.raises(ToolConfigError, match="same concurrency"):
        registry.register(read.tool.__class__(lambda: 1, name="third", tags=["x"]))
        registry.set_policy(ToolPolicy(concurrency=2, resource="db"), tag="x")


async def test_setting_a_groups_policy_again_replaces_it() -> None:
    # Before: each set_policy() added a rule. The earlier one's parts still applied,
    # and every set_policy() and register() went through all of them (a refresh
    # handler's 1,200 rules: 120 ms and 6 ms each).
    registry = ToolRegistry()

    @registry.tool(tags=["api"], category="mcp:search")
    def lookup(q: str) -> str:
        """Look something up."""
        return q

    registry.set_policy(ToolPolicy(breaker=Breaker()), category="mcp:search")
    once_a_minute = ToolPolicy(concurrency=1, rate=RateLimit(1, per=60.0, wait=False))
    registry.set_policy(once_a_minute, tag="api")
    for _ in range(3):  # a refresh handler, run again and again
        registry.set_policy(ToolPolicy(concurrency=3), tag="api")
    replaced = ToolPolicy(concurrency=3, breaker=Breaker())  # the other group's stays
    assert registry.entry("lookup").policy == replaced  # type: ignore[union-attr]
    calls = await registry.invoke_all([("lookup", {"q": f"q{n}"}) for n in range(3)])
    assert [call.ok for call in calls] == [True] * 3  # the old rate limit is gone

    # A replacement a tool refuses leaves the group's rule as it was, for later tools too.
    @registry.tool(tags=["api"], needs_approval=True)
    def purge(q: str) -> str:
        """Purge the index (needs approval, so no cache)."""
        return q

    with pytest.raises(ToolConfigError, match="tool 'purge' needs approval"):
        registry.set_policy(ToolPolicy(cache=ResultCache(60)), tag="api")
    later = registry.register(StaticTool("later"), tags=["api"])
    assert later.policy == registry.entry("purge").policy == ToolPolicy(concurrency=3)  # type: ignore[union-attr]

    # ToolPolicy() lifts the group's rule; the same names in another order are the group.
    registry.set_policy(ToolPolicy(), tag="api")
    assert registry.entry("lookup").policy == ToolPolicy(breaker=Breaker())  # type: ignore[union-attr]
    assert registry.entry("later").policy is None  # type: ignore[union-attr]
    registry.set_policy(ToolPolicy(concurrency=2), names=["lookup", "later"])
    registry.set_policy(ToolPolicy(concurrency=4), names=["later", "lookup"])
    assert registry.entry("later").policy == ToolPolicy(concurrency=4)  # type: ignore[union-attr]


def test_a_resources_cap_changes_when_no_other_tool_holds_it() -> None:
    registry = ToolRegistry()

    def insert_order(item: str) -> int:
        """Insert an order."""
        return 1

    # A notebook cell re-run with the cap edited: the only tool of the resource.
    for cap in (1, 2):
        registry.tool(policy=ToolPolicy(concurrency=cap, resource="db"))(insert_order)
        entry = registry.entry("insert_order")
        assert entry is not None and entry.guard is not None
        assert entry.guard.slots is not None and entry.guard.slots.limit == cap

    # Another tool of the resource holds it: the refusal names that tool.
    @registry.tool(policy=ToolPolicy(concurrency=2, resource="db"), tags=["db"])
    def cancel_order(item: str) -> int:
        """Cancel an order."""
        return 1

    with pytest.raises(
        ToolConfigError, match=r"at 3 call\(s\) at once, and tool 'cancel_order' at 2"
    ):
        registry.tool(policy=ToolPolicy(concurrency=3, resource="db"))(insert_order)
    # A group rule moves every tool of the resource at once; a batch must agree.
    registry.set_policy(
        ToolPolicy(concurrency=3, resource="db"), names=["insert_order", "cancel_order"]
    )
    guards = [registry.entry(name).guard for name in ("insert_order", "cancel_order")]  # type: ignore[union-attr]
    assert guards[0].slots is guards[1].slots and guards[0].slots.limit == 3  # type: ignore[union-attr]
    with pytest.raises(ToolConfigError, match="same concurrency"):
        registry.register_all(
            [
                registry.entry("insert_order").tool.__class__(lambda: 1, name=name, policy=policy)  # type: ignore[union-attr]
                for name, policy in (
                    ("a", ToolPolicy(concurrency=1, resource="api")),
                    ("b", ToolPolicy(concurrency=2, resource="api")),
                )
            ]
        )


async def test_permission_comes_before_every_policy() -> None:
    checker = PermissionChecker(PermissionConfig(allowed=frozenset()))
    registry = ToolRegistry(checker)

    @registry.tool(permissions=["shell"], policy=ToolPolicy(rate=RateLimit(1, per=60, wait=False)))
    def run(command: str) -> str:
        """Run a command."""
        return command

    for _ in range(3):  # refused by the permission, never reaching the bucket
        with pytest.raises(PermissionDeniedError):
            await registry.invoke("run", {"command": "ls"})
    registry.permission_checker = None
    assert (await registry.invoke("run", {"command": "ls"})).ok


async def test_every_call_has_an_idempotency_key_of_its_run_and_call() -> None:
    registry = ToolRegistry()
    keys: list[str | None] = []

    @registry.tool
    def pay(amount: int, ctx: ToolContext) -> str:
        """Pay."""
        keys.append(ctx.idempotency_key)
        return "paid"

    await registry.invoke_all([("pay", {"amount": 1}, "call_9")], ctx=ToolContext(run_id="run-7"))
    await registry.invoke_all([("pay", {"amount": 1}, "call_9")], ctx=ToolContext(session_id="s"))
    assert keys == ["run-7:call_9", "s:call_9"]


def test_policy_values_refuse_nonsense() -> None:
    for bad in (
        lambda: ToolPolicy(concurrency=0),
        lambda: ToolPolicy(resource=""),
        lambda: RateLimit(1, per=0),
        lambda: RateLimit(1, burst=0),
        lambda: Breaker(failures=0),
        lambda: Breaker(cool_down=float("inf")),
        lambda: ResultCache(ttl=-1),
        lambda: ResultCache(ttl=1e17),  # past what Redis takes as an expiry
        lambda: MemoryCacheStore(0),
    ):
        with pytest.raises(ToolConfigError):
            bad()
    with pytest.raises(ValueError):
        ToolPolicy(concurrency=True)
    # A number where a part belongs failed at the first call, as an AttributeError.
    for part, value in (("breaker", 3), ("rate", 5), ("cache", 60)):
        with pytest.raises(
            ToolConfigError, match=f"ToolPolicy\\({part}={value}\\): {part} takes a"
        ):
            ToolPolicy(**{part: value})
    with pytest.raises(ToolConfigError):
        Breaker(failures=True)
    with pytest.raises(ToolConfigError):
        RateLimit(5, burst=True)


@pytest.mark.parametrize("store", ["redis://:hunter2@cache.internal:6379/0", {}, 5])
def test_a_store_of_the_wrong_kind_is_refused_when_the_policy_is_made(store: Any) -> None:
    # Before: accepted; every rate-limited call was then refused ("its rate limit
    # could not be checked: AttributeError"), and the cache stayed off, with a
    # warning per call.
    for kind, make in (
        ("RateLimit", lambda: RateLimit(5, store=store)),
        ("ResultCache", lambda: ResultCache(60, store=store)),
    ):
        with pytest.raises(ToolConfigError) as info:
            make()
        message = str(info.value)
        protocol = "RateStore" if kind == "RateLimit" else "CacheStore"
        assert message.startswith(f"{kind}(store=...): store must be a {protocol}, such as ")
        assert message.split("; got ")[1].startswith(type(store).__name__)
        assert "hunter2" not in message  # a Redis URL may carry a password
    assert RateLimit(5, store=MemoryRateStore()).store is not None
    assert ResultCache(60, store=MemoryCacheStore()).store is not None


async def test_a_cache_keeps_its_results_in_the_store_it_is_given_while_that_is_empty() -> None:
    # An empty MemoryCacheStore is false (it has a length): `store or default` put the
    # results in the default store instead, so the given one stayed empty for good.
    mine = MemoryCacheStore(max_entries=5)
    registry = ToolRegistry()
    runs: list[int] = []

    @registry.tool(policy=ToolPolicy(cache=ResultCache(60, store=mine)))
    def square(x: int) -> int:
        """Square a number."""
        runs.append(x)
        return x * x

    first = await registry.invoke("square", {"x": 3})
    again = await registry.invoke("square", {"x": 3})
    assert (first.output, again.output, again.cached, runs) == (9, 9, True, [3])
    assert len(mine) == 1


@pytest.mark.parametrize("wait", ["no", 0, None])
def test_a_rate_limits_wait_must_be_a_bool(wait: Any) -> None:
    # "no" is truthy: the limit waited, the opposite of what was meant.
    with pytest.raises(ToolConfigError, match=r"RateLimit\(wait=.*\): wait must be True or False"):
        RateLimit(5, wait=wait)


async def test_a_tool_and_a_resource_of_one_name_have_two_rate_buckets() -> None:
    registry = ToolRegistry()
    once = RateLimit(1, per=60, wait=False)

    @registry.tool(policy=ToolPolicy(rate=once))
    def github(q: str) -> str:
        """The github tool."""
        return q

    @registry.tool(policy=ToolPolicy(resource="github", rate=once))
    def other_api(q: str) -> str:
        """Another API, whose resource happens to be called github."""
        return q

    results = await registry.invoke_all([("github", {"q": "a"}), ("other_api", {"q": "b"})])
    assert [r.error for r in results] == [None, None]


def test_a_permission_checkers_rules_cannot_be_swapped_under_its_memo() -> None:
    checker = PermissionChecker(PermissionConfig())
    assert checker.is_allowed(["write"]) is False
    with pytest.raises(ToolConfigError, match=r"PermissionChecker\.config is read-only"):
        checker.config = PermissionConfig(allowed=["write"], denied=[])
    assert checker.is_allowed(["write"]) is False


class BrokenCacheStore:
    """A cache store whose server refuses reads, writes, or both."""

    def __init__(self, *, reads: bool, writes: bool) -> None:
        self.reads, self.writes = reads, writes

    async def get(self, key: str) -> str | None:
        if not self.reads:
            raise ConnectionError("cache server down")
        return None

    async def set(self, key: str, value: str, ttl: float) -> None:
        if not self.writes:
            raise RuntimeError(f"OOM: cannot store {value}")


async def test_a_cache_that_fails_never_fails_the_call(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "agcore_tools.policies")
    runs: list[str] = []
    for reads, writes in ((True, False), (False, True), (False, False)):
        registry = ToolRegistry()
        store = BrokenCacheStore(reads=reads, writes=writes)

        @registry.tool(policy=ToolPolicy(cache=ResultCache(60, store=store), breaker=Breaker(2)))
        async def quote(sku: str) -> dict[str, Any]:
            """Price quote."""
            runs.append(sku)
            return {"sku": sku, "price": 10}

        results = await registry.invoke_all(
            [("quote", {"sku": f"secret-sku-{i}"}) for i in range(3)]
        )
        # The tool ran and succeeded: so did each call, and the breaker heard nothing.
        assert [(r.ok, r.may_have_run, r.cached) for r in results] == [(True, True, False)] * 3
        assert results[2].output == {"sku": "secret-sku-2", "price": 10}
        assert registry.unavailable_tools() == []
    assert len(runs) == 9
    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # One warning a call; a read that failed is not followed by a write.
    assert len(failed) == 9
    assert sum("could not be read; the call runs uncached" in m for m in failed) == 6
    assert sum("could not be written; the result is returned" in m for m in failed) == 3
    # Neither the arguments nor the result reach the log: a store's own exception may
    # quote them, so only its class is named.
    assert not [m for m in failed if "secret-sku" in m]
    assert all(m.endswith((": ConnectionError", ": RuntimeError")) for m in failed)


class LingeringCacheStore:
    """A cache store whose client, cancelled, still waits ``grace`` seconds for its
    server's reply before it gives up (which never comes)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.reads = 0

    async def get(self, key: str) -> str | None:
        self.reads += 1
        try:
            await asyncio.get_running_loop().create_future()  # no reply, ever
        except asyncio.CancelledError:
            await asyncio.sleep(self.grace)  # cancelled again meanwhile: gone at once
            raise
        return None  # pragma: no cover - never answered

    async def set(self, key: str, value: str, ttl: float) -> None:
        raise AssertionError("no write follows a read that never ended")


async def test_a_call_out_of_time_while_its_cache_is_read_never_ran() -> None:
    # The store outlives its bound (half the time left): the call's timeout ends while
    # the cache is read, before the tool starts. Neither the model nor the breaker may
    # take that for a run: may_have_run is False, and the breaker hears nothing.
    runs: list[str] = []
    store = LingeringCacheStore(grace=1.0)
    registry = ToolRegistry()
    cache = ResultCache(60, store=store)

    @registry.tool(policy=ToolPolicy(cache=cache, breaker=Breaker(failures=1)))
    async def quote(sku: str) -> str:
        """Price quote."""
        runs.append(sku)
        return "10"

    @registry.tool(timeout=0.2, policy=ToolPolicy(cache=cache, breaker=Breaker(failures=1)))
    async def stock(sku: str) -> str:
        """Stock level."""
        runs.append(sku)
        return "3"

    (late,) = await registry.invoke_all([("quote", {"sku": "a"})], timeout=0.2)
    own = await registry.invoke("stock", {"sku": "b"})  # its own timeout, no caller's
    for result in (late, own):
        assert isinstance(result.error, ToolTimeoutError), result.error
        assert result.may_have_run is False and "it never started" in str(result.error)
    assert runs == [] and store.reads == 2
    assert registry.unavailable_tools() == []


async def test_the_memory_stores_keep_their_bounds() -> None:
    store = MemoryCacheStore(max_entries=2)
    for key in "abc":
        await store.set(key, key, ttl=60)
    assert len(store) == 2 and await store.get("a") is None and await store.get("c") == "c"
    rates = MemoryRateStore()
    limit = RateLimit(1, per=1.0)
    assert await rates.reserve("k", limit, 0.0) == 0.0
    wait = await rates.reserve("k", limit, 5.0)
    assert wait is not None and 0.9 < wait <= 1.0
    assert await rates.reserve("k", limit, 1.5) is None  # would wait ~2 s: nothing taken


async def test_the_memory_cache_drops_expired_results_and_keeps_to_its_bytes() -> None:
    # Before: an expired result stayed until its own key was read or 1,024 newer ones
    # pushed it out, and nothing bounded their size (1,024 pages of 200 KB: 200 MB).
    moment = [0.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        store = MemoryCacheStore()
        for page in range(200):
            await store.set(f"page:{page}", "x" * 1000, ttl=1.0)
        moment[0] = 2.0  # every page expired
        await store.set("fresh", "y", ttl=1.0)
        assert len(store) == 1  # the next result stored dropped them all

        # Expired results behind a live one (a longer TTL) go within as many results
        # stored as the store holds.
        await store.set("rates", "r" * 1000, ttl=3600.0)
        for page in range(200):
            await store.set(f"page:{page}", "x" * 1000, ttl=1.0)
        moment[0] = 4.0
        held = len(store)
        for more in range(held):
            await store.set(f"more:{more}", "z", ttl=60.0)
        assert len(store) == 1 + held  # rates and the new ones
        assert await store.get("rates") == "r" * 1000

        small = MemoryCacheStore(max_bytes=10_000)
        for page in range(20):
            await small.set(f"page:{page}", "x" * 1000, ttl=60.0)
        kept = [page for page in range(20) if await small.get(f"page:{page}")]
        assert kept == list(range(20 - len(kept), 20)) and 5 <= len(kept) < 10  # newest
        await small.set("huge", "h" * 20_000, ttl=60.0)  # bigger than the whole budget
        assert await small.get("huge") is None and len(small) == len(kept)
        with pytest.raises(ToolConfigError, match=r"MemoryCacheStore\(max_bytes=0\)"):
            MemoryCacheStore(max_bytes=0)
    finally:
        CLOCK.reset(token)


_MANY_CACHED_TOOLS = """
import asyncio, gc, json, tracemalloc
from agcore_tools import ResultCache, ToolPolicy, ToolRegistry

SIZE = 4 * 1024 * 1024 - 200  # a result's JSON text: just under 4 MiB, 16 fit in 64 MiB
registry = ToolRegistry()

def add(i):
    @registry.tool(name=f"page_{i}", policy=ToolPolicy(cache=ResultCache(ttl=600)))
    async def page(n: int) -> str:  # on the loop: no worker thread keeps its result
        "A page."
        return f"{i}:{n}:" + "x" * SIZE

async def cached(i, n):
    return (await registry.invoke(f"page_{i}", {"n": n})).cached

async def main():
    for i in range(6):
        add(i)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    calls = [(i, n) for n in range(3) for i in range(6)]
    for i, n in calls[:16]:  # the bound, full
        assert not await cached(i, n)
    assert await cached(0, 0)  # read: now the most recently used
    for i, n in calls[16:]:  # two more: the two least recently used go
        assert not await cached(i, n)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    kept = [await cached(i, n) for i, n in [(5, 2), (0, 0), (1, 0), (2, 0)]]
    print(json.dumps({"held": held, "kept": kept}))

asyncio.run(main())
"""


def test_the_in_process_cache_is_bounded_for_all_tools_together() -> None:
    # Each tool with a cache of its own policy had a store of its own, bounded at
    # 64 MiB: 50 such tools could hold 3.2 GB (here, 6 tools held 72 MiB). One store
    # now holds every tool's results, the least recently used dropped first, across
    # tools. In a process of its own: the store is the process's.
    done = subprocess.run(
        [sys.executable, "-c", _MANY_CACHED_TOOLS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["held"] <= 65 * 1024 * 1024, found["held"] / 2**20  # 64 MiB and the keys
    # The newest and the one read stayed; the two least recently used (tools 1, 2) went.
    assert found["kept"] == [True, True, False, False]


async def test_tools_sharing_the_in_process_cache_keep_their_results_and_ttls_apart() -> None:
    from agcore_tools._policy_book import default_cache_store

    moment = [0.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        runs: list[str] = []
        cell = """
@tool(name="price", policy=ToolPolicy(cache=ResultCache(ttl)), registry=registry)
def price(sku: str) -> str:
    '''A price.'''
    runs.append(label)
    return f"{label} {sku}"
"""

        def run_cell(label: str, ttl: float, registry: ToolRegistry) -> None:
            names = {"label": label, "ttl": ttl, "registry": registry, "runs": runs}
            names.update(tool=tool, ToolPolicy=ToolPolicy, ResultCache=ResultCache)
            exec(compile(cell, "<ipython-input-5>", "exec"), names)

        # Two tools of one name (one per registry) and a registry's group rule: the
        # same name and arguments, three scopes in the one store.
        chat, batch, grouped = ToolRegistry(), ToolRegistry(), ToolRegistry()
        run_cell("chat", 30, chat)
        run_cell("batch", 100, batch)
        grouped.set_policy(ToolPolicy(cache=ResultCache(50)), tag="api")
        grouped.register(StaticTool("price", "group"), tags=["api"])
        registries = [chat, batch, grouped]
        first = [await r.invoke("price", {"sku": "A"}) for r in registries]
        again = [await r.invoke("price", {"sku": "A"}) for r in registries]
        assert runs == ["chat", "batch"]
        assert [r.output for r in first] == [r.output for r in again]
        assert [r.output for r in again] == ["chat A", "batch A", "group"]
        assert [r.cached for r in again] == [True, True, True]

        moment[0] = 40.0  # past chat's TTL, within the others'
        results = [await r.invoke("price", {"sku": "A"}) for r in registries]
        assert [r.cached for r in results] == [False, True, True]
        moment[0] = 60.0  # past the group rule's; chat's result of 40.0 stays
        results = [await r.invoke("price", {"sku": "A"}) for r in registries]
        assert [r.cached for r in results] == [True, True, False]

        # A tool redefined leaves nothing of the old one's in the store.
        store = default_cache_store()
        before = len(store)
        run_cell("chat, fixed", 30, chat)  # the cell edited and run again
        assert len(store) == before - 1
        assert (await chat.invoke("price", {"sku": "A"})).output == "chat, fixed A"
    finally:
        CLOCK.reset(token)


def test_threads_sharing_the_in_process_cache_keep_its_count_of_bytes() -> None:
    from agcore_tools._policy_book import default_cache_store

    registry = ToolRegistry()
    for i in range(4):

        @registry.tool(name=f"echo_{i}", policy=ToolPolicy(cache=ResultCache(60)))
        def echo(n: int) -> str:
            """Echo a number, padded."""
            return str(n) * 1000

    def work(offset: int) -> None:
        for n in range(200):
            registry.invoke_sync(f"echo_{(n + offset) % 4}", {"n": n % 50})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    store = default_cache_store()
    items = list(store._items.values())
    assert store._bytes == sum(item[2] for item in items) <= store.max_bytes
    assert len(items) <= store.max_entries


async def test_a_registry_keeps_no_policy_state_for_the_tools_that_came_and_went() -> None:
    # Before: the group rule's cap and rate bucket of every name that ever had it
    # stayed for good (an MCP server's changing tool list: 50,000 names, +64 MB).
    moment = [0.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        quota = ToolPolicy(concurrency=1, rate=RateLimit(100, per=1.0))
        registry.set_policy(quota, category="mcp:docs")
        caps = []
        buckets = MemoryRateStore()
        for version in range(300):
            name = f"doc_v{version}"
            registry.register(StaticTool(name, result="x"), category="mcp:docs")
            guard = registry.entry(name).guard  # type: ignore[union-attr]
            assert guard is not None and isinstance(guard.rate_store, MemoryRateStore)
            caps.append(weakref.ref(guard.slots))
            buckets = guard.rate_store
            assert (await registry.invoke(name, {})).ok
            registry.unregister(name)
            moment[0] += 1.0  # its bucket is full again
        del guard
        gc.collect()
        assert [cap for cap in caps if cap() is not None] == []
        assert len(buckets) <= 128

        # A cap a running call holds stays: the tool registered again counts that call.
        started, release = asyncio.Event(), asyncio.Event()

        @registry.tool(category="mcp:docs")
        async def build() -> str:
            """Build."""
            started.set()
            await release.wait()
            return "built"

        held = registry.entry("build").guard.slots  # type: ignore[union-attr]
        running = asyncio.ensure_future(registry.invoke("build", {}))
        await asyncio.wait_for(started.wait(), 10)
        registry.unregister("build")
        gc.collect()
        registry.register(FunctionTool(build.func, name="build"), category="mcp:docs")
        assert registry.entry("build").guard.slots is held  # type: ignore[union-attr]
        release.set()
        assert (await running).output == "built"
    finally:
        CLOCK.reset(token)


def test_the_memory_stores_hold_across_threads() -> None:
    # One registry serves every thread that uses it. Deterministic: a first thread is
    # paused inside a reservation (and a cache read), between reading the entry and
    # writing it, while a second thread does the same on the same key. Without a lock
    # the second ends in microseconds, in the middle of the first: both take the only
    # turn, and both delete the expired result (a KeyError). With one it waits for the
    # first, whose bounded wait for it runs out (1 s) before it goes on.
    threads: list[threading.Thread] = []

    def meanwhile(work: Callable[[], Any], out: list[Any]) -> Callable[[], None]:
        """Run ``work`` in a thread once, waiting at most 1 s for it to end."""
        pending = [threading.Thread(target=lambda: out.append(work()))]

        def pause() -> None:
            if pending:
                thread = pending.pop()
                threads.append(thread)
                thread.start()
                thread.join(1.0)

        return pause

    def finished() -> bool:
        for thread in threads:
            thread.join(10.0)
        return not any(thread.is_alive() for thread in threads)

    rates = MemoryRateStore()
    turns: list[float | None] = []
    second = meanwhile(lambda: rates.reserve_now("k", RateLimit(1, per=60.0), 0.0), turns)

    class PausingLimit(RateLimit):
        @property
        def capacity(self) -> int:  # read between the bucket's read and its write
            second()
            return 1

    turns.append(rates.reserve_now("k", PausingLimit(1, per=60.0), 0.0))
    assert finished()
    assert sorted(turns, key=lambda wait: wait is None) == [0.0, None]

    cache = MemoryCacheStore()
    reads: list[str | None] = []

    def read_at(moment: float) -> str | None:
        token = CLOCK.set(lambda: moment)
        try:
            return asyncio.run(cache.get("k"))
        finally:
            CLOCK.reset(token)

    other_read = meanwhile(lambda: read_at(100.0), reads)

    def pausing_clock() -> float:  # read between the entry's read and its removal
        other_read()
        return 100.0

    token = CLOCK.set(lambda: 0.0)
    try:
        asyncio.run(cache.set("k", '"v"', ttl=1.0))  # expired from 1.0 on
    finally:
        CLOCK.reset(token)
    token = CLOCK.set(pausing_clock)
    try:
        reads.append(asyncio.run(cache.get("k")))
    finally:
        CLOCK.reset(token)
    assert finished()
    assert reads == [None, None] and len(cache) == 0


def test_a_refused_group_policy_changes_no_tool_and_is_not_kept() -> None:
    registry = ToolRegistry()

    @registry.tool(tags=["db"])
    def read(x: int) -> int:
        """Read."""
        return x

    @registry.tool(tags=["db"], needs_approval=True)
    def wipe(x: int) -> int:
        """Wipe (needs approval, so no cache)."""
        return x

    with pytest.raises(ToolConfigError, match="tool 'wipe' needs approval"):
        registry.set_policy(ToolPolicy(cache=ResultCache(60), concurrency=1), tag="db")
    assert registry.entry("read").policy is None  # type: ignore[union-attr]

    @registry.tool(tags=["db"], needs_approval=True)  # the refused rule is not kept
    def drop(x: int) -> int:
        """Drop."""
        return x

    assert registry.entry("drop").policy is None  # type: ignore[union-attr]


async def test_a_group_policy_keeps_an_open_breaker_open() -> None:
    # set_policy() made new guards, and an open breaker (60 s of cool-down left) closed.
    registry = ToolRegistry()

    @registry.tool(
        tags=["payments"], policy=ToolPolicy(breaker=Breaker(2, window=60, cool_down=60))
    )
    def pay(x: int) -> int:
        """Pay."""
        raise RuntimeError("provider down")

    await registry.invoke_all([("pay", {"x": 1}), ("pay", {"x": 2})])
    assert registry.unavailable_tools() == ["pay"]
    registry.set_policy(ToolPolicy(concurrency=4), tag="payments")
    assert registry.unavailable_tools() == ["pay"]
    [refused] = await registry.invoke_all([("pay", {"x": 3})])
    assert isinstance(refused.error, ToolUnavailableError)


async def test_only_the_probe_decides_a_half_open_breaker() -> None:
    # A cached answer runs nothing, and a call that started before the breaker opened
    # says nothing about the tool now: neither may close it while the service is down.
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        up = [True]
        gates = {"stale": asyncio.Event(), "probe": asyncio.Event()}

        @registry.tool(
            policy=ToolPolicy(cache=ResultCache(3600), breaker=Breaker(2, window=60, cool_down=10))
        )
        async def lookup(k: int, gate: str = "", ok: bool = False) -> str:
            """Look a key up."""
            if gate:
                await gates[gate].wait()
            if not (up[0] or ok):
                raise RuntimeError("service down")
            return f"v{k}"

        assert (await registry.invoke("lookup", {"k": 1})).output == "v1"  # cached now
        stale = asyncio.ensure_future(
            registry.invoke("lookup", {"k": 9, "gate": "stale", "ok": True})
        )
        await asyncio.sleep(0)
        up[0] = False
        await registry.invoke_all([("lookup", {"k": 2}), ("lookup", {"k": 3})])
        assert registry.unavailable_tools() == ["lookup"]

        moment[0] += 10.0  # half-open: the next call that runs is the probe
        cached = await registry.invoke("lookup", {"k": 1})
        assert cached.cached and cached.output == "v1"
        probe = asyncio.ensure_future(registry.invoke("lookup", {"k": 4, "gate": "probe"}))
        await asyncio.sleep(0)
        gates["stale"].set()  # the stale call succeeds while the probe still runs ...
        assert (await stale).ok
        [during] = await registry.invoke_all([("lookup", {"k": 5})])
        assert isinstance(during.error, ToolUnavailableError)  # ... the probe still holds
        gates["probe"].set()
        assert not (await probe).ok
        assert registry.unavailable_tools() == ["lookup"]  # ... and the probe decided
    finally:
        CLOCK.reset(token)


async def test_a_timeout_attribute_that_is_no_number_of_seconds_is_left_alone() -> None:
    # BaseTool.timeout bounds a guarded call's wait; a subclass whose own `timeout` is
    # something else (its HTTP client's timedelta) must still run, not crash the call.
    class Fetch(BaseTool):
        name = "fetch"
        policy = ToolPolicy(concurrency=2)

        def __init__(self) -> None:
            self.timeout = timedelta(seconds=10)  # type: ignore[assignment]

        async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
            return "ok"

    registry = ToolRegistry()
    registry.register(Fetch())
    invocation = await registry.invoke("fetch", {})
    assert (invocation.output, invocation.error) == ("ok", None)


def test_a_method_tools_own_state_is_its_instances_and_goes_with_it() -> None:
    policy = ToolPolicy(rate=RateLimit(1, per=60.0, wait=False))

    class Texts:
        @tool(policy=policy)
        def send(self, to: str) -> str:
            """Send a text message."""
            return to

    class Fixed:  # an instance that cannot be weakly referenced
        __slots__ = ()

        @tool(policy=policy)
        def send(self, to: str) -> str:
            """Send a text message."""
            return to

    team, other = Texts(), Texts()
    state = own_state(team.send)
    assert own_state(team.send) is state and own_state(other.send) is not state
    assert len(_BOUND[Texts.send]) == 2
    del team, state
    gc.collect()
    assert len(_BOUND[Texts.send]) == 1  # dropped with its instance
    # Without a weak reference to the instance, the state lives with the copy.
    fixed = Fixed()
    copy = fixed.send
    assert own_state(fixed.send) is own_state(copy) and Fixed.send not in _BOUND


class _SlowToGiveBack:
    """A rate store of an app's own whose ``give_back`` answers only once let."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.answer = asyncio.Event()

    async def reserve(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        return 0.0

    async def give_back(self, key: str, limit: RateLimit) -> None:
        self.entered.set()
        await self.answer.wait()


async def test_a_probe_cancelled_twice_as_it_gives_its_turn_back_frees_the_breaker() -> None:
    # A half-open breaker's probe, cancelled while it waited for a slot, gives its rate
    # turn back; cancelled again meanwhile (a Ctrl-C after a timeout), it never told the
    # breaker, which kept waiting for that probe: the tool was refused for good.
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        store, hold_on = _SlowToGiveBack(), asyncio.Event()
        registry = ToolRegistry()
        failing = [True]
        rate = RateLimit(100, store=store)
        breaker = Breaker(failures=1, window=60.0, cool_down=10.0)

        @registry.tool(policy=ToolPolicy(rate=rate, breaker=breaker, concurrency=1, resource="pay"))
        async def charge(cents: int) -> str:
            """Charge a card."""
            if failing[0]:
                raise RuntimeError("payment API down")
            return "charged"

        @registry.tool(policy=ToolPolicy(concurrency=1, resource="pay"))
        async def settle() -> str:
            """Settle the day's charges."""
            await hold_on.wait()
            return "settled"

        await registry.invoke("charge", {"cents": 5})
        assert registry.unavailable_tools() == ["charge"]
        settling = asyncio.ensure_future(registry.invoke("settle", {}))
        slots = registry.entry("charge").guard.slots
        for _ in range(100):
            if slots.running:
                break
            await asyncio.sleep(0)
        moment[0] += 11.0  # past the cool-down: the next call is the probe
        probe = asyncio.ensure_future(registry.invoke("charge", {"cents": 5}))
        for _ in range(100):
            if slots.waiters:
                break
            await asyncio.sleep(0)
        assert len(slots.waiters) == 1
        probe.cancel()
        await asyncio.wait_for(store.entered.wait(), 5.0)
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
        hold_on.set()
        assert (await settling).output == "settled"
        failing[0] = False
        again = await registry.invoke("charge", {"cents": 5})
        assert again.output == "charged" and registry.unavailable_tools() == []
    finally:
        CLOCK.reset(token)


async def test_a_probe_with_bad_arguments_decides_nothing() -> None:
    # It closed the breaker (logging that the probe succeeded): the failing tool was
    # offered again, and needed its full count of failures to open once more.
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        runs: list[int] = []

        @registry.tool(policy=ToolPolicy(breaker=Breaker(failures=2, window=60, cool_down=10)))
        def charge(cents: int) -> str:
            """Charge a card."""
            runs.append(cents)
            raise RuntimeError("payment API down")

        for _ in range(2):
            await registry.invoke("charge", {"cents": 1})
        assert registry.unavailable_tools() == ["charge"]
        moment[0] += 11.0  # past the cool-down: the next call is the probe
        bad = await registry.invoke("charge", {"cents": "lots"})
        assert isinstance(bad.error, InvalidArgumentsError) and runs == [1, 1]
        probe = await registry.invoke("charge", {"cents": 2})  # the probe, still
        assert probe.may_have_run and runs == [1, 1, 2]
        assert registry.unavailable_tools() == ["charge"]  # its failure opened it again
    finally:
        CLOCK.reset(token)


class _DownStore:
    """A rate store of an app's own whose client fails giving a turn back, quoting its
    URL with the password, as some clients' errors do."""

    def __init__(self) -> None:
        self.reserved = asyncio.Event()

    async def reserve(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        self.reserved.set()
        return 30.0

    async def give_back(self, key: str, limit: RateLimit) -> None:
        raise ConnectionError("cannot reach redis://:hunter2@cache.internal:6379/0")


async def test_a_store_failing_to_take_a_turn_back_is_logged_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The warning quoted the store's exception, which may hold a password: only its
    # class is logged, as for a store that fails to reserve.
    caplog.set_level(logging.WARNING, "agcore_tools.policies")
    store = _DownStore()
    registry = ToolRegistry()

    @registry.tool(policy=ToolPolicy(rate=RateLimit(1, per=60.0, store=store)))
    def ping() -> str:
        """Ping."""
        return "pong"

    waiting = asyncio.ensure_future(registry.invoke("ping", {}))
    await asyncio.wait_for(store.reserved.wait(), 5.0)  # it now sleeps its 30 s
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    warned = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.policies"]
    assert warned == [
        "tool 'ping': could not give back the rate turn of a call that never started: "
        "ConnectionError"
    ]


class _Fetch(BaseTool):
    """A tool whose HTTP client gave up on its own, long before the tool's timeout."""

    name = "fetch"
    description = "Fetch a page."
    parameters = {"type": "object", "properties": {"url": {"type": "string"}}}  # noqa: RUF012
    timeout = 30.0
    policy = ToolPolicy(concurrency=2)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        raise TimeoutError("the upstream read timed out after 2 s")


async def test_a_guarded_tool_raising_its_own_timeout_error_failed_not_timed_out() -> None:
    # It was reported as its own timeout running out ("timed out after 30 s; it may have
    # run in part"), at once, unlike the same tool without a policy.
    registry = ToolRegistry()
    registry.register(_Fetch())
    result = await registry.invoke("fetch", {"url": "https://example.com"})
    assert type(result.error) is ToolExecutionError
    assert str(result.error) == (
        "tool 'fetch' failed: TimeoutError: the upstream read timed out after 2 s"
    )
    assert isinstance(result.error.__cause__, TimeoutError)


@pytest.mark.parametrize(
    ("value", "fault"),
    [
        pytest.param('{"status": "ship', "JSONDecodeError", id="not-json"),
        pytest.param("[" * 100_000 + "]" * 100_000, "RecursionError", id="nested-too-deep"),
    ],
)
async def test_a_cached_value_that_cannot_be_read_is_a_miss_not_a_failure(
    value: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A value the cache never wrote (another app's under the key, a store that mangles
    # it) failed the call with a JSONDecodeError, or a RecursionError for JSON nested too
    # deep to decode; a store that cannot be read fails no call: the tool runs, and its
    # result is written over the value.
    caplog.set_level(logging.WARNING, "agcore_tools.policies")
    store = MemoryCacheStore()
    registry = ToolRegistry()
    runs: list[str] = []

    @registry.tool(policy=ToolPolicy(cache=ResultCache(60, store=store)))
    def lookup(order_id: str) -> str:
        """Look an order up."""
        runs.append(order_id)
        return "shipped"

    key = registry.entry("lookup").guard.cache_key({"order_id": "A1"})  # type: ignore[union-attr]
    assert key is not None
    await store.set(key, value, 60.0)
    first = await registry.invoke("lookup", {"order_id": "A1"})
    assert first.ok and first.output == "shipped" and not first.cached and runs == ["A1"]
    again = await registry.invoke("lookup", {"order_id": "A1"})
    assert again.cached and again.output == "shipped" and runs == ["A1"]
    warned = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.policies"]
    assert warned == [
        f"tool 'lookup': its result cache could not be read; the call runs uncached: {fault}"
    ]
