"""An MCP tool run as a task that outlasts the run: the loop pauses with a RunningTask,
the history keeps the task, and a resume in any process waits for the same task
(one tools/call on the server). Real task server (tests/mcp/servers/task_server.py, a
file-backed store and a clock a test can move on) over HTTP, both protocol eras, and a
scripted model over HTTP; the restarts are killed processes."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import (
    InputRequest,
    LlmError,
    McpClient,
    RunningTask,
    StreamableHttpTransport,
    ToolContext,
    ToolProgress,
    ToolRegistry,
    ToolTimeoutError,
)
from tests.mcp.test_tasks import TaskServer

from .conftest import S, assert_history_valid, tool_messages

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("task_child.py")
HOURS = 3600.0
ERAS = ["2025-11-25", "2026-07-28"]

BUILD = S.reply_tool_calls([("build", {"seconds": 2 * HOURS, "label": "release"}, "c_build")])


@pytest.fixture
def clock(tmp_path: Path) -> Path:
    path = tmp_path / "clock"
    path.write_text("0")
    return path


@pytest.fixture
def tasks(tmp_path: Path, clock: Path) -> Iterator[TaskServer]:
    server = TaskServer(
        tmp_path / "tasks.json", "--poll-ms", "50", "--clock-file", str(clock), "--ttl-ms",
        str(int(24 * HOURS * 1000)),
    )  # fmt: skip
    try:
        yield server
    finally:
        server.stop()
        server.sock.close()


def _client(server: TaskServer, era: str) -> McpClient:
    options: dict[str, Any] = {"protocol": "legacy"} if era == "2025-11-25" else {"tasks": True}
    return McpClient("ci", StreamableHttpTransport(server.url), timeout=30.0, **options)


def _child_leg(mode: str, model_url: str, mcp_url: str, era: str, history: Path) -> Any:
    """Run task_child.py until it saved the history and printed its pending items,
    then kill it (SIGKILL): a client restart."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), mode, model_url, mcp_url, era, str(history)],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().decode()  # bounded: the child sleeps 60 s at most
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        assert child.stdout is not None
        child.stdout.close()  # else a ResourceWarning when the pipe is collected
    return json.loads(line)


@pytest.mark.parametrize("era", ERAS)
async def test_a_two_hour_task_survives_three_client_restarts_with_one_call(
    serve, make_cycle, tasks, clock, tmp_path: Path, era: str
):
    model = serve(BUILD, S.reply_text("Built."))
    history = tmp_path / "history.json"
    seen = []
    for leg in range(3):  # three processes, each killed while the task runs
        mode = "start" if leg == 0 else "resume"
        out = await asyncio.to_thread(_child_leg, mode, model.base_url, tasks.url, era, history)
        [item] = out["pending"]
        assert (item["call_id"], item["tool_name"], item["status"]) == (
            "c_build", "build", "working"
        )  # fmt: skip
        seen.append(item["message"])
        clock.write_text(str((leg + 1) * 40 * 60))  # 40 minutes pass on the server
    assert seen == ["step 1/3", "step 2/3", "step 3/3"]
    clock.write_text(str(2 * HOURS))
    saved = json.loads(history.read_text())
    client = _client(tasks, era)
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["build"], task_wait=10.0))
        cycle = make_cycle(model, approval_key=b"k" * 32)
        cycle.messages[:] = saved
        done = await cycle.submit_with_tools(None, registry)
    assert done.text == "Built." and done.pending == ()
    result = json.loads(tool_messages(model.requests[1].json["messages"])["c_build"])
    assert result == {"label": "release", "seconds": 2 * HOURS}
    assert "paused_call" not in json.dumps(cycle.messages)
    assert tasks.counts()["calls"] == {"build": 1}  # never called again
    assert len(model.requests) == 2  # the model was not asked while the task ran
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("era", ERAS)
async def test_a_run_cancelled_while_its_task_runs_keeps_the_task_in_the_history(
    serve, make_cycle, tasks, clock, era: str
):
    model = serve(BUILD, S.reply_text("Built after all."))
    client = _client(tasks, era)
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["build"]))
        cycle = make_cycle(model)
        run = asyncio.ensure_future(cycle.submit_with_tools("build", registry))
        deadline = time.monotonic() + 20
        while not tasks.store.exists() or not tasks.counts().get("gets"):
            assert time.monotonic() < deadline, "the task was never polled"
            await asyncio.sleep(0.02)
        done = await _closed_then_resumed(cycle, run, registry, clock)
    assert done.text == "Built after all."
    assert tasks.counts()["calls"] == {"build": 1}
    assert "cancels" not in tasks.counts()  # kept for the resume, not cancelled


async def test_a_new_prompt_tells_the_model_its_task_was_left_running_not_declined(
    serve, make_cycle, tasks
):
    # Moving on from a held task answered the call "the user declined the call": the
    # model read that nothing ran, while the build went on on the server, and could
    # start it again.
    model = serve(BUILD, S.reply_text("Moved on."))
    async with _client(tasks, "2026-07-28") as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["build"]))
        cycle = make_cycle(model)
        run = asyncio.ensure_future(cycle.submit_with_tools("build", registry))
        deadline = time.monotonic() + 20
        while not tasks.store.exists() or not tasks.counts().get("gets"):
            assert time.monotonic() < deadline, "the task was never polled"
            await asyncio.sleep(0.02)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        [held] = cycle.messages[-1]["tool_calls"][0]["paused_call"]["requests"]
        await cycle.submit_with_tools("never mind, what time is it?", registry)

    told = tool_messages(model.requests[1].json["messages"])["c_build"]
    assert "declined" not in told
    assert told == (
        f"Error: the call to tool 'build' started task '{held['task_id']}' on server 'ci', "
        "which had not ended when the conversation went on without it: the task was not "
        "cancelled and may still finish; do not start it again unless it must run twice"
    )
    assert tasks.counts()["calls"] == {"build": 1}
    assert "cancels" not in tasks.counts()


async def _closed_then_resumed(
    cycle: Any, run: asyncio.Future[Any], registry: ToolRegistry, clock: Path
) -> Any:
    """Cancel ``run`` while its task runs (the app closes), check the task is held in the
    history, let the task end (two hours on the server's clock) and resume the run."""
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    held = cycle.messages[-1]["tool_calls"][0]["paused_call"]
    assert held["requests"][0]["kind"] == "task"
    await asyncio.to_thread(clock.write_text, str(2 * HOURS))
    return await cycle.submit_with_tools(None, registry)


@pytest.mark.parametrize("cut_off", ["tool_timeout", "invoke_all"])
async def test_a_task_call_cut_off_by_its_timeout_leaves_no_claim_on_a_later_calls_task(
    serve, make_cycle, tasks, clock, cut_off: str
):
    # Cut off, the call stayed in the adapter under its id for good, and the next call
    # of that id (another conversation) cancelled mid-task lost its task: two running
    # tasks shared the id, so the call was answered "cancelled" and its task orphaned.
    earlier = [BUILD, S.reply_text("It timed out.")] if cut_off == "tool_timeout" else []
    model = serve(*earlier, BUILD, S.reply_text("Built after all."))
    client = _client(tasks, "2026-07-28")
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["build"]))
        if cut_off == "tool_timeout":
            await make_cycle(model, tool_timeout=1.0).submit_with_tools("build", registry)
            told = tool_messages(model.requests[1].json["messages"])["c_build"]
            assert "timed out after 1" in told
        else:
            args = {"seconds": 2 * HOURS, "label": "release"}
            [cut] = await registry.invoke_all([("build", args, "c_build")], timeout=1.0)
            assert isinstance(cut.error, ToolTimeoutError)
        # The task was started; given up on with no handle kept, it was cancelled.
        [cut_task] = tasks.counts()["tasks"]
        assert tasks.counts()["calls"] == {"build": 1}
        assert tasks.counts()["cancels"] == [cut_task]
        polled = asyncio.Event()
        cycle = make_cycle(model)
        ctx = ToolContext(on_event=lambda e: isinstance(e, ToolProgress) and polled.set())
        run = asyncio.ensure_future(cycle.submit_with_tools("build", registry, ctx=ctx))
        await asyncio.wait_for(polled.wait(), 20)  # this conversation's task runs
        done = await _closed_then_resumed(cycle, run, registry, clock)
    assert done.text == "Built after all."
    assert tasks.counts()["calls"] == {"build": 2}  # the kept task was waited for
    assert tasks.counts()["cancels"] == [cut_task]  # and not cancelled when the run stopped


async def test_a_task_the_server_forgot_in_a_restart_is_a_clear_error(
    serve, make_cycle, tasks, clock
):
    model = serve(BUILD, S.reply_text("unused"))
    client = _client(tasks, "2025-11-25")
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(task_wait=0.5))
        cycle = make_cycle(model)
        paused = await cycle.submit_with_tools("build", registry)
        [item] = paused.pending
        assert isinstance(item, RunningTask) and item.server == "ci"
        await asyncio.to_thread(tasks.restart, "--forget")
        started = time.monotonic()
        with pytest.raises(LlmError, match="no longer exists on") as caught:
            await cycle.submit_with_tools(None, registry)
    assert time.monotonic() - started < 10  # no hang
    assert item.task_id in str(caught.value)


@pytest.mark.parametrize("era", ERAS)
async def test_a_task_that_fails_on_the_server_is_an_error_the_model_reads(
    serve, make_cycle, tasks, era: str
):
    fail = S.reply_tool_calls([("fail_build", {}, "c_fail")])
    model = serve(fail, S.reply_text("The build failed, sorry."))
    client = _client(tasks, era)
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["fail_build"]))
        done = await make_cycle(model).submit_with_tools("build", registry)
    assert done.text == "The build failed, sorry."
    told = tool_messages(model.requests[1].json["messages"])["c_fail"]
    assert "of tool 'fail_build' failed: the compiler crashed" in told


async def test_on_2026_a_tasks_question_pauses_the_run_and_the_answer_goes_by_tasks_update(
    serve, make_cycle, tasks
):
    ask = S.reply_tool_calls([("ask", {"question": "Colour?"}, "c_ask")])
    model = serve(ask, S.reply_text("Blue."))
    client = _client(tasks, "2026-07-28")
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["ask"], task_wait=10.0))
        cycle = make_cycle(model, approval_key=b"k" * 32)
        paused = await cycle.submit_with_tools("colour?", registry)
        question, running = paused.pending
        assert isinstance(question, InputRequest) and isinstance(running, RunningTask)
        assert question.request_id.startswith("c_ask~q1~")
        assert question.message == "Colour?"
        assert running.status == "input_required"
        saved = json.loads(json.dumps(cycle.messages))
        fresh = make_cycle(model, approval_key=b"k" * 32)
        fresh.messages[:] = saved
        done = await fresh.submit_with_tools(
            None, registry, approvals=[question.accept({"answer": "blue"})]
        )
    assert done.text == "Blue."
    assert tool_messages(model.requests[1].json["messages"])["c_ask"] == "accept: blue"
    counted = tasks.counts()
    assert counted["calls"] == {"ask": 1}
    assert counted["updates"] == [{"q1": {"action": "accept", "content": {"answer": "blue"}}}]


async def test_on_2026_with_an_elicitation_handler_a_tasks_question_does_not_pause(
    serve, make_cycle, tasks
):
    from mcp_types import ElicitResult

    async def colour(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"answer": "green"})

    ask = S.reply_tool_calls([("ask", {"question": "Colour?"}, "c_ask")])
    model = serve(ask, S.reply_text("Green."))
    client = McpClient(
        "ci", StreamableHttpTransport(tasks.url), timeout=30.0, tasks=True,
        elicitation_handler=colour,
    )  # fmt: skip
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["ask"], task_wait=10.0))
        done = await make_cycle(model).submit_with_tools("colour?", registry)
    assert done.pending == () and done.text == "Green."
    assert tool_messages(model.requests[1].json["messages"])["c_ask"] == "accept: green"
    assert tasks.counts()["updates"] == [
        {"q1": {"action": "accept", "content": {"answer": "green"}}}
    ]


async def test_a_streaming_consumer_sees_the_tasks_status_as_progress(
    serve, make_cycle, tasks, clock
):
    model = serve(BUILD, S.reply_text("Built."))
    client = _client(tasks, "2025-11-25")
    seen: list[str | None] = []
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(task_wait=10.0))
        stream = make_cycle(model).submit_stream_with_tools("build", registry)
        async for event in stream:
            if isinstance(event, ToolProgress):
                seen.append(event.message)
                if len(seen) == 1:
                    clock.write_text(str(2 * HOURS))  # the build ends on the server
    assert seen[0] == "working: step 1/3"
    assert seen[-1] == "completed: done"
    assert stream.response.text == "Built."


async def test_a_tasks_question_can_be_answered_inline_in_a_stream(serve, make_cycle, tasks):
    from agcore_tools import ToolInputRequested

    ask = S.reply_tool_calls([("ask", {"question": "Colour?"}, "c_ask")])
    model = serve(ask, S.reply_text("Green."))
    client = _client(tasks, "2026-07-28")
    async with client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["ask"], task_wait=10.0))
        stream = make_cycle(model).submit_stream_with_tools("colour?", registry)
        async for event in stream:
            if isinstance(event, ToolInputRequested):
                event.accept({"answer": "green"})
    assert stream.response.text == "Green." and stream.response.pending == ()
    assert tool_messages(model.requests[1].json["messages"])["c_ask"] == "accept: green"
    assert tasks.counts()["calls"] == {"ask": 1}
