"""Code mode at its edges: a program over a limit, cut short, or returning what JSON
cannot hold, still shows the model what it printed and the calls that ran; a paused
program's state is checked before it resumes."""

from __future__ import annotations

import asyncio
import base64
import gc
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from agcore_tools import ApprovalError, CodeMode, ToolRegistry
from agcore_tools import _sandbox as sandbox

from .conftest import S, assert_history_valid, tool_messages

pytest.importorskip("pydantic_monty")


def program(code: str, call_id: str = "c_prog") -> Any:
    return S.reply_tool_calls([("run_python", {"code": textwrap.dedent(code)}, call_id)])


def result_of(server: Any, request: int, call_id: str = "c_prog") -> str:
    return tool_messages(server.requests[request].json["messages"])[call_id]


@pytest.fixture
def rows() -> ToolRegistry:
    """``get_rows`` and ``archive`` (which needs approval); ``rows.runs`` lists calls."""
    registry = ToolRegistry()
    runs: list[tuple[str, Any]] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool
    def get_rows(table: str) -> int:
        """A table's row count."""
        runs.append(("get_rows", table))
        return 3

    @registry.tool(needs_approval=True)
    def archive(table: str) -> str:
        """Archive a table."""
        runs.append(("archive", table))
        return "archived"

    return registry


# About 15 MB of a 16 MiB heap: the program runs, but dumping it needs more.
BIG = "rows = [str(i) * 10 for i in range(90_000)]\nprint('built', len(rows))\n"
SMALL_HEAP = {"max_memory": 16 * 1024 * 1024}


async def test_a_program_too_large_to_pause_for_approval_fails_with_its_report(
    serve, make_cycle, rows
):
    code = BIG + "n = await get_rows('t')\nawait archive('t')\nlen(rows)"
    server = serve(program(code), S.reply_text("ok"))
    response = await make_cycle(server).submit_with_tools(
        "go", rows, select=CodeMode(limits=SMALL_HEAP)
    )

    text = result_of(server, 1)
    first, *_ = text.splitlines()
    assert first.startswith(
        "Error: tool 'run_python' failed: the program's state is too large to save while it "
        "waits for approval (MemoryError: "
    ), text
    assert first.endswith("keep less data in variables before a call that needs approval")
    assert "The program printed:\nbuilt 90000\n" in text
    assert "get_rows(table='t') -> ok" in text
    assert not response.pending_approvals
    assert rows.runs == [("get_rows", "t")]


@pytest.fixture
def pages() -> ToolRegistry:
    """``get_page`` and ``publish`` (which needs approval); ``pages.runs`` lists calls."""
    registry = ToolRegistry()
    runs: list[tuple[str, Any]] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool
    def get_page(n: int) -> list[int]:
        """One page of ids."""
        runs.append(("get_page", n))
        return [n]

    @registry.tool(needs_approval=True)
    def publish(n: int) -> str:
        """Publish a count."""
        runs.append(("publish", n))
        return "published"

    return registry


async def test_the_default_limit_lets_a_program_await_300_calls_one_by_one(
    serve, make_cycle, pages
):
    # Monty counts a call and its awaited result: its max_suspensions of 500 stopped
    # this program after 250 calls, though the limit was documented as 500 calls out.
    code = "ids = []\nfor n in range(300):\n    ids += await get_page(n)\nlen(ids)"
    server = serve(program(code), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools("go", pages, select=CodeMode())

    assert result_of(server, 1) == "result: 300"
    assert len(pages.runs) == 300


async def test_a_program_over_max_calls_is_told_so_and_the_call_past_it_never_runs(
    serve, make_cycle, pages
):
    code = "for n in range(10):\n    await get_page(n)"
    server = serve(program(code), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools(
        "go", pages, select=CodeMode(limits={"max_calls": 4})
    )

    text = result_of(server, 1)
    reason = "RuntimeError: the program made more than 4 tool calls (CodeMode limits)"
    assert text.startswith(f"Error: tool 'run_python' failed: {reason}\n"), text
    assert "get_page(n=3) -> ok" in text
    assert pages.runs == [("get_page", n) for n in range(4)]


async def test_max_calls_counts_the_calls_made_before_a_pause_for_approval(
    serve, make_cycle, pages
):
    # Monty's own count restarts when a paused program is restored.
    code = "a = await get_page(0)\nawait publish(1)\nfor n in range(2, 10):\n    await get_page(n)"
    server = serve(program(code), S.reply_text("ok"))
    cycle = make_cycle(server)
    limits = CodeMode(limits={"max_calls": 4})
    paused = await cycle.submit_with_tools("go", pages, select=limits)
    [request] = paused.pending_approvals
    await cycle.submit_with_tools(None, pages, select=limits, approvals=[request.approve()])

    text = result_of(server, 1)
    assert "RuntimeError: the program made more than 4 tool calls (CodeMode limits)" in text
    assert pages.runs == [("get_page", 0), ("publish", 1), ("get_page", 2), ("get_page", 3)]


async def test_a_program_the_loops_timeout_ends_reports_what_it_printed_and_the_calls_that_ran(
    serve, make_cycle
):
    registry = ToolRegistry()
    ran: list[int] = []
    never = asyncio.Event()

    @registry.tool
    def refund(order_id: int) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    @registry.tool
    async def report(order_id: int) -> str:
        """A report that never comes."""
        await never.wait()
        return "report"

    code = 'print("refund:", await refund(7))\nawait report(7)'
    server = serve(program(code), S.reply_text("ok"))
    response = await make_cycle(server, tool_timeout=2.0).submit_with_tools(
        "go", registry, select=CodeMode()
    )

    reason = "TimeoutError: the program ran over the loop's tool_timeout of 2 s"
    text = result_of(server, 1)
    assert text.startswith(f"Error: tool 'run_python' failed: {reason}\n"), text
    assert "The program printed:\nrefund: refunded\n" in text
    assert "refund(order_id=7) -> ok" in text
    assert "report(order_id=7) -> cut off when the program failed; it may have run" in text
    assert ran == [7]
    [invocation] = response.invocations
    assert invocation.may_have_run is True


@pytest.fixture
def refunds() -> ToolRegistry:
    """``refund``; ``refunds.runs`` lists the orders refunded."""
    registry = ToolRegistry()
    runs: list[int] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool
    def refund(order_id: int) -> str:
        """Refund an order."""
        runs.append(order_id)
        return "refunded"

    return registry


async def test_a_program_whose_value_is_binary_bytes_gets_a_text_naming_them(
    serve, make_cycle, refunds
):
    code = "import hashlib\nprint('refund:', await refund(7))\nhashlib.sha256(b'receipt').digest()"
    server = serve(program(code), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools("go", refunds, select=CodeMode())

    assert result_of(server, 1) == (
        "refund: refunded\n"
        'result: "[32 bytes of binary data: return bytes.hex() or base64 text instead]"'
    )


async def test_a_program_whose_value_cannot_be_converted_fails_with_its_report(
    serve, make_cycle, refunds
):
    code = "print('refund:', await refund(7))\n{frozenset([1]): 'a'}"
    server = serve(program(code), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools("go", refunds, select=CodeMode())

    text = result_of(server, 1)
    assert text.startswith(
        "Error: tool 'run_python' failed: the program's value cannot be returned: TypeError: "
    ), text
    assert "The program printed:\nrefund: refunded\n" in text
    assert "refund(order_id=7) -> ok" in text
    assert refunds.runs == [7]


async def test_a_huge_string_value_is_cut_before_the_loop_converts_it(serve, make_cycle, refunds):
    server = serve(program("'y' * 3_000_000"), S.reply_text("ok"))
    await make_cycle(server, max_result_bytes=None).submit_with_tools(
        "go", refunds, select=CodeMode()
    )

    text = result_of(server, 1)
    assert text == 'result: "' + "y" * 1024 * 1024 + '[... 1951424 more characters dropped]"'


SPIN = "n = 0\nwhile True:\n    n += 1"


async def test_a_time_limit_longer_than_the_workers_deadline_stops_the_program_itself(
    serve, make_cycle, refunds, monkeypatch
):
    # The library's own backstop, shortened so the test takes seconds: the pool killed
    # the worker at it (30 s), before a longer max_feed_duration_secs could stop the
    # program with the TimeoutError the model is promised.
    monkeypatch.setattr(sandbox, "WORKER_DEADLINE", 1.0)
    server = serve(program(SPIN), S.reply_text("ok"))
    await make_cycle(server, tool_timeout=None).submit_with_tools(
        "go", refunds, select=CodeMode(limits={"max_feed_duration_secs": 2.0})
    )

    text = result_of(server, 1)
    assert text.startswith("Error: tool 'run_python' failed: TimeoutError"), text


async def test_the_workers_deadline_is_told_to_the_model_once(
    serve, make_cycle, refunds, monkeypatch
):
    monkeypatch.setattr(sandbox, "WORKER_DEADLINE", 1.0)
    server = serve(program(SPIN), S.reply_text("ok"))
    await make_cycle(server, tool_timeout=None).submit_with_tools(
        "go", refunds, select=CodeMode(limits={"max_feed_duration_secs": None})
    )

    assert result_of(server, 1) == (
        "Error: tool 'run_python' failed: the sandbox stopped the program: monty worker "
        "killed after exceeding request timeout of 1s"
    )


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda state: state.pop(key)


def _put(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda state: state.__setitem__(key, value)


def _halve_snapshot(state: dict[str, Any]) -> None:
    state["snapshot"] = state["snapshot"][: len(state["snapshot"]) // 2 + 1]


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (_drop("snapshot"), "has a malformed state in the history: 'snapshot' is missing"),
        (_halve_snapshot, "'snapshot' is not the program's snapshot (base64 text)"),
        (_put("snapshot", 7), "'snapshot' is not the program's snapshot (base64 text)"),
        (_put("pending", ["x"]), "'pending' is not a list of call numbers"),
        (_put("done", {"x": {"value": 1}}), "'done' is not an object of results by call number"),
        (_put("done", {"1": {}}), "'done' is not an object of results by call number"),
        (_put("calls", "many"), "'calls' is not a number of calls"),
    ],
    ids=[
        "no-snapshot",
        "cut-snapshot",
        "snapshot-not-text",
        "pending",
        "done-key",
        "done-entry",
        "calls",
    ],
)
async def test_a_malformed_paused_state_is_refused_to_the_app_and_the_approved_call_never_runs(
    serve, make_cycle, rows, tamper, expected
):
    server = serve(program("n = await get_rows('t')\nawait archive('t')"), S.reply_text("ok"))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", rows, select=CodeMode())
    [request] = paused.pending_approvals
    [open_call] = cycle.messages[-1]["tool_calls"]
    tamper(open_call["program_state"])

    with pytest.raises(ApprovalError) as refused:
        await cycle.submit_with_tools(None, rows, select=CodeMode(), approvals=[request.approve()])
    assert str(refused.value).startswith("the paused program of call 'c_prog' "), refused.value
    assert expected in str(refused.value)
    assert rows.runs == [("get_rows", "t")]  # archive, though approved, never ran
    assert len(server.requests) == 1  # the model was not asked again
    assert cycle.messages[-1]["tool_calls"] == [open_call]  # left as it was, still open


async def test_a_snapshot_monty_cannot_load_is_refused_to_the_app_not_told_to_the_model(
    serve, make_cycle, rows
):
    server = serve(program("n = await get_rows('t')\nawait archive('t')"), S.reply_text("ok"))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", rows, select=CodeMode())
    [request] = paused.pending_approvals
    [open_call] = cycle.messages[-1]["tool_calls"]
    open_call["program_state"]["snapshot"] = base64.b64encode(b"not a dump").decode()

    with pytest.raises(ApprovalError) as refused:
        await cycle.submit_with_tools(None, rows, select=CodeMode(), approvals=[request.approve()])
    message = str(refused.value)
    assert message.startswith(
        "the paused program of call 'c_prog' cannot be loaded from its snapshot "
        "(MontyRuntimeError: "
    ), message
    assert rows.runs == [("get_rows", "t")]  # archive, though approved, never ran
    assert len(server.requests) == 1  # the model was not asked again
    # The call is answered, so the history stays valid; its state is gone.
    assert_history_valid(cycle.messages)
    assert tool_messages(cycle.messages)["c_prog"] == f"Error: {message}"


@pytest.mark.parametrize(
    "code",
    [
        "f = get_rows\nawait f('t')",
        "await {'rows': get_rows}['rows']('t')",
        "import asyncio\nawait asyncio.gather(*map(get_rows, ['a', 'b']))",
    ],
    ids=["alias", "dispatch-table", "map"],
)
async def test_a_tool_function_used_as_a_value_is_told_to_call_it_directly(
    serve, make_cycle, rows, code
):
    server = serve(program(code), S.reply_text("ok"))
    await make_cycle(server).submit_with_tools("go", rows, select=CodeMode())

    text = result_of(server, 1)
    assert text.startswith(
        "Error: tool 'run_python' failed: NameError: get_rows is a tool function: call it "
        "where you use it, `await get_rows(...)`"
    ), text
    assert "not defined" not in text
    description = server.requests[0].json["tools"][0]["function"]["description"]
    assert "it cannot be stored in a variable or a dict, or passed to map()" in description


def live_sandboxes() -> int:
    """The MontySandbox objects alive, after a full collection."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is sandbox.MontySandbox)


async def test_a_program_ended_while_it_waits_on_a_tool_leaves_no_sandbox_behind(
    serve, make_cycle, rows
):
    # The waiting Monty snapshot holds the sandbox's print callback: a cycle through a
    # Rust object, which gc cannot break; the sandbox must drop it when its block ends.
    started = asyncio.Event()
    never = asyncio.Event()

    @rows.tool
    async def report(table: str) -> str:
        """A report that never comes."""
        started.set()
        await never.wait()
        return "report"

    printed = "print('x' * 1000)\n"
    before = live_sandboxes()
    for _ in range(2):
        # Cancelled by the app while the program waits (first: the loop lets go of the
        # cancelled task's exception, and with it the run, a step later).
        started.clear()
        server = serve(program(printed + "await report('t')"))
        run = asyncio.create_task(
            make_cycle(server).submit_with_tools("go", rows, select=CodeMode())
        )
        await asyncio.wait_for(started.wait(), 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        del run

        # Ended by the loop's tool_timeout.
        server = serve(program(printed + "await report('t')"), S.reply_text("ok"))
        await make_cycle(server, tool_timeout=0.3).submit_with_tools("go", rows, select=CodeMode())
        assert "tool_timeout" in result_of(server, 1)

        # Paused for approval, then resumed from the history.
        server = serve(program(printed + "await archive('t')"), S.reply_text("ok"))
        cycle = make_cycle(server)
        paused = await cycle.submit_with_tools("go", rows, select=CodeMode())
        [request] = paused.pending_approvals
        await cycle.submit_with_tools(None, rows, select=CodeMode(), approvals=[request.approve()])
        assert result_of(server, 1).endswith('result: "archived"')

    assert live_sandboxes() == before
