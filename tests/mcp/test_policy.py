"""The documented annotation policy, hint by hint, with the spec's defaults."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agcore_tools import (
    ApprovalError,
    McpClient,
    McpPermissionPolicy,
    McpToolInfo,
    Permission,
    PermissionChecker,
    PermissionConfig,
    StdioTransport,
    ToolConfigError,
    ToolRegistry,
)
from agcore_tools.mcp._adapter import make_adapters

from .conftest import fixture_stdio

R, W, D, N = Permission.READ, Permission.WRITE, Permission.DELETE, Permission.NETWORK


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        # No hints: the spec's defaults (not read-only, destructive, open world).
        ({}, (W, D, N)),
        ({"readOnlyHint": True}, (R, N)),
        ({"readOnlyHint": True, "openWorldHint": False}, (R,)),
        # destructiveHint only matters when the tool is not read-only.
        ({"readOnlyHint": True, "destructiveHint": True, "openWorldHint": False}, (R,)),
        ({"readOnlyHint": False}, (W, D, N)),
        ({"destructiveHint": False}, (W, N)),
        ({"destructiveHint": False, "openWorldHint": False}, (W,)),
        ({"openWorldHint": False}, (W, D)),
        ({"idempotentHint": True}, (W, D, N)),  # idempotence changes nothing here
        # Non-boolean values are ignored like absent ones.
        ({"readOnlyHint": "yes"}, (W, D, N)),
    ],
)
def test_hints_map_to_permissions(
    annotations: dict[str, Any], expected: tuple[Permission, ...]
) -> None:
    assert McpPermissionPolicy()(McpToolInfo("t", annotations=annotations)) == expected


def test_untrusted_servers_get_the_worst_case_whatever_they_claim() -> None:
    claims = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
    policy = McpPermissionPolicy(trust_annotations=False)
    assert policy(McpToolInfo("t", annotations=claims)) == (W, D, N)


def test_extra_permissions_are_added_to_every_tool() -> None:
    policy = McpPermissionPolicy(extra=["filesystem", Permission.custom("mcp:fs")])
    assert policy(McpToolInfo("t", annotations={"readOnlyHint": True, "openWorldHint": False})) == (
        R,
        Permission.FILESYSTEM,
        Permission.custom("mcp:fs"),
    )


@pytest.mark.parametrize(
    ("annotations", "destructive"),
    [
        ({}, True),  # the spec's defaults: not read-only, destructive
        ({"readOnlyHint": True}, False),
        ({"readOnlyHint": False, "destructiveHint": False}, False),
        ({"readOnlyHint": False, "destructiveHint": True}, True),
    ],
)
def test_needs_approval_destructive_follows_the_hints(
    annotations: dict[str, bool], destructive: bool
) -> None:
    info = McpToolInfo("t", annotations=annotations)
    assert McpPermissionPolicy(needs_approval="destructive").asks(info) is destructive
    assert McpPermissionPolicy().asks(info) is False
    assert McpPermissionPolicy(needs_approval=True).asks(info) is True
    # Not trusting the hints: every tool counts as destructive.
    untrusted = McpPermissionPolicy(trust_annotations=False, needs_approval="destructive")
    assert untrusted.asks(info) is True


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"needs_approval": "Destructive"}, "needs_approval must be True, False, 'destructive'"),
        ({"needs_approval": None}, "or a function of McpToolInfo, got NoneType None"),
        ({"trust_annotations": "false"}, "trust_annotations must be True or False, got str"),
    ],
)
def test_a_mistyped_policy_is_refused_when_made(options: dict[str, Any], message: str) -> None:
    # needs_approval="Destructive" was accepted, then every tool failed with a TypeError.
    with pytest.raises(ToolConfigError, match=re.escape(message)):
        McpPermissionPolicy(**options)


async def _never(info: McpToolInfo) -> bool:
    return False


def test_an_async_needs_approval_is_refused_when_made() -> None:
    # Its coroutine, never awaited, is true: every tool of the server asked for approval.
    with pytest.raises(ToolConfigError, match="not the async function _never"):
        McpPermissionPolicy(needs_approval=_never)  # type: ignore[arg-type]


async def test_an_approval_names_the_policy_rule_and_edits_are_checked_against_the_schema() -> None:
    client = McpClient("shop", StdioTransport("never-started"))
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    policy = McpPermissionPolicy(needs_approval="destructive")
    [echo] = make_adapters(client, [McpToolInfo("echo", input_schema=schema)], None, policy)
    registry = ToolRegistry()
    registry.register(echo)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "echo", "arguments": '{"text": "hi"}'},
    }

    [request] = (await registry.run_tool_calls([call])).pending_approvals
    assert "McpPermissionPolicy(needs_approval='destructive')" in request.reason
    assert "needs_approval=True" not in request.reason
    # Nothing reaches the server (this client never connected): the edit is refused first.
    edited = request.approve(arguments={"text": 12, "extra": True})
    with pytest.raises(ApprovalError, match="text: 12 is not of type 'string'"):
        await registry.run_tool_calls([call], approvals=[edited])
    with pytest.raises(ApprovalError, match="'text' is a required property"):
        await registry.run_tool_calls([call], approvals=[request.approve(arguments={})])


def test_a_policy_that_overrides_asks_decides_which_tools_ask() -> None:
    # make_adapters read approval_reason() alone for a while: an overridden asks() was
    # ignored, and the tools it picked ran without approval.
    class PaymentsAsk(McpPermissionPolicy):
        def asks(self, tool: McpToolInfo) -> bool:
            return tool.name.startswith("pay")

    client = McpClient("bank", StdioTransport("server"))
    infos = [McpToolInfo("pay_invoice"), McpToolInfo("list_invoices")]
    pay, listing = make_adapters(client, infos, None, PaymentsAsk(needs_approval=True))
    assert pay.needs_approval and not listing.needs_approval
    assert pay.approval_reason == "McpPermissionPolicy(needs_approval=True)"
    [quiet] = make_adapters(client, infos[:1], None, PaymentsAsk())
    assert quiet.needs_approval and quiet.approval_reason == (
        "test_a_policy_that_overrides_asks_decides_which_tools_ask.<locals>.PaymentsAsk"
        ".asks() picked it"
    )


async def test_a_strict_calls_nulls_are_dropped_before_its_arguments_are_checked() -> None:
    # Strict mode makes the model send null for an optional property; the registry drops
    # it before an MCP tool runs. The approval pre-check read the raw arguments: a valid
    # call was answered "invalid arguments" instead of being asked about, and with any
    # PermissionConfig.ask, so was every call of a tool that asks nothing.
    checker = PermissionChecker(PermissionConfig(allowed=[], denied=[], ask=["shell"]))
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "slow", "arguments": '{"seconds": 0, "marker": null}'},
    }
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        asking = ToolRegistry(checker, strict=True)
        asking.register_all(client.into_tools(policy=lambda info: ["shell"]))
        quiet = ToolRegistry(checker, strict=True)
        quiet.register_all(client.into_tools(policy=lambda info: ["read"]))
        assert asking.entry("slow").argument_plan is not None  # type: ignore[union-attr]

        [request] = (await asking.run_tool_calls([call])).pending_approvals
        assert request.reason == "permission 'shell' is in PermissionConfig.ask"
        [approved] = await asking.run_tool_calls([call], approvals=[request.approve()])
        # Edited arguments are checked as the tool will get them too.
        edit = request.approve(arguments={"seconds": 0.01, "marker": None})
        [edited] = await asking.run_tool_calls([call], approvals=[edit])
        [ran] = await quiet.run_tool_calls([call])
    note = "[the user edited this call's arguments before it ran; it ran with "
    assert [approved["content"], edited["content"], ran["content"]] == [
        "slept 0.0",
        note + '{"marker": null, "seconds": 0.01}]\nslept 0.01',
        "slept 0.0",
    ]
