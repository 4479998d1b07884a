"""Code mode where programs a model writes met the edges: positional arguments, a
gather that fails, a cancelled run, inline answers to a program's calls, a history that
lost a program's state. Each test failed before its fix."""

from __future__ import annotations

import asyncio
import json
import logging
import textwrap
from typing import Any

import pytest
from pydantic import BaseModel, Field

from agcore_tools import (
    ApprovalError,
    BaseTool,
    CodeMode,
    ToolApprovalRequested,
    ToolContext,
    ToolRegistry,
)

from .conftest import S, assert_history_valid, tool_messages

pytest.importorskip("pydantic_monty")


def program(code: str, call_id: str = "c_prog") -> Any:
    return S.reply_tool_calls([("run_python", {"code": textwrap.dedent(code)}, call_id)])


def result_of(server: Any, request: int, call_id: str = "c_prog") -> str:
    return tool_messages(server.requests[request].json["messages"])[call_id]


class Search(BaseTool):
    """An MCP-style tool whose schema lists an optional key before the required one, as
    servers that sort keys (Go's encoding/json) do."""

    name = "search"
    description = "Search documents."
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "query": {"type": "string"}},
        "required": ["query"],
    }

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return f"search got {json.dumps(args, sort_keys=True)}"


async def test_positional_values_follow_the_order_the_listing_shows(serve, make_cycle):
    registry = ToolRegistry()
    registry.register(Search())

    @registry.tool
    def find(page: int = 1, *, term: str) -> str:
        """Find a term."""
        return f"find got page={page} term={term}"

    server = serve(
        program('print(await search("cats"))\nprint(await find("dogs", 2))'), S.reply_text("ok")
    )
    await make_cycle(server).submit_with_tools("go", registry, select=CodeMode())

    listing = server.requests[0].json["tools"][0]["function"]["description"]
    assert "async def search(query: str, limit: int = None)" in listing
    assert "async def find(term: str, page: int = None)" in listing
    # Before, "cats" went to limit and "dogs" to page, in the schema's order.
    assert result_of(server, 1) == ('search got {"query": "cats"}\nfind got page=2 term=dogs')


@pytest.fixture
def flaky() -> ToolRegistry:
    registry = ToolRegistry()
    runs: list[Any] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool
    async def fetch(i: int) -> int:
        """Fetch one item."""
        await asyncio.sleep(0.1)  # still running when its sibling fails
        runs.append(("fetch", i))
        return i

    @registry.tool
    async def broken(i: int) -> int:
        """Always fails."""
        raise ValueError(f"item {i} is gone")

    @registry.tool(needs_approval=True)
    def pay(who: str, amount: float) -> str:
        """Pay someone."""
        runs.append(("pay", who, amount))
        return "paid"

    return registry


async def test_a_program_that_catches_a_failed_gather_ends_as_it_would_in_python(
    serve, make_cycle, flaky
):
    server = serve(
        program(
            """
            import asyncio
            try:
                items = await asyncio.gather(fetch(1), broken(2), fetch(3))
            except RuntimeError as exc:
                print("one failed:", exc)
                items = []
            print("after", items)
            """
        ),
        S.reply_text("ok"),
    )
    await make_cycle(server).submit_with_tools("go", flaky, select=CodeMode())

    # Before: "the program called fetch() without await", though it awaited every call.
    assert result_of(server, 1) == (
        "one failed: tool 'broken' failed: ValueError: item 2 is gone\nafter []"
    )
    # The siblings the gather left ran to their end rather than being cut off.
    assert sorted(flaky.runs) == [("fetch", 1), ("fetch", 3)]


async def test_a_caught_gather_failure_after_an_approval_does_not_fail_the_program(
    serve, make_cycle, flaky
):
    code = """
        import asyncio
        try:
            await asyncio.gather(pay("bob", 5.0), broken(1))
        except RuntimeError:
            print("warned")
        print("finished")
        """
    server = serve(program(code), S.reply_text("ok"))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", flaky, select=CodeMode())
    [request] = paused.pending_approvals

    await cycle.submit_with_tools(None, flaky, select=CodeMode(), approvals=[request.approve()])

    assert result_of(server, 1) == "warned\nfinished"
    assert flaky.runs == [("pay", "bob", 5.0)]


async def test_an_annotated_result_is_the_programs_value(serve, make_cycle, flaky):
    server = serve(program("result: int = await fetch(5)\nprint('done')"), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools("go", flaky, select=CodeMode())
    assert result_of(server, 1) == "done\nresult: 5"


async def test_a_cancelled_run_tells_the_model_which_calls_of_the_program_ran(serve, make_cycle):
    registry = ToolRegistry()
    slow_started = asyncio.Event()

    @registry.tool
    async def charge(amount: float) -> str:
        """Charge the card."""
        return "charged"

    @registry.tool
    async def slow() -> str:
        """Takes its time."""
        slow_started.set()
        await asyncio.sleep(30)
        return "late"

    server = serve(program("print('charging')\nawait charge(5.0)\nawait slow()"))
    cycle = make_cycle(server)
    run = asyncio.ensure_future(cycle.submit_with_tools("go", registry, select=CodeMode()))
    await asyncio.wait_for(slow_started.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 10)

    answer = tool_messages(cycle.messages)["c_prog"]
    # Before, only the first line: the next turn would charge again.
    assert answer.startswith("Error: aborted; tool 'run_python' did not complete")
    assert "The program printed:\ncharging" in answer
    assert "charge(amount=5.0) -> ok" in answer
    assert "slow() -> cut off" in answer
    assert_history_valid(cycle.messages)


GATHERED_PAYMENTS = """
    import asyncio
    print(await asyncio.gather(pay("ann", 1.0), pay("bob", 2.0)))
    """


async def test_a_partial_inline_answer_runs_the_answered_program_call(serve, make_cycle, flaky):
    server = serve(program(GATHERED_PAYMENTS), S.reply_text("ok"))
    cycle = make_cycle(server)
    asked: list[str] = []
    async with cycle.submit_stream_with_tools("go", flaky, select=CodeMode()) as events:
        async for event in events:
            if isinstance(event, ToolApprovalRequested):
                asked.append(event.call_id)
                if event.input["who"] == "bob":
                    event.approve()
    response = events.response

    # As for direct calls: the answered call ran, the other waits, each asked once.
    # Before, bob's approval was dropped and both were asked again on resume.
    assert asked == ["c_prog~0", "c_prog~1"]
    assert flaky.runs == [("pay", "bob", 2.0)]
    assert response is not None
    assert [p.call_id for p in response.pending_approvals] == ["c_prog~0"]

    done = await cycle.submit_with_tools(
        None, flaky, select=CodeMode(), approvals=[response.pending_approvals[0].approve()]
    )
    assert done.text == "ok"
    assert flaky.runs == [("pay", "bob", 2.0), ("pay", "ann", 1.0)]
    assert result_of(server, 1) == "['paid', 'paid']"


async def test_an_inline_edit_the_tool_refuses_leaves_only_that_program_call_waiting(
    serve, make_cycle, flaky, caplog
):
    server = serve(program(GATHERED_PAYMENTS), S.reply_text("ok"))
    cycle = make_cycle(server)
    with caplog.at_level(logging.WARNING, logger="agcore_tools.approval"):
        async with cycle.submit_stream_with_tools("go", flaky, select=CodeMode()) as events:
            async for event in events:
                if isinstance(event, ToolApprovalRequested):
                    if event.input["who"] == "ann":
                        event.approve(arguments={"who": "ann", "amount": "lots"})
                    else:
                        event.approve()
    # Before, the ApprovalError came out of the stream; the guide says a refused answer
    # is dropped with a warning and its call keeps waiting, as for a direct call, and
    # the other answers stand.
    response = events.response
    assert response is not None
    assert [p.call_id for p in response.pending_approvals] == ["c_prog~0"]
    assert "the inline answer to call 'c_prog~0' was refused" in caplog.text
    assert flaky.runs == [("pay", "bob", 2.0)]


@pytest.mark.parametrize("awaited", ["x", 5, [1, "b"]])
async def test_a_malformed_awaited_list_in_a_paused_state_is_refused_naming_it(
    serve, make_cycle, flaky, awaited
):
    server = serve(program('await fetch(1)\nprint(await pay("ann", 1.0))'), S.reply_text("ok"))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", flaky, select=CodeMode())
    [request] = paused.pending_approvals
    [open_call] = cycle.messages[-1]["tool_calls"]
    open_call["program_state"]["awaited"] = awaited

    with pytest.raises(ApprovalError, match="malformed state in the history: 'awaited'"):
        await cycle.submit_with_tools(None, flaky, select=CodeMode(), approvals=[request.approve()])
    assert flaky.runs == [("fetch", 1)]


async def test_answers_to_a_program_whose_state_the_history_lost_are_refused(
    serve, make_cycle, flaky
):
    server = serve(program('await fetch(1)\nprint(await pay("ann", 1.0))'))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", flaky, select=CodeMode())
    [request] = paused.pending_approvals
    # A store that keeps only a tool call's standard fields.
    saved = json.loads(json.dumps(cycle.messages))
    for call in saved[-1]["tool_calls"]:
        call.pop("program_state")
    fresh = make_cycle(server)
    fresh.messages[:] = saved

    with pytest.raises(ApprovalError, match="state is missing from the history"):
        await fresh.submit_with_tools(None, flaky, select=CodeMode(), approvals=[request.approve()])
    assert flaky.runs == [("fetch", 1)]  # the program did not start again


async def test_a_name_that_is_an_identifier_keeps_it_whatever_was_registered_first(
    serve, make_cycle
):
    registry = ToolRegistry()
    for name in ("gh__list-issues", "gh__list_issues"):  # the dashed one first
        registry.register(Named(name))

    server = serve(program('print(await gh__list_issues("x"))'), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools("go", registry, select=CodeMode())

    listing = server.requests[0].json["tools"][0]["function"]["description"]
    assert "async def gh__list_issues(" in listing and "async def gh__list_issues_2(" in listing
    # Before, the plain name went to the dashed tool, registered first.
    assert result_of(server, 1) == "gh__list_issues ran"


class Named(BaseTool):
    """A tool that says which name it was called by."""

    description = "List issues."
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {"repo": {"type": "string"}},
        "required": ["repo"],
    }

    def __init__(self, name: str) -> None:
        self.name = name

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return f"{self.name} ran"


class Login(BaseModel):
    """Log in with a key."""

    api_key: str = Field(alias="apiKey")


class Connect(BaseModel):
    """Connect with a key."""

    api_key: str = Field(alias="api-key")


async def test_a_model_class_tool_is_listed_and_called_by_its_aliases(serve, make_cycle):
    registry = ToolRegistry()
    registry.tool(Login)
    registry.tool(Connect)

    code = 'print(await Login(apiKey="a"))\nprint(await Connect(**{"api-key": "b"}))'
    server = serve(program(code), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools("go", registry, select=CodeMode())

    listing = server.requests[0].json["tools"][0]["function"]["description"]
    # An alias that is an identifier is the parameter; one that is not is passed as **{...}.
    assert "async def Login(apiKey: str)" in listing
    assert "async def Connect(**arguments: Any) -> Any:  # pass **{'api-key': str}" in listing
    # Before, neither class could be made a tool (or, the second, called as listed).
    assert result_of(server, 1) == "{'apiKey': 'a'}\n{'api-key': 'b'}"
