"""LlmCycle against a real loopback server: the loop, its events, its history, its errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agcore_tools import (
    AssistantTextDelta,
    BaseTool,
    ChatResponse,
    CycleConfig,
    FinishReason,
    Image,
    InvalidArgumentsError,
    LlmConfigError,
    LlmCycle,
    LlmError,
    MaxTurnsExceededError,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    ReasoningDelta,
    ToolContext,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolIOError,
    ToolNotFoundError,
    ToolRegistry,
    ToolTimeoutError,
    TrimOldest,
    TurnComplete,
    tool,
)
from agcore_tools.error import LlmUsageError
from agcore_tools.testing import Pause, RawStream, Reply

from .conftest import S, assert_history_valid, tool_messages

# -- acceptance 10-13: one tool turn, several turns, max_turns, events, trajectory -----


async def test_single_tool_turn_runs_the_tool_and_sends_its_result_back(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "call_a")]),
        S.reply_text("2 + 3 = 5"),
    )
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("What is 2 + 3?", calc)

    assert isinstance(response, ChatResponse)
    assert response.text == "2 + 3 = 5"
    assert response.stop_reason is FinishReason.STOP
    assert response.turns == 2
    assert calc.runs == [("add", {"a": 2, "b": 3})]
    assert [inv.output for inv in response.invocations] == [5]
    # The second request carries the tool's result for the model.
    second = server.requests[1].json["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_a", "content": "5"}
    # Both requests offered the tools.
    assert [t["function"]["name"] for t in server.requests[0].json["tools"]] == [
        "add",
        "weather",
        "fail",
    ]


async def test_several_tool_turns_and_usage_summed_over_every_request(serve, make_cycle, calc):
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    server = serve(
        S.reply_tool_calls([("weather", {"city": "Paris"})], usage=usage),
        S.reply_tool_calls([("add", {"a": 21, "b": 1})], usage=usage),
        S.reply_text("It is 22 degrees.", usage=usage),
    )
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Paris weather plus one?", calc)

    assert response.text == "It is 22 degrees."
    assert response.turns == 3
    assert len(server.requests) == 3
    assert [name for name, _ in calc.runs] == ["weather", "add"]
    assert response.usage.prompt_tokens == 30
    assert response.usage.total_tokens == 36
    assert response.usage.requests == 3
    third = server.requests[2].json["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "tool", "assistant", "tool"]
    assert json.loads(third[2]["content"]) == {"city": "Paris", "temp_c": 21, "sky": "clear"}


async def test_max_turns_raises_without_sending_the_extra_request(serve, make_cycle, calc):
    server = serve(*[S.reply_tool_calls([("add", {"a": 1, "b": 1})]) for _ in range(3)])
    cycle = make_cycle(server, max_turns=2)

    with pytest.raises(MaxTurnsExceededError) as raised:
        await cycle.submit_with_tools("Loop forever", calc)

    stopped = raised.value
    assert stopped.max_turns == 2
    assert isinstance(stopped, LlmError)
    assert len(server.requests) == 2  # the third request was never sent
    assert len(calc.runs) == 2
    assert cycle.messages[-1]["role"] == "tool"  # history is ready to continue
    assert_history_valid(cycle.messages)
    # The partial work is on the error.
    assert [(i.tool_name, i.output) for i in stopped.invocations] == [("add", 2), ("add", 2)]
    assert (stopped.usage.requests, stopped.usage.prompt_tokens) == (2, 20)
    assert stopped.history_length == len(cycle.messages) == 5


async def test_max_turns_none_means_unlimited(serve, make_cycle, calc):
    server = serve(
        *[S.reply_tool_calls([("add", {"a": i, "b": 0})]) for i in range(12)],
        S.reply_text("done"),
    )
    cycle = make_cycle(server, max_turns=None)

    response = await cycle.submit_with_tools("Count to twelve", calc)

    assert response.turns == 13
    assert len(calc.runs) == 12


async def test_streaming_events_come_in_the_documented_order(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls(
            [("weather", {"city": "Beijing"}, "c1"), ("add", {"a": 1, "b": 2}, "c2")],
            text="Let me check the weather in Beijing for you.",
        ),
        S.reply_text("Beijing is 21 degrees and clear today."),
        chunk_chars=8,
    )
    cycle = make_cycle(server)

    events = []
    stream = cycle.submit_stream_with_tools("Weather in Beijing?", calc)
    async for event in stream:
        events.append(event)

    kinds = [type(e).__name__ for e in events]
    first_complete = kinds.index("TurnComplete")
    assert set(kinds[:first_complete]) == {"AssistantTextDelta"}
    assert first_complete > 1  # the text arrived in several deltas
    assert kinds[first_complete + 1 : first_complete + 3] == ["ToolExecutionStarted"] * 2
    assert sorted(kinds[first_complete + 3 : first_complete + 5]) == ["ToolExecutionCompleted"] * 2
    assert set(kinds[first_complete + 5 : -1]) == {"AssistantTextDelta"}
    assert kinds[-1] == "TurnComplete"

    turn_one, turn_two = (e for e in events if isinstance(e, TurnComplete))
    assert (turn_one.reason, turn_one.turn) == (FinishReason.TOOL_CALLS, 1)
    assert (turn_two.reason, turn_two.turn) == (FinishReason.STOP, 2)
    assert turn_one.usage is not None and turn_one.usage.prompt_tokens == 10
    text_one = "".join(e.text for e in events[:first_complete])  # type: ignore[union-attr]
    assert text_one == "Let me check the weather in Beijing for you."
    started = [e for e in events if isinstance(e, ToolExecutionStarted)]
    assert [(e.tool_name, e.input, e.call_id) for e in started] == [
        ("weather", {"city": "Beijing"}, "c1"),
        ("add", {"a": 1, "b": 2}, "c2"),
    ]
    completed = {e.call_id: e for e in events if isinstance(e, ToolExecutionCompleted)}
    assert completed["c2"].output == 3 and completed["c2"].ok
    assert completed["c1"].output == {"city": "Beijing", "temp_c": 21, "sky": "clear"}
    assert stream.response is not None
    assert stream.response.text == "Beijing is 21 degrees and clear today."
    assert server.requests[0].json["stream"] is True
    assert server.requests[0].json["stream_options"] == {"include_usage": True}


async def test_editing_a_started_events_input_changes_nothing_the_tool_runs_with(
    serve, make_cycle, calc
):
    # A UI masks what it shows; the tools start only after the Started events are taken.
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]), S.reply_text("3"))
    cycle = make_cycle(server)

    async with cycle.submit_stream_with_tools("1 + 2?", calc) as events:
        async for event in events:
            if isinstance(event, ToolExecutionStarted):
                event.input["a"] = 100
                event.input.pop("b")

    assert calc.runs == [("add", {"a": 1, "b": 2})]
    assert json.loads(cycle.messages[1]["tool_calls"][0]["function"]["arguments"]) == {
        "a": 1,
        "b": 2,
    }
    assert events.response is not None
    assert events.response.invocations[0].input == {"a": 1, "b": 2}


async def test_a_started_event_copies_arguments_nested_as_deep_as_json_parses(serve, make_cycle):
    # copy.deepcopy recurses: arguments nested 900 deep (json.loads takes them) broke it.
    registry = ToolRegistry()

    @registry.tool
    def depth(value: Any) -> int:
        """How deep a list nests."""
        levels = 0
        while isinstance(value, list) and value:
            value, levels = value[0], levels + 1
        return levels

    deep = "[" * 900 + "]" * 900
    server = serve(S.reply_tool_calls([("depth", '{"value": ' + deep + "}")]), S.reply_text("ok"))
    cycle = make_cycle(server)

    events = [e async for e in cycle.submit_stream_with_tools("How deep?", registry)]

    started = next(e for e in events if isinstance(e, ToolExecutionStarted))
    assert json.dumps(started.input) == '{"value": ' + deep + "}"
    done = next(e for e in events if isinstance(e, ToolExecutionCompleted))
    assert done.output == 899


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_stream_options_of_the_config_go_on_streamed_requests_only(serve, make_cycle, api):
    # OpenAI answers 400 to stream_options on a request without stream=true.
    options = {"include_usage": True} if api == "chat" else {"include_obfuscation": False}
    server = serve(S.reply_text("plain"), S.reply_text("streamed"))
    cycle = make_cycle(server, api=api, stream_options=options)

    await cycle.submit("hello")
    await cycle.submit_stream("hello again").collect()

    plain, streamed = (request.json for request in server.requests)
    assert ("stream" in plain, "stream_options" in plain) == (False, False)
    assert (streamed["stream"], streamed["stream_options"]) == (True, options)


async def test_a_streamed_runs_own_stream_options_keep_the_loops_include_usage(serve, make_cycle):
    # The app's stream_options replaced {"include_usage": True}: the streamed run
    # reported no usage. Now the two are merged, and an include_usage of the app's wins.
    server = serve(S.reply_text("merged"), S.reply_text("theirs"))
    own = {"include_obfuscation": False}
    merged = make_cycle(server, stream_options=own)
    response = await merged.submit_stream("hello").collect()
    assert own == {"include_obfuscation": False}  # the app's mapping is copied, not changed
    theirs = make_cycle(server, stream_options={"include_usage": False})
    quiet = await theirs.submit_stream("hello").collect()

    first, second = (request.json["stream_options"] for request in server.requests)
    assert first == {"include_obfuscation": False, "include_usage": True}
    assert (response.usage.reported, response.usage.prompt_tokens) == (1, 10)
    assert second == {"include_usage": False}
    assert quiet.usage.reported == 0


async def test_completed_events_follow_completion_order_not_call_order(serve, make_cycle):
    registry = ToolRegistry()

    @registry.tool
    async def nap(seconds: float) -> float:
        """Sleep a while."""
        await asyncio.sleep(seconds)
        return seconds

    server = serve(
        S.reply_tool_calls([("nap", {"seconds": 0.3}, "slow"), ("nap", {"seconds": 0.0}, "fast")]),
        S.reply_text("rested"),
    )
    cycle = make_cycle(server)
    events = [e async for e in cycle.submit_stream_with_tools("nap", registry)]

    done = [e.call_id for e in events if isinstance(e, ToolExecutionCompleted)]
    assert done == ["fast", "slow"]
    # The history still answers the calls in the model's order.
    assert [m["tool_call_id"] for m in cycle.messages if m["role"] == "tool"] == ["slow", "fast"]


async def test_full_trajectory_is_kept_in_messages_and_can_be_sent_again(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 2}, "call_x")], text="Adding."),
        S.reply_text("4"),
        S.reply_text("Yes, 4."),
    )
    cycle = make_cycle(server, system_prompt="You are a calculator.")

    await cycle.submit_with_tools("2+2?", calc)

    assert cycle.messages == [
        {"role": "system", "content": "You are a calculator."},
        {"role": "user", "content": "2+2?"},
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [
                {
                    "id": "call_x",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_x", "content": "4"},
        {"role": "assistant", "content": "4"},
    ]
    assert json.loads(json.dumps(cycle.messages)) == cycle.messages
    # submit_messages pushes no user message: the history goes out exactly as kept.
    snapshot = list(cycle.messages)
    response = await cycle.submit_messages([])
    assert server.requests[2].json["messages"] == snapshot
    assert "tools" not in server.requests[2].json
    assert response.text == "Yes, 4."


async def test_submit_sends_no_tools_and_records_the_exchange(serve, make_cycle):
    server = serve(S.reply_text("Hello!"), S.reply_text("Again!"))
    cycle = make_cycle(server)

    response = await cycle.submit("Hi")
    again = await cycle.submit_messages([{"role": "user", "content": "Once more"}])

    assert (response.text, again.text) == ("Hello!", "Again!")
    assert "tools" not in server.requests[0].json
    assert [m["content"] for m in cycle.messages] == ["Hi", "Hello!", "Once more", "Again!"]


async def test_submit_stream_without_tools_yields_text_then_turn_complete(serve, make_cycle):
    server = serve(S.reply_text("Streaming works fine.", reasoning="Think first."), chunk_chars=5)
    cycle = make_cycle(server)

    stream = cycle.submit_stream("Stream please")
    events = [e async for e in stream]

    assert "".join(e.text for e in events if isinstance(e, AssistantTextDelta)) == (
        "Streaming works fine."
    )
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Think first."
    assert isinstance(events[-1], TurnComplete) and events[-1].reason is FinishReason.STOP
    assert stream.response is not None and stream.response.text == "Streaming works fine."
    assert await stream.collect() is stream.response


async def test_without_a_registry_tool_calls_are_returned_for_the_caller_to_run(
    serve, make_cycle, calc
):
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]), S.reply_text("3"))
    cycle = make_cycle(server)

    response = await cycle.submit_stream("1+2?").collect()

    assert response.stop_reason is FinishReason.TOOL_CALLS
    assert response.message["tool_calls"][0]["id"] == "c1"
    assert calc.runs == []
    # The drop-in helper answers them; the conversation then goes on.
    cycle.messages.extend(await calc.run_tool_calls(response.message["tool_calls"]))
    assert (await cycle.submit_messages([])).text == "3"
    assert server.requests[1].json["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "3",
    }


# -- tool turns whatever finish_reason says; finish reasons ------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("finish_reason", ["stop", None, "eos"])
async def test_a_turn_with_tool_calls_is_a_tool_turn_whatever_finish_reason_says(
    serve, make_cycle, calc, stream, finish_reason
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 1})], finish_reason=finish_reason or ""),
        S.reply_text("2"),
    )
    cycle = make_cycle(server)

    if stream and finish_reason is None:
        # No finish_reason at all in a stream means it was cut: nothing runs.
        with pytest.raises(LlmError, match="stream was cut"):
            await cycle.submit_stream_with_tools("1+1", calc).collect()
        assert calc.runs == []
        return
    if stream:
        events = [e async for e in cycle.submit_stream_with_tools("1+1", calc)]
        first = next(e for e in events if isinstance(e, TurnComplete))
        assert first.reason is FinishReason.TOOL_CALLS
        assert first.raw_reason == (finish_reason or None)
    else:
        response = await cycle.submit_with_tools("1+1", calc)
        assert response.text == "2"
    assert calc.runs == [("add", {"a": 1, "b": 1})]
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("length", FinishReason.LENGTH),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("eos_token", FinishReason.OTHER),
    ],
)
async def test_final_finish_reasons_are_mapped(serve, make_cycle, raw, expected):
    server = serve(S.reply_text("cut", finish_reason=raw))
    response = await make_cycle(server).submit("Hi")
    assert response.stop_reason is expected


async def test_reasoning_content_is_kept_on_assistant_messages_in_history(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})], reasoning="I should add."),
        S.reply_text("3", reasoning="Done adding."),
    )
    cycle = make_cycle(server)

    events = [e async for e in cycle.submit_stream_with_tools("1+2", calc)]

    resent = server.requests[1].json["messages"][1]
    assert resent["role"] == "assistant"
    assert resent["reasoning_content"] == "I should add."
    assert cycle.messages[-1]["reasoning_content"] == "Done adding."
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "I should add.Done adding."


# -- tool errors ---------------------------------------------------------------------


async def test_recoverable_tool_error_goes_back_to_the_model_and_the_loop_continues(
    serve, make_cycle, calc
):
    server = serve(S.reply_tool_calls([("fail", {"reason": "disk full"})]), S.reply_text("Sorry."))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Try it", calc)

    assert response.text == "Sorry."
    content = server.requests[1].json["messages"][-1]["content"]
    assert content == "Error: tool 'fail' failed: ValueError: disk full"
    assert response.invocations[0].error is not None


async def test_unknown_tool_stops_the_loop_and_runs_no_call_of_the_turn(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 1}, "ok_call"), ("rm_rf", {}, "bad_call")]),
        S.reply_text("continued"),
    )
    cycle = make_cycle(server)

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("Do it", calc)

    assert isinstance(raised.value.__cause__, ToolNotFoundError)
    assert "rm_rf" in str(raised.value)
    assert calc.runs == []  # not even the valid sibling ran
    assert len(server.requests) == 1
    answers = tool_messages(cycle.messages)
    assert answers["bad_call"].startswith("Error: tool 'rm_rf' is not registered")
    assert answers["ok_call"] == (
        "Error: aborted; tool 'add' did not complete: tool 'rm_rf' is not registered"
    )  # not "was refused": nothing refused it, there is no such tool
    assert_history_valid(cycle.messages)
    # The conversation can go on from there.
    assert (await cycle.submit_messages([])).text == "continued"
    assert server.requests[1].json["messages"] == cycle.messages[:-1]


async def test_denied_permission_stops_the_loop_and_the_tool_never_runs(serve, make_cycle):
    ran: list[str] = []
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))  # shell is denied

    @registry.tool(permissions=["shell"])
    def run_shell(command: str) -> str:
        """Run a shell command."""
        ran.append(command)
        return "ran"

    server = serve(S.reply_tool_calls([("run_shell", {"command": "rm -rf /"}, "c1")]))
    cycle = make_cycle(server)

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("Clean up", registry)

    assert isinstance(raised.value.__cause__, PermissionDeniedError)
    assert ran == []
    assert tool_messages(cycle.messages)["c1"].startswith("Error: permission denied")
    assert_history_valid(cycle.messages)


async def test_unrecoverable_error_during_execution_stops_after_the_turn(serve, make_cycle, calc):
    class Disk(BaseTool):
        name = "disk"
        description = "Read the disk."

        async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
            raise ToolIOError("the disk is gone", tool_name="disk")

    calc.register(Disk())
    server = serve(
        S.reply_tool_calls([("disk", {}, "d1"), ("add", {"a": 1, "b": 1}, "a1")]),
        S.reply_text("never"),
    )
    cycle = make_cycle(server)

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("Read", calc)

    assert isinstance(raised.value.__cause__, ToolIOError)
    answers = tool_messages(cycle.messages)
    assert answers == {"d1": "Error: the disk is gone", "a1": "2"}
    assert len(server.requests) == 1
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"a": 1, "b": ', "arguments are not valid JSON"),
        ("[1, 2]", "arguments must be a JSON object, got an array"),
        ('"a=1"', "arguments must be a JSON object, got a string"),
    ],
)
async def test_malformed_arguments_become_an_error_for_the_model(
    serve, make_cycle, calc, arguments, problem
):
    server = serve(S.reply_tool_calls([("add", arguments, "c1")]), S.reply_text("Fixed."))
    cycle = make_cycle(server)

    events = [e async for e in cycle.submit_stream_with_tools("add", calc)]

    assert calc.runs == []
    done = next(e for e in events if isinstance(e, ToolExecutionCompleted))
    assert isinstance(done.error, InvalidArgumentsError)
    sent = server.requests[1].json["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == arguments  # kept verbatim
    assert sent[-1]["content"].startswith(f"Error: tool 'add' got invalid arguments: {problem}")
    assert cycle.messages[-1]["content"] == "Fixed."


async def test_empty_arguments_mean_an_empty_object(serve, make_cycle):
    registry = ToolRegistry()

    @registry.tool
    def now() -> str:
        """The time."""
        return "noon"

    server = serve(S.reply_tool_calls([("now", "", "c1")]), S.reply_text("It is noon."))
    response = await make_cycle(server).submit_with_tools("Time?", registry)
    assert response.invocations[0].output == "noon"
    assert server.requests[1].json["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_a_slow_tool_times_out_and_the_model_is_told(serve, make_cycle):
    registry = ToolRegistry()

    @registry.tool
    async def slow() -> str:
        """Takes forever."""
        await asyncio.sleep(30)
        return "late"

    server = serve(S.reply_tool_calls([("slow", {}, "c1")]), S.reply_text("Gave up."))
    cycle = make_cycle(server, tool_timeout_secs=0.1)

    response = await cycle.submit_with_tools("Go", registry)

    assert isinstance(response.invocations[0].error, ToolTimeoutError)
    assert (
        tool_messages(cycle.messages)["c1"]
        == "Error: tool 'slow' failed: timed out after 0.1 s; it may have run in part, so do not assume it had no effect"
    )


async def test_calls_of_a_turn_run_concurrently(serve, make_cycle):
    registry = ToolRegistry()
    running: list[int] = []
    all_running = asyncio.Event()

    @registry.tool
    async def wait(n: int) -> int:
        """Wait until all five calls run."""
        running.append(n)
        if len(running) == 5:
            all_running.set()
        # Calls run one after another would never all be running: this one would time
        # out (no wall-clock bound, which a loaded machine breaks).
        await asyncio.wait_for(all_running.wait(), 10)
        return n

    server = serve(
        S.reply_tool_calls([("wait", {"n": i}) for i in range(5)]),
        S.reply_text("all done"),
    )
    response = await make_cycle(server).submit_with_tools("Wait", registry)

    assert [inv.output for inv in response.invocations] == [0, 1, 2, 3, 4]
    assert sorted(running) == [0, 1, 2, 3, 4]


# -- truncation ------------------------------------------------------------------------


async def test_long_cjk_results_are_cut_for_the_model_only(serve, make_cycle):
    full = "北京天气晴朗" * 2000 + "结束"
    registry = ToolRegistry()

    @registry.tool
    def report() -> str:
        """A long report."""
        return full

    server = serve(S.reply_tool_calls([("report", {}, "c1")]), S.reply_text("Summarised."))
    cycle = make_cycle(server, max_tool_result_bytes=1000)

    stream = cycle.submit_stream_with_tools("Report", registry)
    events = [e async for e in stream]

    sent = server.requests[1].json["messages"][-1]["content"]
    assert len(sent.encode("utf-8")) <= 1000
    head, _, tail = sent.partition("\n[... ")
    assert head and full.startswith(head)
    assert tail.split(" bytes omitted ...]\n")[1] and full.endswith(tail.split("]\n")[1])
    omitted = int(tail.split(" ")[0])
    assert omitted == len(full.encode()) - len(head.encode()) - len(tail.split("]\n")[1].encode())
    done = next(e for e in events if isinstance(e, ToolExecutionCompleted))
    assert done.output == full  # the event keeps everything
    assert stream.response is not None
    assert stream.response.invocations[0].output == full  # so does the ToolInvocation
    assert done.model_text == sent
    assert cycle.messages[-2]["content"] == sent
    assert events and isinstance(events[-1], TurnComplete)


async def test_results_are_json_text_and_strings_are_sent_as_they_are(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("weather", {"city": "東京"}, "w"), ("add", {"a": 1, "b": 2}, "a")]),
        S.reply_text("ok"),
    )
    cycle = make_cycle(server)
    await cycle.submit_with_tools("go", calc)
    answers = tool_messages(cycle.messages)
    assert answers["w"] == '{"city":"東京","temp_c":21,"sky":"clear"}'
    assert answers["a"] == "3"


# -- request options, history policy ------------------------------------------------------


async def test_request_options_pass_through_to_the_request(serve, make_cycle, calc):
    server = serve(S.reply_text("ok"))
    cycle = make_cycle(
        server,
        temperature=0.1,
        tool_choice="auto",
        parallel_tool_calls=False,
        extra_body={"top_k": 5},
        extra_headers={"X-Trace": "abc"},
    )
    await cycle.submit_with_tools("hi", calc)
    body = server.requests[0].json
    assert body["model"] == "test-model"
    assert (body["temperature"], body["tool_choice"], body["parallel_tool_calls"]) == (
        0.1,
        "auto",
        False,
    )
    assert body["top_k"] == 5
    assert server.requests[0].headers["x-trace"] == "abc"
    assert "stream" not in body or body["stream"] is False


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_tool_options_are_not_sent_on_a_request_without_tools(serve, make_cycle, stream):
    # The API refuses tool_choice (and parallel_tool_calls) without tools; a cycle
    # configured with them still makes plain submit() calls.
    server = serve(S.reply_text("ok"))
    cycle = make_cycle(server, tool_choice="required", parallel_tool_calls=False, seed=3)
    if stream:
        await cycle.submit_stream("hi").collect()
    else:
        await cycle.submit("hi")
    body = server.requests[0].json
    assert "tools" not in body
    assert ("tool_choice" in body, "parallel_tool_calls" in body, body["seed"]) == (
        False,
        False,
        3,
    )
    assert dict(cycle.config.request_options)["tool_choice"] == "required"  # config kept


async def test_history_policy_trims_requests_but_messages_keep_everything(serve, make_cycle):
    server = serve(S.reply_text("one"), S.reply_text("two"), S.reply_text("three"))
    cycle = make_cycle(server, system_prompt="sys", history=TrimOldest(max_messages=3))

    for prompt in ("a", "b", "c"):
        await cycle.submit(prompt)

    assert [m["content"] for m in server.requests[2].json["messages"]] == ["sys", "c"]
    assert len(cycle.messages) == 7


# -- cancellation ----------------------------------------------------------------------------


async def test_cancelling_the_loop_cancels_running_tools(serve, make_cycle):
    started = asyncio.Event()
    seen: dict[str, Any] = {}
    registry = ToolRegistry()

    @registry.tool
    async def forever(ctx: ToolContext) -> str:
        """Never returns."""
        seen["ctx"] = ctx
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        return "impossible"

    server = serve(S.reply_tool_calls([("forever", {}, "f1"), ("forever", {}, "f2")]))
    cycle = make_cycle(server)
    task = asyncio.create_task(cycle.submit_with_tools("Go", registry))
    await asyncio.wait_for(started.wait(), 5)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)

    assert seen["cancelled"] is True
    assert seen["ctx"].cancelled  # a sync tool polling its token would stop too
    answers = tool_messages(cycle.messages)
    assert answers == {
        "f1": "Error: aborted; tool 'forever' did not complete: the tool loop was cancelled",
        "f2": "Error: aborted; tool 'forever' did not complete: the tool loop was cancelled",
    }
    assert_history_valid(cycle.messages)
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_cancelling_the_loop_closes_the_http_stream(serve, make_cycle, calc):
    server = serve()
    server.add(
        RawStream([server.chunk({"content": "Hel"}), server.chunk({"content": "lo"}), Pause(30)])
    )
    cycle = make_cycle(server)
    got_text = asyncio.Event()

    async def consume() -> None:
        async for event in cycle.submit_stream_with_tools("Hi", calc):
            if isinstance(event, AssistantTextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)

    await server.wait_for(lambda: server.requests[0].disconnected, timeout=5)
    assert not server.requests[0].completed


async def test_leaving_an_event_stream_early_closes_it(serve, make_cycle, calc):
    server = serve()
    server.add(RawStream([server.chunk({"content": "partial"}), Pause(30)]))
    cycle = make_cycle(server)

    async with cycle.submit_stream_with_tools("Hi", calc) as events:
        async for event in events:
            assert isinstance(event, AssistantTextDelta)
            break

    await server.wait_for(lambda: server.requests[0].disconnected, timeout=5)
    assert events.response is None
    with pytest.raises(LlmError, match="closed before the call finished"):
        await events.collect()


@pytest.mark.parametrize("leave_at", [TurnComplete, ToolExecutionStarted])
async def test_leaving_between_a_tool_turn_and_its_results_keeps_the_history_valid(
    serve, make_cycle, calc, leave_at
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1"), ("weather", {"city": "Oslo"}, "c2")]),
        S.reply_text("Next answer."),
    )
    cycle = make_cycle(server)

    async with cycle.submit_stream_with_tools("Hi", calc) as events:
        async for event in events:
            if isinstance(event, leave_at):
                break

    assert_history_valid(cycle.messages)
    answers = tool_messages(cycle.messages)
    assert set(answers) == {"c1", "c2"}
    assert all("did not complete: the tool loop was stopped" in text for text in answers.values())
    assert calc.runs == []
    # The conversation goes on from a history a provider accepts.
    assert (await cycle.submit("And now?")).text == "Next answer."
    assert_history_valid(cycle.messages)


async def test_cancelling_a_non_streamed_request_closes_the_connection(serve, make_cycle):
    server = serve(Reply(text="slow", delay=30))
    cycle = make_cycle(server)
    task = asyncio.create_task(cycle.submit("Hi"))
    await server.wait_for(lambda: len(server.requests) == 1, timeout=5)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)

    await server.wait_for(lambda: server.requests[0].disconnected, timeout=5)


# -- the cycle object ---------------------------------------------------------------------


async def test_one_cycle_runs_one_call_at_a_time(serve, make_cycle):
    server = serve(Reply(text="slow", delay=0.3), S.reply_text("next"))
    cycle = make_cycle(server)
    first = asyncio.create_task(cycle.submit("one"))
    await server.wait_for(lambda: len(server.requests) == 1, timeout=5)

    # A caller's mistake, not a failed request that an `except LlmError` would retry.
    with pytest.raises(LlmUsageError, match="already running") as raised:
        await cycle.submit("two")

    assert isinstance(raised.value, TypeError)
    assert "its own LlmCycle" in str(raised.value)  # advice that fits a threaded app too
    assert (await asyncio.wait_for(first, 5)).text == "slow"
    assert (await cycle.submit("three")).text == "next"


async def test_a_stream_left_by_break_is_named_with_how_to_close_it(serve, make_cycle):
    # The message used to say `events.close()` and `with`, which an EventStream does
    # not have: it has aclose() and `async with`.
    server = serve(S.reply_text("Hello there, a long answer"), S.reply_text("again"))
    cycle = make_cycle(server)
    events = cycle.submit_stream("Hi")
    async for _ in events:
        break

    with pytest.raises(LlmError) as raised:
        await cycle.submit("Next")

    assert "`await events.aclose()`" in str(raised.value)
    assert "`async with events:`" in str(raised.value)
    await events.aclose()
    assert (await cycle.submit("Next")).text == "again"


async def test_client_comes_from_the_environment_when_not_given(serve, monkeypatch):
    server = serve(S.reply_text("from env"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)

    async with LlmCycle(CycleConfig("m")) as cycle:
        response = await cycle.submit("Hi")

    assert response.text == "from env"
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


def test_a_missing_api_key_is_a_setup_mistake_naming_the_fix(monkeypatch):
    # A setup mistake: a ValueError (LlmConfigError, still an LlmError), in one sentence.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LlmConfigError) as caught:
        LlmCycle(CycleConfig("m"))
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, LlmError)
    message = str(caught.value)
    assert message.endswith("): set OPENAI_API_KEY or pass client=")
    assert ".;" not in message and "\n" not in message
    assert type(caught.value.__cause__).__name__ == "OpenAIError"


async def test_api_errors_surface_as_llm_error_with_the_sdk_error_as_cause(serve, make_cycle):
    from openai import BadRequestError

    server = serve(S.error(400, "messages: invalid", type="invalid_request_error"))
    cycle = make_cycle(server)

    with pytest.raises(LlmError, match="BadRequestError") as raised:
        await cycle.submit("Hi")

    assert isinstance(raised.value.__cause__, BadRequestError)
    assert len(server.requests) == 1  # 400 is not retried


async def test_tools_declared_with_the_global_decorator_work_in_a_scoped_registry(
    serve, make_cycle
):
    registry = ToolRegistry()
    with registry.as_default():

        @tool
        def shout(text: str) -> str:
            """Upper-case text."""
            return text.upper()

    server = serve(S.reply_tool_calls([("shout", {"text": "hi"})]), S.reply_text("HI"))
    response = await make_cycle(server).submit_with_tools("shout hi", registry)
    assert response.invocations[0].output == "HI"


# -- images and other binary results ------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(i % 251 for i in range(50_000))


def _pictures() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def photo() -> bytes:
        """Raw PNG bytes."""
        return PNG

    @registry.tool
    def chart(title: str) -> list[Any]:
        """A caption and a chart."""
        return [f"Chart: {title}", Image(PNG)]

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return registry


async def test_images_follow_the_tool_messages_in_one_user_message(serve, make_cycle):
    server = serve(
        S.reply_tool_calls(
            [("photo", {}, "c1"), ("add", {"a": 1, "b": 2}, "c2"), ("chart", {"title": "Q3"}, "c3")]
        ),
        S.reply_text("Two pictures; 3."),
    )
    cycle = make_cycle(server)
    stream = cycle.submit_stream_with_tools("Go", _pictures())
    events = [e async for e in stream]

    sent = server.requests[1].json["messages"]
    # Before: "tool 'photo' failed: returned a bytes, which is not JSON-compatible".
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert_history_valid(sent)
    label = "[image 1 (image/png, 48.8 KB) is attached in the next user message]"
    assert tool_messages(sent) == {"c1": label, "c2": "3", "c3": f"Chart: Q3\n{label}"}
    url = {"type": "image_url", "image_url": {"url": Image(PNG).data_url}}
    assert sent[5]["content"] == [
        {"type": "text", "text": "Attachments of the tool results above:"},
        {"type": "text", "text": "image 1 of tool call c1 (photo):"},
        url,
        {"type": "text", "text": "image 1 of tool call c3 (chart):"},
        url,
    ]
    completed = {e.call_id: e for e in events if isinstance(e, ToolExecutionCompleted)}
    assert completed["c1"].output == Image(PNG) and completed["c1"].model_text == label
    assert cycle.messages[:6] == sent and cycle.messages[6]["content"] == "Two pictures; 3."


async def test_an_image_over_the_limit_is_not_sent_and_the_loop_goes_on(serve, make_cycle):
    server = serve(S.reply_tool_calls([("photo", {}, "c1")]), S.reply_text("No picture."))
    cycle = make_cycle(server, max_tool_attachment_bytes=1_000_000 // 100)

    response = await cycle.submit_with_tools("Go", _pictures())

    assert response.text == "No picture."
    sent = server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["content"] == (
        "[image 1 (image/png, 48.8 KB) was not sent: it is larger than the 9.8 KB limit for "
        "binary tool results]"
    )


async def test_a_cancelled_turn_still_sends_the_finished_calls_images_after_every_answer(
    serve, make_cycle
):
    registry = _pictures()

    cancelled: list[bool] = []

    @registry.tool
    async def hang() -> str:
        """Never finishes."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "unreachable"

    server = serve(S.reply_tool_calls([("hang", {}, "c1"), ("photo", {}, "c2")]))
    cycle = make_cycle(server)
    async with cycle.submit_stream_with_tools("Go", registry) as events:
        async for event in events:
            if isinstance(event, ToolExecutionCompleted):
                break  # photo is done, hang is still running

    # Before: the turn's generator was left open, so hang ran on, both calls were
    # answered "stopped before it ran", and its late cleanup answered them twice.
    assert cancelled == [True]
    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool", "tool", "user"]
    assert_history_valid(cycle.messages)
    assert cycle.messages[2]["content"].startswith("Error: aborted; tool 'hang' did not complete")
    assert cycle.messages[4]["content"][1]["text"] == "image 1 of tool call c2 (photo):"


@pytest.mark.parametrize("stream", [False, True])
async def test_repair_arguments_closes_a_cut_off_call(serve, make_cycle, calc, stream):
    server = serve(S.reply_tool_calls([("add", '{"a": 2, "b": 3,', "c1")]), S.reply_text("5"))
    cycle = make_cycle(server, repair_arguments=True)

    if stream:
        await cycle.submit_stream_with_tools("2 + 3?", calc).collect()
    else:
        await cycle.submit_with_tools("2 + 3?", calc)

    assert calc.runs == [("add", {"a": 2, "b": 3})]
    sent = server.requests[1].json["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"a": 2, "b": 3}'
    assert sent[-1]["content"] == "5"


@pytest.mark.parametrize("repair", [False, True], ids=["plain", "repair"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("api", "limit"), [("chat", "max_completion_tokens"), ("responses", "max_output_tokens")]
)
async def test_a_call_cut_at_the_output_token_limit_is_never_repaired_and_says_so(
    serve, make_cycle, calc, api, limit, stream, repair
):
    # Repaired, the cut call would run with the defaults of the arguments never written
    # (here dry_run=False); unrepaired, the model read "not valid JSON" and sent the
    # same long call again.
    deleted: list[str] = []

    @calc.tool
    def delete_files(paths: list[str], dry_run: bool = False) -> str:
        """Delete files; with dry_run, only list what would go."""
        if not dry_run:
            deleted.extend(paths)
        return "done"

    cut = '{"paths": ["a.txt", "b.txt"],'
    server = serve(
        S.reply_tool_calls(
            [("add", {"a": 2, "b": 3}, "c1"), ("delete_files", cut, "c2")], finish_reason="length"
        ),
        S.reply_text("ok"),
    )
    cycle = make_cycle(server, api=api, repair_arguments=repair)

    if stream:
        response = await cycle.submit_stream_with_tools("Clean up, dry run", calc).collect()
    else:
        response = await cycle.submit_with_tools("Clean up, dry run", calc)

    assert (response.text, deleted) == ("ok", [])
    assert calc.runs == [("add", {"a": 2, "b": 3})]  # a call complete in the cut turn runs
    answers = tool_messages(cycle.messages)
    assert answers["c1"] == "5"
    assert answers["c2"] == (
        f"Error: tool 'delete_files' got invalid arguments: the turn was cut at the output "
        f"token limit ({limit}) before these arguments were complete; send shorter "
        "arguments or split the work over several calls"
    )
    assert cycle.messages[1]["tool_calls"][1]["function"]["arguments"] == cut  # as written
    assert_history_valid(cycle.messages)
