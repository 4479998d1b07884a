"""Tool policies in the loop, against the scripted server: a breaker takes a failing
tool out of the next request and puts it back after a successful probe, with events;
200 concurrent loops sharing a registry never run more calls at once than the cap."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import pytest

from agcore_tools import (
    Breaker,
    CycleConfig,
    FunctionTool,
    LlmCycle,
    RateLimit,
    ToolBreakerChanged,
    ToolExecutionCompleted,
    ToolPolicy,
    ToolRegistry,
    ToolSearch,
    tool,
)
from agcore_tools._clock import CLOCK
from agcore_tools.testing import CapturedRequest, ScriptedChatServer

from .._policy_tools import flaky_charge
from .conftest import S, tool_messages


def offered(request: CapturedRequest) -> list[str]:
    return [tool["function"]["name"] for tool in request.json.get("tools", [])]


def _payments(registry: ToolRegistry) -> list[bool]:
    """:func:`flaky_charge`, then a ``status`` tool; the charge's runs."""
    runs = flaky_charge(registry)

    @registry.tool
    def status() -> str:
        """The payment service's status page."""
        return "degraded"

    return runs


async def test_a_failing_tool_leaves_the_request_until_its_probe_succeeds(
    serve: Callable[..., ScriptedChatServer], make_cycle: Callable[..., Any]
) -> None:
    moment = [100.0]
    token = CLOCK.set(lambda: moment[0])  # the loop's tasks inherit the test's clock
    try:
        registry = ToolRegistry()
        runs = _payments(registry)

        def cool_down_ends(_: CapturedRequest) -> Any:
            moment[0] += 30.0  # before the loop runs this reply's call
            return S.reply_tool_calls([("status", {}, "c_status")])

        server = serve(
            S.reply_tool_calls([("charge", {"ok": False}, f"c{i}") for i in range(5)]),
            S.reply_tool_calls([("charge", {"ok": True}, "c_refused")]),  # not offered
            cool_down_ends,
            S.reply_tool_calls([("charge", {"ok": True}, "c_probe")]),
            S.reply_text("Charged."),
        )
        cycle = make_cycle(server)
        events: list[Any] = []
        async with cycle.submit_stream_with_tools("Charge my card.", registry) as stream:
            async for event in stream:
                if isinstance(event, (ToolBreakerChanged, ToolExecutionCompleted)):
                    events.append(event)
    finally:
        CLOCK.reset(token)

    assert [offered(r) for r in server.requests] == [
        ["charge", "status"],
        ["status"],  # open: left out
        ["status"],
        ["charge", "status"],  # the cool-down is over: offered for a probe
        ["charge", "status"],  # closed
    ]
    assert runs == [False] * 5 + [True]  # the refused call never ran
    breaker_events = [e for e in events if isinstance(e, ToolBreakerChanged)]
    assert breaker_events == [
        ToolBreakerChanged("charge", "c4", "open", 30.0),
        ToolBreakerChanged("charge", "c_probe", "closed"),
    ]
    refused = next(e for e in events if getattr(e, "call_id", None) == "c_refused")
    assert "circuit breaker" in str(refused.error)
    tool_text = {
        m["tool_call_id"]: m["content"]
        for m in server.requests[2].json["messages"]
        if m["role"] == "tool"
    }
    assert tool_text["c_refused"].startswith("Error: tool 'charge' is unavailable")


@pytest.mark.parametrize(
    "select", [["charge", "status"], ToolSearch(core=["charge", "status"])], ids=["names", "search"]
)
async def test_a_tool_whose_breaker_is_open_when_a_selecting_run_starts_comes_back(
    serve: Callable[..., ScriptedChatServer], make_cycle: Callable[..., Any], select: Any
) -> None:
    # The run's tools were taken with the open breakers left out: a call to one was an
    # unknown tool, which stopped the loop, and it never came back after the cool-down.
    moment = [100.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        runs = _payments(registry)

        for _ in range(5):
            await registry.invoke("charge", {"ok": False})
        assert registry.unavailable_tools() == ["charge"]

        def cool_down_ends(_: CapturedRequest) -> Any:
            moment[0] += 30.0
            return S.reply_tool_calls([("status", {}, "c_status")])

        server = serve(
            S.reply_tool_calls([("charge", {"ok": True}, "c_refused")]),
            cool_down_ends,
            S.reply_tool_calls([("charge", {"ok": True}, "c_probe")]),
            S.reply_text("Charged."),
        )
        cycle = make_cycle(server)
        response = await cycle.submit_with_tools("Charge my card.", registry, select=select)
    finally:
        CLOCK.reset(token)

    assert response.text == "Charged."
    search = ["search_tools"] if isinstance(select, ToolSearch) else []
    assert [offered(r) for r in server.requests] == [
        ["status", *search],
        ["status", *search],
        ["charge", "status", *search],  # the cool-down is over: offered for a probe
        ["charge", "status", *search],
    ]
    answers = tool_messages(cycle.messages)
    assert answers["c_refused"].startswith("Error: tool 'charge' is unavailable")
    assert answers["c_probe"] == "charged"
    assert runs == [False] * 5 + [True]


async def test_200_concurrent_loops_sharing_a_registry_never_exceed_the_cap(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    registry = ToolRegistry()
    running = [0, 0]  # now, peak: as the tool itself counts

    @registry.tool(policy=ToolPolicy(concurrency=3, resource="orders-db"))
    async def lookup(order: int) -> str:
        """Look an order up."""
        running[0] += 1
        running[1] = max(running[1], running[0])
        try:
            await asyncio.sleep(0.002)
        finally:
            running[0] -= 1
        return f"order {order}: shipped"

    def answer(request: CapturedRequest) -> Any:
        messages = request.json["messages"]
        if messages[-1]["role"] == "tool":
            return S.reply_text(messages[-1]["content"])
        order = int(messages[-1]["content"].split()[-1])
        return S.reply_tool_calls([("lookup", {"order": order}, f"call_{order}")])

    loops = 200
    server = serve(*[answer] * (2 * loops))
    client = server.client(timeout=60.0)  # one connection pool for every loop
    cycles = [LlmCycle(CycleConfig("test-model"), client=client) for _ in range(loops)]
    try:
        responses = await asyncio.gather(
            *(c.submit_with_tools(f"Where is order {n}", registry) for n, c in enumerate(cycles))
        )
    finally:
        await asyncio.wait_for(client.close(), 5)
    assert [r.text for r in responses] == [f"order {n}: shipped" for n in range(loops)]
    assert running[1] == 3
    assert registry.entry("lookup").stats.calls == loops  # type: ignore[union-attr]
    assert running[0] == 0


async def test_a_tools_own_policy_holds_across_runs_given_the_tool_alone(
    serve: Callable[..., ScriptedChatServer], make_cycle: Callable[..., Any]
) -> None:
    # submit_with_tools(prompt, [tool]) puts the tool in a fresh registry each run: its
    # rate limit started over every run (three runs sent 6 SMS under "2 a minute").
    sent: list[str] = []

    def send(to: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    send_sms = FunctionTool(
        send, name="send_sms", policy=ToolPolicy(rate=RateLimit(2, per=60.0, wait=False))
    )

    moment = [500.0]
    token = CLOCK.set(lambda: moment[0])  # no turn comes back while the test runs
    try:
        script: list[Any] = []
        for run in range(3):
            calls = [("send_sms", {"to": f"+1555{run}{i}"}, f"c{run}{i}") for i in range(2)]
            script += [S.reply_tool_calls(calls), S.reply_text("done")]
        cycle = make_cycle(serve(*script))
        for run in range(3):
            await cycle.submit_with_tools(f"text the team ({run})", [send_sms])
    finally:
        CLOCK.reset(token)
    # The first run's two calls run at once (sync tools, in threads): in either order.
    assert sorted(sent) == ["+155500", "+155501"]


async def test_a_method_tools_own_policy_holds_across_runs_given_it_alone(
    serve: Callable[..., ScriptedChatServer], make_cycle: Callable[..., Any]
) -> None:
    # `texts.send` is a new bound copy at each lookup, and the state lived with the copy
    # that made it: dropped after each run, so the limit started over as it did above.
    sent: list[str] = []

    class Texts:
        def __init__(self, line: str) -> None:
            self.line = line

        @tool(name="send_sms", policy=ToolPolicy(rate=RateLimit(1, per=60.0, wait=False)))
        def send(self, to: str) -> str:
            """Send a text message."""
            sent.append(f"{self.line}:{to}")
            return "sent"

    moment = [500.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        script: list[Any] = []
        for run in range(3):
            script += [S.reply_tool_calls([("send_sms", {"to": f"+1{run}"})]), S.reply_text("ok")]
        cycle = make_cycle(serve(*script))
        team, other = Texts("team"), Texts("other")
        for run, texts in enumerate([team, team, other]):
            await cycle.submit_with_tools(f"text ({run})", [texts.send])
            gc.collect()  # the run's copy of the tool is gone
    finally:
        CLOCK.reset(token)
    # One instance's limit holds across runs; another instance's is its own.
    assert sent == ["team:+10", "other:+12"]


async def test_a_breaker_opened_by_a_timeout_is_reported_in_the_stream(
    serve: Callable[..., ScriptedChatServer], make_cycle: Callable[..., Any]
) -> None:
    # A call cut off by its timeout, the commonest failure of a hung service, opened
    # the breaker (logged) but its ToolBreakerChanged was dropped with the call's
    # cancelled token: the stream never said so.
    registry = ToolRegistry()
    never = asyncio.Event()

    @registry.tool(policy=ToolPolicy(breaker=Breaker(failures=1, window=60.0, cool_down=60.0)))
    async def lookup(order_id: str) -> str:
        """Look an order up."""
        await never.wait()
        return "shipped"

    server = serve(
        S.reply_tool_calls([("lookup", {"order_id": "A1"}, "c1")]), S.reply_text("It hangs.")
    )
    cycle = make_cycle(server, tool_timeout=0.2)
    events: list[ToolBreakerChanged] = []
    async with cycle.submit_stream_with_tools("Where is A1?", registry) as stream:
        async for event in stream:
            if isinstance(event, ToolBreakerChanged):
                events.append(event)
    assert events == [ToolBreakerChanged("lookup", "c1", "open", 60.0)]
    assert offered(server.requests[1]) == []
