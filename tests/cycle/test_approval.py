"""Human approval in the loop: pause, answer by call id, resume from the history alone."""

from __future__ import annotations

import asyncio
import json
import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import (
    ApprovalDecision,
    ApprovalError,
    ApprovalRequest,
    FinishReason,
    Image,
    LlmError,
    PermissionChecker,
    PermissionConfig,
    ToolApprovalRequested,
    ToolContext,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools.error import LlmUsageError
from tests._scripts import run_script

from .conftest import TWO_CALLS, S, assert_history_valid, tool_messages


async def _paused(serve, make_cycle, bank, *more, **config):
    server = serve(TWO_CALLS, *more)
    cycle = make_cycle(server, **config)
    response = await cycle.submit_with_tools("refund order 7", bank)
    return server, cycle, response


async def test_a_call_needing_approval_pauses_the_run_and_its_siblings_still_run(
    serve, make_cycle, bank
):
    server, cycle, response = await _paused(serve, make_cycle, bank)

    [request] = response.pending_approvals
    assert request == ApprovalRequest(
        "c_refund", "refund", {"order": 7, "amount": 20.0}, request.reason
    )
    assert "needs_approval=True" in request.reason
    assert response.stop_reason is FinishReason.TOOL_CALLS
    assert response.turns == 1
    assert len(server.requests) == 1  # paused before the next request
    assert bank.runs == [("balance", {"account": "a"})]
    # The history is the state: the waiting call is the only one left open.
    assert tool_messages(cycle.messages) == {"c_bal": "100"}
    json.dumps(cycle.messages)  # plain JSON


async def test_an_approved_call_runs_on_resume_and_the_loop_goes_on(serve, make_cycle, bank):
    server, cycle, response = await _paused(serve, make_cycle, bank, S.reply_text("Refunded."))

    [request] = response.pending_approvals
    resumed = await cycle.submit_with_tools(None, bank, approvals=[request.approve()])

    assert resumed.text == "Refunded."
    assert resumed.pending_approvals == ()
    assert bank.runs[-1] == ("refund", {"order": 7, "amount": 20.0})
    assert [inv.tool_name for inv in resumed.invocations] == ["refund"]
    sent = server.requests[1].json["messages"]
    assert tool_messages(sent) == {"c_bal": "100", "c_refund": "refunded 20.0 on order 7"}
    assert_history_valid(cycle.messages)


async def test_a_rejection_tells_the_model_the_user_declined_and_the_loop_goes_on(
    serve, make_cycle, bank
):
    server, cycle, response = await _paused(serve, make_cycle, bank, S.reply_text("OK, no refund."))

    [request] = response.pending_approvals
    resumed = await cycle.submit_with_tools(
        None, bank, approvals=[request.reject("refunds need a manager")]
    )

    assert resumed.text == "OK, no refund."
    assert ("refund", {"order": 7, "amount": 20.0}) not in bank.runs
    assert tool_messages(server.requests[1].json["messages"])["c_refund"] == (
        "Error: the user declined the call to tool 'refund': refunds need a manager"
    )
    [invocation] = resumed.invocations
    assert invocation.error is not None and invocation.error.user_message == (
        "refunds need a manager"
    )
    # The declined arguments, parsed, as an approved call's would be (issue 24 §7).
    assert invocation.input == {"order": 7, "amount": 20.0}


async def test_approval_with_edited_arguments_runs_the_edited_call(serve, make_cycle, bank):
    _, cycle, response = await _paused(serve, make_cycle, bank, S.reply_text("Done."))

    [request] = response.pending_approvals
    await cycle.submit_with_tools(
        None, bank, approvals=[request.approve(arguments={"order": 7, "amount": 5})]
    )

    assert bank.runs[-1] == ("refund", {"order": 7, "amount": 5.0})
    assert tool_messages(cycle.messages)["c_refund"] == (
        "[the user edited this call's arguments before it ran; it ran with "
        '{"amount": 5, "order": 7}]\nrefunded 5.0 on order 7'
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("inline", [False, True])
async def test_the_model_reads_the_arguments_an_edited_call_ran_with(
    serve, make_cycle, api, inline
):
    # The history keeps the model's own call (amount 500): told only "done", the model
    # would report 500 sent when the user had cut it to 50.
    registry = ToolRegistry()
    runs: list[int] = []

    @registry.tool(needs_approval=True)
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        runs.append(amount)
        return "done"

    server = serve(
        S.reply_tool_calls([("transfer", {"to": "Ada", "amount": 500}, "c1")]),
        S.reply_text("Sent."),
    )
    cycle = make_cycle(server, api=api)
    edit = {"to": "Ada", "amount": 50}
    if inline:
        async with cycle.submit_stream_with_tools("send Ada 500", registry) as events:
            async for event in events:
                if isinstance(event, ToolApprovalRequested):
                    event.approve(arguments=edit)
    else:
        [request] = (await cycle.submit_with_tools("send Ada 500", registry)).pending_approvals
        await cycle.submit_with_tools(None, registry, approvals=[request.approve(arguments=edit)])

    assert runs == [50]
    told = (
        "[the user edited this call's arguments before it ran; it ran with "
        '{"amount": 50, "to": "Ada"}]\ndone'
    )
    assert tool_messages(cycle.messages)["c1"] == told
    assert json.dumps(told)[1:-1] in json.dumps(server.requests[1].json)  # what the model read


@pytest.mark.parametrize("size", [1000, 80])
async def test_an_edited_call_s_note_and_result_stay_within_max_result_bytes(
    serve, make_cycle, size
):
    # The note was added after the result was cut, so the model read ~70 bytes more
    # than max_result_bytes; with a limit smaller than the note, the note is cut too.
    registry = ToolRegistry()

    @registry.tool(needs_approval=True)
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        return "done " + "x" * 1000

    server = serve(
        S.reply_tool_calls([("transfer", {"to": "Ada", "amount": 500}, "c1")]),
        S.reply_text("Sent."),
    )
    cycle = make_cycle(server, max_result_bytes=size)
    [request] = (await cycle.submit_with_tools("send Ada 500", registry)).pending_approvals
    await cycle.submit_with_tools(
        None, registry, approvals=[request.approve(arguments={"to": "Ada", "amount": 50})]
    )

    text = tool_messages(cycle.messages)["c1"]
    assert len(text.encode()) <= size
    assert text.startswith("[the user edited")
    assert "bytes omitted" in text
    if size > 200:
        assert text.startswith(
            "[the user edited this call's arguments before it ran; it ran with "
            '{"amount": 50, "to": "Ada"}]\ndone xxx'
        )
        assert text.endswith("xxx")


async def test_an_edited_call_cut_off_by_a_cancellation_says_what_it_started_with(
    serve, make_cycle
):
    # The model read only "aborted", and took its own arguments (500) for the ones the
    # call had started with.
    registry = ToolRegistry()

    @registry.tool(needs_approval=True)
    async def transfer(to: str, amount: int, ctx: ToolContext) -> str:
        """Send money."""
        ctx.report_progress(1, 2, "sending")
        await asyncio.Event().wait()
        return "done"

    server = serve(S.reply_tool_calls([("transfer", {"to": "Ada", "amount": 500}, "c1")]))
    cycle = make_cycle(server)
    async with cycle.submit_stream_with_tools("send Ada 500", registry) as events:
        async for event in events:
            if isinstance(event, ToolApprovalRequested):
                event.approve(arguments={"to": "Ada", "amount": 50})
            if isinstance(event, ToolProgress):  # the call is running
                break

    assert tool_messages(cycle.messages)["c1"] == (
        "[the user edited this call's arguments before it ran; it ran with "
        '{"amount": 50, "to": "Ada"}]\n'
        "Error: aborted; tool 'transfer' did not complete: the tool loop was cancelled"
    )
    assert_history_valid(cycle.messages)


async def test_an_approval_that_edits_nothing_adds_no_note(serve, make_cycle, bank):
    _, cycle, response = await _paused(serve, make_cycle, bank, S.reply_text("Done."))

    [request] = response.pending_approvals
    same = {"order": 7, "amount": 20.0}
    await cycle.submit_with_tools(None, bank, approvals=[request.approve(arguments=same)])

    assert tool_messages(cycle.messages)["c_refund"] == "refunded 20.0 on order 7"


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (
            ApprovalDecision("c_other", "refund", {"order": 7, "amount": 20.0}, True),
            "no call 'c_other'",
        ),
        (
            ApprovalDecision("c_refund", "balance", {"order": 7, "amount": 20.0}, True),
            "names tool 'balance'",
        ),
        (
            ApprovalDecision("c_refund", "refund", {"order": 8, "amount": 20.0}, True),
            "other arguments",
        ),
        (
            ApprovalDecision(
                "c_refund", "refund", {"order": 7, "amount": 20.0}, True, {"order": "x"}
            ),
            "invalid ones",
        ),
        (
            # NaN would pass a needs_approval rule's comparison on a later check.
            ApprovalDecision(
                "c_refund", "refund", {"order": 7, "amount": 20.0}, True, {"amount": float("nan")}
            ),
            "invalid ones: tool 'refund' got invalid arguments: amount: NaN is not a JSON number",
        ),
    ],
)
async def test_an_approval_that_does_not_match_the_pending_call_is_refused(
    serve, make_cycle, bank, decision, message
):
    server, cycle, _ = await _paused(serve, make_cycle, bank)
    before = list(cycle.messages)

    with pytest.raises(ApprovalError, match=message) as caught:
        await cycle.submit_with_tools(None, bank, approvals=[decision])

    assert isinstance(caught.value, ValueError)
    assert cycle.messages == before  # nothing ran, nothing was answered
    assert bank.runs == [("balance", {"account": "a"})]
    assert len(server.requests) == 1


async def test_approvals_with_a_new_prompt_are_refused(serve, make_cycle, bank):
    _, cycle, response = await _paused(serve, make_cycle, bank)
    with pytest.raises(ApprovalError, match="a new prompt was given"):
        await cycle.submit_with_tools(
            "and now?", bank, approvals=[response.pending_approvals[0].approve()]
        )


async def test_resuming_without_answers_pauses_again_without_a_request(serve, make_cycle, bank):
    server, cycle, response = await _paused(serve, make_cycle, bank)

    again = await cycle.submit_with_tools(None, bank)

    assert again.pending_approvals == response.pending_approvals
    assert again.turns == 0 and len(server.requests) == 1
    assert bank.runs == [("balance", {"account": "a"})]


async def test_a_callable_decides_from_the_arguments_and_context(serve, make_cycle):
    registry = ToolRegistry()
    seen: list[str] = []

    def big(args: dict[str, Any], ctx: ToolContext) -> bool:
        seen.append(ctx.call_id or "")
        return bool(args["amount"] > 100)

    async def big_async(args: dict[str, Any], ctx: ToolContext) -> bool:
        return bool(args["amount"] > 100)

    @registry.tool(needs_approval=big)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    @registry.tool(needs_approval=big_async)
    def send(amount: int) -> str:
        """Send."""
        return f"sent {amount}"

    server = serve(
        S.reply_tool_calls(
            [
                ("pay", {"amount": 5}, "p1"),
                ("pay", {"amount": 500}, "p2"),
                ("send", {"amount": 5}, "s1"),
                ("send", {"amount": 500}, "s2"),
            ]
        )
    )
    cycle = make_cycle(server)
    response = await cycle.submit_with_tools("pay", registry)

    assert [r.call_id for r in response.pending_approvals] == ["p2", "s2"]
    assert "returned True" in response.pending_approvals[0].reason
    assert sorted(seen) == ["p1", "p2"]
    assert tool_messages(cycle.messages) == {"p1": "paid 5", "s1": "sent 5"}


async def test_permission_ask_pauses_and_denied_still_wins(serve, make_cycle):
    config = PermissionConfig(allowed=["read"], denied=["shell"], ask=["write", "shell"])
    registry = ToolRegistry(permission_checker=PermissionChecker(config))

    @registry.tool(permissions=["write"])
    def save(text: str) -> str:
        """Save a note."""
        return "saved"

    @registry.tool(permissions=["shell"])
    def run(command: str) -> str:
        """Run a command."""
        return "ran"

    server = serve(S.reply_tool_calls([("save", {"text": "hi"}, "w1")]))
    response = await make_cycle(server).submit_with_tools("save", registry)
    [request] = response.pending_approvals
    assert request.reason == "permission 'write' is in PermissionConfig.ask"

    server = serve(S.reply_tool_calls([("run", {"command": "ls"}, "x1")]))
    with pytest.raises(LlmError, match="'shell', which is denied"):
        await make_cycle(server).submit_with_tools("run", registry)


async def test_the_permission_policy_is_checked_again_on_resume(serve, make_cycle, bank):
    _, cycle, response = await _paused(serve, make_cycle, bank)
    # Between pause and resume, the app's policy changed: refunds are now denied.
    strict = bank.with_permission_checker(
        PermissionChecker(PermissionConfig(allow_unspecified=False))
    )

    with pytest.raises(LlmError, match="permission denied: tool 'refund'"):
        await cycle.submit_with_tools(
            None, strict, approvals=[response.pending_approvals[0].approve()]
        )
    assert bank.runs == [("balance", {"account": "a"})]


async def test_signed_approvals_are_bound_to_their_call(serve, make_cycle, bank):
    _server, cycle, response = await _paused(
        serve, make_cycle, bank, S.reply_text("Done."), approval_key=b"app secret"
    )
    [request] = response.pending_approvals
    assert request.signature is not None

    unsigned = ApprovalDecision(request.call_id, request.tool_name, request.arguments, True)
    with pytest.raises(ApprovalError, match="missing or wrong signature"):
        await cycle.submit_with_tools(None, bank, approvals=[unsigned])
    # A history tampered with after the pause: the signature no longer matches it.
    tampered = json.loads(json.dumps(cycle.messages))
    tampered[1]["tool_calls"][0]["function"]["arguments"] = '{"order": 7, "amount": 9000}'
    forged = ApprovalRequest(
        request.call_id, "refund", {"order": 7, "amount": 9000}, "", request.signature
    )
    saved, cycle.messages = cycle.messages, tampered
    with pytest.raises(ApprovalError, match="missing or wrong signature"):
        await cycle.submit_with_tools(None, bank, approvals=[forged.approve()])
    cycle.messages = saved

    await cycle.submit_with_tools(None, bank, approvals=[request.approve()])
    assert bank.runs[-1] == ("refund", {"order": 7, "amount": 20.0})


async def test_with_a_key_an_open_call_changed_in_the_saved_history_never_runs(
    serve, make_cycle, bank
):
    @bank.tool
    def pay(to: str, amount: float) -> str:
        """Pay someone."""
        bank.runs.append(("pay", {"to": to, "amount": amount}))
        return "paid"

    server, cycle, _ = await _paused(
        serve, make_cycle, bank, S.reply_text("Done."), approval_key=b"app secret"
    )
    saved = json.dumps(cycle.messages)  # what goes to the browser and comes back
    assert "open_call_mac" in json.loads(saved)[1]["tool_calls"][0]

    def edited(change: Any) -> list[dict[str, Any]]:
        history = json.loads(saved)
        change(history[1]["tool_calls"][0])
        return history

    def to_mallory(call: dict[str, Any]) -> None:
        call["function"] = {"name": "pay", "arguments": '{"to": "mallory", "amount": 99}'}

    for history in (
        edited(to_mallory),
        edited(lambda call: call.pop("open_call_mac")),
        edited(lambda call: call["function"].update(arguments='{"order": 7, "amount": 9000}')),
    ):
        fresh = make_cycle(server, approval_key=b"app secret")
        fresh.messages[:] = history
        for _ in range(2):  # refused again: the first refusal signed nothing
            with pytest.raises(ApprovalError, match="open call 'c_refund' has a missing or wrong"):
                await fresh.submit_with_tools(None, bank)
    assert len(server.requests) == 1
    assert bank.runs == [("balance", {"account": "a"})]

    fresh = make_cycle(server, approval_key=b"app secret")
    fresh.messages[:] = json.loads(saved)
    [request] = (await fresh.submit_with_tools(None, bank)).pending_approvals  # listed again
    done = await fresh.submit_with_tools(None, bank, approvals=[request.approve()])
    assert done.text == "Done."
    assert bank.runs[-1] == ("refund", {"order": 7, "amount": 20.0})
    assert "open_call_mac" not in json.dumps(server.requests[1].json)
    assert "open_call_mac" not in json.dumps(fresh.messages)


# -- streaming -------------------------------------------------------------------------


async def test_stream_order_approval_events_come_between_turn_complete_and_started(
    serve, make_cycle, bank
):
    server = serve(TWO_CALLS, S.reply_text("Done."))
    cycle = make_cycle(server)
    order: list[tuple[str, str | None]] = []
    async with cycle.submit_stream_with_tools("refund", bank) as events:
        async for event in events:
            if isinstance(event, ToolApprovalRequested):
                assert event.call_id == "c_refund" and event.input == {"order": 7, "amount": 20.0}
                event.approve()
            call_id = getattr(event, "call_id", None)
            if isinstance(
                event,
                (TurnComplete, ToolApprovalRequested, ToolExecutionStarted, ToolExecutionCompleted),
            ):
                order.append((type(event).__name__, call_id))

    assert order[:4] == [
        ("TurnComplete", None),
        ("ToolApprovalRequested", "c_refund"),
        ("ToolExecutionStarted", "c_refund"),
        ("ToolExecutionStarted", "c_bal"),
    ]
    assert sorted(order[4:6]) == [
        ("ToolExecutionCompleted", "c_bal"),
        ("ToolExecutionCompleted", "c_refund"),
    ]
    assert order[6:] == [("TurnComplete", None)]
    assert events.response is not None and events.response.text == "Done."
    assert_history_valid(cycle.messages)


async def test_stream_inline_rejection_goes_on_to_the_model(serve, make_cycle, bank):
    server = serve(TWO_CALLS, S.reply_text("No refund then."))
    cycle = make_cycle(server)
    completed: list[ToolExecutionCompleted] = []
    async for event in cycle.submit_stream_with_tools("refund", bank):
        if isinstance(event, ToolApprovalRequested):
            event.reject("not today")
        elif isinstance(event, ToolExecutionCompleted):
            completed.append(event)

    rejected = next(e for e in completed if e.call_id == "c_refund")
    assert rejected.error is not None and "declined" in str(rejected.error)
    assert tool_messages(server.requests[1].json["messages"])["c_refund"].endswith("not today")


async def test_stream_unanswered_event_pauses_and_a_stop_at_it_keeps_the_call_open(
    serve, make_cycle, bank
):
    server = serve(TWO_CALLS, S.reply_text("Done."))
    cycle = make_cycle(server)
    async with cycle.submit_stream_with_tools("refund", bank) as events:
        async for event in events:
            if isinstance(event, ToolApprovalRequested):
                request = event.request
                break  # ask the user later, maybe in another process
    # The sibling never ran (the loop stopped), so the model is told; the waiting
    # call stays open for the resume.
    assert "c_refund" not in tool_messages(cycle.messages)
    assert tool_messages(cycle.messages)["c_bal"].startswith("Error: aborted")

    events = cycle.submit_stream_with_tools(None, bank, approvals=[request.approve()])
    response = await events.collect()
    assert response.text == "Done."
    assert_history_valid(cycle.messages)


async def test_stream_left_unanswered_ends_with_the_pending_requests(serve, make_cycle, bank):
    server = serve(TWO_CALLS)
    cycle = make_cycle(server)
    response = await cycle.submit_stream_with_tools("refund", bank).collect()
    assert [r.call_id for r in response.pending_approvals] == ["c_refund"]
    assert bank.runs == [("balance", {"account": "a"})]


async def test_stream_an_answer_after_the_next_event_is_logged_and_serves_a_resume(
    serve, make_cycle, bank, caplog
):
    server = serve(TWO_CALLS, S.reply_text("Done."))
    cycle = make_cycle(server)
    asked: list[ToolApprovalRequested] = []
    with caplog.at_level(logging.WARNING, logger="agcore_tools.approval"):
        async with cycle.submit_stream_with_tools("refund", bank) as events:
            async for event in events:
                if isinstance(event, ToolApprovalRequested):
                    asked.append(event)
                elif asked and not caplog.records:
                    # Too late: the loop read no answer and moved on. Before, this was
                    # taken and ignored, and the refund stayed waiting without a word.
                    decision = asked[0].approve()
    assert "the inline answer to call 'c_refund' came after the stream moved on" in caplog.text
    assert bank.runs == [("balance", {"account": "a"})]  # this run did not use it
    response = events.response
    assert response is not None and [r.call_id for r in response.pending_approvals] == ["c_refund"]
    # The decision still serves a resume.
    done = await cycle.submit_with_tools(None, bank, approvals=[decision])
    assert done.text == "Done." and ("refund", {"order": 7, "amount": 20.0}) in bank.runs


async def test_stream_an_answer_made_after_stopping_at_the_event_is_not_logged(
    serve, make_cycle, bank, caplog
):
    server = serve(TWO_CALLS, S.reply_text("Done."))
    cycle = make_cycle(server)
    with caplog.at_level(logging.WARNING, logger="agcore_tools.approval"):
        async with cycle.submit_stream_with_tools("refund", bank) as events:
            async for event in events:
                if isinstance(event, ToolApprovalRequested):
                    waiting = event
                    break  # ask the user later
        decision = waiting.approve()  # for the resume: the documented way
    assert caplog.records == []
    done = await cycle.submit_with_tools(None, bank, approvals=[decision])
    assert done.text == "Done."


# -- the history is the state: resume in another process ----------------------------------

RESUME = textwrap.dedent(
    """
    import json, sys
    from openai import OpenAI
    from agcore_tools import CycleConfig, LlmCycle, ToolRegistry

    registry = ToolRegistry()

    @registry.tool(needs_approval=True)
    def refund(order: int, amount: float) -> str:
        '''Refund an order.'''
        return f"refunded {amount} on order {order} in a new process"

    @registry.tool
    def balance(account: str) -> int:
        '''An account's balance.'''
        return 100

    saved, base_url = sys.argv[1], sys.argv[2]
    cycle = LlmCycle(CycleConfig("m"), client=OpenAI(base_url=base_url, api_key="-"))
    with open(saved, encoding="utf-8") as f:
        cycle.messages = json.load(f)
    # The pending requests come back from the history alone ...
    waiting = cycle.submit_with_tools_sync(None, registry).pending_approvals
    print("pending:", [(r.call_id, r.tool_name, r.arguments) for r in waiting])
    # ... and the app answers them.
    response = cycle.submit_with_tools_sync(None, registry, approvals=[waiting[0].approve()])
    print("answer:", response.text)
    cycle.close_sync()
    """
)


async def test_a_paused_run_resumes_in_another_process_from_its_messages(
    serve, make_cycle, bank, tmp_path: Path
):
    server, cycle, _response = await _paused(serve, make_cycle, bank, S.reply_text("Refunded."))
    saved = tmp_path / "history.json"
    saved.write_text(json.dumps(cycle.messages), encoding="utf-8")
    script = tmp_path / "resume.py"
    script.write_text(RESUME, encoding="utf-8")

    done = run_script(script, str(saved), server.base_url)

    assert done.returncode == 0, done.stderr
    assert "pending: [('c_refund', 'refund', {'order': 7, 'amount': 20.0})]" in done.stdout
    assert "answer: Refunded." in done.stdout
    assert tool_messages(server.requests[1].json["messages"])["c_refund"] == (
        "refunded 20.0 on order 7 in a new process"
    )


def test_sync_stream_answers_inline_and_sync_resume(serve, bank) -> None:
    from openai import OpenAI

    from agcore_tools import CycleConfig, LlmCycle

    server = serve(TWO_CALLS, S.reply_text("Done."), TWO_CALLS, S.reply_text("Again."))
    with LlmCycle(CycleConfig("m"), client=OpenAI(base_url=server.base_url, api_key="-")) as cycle:
        with cycle.submit_stream_with_tools_sync("refund", bank) as events:
            for event in events:
                if isinstance(event, ToolApprovalRequested):
                    event.approve(arguments={"order": 7, "amount": 1})
        assert events.response is not None and events.response.text == "Done."
        assert ("refund", {"order": 7, "amount": 1.0}) in bank.runs

        paused = cycle.submit_with_tools_sync("again", bank)
        [request] = paused.pending_approvals
        done = cycle.submit_with_tools_sync(None, bank, approvals=[request.reject()])
        assert done.text == "Again."
        # The server gave the id of the first run's call again: this call has its own.
        assert request.call_id != "c_refund"
        assert tool_messages(cycle.messages)[request.call_id] == (
            "Error: the user declined the call to tool 'refund'"
        )


async def test_a_new_prompt_on_a_paused_run_declines_the_waiting_calls(serve, make_cycle, bank):
    server, cycle, _ = await _paused(serve, make_cycle, bank, S.reply_text("Something else."))

    response = await cycle.submit_with_tools("never mind, what's new?", bank)

    assert response.text == "Something else."
    sent = server.requests[1].json["messages"]
    assert tool_messages(sent)["c_refund"] == (
        "Error: the user declined the call to tool 'refund': no answer was given before the "
        "conversation went on"
    )
    assert sent[-1] == {"role": "user", "content": "never mind, what's new?"}
    assert_history_valid(cycle.messages)
    assert ("refund", {"order": 7, "amount": 20.0}) not in bank.runs


async def test_a_chat_without_tools_on_a_paused_run_declines_the_waiting_calls_too(
    serve, make_cycle, bank
):
    # submit() sent the open call unanswered: a request every API refuses, and every
    # later one carried it.
    server, cycle, _ = await _paused(
        serve, make_cycle, bank, S.reply_text("Four."), S.reply_text("Next.")
    )

    assert (await cycle.submit("actually, what's 2+2?")).text == "Four."
    sent = server.requests[1].json["messages"]
    assert tool_messages(sent)["c_refund"].endswith(
        "no answer was given before the conversation went on"
    )
    assert sent[-1] == {"role": "user", "content": "actually, what's 2+2?"}
    assert_history_valid(cycle.messages)
    stale = ApprovalRequest("c_refund", "refund", {"order": 7, "amount": 20.0}, "asked")
    with pytest.raises(ApprovalError, match="declined when a new message came first"):
        await cycle.submit_with_tools(None, bank, approvals=[stale.approve()])
    assert ("refund", {"order": 7, "amount": 20.0}) not in bank.runs


PNG = b"\x89PNG\r\n\x1a\n" + bytes(256)


@pytest.mark.parametrize("answer", ["approve", "new prompt"])
async def test_a_call_waits_for_approval_beside_a_sibling_that_returned_an_image(
    serve, make_cycle, bank, answer
):
    # On Chat Completions the image follows the turn's tool messages in a user message:
    # the waiting call is still open behind it, and its answer goes before it.
    @bank.tool
    def receipt(order: int) -> Image:
        """An order's receipt."""
        return Image(PNG)

    turn = S.reply_tool_calls(
        [("receipt", {"order": 7}, "c_img"), ("refund", {"order": 7, "amount": 5.0}, "c_refund")]
    )
    server = serve(turn, S.reply_text("Done."))
    cycle = make_cycle(server)
    [request] = (await cycle.submit_with_tools("refund order 7", bank)).pending_approvals
    assert request.call_id == "c_refund"
    fresh = make_cycle(server)
    fresh.messages[:] = json.loads(json.dumps(cycle.messages))

    if answer == "approve":
        again = await fresh.submit_with_tools(None, bank)  # no answer: still waiting
        assert [r.call_id for r in again.pending_approvals] == ["c_refund"]
        assert len(server.requests) == 1
        done = await fresh.submit_with_tools(None, bank, approvals=[request.approve()])
        assert bank.runs == [("refund", {"order": 7, "amount": 5.0})]
    else:
        done = await fresh.submit_with_tools("never mind", bank)
        assert bank.runs == []
    assert done.text == "Done."
    sent = server.requests[1].json["messages"]
    roles = [m["role"] for m in sent]
    assert roles[:5] == ["user", "assistant", "tool", "tool", "user"]
    assert [m["tool_call_id"] for m in sent[2:4]] == ["c_img", "c_refund"]
    assert sent[4]["content"][0]["text"] == "Attachments of the tool results above:"


async def test_tool_messages_an_app_sends_itself_answer_the_open_calls(serve, make_cycle, bank):
    server, cycle, _ = await _paused(serve, make_cycle, bank, S.reply_text("Noted."))

    answer = {"role": "tool", "tool_call_id": "c_refund", "content": "refunded by hand"}
    assert (await cycle.submit_messages([answer])).text == "Noted."
    sent = server.requests[1].json["messages"]
    assert tool_messages(sent)["c_refund"] == "refunded by hand"
    assert sorted(m["tool_call_id"] for m in sent if m["role"] == "tool") == ["c_bal", "c_refund"]


@pytest.mark.parametrize("prompt", [None, 5, ["hi"]])
async def test_a_prompt_that_is_not_a_string_is_refused_before_anything_is_sent(
    serve, make_cycle, prompt
):
    server = serve(S.reply_text("never sent"))
    cycle = make_cycle(server)
    with pytest.raises(LlmUsageError, match="a prompt is a string, got"):
        await cycle.submit(prompt)
    assert isinstance(LlmUsageError("x"), TypeError)
    assert (server.requests, cycle.messages) == ([], [])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_two_calls_a_server_gave_one_id_are_each_approved_on_their_own(
    serve, make_cycle, bank, stream, caplog
):
    # Some servers repeat an id within a turn. Each call needs its own answer: with one
    # id between them, no answer could resume the run, and streamed, their arguments ran
    # together.
    twins = S.reply_tool_calls(
        [("refund", {"order": 7, "amount": 1.0}, "c"), ("refund", {"order": 8, "amount": 2.0}, "c")]
    )
    server = serve(twins, S.reply_text("Both refunded."))
    cycle = make_cycle(server)
    first = (
        await cycle.submit_stream_with_tools("refund both", bank).collect()
        if stream
        else await cycle.submit_with_tools("refund both", bank)
    )
    pending = first.pending_approvals
    assert [(p.call_id == "c", p.arguments) for p in pending] == [
        (True, {"order": 7, "amount": 1.0}),
        (False, {"order": 8, "amount": 2.0}),
    ]
    assert "the server gave two tool calls of one turn the id 'c'" in caplog.text
    done = await cycle.submit_with_tools(None, bank, approvals=[p.approve() for p in pending])
    assert done.text == "Both refunded."
    # Each ran once with its own arguments; approved together, they run at once, in
    # worker threads, so in no fixed order.
    assert sorted(bank.runs, key=lambda run: run[1]["order"]) == [
        ("refund", {"order": 7, "amount": 1.0}),
        ("refund", {"order": 8, "amount": 2.0}),
    ]
    assert_history_valid(cycle.messages)


async def test_a_paused_response_shows_what_awaits_approval(serve, make_cycle, bank):
    _, _, response = await _paused(serve, make_cycle, bank)
    assert '| awaiting approval | refund({"order": 7, "amount": 20.0}) [c_refund] |' in (
        response._repr_markdown_()
    )


async def test_approvals_without_open_calls_are_refused(serve, make_cycle, bank):
    server = serve(S.reply_text("Hi."))
    cycle = make_cycle(server)
    await cycle.submit_with_tools("hello", bank)
    stray = ApprovalRequest("c9", "refund", {"order": 1, "amount": 1.0}, "asked").approve()

    with pytest.raises(ApprovalError, match="the history has no open calls"):
        await cycle.submit_with_tools(None, bank, approvals=[stray])
    assert len(server.requests) == 1


def test_approval_key_must_be_bytes() -> None:
    from agcore_tools import CycleConfig, LlmConfigError

    with pytest.raises(LlmConfigError, match="approval_key must be non-empty bytes"):
        CycleConfig("m", approval_key="secret")  # type: ignore[arg-type]
    assert "secret" not in repr(CycleConfig("m", approval_key=b"secret"))


async def test_the_resumed_run_keeps_the_paused_runs_shared_state(serve, make_cycle):
    registry = ToolRegistry()

    @registry.tool
    def look_up(order: int, ctx: ToolContext) -> str:
        """Look an order up."""
        ctx.shared_state["customer"] = f"customer of {order}"
        return "found"

    @registry.tool(needs_approval=True)
    def refund(order: int, ctx: ToolContext) -> str:
        """Refund an order."""
        return f"refunded {ctx.shared_state['customer']}"

    server = serve(
        S.reply_tool_calls([("look_up", {"order": 7}, "c1"), ("refund", {"order": 7}, "c2")]),
        S.reply_text("Done."),
    )
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("refund 7", registry)
    await cycle.submit_with_tools(None, registry, approvals=[paused.pending_approvals[0].approve()])
    assert tool_messages(cycle.messages)["c2"] == "refunded customer of 7"
