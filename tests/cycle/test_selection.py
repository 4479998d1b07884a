"""Tool selection per request, tool search and the definitions' token budget in the loop.

The captured requests of a real ScriptedChatServer show which tools each request sent.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import (
    DefinitionBudgetError,
    Image,
    LlmConfigError,
    LlmError,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    ToolNotFoundError,
    ToolNotOfferedError,
    ToolRegistry,
    ToolSearch,
    ToolSelection,
    _budget,
)
from agcore_tools import _snapshot as snapshots
from agcore_tools.base import definition_name
from agcore_tools.cycle.profiles import OPENAI
from agcore_tools.testing import ScriptedChatServer as S
from agcore_tools.testing import StaticTool

from .conftest import assert_history_valid, tool_messages


def sent(server: S) -> list[list[str]]:
    """The tool names of each request, in the order sent (``[]`` for none)."""
    return [
        [tool["function"]["name"] for tool in request.json.get("tools", [])]
        for request in server.requests
    ]


@pytest.fixture
def tagged() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(tags=["math"], category="calc")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool(tags=["math"], category="calc")
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    @registry.tool(category="world")
    def weather(city: str) -> str:
        """The weather forecast in a city: temperature and sky."""
        return f"sunny in {city}"

    @registry.tool(category="world")
    def read_file(path: str) -> str:
        """Read a text file from disk and return its contents."""
        return "contents"

    return registry


# -- selection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("select", "expected"),
    [
        (["weather", "add"], ["add", "weather"]),  # registration order, not the list's
        (ToolSelection(tags=["math"]), ["add", "multiply"]),
        (ToolSelection(categories=["world"]), ["weather", "read_file"]),
        (
            ToolSelection(names=["add"], where=lambda e: e.name.startswith("r")),
            ["add", "read_file"],
        ),
    ],
    ids=["names", "tags", "categories", "names-or-predicate"],
)
async def test_a_run_offers_only_the_selected_tools(serve, make_cycle, tagged, select, expected):
    server = serve(S.reply_text("ok"))
    cycle = make_cycle(server)

    await cycle.submit_with_tools("hi", tagged, select=select)

    assert sent(server) == [expected]


async def test_a_callable_chooses_the_tools_before_each_request_from_the_history(
    serve, make_cycle, tagged
):
    seen: list[int] = []

    def by_turn(history: Any, registry: ToolRegistry) -> list[str]:
        seen.append(len(history))
        answered = any(m["role"] == "tool" for m in history)
        return ["weather"] if answered else ["add"]

    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]), S.reply_text("3"))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("1 + 2?", tagged, select=by_turn)

    assert response.text == "3"
    assert sent(server) == [["add"], ["weather"]]
    assert seen == [1, 3]  # user; user, assistant, tool


@pytest.mark.parametrize(
    "select",
    [["read_file", "delete_file"], ["read_file"], ToolSearch(core=["read_file"])],
    ids=["selected", "not-selected", "tool-search"],
)
@pytest.mark.parametrize("unknown_tool", ["raise", "tell_model"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_call_to_a_refused_tool_stops_the_loop_with_select_as_without(
    serve, make_cycle, select, unknown_tool, stream
):
    # Before: with select=, the run's view did not hold the refused tool, so its call was
    # "not registered" (a ToolNotFoundError, though the app had selected it), and with
    # unknown_tool="tell_model" the run went on; without select= it stops on the
    # PermissionDeniedError, as the permissions guide says.
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))
    deleted: list[str] = []

    @registry.tool(permissions=["read"])
    def read_file(path: str) -> str:
        """Read a text file."""
        return "contents"

    @registry.tool(permissions=["delete"])
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return "deleted"

    server = serve(
        S.reply_tool_calls(
            [("read_file", {"path": "/a"}, "c1"), ("delete_file", {"path": "/a"}, "c2")]
        ),
        S.reply_text("never sent"),
    )
    cycle = make_cycle(server, unknown_tool=unknown_tool)

    with pytest.raises(LlmError) as info:
        if stream:
            events = cycle.submit_stream_with_tools("tidy up", registry, select=select)
            _ = [event async for event in events]
        else:
            await cycle.submit_with_tools("tidy up", registry, select=select)

    assert isinstance(info.value.__cause__, PermissionDeniedError)
    assert str(info.value) == (
        "tool loop stopped: permission denied: tool 'delete_file' needs 'delete', which is denied"
    )
    answers = tool_messages(cycle.messages)
    assert answers["c2"] == (
        "Error: permission denied: tool 'delete_file' needs 'delete', which is denied"
    )
    assert deleted == [] and registry.entry("read_file").stats.calls == 0
    assert "delete_file" not in sent(server)[0]
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_call_to_a_tool_not_offered_is_an_unknown_tool_told_to_the_model(
    serve, make_cycle, tagged, stream
):
    server = serve(
        S.reply_tool_calls([("multiply", {"a": 2, "b": 3}, "c1")]),
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c2")]),
        S.reply_text("5"),
    )
    cycle = make_cycle(server, unknown_tool="tell_model")

    if stream:
        events = cycle.submit_stream_with_tools("2 + 3?", tagged, select=["add"])
        _ = [event async for event in events]
        response = events.response
    else:
        response = await cycle.submit_with_tools("2 + 3?", tagged, select=["add"])

    assert response is not None and response.text == "5"
    answers = tool_messages(cycle.messages)
    assert answers["c1"] == (
        "Error: tool 'multiply' is not available in this conversation: the tools offered are: add"
    )
    assert answers["c2"] == "5"
    assert [i.tool_name for i in response.invocations] == ["multiply", "add"]
    assert isinstance(response.invocations[0].error, ToolNotFoundError)
    assert response.invocations[0].error.registered
    assert tagged.entry("multiply").stats.calls == 0  # never ran
    assert sent(server) == [["add"]] * 3
    assert_history_valid(cycle.messages)


async def test_by_default_a_call_to_a_tool_not_offered_stops_the_loop_saying_so(
    serve, make_cycle, tagged
):
    server = serve(
        S.reply_tool_calls([("multiply", {"a": 2, "b": 3}, "c1"), ("add", {"a": 1, "b": 1}, "c2")])
    )
    cycle = make_cycle(server)

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("2 * 3?", tagged, select=["add"])

    assert str(raised.value) == (
        "tool loop stopped: tool 'multiply' is not available in this conversation: the "
        "tools offered are: add"
    )
    assert tool_messages(cycle.messages)["c2"] == (
        "Error: aborted; tool 'add' did not complete: tool 'multiply' is not available in "
        "this conversation"
    )
    assert_history_valid(cycle.messages)


async def test_by_default_a_call_to_a_tool_not_offered_stops_the_loop(serve, make_cycle, tagged):
    server = serve(S.reply_tool_calls([("multiply", {"a": 2, "b": 3}, "c1")]))
    cycle = make_cycle(server)

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("2 * 3?", tagged, select=["add"])

    assert isinstance(raised.value.__cause__, ToolNotFoundError)
    assert tagged.entry("multiply").stats.calls == 0
    assert_history_valid(cycle.messages)


def test_the_sync_entry_point_takes_a_selection_too(tagged):
    from openai import OpenAI

    from agcore_tools import CycleConfig, LlmCycle

    with (
        S([S.reply_text("ok")]) as server,
        LlmCycle(CycleConfig("m"), client=OpenAI(base_url=server.base_url, api_key="-")) as cycle,
    ):
        cycle.submit_with_tools_sync("hi", tagged, select=ToolSelection(categories=["calc"]))

    assert sent(server) == [["add", "multiply"]]


@pytest.mark.parametrize(
    ("select", "core"),
    [
        (lambda: (name for name in ["add"]), []),
        (lambda: ToolSearch(core=map(str.strip, ["add "])), ["search_tools"]),
    ],
    ids=["generator", "search-core-map"],
)
async def test_a_one_shot_iterable_of_names_is_read_once_for_every_request(
    serve, make_cycle, tagged, select, core
):
    # Names were read before each request: a generator was empty from the second on,
    # and the run went on with no tools (or no core).
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]),
        S.reply_tool_calls([("add", {"a": 3, "b": 3}, "c2")]),
        S.reply_text("6"),
    )
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("1 + 2, then 3 + 3", tagged, select=select())

    assert response.text == "6"
    assert sent(server) == [["add", *core]] * 3


@pytest.mark.parametrize(
    "select",
    [["ad"], ToolSelection(names=["ad"]), lambda history, registry: ["ad"]],
    ids=["names", "selection", "callable"],
)
async def test_selecting_a_tool_the_registry_lacks_fails_before_any_request(
    serve, make_cycle, tagged, select
):
    server = serve()
    cycle = make_cycle(server)

    with pytest.raises(LlmConfigError, match=r"does not have: ad \(registered: add, multiply"):
        await cycle.submit_with_tools("hi", tagged, select=select)

    assert server.requests == []


async def test_selecting_unknown_tools_of_a_large_registry_names_a_few_close_ones(
    serve, make_cycle
):
    # The error listed every registered tool: at 10,000 tools, 177,000 characters.
    registry = ToolRegistry()
    for n in range(40):
        registry.register(StaticTool(f"tool_{n}"))
    registry.register(StaticTool("search_issues"))
    server = serve()
    cycle = make_cycle(server)

    with pytest.raises(LlmConfigError) as raised:
        await cycle.submit_with_tools("hi", registry, select=["serch_issues", "nope"])
    assert str(raised.value) == (
        "select names tools the registry does not have: nope, serch_issues (41 tools are "
        "registered; the closest names are: search_issues)"
    )

    many = [f"gone_{n:02}" for n in range(12)]
    with pytest.raises(LlmConfigError) as raised:
        await cycle.submit_with_tools("hi", registry, select=many)
    assert str(raised.value) == (
        "select names tools the registry does not have: gone_00, gone_01, gone_02, "
        "gone_03, gone_04, gone_05, gone_06, gone_07, gone_08, gone_09 and 2 more "
        "(41 tools are registered)"
    )
    assert server.requests == []


def test_a_string_is_not_a_list_of_names():
    with pytest.raises(ValueError, match="list of strings"):
        ToolSelection(names="add")
    with pytest.raises(ValueError, match="tool names or a selection"):
        ToolSearch(core="add")
    with pytest.raises(ValueError, match="tool names or a selection"):
        ToolSearch(core=ToolSearch())


async def only_math(entry):
    return "math" in entry.tags


class AsyncEmbedder:
    async def __call__(self, texts):
        return [[1.0, 0.0] for _ in texts]


def test_an_async_function_where_a_plain_one_goes_is_refused_when_made():
    # Its coroutine, never awaited, is true: the selection offered every tool.
    with pytest.raises(LlmConfigError, match="not the async function only_math"):
        ToolSelection(where=only_math)
    with pytest.raises(LlmConfigError, match=r"ToolSelection\.where must be a function"):
        ToolSelection(where="math")
    # Taken, then the run's first search stopped on "float() argument ... not 'coroutine'".
    with pytest.raises(LlmConfigError, match=r"not the async function AsyncEmbedder: .*OpenAI\(\)"):
        ToolSearch(embedder=AsyncEmbedder())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_results": 0}, "max_results must be at least 1"),
        ({"max_results": True}, "max_results must be at least 1, got True"),
        ({"budget": -1}, "budget must be at least 0 or None"),
        ({"budget": False}, "budget must be at least 0 or None, got False"),
    ],
)
def test_search_settings_are_checked(options, message):
    with pytest.raises(LlmConfigError, match=message):
        ToolSearch(**options)


# -- search -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_search_appends_what_it_finds_to_the_following_requests(
    serve, make_cycle, tagged, stream
):
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "weather forecast for a city"}, "s1")]),
        S.reply_tool_calls([("weather", {"city": "Oslo"}, "w1")]),
        S.reply_text("Sunny."),
    )
    cycle = make_cycle(server)
    search = ToolSearch(core=["add"], max_results=1)

    if stream:
        events = cycle.submit_stream_with_tools("Weather in Oslo?", tagged, select=search)
        _ = [event async for event in events]
        response = events.response
    else:
        response = await cycle.submit_with_tools("Weather in Oslo?", tagged, select=search)

    assert response is not None and response.text == "Sunny."
    assert sent(server) == [
        ["add", "search_tools"],
        ["add", "search_tools", "weather"],
        ["add", "search_tools", "weather"],
    ]
    answers = tool_messages(cycle.messages)
    assert answers["s1"] == (
        "These tools can be called from your next step:\n"
        "- weather: The weather forecast in a city: temperature and sky."
    )
    assert answers["w1"] == "sunny in Oslo"
    # Byte-stable: each request's tools start with the previous request's, unchanged.
    first, second = (json.dumps(r.json["tools"]) for r in server.requests[:2])
    assert second.startswith(first[:-1])


async def test_found_tools_last_for_the_run_only(serve, make_cycle, tagged):
    search = ToolSearch(core=ToolSelection(tags=["math"]))
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "read a file"}, "s1")]),
        S.reply_text("done"),
        S.reply_text("again"),
    )
    cycle = make_cycle(server)

    await cycle.submit_with_tools("Read notes.txt", tagged, select=search)
    await cycle.submit_with_tools("And now?", tagged, select=search)

    core = ["add", "multiply", "search_tools"]
    assert sent(server) == [core, [*core, "read_file"], core]


async def test_a_resumed_run_offers_again_the_tools_its_paused_part_called(
    serve, make_cycle, tagged
):
    # The found tools are not in the history: a run resumed after an approval offered
    # the core set only, and the model's next call to the tool it had been using was
    # answered "find it with search_tools first". The tools the paused part of the run
    # called are offered again from the resumed run's first request.
    @tagged.tool(needs_approval=True)
    def refund(order: int) -> str:
        """Refund an order to the customer's card."""
        return f"refunded {order}"

    search = ToolSearch(core=ToolSelection(tags=["math"]), max_results=1)
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "refund an order"}, "s1")]),
        S.reply_tool_calls([("refund", {"order": 7}, "r1")]),
        S.reply_tool_calls([("refund", {"order": 8}, "r2")]),
        S.reply_text("ok"),
    )
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("Refund orders 7 and 8", tagged, select=search)
    [request] = paused.pending_approvals

    # As in another process: a new cycle from the saved history.
    resumed_cycle = make_cycle(server)
    resumed_cycle.messages = json.loads(json.dumps(cycle.messages))
    resumed = await resumed_cycle.submit_with_tools(
        None, tagged, select=search, approvals=[request.approve()]
    )
    assert resumed.pending_approvals[0].call_id == "r2"  # a call, not "find it first"
    core = ["add", "multiply", "search_tools"]
    assert sent(server) == [core, [*core, "refund"], [*core, "refund"]]
    assert tool_messages(resumed_cycle.messages)["r1"] == "refunded 7"

    # A new user message starts a new run: from the core set again.
    await resumed_cycle.submit_with_tools("Never mind order 8", tagged, select=search)
    assert sent(server)[-1] == core


async def test_a_resumed_run_offers_again_a_tool_called_before_an_image_it_returned(
    serve, make_cycle, tagged
):
    # A tool's image goes to the model in a user message after the tool messages: a
    # resume read it as the run's prompt, and offered only the tools called after it,
    # so the model's next call to the tool that returned the image was answered "find
    # it with search_tools first".
    @tagged.tool
    def receipt(order: int) -> Image:
        """Show an order's receipt image."""
        return Image(b"\x89PNG\r\n\x1a\n" + bytes(64))

    @tagged.tool(needs_approval=True)
    def refund(order: int) -> str:
        """Refund an order to the customer's card."""
        return f"refunded {order}"

    search = ToolSearch(core=ToolSelection(tags=["math"]), max_results=2)
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "order receipt refund"}, "s1")]),
        S.reply_tool_calls([("receipt", {"order": 7}, "i1")]),
        S.reply_tool_calls([("refund", {"order": 7}, "r1")]),
        S.reply_tool_calls([("receipt", {"order": 7}, "i2")]),
        S.reply_text("ok"),
    )
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools("Refund order 7", tagged, select=search)
    [request] = paused.pending_approvals

    resumed_cycle = make_cycle(server)  # as in another process
    resumed_cycle.messages = json.loads(json.dumps(cycle.messages))
    resumed = await resumed_cycle.submit_with_tools(
        None, tagged, select=search, approvals=[request.approve()]
    )

    assert resumed.text == "ok"
    assert tool_messages(resumed_cycle.messages)["i2"].startswith("[image 1 (image/png")
    core = ["add", "multiply", "search_tools"]
    assert sent(server)[3:] == [[*core, "receipt", "refund"]] * 2


async def test_a_resumed_run_reads_past_the_retry_message_of_a_structured_answer(
    serve, make_cycle, tagged
):
    # An answer that fails the output schema makes the loop ask again in a user message
    # of its own. A resume took that message for the prompt: it offered again only the
    # tools called after it, and the model's next call to weather, found before it, was
    # answered "find it with search_tools first".
    @tagged.tool(needs_approval=True)
    def refund(order: int) -> str:
        """Refund an order to the customer's card."""
        return f"refunded {order}"

    class Done(BaseModel):
        refunded: list[int]

    search = ToolSearch(core=ToolSelection(tags=["math"]), max_results=1)
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "weather forecast"}, "s1")]),
        S.reply_tool_calls([("weather", {"city": "Oslo"}, "w1")]),
        S.reply_text("Refunding when it is sunny."),  # not a Done: asked again
        S.reply_tool_calls([("search_tools", {"query": "refund an order"}, "s2")]),
        S.reply_tool_calls([("refund", {"order": 7}, "r1")]),
        S.reply_tool_calls([("weather", {"city": "Rome"}, "w2")]),
        S.reply_text('{"refunded": [7]}'),
    )
    cycle = make_cycle(server)
    paused = await cycle.submit_with_tools(
        "Refund order 7 if it is sunny", tagged, select=search, output_type=Done
    )
    [request] = paused.pending_approvals
    assert cycle.messages[6]["content"].startswith("Your answer is not a valid Done")

    resumed_cycle = make_cycle(server)
    resumed_cycle.messages = json.loads(json.dumps(cycle.messages))
    resumed = await resumed_cycle.submit_with_tools(
        None, tagged, select=search, approvals=[request.approve()], output_type=Done
    )

    assert resumed.output == Done(refunded=[7])
    assert tool_messages(resumed_cycle.messages)["w2"] == "sunny in Rome"
    core = ["add", "multiply", "search_tools"]
    assert sent(server)[5:] == [[*core, "weather", "refund"]] * 2


@pytest.mark.parametrize("two_stage", [False, True], ids=["search", "two-stage"])
async def test_a_registered_tool_not_found_yet_is_told_how_to_reach_it(
    serve, make_cycle, tagged, two_stage
):
    # A model calls a tool it used in an earlier run (found tools last one run). It
    # was told "not registered", and the loop stopped by default. Now it is told to
    # search for it, and the run goes on; a tool the registry lacks still stops it.
    search = ToolSearch(core=ToolSelection(tags=["math"]), two_stage=two_stage)
    how = "load it with load_tools first" if two_stage else "find it with search_tools first"
    server = serve(
        S.reply_tool_calls([("read_file", {"path": "notes.txt"}, "c1")]),
        S.reply_text("done"),
    )
    cycle = make_cycle(server)
    response = await cycle.submit_with_tools("Read notes.txt", tagged, select=search)
    assert response.text == "done"
    assert tool_messages(cycle.messages)["c1"] == (
        f"Error: tool 'read_file' is not offered in this run: {how}"
    )
    assert isinstance(response.invocations[0].error, ToolNotOfferedError)
    assert tagged.entry("read_file").stats.calls == 0
    assert_history_valid(cycle.messages)

    # A tool the permissions refuse is not offerable, and its call stops the loop on the
    # refusal, as without selection (it was "not registered").
    guarded = ToolRegistry(PermissionChecker(PermissionConfig(denied=["filesystem"])))
    guarded.tool(tags=["math"])(tagged.entry("add").tool.func)  # type: ignore[attr-defined]

    @guarded.tool(permissions=["filesystem"])
    def read_file(path: str) -> str:
        """Read a text file from disk and return its contents."""
        return "contents"

    server = serve(S.reply_tool_calls([("read_file", {"path": "notes.txt"}, "c1")]))
    with pytest.raises(LlmError, match="tool 'read_file' needs 'filesystem'") as raised:
        await make_cycle(server).submit_with_tools("Read notes.txt", guarded, select=search)
    assert isinstance(raised.value.__cause__, PermissionDeniedError)


@pytest.mark.parametrize("two_stage", [False, True], ids=["search", "two-stage"])
async def test_a_strict_permission_checker_lets_the_search_tools_run(serve, make_cycle, two_stage):
    # search_tools and load_tools declare no permissions: a checker refusing undeclared
    # tools stopped the loop at the first search. They are the library's own; the tools
    # they offer are still checked.
    strict = PermissionChecker(PermissionConfig(allowed=["read"], allow_unspecified=False))
    registry = ToolRegistry(strict)

    @registry.tool(permissions=["read"])
    def weather(city: str) -> str:
        """The weather forecast in a city: temperature and sky."""
        return f"sunny in {city}"

    @registry.tool
    def forecast_archive(city: str) -> str:
        """Past weather forecasts for a city; declares no permissions."""
        return "refused"

    loads = [S.reply_tool_calls([("load_tools", {"names": ["weather"]}, "l1")])]
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "weather forecast city"}, "s1")]),
        *(loads if two_stage else []),
        S.reply_tool_calls([("weather", {"city": "Oslo"}, "w1")]),
        S.reply_text("Sunny."),
    )
    cycle = make_cycle(server)
    search = ToolSearch(two_stage=two_stage)
    response = await cycle.submit_with_tools("Weather in Oslo?", registry, select=search)

    assert response.text == "Sunny."
    own = ["search_tools", "load_tools"] if two_stage else ["search_tools"]
    assert sent(server)[0] == own
    assert sent(server)[-1] == [*own, "weather"]
    answers = tool_messages(cycle.messages)
    assert "forecast_archive" not in answers["s1"]  # refused: never found
    assert answers["w1"] == "sunny in Oslo"

    server = serve(S.reply_tool_calls([("forecast_archive", {"city": "Oslo"}, "c1")]))
    with pytest.raises(LlmError, match="tool 'forecast_archive' declares no perm") as raised:
        await make_cycle(server).submit_with_tools("Archive?", registry, select=search)
    assert isinstance(raised.value.__cause__, PermissionDeniedError)


@pytest.mark.parametrize(
    "select",
    [["lock_down", "read_file"], ToolSearch(core=["lock_down", "read_file"])],
    ids=["names", "search"],
)
async def test_a_permission_checker_set_mid_run_holds_for_the_selected_tools(
    serve, make_cycle, select
):
    # A run's calls go through a view of the tools it offers, which copied the checker
    # when built: one set mid-run (consent revoked) was ignored, and the tool still ran.
    registry = ToolRegistry()

    @registry.tool(permissions=["filesystem"])
    def read_file(path: str) -> str:
        """Read a text file from disk and return its contents."""
        return "contents"

    @registry.tool
    def lock_down() -> str:
        """Revoke file access for this session."""
        registry.permission_checker = PermissionChecker(PermissionConfig(denied=["filesystem"]))
        return "locked"

    server = serve(
        S.reply_tool_calls([("read_file", {"path": "a"}, "r1")]),
        S.reply_tool_calls([("lock_down", {}, "l1")]),
        S.reply_tool_calls([("read_file", {"path": "b"}, "r2")]),
    )
    cycle = make_cycle(server)

    with pytest.raises(LlmError, match=r"tool loop stopped: .*tool 'read_file'") as raised:
        await cycle.submit_with_tools("Read a and b", registry, select=select)

    # The run takes its tools again when the checker changes: read_file, refused, is
    # no longer offered, and a call to it is refused, as at the run's start.
    assert isinstance(raised.value.__cause__, PermissionDeniedError)
    assert tool_messages(cycle.messages)["r1"] == "contents"
    assert registry.entry("read_file").stats.calls == 1
    assert_history_valid(cycle.messages)


async def test_a_search_run_follows_tools_registered_and_unregistered_mid_run(
    serve, make_cycle, tagged
):
    # The run kept the tools it started with: an unregistered tool was still offered
    # and still ran, and one registered mid-run could not be found.
    @tagged.tool
    def swap_tools() -> str:
        """Stands in for an app revoking one tool and adding another mid-run."""
        tagged.unregister("weather")
        tagged.register(StaticTool("stock_price", "42", "The stock price of a ticker."))
        return "swapped"

    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "weather forecast city"}, "s1")]),
        S.reply_tool_calls([("swap_tools", {}, "x1")]),
        S.reply_tool_calls([("weather", {"city": "Oslo"}, "w1")]),
        S.reply_tool_calls([("search_tools", {"query": "stock price"}, "s2")]),
        S.reply_tool_calls([("stock_price", {}, "p1")]),
        S.reply_text("done"),
    )
    cycle = make_cycle(server, unknown_tool="tell_model")
    search = ToolSearch(core=["swap_tools"], max_results=1)

    await cycle.submit_with_tools("?", tagged, select=search)

    own = ["swap_tools", "search_tools"]
    assert sent(server) == [
        own,
        [*own, "weather"],
        own,
        own,
        [*own, "stock_price"],
        [*own, "stock_price"],
    ]
    answers = tool_messages(cycle.messages)
    assert answers["w1"].startswith("Error: tool 'weather' is not registered")
    assert answers["s2"].endswith("- stock_price: The stock price of a ticker.")
    assert answers["p1"] == "42"
    assert_history_valid(cycle.messages)


async def test_runs_over_an_unchanged_registry_take_its_definitions_once(
    serve, make_cycle, tagged, monkeypatch
):
    # Each run deep-copied (and, with a budget, counted) every definition on the event
    # loop: about half a second per run at 10,000 tools, even to offer one tool.
    taken: list[int] = []
    shared = snapshots.shared_definitions

    def counted(registry: ToolRegistry, *args: Any, **kwargs: Any) -> Any:
        taken.append(len(registry))
        return shared(registry, *args, **kwargs)

    monkeypatch.setattr(snapshots, "shared_definitions", counted)
    server = serve(*[S.reply_text("ok")] * 5)
    cycle = make_cycle(server)
    search = ToolSearch(budget=10_000)  # under it: every tool, counted once

    for select in (["add"], search, ["weather"], search):
        await cycle.submit_with_tools("?", tagged, select=select)
    assert taken == [4]

    tagged.register(StaticTool("stock_price", "42", "The stock price of a ticker."))
    await cycle.submit_with_tools("?", tagged, select=["stock_price"])
    assert taken == [4, 5]
    assert sent(server)[-1] == ["stock_price"]


async def test_a_found_tool_the_core_later_takes_in_is_offered_once(serve, make_cycle, tagged):
    def core(history: Any, registry: ToolRegistry) -> list[str]:
        return ["weather"] if len(history) > 1 else []

    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "weather"}, "s1")]),
        S.reply_text("done"),
    )
    cycle = make_cycle(server)

    await cycle.submit_with_tools("?", tagged, select=ToolSearch(core=core))

    assert sent(server) == [["search_tools"], ["weather", "search_tools"]]


async def test_a_search_that_matches_nothing_says_so_and_adds_nothing(serve, make_cycle, tagged):
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "zebra xylophone"}, "s1")]),
        S.reply_text("none"),
    )
    cycle = make_cycle(server)

    await cycle.submit_with_tools("?", tagged, select=ToolSearch())

    assert tool_messages(cycle.messages)["s1"] == (
        "No other tool matches 'zebra xylophone'; try other words."
    )
    assert sent(server) == [["search_tools"], ["search_tools"]]


@pytest.mark.parametrize(
    ("embedder", "fault"),
    [
        (lambda texts: [[1.0] * (3 if len(texts) > 1 else 5) for _ in texts], "of 5 numbers"),
        (lambda texts: [[1.0]] * (len(texts) - 1), "one vector per text"),
        (lambda texts: 1 / 0, "failed on 4 texts: ZeroDivisionError"),
    ],
    ids=["query-size", "count", "raises"],
)
async def test_a_misconfigured_embedder_stops_the_run_and_names_the_fault(
    serve, make_cycle, tagged, embedder, fault
):
    # Before, each search failed as a tool error the model read (numpy's own message for
    # a size mismatch), and the run went on without tools: the app never knew.
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "weather"}, "s1")]),
        S.reply_text("Sorry, no tool."),
    )

    with pytest.raises(
        LlmError, match=f"tool loop stopped: the tool search's embedder .*{fault}"
    ) as e:
        await make_cycle(server).submit_with_tools(
            "?", tagged, select=ToolSearch(embedder=embedder)
        )

    assert isinstance(e.value.__cause__, ValueError)  # a ToolConfigError: the app's to fix
    assert isinstance(e.value.__cause__.__cause__, LlmConfigError)
    assert len(server.requests) == 1


async def test_a_registry_under_the_search_budget_is_offered_whole(serve, make_cycle, tagged):
    server = serve(S.reply_text("ok"))
    cycle = make_cycle(server)

    await cycle.submit_with_tools("hi", tagged, select=ToolSearch(core=["add"], budget=100_000))

    assert sent(server) == [["add", "multiply", "weather", "read_file"]]


async def test_a_tool_named_search_tools_cannot_be_shadowed(serve, make_cycle, tagged):
    @tagged.tool
    def search_tools(query: str) -> str:
        """The user's own search."""
        return query

    server = serve()
    cycle = make_cycle(server)

    with pytest.raises(LlmConfigError, match="already has one"):
        await cycle.submit_with_tools("hi", tagged, select=ToolSearch())
    assert server.requests == []


# -- budget -----------------------------------------------------------------------------


async def test_definitions_over_the_budget_fail_before_the_request(serve, make_cycle, tagged):
    server = serve()
    cycle = make_cycle(server, max_definition_tokens=120)

    with pytest.raises(DefinitionBudgetError) as raised:
        await cycle.submit_with_tools("hi", tagged)

    error = raised.value
    assert server.requests == []
    assert error.budget == 120 and error.tokens > 120
    assert sorted(name for name, _ in error.costs) == sorted(tagged.list_tools())
    assert [tokens for _, tokens in error.costs] == sorted(
        (tokens for _, tokens in error.costs), reverse=True
    )
    assert f"the costliest: {error.costs[0][0]} ({error.costs[0][1]})" in str(error)


async def test_a_streamed_run_over_the_budget_fails_before_the_request(serve, make_cycle, tagged):
    server = serve()
    cycle = make_cycle(server, max_definition_tokens=120)

    with pytest.raises(DefinitionBudgetError):
        async with cycle.submit_stream_with_tools("hi", tagged) as events:
            _ = [event async for event in events]

    assert server.requests == []
    assert cycle.messages == []  # as it was: submitting the prompt again is right


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("limit", ["budget", "tool_count"])
async def test_a_prompt_refused_before_its_first_request_leaves_the_history_as_it_was(
    serve, make_cycle, tagged, limit, stream
):
    # The errors say to offer fewer tools: the prompt submitted again must join the
    # history once, not next to the refused one.
    server = serve(S.reply_text("Hello."), S.reply_text("5"))
    if limit == "budget":
        cycle = make_cycle(server, max_definition_tokens=120)
        refusal: type[LlmError] = DefinitionBudgetError
    else:
        cycle = make_cycle(server, profile=dataclasses.replace(OPENAI, max_tools=2))
        refusal = LlmConfigError
    await cycle.submit("hi")
    before = json.loads(json.dumps(cycle.messages))

    with pytest.raises(refusal):
        if stream:
            async with cycle.submit_stream_with_tools("2 + 3?", tagged) as events:
                _ = [event async for event in events]
        else:
            await cycle.submit_with_tools("2 + 3?", tagged)
    assert cycle.messages == before

    response = await cycle.submit_with_tools("2 + 3?", tagged, select=["add"])
    assert response.text == "5"
    assert server.requests[-1].json["messages"] == [
        *before,
        {"role": "user", "content": "2 + 3?"},
    ]


async def test_a_refused_prompt_leaves_a_paused_call_open_and_signed(serve, make_cycle, tagged):
    # The new prompt declined the paused call and dropped its signature: given back, the
    # call is open again, and the approval the app then gives still runs it.
    runs: list[int] = []

    @tagged.tool(needs_approval=True)
    def refund(order: int) -> str:
        """Refund an order."""
        runs.append(order)
        return f"refunded order {order}"

    server = serve(S.reply_tool_calls([("refund", {"order": 7}, "r1")]), S.reply_text("Done."))
    cycle = make_cycle(server, max_definition_tokens=120, approval_key=b"app secret")
    paused = await cycle.submit_with_tools("Refund order 7", tagged, select=["refund"])
    [request] = paused.pending_approvals
    before = json.loads(json.dumps(cycle.messages))

    with pytest.raises(DefinitionBudgetError):
        await cycle.submit_with_tools("And the weather?", tagged)
    assert cycle.messages == before

    response = await cycle.submit_with_tools(
        None, tagged, select=["refund"], approvals=[request.approve()]
    )
    assert (response.text, runs) == ("Done.", [7])
    assert_history_valid(cycle.messages)


async def test_a_run_counts_each_registered_definition_once_not_per_request(
    serve, make_cycle, tagged, monkeypatch
):
    # Each request counted every definition it offered again, on the event loop (its
    # JSON, then its tokens): about 60 ms per request at 10,000 tools, turn after turn.
    counted: list[str] = []
    text = _budget.json_text

    def noted(value: Any) -> str:
        counted.append(definition_name(value))
        return text(value)

    monkeypatch.setattr(_budget, "json_text", noted)
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]),
        S.reply_tool_calls([("add", {"a": 3, "b": 4}, "c2")]),
        S.reply_text("3, then 7."),
        S.reply_text("Still 7."),
    )
    cycle = make_cycle(server, max_definition_tokens=1000)

    await cycle.submit_with_tools("1 + 2, then 3 + 4?", tagged)
    await cycle.submit_with_tools("And again?", tagged)

    assert len(server.requests) == 4
    assert sorted(counted) == sorted(tagged.list_tools())

    # A tool replaced is counted anew: the counts are the registry's as it is.
    tagged.unregister("weather")
    tagged.register(StaticTool("weather", "sunny", "The weather. " * 400))
    with pytest.raises(DefinitionBudgetError) as raised:
        await cycle.submit_with_tools("Weather?", tagged)
    assert raised.value.costs[0][0] == "weather" and len(server.requests) == 4


async def test_a_selection_under_the_budget_is_sent(serve, make_cycle, tagged):
    server = serve(S.reply_text("ok"))
    cycle = make_cycle(server, max_definition_tokens=120)

    await cycle.submit_with_tools("hi", tagged, select=["add"])

    assert sent(server) == [["add"]]


def test_the_budget_must_be_positive():
    from agcore_tools import CycleConfig

    with pytest.raises(LlmConfigError, match="max_definition_tokens must be an integer at least 1"):
        CycleConfig("m", max_definition_tokens=0)


async def test_a_two_stage_search_lists_names_and_load_tools_offers_the_picked_ones(
    serve, make_cycle, tagged
):
    server = serve(
        S.reply_tool_calls([("search_tools", {"query": "weather in a city, or a file"}, "s1")]),
        S.reply_tool_calls([("load_tools", {"names": ["weather", "wether"]}, "l1")]),
        S.reply_tool_calls([("weather", {"city": "Oslo"}, "w1")]),
        S.reply_text("Sunny."),
    )
    cycle = make_cycle(server)
    search = ToolSearch(core=["add"], two_stage=True)

    response = await cycle.submit_with_tools("Weather in Oslo?", tagged, select=search)

    assert response.text == "Sunny."
    own = ["add", "search_tools", "load_tools"]
    # The search adds nothing; the load adds what the model picked, once.
    assert sent(server) == [own, own, [*own, "weather"], [*own, "weather"]]
    answers = tool_messages(cycle.messages)
    assert answers["s1"].startswith("Call load_tools with the names you need:\n")
    assert "- weather: The weather forecast in a city: temperature and sky." in answers["s1"]
    assert answers["l1"] == (
        "Callable from your next step: weather. No tool is named 'wether'; use the names "
        "search_tools listed."
    )
    assert answers["w1"] == "sunny in Oslo"


async def test_load_tools_without_names_says_what_to_give(serve, make_cycle, tagged):
    # An empty list was answered with an empty string: nothing for the model to go on.
    server = serve(
        S.reply_tool_calls([("load_tools", {"names": []}, "l1")]),
        S.reply_text("ok"),
    )
    cycle = make_cycle(server)

    await cycle.submit_with_tools("?", tagged, select=ToolSearch(two_stage=True))

    assert tool_messages(cycle.messages)["l1"] == (
        "Give names: a list of tool names, as search_tools listed them."
    )


async def test_a_tool_named_load_tools_cannot_be_shadowed_in_a_two_stage_search(
    serve, make_cycle, tagged
):
    @tagged.tool
    def load_tools(names: list[str]) -> str:
        """The user's own loader."""
        return ",".join(names)

    server = serve(S.reply_text("ok"))
    with pytest.raises(LlmConfigError, match="a tool named 'load_tools'"):
        await make_cycle(server).submit_with_tools("hi", tagged, select=ToolSearch(two_stage=True))
    await make_cycle(server).submit_with_tools("hi", tagged, select=ToolSearch())  # one stage
