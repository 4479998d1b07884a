"""The loop's policies against a real loopback server: unknown tools, forced tool_choice,
and going on after a stop without a new user message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import (
    LlmConfigError,
    LlmError,
    MaxTurnsExceededError,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolNotFoundError,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools._table import OFFERED_LISTED
from agcore_tools.calls import unknown_tool_error
from agcore_tools.cycle._policy import answer_unanswered, relaxed_tool_choice, unanswered_calls
from agcore_tools.testing import StaticTool

from .conftest import S, assert_history_valid, tool_messages

FORCE_ADD = {"type": "function", "function": {"name": "add"}}


def _call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- unknown tools ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_tell_model_answers_an_unknown_tool_with_the_tool_list_and_goes_on(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("ad", {"a": 1, "b": 2}, "typo"), ("add", {"a": 1, "b": 2}, "ok")]),
        S.reply_tool_calls([("add", {"a": 2, "b": 2}, "retry")]),
        S.reply_text("4"),
    )
    cycle = make_cycle(server, unknown_tool="tell_model")

    if stream:
        events = cycle.submit_stream_with_tools("2 + 2?", calc)
        seen = [event async for event in events]
        response = events.response
        completed = {e.call_id: e for e in seen if isinstance(e, ToolExecutionCompleted)}
        assert isinstance(completed["typo"].error, ToolNotFoundError)
    else:
        response = await cycle.submit_with_tools("2 + 2?", calc)

    assert response is not None and response.text == "4"
    answers = tool_messages(cycle.messages)
    assert answers["typo"] == (
        "Error: tool 'ad' is not registered: the tools offered are: add, weather, fail"
    )
    assert answers["ok"] == "3"  # the sibling ran
    assert calc.runs == [("add", {"a": 1, "b": 2}), ("add", {"a": 2, "b": 2})]
    assert [i.tool_name for i in response.invocations] == ["ad", "add", "add"]
    assert response.invocations[0].input == {"a": 1, "b": 2}  # parsed, though it never ran
    assert len(server.requests) == 3
    assert server.requests[1].json["messages"][-2:] == cycle.messages[2:4]
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_tell_model_never_names_a_tool_the_permissions_deny(serve, make_cycle, stream):
    # It listed every registered tool: the model learnt delete_file, which no request
    # offers, called it, and the refusal ended the run tell_model was to keep going.
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))  # delete is denied

    def add(name: str, permission: str) -> None:
        tool = StaticTool(name)
        tool.required_permissions = (permission,)
        registry.register(tool)

    add("read_file", "read")
    add("delete_file", "delete")
    server = serve(S.reply_tool_calls([("delete_files", {"path": "x"}, "c1")]), S.reply_text("ok"))
    cycle = make_cycle(server, unknown_tool="tell_model")

    if stream:
        response = await cycle.submit_stream_with_tools("Tidy up", registry).collect()
    else:
        response = await cycle.submit_with_tools("Tidy up", registry)

    assert response.text == "ok"
    assert tool_messages(cycle.messages)["c1"] == (
        "Error: tool 'delete_files' is not registered: the tools offered are: read_file"
    )
    assert [t["function"]["name"] for t in server.requests[0].json["tools"]] == ["read_file"]
    # Past 30 tools, the closest names are of the tools offered too.
    for number in range(30):
        add(f"read_{number}", "read")
    add("delete_note", "read")
    server.add(S.reply_tool_calls([("delete_files", {"path": "x"}, "c2")]), S.reply_text("ok"))

    await cycle.submit_with_tools("Again", registry)

    assert tool_messages(cycle.messages)["c2"] == (
        "Error: tool 'delete_files' is not registered: 32 tools are offered; the closest "
        "names are: delete_note, read_file"
    )
    assert_history_valid(cycle.messages)


def test_a_temporal_run_begun_before_the_offered_list_still_lists_every_tool() -> None:
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))
    shell = StaticTool("shell")
    shell.required_permissions = ("shell",)
    registry.register_all([StaticTool("ls"), StaticTool("cat"), shell])
    view = registry.view([registry.entry("ls")]).tool_table  # a select=["ls"] run's
    before = OFFERED_LISTED.set(False)  # ToolLoopWorkflow, without its patch marker
    try:
        old = [
            str(unknown_tool_error(registry.tool_table, "rm")),
            str(unknown_tool_error(view, "cat")),
        ]
    finally:
        OFFERED_LISTED.reset(before)
    assert old == [
        "tool 'rm' is not registered: the registered tools are: ls, cat, shell",
        "tool 'cat' is not registered: the registered tools are: ls",
    ]
    assert [
        str(unknown_tool_error(registry.tool_table, "rm")),
        str(unknown_tool_error(view, "cat")),
    ] == [
        "tool 'rm' is not registered: the tools offered are: ls, cat",
        "tool 'cat' is not available in this conversation: the tools offered are: ls",
    ]


async def test_tell_model_still_stops_on_a_denied_permission(serve, make_cycle):
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))  # shell is denied

    @registry.tool(permissions=["shell"])
    def run_shell(command: str) -> str:
        """Run a shell command."""
        raise AssertionError("never runs")

    server = serve(S.reply_tool_calls([("nope", {}, "c1"), ("run_shell", {"command": "ls"}, "c2")]))
    cycle = make_cycle(server, unknown_tool="tell_model")

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("List files", registry)

    assert isinstance(raised.value.__cause__, PermissionDeniedError)
    answers = tool_messages(cycle.messages)
    assert answers["c1"].startswith("Error: aborted; tool 'nope' did not complete")
    assert answers["c2"].startswith("Error: permission denied")
    assert_history_valid(cycle.messages)


async def test_by_default_an_unknown_tool_still_stops_the_loop(serve, make_cycle, calc):
    server = serve(S.reply_tool_calls([("ad", {"a": 1, "b": 2}, "typo")]))
    cycle = make_cycle(server)
    assert cycle.config.unknown_tool == "raise"

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("1 + 2?", calc)

    assert isinstance(raised.value.__cause__, ToolNotFoundError)
    assert "the tools offered are: add, weather, fail" in tool_messages(cycle.messages)["typo"]


# -- tool calls per turn --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "stream"),
    [("chat", False), ("chat", True), ("responses", False), ("responses", True)],
    ids=["chat-json", "chat-sse", "responses-json", "responses-sse"],
)
async def test_the_calls_of_an_answer_past_its_limit_are_answered_not_run_nor_asked(
    serve, make_cycle, api, stream
):
    # One answer of 3,000 calls ran them all: max_turns counts requests.
    registry = ToolRegistry()
    ran: list[str] = []

    @registry.tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return f"content of {path}"

    @registry.tool(needs_approval=True)
    def refund(order: int) -> str:
        """Refund an order."""
        raise AssertionError("never runs")

    calls = [("read_file", {"path": p}, f"c_{p}") for p in "abc"]
    server = serve(
        S.reply_tool_calls([*calls, ("refund", {"order": 1}, "c_refund"), ("nope", {}, "c_nope")]),
        S.reply_text("I will send the rest"),
    )
    cycle = make_cycle(server, api=api, max_tool_calls_per_turn=2)

    if stream:
        response = await cycle.submit_stream_with_tools("Read a, b, c", registry).collect()
    else:
        response = await cycle.submit_with_tools("Read a, b, c", registry)

    assert response.text == "I will send the rest"
    assert sorted(ran) == ["a", "b"]  # sync tools run in threads, in no set order
    assert response.pending_approvals == ()  # refund is past the limit: no one is asked
    not_run = (
        "Error: not run: more than 2 tool calls in one answer; send the rest in your next turn"
    )
    sent = server.requests[1].body.decode()
    assert sent.count(json.dumps(not_run)[1:-1]) == 3  # c, refund and the unknown nope
    assert [i.error is None for i in response.invocations] == [True, True, False, False, False]
    assert all(i.may_have_run is False for i in response.invocations[2:])
    if api == "chat":
        answers = tool_messages(cycle.messages)
        assert [answers[f"c_{n}"] for n in ("c", "refund", "nope")] == [not_run] * 3
        assert_history_valid(cycle.messages)


async def test_by_default_an_answer_runs_at_most_128_calls(serve, make_cycle, calc):
    calls = [("add", {"a": n, "b": 1}, f"c{n}") for n in range(130)]
    server = serve(S.reply_tool_calls(calls), S.reply_text("done"))
    cycle = make_cycle(server)

    await cycle.submit_with_tools("Add them", calc)

    assert len(calc.runs) == 128
    answers = tool_messages(cycle.messages)
    assert answers["c127"] == "128"
    assert (
        answers["c128"]
        == answers["c129"]
        == (
            "Error: not run: more than 128 tool calls in one answer; send the rest in your next turn"
        )
    )
    assert_history_valid(cycle.messages)


# -- forced tool_choice ---------------------------------------------------------------------


@pytest.mark.parametrize("choice", ["required", FORCE_ADD], ids=["required", "named"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_forced_tool_choice_serves_the_first_request_then_becomes_auto(
    serve, make_cycle, calc, choice, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_text("3"),
        S.reply_tool_calls([("add", {"a": 3, "b": 4})]),
        S.reply_text("7"),
    )
    cycle = make_cycle(server, tool_choice=choice)

    for prompt in ("1 + 2?", "3 + 4?"):
        if stream:
            await cycle.submit_stream_with_tools(prompt, calc).collect()
        else:
            await cycle.submit_with_tools(prompt, calc)

    sent = [request.json["tool_choice"] for request in server.requests]
    assert sent == [choice, "auto", choice, "auto"]  # forced again on each new call
    assert dict(cycle.config.request_options) == {"tool_choice": choice}


async def test_reset_tool_choice_false_forces_every_request(serve, make_cycle, calc):
    server = serve(*[S.reply_tool_calls([("add", {"a": 1, "b": i})]) for i in range(3)])
    cycle = make_cycle(server, tool_choice=FORCE_ADD, reset_tool_choice=False, max_turns=3)

    with pytest.raises(MaxTurnsExceededError):
        await cycle.submit_with_tools("Add forever", calc)

    assert [request.json["tool_choice"] for request in server.requests] == [FORCE_ADD] * 3


FORCED_ON_THE_WIRE = {
    "chat": FORCE_ADD,
    "responses": {"type": "function", "name": "add"},  # the Responses API's shape
}


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_resume_after_an_approval_goes_on_with_auto(serve, make_cycle, api):
    # Forced again on the resume, the model would call the tool again: one more approval
    # and one more run on every resume, and never an answer.
    registry = ToolRegistry()
    runs: list[int] = []

    @registry.tool(needs_approval=True)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        runs.append(a + b)
        return a + b

    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_text("3"),
        S.reply_tool_calls([("add", {"a": 3, "b": 4})]),
    )
    cycle = make_cycle(server, api=api, tool_choice=FORCE_ADD)

    paused = await cycle.submit_with_tools("1 + 2?", registry)
    [request] = paused.pending_approvals
    response = await cycle.submit_with_tools(None, registry, approvals=[request.approve()])
    assert (response.text, response.pending_approvals, runs) == ("3", (), [3])
    await cycle.submit_with_tools("3 + 4?", registry)  # a new prompt: forced again

    forced = FORCED_ON_THE_WIRE[api]
    assert [r.json["tool_choice"] for r in server.requests] == [forced, "auto", forced]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_going_on_after_max_turns_sends_auto_and_after_an_unsent_prompt_forces(
    serve, make_cycle, calc, api
):
    server = serve(
        S.error(400, "bad request"),
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_text("3"),
    )
    cycle = make_cycle(server, api=api, tool_choice=FORCE_ADD, max_turns=1)

    with pytest.raises(LlmError):  # the prompt's forced request got no answer
        await cycle.submit_with_tools("1 + 2?", calc)
    with pytest.raises(MaxTurnsExceededError):  # so the next one is forced: it is served
        await cycle.submit_with_tools(None, calc)
    response = await cycle.submit_with_tools(None, calc)

    assert response.text == "3"
    forced = FORCED_ON_THE_WIRE[api]
    assert [r.json["tool_choice"] for r in server.requests] == [forced, forced, "auto"]


@pytest.mark.parametrize(
    ("choice", "after"),
    [
        ("required", "auto"),
        (FORCE_ADD, "auto"),
        ({"type": "custom", "custom": {"name": "grammar"}}, "auto"),
        (
            {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [FORCE_ADD]}},
            {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [FORCE_ADD]}},
        ),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}, None),
        # The Responses shape: mode and tools on the choice itself.
        (
            {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "add"}],
            },
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "add"}],
            },
        ),
        ({"type": "allowed_tools", "mode": "auto", "tools": []}, None),
        ("auto", None),
        ("none", None),
    ],
)
def test_only_forced_choices_are_relaxed(choice: object, after: object) -> None:
    assert relaxed_tool_choice({"tool_choice": choice}) == after


@pytest.mark.parametrize(
    ("given", "first", "then"),
    [
        (
            {"type": "function", "name": "add"},
            {"type": "function", "function": {"name": "add"}},
            "auto",
        ),
        (
            {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "add"}],
            },
            {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [FORCE_ADD]}},
            {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [FORCE_ADD]}},
        ),
        (
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "add"}, {"type": "custom", "name": "g"}],
            },
            {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [FORCE_ADD, {"type": "custom", "custom": {"name": "g"}}],
                },
            },
            None,
        ),
    ],
    ids=["named", "allowed_tools", "allowed_custom_tools"],
)
async def test_a_responses_shaped_tool_choice_goes_to_chat_completions_in_its_shape(
    serve, make_cycle, calc, given, first, then
):
    # An app moving from responses.create writes the Responses shape; Chat Completions
    # answers it with a 400 ("Missing required parameter: 'tool_choice.function'").
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]), S.reply_text("3"))
    cycle = make_cycle(server, tool_choice=given)

    response = await cycle.submit_with_tools("1 + 2?", calc)

    assert response.text == "3"
    assert [r.json["tool_choice"] for r in server.requests] == [first, then or first]


async def test_a_resume_after_a_structured_answer_was_asked_again_keeps_the_choice_relaxed(
    serve, make_cycle, calc
):
    # The loop's user message asking again for an answer that failed its schema was read
    # as a new prompt: the resume forced add once more, and the model called it again.
    class Sum(BaseModel):
        total: int

    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]),
        S.reply_text("three"),  # not a Sum: the loop asks again
        S.error(400, "the server is down", type="invalid_request_error"),
        S.reply_text('{"total": 3}'),
    )
    cycle = make_cycle(server, tool_choice=FORCE_ADD)
    with pytest.raises(LlmError):
        await cycle.submit_with_tools("1 + 2?", calc, output_type=Sum)
    assert cycle.messages[-1]["content"].startswith("Your answer is not a valid Sum")

    resumed = make_cycle(server, tool_choice=FORCE_ADD)
    resumed.messages = json.loads(json.dumps(cycle.messages))
    response = await resumed.submit_with_tools(None, calc, output_type=Sum)

    assert response.output == Sum(total=3)
    assert [r.json["tool_choice"] for r in server.requests] == [FORCE_ADD, "auto", "auto", "auto"]
    assert calc.runs == [("add", {"a": 1, "b": 2})]


def test_no_tool_choice_is_left_alone() -> None:
    assert relaxed_tool_choice({}) is None


# -- going on without a new user message ------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_after_max_turns_prompt_none_goes_on_with_the_registry_s_tools(
    serve, make_cycle, calc, stream
):
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]), S.reply_text("3"))
    cycle = make_cycle(server, max_turns=1)
    with pytest.raises(MaxTurnsExceededError):
        await cycle.submit_with_tools("1 + 2?", calc)
    stopped_at = len(cycle.messages)

    if stream:
        response = await cycle.submit_stream_with_tools(None, calc).collect()
    else:
        response = await cycle.submit_with_tools(None, calc)

    assert response.text == "3"
    resumed = server.requests[1].json
    assert resumed["messages"] == cycle.messages[:stopped_at]  # no new user message
    assert [t["function"]["name"] for t in resumed["tools"]] == ["add", "weather", "fail"]
    assert calc.runs == [("add", {"a": 1, "b": 2})]  # the answered call did not run again
    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_prompt_none_runs_tool_calls_left_unanswered_then_asks_the_model(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1"), ("weather", {"city": "Oslo"}, "c2")]),
        S.reply_text("3, and clear in Oslo"),
    )
    cycle = make_cycle(server)
    await cycle.submit("1 + 2, and the weather in Oslo?")  # no tools: the calls stay open
    assert unanswered_calls(cycle.messages)

    if stream:
        events = cycle.submit_stream_with_tools(None, calc)
        kinds = [type(event).__name__ async for event in events]
        response = events.response
        # The open calls run before the first request of the call.
        assert kinds[:2] == ["ToolExecutionStarted"] * 2
        assert sorted(kinds[2:4]) == ["ToolExecutionCompleted"] * 2
        assert kinds[-1] == TurnComplete.__name__
    else:
        response = await cycle.submit_with_tools(None, calc)

    assert response is not None and response.text == "3, and clear in Oslo"
    assert sorted(calc.runs) == [("add", {"a": 1, "b": 2}), ("weather", {"city": "Oslo"})]
    assert sorted(i.call_id for i in response.invocations) == ["c1", "c2"]
    answers = tool_messages(cycle.messages)
    assert answers["c1"] == "3"
    assert json.loads(answers["c2"])["city"] == "Oslo"
    assert server.requests[1].json["messages"] == cycle.messages[:-1]
    assert "tools" in server.requests[1].json
    assert_history_valid(cycle.messages)


async def test_prompt_none_runs_only_the_calls_no_tool_message_answers(serve, make_cycle, calc):
    server = serve(S.reply_text("3 and 7"))
    cycle = make_cycle(server)
    cycle.messages += [
        {"role": "user", "content": "1 + 2 and 3 + 4?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call("c1", "add", '{"a": 1, "b": 2}'),
                _call("c2", "add", '{"a": 3, "b": 4}'),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]

    response = await cycle.submit_with_tools(None, calc)

    assert response.text == "3 and 7"
    assert calc.runs == [("add", {"a": 3, "b": 4})]
    assert tool_messages(cycle.messages) == {"c1": "3", "c2": "7"}
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("unknown_tool", ["raise", "tell_model"])
async def test_prompt_none_with_an_open_call_to_an_unknown_tool_leaves_the_history(
    serve, make_cycle, calc, unknown_tool
):
    # The open call may be one a paused run left waiting for approval, resumed where
    # the registry lacks its tool: answered as unknown, the request would be lost.
    server = serve(S.reply_tool_calls([("ad", {}, "c1")]), S.reply_text("sorry"))
    cycle = make_cycle(server, unknown_tool=unknown_tool)
    await cycle.submit("Add")
    saved = json.loads(json.dumps(cycle.messages))

    with pytest.raises(LlmConfigError, match="open call 'c1' is to tool 'ad', which the"):
        await cycle.submit_with_tools(None, calc)
    assert len(server.requests) == 1  # stopped before asking the model
    assert cycle.messages == saved

    # A new prompt moves on: the call is answered as not run.
    assert (await cycle.submit_with_tools("Add 1 and 2", calc)).text == "sorry"
    assert_history_valid(cycle.messages)


# -- the helpers --------------------------------------------------------------------------


def test_unanswered_calls_reads_only_the_last_assistant_message() -> None:
    opened = {"role": "assistant", "content": None, "tool_calls": [_call("c1", "add")]}
    assert [c.call_id for c in unanswered_calls([{"role": "user", "content": "x"}, opened])] == [
        "c1"
    ]
    answered = [opened, {"role": "tool", "tool_call_id": "c1", "content": "1"}]
    assert unanswered_calls(answered) == []
    # A user message after it: nothing can be answered in the right place any more.
    assert unanswered_calls([opened, {"role": "user", "content": "next"}]) == []
    assert unanswered_calls([]) == []
    # Malformed calls (no id) are skipped rather than crashing.
    broken = {"role": "assistant", "tool_calls": [{"type": "function"}, "junk"]}
    assert unanswered_calls([broken]) == []


def test_answer_unanswered_gives_each_open_call_an_aborted_answer() -> None:
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "add")]},
    ]
    answer_unanswered(messages, 0, "stopped")
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Error: aborted; tool 'add' did not complete: stopped",
    }
    before = list(messages)
    answer_unanswered(messages, 0, "stopped")
    assert messages == before


async def test_started_events_name_the_open_calls_they_run(serve, make_cycle, calc):
    server = serve(S.reply_tool_calls([("add", {"a": 5, "b": 5}, "c9")]), S.reply_text("10"))
    cycle = make_cycle(server)
    await cycle.submit("5 + 5?")

    events = cycle.submit_stream_with_tools(None, calc)
    started = [e async for e in events if isinstance(e, ToolExecutionStarted)]

    assert [(e.tool_name, e.input, e.call_id) for e in started] == [("add", {"a": 5, "b": 5}, "c9")]
