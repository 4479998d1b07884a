"""Approval in the drop-in helper (``run_tool_calls``), and the approval values themselves."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from typing import Any

import pytest

from agcore_tools import (
    ApprovalDecision,
    ApprovalError,
    ApprovalRequest,
    BaseTool,
    InvalidArgumentsError,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    ResultCache,
    ToolCallOutputs,
    ToolConfigError,
    ToolContext,
    ToolPolicy,
    ToolRegistry,
)


def _registry() -> ToolRegistry:
    registry = ToolRegistry(permission_checker=PermissionChecker(PermissionConfig(ask=["write"])))
    registry.runs = []  # type: ignore[attr-defined]

    @registry.tool(permissions=["write"])
    def save(text: str) -> str:
        """Save a note."""
        registry.runs.append(text)  # type: ignore[attr-defined]
        return f"saved {text}"

    @registry.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    return registry


def _chat(name: str, call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


async def test_run_tool_calls_returns_the_pending_requests_and_runs_the_rest() -> None:
    registry = _registry()
    calls = [_chat("save", "c1", {"text": "hi"}), _chat("echo", "c2", {"text": "yo"})]

    outputs = await registry.run_tool_calls(calls)

    assert isinstance(outputs, ToolCallOutputs) and isinstance(outputs, list)
    assert outputs == [{"role": "tool", "tool_call_id": "c2", "content": "yo"}]
    [request] = outputs.pending_approvals
    assert (request.call_id, request.tool_name, request.arguments) == ("c1", "save", {"text": "hi"})
    assert request.reason == "permission 'write' is in PermissionConfig.ask"
    assert registry.runs == []  # type: ignore[attr-defined]

    approved = await registry.run_tool_calls([calls[0]], approvals=[request.approve()])
    assert approved == [{"role": "tool", "tool_call_id": "c1", "content": "saved hi"}]
    assert approved.pending_approvals == ()

    rejected = registry.run_tool_calls_sync([calls[0]], approvals=[request.reject("no")])
    assert rejected[0]["content"] == "Error: the user declined the call to tool 'save': no"
    assert registry.runs == ["hi"]  # type: ignore[attr-defined]


async def test_passing_the_same_calls_again_runs_only_the_answered_ones() -> None:
    registry = _registry()
    charges: list[int] = []

    @registry.tool
    def charge(order: int) -> str:
        """Charge an order."""
        charges.append(order)
        return f"charged {order}"

    calls = [
        _chat("charge", "c1", {"order": 6}),
        _chat("save", "c2", {"text": "hi"}),
        _chat("save", "c3", {"text": "ho"}),
    ]
    first = await registry.run_tool_calls(calls)
    assert [m["tool_call_id"] for m in first] == ["c1"]
    c2, c3 = first.pending_approvals

    second = await registry.run_tool_calls(calls, approvals=[c2.approve()])
    assert second == [{"role": "tool", "tool_call_id": "c2", "content": "saved hi"}]
    assert [r.call_id for r in second.pending_approvals] == ["c3"]
    # Unanswered calls that need approval wait again; passing only those answers c3.
    third = await registry.run_tool_calls(calls[2:], approvals=[c3.reject("no")])
    assert [m["tool_call_id"] for m in third] == ["c3"] and third.pending_approvals == ()
    assert charges == [6] and registry.runs == ["hi"]  # type: ignore[attr-defined]

    # A call named in approvals that needs none still runs, on its own.
    decision = ApprovalDecision("c1", "charge", {"order": 6}, True)
    again = await registry.run_tool_calls(calls, approvals=[decision])
    assert [m["tool_call_id"] for m in again] == ["c1"] and charges == [6, 6]
    assert [r.call_id for r in again.pending_approvals] == ["c2", "c3"]


async def test_run_tool_calls_approvals_for_responses_items_and_signed() -> None:
    registry = _registry()
    item = {"type": "function_call", "call_id": "r1", "name": "save", "arguments": '{"text": "a"}'}

    outputs = await registry.run_tool_calls([item], approval_key=b"k")
    [request] = outputs.pending_approvals
    assert outputs == [] and request.signature is not None

    with pytest.raises(ApprovalError, match="wrong signature"):
        await registry.run_tool_calls(
            [item],
            approvals=[dataclasses.replace(request.approve(), signature="0" * 64)],
            approval_key=b"k",
        )
    done = await registry.run_tool_calls(
        [item], approvals=[request.approve(arguments={"text": "b"})], approval_key=b"k"
    )
    saved = '[the user edited this call\'s arguments before it ran; it ran with {"text": "b"}]'
    assert done == [
        {"type": "function_call_output", "call_id": "r1", "output": f"{saved}\nsaved b"}
    ]


async def test_run_tool_calls_keeps_an_edited_call_s_note_within_max_result_bytes() -> None:
    # The note was added after the result was cut: the output exceeded the limit.
    registry = _registry()
    long = "y" * 1000
    [request] = (
        await registry.run_tool_calls([_chat("save", "c1", {"text": "a"})])
    ).pending_approvals

    [done] = await registry.run_tool_calls(
        [_chat("save", "c1", {"text": "a"})],
        approvals=[request.approve(arguments={"text": long})],
        max_result_bytes=300,
    )

    assert len(done["content"].encode()) <= 300
    assert done["content"].startswith("[the user edited this call's arguments before it ran")
    assert done["content"].endswith("yyy") and "bytes omitted" in done["content"]


async def test_answers_are_checked_before_any_call_runs() -> None:
    registry = _registry()
    calls = [_chat("save", "c1", {"text": "hi"})]
    with pytest.raises(ApprovalError, match="two approvals answer call 'c1'"):
        decision = ApprovalDecision("c1", "save", {"text": "hi"}, True)
        await registry.run_tool_calls(calls, approvals=[decision, decision])
    with pytest.raises(ApprovalError, match="must be ApprovalDecision values"):
        await registry.run_tool_calls(calls, approvals=[True])  # type: ignore[list-item]
    assert registry.runs == []  # type: ignore[attr-defined]


async def test_a_failing_needs_approval_check_asks_a_person() -> None:
    registry = ToolRegistry()

    def broken(args: dict[str, Any], ctx: ToolContext) -> bool:
        raise KeyError("limit")

    @registry.tool(needs_approval=broken)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    outputs = await registry.run_tool_calls([_chat("pay", "c1", {"amount": 1})])
    [request] = outputs.pending_approvals
    assert request.reason == "tool 'pay' needs_approval raised KeyError: 'limit'"


@pytest.mark.parametrize(
    ("config", "needs_approval"),
    [(PermissionConfig(), True), (PermissionConfig(denied=["delete"], ask=["delete"]), False)],
    ids=["needs-approval", "ask-and-denied"],
)
async def test_a_call_to_a_denied_tool_is_refused_not_put_to_a_person(
    config: PermissionConfig, needs_approval: bool
) -> None:
    # Denied wins even over ask: a person was asked, and their yes ended "denied" anyway.
    registry = ToolRegistry(PermissionChecker(config))

    @registry.tool(permissions=["delete"], needs_approval=needs_approval)
    def rm(path: str) -> str:
        """Remove a file."""
        return "gone"

    outputs = await registry.run_tool_calls([_chat("rm", "c1", {"path": "/a"})])

    assert outputs.pending_approvals == ()
    assert outputs == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "Error: permission denied: tool 'rm' needs 'delete', which is denied",
        }
    ]


def test_a_decision_is_plain_data() -> None:
    registry = _registry()
    outputs = registry.run_tool_calls_sync([_chat("save", "c1", {"text": "hi"})])
    decision = outputs.pending_approvals[0].approve(arguments={"text": "ho"})
    again = ApprovalDecision(**json.loads(json.dumps(dataclasses.asdict(decision))))
    assert again == decision
    assert (
        registry.run_tool_calls_sync([_chat("save", "c1", {"text": "hi"})], approvals=[again])[0][
            "content"
        ]
        == "[the user edited this call's arguments before it ran; it ran with "
        '{"text": "ho"}]\nsaved ho'
    )


@pytest.mark.parametrize("shape", ["chat", "responses"])
async def test_an_edited_calls_output_tells_the_model_the_arguments_it_ran_with(shape) -> None:
    # The model's own call (text "hi") stays in the app's history; "saved" alone would
    # read as the model's arguments having run.
    registry = _registry()
    calls: list[Any] = [_chat("save", "c1", {"text": "hi"})]
    if shape == "responses":
        calls = [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "save",
                "arguments": '{"text": "hi"}',
            }
        ]
    [request] = (await registry.run_tool_calls(calls)).pending_approvals
    edited = await registry.run_tool_calls(
        calls, approvals=[request.approve(arguments={"text": "ho"})]
    )
    unedited = await registry.run_tool_calls(calls, approvals=[request.approve()])

    [output] = edited
    told = output["content"] if shape == "chat" else output["output"]
    assert told == (
        "[the user edited this call's arguments before it ran; it ran with "
        '{"text": "ho"}]\nsaved ho'
    )
    assert registry.runs == ["ho", "hi"]  # type: ignore[attr-defined]
    assert "edited" not in json.dumps(list(unedited))


async def test_a_signed_answer_without_the_key_is_refused() -> None:
    registry = _registry()
    calls = [_chat("save", "c1", {"text": "hi"})]
    [request] = (await registry.run_tool_calls(calls, approval_key=b"k")).pending_approvals

    with pytest.raises(ApprovalError, match="is signed, but no approval_key was given"):
        await registry.run_tool_calls(calls, approvals=[request.approve()])
    assert registry.runs == []  # type: ignore[attr-defined]


def test_a_refused_input_answer_has_a_redacted_form_without_its_values() -> None:
    from agcore_tools.pending import check_content

    schema = {"type": "object", "properties": {"age": {"type": "integer"}}}
    with pytest.raises(ApprovalError, match="'x-SECRET' is not of type") as refused:
        check_content("q1", schema, {"age": "x-SECRET"})
    assert refused.value.redacted == (
        "the answer to input request 'q1' does not fit its schema: the 'type' rule failed (at age)"
    )


async def test_approvals_given_empty_run_nothing_again() -> None:
    # An app passing the answers given so far ([] when the user answered nothing yet)
    # must not run again the calls that ran in the first round.
    registry = _registry()
    calls = [_chat("save", "c1", {"text": "hi"}), _chat("echo", "c2", {"text": "yo"})]
    first = await registry.run_tool_calls(calls)
    assert [m["tool_call_id"] for m in first] == ["c2"]

    again = await registry.run_tool_calls(calls, approvals=[])
    assert again == [] and [r.call_id for r in again.pending_approvals] == ["c1"]
    synced = registry.run_tool_calls_sync(calls, approvals=iter(()))
    assert synced == [] and [r.call_id for r in synced.pending_approvals] == ["c1"]

    # Round by round, passing only the calls still waiting runs each once.
    waiting = {r.call_id for r in again.pending_approvals}
    done = await registry.run_tool_calls(
        [c for c in calls if c["id"] in waiting], approvals=[again.pending_approvals[0].approve()]
    )
    assert done == [{"role": "tool", "tool_call_id": "c1", "content": "saved hi"}]
    assert done.pending_approvals == () and registry.runs == ["hi"]  # type: ignore[attr-defined]


async def test_a_decision_with_fields_of_the_wrong_type_is_refused() -> None:
    # Answers arrive as JSON from forms and queues: "false" is truthy, and the
    # signature does not cover `approved`, so a rejection must never run.
    registry = _registry()
    calls = [_chat("save", "c1", {"text": "hi"})]
    [request] = (await registry.run_tool_calls(calls, approval_key=b"k")).pending_approvals
    data = dataclasses.asdict(request.reject())
    with pytest.raises(ApprovalError, match=r"ApprovalDecision\.approved must be a bool"):
        ApprovalDecision(**{**data, "approved": "false"})
    for name, value in [
        ("edited_arguments", '{"text": "ho"}'),
        ("arguments", '{"text": "hi"}'),
        ("call_id", 1),
        ("signature", 0),
    ]:
        with pytest.raises(ApprovalError, match=rf"ApprovalDecision\.{name} must be a"):
            ApprovalDecision(**{**data, name: value})
    with pytest.raises(ApprovalError, match=r"approve\(arguments=...\) takes a mapping"):
        request.approve(arguments="text=ho")  # type: ignore[arg-type]
    assert registry.runs == []  # type: ignore[attr-defined]


async def test_no_one_is_asked_about_a_call_whose_arguments_the_tool_refuses() -> None:
    registry = ToolRegistry()
    asked: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []

    def over_limit(args: dict[str, Any], ctx: ToolContext) -> bool:  # the guide's rule
        asked.append(args)
        return bool(args["amount"] > 100)

    @registry.tool(needs_approval=over_limit)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        return f"refunded {amount}"

    class Remote(BaseTool):  # checks arguments without running, as an MCP tool does
        name, description, needs_approval = "wipe", "Wipe a disk.", True

        def check_arguments(self, args: dict[str, Any]) -> None:
            if not isinstance(args.get("disk"), str):
                raise InvalidArgumentsError(self.name, "disk: must be a string")

        async def execute(self, args: dict[str, Any], ctx: ToolContext) -> str:
            sent.append(args)  # a server that takes anything
            return "wiped"

    registry.register(Remote())
    calls = [_chat("refund", "c1", {"order": 7}), _chat("wipe", "c2", {"disk": ["sda"]})]

    outputs = await registry.run_tool_calls(calls)

    assert outputs.pending_approvals == ()
    assert [m["content"] for m in outputs] == [
        "Error: tool 'refund' got invalid arguments: amount: Field required",
        "Error: tool 'wipe' got invalid arguments: disk: must be a string",
    ]
    assert asked == [] and sent == []
    # A valid call still asks; its rule reads the arguments.
    [request] = (
        await registry.run_tool_calls([_chat("refund", "c3", {"order": 7, "amount": 900})])
    ).pending_approvals
    assert request.reason == "tool 'refund' needs approval (its needs_approval returned True)"
    # An answer to such a call (asked before the tool's schema changed, say) that edits
    # its arguments into valid ones runs it; one that does not gets the error.
    edit = ApprovalDecision("c1", "refund", {"order": 7}, True, {"order": 7, "amount": 5.0})
    fixed = await registry.run_tool_calls([calls[0]], approvals=[edit])
    assert fixed[0]["content"].endswith('it ran with {"amount": 5.0, "order": 7}]\nrefunded 5.0')
    as_is = ApprovalDecision("c1", "refund", {"order": 7}, True)
    failed = await registry.run_tool_calls([calls[0]], approvals=[as_is])
    assert failed[0]["content"].startswith("Error: tool 'refund' got invalid arguments")


async def test_nan_in_a_models_or_an_edited_call_is_refused_before_anyone_is_asked() -> None:
    registry = ToolRegistry()
    asked: list[dict[str, Any]] = []
    refunded: list[float] = []

    def over_limit(args: dict[str, Any], ctx: ToolContext) -> bool:  # the guide's rule
        asked.append(args)
        return bool(args["amount"] > 100)

    @registry.tool(needs_approval=over_limit)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        refunded.append(amount)
        return f"refunded {amount}"

    nan = {"id": "c1", "type": "function",
           "function": {"name": "refund", "arguments": '{"order": 2, "amount": NaN}'}}  # fmt: skip

    outputs = await registry.run_tool_calls([nan])

    assert outputs.pending_approvals == () and asked == refunded == []
    assert outputs[0]["content"] == (
        "Error: tool 'refund' got invalid arguments: amount: NaN is not a JSON number; "
        "send a finite number"
    )
    # An answer editing a call's arguments into NaN is the app's mistake: nothing runs.
    call = _chat("refund", "c2", {"order": 2, "amount": 900})
    [request] = (await registry.run_tool_calls([call])).pending_approvals
    edit = request.approve(arguments={"order": 2, "amount": float("-inf")})
    with pytest.raises(ApprovalError) as raised:
        await registry.run_tool_calls([call], approvals=[edit])
    assert str(raised.value) == (
        "the approval of call 'c2' edits the arguments into invalid ones: tool 'refund' got "
        "invalid arguments: amount: -Infinity is not a JSON number; send a finite number"
    )
    assert isinstance(raised.value, ValueError) and refunded == []


async def test_an_edit_holding_an_integer_too_long_to_write_is_an_approval_error() -> None:
    # Before: json.dumps' bare ValueError ("Exceeds the limit (4300 digits) ...") escaped
    # run_tool_calls, although NaN and the like were refused with an ApprovalError.
    registry = ToolRegistry()
    paid: list[int] = []

    @registry.tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return "paid"

    call = _chat("pay", "c1", {"amount": 5})
    [request] = (await registry.run_tool_calls([call])).pending_approvals
    huge = 10**5000
    with pytest.raises(ApprovalError) as raised:
        await registry.run_tool_calls(
            [call], approvals=[request.approve(arguments={"amount": huge})]
        )
    assert str(raised.value) == (
        "the approval of call 'c1' edits the arguments into ones that cannot be written as "
        "JSON: an integer has too many digits; give values JSON can hold, such as a shorter "
        "number"
    )
    assert isinstance(raised.value.__cause__, ValueError) and paid == []
    # An answer for other arguments holding one is named without quoting them.
    other = ApprovalDecision("c1", "pay", {"amount": huge}, True)
    with pytest.raises(ApprovalError, match="arguments that cannot be written as JSON approved"):
        await registry.run_tool_calls([call], approvals=[other])
    # The app can answer again.
    again = await registry.run_tool_calls(
        [call], approvals=[request.approve(arguments={"amount": 7})]
    )
    assert again[0]["content"].endswith('it ran with {"amount": 7}]\npaid') and paid == [7]


async def test_a_sync_needs_approval_returning_an_awaitable_is_awaited() -> None:
    registry = ToolRegistry()

    async def large(args: dict[str, Any], ctx: ToolContext) -> bool:
        return bool(args["amount"] > 100)

    @registry.tool(needs_approval=lambda args, ctx: large(args, ctx))
    def refund(amount: float) -> str:
        """Refund."""
        return f"refunded {amount}"

    small = await registry.run_tool_calls([_chat("refund", "c1", {"amount": 5})])
    assert small == [{"role": "tool", "tool_call_id": "c1", "content": "refunded 5.0"}]
    big = await registry.run_tool_calls([_chat("refund", "c2", {"amount": 500})])
    [request] = big.pending_approvals
    assert request.reason == "tool 'refund' needs approval (its needs_approval returned True)"


def test_a_request_holds_its_own_copy_of_the_arguments() -> None:
    arguments = {"order": 7, "lines": [{"sku": "a", "qty": 1}]}
    request = ApprovalRequest("c1", "refund", arguments, "asked")
    arguments["lines"][0]["qty"] = 50
    assert request.arguments == {"order": 7, "lines": [{"sku": "a", "qty": 1}]}
    assert request.signed(b"k").arguments == request.arguments


def test_a_request_copies_arguments_nested_deeper_than_deepcopy_recurses() -> None:
    nested: dict[str, object] = {"leaf": 1}
    for _ in range(5000):  # the loop's JSON parser accepts this; deepcopy would not
        nested = {"inner": nested}
    request = ApprovalRequest("c1", "refund", {"payload": nested}, "asked")
    assert request.arguments["payload"] is not nested
    assert request.arguments["payload"]["inner"]["inner"] is not nested["inner"]["inner"]  # type: ignore[index]


async def test_caller_mistakes_with_approvals_and_keys_name_the_fix() -> None:
    registry = _registry()
    calls = [_chat("save", "c1", {"text": "hi"})]
    [request] = (await registry.run_tool_calls(calls)).pending_approvals
    one = request.approve()
    with pytest.raises(ApprovalError, match=r"got one ApprovalDecision: pass approvals=\[answer\]"):
        await registry.run_tool_calls(calls, approvals=one)  # type: ignore[arg-type]
    with pytest.raises(ApprovalError, match="got one ApprovalDecision"):
        registry.run_tool_calls_sync(calls, approvals=one)  # type: ignore[arg-type]
    with pytest.raises(ApprovalError, match=r"approvals takes a list of answers .* got dict"):
        await registry.run_tool_calls(calls, approvals=dataclasses.asdict(one))  # type: ignore[arg-type]
    for key, got in [("secret", "str"), (b"", "empty bytes")]:
        refused = rf"approval_key must be non-empty bytes or None, got {got}$"
        with pytest.raises(ToolConfigError, match=refused):
            await registry.run_tool_calls(calls, approval_key=key)  # type: ignore[arg-type]
        with pytest.raises(ToolConfigError, match=refused):
            registry.run_tool_calls_sync(calls, approval_key=key)  # type: ignore[arg-type]
    assert isinstance(ToolConfigError("x"), ValueError)
    assert registry.runs == []  # type: ignore[attr-defined]


async def test_an_approved_call_never_comes_from_the_tools_cache() -> None:
    # A tool that asks through PermissionConfig.ask may keep its ResultCache (the
    # checker can change), but an approved payment must be made, every time.
    registry = ToolRegistry(PermissionChecker(PermissionConfig(ask=["write"])))
    sent: list[str] = []

    @registry.tool(permissions=["write"], policy=ToolPolicy(cache=ResultCache(ttl=60)))
    def send_money(to: str) -> str:
        """Send money."""
        sent.append(to)
        return f"sent to {to}"

    for call_id in ("c1", "c2"):
        call = _chat("send_money", call_id, {"to": "ada"})
        [request] = (await registry.run_tool_calls([call])).pending_approvals
        done = await registry.run_tool_calls([call], approvals=[request.approve()])
        assert done == [{"role": "tool", "tool_call_id": call_id, "content": "sent to ada"}]
    assert sent == ["ada", "ada"]

    # Once no rule asks, the cache answers again.
    registry.permission_checker = PermissionChecker(PermissionConfig(allowed=["write"]))
    calls = [_chat("send_money", c, {"to": "bob"}) for c in ("c3", "c4")]
    await registry.run_tool_calls(calls[:1])
    [again] = await registry.run_tool_calls(calls[1:])
    assert again["content"] == "sent to bob" and sent == ["ada", "ada", "bob"]


async def test_a_needs_approval_check_that_never_answers_asks_a_person_at_the_calls_timeout() -> (
    None
):
    # A check with no time limit hung run_tool_calls(timeout=...) for good.
    registry = ToolRegistry()
    release, started, finished = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    async def never(args: dict[str, Any], ctx: ToolContext) -> bool:
        await asyncio.Event().wait()  # a service that never answers
        return False

    def blocked(args: dict[str, Any], ctx: ToolContext) -> bool:
        started.set()
        release.wait(30)  # a sync client stuck on a socket
        seen.append(ctx.cancelled)
        finished.set()
        return False

    @registry.tool(needs_approval=never)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    @registry.tool(needs_approval=blocked)
    def refund(amount: int) -> str:
        """Refund."""
        return "refunded"

    calls = [_chat("pay", "c1", {"amount": 1}), _chat("refund", "c2", {"amount": 2})]
    try:
        outputs = await asyncio.wait_for(registry.run_tool_calls(calls, timeout=0.05), 10)
    finally:
        release.set()
    assert list(outputs) == []
    assert [(r.call_id, r.reason) for r in outputs.pending_approvals] == [
        ("c1", "tool 'pay' needs_approval did not answer within 0.05 s"),
        ("c2", "tool 'refund' needs_approval did not answer within 0.05 s"),
    ]
    # The sync check's thread was left to run on (run_tool_calls returned while it was
    # blocked), as a sync tool's past its timeout is, and could see that its call gave
    # up on it. (On a busy machine the check may still have been queued for a thread at
    # the timeout: then, as a queued sync tool, it never runs.)
    if started.is_set():
        assert finished.wait(10)
        assert seen == [True]


async def test_the_needs_approval_checks_of_a_turn_run_together_in_the_calls_order() -> None:
    # They ran one after another: five 1 s checks took 5 s. Here each check waits for
    # the others of its kind to start, so checks run in turn would never answer.
    registry = ToolRegistry()
    async_started: list[int] = []
    all_async = asyncio.Event()
    sync_barrier = threading.Barrier(2, timeout=10)

    async def by_service(args: dict[str, Any], ctx: ToolContext) -> bool:
        async_started.append(args["amount"])
        if len(async_started) == 3:
            all_async.set()
        await all_async.wait()
        return bool(args["amount"] > 100)

    def by_table(args: dict[str, Any], ctx: ToolContext) -> bool:
        sync_barrier.wait()
        return bool(args["amount"] > 100)

    @registry.tool(needs_approval=by_service)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    @registry.tool(needs_approval=by_table)
    def refund(amount: int) -> str:
        """Refund."""
        return f"refunded {amount}"

    calls = [
        _chat("pay", "c1", {"amount": 500}),
        _chat("refund", "c2", {"amount": 5}),
        _chat("pay", "c3", {"amount": 5}),
        _chat("refund", "c4", {"amount": 700}),
        _chat("pay", "c5", {"amount": 900}),
    ]
    outputs = await asyncio.wait_for(registry.run_tool_calls(calls), 10)
    assert [m["content"] for m in outputs] == ["refunded 5", "paid 5"]
    returned = "needs approval (its needs_approval returned True)"
    assert [(r.call_id, r.reason) for r in outputs.pending_approvals] == [
        ("c1", f"tool 'pay' {returned}"),
        ("c4", f"tool 'refund' {returned}"),
        ("c5", f"tool 'pay' {returned}"),
    ]


def _direct_registry(asked: list[dict[str, Any]]) -> ToolRegistry:
    registry = ToolRegistry(permission_checker=PermissionChecker(PermissionConfig(ask=["write"])))

    @registry.tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    @registry.tool(permissions=["write"])
    def save(text: str) -> str:
        """Save a note."""
        return f"saved {text}"

    def rule(args: dict[str, Any], ctx: ToolContext) -> bool:
        asked.append(args)
        return True

    @registry.tool(needs_approval=rule)
    def send(text: str) -> str:
        """Send a message."""
        return f"sent {text}"

    @registry.tool(permissions=["delete"], needs_approval=True)
    def purge(path: str) -> str:
        """Purge a path."""
        raise AssertionError("never runs: delete is denied")

    return registry


def _unasked(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "without asking" in r.getMessage()]


async def test_direct_calls_skip_approval_with_one_warning_per_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: invoke() and its batch forms ran a tool needing approval at once, with no
    # word: an app running a model's calls through invoke_all() had no approval at all.
    # They still do (a direct call is the app's own), but say so, once per tool.
    asked: list[dict[str, Any]] = []
    registry = _direct_registry(asked)
    with caplog.at_level("WARNING", logger="agcore_tools.registry"):
        assert (await registry.invoke("pay", {"amount": 5})).output == "paid 5"
        assert (await registry.invoke("pay", {"amount": 6})).output == "paid 6"
        [saved] = await registry.invoke_all([("save", {"text": "a"})])
        [(_, sent)] = [
            pair async for pair in registry.invoke_as_completed([("send", {"text": "b"})])
        ]
        with pytest.raises(PermissionDeniedError, match="'purge' needs 'delete'"):
            await registry.invoke("purge", {"path": "/"})  # denied still refuses
        [refused] = await registry.invoke_all([("purge", {"path": "/"})])
    assert saved.output == "saved a" and sent.output == "sent b"
    assert isinstance(refused.error, PermissionDeniedError)
    assert asked == []  # a needs_approval function is not run for the log
    assert _unasked(caplog) == [
        "invoke() runs tool 'pay' without asking for approval (needs_approval=True): a "
        "direct call is the app's own; run a model's calls with run_tool_calls() or "
        "LlmCycle, which ask first (logged once per tool)",
        "invoke_all() runs tool 'save' without asking for approval (permission 'write' is "
        "in PermissionConfig.ask): a direct call is the app's own; run a model's calls "
        "with run_tool_calls() or LlmCycle, which ask first (logged once per tool)",
    ]


def test_invoke_sync_skips_approval_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    registry = _direct_registry([])
    with caplog.at_level("WARNING", logger="agcore_tools.registry"):
        assert registry.invoke_sync("save", {"text": "c"}).output == "saved c"
    assert [m.split(" (permission")[0] for m in _unasked(caplog)] == [
        "invoke_sync() runs tool 'save' without asking for approval"
    ]


async def test_calls_from_the_approval_screen_log_no_skipped_approval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = _direct_registry([])
    with caplog.at_level("WARNING", logger="agcore_tools.registry"):
        first = await registry.run_tool_calls([_chat("pay", "c1", {"amount": 5})])
        [request] = first.pending_approvals
        outputs = await registry.run_tool_calls(
            [_chat("pay", "c1", {"amount": 5})], approvals=[request.approve()]
        )
    assert [m["content"] for m in outputs] == ["paid 5"]
    assert _unasked(caplog) == []


_REPEAT = (
    "Error: call id 'c' was already used by another call of this turn, so this call was not run"
)


@pytest.mark.parametrize("key", [None, b"k"], ids=["unsigned", "signed"])
async def test_one_answer_runs_one_of_two_calls_a_model_gave_one_id(
    key: bytes | None, caplog: pytest.LogCaptureFixture
) -> None:
    # The app answers by id and must send back the model's ids, so two calls sharing one
    # could not be told apart: one yes ran both, answering each was refused, and with
    # other arguments no answer was taken at all.
    registry = _registry()
    for twin in ({"text": "hi"}, {"text": "ho"}):
        registry.runs.clear()  # type: ignore[attr-defined]
        calls = [_chat("save", "c", {"text": "hi"}), _chat("save", "c", twin)]
        with caplog.at_level("WARNING", logger="agcore_tools.approval"):
            first = await registry.run_tool_calls(calls, approval_key=key)
        assert "the server gave 2 tool calls of one turn the id 'c'" in caplog.text
        [request] = first.pending_approvals  # only the first call is asked about
        assert first == [] and (request.call_id, request.arguments) == ("c", {"text": "hi"})

        # Passing the waiting calls (by id: both) with the one answer runs the first only;
        # the other gets its own message, so the history answers every call.
        done = await registry.run_tool_calls(calls, approvals=[request.approve()], approval_key=key)
        assert [m["tool_call_id"] for m in done] == ["c", "c"] and done.pending_approvals == ()
        assert done[0]["content"] == "saved hi" and done[1]["content"].startswith(_REPEAT)
        assert registry.runs == ["hi"]  # type: ignore[attr-defined]

        declined = await registry.run_tool_calls(
            calls, approvals=[request.reject("no")], approval_key=key
        )
        assert [m["content"][:38] for m in declined] == [
            "Error: the user declined the call to t",
            _REPEAT[:38],
        ]
        assert registry.runs == ["hi"]  # type: ignore[attr-defined]


async def test_a_repeated_id_without_approval_still_runs_each_call_and_the_asked_one_waits() -> (
    None
):
    registry = _registry()
    item = {"type": "function_call", "call_id": "c", "name": "echo", "arguments": '{"text": "a"}'}
    # Nobody is asked: both run, as before.
    both = await registry.run_tool_calls([item, {**item, "arguments": '{"text": "b"}'}])
    assert [m["output"] for m in both] == ["a", "b"]
    # The first runs at once, the repeat that needs approval is never asked about, and
    # its "not run" comes in the same round.
    save = {**item, "name": "save"}
    mixed = await registry.run_tool_calls([item, save])
    assert mixed.pending_approvals == ()
    assert [m["output"][:45] for m in mixed] == ["a", _REPEAT[:45]]
    assert registry.runs == []  # type: ignore[attr-defined]


async def test_an_edit_note_writes_a_model_as_pydantic_does_leaving_its_secrets_out() -> None:
    # The app's approval may pass objects: the note that heads the result goes to the
    # model, so it writes them as the library writes any value for it (an excluded
    # field, or one a serializer masks for JSON, stays out), not as their str().
    from typing import Annotated

    from pydantic import BaseModel, Field, PlainSerializer

    class Account(BaseModel):
        user: str
        token: str = Field(exclude=True)
        pin: Annotated[str, PlainSerializer(lambda _: "***", when_used="json")]

    registry = ToolRegistry(permission_checker=PermissionChecker(PermissionConfig(ask=["write"])))

    @registry.tool(permissions=["write"])
    def login(account: Account) -> str:
        """Log in."""
        return f"hello {account.user}"

    call = _chat("login", "c1", {"account": {"user": "eve", "token": "t", "pin": "0"}})
    [request] = (await registry.run_tool_calls([call])).pending_approvals
    account = Account(user="ann", token="tok-s3cret-value", pin="pin-s3cret-value")
    [output] = await registry.run_tool_calls(
        [call], approvals=[request.approve(arguments={"account": account})]
    )
    assert "s3cret" not in output["content"]
    assert output["content"] == (
        "[the user edited this call's arguments before it ran; it ran with "
        '{"account": {"pin": "***", "user": "ann"}}]\nhello ann'
    )
