"""ToolLoopWorkflow against a real dev server, with real workers in their own processes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.exceptions import ApplicationError, CancelledError

from agcore_tools import (
    BaseTool,
    CodeMode,
    CycleConfig,
    LlmCycle,
    Permission,
    PermissionChecker,
    PermissionConfig,
    ToolContext,
    ToolRegistry,
)
from agcore_tools.temporal import (
    ToolActivities,
    ToolLoopInput,
    ToolLoopResult,
    ToolLoopWorkflow,
    _stand_in,
    worker,
)

from .conftest import Model, S, WorkerProcess, calls
from .test_replay import strict_replayer
from .worker_process import MAX_RESULT_BYTES, build_registry

RUN_TIMEOUT = 60.0
CONFIG = CycleConfig("m", max_retries=2, retry_initial_delay=0.05)

Spawn = Callable[..., WorkerProcess]


async def start(
    client: Client, run: str, prompt: str, queue: str, **options: Any
) -> WorkflowHandle[Any, ToolLoopResult]:
    return await client.start_workflow(
        ToolLoopWorkflow.run,
        ToolLoopInput.of(prompt, CONFIG, **options),
        id=run,
        task_queue=queue,
        execution_timeout=timedelta(seconds=RUN_TIMEOUT),
    )


async def finish(handle: WorkflowHandle[Any, ToolLoopResult]) -> ToolLoopResult:
    return await asyncio.wait_for(handle.result(), RUN_TIMEOUT)


async def pending_approvals(handle: WorkflowHandle[Any, ToolLoopResult]) -> list[Any]:
    """The run's pending approvals, once it asks for some (within RUN_TIMEOUT)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while not (pending := await handle.query(ToolLoopWorkflow.pending_approvals)):
        assert time.monotonic() < deadline, "the run never asked for approval"
        await asyncio.sleep(0.02)  # polls the run's own state, bounded above
    return list(pending)


async def activity_attempts(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, int]]:
    """(activity type, attempt) of each started activity, in history order."""
    history = await handle.fetch_history()
    names: dict[int, str] = {}
    found = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = (
                event.activity_task_scheduled_event_attributes.activity_type.name
            )
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            found.append((names[started.scheduled_event_id], started.attempt))
    return found


async def in_process(model: Model, workdir: Path, prompt: str) -> tuple[LlmCycle, Any]:
    """The in-process loop's run of ``prompt`` on the workers' tools, and its response."""
    async with model.server.client() as openai:
        local = LlmCycle(CONFIG, client=openai)
        response = await local.submit_with_tools(prompt, build_registry(workdir, "local"))
    return local, response


async def test_a_run_has_the_history_of_the_in_process_loop(
    client: Client, spawn: Spawn, model: Model, workdir: Path
) -> None:
    spawn("same", "w1")
    result = await finish(await start(client, "same-1", "add", "same"))
    local, response = await in_process(model, workdir, "add")
    assert result.messages == local.messages
    assert (result.text, result.turns, result.stop_reason) == ("done: 5", 2, "stop")
    assert response.text == result.text
    assert [c["worker"] for c in calls(workdir, "same-1", "add")] == ["w1"]


def ranking() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def rank(query: str) -> dict[str, float]:
        """Scores of the documents that match `query`, best first."""
        return {"zebra-care.md": 0.97, "apple-pie.md": 0.41, "moose.md": 0.12}

    @registry.tool
    def judge(thoughts: str, verdict: bool, again: int = 0) -> str:
        """Reason first (`thoughts`), then give the verdict."""
        return "noted"

    return registry


async def test_a_run_keeps_the_order_of_results_and_parameters_as_the_in_process_loop(
    client: Client, model: Model
) -> None:
    # Temporal's converter sorts keys: the ranking reached the model as apple, moose,
    # zebra, and judge was offered with its parameters as again, thoughts, verdict.
    async with model.server.client() as openai:
        async with worker(client, "order", ToolActivities(ranking(), openai)):
            result = await finish(await start(client, "order-1", "rank", "order"))
        local = LlmCycle(CONFIG, client=openai)
        await local.submit_with_tools("rank", ranking())
    assert result.messages[2]["content"] == (
        '{"zebra-care.md":0.97,"apple-pie.md":0.41,"moose.md":0.12}'
    )
    assert result.messages == local.messages
    sent = [
        r.json
        for r in model.server.requests
        if {"role": "user", "content": "rank"} in r.json["messages"]
    ]
    assert len(sent) == 4  # the run's two, then the in-process loop's two
    # As text, in order: what the model reads of each tool's parameters.
    assert [json.dumps(r["tools"]) for r in sent[:2]] == [json.dumps(r["tools"]) for r in sent[2:]]
    properties = sent[0]["tools"][1]["function"]["parameters"]["properties"]
    assert list(properties) == ["thoughts", "verdict", "again"]


async def test_a_call_cut_at_the_token_limit_is_not_repaired_in_a_run(client: Client) -> None:
    # A run begun before the patch agcore-cut-calls-not-repaired repaired it and ran the
    # tool with b's default (tests/temporal/histories/unpatched-cut-call*.json).
    ran: list[tuple[int, int]] = []
    tools = ToolRegistry()

    @tools.tool
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        ran.append((a, b))
        return a + b

    script = [
        S.reply_tool_calls([("add", '{"a": 1, ', "call_cut")], finish_reason="length"),
        S.reply_text("shorter next time"),
    ]
    config = CycleConfig("m", repair_arguments=True)
    with S(script) as server:
        async with server.client() as openai, worker(client, "cut", ToolActivities(tools, openai)):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("add 1 and 2", config),
                id="cut-1",
                task_queue="cut",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            result = await finish(handle)
    assert ran == []
    assert result.messages[2]["content"].startswith(
        "Error: tool 'add' got invalid arguments: the turn was cut at the output token "
        "limit (max_completion_tokens)"
    )
    assert [name for name, _ in await activity_attempts(handle)] == [
        "agcore.model_request",
        "agcore.model_request",
    ]


async def test_a_call_id_the_server_gives_again_has_its_own_in_a_run(client: Client) -> None:
    # A run begun before the patch agcore-call-ids-unique-in-history kept the repeated
    # id, and the second charge ran with the first one's idempotency key
    # (tests/temporal/histories/unpatched-repeated-id-*.json).
    keys: list[str | None] = []
    tools = ToolRegistry()

    @tools.tool
    def charge(cents: int, ctx: ToolContext) -> str:
        """Charge the customer."""
        keys.append(ctx.idempotency_key)
        return f"charged {cents}"

    script = [
        S.reply_tool_calls([("charge", {"cents": 500}, "0")]),
        S.reply_tool_calls([("charge", {"cents": 900}, "0")]),
        S.reply_text("done"),
    ]
    with S(script) as server:
        async with (
            server.client() as openai,
            worker(client, "repeat", ToolActivities(tools, openai)),
        ):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("charge twice", CycleConfig("m")),
                id="repeat-1",
                task_queue="repeat",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            result = await finish(handle)
    assert keys == ["repeat-1:0", "repeat-1:call_1_0"]
    answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert answered == ["0", "call_1_0"]
    history = await handle.fetch_history()
    replay = await strict_replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replay.replay_failure is None


async def test_a_server_call_id_in_the_form_of_a_programs_calls_has_its_own_in_a_run(
    client: Client,
) -> None:
    # A run begun before the patch agcore-derived-call-ids-reserved kept "r~1", an id
    # of the form the loop gives a program's calls ("<id>~<n>"), and a generated id
    # could repeat a server's call_0_2 (tests/temporal/histories/unpatched-tilde-id-*).
    tools = ToolRegistry()

    @tools.tool(needs_approval=True)
    def refund(cents: int) -> str:
        """Refund the customer."""
        return f"refunded {cents}"

    given = [("refund", {"cents": 5}, "r~1"), ("refund", {"cents": 7}, "call_0_2")]
    script = [S.reply_tool_calls([*given, ("refund", {"cents": 9}, "call_0_2")])]
    with S([*script, S.reply_text("done")]) as server:
        async with (
            server.client() as openai,
            worker(client, "tilde", ToolActivities(tools, openai)),
        ):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("refund", CycleConfig("m")),
                id="tilde-1",
                task_queue="tilde",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            asked = await pending_approvals(handle)
            assert [r.call_id for r in asked] == ["call_0_0", "call_0_2", "call_0_2_1"]
            await handle.signal(ToolLoopWorkflow.approve, [r.approve() for r in asked])
            result = await finish(handle)
    assert result.text == "done"
    answered = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    assert answered == {
        "call_0_0": "refunded 5",
        "call_0_2": "refunded 7",
        "call_0_2_1": "refunded 9",
    }
    history = await handle.fetch_history()
    replay = await strict_replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replay.replay_failure is None


async def test_nan_in_a_calls_arguments_or_in_an_edit_never_runs_in_a_run(client: Client) -> None:
    # A run begun before the patch agcore-non-finite-arguments-refused asked its
    # needs_approval function, which said no to NaN, and ran the tool
    # (tests/temporal/histories/unpatched-nan-ran.json).
    refunded: list[float] = []
    tools = ToolRegistry()

    @tools.tool(needs_approval=True)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        refunded.append(amount)
        return f"refunded {amount}"

    script = [
        S.reply_tool_calls(
            [
                ("refund", '{"order": 2, "amount": NaN}', "call_nan"),
                ("refund", '{"order": 3, "amount": 5}', "call_five"),
            ]
        ),
        S.reply_text("done"),
    ]
    with S(script) as server:
        async with server.client() as openai, worker(client, "nan", ToolActivities(tools, openai)):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("refund", CycleConfig("m")),
                id="nan-1",
                task_queue="nan",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            [request] = await pending_approvals(handle)  # the NaN call asks nobody
            assert request.call_id == "call_five"
            nan = dataclasses.replace(
                request.approve(), edited_arguments={"order": 3, "amount": float("nan")}
            )
            await handle.signal(ToolLoopWorkflow.approve, [nan])  # dropped
            await handle.signal(ToolLoopWorkflow.approve, [request.approve()])
            result = await finish(handle)
    assert refunded == [5.0]
    assert result.messages[2]["content"] == (
        "Error: tool 'refund' got invalid arguments: amount: NaN is not a JSON number; "
        "send a finite number"
    )
    replay = await strict_replayer().replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replay.replay_failure is None


async def test_an_unknown_tools_error_in_a_run_names_no_tool_the_policy_denies(
    client: Client,
) -> None:
    # A run begun before the patch agcore-unknown-tool-lists-offered listed delete_file.
    tools = ToolRegistry(PermissionChecker(PermissionConfig()))  # delete is denied

    @tools.tool(permissions=["read"])
    def read_file(path: str) -> str:
        """Read a file."""
        return path

    @tools.tool(permissions=["delete"])
    def delete_file(path: str) -> str:
        """Delete a file."""
        raise AssertionError("never runs")

    script = [
        S.reply_tool_calls([("delete_files", {"path": "x"}, "call_typo")]),
        S.reply_text("ok"),
    ]
    config = CycleConfig("m", unknown_tool="tell_model")
    with S(script) as server:
        async with server.client() as openai, worker(client, "told", ToolActivities(tools, openai)):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("tidy up", config),
                id="told-1",
                task_queue="told",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            result = await finish(handle)
    assert result.messages[2]["content"] == (
        "Error: tool 'delete_files' is not registered: the tools offered are: read_file"
    )


async def test_the_calls_of_an_answer_past_the_limit_are_not_run_in_a_run(client: Client) -> None:
    # A run begun before the patch agcore-tool-calls-per-turn-limited ran every call
    # (tests/temporal/histories/unpatched-many-calls.json.gz).
    ran: list[int] = []
    tools = ToolRegistry()

    @tools.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(a)
        return a + b

    calls = [("add", {"a": n, "b": 1}, f"call_{n}") for n in range(3)]
    config = CycleConfig("m", max_tool_calls_per_turn=2)
    with S([S.reply_tool_calls(calls), S.reply_text("done")]) as server:
        async with server.client() as openai, worker(client, "many", ToolActivities(tools, openai)):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("add", config),
                id="many-1",
                task_queue="many",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            result = await finish(handle)
    assert sorted(ran) == [0, 1]
    assert result.messages[-2]["content"] == (
        "Error: not run: more than 2 tool calls in one answer; send the rest in your next turn"
    )
    request, call = "agcore.model_request", "agcore.call_tool"
    assert [name for name, _ in await activity_attempts(handle)] == [request, call, call, request]


async def test_a_tool_choice_naming_a_tool_not_offered_fails_a_run_before_any_request(
    client: Client,
) -> None:
    # A run begun before the patch agcore-unoffered-choice-refused sent the request
    # (tests/temporal/histories/unpatched-unoffered-choice.json).
    tools = ToolRegistry()

    @tools.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    config = CycleConfig("m", tool_choice={"type": "function", "function": {"name": "ad"}})
    with S([S.reply_text("never sent")]) as server:
        async with (
            server.client() as openai,
            worker(client, "unoffered", ToolActivities(tools, openai)),
        ):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("add 2 and 3", config),
                id="unoffered-1",
                task_queue="unoffered",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await finish(handle)
        assert server.requests == []
    assert isinstance(failed.value.cause, ApplicationError)
    assert failed.value.cause.type == "LlmConfigError"
    assert failed.value.cause.message.startswith(
        "tool_choice names 'ad', which this request does not offer (did you mean 'add'?)"
    )
    assert await activity_attempts(handle) == []


async def test_background_on_the_responses_api_fails_a_run_before_the_model_is_asked(
    client: Client,
) -> None:
    # The activity sends every request unstreamed: a background response came back
    # queued, with no output, and the run failed on it after the work was paid for.
    tools = ToolRegistry()

    @tools.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    config = CycleConfig("m", api="responses", background=True)
    with S([S.reply_text("never sent")]) as server:
        async with (
            server.client() as openai,
            worker(client, "background", ToolActivities(tools, openai)),
        ):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("add 2 and 3", config),
                id="background-1",
                task_queue="background",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await finish(handle)
        assert server.requests == []
    assert isinstance(failed.value.cause, ApplicationError)
    assert failed.value.cause.type == "LlmConfigError"
    assert failed.value.cause.message == (
        "CycleConfig(background=True) needs a streamed run: unstreamed, a background "
        "response comes back queued, with no output for the loop to go on from, and a "
        "Temporal run's model requests are never streamed; drop background=True"
    )
    assert [name for name, _ in await activity_attempts(handle)] == ["agcore.model_request"]


async def test_a_conversation_gets_only_what_follows_the_last_response_in_a_run(
    client: Client,
) -> None:
    # The server prepends the conversation's items: a run sent the whole history again,
    # every item twice, which OpenAI refuses ("Duplicate item found with id fc_...").
    # A run begun before the patch agcore-conversation-sends-what-follows still does.
    tools = ToolRegistry()

    @tools.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    config = CycleConfig("m", api="responses", conversation="conv_1")
    script = [S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5")]
    with S(script) as server:
        async with (
            server.client() as openai,
            worker(client, "conversation", ToolActivities(tools, openai)),
        ):
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of("add 2 and 3", config),
                id="conversation-1",
                task_queue="conversation",
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            assert (await finish(handle)).text == "5"
        first, second = (request.json for request in server.requests)
    assert first["conversation"] == second["conversation"] == "conv_1"
    assert [item.get("role") for item in first["input"]] == ["user"]
    assert second["input"] == [{"type": "function_call_output", "call_id": "c1", "output": "5"}]
    assert "previous_response_id" not in second
    history = await handle.fetch_history()
    replayed = await strict_replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_an_image_from_a_tool_reaches_the_model_as_in_the_in_process_loop(
    client: Client, spawn: Spawn, model: Model, workdir: Path
) -> None:
    # Its bytes crossed the activity as JSON text, and the model read them as text.
    spawn("snap", "w1")
    result = await finish(await start(client, "snap-1", "snap", "snap"))
    local, _ = await in_process(model, workdir, "snap")
    assert result.messages == local.messages
    assert "data:image/gif;base64,R0lGODlh" in str(result.messages)


async def test_a_worker_killed_between_a_tool_and_the_next_request_loses_nothing(
    client: Client, spawn: Spawn, model: Model, workdir: Path
) -> None:
    first = spawn("crash", "w1")
    reference = await finish(await start(client, "crash-ref", "add", "crash"))
    model.hold_next()
    # A short model timeout: the killed worker's request is retried after it.
    handle = await start(client, "crash-1", "add", "crash", model_timeout_secs=3.0)
    # The tool ran and its result is recorded: the next request is the one held.
    assert await asyncio.to_thread(model.held.wait, RUN_TIMEOUT)
    assert len(calls(workdir, "crash-1", "add")) == 1
    first.kill()
    spawn("crash", "w2")
    result = await finish(handle)
    assert result.messages == reference.messages
    assert [c["worker"] for c in calls(workdir, "crash-1", "add")] == ["w1"]  # not again
    attempts = await activity_attempts(handle)
    assert attempts.count(("agcore.call_tool", 1)) == 1
    assert ("agcore.model_request", 2) in attempts  # the killed worker's request, retried


async def test_a_turns_calls_run_in_parallel_on_two_workers(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # One activity at a time per worker, and each call returns only once the other one
    # runs too: both workers must take one.
    spawn("pair", "w1", slots=1)
    spawn("pair", "w2", slots=1)
    result = await finish(await start(client, "pair-1", "meet", "pair"))
    assert result.text == "done: a met | b met"
    assert sorted(c["worker"] for c in calls(workdir, "pair-1", "meet")) == ["w1", "w2"]


async def test_an_approval_signalled_after_a_worker_restart_resumes_the_run(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    first = spawn("approve", "w1")
    handle = await start(client, "approve-1", "remove", "approve")
    pending = await pending_approvals(handle)
    [request] = pending
    assert (request.tool_name, request.arguments) == ("remove", {"path": "notes.txt"})
    assert calls(workdir, "approve-1") == []
    first.kill()
    spawn("approve", "w2")
    await handle.signal(ToolLoopWorkflow.approve, [request.approve()])
    result = await finish(handle)
    assert result.text == "done: removed notes.txt"
    assert [c["worker"] for c in calls(workdir, "approve-1", "remove")] == ["w2"]
    # The whole run's, not only the part after the pause.
    assert (result.turns, result.usage["requests"]) == (2, 2)


async def test_an_oversized_result_fails_once_and_the_model_is_told(
    client: Client, spawn: Spawn, model: Model, workdir: Path
) -> None:
    spawn("big", "w1")
    handle = await start(client, "big-1", "dump", "big")
    result = await finish(handle)
    expected = (
        f"Error: result of tool 'dump' is 10098 bytes, over the {MAX_RESULT_BYTES}-byte limit"
    )
    tool_message = result.messages[2]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith(expected)
    assert model.requests_of("dump")[-1][-1]["content"] == tool_message["content"]
    assert len(calls(workdir, "big-1", "dump")) == 1
    assert [a for a in await activity_attempts(handle) if a[0] == "agcore.call_tool"] == [
        ("agcore.call_tool", 1)
    ]


class Wordy(BaseTool):
    """A tool whose description alone is 800 kB."""

    description = "x" * 800_000

    def __init__(self, name: str) -> None:
        self.name = name

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return "unreachable"


async def test_tools_too_large_for_the_history_fail_the_run_at_once_by_name(
    client: Client,
) -> None:
    # Recorded, their description would fail the run's workflow task on every retry,
    # with a warning in the worker's log, until the run timed out.
    registry = ToolRegistry()
    registry.register_all([Wordy("a"), Wordy("b"), Wordy("c")])
    async with worker(client, "wordy", ToolActivities(registry)):
        started = time.monotonic()
        with pytest.raises(WorkflowFailureError) as failed:
            await finish(await start(client, "wordy-1", "hi", "wordy"))
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ToolCatalogueTooLarge"
    assert "this worker's 3 tools describe to 24" in str(cause)
    assert "over the 2097152-byte payload limit of a Temporal workflow's history" in str(cause)
    assert time.monotonic() - started < 10  # not the run's timeout


@pytest.mark.parametrize(
    ("prompt", "requests", "named"),
    [
        ("pages", 1, "the next model request (the history it sends, the tools' definitions)"),
        ("halves", 2, "the run's result (its answer and whole history)"),
    ],
)
async def test_a_history_too_large_for_a_payload_fails_the_run_by_name(
    client: Client, model: Model, workdir: Path, prompt: str, requests: int, named: str
) -> None:
    # Scheduled (a request) or returned (the result), the history would fail the run's
    # workflow task on every retry, and the run would hang until its timeout.
    config = CycleConfig("m", max_result_bytes=900_000)
    async with model.server.client() as openai:
        activities = ToolActivities(build_registry(workdir, "w1"), openai)
        async with worker(client, prompt, activities):
            started = time.monotonic()
            handle = await client.start_workflow(
                ToolLoopWorkflow.run,
                ToolLoopInput.of(prompt, config),
                id=f"{prompt}-1",
                task_queue=prompt,
                execution_timeout=timedelta(seconds=RUN_TIMEOUT),
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await finish(handle)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "LlmError"
    assert cause.message.startswith(f"{named} is ")
    assert "bytes, over the 2097152-byte payload limit of a Temporal workflow's history" in (
        cause.message
    )
    assert time.monotonic() - started < 20  # not the run's timeout
    assert len(model.requests_of(prompt)) == requests


async def test_mcp_tools_run_on_the_workers_that_hold_the_connection(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    spawn("front", "w1")
    spawn("mcp", "m1", mcp=True)  # tools only: the MCP fixture server's, one connection
    handle = await start(client, "mixed-1", "mixed", "front", tool_task_queues=["mcp"])
    result = await finish(handle)
    assert result.text == "done: 3 | hi"
    history = await handle.fetch_history()
    ran = {}
    names: dict[int, str] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            names[event.event_id] = attributes.task_queue.name
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            ran.setdefault(names[started.scheduled_event_id], set()).add(started.identity)
    assert ran == {"front": {"w1"}, "mcp": {"m1"}}
    assert [c["worker"] for c in calls(workdir, "mixed-1")] == ["w1"]  # add; echo is MCP's


async def test_an_mcp_tools_wrapped_value_reaches_the_model_as_text_and_a_program_as_listed(
    client: Client, spawn: Spawn
) -> None:
    # The fixture's word_count returns an int, which the SDK sends as {"result": 3}.
    pytest.importorskip("pydantic_monty")
    spawn("wrap", "w1")
    spawn("wrap-mcp", "m1", mcp=True)
    direct = await start(client, "wrapped-1", "wrapped", "wrap", tool_task_queues=["wrap-mcp"])
    assert (await finish(direct)).text == "done: 3"  # before: done: {"result":3}
    program = await start(
        client,
        "wrapped-2",
        "program-wrapped",
        "wrap",
        tool_task_queues=["wrap-mcp"],
        code_mode=CodeMode(),
    )
    assert (await finish(program)).text == "done: result: 3"  # n["result"], as listed


async def test_a_tool_task_queue_no_worker_polls_fails_the_run_by_name(
    client: Client, model: Model, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run waited forever for a describe_tools no worker picked up. The wait is
    # shortened (the worker runs in this process, the workflow module passed through).
    monkeypatch.setattr(_stand_in, "_QUEUE_WAIT", timedelta(seconds=2))
    async with model.server.client() as openai:
        activities = ToolActivities(build_registry(workdir, "w1"), openai)
        async with worker(client, "no-tools", activities):
            handle = await start(
                client, "no-tools-1", "add", "no-tools", tool_task_queues=["mcp-tolls"]
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await finish(handle)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "LlmError"
    assert cause.message.startswith("no worker polls task queue 'mcp-tolls' (of tool_task_queues)")


def searching(where: str) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def search(q: str) -> str:
        """Search for `q`."""
        return f"{where}: {q}"

    return registry


async def test_a_tool_two_task_queues_serve_fails_the_run_naming_both(
    client: Client, model: Model
) -> None:
    # The run failed with the registry's own refusal, which named no queue, showed a
    # private class, and told to unregister a tool; so did listing the run's own queue
    # in tool_task_queues, whose tools then clashed with themselves.
    async with (
        model.server.client() as openai,
        worker(client, "shared-web", ToolActivities(searching("web"), openai)),
        worker(client, "shared-docs", ToolActivities(searching("docs")), workflows=False),
    ):
        failures = []
        for run, listed in (("shared-1", "shared-docs"), ("shared-2", "shared-web")):
            handle = await start(client, run, "search", "shared-web", tool_task_queues=[listed])
            with pytest.raises(WorkflowFailureError) as failed:
                await finish(handle)
            failures.append(failed.value.cause)
    assert all(isinstance(c, ApplicationError) and c.type == "LlmConfigError" for c in failures)
    assert [c.message for c in failures] == [
        "tool 'search' is served by task queues 'shared-web' and 'shared-docs'; a run takes "
        "each tool from one queue: rename one, or register it with one queue's workers only",
        "task queue 'shared-web' is described twice; list each queue once in "
        "tool_task_queues, and not the run's own, whose tools are described anyway",
    ]


async def test_an_mcp_servers_question_in_a_workflow_is_declined_not_paused(
    client: Client, spawn: Spawn
) -> None:
    spawn("front-ask", "w1")
    spawn("mcp-ask", "m1", mcp=True)
    handle = await start(client, "ask-1", "mcp-ask", "front-ask", tool_task_queues=["mcp-ask"])
    result = await finish(handle)
    assert result.text == "done: decline: "  # the server's tool saw a plain decline


async def test_a_stopped_loop_fails_the_run_with_the_loops_error(
    client: Client, spawn: Spawn
) -> None:
    spawn("stop", "w1")
    handle = await start(client, "nope-1", "nope", "stop")
    with pytest.raises(WorkflowFailureError) as failed:
        await finish(handle)
    assert isinstance(failed.value.cause, ApplicationError)
    assert failed.value.cause.type == "LlmError"
    assert failed.value.cause.message == (
        "tool loop stopped: tool 'nope' is not registered: the tools offered are: "
        "add, meet, snap, dump, stall, gate, remove"
    )


async def test_a_tools_own_timeout_ends_its_call_and_the_model_is_told(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # The worker gives `stall` ToolActivityOptions(timeout_secs=1, max_attempts=1),
    # over the run's tool_timeout_secs of 60.
    spawn("slow", "w1")
    handle = await start(client, "stall-1", "stall", "slow")
    result = await finish(handle)
    assert (
        result.messages[2]["content"]
        == "Error: tool 'stall' failed: timed out after 1 s; it may have run in part, so do not assume it had no effect"
    )
    assert (
        result.text
        == "done: Error: tool 'stall' failed: timed out after 1 s; it may have run in part, so do not assume it had no effect"
    )
    assert len(calls(workdir, "stall-1", "stall")) == 1
    attempts = await activity_attempts(handle)
    assert [a for a in attempts if a[0] == "agcore.call_tool"] == [("agcore.call_tool", 1)]


async def test_a_timed_out_attempt_ends_on_its_worker_before_the_retry_starts(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # The worker gives `gate` ToolActivityOptions(timeout=2, max_attempts=3). A timed-out
    # attempt ran on, unstopped, next to its retry.
    spawn("gate-shut", "w1")
    result = await finish(await start(client, "gate-shut-1", "gate-shut", "gate-shut"))
    assert result.messages[2]["content"] == (
        "Error: tool 'gate' failed: timed out after 2 s; it may have run in part, so do not "
        "assume it had no effect"
    )
    deadline = time.monotonic() + RUN_TIMEOUT
    while len(calls(workdir, "gate-shut-1", "gate-end")) < 3:
        assert time.monotonic() < deadline, "an attempt never ended"
        await asyncio.sleep(0.02)  # polls the calls file, bounded above
    logged = [c["tool"] for c in calls(workdir, "gate-shut-1") if c["tool"].startswith("gate")]
    assert logged == ["gate", "gate-end"] * 3  # each attempt ended before the next began


# -- code mode (issue 27) -------------------------------------------------------------


async def program_start(client: Client, run: str, prompt: str, queue: str) -> Any:
    return await start(client, run, prompt, queue, code_mode=CodeMode())


async def test_a_code_mode_program_runs_as_steps_and_calls_as_activities(
    client: Client, spawn: Spawn, workdir: Path, model: Model
) -> None:
    pytest.importorskip("pydantic_monty")
    spawn("code", "w1")
    handle = await program_start(client, "code-1", "program", "code")
    result = await finish(handle)
    assert result.text == "done: sum 14\nresult: 14"
    # The listing shows what each tool returns, as in LlmCycle (add is `-> int`).
    [request, *_] = [
        r.json for r in model.server.requests if r.json["messages"][-1]["content"] == "program"
    ]
    [listing] = [t["function"]["description"] for t in request["tools"]]
    assert "async def add(a: int, b: int) -> int:" in listing
    assert len(calls(workdir, "code-1", "add")) == 3
    attempts = await activity_attempts(handle)
    steps = [a for a in attempts if a[0] == "agcore.program_step"]
    # A step runs the program to its next wait: to the gather, to the third add, to the
    # end. The program resumes as soon as one call it waits for is done, so when the
    # gathered adds end in two workflow activations the gather takes two steps.
    assert len(steps) in (3, 4)
    assert set(steps) == {("agcore.program_step", 1)}  # no step was retried
    assert attempts.count(("agcore.call_tool", 1)) == 3


async def test_a_worker_killed_mid_program_does_not_run_its_done_calls_again(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    pytest.importorskip("pydantic_monty")
    first = spawn("code-crash", "w1")
    handle = await program_start(client, "code-crash-1", "program-crash", "code-crash")
    deadline = time.monotonic() + RUN_TIMEOUT
    while not calls(workdir, "code-crash-1", "gate"):
        assert time.monotonic() < deadline, "the program never reached the gate"
        await asyncio.sleep(0.02)  # polls the calls file, bounded above
    first.kill()  # mid-program: one call done, one running
    spawn("code-crash", "w2")
    (workdir / "open-x").touch()
    result = await finish(handle)
    assert result.text == 'done: result: [5, "x open", 6]'
    adds = calls(workdir, "code-crash-1", "add")
    assert [c["worker"] for c in adds] == ["w1", "w2"]  # the first add ran once, on w1
    gates = [c["worker"] for c in calls(workdir, "code-crash-1", "gate")]
    assert gates == ["w1", "w2"]  # the call the crash cut ran again, its activity retried


async def test_a_program_paused_for_approval_resumes_on_the_signal(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    pytest.importorskip("pydantic_monty")
    spawn("code-approve", "w1")
    handle = await program_start(client, "code-approve-1", "program-approve", "code-approve")
    pending = await pending_approvals(handle)
    [request] = pending
    assert (request.call_id, request.tool_name) == ("call_prog~1", "remove")
    assert calls(workdir, "code-approve-1", "remove") == []
    await handle.signal(ToolLoopWorkflow.approve, [request.approve()])
    result = await finish(handle)
    assert result.text == 'done: result: "removed notes.txt"'
    assert len(calls(workdir, "code-approve-1", "add")) == 1  # not run again on resume


async def test_a_programs_call_an_approval_edited_is_noted_in_what_the_model_reads(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # Before: the model read 'result: "removed todo.txt"' beside its code removing notes.txt.
    pytest.importorskip("pydantic_monty")
    spawn("code-approve", "w1")
    handle = await program_start(client, "code-edit-1", "program-approve", "code-approve")
    [request] = await pending_approvals(handle)
    await handle.signal(ToolLoopWorkflow.approve, [request.approve(arguments={"path": "todo.txt"})])
    result = await finish(handle)
    assert result.text == (
        "done: [the user edited the arguments of the program's call to remove() before it "
        'ran: the program gave {"path": "notes.txt"}; it ran with {"path": "todo.txt"}]\n'
        'result: "removed todo.txt"'
    )


async def test_a_programs_calls_are_counted_across_its_steps(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # Each step restores the program in a new Monty worker, whose own count of calls
    # (max_suspensions) starts again: only the loop's count bounds the program.
    pytest.importorskip("pydantic_monty")
    spawn("code-many", "w1")
    handle = await start(
        client,
        "code-many-1",
        "program-many",
        "code-many",
        code_mode=CodeMode(limits={"max_calls": 3, "max_suspensions": 4}),
    )
    result = await finish(handle)
    report = result.messages[2]["content"]
    assert report.startswith(
        "Error: tool 'run_python' failed: RuntimeError: the program made more than 3 tool "
        "calls (CodeMode limits)\n"
    ), report
    assert len(calls(workdir, "code-many-1", "add")) == 3


async def test_a_failed_program_shows_the_model_what_the_in_process_loop_does(
    client: Client, spawn: Spawn, model: Model, workdir: Path
) -> None:
    pytest.importorskip("pydantic_monty")
    spawn("code-fails", "w1")
    result = await finish(
        await program_start(client, "code-fails-1", "program-fails", "code-fails")
    )
    registry = build_registry(workdir, "local")
    async with model.server.client() as openai:
        local = LlmCycle(CONFIG, client=openai)
        await local.submit_with_tools("program-fails", registry, select=CodeMode())
    assert result.messages == local.messages
    report = result.messages[2]["content"]
    assert report.startswith("Error: tool 'run_python' failed: KeyError: email\n")
    assert "The program printed:\nsum 5\nTraceback (most recent call last):" in report
    assert "Calls that ran or may have run before the failure" in report
    assert "add(a=5, b=1) -> ok" in report


async def test_a_program_step_too_large_for_the_history_fails_the_run_by_name(
    client: Client, model: Model, workdir: Path
) -> None:
    # Scheduled, the step would fail the run's workflow task on every retry, and the
    # run would hang until its timeout. The worker takes results of up to 1 MiB.
    pytest.importorskip("pydantic_monty")
    async with model.server.client() as openai:
        activities = ToolActivities(build_registry(workdir, "w1"), openai)
        async with worker(client, "code-big-in", activities):
            handle = await program_start(
                client, "code-big-in-1", "program-big-input", "code-big-in"
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await finish(handle)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "LlmError"
    assert cause.message.startswith(
        "tool loop stopped: the next step of the code-mode program (its code, snapshot and "
        "the results it resumes with) is 22"
    )
    assert "bytes, over the 2097152-byte payload limit of a Temporal workflow's history" in (
        cause.message
    )
    assert len(calls(workdir, "code-big-in-1", "dump")) == 1
    assert calls(workdir, "code-big-in-1", "add") == []  # the program went no further


async def test_a_worker_killed_while_an_mcp_task_runs_starts_no_second_task(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    from tests.mcp.test_tasks import TaskServer

    tasks = TaskServer(workdir / "tasks.json", "--poll-ms", "100")
    try:
        spawn("task-front", "w1")
        first = spawn("task-tools", "t1", tasks=tasks.url)
        handle = await start(
            client, "task-1", "task-build", "task-front", tool_task_queues=["task-tools"]
        )
        deadline = time.monotonic() + RUN_TIMEOUT
        while not tasks.store.exists() or not tasks.counts().get("gets"):
            assert time.monotonic() < deadline, "the task was never polled"
            await asyncio.sleep(0.02)  # polls the server's store, bounded above
        first.kill()  # mid-task: the activity is lost with its worker
        spawn("task-tools", "t2", tasks=tasks.url)
        result = await finish(handle)
        counted = tasks.counts()
    finally:
        tasks.stop()
        tasks.sock.close()
    assert result.text == 'done: {"label":"nightly","seconds":4.0}'
    assert counted["calls"] == {"build": 1}  # the retry waited for the same task
    attempts = [a for a in await activity_attempts(handle) if a[0] == "agcore.call_tool"]
    assert attempts == [("agcore.call_tool", 2)]  # the history keeps the last attempt


def cancelled(counted: dict[str, Any]) -> bool:
    """Whether the task server has cancelled a task."""
    return any(r["cancelled_at"] is not None for r in counted.get("tasks", {}).values())


@pytest.mark.parametrize("end", ["cancel", "terminate"])
async def test_a_run_cancelled_while_an_mcp_task_runs_cancels_the_task(
    client: Client, spawn: Spawn, workdir: Path, end: str
) -> None:
    # The activity waiting for the task kept its handle for a retry, so its
    # cancellation left the task running on the server, with no one left to wait for
    # it. The run's cancellation reaches the activity through its heartbeats, and the
    # activity now cancels the task (tasks/cancel), as LlmCycle's cancelled call does.
    from tests.mcp.test_tasks import TaskServer

    tasks = TaskServer(workdir / "tasks.json", "--poll-ms", "100")
    try:
        # A terminated run is gone: the server answers the activity's heartbeat "not
        # found", and the activity gives its task up as for a cancelled one.
        spawn(f"task-front-{end}", "w1")
        spawn(f"task-tools-{end}", "t1", tasks=tasks.url)
        handle = await start(
            client,
            f"task-{end}-1",
            "task-long",
            f"task-front-{end}",
            tool_task_queues=[f"task-tools-{end}"],
        )
        deadline = time.monotonic() + RUN_TIMEOUT
        while not tasks.store.exists() or not tasks.counts().get("gets"):
            assert time.monotonic() < deadline, "the task was never polled"
            await asyncio.sleep(0.02)  # polls the server's store, bounded above
        if end == "cancel":
            await handle.cancel()
            await assert_cancelled(handle)
        else:
            await handle.terminate("by the test")
        # The server logs the tasks/cancel, then marks the task cancelled: both awaited.
        while not cancelled(counted := tasks.counts()):
            assert time.monotonic() < deadline, f"the task was never cancelled: {counted}"
            await asyncio.sleep(0.02)  # polls the server's store, bounded above
    finally:
        tasks.stop()
        tasks.sock.close()
    [(task_id, record)] = counted["tasks"].items()
    assert counted["cancels"] == [task_id] and record["cancelled_at"] is not None


# -- cancellation -----------------------------------------------------------------


async def wait_for_call(workdir: Path, run: str, tool: str) -> None:
    """Return once a worker logged a call of ``tool`` for ``run`` (within RUN_TIMEOUT)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while not calls(workdir, run, tool):
        assert time.monotonic() < deadline, f"{tool} never ran"
        await asyncio.sleep(0.02)  # polls the calls file, bounded above


async def assert_cancelled(handle: WorkflowHandle[Any, ToolLoopResult]) -> None:
    with pytest.raises(WorkflowFailureError) as failed:
        await finish(handle)
    assert isinstance(failed.value.cause, CancelledError)
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


async def test_a_run_cancelled_during_a_tool_call_ends_cancelled_asking_the_model_nothing(
    client: Client, spawn: Spawn, model: Model, workdir: Path
) -> None:
    spawn("cancel-tool", "w1")
    handle = await start(client, "cancel-tool-1", "cancel-tool", "cancel-tool")
    await wait_for_call(workdir, "cancel-tool-1", "gate")
    await handle.cancel()
    await assert_cancelled(handle)
    (workdir / "open-cancel").touch()  # the worker's attempt, never told, ends too
    assert len(model.requests_of("cancel-tool")) == 1  # no request read a "Cancelled"


async def test_a_run_cancelled_during_a_model_request_ends_cancelled_not_failed(
    client: Client, spawn: Spawn, model: Model, workdir: Path
) -> None:
    spawn("cancel-model", "w1")
    model.hold_next()
    handle = await start(client, "cancel-model-1", "cancel-model", "cancel-model")
    assert await asyncio.to_thread(model.held.wait, RUN_TIMEOUT)
    await handle.cancel()
    await assert_cancelled(handle)
    assert len(model.requests_of("cancel-model")) == 2  # the held one ended the run


async def test_a_run_cancelled_while_it_waits_for_approval_lists_no_pending_call(
    client: Client, spawn: Spawn
) -> None:
    # The query still offered the call, which no signal could answer any more.
    spawn("cancel-pending", "w1")
    handle = await start(client, "cancel-pending-1", "remove", "cancel-pending")
    await pending_approvals(handle)
    await handle.cancel()
    await assert_cancelled(handle)
    assert await handle.query(ToolLoopWorkflow.pending_approvals) == []


# -- approvals --------------------------------------------------------------------


def policy_down(args: dict[str, Any], ctx: ToolContext) -> bool:
    raise RuntimeError("policy service down")


def payments() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(needs_approval=policy_down)
    def pay(amount: int) -> str:
        """Pay `amount`."""
        return f"paid {amount}"

    return registry


async def test_a_needs_approval_function_that_raises_makes_its_call_ask(
    client: Client, model: Model
) -> None:
    # It was retried without end while the run waited, asking no one.
    async with (
        model.server.client() as openai,
        worker(client, "pay", ToolActivities(payments(), openai)),
    ):
        handle = await start(client, "pay-1", "pay", "pay")
        [request] = await pending_approvals(handle)
        assert request.reason == (
            "tool 'pay' needs_approval raised ToolError: RuntimeError: policy service down"
        )
        await handle.signal(ToolLoopWorkflow.approve, [request.approve()])
        result = await finish(handle)
    assert result.text == "done: paid 5"
    asked = [a for a in await activity_attempts(handle) if a[0] == "agcore.needs_approval"]
    assert asked == [("agcore.needs_approval", 1)] * 2  # once per screening, not retried


async def test_the_needs_approval_functions_of_a_turn_run_together(
    client: Client, model: Model
) -> None:
    # Their activities ran one after another, each scheduled once the one before ended.
    both = threading.Barrier(2, timeout=10)
    registry = ToolRegistry()

    def over_limit(args: dict[str, Any], ctx: ToolContext) -> bool:
        both.wait()  # answers once the other call's check runs too
        return bool(args["amount"] > 100)

    @registry.tool(needs_approval=over_limit)
    def pay(amount: int) -> str:
        """Pay `amount`."""
        return f"paid {amount}"

    async with (
        model.server.client() as openai,
        worker(client, "pay-two", ToolActivities(registry, openai)),
    ):
        handle = await start(client, "pay-two-1", "pay-two", "pay-two")
        pending = await pending_approvals(handle)
        assert [(r.call_id, r.reason) for r in pending] == [
            (call_id, "tool 'pay' needs approval (its needs_approval returned True)")
            for call_id in ("call_pay_a", "call_pay_b")
        ]
        await handle.signal(ToolLoopWorkflow.approve, [r.approve() for r in pending])
        result = await finish(handle)
    assert result.text == "done: paid 500 | paid 700"


async def test_an_approval_that_fits_no_waiting_call_is_dropped_and_the_run_goes_on(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # Either failed the run with an ApprovalError.
    spawn("misfit", "w1")
    handle = await start(client, "misfit-1", "remove-two", "misfit")
    a, b = await pending_approvals(handle)
    mistaken = dataclasses.replace(a.approve(), call_id="call_nope")
    await handle.signal(ToolLoopWorkflow.approve, [mistaken, a.approve()])  # the latter applies
    await wait_for_call(workdir, "misfit-1", "remove")
    await handle.signal(ToolLoopWorkflow.approve, [a.approve()])  # delivered again
    await handle.signal(ToolLoopWorkflow.approve, [b.reject("keep it")])
    result = await finish(handle)
    assert result.text == (
        "done: removed a.txt | Error: the user declined the call to tool 'remove': keep it"
    )
    assert len(calls(workdir, "misfit-1", "remove")) == 1


async def test_two_approval_signals_that_reach_the_run_together_both_apply(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # The second signal's answers replaced the first's.
    first = spawn("two-signals", "w1")
    handle = await start(client, "two-signals-1", "remove-two", "two-signals")
    a, b = await pending_approvals(handle)
    first.kill()  # with no worker, one workflow task gets both signals
    await handle.signal(ToolLoopWorkflow.approve, [a.approve()])
    await handle.signal(ToolLoopWorkflow.approve, [b.approve()])
    spawn("two-signals", "w2")
    result = await finish(handle)
    assert result.text == "done: removed a.txt | removed b.txt"


async def test_a_custom_permission_of_the_worker_applies_in_the_run(
    client: Client, model: Model
) -> None:
    # Every run failed at start: the workflow read the custom permission as a built-in.
    refund = Permission.custom("billing:refund")
    registry = ToolRegistry(PermissionChecker(PermissionConfig(allowed=["read"], ask=[refund])))

    @registry.tool(permissions=[refund])
    def pay(amount: int) -> str:
        """Pay `amount`."""
        return f"paid {amount}"

    async with (
        model.server.client() as openai,
        worker(client, "custom", ToolActivities(registry, openai)),
    ):
        handle = await start(client, "custom-1", "pay", "custom")
        [request] = await pending_approvals(handle)
        assert request.reason == "permission 'billing:refund' is in PermissionConfig.ask"
        await handle.signal(ToolLoopWorkflow.approve, [request.approve()])
        result = await finish(handle)
    assert result.text == "done: paid 5"


async def test_each_tool_follows_the_permission_policy_of_its_own_task_queue(
    client: Client, model: Model
) -> None:
    # The run's own queue's policy held for every queue's tools: a tools queue's
    # PermissionConfig.ask let `wipe` run unasked, and the run's queue refused `jot`,
    # which its own queue (no policy) lets run.
    wiped: list[str] = []
    policy = PermissionConfig(allowed=["read"], denied=[], ask=["delete"])
    asking = ToolRegistry(PermissionChecker(policy))
    free = ToolRegistry()

    @asking.tool(permissions=["delete"])
    def wipe(path: str) -> str:
        """Delete everything under `path`."""
        wiped.append(path)
        return f"wiped {path}"

    @free.tool(permissions=["write"])
    def jot(note: str) -> str:
        """Write down `note`."""
        return f"noted {note}"

    front = ToolRegistry(PermissionChecker(PermissionConfig(allowed=["read"])))
    queues = ["policy-ask", "policy-free"]
    async with (
        model.server.client() as openai,
        worker(client, "policy-front", ToolActivities(front, openai)),
        worker(client, queues[0], ToolActivities(asking), workflows=False),
        worker(client, queues[1], ToolActivities(free), workflows=False),
    ):
        handle = await start(client, "policy-1", "wipe", "policy-front", tool_task_queues=queues)
        [request] = await pending_approvals(handle)
        assert request.reason == (
            "tool 'wipe' needs approval (permission 'delete' is in PermissionConfig.ask of "
            "task queue 'policy-ask')"
        )
        assert wiped == []
        await handle.signal(ToolLoopWorkflow.approve, [request.approve()])
        assert (await finish(handle)).text == "done: wiped /data"
        noted = await start(client, "policy-2", "jot", "policy-front", tool_task_queues=queues)
        assert (await finish(noted)).text == "done: noted hi"
    assert wiped == ["/data"]
    for run in (handle, noted):  # the per-queue policies replay (a patch of their own)
        replayed = await strict_replayer().replay_workflow(
            await run.fetch_history(), raise_on_replay_failure=False
        )
        assert replayed.replay_failure is None


async def test_an_approval_with_invalid_edited_arguments_is_dropped_and_the_run_waits(
    client: Client, spawn: Spawn, workdir: Path
) -> None:
    # It was taken: the tool refused the edit on its worker, and the model was told that
    # it had sent invalid arguments.
    spawn("bad-edit", "w1")
    handle = await start(client, "bad-edit-1", "remove", "bad-edit")
    [request] = await pending_approvals(handle)
    invalid = dataclasses.replace(request.approve(), edited_arguments={"path": 7})
    valid = dataclasses.replace(request.approve(), edited_arguments={"path": "old.txt"})
    await handle.signal(ToolLoopWorkflow.approve, [invalid])
    # Signals apply in order: once the valid one is taken, the invalid one was dropped.
    await handle.signal(ToolLoopWorkflow.approve, [valid])
    result = await finish(handle)
    # The model (its script echoes the result) reads which arguments the call ran with.
    note = "[the user edited this call's arguments before it ran; it ran with "
    assert result.text == f'done: {note}{{"path": "old.txt"}}]\nremoved old.txt'
    assert len(calls(workdir, "bad-edit-1", "remove")) == 1
