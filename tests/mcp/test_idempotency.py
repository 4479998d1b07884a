"""Every tools/call the registry makes carries the call's idempotency key in ``_meta``,
as the server receives it."""

from __future__ import annotations

import json

from agcore_tools import McpClient, ToolContext, ToolRegistry

from .conftest import fixture_stdio


async def test_the_server_receives_the_calls_idempotency_key_in_meta() -> None:
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(prefix=True))
        run = ToolContext(run_id="run-42")
        first, again, plain = await registry.invoke_all(
            [
                ("fixture__request_meta", {}, "call_1"),
                ("fixture__request_meta", {}, "call_1"),  # a retry: the same key
                ("fixture__request_meta", {}),  # not a model's call: no key
            ],
            ctx=run,
        )
        direct = await client.call_tool("request_meta", {})
    key = "dev.agcore/idempotency-key"
    assert json.loads(first.output)[key] == "run-42:call_1"
    assert json.loads(again.output)[key] == "run-42:call_1"
    assert key not in json.loads(plain.output)
    assert key not in json.loads(direct)
