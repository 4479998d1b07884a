"""What each tool costs in a loop: ChatResponse.tool_costs, ToolStats, the token metrics,
and the reconciliation with the prompt tokens a counting server reports.

The expected figures come from what the server received (its captured request bodies),
not from the loop's notes, so a tool the accounting forgot or double-counted shows.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from agcore_tools import (
    ChatResponse,
    ToolCost,
    ToolRegistry,
    ToolStats,
    configure_tracing,
)
from agcore_tools._budget import BYTES_PER_TOKEN
from agcore_tools.testing import ScriptedChatServer

from .conftest import S

MODES = [("chat", False), ("chat", True), ("responses", False), ("responses", True)]


def estimate(text: str) -> int:
    """The documented estimate, written out again: one token per 4 UTF-8 bytes."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def shop() -> ToolRegistry:
    """Four tools with real descriptions and parameters; ``refund`` always fails."""
    registry = ToolRegistry()

    @registry.tool
    def find_orders(customer: str, status: str = "any", limit: int = 10) -> list[dict[str, Any]]:
        """Find a customer's orders, newest first.

        Args:
            customer: The customer's email address.
            status: Only orders in this status: "open", "shipped", "delivered" or "any".
            limit: At most this many orders.
        """
        return [
            {"id": f"A-{n}", "status": "shipped", "total_eur": 19.9 + n, "items": n + 1}
            for n in range(min(limit, 3))
        ]

    @registry.tool
    def order_details(order_id: str) -> dict[str, Any]:
        """Everything about one order: items, prices, addresses and the shipping history.

        Args:
            order_id: The order's id, such as "A-1".
        """
        return {
            "id": order_id,
            "items": [{"sku": "MUG-01", "name": "Blue mug", "qty": 2, "price_eur": 9.95}],
            "ship_to": "12 rue des Lilas, 75011 Paris, France",
            "history": ["created 2026-11-02", "paid 2026-11-02", "shipped 2026-11-03"],
        }

    @registry.tool
    def refund(order_id: str, reason: str) -> str:
        """Refund an order in full.

        Args:
            order_id: The order's id.
            reason: Why, in the customer's words.
        """
        raise RuntimeError("the payment provider is down")

    @registry.tool
    def convert(amount: float, currency: str) -> float:
        """Convert an amount in euros to another currency at today's rate.

        Args:
            amount: The amount in euros.
            currency: The ISO 4217 code of the target currency, such as "USD".
        """
        return round(amount * 1.08, 2)

    return registry


def script() -> list[Any]:
    return [
        S.reply_tool_calls(
            [
                ("find_orders", {"customer": "ana@example.com", "status": "shipped"}, "c1"),
                ("convert", {"amount": 21.9, "currency": "USD"}, "c2"),
            ]
        ),
        S.reply_tool_calls(
            [
                ("order_details", {"order_id": "A-1"}, "c3"),
                ("refund", {"order_id": "A-0", "reason": "arrived broken"}, "c4"),
            ]
        ),
        S.reply_text(
            "Order A-1 shipped on 3 November to Paris; I could not refund A-0, the payment "
            "provider is down. 21.90 EUR is 23.65 USD."
        ),
    ]


def received(server: ScriptedChatServer) -> list[dict[str, Any]]:
    return [request.json for request in server.requests]


def expected_costs(bodies: list[dict[str, Any]]) -> dict[str, tuple[int, int, int, int]]:
    """(definition tokens, requests, argument tokens, result tokens) per tool, from the
    request bodies: the definitions each carried, and the calls and results the last
    one holds (in either wire's shape)."""
    found: dict[str, list[int]] = {}
    for body in bodies:
        for tool in body.get("tools") or ():
            name = tool["function"]["name"] if "function" in tool else tool["name"]
            text = json.dumps(tool, separators=(",", ":"), ensure_ascii=False)
            entry = found.setdefault(name, [0, 0, 0, 0])
            entry[0] += estimate(text)
            entry[1] += 1
    last = bodies[-1]
    names: dict[str, str] = {}
    for item in last.get("messages") or last.get("input"):
        for call in item.get("tool_calls") or ():
            names[call["id"]] = call["function"]["name"]
            found[call["function"]["name"]][2] += estimate(call["function"]["arguments"])
        if item.get("type") == "function_call":
            names[item["call_id"]] = item["name"]
            found[item["name"]][2] += estimate(item["arguments"])
        if item.get("role") == "tool":
            found[names[item["tool_call_id"]]][3] += estimate(item["content"])
        if item.get("type") == "function_call_output":
            found[names[item["call_id"]]][3] += estimate(item["output"])
    return {name: (d, n, a, r) for name, (d, n, a, r) in found.items()}


async def run(server, make_cycle, registry, api: str, stream: bool) -> ChatResponse:
    cycle = make_cycle(server, api=api)
    prompt = "Where is my last shipped order, and refund A-0 please. Also 21.90 EUR in USD?"
    if not stream:
        return await cycle.submit_with_tools(prompt, registry)
    async with cycle.submit_stream_with_tools(prompt, registry) as events:
        async for _ in events:
            pass
    assert events.response is not None
    return events.response


@pytest.mark.parametrize(("api", "stream"), MODES)
async def test_each_tool_costs_what_the_server_received(serve, make_cycle, api, stream):
    registry = shop()
    server = serve(*script(), count_prompt=True)

    response = await run(server, make_cycle, registry, api, stream)

    costs = response.tool_costs
    bodies = received(server)
    assert len(bodies) == 3
    expected = expected_costs(bodies)
    assert list(costs) == ["find_orders", "order_details", "refund", "convert"]
    got = {
        name: (c.definition_tokens, c.definition_requests, c.argument_tokens, c.result_tokens)
        for name, c in costs.items()
    }
    assert got == expected
    assert all(c.definition_requests == 3 for c in costs.values())
    assert [(c.calls, c.failures) for c in costs.values()] == [(1, 0), (1, 0), (1, 1), (1, 0)]
    assert costs["refund"].result_tokens > 0  # the error text went back to the model
    seconds = {inv.tool_name: inv.duration for inv in response.invocations}
    assert {name: c.seconds for name, c in costs.items()} == seconds
    total = costs.total
    assert total == sum(costs.values(), ToolCost())
    assert total.tokens == sum(d + a + r for d, _, a, r in expected.values())


@pytest.mark.parametrize(("api", "stream"), MODES)
async def test_the_estimate_reconciles_with_the_counting_server(serve, make_cycle, api, stream):
    # The server counts one token per 4 bytes of each whole body it received; the loop
    # counts each message and definition it sent, in its own serialization. The gap is
    # what neither side shares: the body's other fields (model, stream options,
    # tool_choice), brackets and the separators between parts.
    registry = shop()
    server = serve(*script(), count_prompt=True)

    response = await run(server, make_cycle, registry, api, stream)

    reconciliation = response.tool_costs.reconcile()
    reported = sum(-(-len(request.body) // 4) for request in server.requests)
    assert reconciliation.reported == reported == response.usage.prompt_tokens
    assert reconciliation.requests == 3
    assert reconciliation.gap is not None
    assert reconciliation.within(0.05), reconciliation


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_each_request_s_estimate_is_the_count_of_what_it_sent(serve, make_cycle, api):
    # The Responses API's input items are built afresh for each request: counts cached
    # by their id() were handed to later items at a freed one's address.
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Echo a text."""
        return text

    calls = [S.reply_tool_calls([("echo", {"text": "a" * 50 * (n + 1)})]) for n in range(4)]
    server = serve(*calls, S.reply_text("done"))
    cycle = make_cycle(server, api=api)

    response = await cycle.submit_with_tools("go", registry)

    counts = []
    for request in server.requests:
        body = request.json
        sent = [*(body.get("messages") or body["input"]), *body.get("tools", ())]
        counts.append(sum(estimate(json.dumps(x, separators=(",", ":"))) for x in sent))
    assert [e for e, _ in response.tool_costs.reconcile().per_request] == counts


async def test_a_forgotten_part_would_show_in_the_reconciliation(serve, make_cycle):
    # The check can fail: the same run's estimate without the definitions is far off.
    registry = shop()
    server = serve(*script(), count_prompt=True)

    response = await run(server, make_cycle, registry, "chat", False)

    reconciliation = response.tool_costs.reconcile()
    definitions = response.tool_costs.total.definition_tokens
    without = reconciliation.estimate - definitions
    assert abs(without - reconciliation.reported) / reconciliation.reported > 0.3


async def test_registry_stats_add_up_the_runs(serve, make_cycle):
    registry = shop()
    server = serve(*script(), *script(), count_prompt=True)

    first = await run(server, make_cycle, registry, "chat", False)
    second = await run(server, make_cycle, registry, "chat", True)

    for name in registry.list_tools():
        stats: ToolStats = registry.entry(name).stats  # type: ignore[union-attr]
        both = first.tool_costs[name] + second.tool_costs[name]
        assert (
            stats.definition_tokens,
            stats.definition_requests,
            stats.argument_tokens,
            stats.result_tokens,
            stats.calls,
            stats.failures,
        ) == (
            both.definition_tokens,
            both.definition_requests,
            both.argument_tokens,
            both.result_tokens,
            both.calls,
            both.failures,
        )


async def test_a_run_without_tools_costs_nothing_and_shows_no_table(serve, make_cycle):
    server = serve(S.reply_text("Hi"))

    response = await make_cycle(server).submit("Hello")

    assert len(response.tool_costs) == 0 and response.tool_costs.total.tokens == 0
    assert "Tool costs" not in response._repr_markdown_()


async def test_the_notebook_view_lists_the_costs(serve, make_cycle):
    registry = shop()
    server = serve(*script())

    response = await run(server, make_cycle, registry, "chat", False)

    markdown = response._repr_markdown_()
    assert "**Tool costs**" in markdown
    refund = response.tool_costs["refund"]
    assert f"| refund | {refund.definition_tokens} | 3 | {refund.argument_tokens} |" in markdown
    assert "Tool costs" in response._repr_html_()


async def test_token_metrics_go_to_the_meter_provider(serve, make_cycle):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    configure_tracing(meter_provider=provider)
    try:
        registry = shop()
        server = serve(*script())
        response = await run(server, make_cycle, registry, "chat", False)
    finally:
        configure_tracing()
    data = reader.get_metrics_data()
    provider.shutdown()
    metrics = {
        metric.name: metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    by_type = {p.attributes["gen_ai.token.type"]: p for p in usage.data.data_points}
    assert by_type["input"].sum == response.usage.prompt_tokens
    assert by_type["input"].count == 3
    assert by_type["output"].sum == response.usage.completion_tokens
    assert by_type["input"].attributes["gen_ai.operation.name"] == "chat"
    assert by_type["input"].attributes["gen_ai.request.model"] == "test-model"
    tools = metrics["agcore.tool.tokens"]
    points = {
        (p.attributes["gen_ai.tool.name"], p.attributes["agcore.tool.token.part"]): p
        for p in tools.data.data_points
    }
    refund = response.tool_costs["refund"]
    assert points["refund", "definition"].value == refund.definition_tokens
    assert points["refund", "arguments"].value == refund.argument_tokens
    assert points["refund", "arguments"].attributes["gen_ai.token.type"] == "output"
    assert points["refund", "result"].value == refund.result_tokens
    assert points["refund", "result"].attributes["gen_ai.token.type"] == "input"


class Answer(pydantic.BaseModel):
    answer: int


async def test_every_model_request_records_its_tokens_with_or_without_tools(serve, make_cycle):
    # The histogram is per request, not per tool run: chat-only calls record it too, a
    # request that reported no usage records nothing, and a run counts each request once.
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    usage = {"prompt_tokens": 7, "completion_tokens": 3}
    server = serve(
        S.reply_text("hi", usage=usage),
        S.reply_text("hi", usage=usage),
        S.reply_text('{"answer": 42}', usage=usage),
        S.reply_text("no usage reported"),
        S.reply_tool_calls([("refund", {"order_id": 1, "cents": 5})], usage=usage),
        S.reply_text("done", usage=usage),
    )
    configure_tracing(meter_provider=provider)
    try:
        cycle = make_cycle(server)
        await cycle.submit("hello")
        await cycle.submit_stream("hello").collect()
        await cycle.submit("json", output_type=Answer)
        quiet = make_cycle(server, stream_options={"include_usage": False})
        await quiet.submit_stream("hello").collect()
        await cycle.submit_with_tools("refund", shop())
    finally:
        configure_tracing()
    data = reader.get_metrics_data()
    provider.shutdown()
    [usage_metric] = [
        metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "gen_ai.client.token.usage"
    ]
    by_type = {p.attributes["gen_ai.token.type"]: p for p in usage_metric.data.data_points}
    assert (by_type["input"].count, by_type["input"].sum) == (5, 35)
    assert (by_type["output"].count, by_type["output"].sum) == (5, 15)


async def test_a_paused_run_and_its_resume_each_count_their_part(serve, make_cycle):
    registry = ToolRegistry()

    @registry.tool(needs_approval=True)
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        return f"paid {cents} cents to {to}"

    server = serve(
        S.reply_tool_calls([("pay", {"to": "bob", "cents": 250}, "p1")]), S.reply_text("Done.")
    )
    cycle = make_cycle(server)

    paused = await cycle.submit_with_tools("Pay bob 2.50", registry)
    [request] = paused.pending_approvals
    resumed = await cycle.submit_with_tools(None, registry, approvals=[request.approve()])

    asked, ran = paused.tool_costs["pay"], resumed.tool_costs["pay"]
    arguments = '{"to": "bob", "cents": 250}'
    # The paused run: one request offered pay, the model wrote the call; nothing ran.
    assert (asked.definition_requests, asked.argument_tokens) == (1, estimate(arguments))
    assert (asked.calls, asked.result_tokens) == (0, 0)
    # The resume ran the call (its assistant message is the paused run's) and sent it back.
    assert (ran.definition_requests, ran.argument_tokens, ran.calls) == (1, 0, 1)
    assert ran.result_tokens == estimate("paid 250 cents to bob")
    stats = registry.entry("pay").stats  # type: ignore[union-attr]
    assert stats.definition_requests == 2 and stats.result_tokens == ran.result_tokens
