from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agcore_tools import (
    AgcoreError,
    BaseTool,
    CancellationToken,
    Permission,
    ToolConfigError,
    ToolContext,
    ToolRegistry,
)
from agcore_tools.base import tool_definition


class WeatherTool(BaseTool):
    """The seed's §7 example, written the Python way: plain class attributes."""

    name = "get_weather"
    description = "Current weather of a city."
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    }
    required_permissions = ("network",)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"city": args["city"], "temperature": 22, "unit": "°C", "session": ctx.session_id}


async def test_subclass_with_plain_class_attributes_registers_and_runs() -> None:
    registry = ToolRegistry()
    entry = registry.register(WeatherTool())
    assert entry.permissions == (Permission.NETWORK,)
    assert registry.definitions() == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather of a city.",
                "parameters": WeatherTool.parameters,
            },
        }
    ]
    ctx = ToolContext(session_id="s1")
    result = await registry.invoke("get_weather", {"city": "Beijing"}, ctx)
    assert result.output == {"city": "Beijing", "temperature": 22, "unit": "°C", "session": "s1"}


def test_abstract_execute_is_enforced() -> None:
    class Incomplete(BaseTool):
        name = "x"

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]


def test_context_defaults_are_fresh() -> None:
    a, b = ToolContext(), ToolContext()
    assert a.session_id != b.session_id and a.trace_id != b.trace_id
    assert a.call_id is None and not a.cancelled


def test_for_call_shares_session_and_links_cancellation() -> None:
    parent = ToolContext(metadata={"user": "ann"})
    child = parent.for_call("call_7")
    assert (child.session_id, child.trace_id, child.call_id) == (
        parent.session_id,
        parent.trace_id,
        "call_7",
    )
    assert child.metadata is parent.metadata
    child.cancellation.cancel()
    assert child.cancelled and not parent.cancelled
    sibling = parent.for_call("call_8")
    parent.cancellation.cancel()
    assert sibling.cancelled


async def test_cancellation_can_be_awaited() -> None:
    token = CancellationToken()
    waiter = asyncio.create_task(token.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    token.cancel()
    await asyncio.wait_for(waiter, 1)
    assert token.cancelled
    # A child of a cancelled token starts cancelled.
    await asyncio.wait_for(token.child().wait(), 1)


def test_a_token_is_awaited_on_any_loop_and_a_cancel_from_any_thread_wakes_them_all() -> None:
    # wait() bound the token to the first loop that awaited it: a wait on another loop
    # (an asyncio.run() after an earlier one, the app's loop and the library's) raised
    # RuntimeError "... is bound to a different event loop".
    token = CancellationToken()

    async def waits_then_gives_up() -> None:
        waiting = asyncio.ensure_future(token.wait())
        await asyncio.sleep(0)  # token.wait() has started: it waits now
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(waits_then_gives_up())  # the first loop to wait, closed since
    waiting = [threading.Event(), threading.Event()]
    woken: list[int] = []

    def waiter(index: int) -> None:
        async def main() -> None:
            wait = asyncio.ensure_future(token.wait())
            await asyncio.sleep(0)  # token.wait() has started: it waits now
            waiting[index].set()
            await asyncio.wait_for(wait, 10)
            woken.append(index)

        asyncio.run(main())

    threads = [threading.Thread(target=waiter, args=(i,), daemon=True) for i in range(2)]
    for thread in threads:
        thread.start()
    assert all(event.wait(10) for event in waiting)
    token.cancel()  # from this thread, which runs neither loop
    for thread in threads:
        thread.join(10)
    assert sorted(woken) == [0, 1]
    asyncio.run(asyncio.wait_for(token.wait(), 10))  # cancelled already: at once
    # A wait given up on is not kept until a cancel that may never come.
    token = CancellationToken()
    asyncio.run(waits_then_gives_up())
    assert not token._waiters


def test_finished_children_are_not_kept_alive() -> None:
    import gc

    parent = ToolContext()
    for i in range(100):
        parent.for_call(f"c{i}")
    gc.collect()
    assert len(parent.cancellation._children or ()) == 0


def test_calls_share_their_parents_state_and_name_their_tool() -> None:
    state: dict[str, object] = {"seed": 1}
    ctx = ToolContext(shared_state=state, tool_name=None)
    first, second = ctx.for_call("c1", "a"), ctx.for_call("c2", "b")
    first.shared_state["from_a"] = True
    assert second.shared_state is state and state == {"seed": 1, "from_a": True}
    assert (first.tool_name, second.tool_name) == ("a", "b")
    # A child's own child (a tool's timeout context) keeps the tool's name.
    assert first.for_call("c1").tool_name == "a"
    # Contexts made apart do not share.
    assert ToolContext().shared_state is not ToolContext().shared_state


def test_context_arguments_are_keywords() -> None:
    token = CancellationToken()
    ctx = ToolContext(session_id="s", trace_id="t", call_id="c", cancellation=token)
    assert (ctx.session_id, ctx.trace_id, ctx.call_id, ctx.cancellation) == ("s", "t", "c", token)


def test_positional_context_arguments_still_work_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"by keyword: ToolContext\(session_id=\.\.\."):
        ctx = ToolContext("s", "t", "c", metadata={"k": 1})
    assert (ctx.session_id, ctx.trace_id, ctx.call_id, ctx.metadata) == ("s", "t", "c", {"k": 1})
    with pytest.raises(TypeError, match="multiple values for 'session_id'") as info:
        ToolContext("s", session_id="x")
    assert isinstance(info.value, AgcoreError)
    with pytest.raises(TypeError, match="at most 5 positional") as info:
        ToolContext("s", "t", "c", None, None, "extra")
    assert isinstance(info.value, AgcoreError)


def test_hooks_have_defaults_a_subclass_overrides() -> None:
    class Picky(WeatherTool):
        def check_registrable(self) -> None:
            raise ToolConfigError("not today")

    tool = WeatherTool()
    assert tool.check_registrable() is None
    assert tool.redefines(WeatherTool()) is False
    assert tool.check_arguments({"anything": 1}) is None
    assert tool.quiet is False and tool.reads_null_as_default is False
    with pytest.raises(ToolConfigError, match="not today"):
        ToolRegistry().register(Picky())


def test_one_definition_builder_in_both_shapes() -> None:
    schema = {"type": "object", "properties": {}}
    assert WeatherTool().definition() == tool_definition(
        "get_weather", "Current weather of a city.", WeatherTool.parameters
    )
    assert tool_definition("t", "d", schema, strict=True)["function"]["strict"] is True
    assert "strict" not in tool_definition("t", "d", schema)["function"]
    assert tool_definition("t", "d", schema, api="responses") == {
        "type": "function",
        "name": "t",
        "description": "d",
        "parameters": schema,
        "strict": False,
    }


async def test_for_run_keeps_the_apps_context_and_its_own_shared_state() -> None:
    seen: list[Any] = []
    app = ToolContext(metadata={"user": "ann"}, on_event=seen.append, shared_state={"a": 1})
    run = app.for_run({"kept": True}, inbox=True)
    assert run.shared_state == {"a": 1}  # the app's own wins over the kept one
    assert run.cancellation is app.cancellation and run.metadata is app.metadata
    assert run.listening and run.inbox is not None and app.inbox is None
    run.for_call("c1", "t").report_progress(1, 2)
    assert len(seen) == 1 and run.inbox.qsize() == 1
    fresh = ToolContext().for_run({"kept": True})
    assert fresh.shared_state == {"kept": True} and not fresh.listening
