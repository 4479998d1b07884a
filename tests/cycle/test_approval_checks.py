"""Approval in the loop: what a resume refuses, and what it leaves as it was."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agcore_tools import ApprovalError, ToolRegistry

from .conftest import S


@pytest.fixture
def bank() -> ToolRegistry:
    """``refund`` needs approval, ``balance`` does not; ``bank.runs`` lists the calls."""
    registry = ToolRegistry()
    runs: list[tuple[str, dict[str, Any]]] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool(needs_approval=True)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        runs.append(("refund", {"order": order, "amount": amount}))
        return f"refunded {amount} on order {order}"

    @registry.tool
    def balance(account: str) -> int:
        """An account's balance."""
        runs.append(("balance", {"account": account}))
        return 100

    return registry


TWO_CALLS = S.reply_tool_calls(
    [("refund", {"order": 7, "amount": 20.0}, "c_refund"), ("balance", {"account": "a"}, "c_bal")]
)


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
