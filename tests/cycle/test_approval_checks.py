"""Approval in the loop: what a resume refuses, and what it leaves as it was."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest

from agcore_tools import (
    ApprovalDecision,
    ApprovalError,
    CodeMode,
    LlmConfigError,
    ToolApprovalRequested,
    ToolRegistry,
)
from tests._otel import recording

from .conftest import TWO_CALLS, S, tool_messages


async def test_a_signed_history_resumed_without_the_key_is_refused(serve, make_cycle, bank):
    # A worker whose settings lack the key (a missing env var) must not skip the check
    # the history shows was made: it would run an edited call unchecked.
    server = serve(TWO_CALLS, S.reply_text("Done."))
    signed = make_cycle(server, approval_key=b"app secret")
    [request] = (await signed.submit_with_tools("refund order 7", bank)).pending_approvals
    tampered = json.loads(json.dumps(signed.messages))
    tampered[1]["tool_calls"][0]["function"]["arguments"] = '{"order": 7, "amount": 9000}'

    keyless = make_cycle(server)
    keyless.messages[:] = json.loads(json.dumps(tampered))
    for approvals in (None, [request.approve()]):
        with pytest.raises(ApprovalError, match=r"left open under an approval_key .* resume with"):
            await keyless.submit_with_tools(None, bank, approvals=approvals)
    assert keyless.messages == tampered

    # Without the open call's mark, the signed answer still shows the key.
    unmarked = json.loads(json.dumps(signed.messages))
    del unmarked[1]["tool_calls"][0]["open_call_mac"]
    keyless.messages[:] = json.loads(json.dumps(unmarked))
    with pytest.raises(ApprovalError, match="is signed, but no approval_key was given"):
        await keyless.submit_with_tools(None, bank, approvals=[request.approve()])
    assert keyless.messages == unmarked
    assert bank.runs == [("balance", {"account": "a"})]
    assert len(server.requests) == 1


@pytest.mark.parametrize("content", [False, True], ids=["redacted", "content"])
async def test_a_refused_answer_puts_no_argument_values_in_spans_without_content(
    serve, make_cycle, bank, content
):
    server = serve(TWO_CALLS)
    with recording(capture_content=content) as spans:
        cycle = make_cycle(server)
        await cycle.submit_with_tools("refund order 7", bank)
        stale = ApprovalDecision("c_refund", "refund", {"order": 7, "amount": 19.5}, True)
        with pytest.raises(ApprovalError, match=r"19\.5.* approved") as stale_error:
            await cycle.submit_with_tools(None, bank, approvals=[stale])
        [request] = (await cycle.submit_with_tools(None, bank)).pending_approvals
        edit = request.approve(arguments={"order": "seven-SECRET", "amount": 1.0})
        with pytest.raises(ApprovalError, match="seven-SECRET") as edit_error:
            await cycle.submit_with_tools(None, bank, approvals=[edit])
    statuses = [s.status.description or "" for s in spans.named("invoke_agent")]
    assert len(statuses) == 4 and statuses[0] == statuses[2] == ""
    if content:
        assert statuses[1] == f"ApprovalError: {stale_error.value}"
        assert statuses[3] == f"ApprovalError: {edit_error.value}"
    else:
        assert statuses[1] == (
            "ApprovalError: the approval of call 'c_refund' is for other arguments than the "
            "call's: they differ in 'amount'"
        )
        assert statuses[3].startswith(
            "ApprovalError: the approval of call 'c_refund' edits the arguments into invalid "
            "ones: tool 'refund' got invalid arguments: order:"
        )
        assert "SECRET" not in statuses[3] and "19.5" not in statuses[1]


async def test_a_resume_with_a_registry_missing_the_waiting_tool_leaves_the_history(
    serve, make_cycle, bank
):
    # A process whose registry lacks the tool (an MCP server down, a module not
    # imported) must not answer the waiting call as unknown: the request would be gone.
    server = serve(TWO_CALLS, S.reply_text("Refunded."))
    cycle = make_cycle(server)
    [request] = (await cycle.submit_with_tools("refund order 7", bank)).pending_approvals
    saved = json.loads(json.dumps(cycle.messages))
    lacking = ToolRegistry()
    lacking.register(bank.get("balance"))

    for approvals in (None, [request.approve()]):
        with pytest.raises(
            LlmConfigError, match="open call 'c_refund' is to tool 'refund', which the registry"
        ):
            await cycle.submit_with_tools(None, lacking, approvals=approvals)
        assert cycle.messages == saved
    [again] = (await cycle.submit_with_tools(None, bank)).pending_approvals
    assert again == request
    done = await cycle.submit_with_tools(None, bank, approvals=[again.approve()])
    assert done.text == "Refunded."
    assert len(server.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_call_with_arguments_its_tool_refuses_is_not_put_to_a_person(
    serve, make_cycle, bank, stream
):
    server = serve(
        S.reply_tool_calls([("refund", {"order": "seven"}, "c1")]), S.reply_text("Sorry.")
    )
    cycle = make_cycle(server)
    if stream:
        events = cycle.submit_stream_with_tools("refund order 7", bank)
        asked = [e async for e in events if isinstance(e, ToolApprovalRequested)]
        response = events.response
        assert asked == []
    else:
        response = await cycle.submit_with_tools("refund order 7", bank)
    assert response is not None
    assert response.text == "Sorry." and response.pending_approvals == ()
    assert tool_messages(cycle.messages)["c1"].startswith(
        "Error: tool 'refund' got invalid arguments: "
    )
    assert bank.runs == []


async def test_a_programs_call_with_arguments_its_tool_refuses_is_not_put_to_a_person(
    serve, make_cycle, bank
):
    pytest.importorskip("pydantic_monty")
    code = """
        try:
            await refund("seven", 5.0)
        except Exception as exc:
            print("refused:", exc)
    """
    server = serve(
        S.reply_tool_calls([("run_python", {"code": textwrap.dedent(code)}, "c_prog")]),
        S.reply_text("Sorry."),
    )
    cycle = make_cycle(server)
    response = await cycle.submit_with_tools("refund order 7", bank, select=CodeMode())
    assert response.text == "Sorry." and response.pending_approvals == ()
    assert (
        "refused: tool 'refund' got invalid arguments: order"
        in (tool_messages(cycle.messages)["c_prog"])
    )
    assert bank.runs == []


async def test_changing_a_requests_arguments_in_place_changes_nothing_that_runs(
    serve, make_cycle, bank
):
    server = serve(
        S.reply_tool_calls([("refund", {"order": 7, "amount": 20.0}, "c1")]),
        S.reply_text("Done."),
    )
    cycle = make_cycle(server)
    async with cycle.submit_stream_with_tools("refund order 7", bank) as events:
        async for event in events:
            if isinstance(event, ToolApprovalRequested):
                event.input["amount"] *= 10  # cents for the UI, say, in place
                event.approve()  # as the model asked, the app believes
    # The answer is for other arguments than the call's: refused, the call waits.
    assert events.response is not None
    [waiting] = events.response.pending_approvals
    assert waiting.arguments == {"order": 7, "amount": 20.0}
    assert bank.runs == []
    sent = cycle.messages[1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"order": 7, "amount": 20.0}


async def test_a_paused_programs_requests_do_not_share_its_saved_state(serve, make_cycle, bank):
    pytest.importorskip("pydantic_monty")
    server = serve(
        S.reply_tool_calls([("run_python", {"code": "await refund(7, 20.0)"}, "c_prog")]),
        S.reply_text("Done."),
    )
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("refund order 7", bank, select=CodeMode())
    [request] = paused.pending_approvals
    saved = json.dumps(cycle.messages)
    request.arguments["amount"] = 9000.0
    assert json.dumps(cycle.messages) == saved
    with pytest.raises(ApprovalError, match="is for other arguments than the call's"):
        await cycle.submit_with_tools(None, bank, select=CodeMode(), approvals=[request.approve()])
    assert bank.runs == []


async def test_a_refused_inline_answer_leaves_the_call_waiting_and_its_siblings_run(
    serve, make_cycle, bank, caplog
):
    server = serve(TWO_CALLS, S.reply_text("Refunded."))
    cycle = make_cycle(server)
    async with cycle.submit_stream_with_tools("refund order 7", bank) as events:
        async for event in events:
            if isinstance(event, ToolApprovalRequested):
                event.approve(arguments={"order": "seven-SECRET", "amount": 20.0})  # a typo
    assert events.response is not None
    [request] = events.response.pending_approvals
    assert request.call_id == "c_refund"
    assert bank.runs == [("balance", {"account": "a"})]
    assert tool_messages(cycle.messages) == {"c_bal": "100"}
    assert len(server.requests) == 1
    [record] = [r for r in caplog.records if r.name == "agcore_tools.approval"]
    assert record.levelname == "WARNING"
    assert "inline answer to call 'c_refund' was refused" in record.getMessage()
    assert "SECRET" not in record.getMessage()

    done = await cycle.submit_with_tools(None, bank, approvals=[request.approve()])
    assert done.text == "Refunded."
    assert bank.runs[-1] == ("refund", {"order": 7, "amount": 20.0})


async def test_one_answer_given_bare_is_refused_naming_the_fix(serve, make_cycle, bank):
    server = serve(TWO_CALLS)
    cycle = make_cycle(server)
    [request] = (await cycle.submit_with_tools("refund order 7", bank)).pending_approvals
    saved = json.loads(json.dumps(cycle.messages))
    with pytest.raises(ApprovalError, match=r"got one ApprovalDecision: pass approvals=\[answer\]"):
        await cycle.submit_with_tools(None, bank, approvals=request.approve())  # type: ignore[arg-type]
    with pytest.raises(ApprovalError, match="got one ApprovalDecision"):
        await asyncio.to_thread(
            cycle.submit_with_tools_sync, None, bank, approvals=request.approve()
        )
    assert cycle.messages == saved and bank.runs == [("balance", {"account": "a"})]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_the_librarys_own_keys_on_open_calls_are_never_sent_to_the_model(
    serve, make_cycle, api
):
    # An app answering only some open calls itself (submit_messages): the request must
    # not carry the library's marks on the others (a MAC, a program's state), and they
    # are declined, as a new prompt declines them. They were left open, and every later
    # request had a call with no answer, which the API refuses.
    server = serve(TWO_CALLS, S.reply_text("ok"))
    cycle = make_cycle(server, api=api, approval_key=b"app secret")
    registry = ToolRegistry()

    @registry.tool(needs_approval=True)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        return "refunded"

    @registry.tool(needs_approval=True)
    def balance(account: str) -> int:
        """An account's balance."""
        return 100

    paused = await cycle.submit_with_tools("refund order 7", registry)
    assert len(paused.pending_approvals) == 2
    [turn] = [m for m in cycle.messages if m.get("role") == "assistant"]
    turn["tool_calls"][1].update(program_state={"snapshot": "S"}, paused_call={"state": {}})
    await cycle.submit_messages([{"role": "tool", "tool_call_id": "c_refund", "content": "no"}])

    sent = json.dumps(server.requests[-1].json)
    for key in ("open_call_mac", "program_state", "paused_call"):
        assert key not in sent
    assert sent.count("c_bal") == 2, "the call, and its answer"
    assert "no answer was given before the conversation went on" in sent
    assert '"no"' in sent  # the app's own answer stands


async def test_the_loops_needs_approval_checks_run_together_within_its_tool_timeout(
    serve, make_cycle
):
    # They ran one after another, with no time limit: a check that never answered hung
    # the run, and five 1 s checks took 5 s whatever the tool_timeout.
    registry = ToolRegistry()
    started: list[int] = []
    both = asyncio.Event()

    async def by_service(args, ctx) -> bool:
        started.append(args["amount"])
        if len(started) == 2:
            both.set()
        await both.wait()  # answers once the other check has started too
        return bool(args["amount"] > 100)

    async def never(args, ctx) -> bool:
        await asyncio.Event().wait()
        return False

    @registry.tool(needs_approval=by_service)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    @registry.tool(needs_approval=never)
    def wire(amount: int) -> str:
        """Wire money."""
        return f"wired {amount}"

    together = S.reply_tool_calls(
        [("pay", {"amount": 500}, "c_big"), ("pay", {"amount": 5}, "c_small")]
    )
    server = serve(together, S.reply_tool_calls([("wire", {"amount": 5}, "c_wire")]))
    cycle = make_cycle(server)
    response = await asyncio.wait_for(cycle.submit_with_tools("pay both", registry), 10)
    [request] = response.pending_approvals
    assert request.call_id == "c_big"
    assert request.reason == "tool 'pay' needs approval (its needs_approval returned True)"
    assert tool_messages(cycle.messages) == {"c_small": "paid 5"}

    stuck = make_cycle(server, tool_timeout=0.05)
    response = await asyncio.wait_for(stuck.submit_with_tools("wire it", registry), 10)
    [request] = response.pending_approvals
    assert request.reason == "tool 'wire' needs_approval did not answer within 0.05 s"
