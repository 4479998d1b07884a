"""Code mode: an approval that edits the arguments of a program's call. The model reads
only the program's output beside its own code, so the output says what ran. Each test
failed before its fix."""

from __future__ import annotations

import textwrap
from typing import Any

import pydantic
import pytest

from agcore_tools import CodeMode, ToolRegistry
from agcore_tools.calls import EDITS_NOTED
from agcore_tools.error import ApprovalError

from .conftest import S, assert_history_valid, tool_messages

pytest.importorskip("pydantic_monty")


@pytest.fixture
def payments() -> ToolRegistry:
    """``refund`` needs approval; ``payments.runs`` lists the refunds that ran."""
    registry = ToolRegistry()
    runs: list[tuple[int, float]] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool(needs_approval=True)
    def refund(order_id: int, amount: float) -> str:
        """Refund part of an order."""
        runs.append((order_id, amount))
        return "done"

    return registry


def program(code: str) -> Any:
    return S.reply_tool_calls([("run_python", {"code": textwrap.dedent(code)}, "c_prog")])


def result_of(server: Any, request: int) -> str:
    return tool_messages(server.requests[request].json["messages"])["c_prog"]


EDIT_NOTE = (
    "[the user edited the arguments of the program's call to refund() before it ran: "
    'the program gave {"amount": 500.0, "order_id": 7}; it ran with '
    '{"amount": 50.0, "order_id": 7}]'
)


async def test_an_edited_call_of_a_program_is_noted_at_the_head_of_its_output(
    serve, make_cycle, payments
):
    server = serve(
        program('r = await refund(7, 500.0)\nprint("refund", r)'), S.reply_text("Refunded.")
    )
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("refund 500 on 7", payments, select=CodeMode())
    [request] = paused.pending_approvals
    assert request.arguments == {"order_id": 7, "amount": 500.0}

    await cycle.submit_with_tools(
        None,
        payments,
        select=CodeMode(),
        approvals=[request.approve(arguments={"order_id": 7, "amount": 50.0})],
    )

    assert payments.runs == [(7, 50.0)]
    # Before: "refund done" alone, beside the model's code refunding 500.
    assert result_of(server, 1) == f"{EDIT_NOTE}\nrefund done"
    assert_history_valid(cycle.messages)


async def test_the_note_outlives_a_second_pause_and_heads_a_failed_programs_report(
    serve, make_cycle, payments
):
    server = serve(
        program(
            """
            await refund(7, 500.0)
            await refund(8, 5.0)
            raise ValueError("boom")
            """
        ),
        S.reply_text("ok"),
    )
    key = b"k" * 32
    cycle = make_cycle(server, approval_key=key)
    paused = await cycle.submit_with_tools("go", payments, select=CodeMode())
    [first] = paused.pending_approvals
    paused = await cycle.submit_with_tools(
        None,
        payments,
        select=CodeMode(),
        approvals=[first.approve(arguments={"order_id": 7, "amount": 50.0})],
    )
    [second] = paused.pending_approvals  # the program paused again, its state saved
    assert second.arguments == {"order_id": 8, "amount": 5.0}
    await cycle.submit_with_tools(None, payments, select=CodeMode(), approvals=[second.approve()])

    assert payments.runs == [(7, 50.0), (8, 5.0)]
    report = result_of(server, 1)
    lines = report.splitlines()
    assert lines[:2] == ["Error: tool 'run_python' failed: ValueError: boom", EDIT_NOTE]
    assert report.count("[the user edited") == 1  # the unedited approval adds none


async def test_a_temporal_run_begun_before_the_patch_reads_no_note(serve, make_cycle, payments):
    server = serve(program("await refund(7, 500.0)"), S.reply_text("ok"))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", payments, select=CodeMode())
    [request] = paused.pending_approvals
    token = EDITS_NOTED.set(False)  # as ToolLoopWorkflow sets it for such a run
    try:
        await cycle.submit_with_tools(
            None,
            payments,
            select=CodeMode(),
            approvals=[request.approve(arguments={"order_id": 7, "amount": 50.0})],
        )
    finally:
        EDITS_NOTED.reset(token)

    assert payments.runs == [(7, 50.0)]
    assert result_of(server, 1) == 'result: "done"'


class Order(pydantic.BaseModel):
    id: int
    note: str = pydantic.Field(default="", exclude=True)  # never sent to a model


async def _report_after_an_edit(serve, make_cycle, tool, call: str, edited: dict) -> str:
    """The report the model reads of a program that failed after a call of ``tool`` an
    approval edited to ``edited``."""
    registry = ToolRegistry()
    registry.tool(needs_approval=True)(tool)
    server = serve(program(f'{call}\nraise ValueError("boom")'), S.reply_text("ok"))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", registry, select=CodeMode())
    [request] = paused.pending_approvals
    await cycle.submit_with_tools(
        None, registry, select=CodeMode(), approvals=[request.approve(arguments=edited)]
    )
    return result_of(server, 1)


async def test_the_calls_a_failed_program_made_show_arguments_as_the_model_reads_them(
    serve, make_cycle
):
    def place(order: Order) -> str:
        """Place an order."""
        return f"placed {order.id}"

    edited = {"order": Order(id=2, note="internal: customer is on a watch list")}
    report = await _report_after_an_edit(serve, make_cycle, place, 'await place({"id": 1})', edited)

    assert "place(order={'id': 2}) -> ok" in report.splitlines()[-1]
    # Before: the line was written with repr(), Order(id=2, note='internal: ...').
    assert "watch list" not in report


def test_the_notes_arguments_are_written_by_one_private_helper() -> None:
    # A direct call's edit note and a program's write arguments with one helper, in a
    # private module low in the layers: not a name agcore_tools.calls exports.
    import agcore_tools.calls
    from agcore_tools import _code_mode, _text
    from agcore_tools.calls import _approval

    assert "noted_arguments" not in agcore_tools.calls.__all__
    assert _code_mode.noted_arguments is _approval.noted_arguments is _text.noted_arguments
    edited = {"order": Order(id=2, note="internal"), "memo": "x" * 200}
    noted = _text.noted_arguments(edited)
    assert noted.startswith('{"memo": "xxx') and noted.endswith("...")
    assert len(noted) == 120 and "internal" not in noted


@pytest.mark.parametrize("edited", ["a note", [1], {"0": "a note"}])
async def test_a_malformed_edit_list_in_a_paused_state_is_refused_naming_it(
    serve, make_cycle, payments, edited
):
    server = serve(program("await refund(7, 500.0)"), S.reply_text("ok"))
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", payments, select=CodeMode())
    [request] = paused.pending_approvals
    [open_call] = cycle.messages[-1]["tool_calls"]
    open_call["program_state"]["edited"] = edited

    expected = "malformed state in the history: 'edited' is not a list of texts"
    with pytest.raises(ApprovalError, match=expected):
        await cycle.submit_with_tools(
            None, payments, select=CodeMode(), approvals=[request.approve()]
        )
    assert payments.runs == []


async def test_with_an_approval_key_a_changed_edit_note_is_refused(serve, make_cycle, payments):
    server = serve(program("await refund(7, 500.0)\nawait refund(8, 5.0)"), S.reply_text("ok"))
    cycle = make_cycle(server, approval_key=b"k" * 32)
    paused = await cycle.submit_with_tools("go", payments, select=CodeMode())
    [first] = paused.pending_approvals
    edit = first.approve(arguments={"order_id": 7, "amount": 50.0})
    paused = await cycle.submit_with_tools(None, payments, select=CodeMode(), approvals=[edit])
    [second] = paused.pending_approvals
    [open_call] = cycle.messages[-1]["tool_calls"]
    assert open_call["program_state"]["edited"] == [EDIT_NOTE]  # signed with the rest
    open_call["program_state"]["edited"] = []  # the model would not read what ran

    with pytest.raises(ApprovalError, match="its state in the history was changed"):
        await cycle.submit_with_tools(
            None, payments, select=CodeMode(), approvals=[second.approve()]
        )
    assert payments.runs == [(7, 50.0)]


async def test_an_edited_argument_pydantic_cannot_write_is_named_in_the_calls_listed(
    serve, make_cycle
):
    def upload(data: bytes) -> str:
        """Upload bytes."""
        return f"{len(data)} bytes"

    edited = {"data": b"\xff\xfe"}  # no UTF-8: pydantic cannot write it for the model
    report = await _report_after_an_edit(serve, make_cycle, upload, 'await upload("x")', edited)

    # Before: "upload(data=None) -> ok", as if the call had run with None.
    last = report.splitlines()[-1]
    assert last == "  upload(data=<a bytes value that cannot be written as JSON>) -> ok"


def test_a_programs_own_arguments_are_listed_as_repr_wrote_them() -> None:
    # A program's arguments are JSON values (the sandbox's, or a workflow's history's):
    # their lines read as before, so a replayed run's report keeps its text ungated.
    from agcore_tools._code_mode import _listed

    plain = [1e100, 1e16, -0.0, 0.1, 10**30, "it's", 'say "hi"', True, None, [1.5, [2]]]
    for value in [*plain, {"a": {"b": [1, None]}, "z": "\u00e9"}, float("inf"), float("nan")]:
        assert _listed(value) == repr(value)


async def test_a_new_prompt_declining_a_paused_program_keeps_its_edit_notes(
    serve, make_cycle, payments
):
    server = serve(
        program("await refund(7, 500.0)\nawait refund(8, 5.0)"), S.reply_text("moved on")
    )
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("go", payments, select=CodeMode())
    [first] = paused.pending_approvals
    edit = first.approve(arguments={"order_id": 7, "amount": 50.0})
    await cycle.submit_with_tools(None, payments, select=CodeMode(), approvals=[edit])
    await cycle.submit_with_tools("never mind", payments, select=CodeMode())

    # Before: the calls that ran, without the note the model's code needs beside them.
    told = result_of(server, 1).splitlines()
    assert told[0].startswith("Error: the user declined the call to tool 'run_python'")
    assert told[1:] == [
        EDIT_NOTE,
        "Calls of the program that ran before its pause (do not repeat the ones that change "
        "something):",
        "  refund(order_id=7, amount=50.0) -> ok",
    ]
