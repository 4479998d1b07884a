"""The sync entry points of the registry, and the library-owned loop they share (_sync.py).

The drop-in tests drive a real sync ``openai.OpenAI`` client against the loopback
ScriptedChatServer, the way a sync app does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import gc
import inspect
import json
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from openai import OpenAI

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    LlmError,
    RunStoppedError,
    ToolContext,
    ToolError,
    ToolRegistry,
    _sync,
)
from agcore_tools.testing import ScriptedChatServer
from tests._scripts import run_script

S = ScriptedChatServer
T = TypeVar("T")
ADD_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
}


@pytest.fixture
def registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool
    def get_weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "celsius": 18}

    return registry


def sync_client(server: ScriptedChatServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=10.0)


# -- the drop-in, with the sync OpenAI client ---------------------------------------------


def test_run_tool_calls_sync_answers_chat_completions_tool_calls(registry: ToolRegistry) -> None:
    script = [
        S.reply_tool_calls([("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": 3})]),
        S.reply_text("18 °C, and 5."),
    ]
    with S(script) as server, sync_client(server) as client:
        messages: list[Any] = [{"role": "user", "content": "Weather in Paris, and 2 + 3?"}]
        while True:
            completion = client.chat.completions.create(
                model="m", messages=messages, tools=registry.definitions()
            )
            message = completion.choices[0].message
            messages.append(message.to_dict())
            if not message.tool_calls:
                break
            messages += registry.run_tool_calls_sync(message.tool_calls)
    assert message.content == "18 °C, and 5."
    call_ids = [call["id"] for call in messages[1]["tool_calls"]]
    assert messages[2:4] == [
        {"role": "tool", "tool_call_id": call_ids[0], "content": '{"city":"Paris","celsius":18}'},
        {"role": "tool", "tool_call_id": call_ids[1], "content": "5"},
    ]
    assert server.requests[1].json["messages"][2:4] == messages[2:4]


def test_run_tool_calls_sync_answers_responses_function_calls(registry: ToolRegistry) -> None:
    script = [S.reply_tool_calls([("add", {"a": 2, "b": 3})]), S.reply_text("5")]
    with S(script) as server, sync_client(server) as client:
        tools = registry.definitions(api="responses")
        response = client.responses.create(model="m", input="2 + 3?", tools=tools)
        while outputs := registry.run_tool_calls_sync(response.output):
            response = client.responses.create(
                model="m", input=outputs, previous_response_id=response.id, tools=tools
            )
    assert response.output_text == "5"
    sent = server.requests[1].json["input"]
    assert [(item["type"], item["output"]) for item in sent] == [("function_call_output", "5")]


def test_run_tool_calls_sync_reports_failures_as_text_like_the_async_method(
    registry: ToolRegistry,
) -> None:
    calls = [{"id": "c", "type": "function", "function": {"name": "nope", "arguments": "{}"}}]
    expected = asyncio.run(registry.run_tool_calls(calls))
    assert registry.run_tool_calls_sync(calls) == expected
    assert "tool 'nope' is not registered" in expected[0]["content"]


def test_invoke_sync_returns_the_invocation(registry: ToolRegistry) -> None:
    invocation = registry.invoke_sync("add", {"a": 2, "b": 3})
    assert invocation.ok and invocation.output == 5
    assert not registry.invoke_sync("add", {"a": "x", "b": 3}).ok
    with pytest.raises(ToolError, match="'nope' is not registered"):
        registry.invoke_sync("nope", {})


def test_a_stop_from_the_apps_thread_ends_invoke_sync_of_an_async_tool_on_its_token() -> None:
    # cancel() set the token's asyncio.Event off its loop's thread, so the tool awaiting
    # it on the library's loop never woke: invoke_sync() hung after a Stop button. The
    # Stop now ends the call itself, as it ends an LlmCycle run.
    registry = ToolRegistry()
    waiting, ended = threading.Event(), threading.Event()

    @registry.tool
    async def wait_for_stop(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        # Set once the loop runs again, which is once this call waits on the token.
        asyncio.get_running_loop().call_soon(waiting.set)
        try:
            await ctx.cancellation.wait()
        finally:
            ended.set()
        return "stopped"

    ctx = ToolContext()
    result: list[Any] = []

    def call() -> None:
        try:
            result.append(registry.invoke_sync("wait_for_stop", {}, ctx))
        except RunStoppedError as exc:
            result.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    assert waiting.wait(10)
    ctx.cancellation.cancel()  # from this thread: neither the loop's nor the caller's
    ctx.cancellation.cancel()  # again: nothing more happens
    worker.join(10)
    assert not worker.is_alive() and ended.is_set()
    assert isinstance(result[0], RunStoppedError) and result[0].call == "invoke_sync()"


@pytest.mark.parametrize(
    ("entry", "tool"),
    [
        ("invoke_sync", "fetch"),
        ("invoke_sync", "query"),
        ("run_tool_calls_sync", "fetch"),
        ("run_tool_calls_sync", "query"),
        ("run_tool_calls_sync", "checked"),
    ],
)
def test_a_stop_button_ends_a_sync_call_whose_tool_ignores_its_context(
    entry: str, tool: str
) -> None:
    # The sync guide's Stop button stopped an LlmCycle run only: invoke_sync() and
    # run_tool_calls_sync() kept the app waiting until the tool (or its needs_approval
    # check) was done, then gave its result as a success.
    registry = ToolRegistry()
    started, release = threading.Event(), threading.Event()

    @registry.tool
    async def fetch() -> str:
        """Wait for a slow service (an async tool that never reads its context)."""
        started.set()
        await asyncio.to_thread(release.wait, 30)  # a client's request in flight
        return "done"

    @registry.tool
    def query() -> str:
        """A sync tool blocked in I/O it cannot interrupt."""
        started.set()
        release.wait(30)
        return "done"

    def slow_check(args: dict[str, Any], ctx: ToolContext) -> bool:
        started.set()
        release.wait(30)
        return False

    @registry.tool(needs_approval=slow_check)
    def checked() -> str:
        """Checked first, slowly."""
        return "done"

    ctx = ToolContext()
    outcome: list[Any] = []

    def call() -> None:
        try:
            if entry == "invoke_sync":
                outcome.append(registry.invoke_sync(tool, {}, ctx))
            else:
                asked = [
                    {"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}
                ]
                outcome.append(registry.run_tool_calls_sync(asked, ctx=ctx))
        except RunStoppedError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    try:
        assert started.wait(10)
        ctx.cancellation.cancel()  # the Stop button's handler, in this thread
        worker.join(5)  # at once, never after the tool's 30 s
        assert not worker.is_alive(), f"{entry}() kept waiting for {tool} after the Stop"
        assert isinstance(outcome[0], RunStoppedError), outcome
        assert outcome[0].call == f"{entry}()"
    finally:
        release.set()
    # The library's loop is free: the next call, with a new context, runs.
    assert registry.invoke_sync("fetch", {}, ToolContext()).output == "done"


# -- where sync calls may come from -----------------------------------------------------


def test_sync_calls_from_eight_threads_run_concurrently_on_one_loop() -> None:
    registry = ToolRegistry()
    threads = 8
    arrived: list[int] = []
    loops: set[int] = set()
    everyone = asyncio.Event()  # created outside any loop; bound on first wait

    @registry.tool
    async def rendezvous(n: int) -> int:
        """Wait until every caller is inside a call at the same time."""
        loops.add(id(asyncio.get_running_loop()))
        arrived.append(n)
        if len(arrived) == threads:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 10)
        return n

    results: dict[int, Any] = {}

    def call(n: int) -> None:
        results[n] = registry.run_tool_calls_sync(
            [
                {
                    "id": f"c{n}",
                    "type": "function",
                    "function": {"name": "rendezvous", "arguments": json.dumps({"n": n})},
                }
            ]
        )

    workers = [threading.Thread(target=call, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(20)
    assert sorted(results) == list(range(threads))
    assert all(
        results[n] == [{"role": "tool", "tool_call_id": f"c{n}", "content": str(n)}]
        for n in results
    )
    assert len(loops) == 1  # one library loop, whatever the calling thread


async def test_a_sync_call_inside_a_running_loop_runs_on_the_library_loop(
    registry: ToolRegistry,
) -> None:
    # What a notebook cell does when it calls a sync entry point: this test's loop is
    # running, and the call blocks it until the library's loop has done the work.
    seen: list[asyncio.AbstractEventLoop] = []

    @registry.tool
    async def where() -> str:
        """Report the loop."""
        seen.append(asyncio.get_running_loop())
        return "here"

    call = {"id": "c", "type": "function", "function": {"name": "where", "arguments": "{}"}}
    assert registry.run_tool_calls_sync([call]) == [
        {"role": "tool", "tool_call_id": "c", "content": "here"}
    ]
    assert seen[0] is not asyncio.get_running_loop()
    assert _sync.is_library_loop(seen[0])


def test_the_callers_context_variables_reach_the_tools() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
    registry = ToolRegistry()

    @registry.tool
    async def whoami() -> str:
        """The caller's request id."""
        return request_id.get()

    request_id.set("req-42")
    assert registry.invoke_sync("whoami", {}).output == "req-42"


def test_a_sync_call_from_the_library_loop_is_refused_instead_of_deadlocking(
    registry: ToolRegistry,
) -> None:
    outer = ToolRegistry()

    @outer.tool
    async def nested() -> int:
        """Calls a sync entry point from inside the library's loop: a mistake."""
        return registry.invoke_sync("add", {"a": 1, "b": 1}).output

    invocation = outer.invoke_sync("nested", {})
    error = invocation.error
    assert isinstance(error, _sync.SyncCallError)
    assert isinstance(error, ToolError) and isinstance(error, LlmError)
    assert isinstance(error, RuntimeError)
    assert "would deadlock; await the async method instead" in str(error)
    assert not error.is_recoverable()


def test_a_refused_coroutine_is_closed_not_left_unawaited() -> None:
    async def inner() -> int:
        return 1

    async def outer() -> Any:
        coro = inner()
        with pytest.raises(_sync.SyncCallError):
            _sync.run(coro)
        return coro.cr_frame  # None once closed

    assert _sync.run(outer()) is None


def test_a_close_sync_that_garbage_collection_runs_on_the_loop_closes_the_cycle() -> None:
    # Cyclic garbage is collected in whichever thread allocates, in a sync app mostly
    # the library loop's: an app's __del__ calling close_sync() raised SyncCallError
    # there ("await the async method instead"), and the cycle was never closed.
    ran_in: list[str] = []
    errors: list[Exception] = []
    twins: list[Any] = []

    class Session:
        """An app's helper: owns a cycle, closes it when dropped."""

        def __init__(self, client: OpenAI) -> None:
            self.cycle = LlmCycle(CycleConfig("m"), client=client)
            self.me = self  # a reference cycle, as bound methods kept on self make

        def __del__(self) -> None:
            ran_in.append(threading.current_thread().name)
            twins.append(self.cycle.client)  # the AsyncOpenAI the cycle built
            try:
                self.cycle.close_sync()
            except Exception as exc:  # the SyncCallError it raised on the loop
                errors.append(exc)

    async def collect() -> None:
        gc.collect()

    async def closes_ended() -> None:
        if _sync._closing:
            await asyncio.wait(list(_sync._closing), timeout=10)

    with S([S.reply_text("hi")], repeat=True) as server, sync_client(server) as client:
        collecting = gc.isenabled()
        gc.disable()  # no collection but the one on the loop below
        try:
            session = Session(client)
            assert session.cycle.submit_sync("hello").text == "hi"
            del session
            _sync.run(collect())
        finally:
            if collecting:
                gc.enable()
        assert ran_in == ["agcore-tools-loop"] and errors == []
        _sync.run(closes_ended())
        assert twins[0].is_closed()


def test_a_close_called_on_the_loop_runs_there_and_its_failure_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def close_fine() -> None:
        ran.append("fine")

    async def close_broken() -> None:
        raise ConnectionResetError("peer went away")

    async def on_loop() -> list[str]:
        _sync.run_close(close_fine())
        _sync.run_close(close_broken())
        assert ran == []  # started, not waited for: that would deadlock
        await asyncio.wait(list(_sync._closing), timeout=10)
        return ran

    with caplog.at_level("WARNING", "agcore_tools.sync"):
        assert _sync.run(on_loop()) == ["fine"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{close_broken.__qualname__}, called on agcore_tools' event loop and run there, "
        "failed: ConnectionResetError('peer went away')"
    ]
    assert not _sync._closing  # nothing held once they have ended


def test_work_cancelled_on_the_loop_reaches_the_caller_as_an_error_not_a_result() -> None:
    async def cancelled_by_someone() -> int:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # as the wind-down at interpreter exit does
        await asyncio.sleep(0)
        return 1

    with pytest.raises(_sync.SyncCallError, match="was cancelled on agcore_tools' event loop"):
        _sync.run(cancelled_by_someone())


# -- what a tool raises on the library's loop ----------------------------------------------


def _within(seconds: float, call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own, which must end within ``seconds``: a call that
    hangs fails the test instead of hanging it."""
    outcome: list[Any] = []
    worker = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"the sync call still waits after {seconds} s"
    assert outcome, "the sync call raised (see the thread's traceback)"
    result: T = outcome[0]
    return result


def _loop_thread() -> threading.Thread:
    async def thread() -> threading.Thread:
        return threading.current_thread()

    return _within(10, lambda: _sync.run(thread()))


def test_a_sys_exit_in_a_tools_own_task_fails_its_call_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # asyncio lets a SystemExit out of a task's step to stop run_forever(): one raised
    # in a task an async tool made (gather's, wait_for's) ended the library's loop
    # thread, silently, and its call and every later sync call waited forever.
    registry = ToolRegistry()

    def cli(argv: list[str]) -> dict[str, Any]:
        parser = argparse.ArgumentParser(prog="helper")
        parser.add_argument("--count", type=int)
        return vars(parser.parse_args(argv))  # sys.exit(2) on a bad argument

    @registry.tool
    async def count_things(count: str) -> dict[str, Any]:
        """Run a CLI helper in a thread, with a timeout."""
        return await asyncio.wait_for(asyncio.to_thread(cli, ["--count", count]), 10)

    @registry.tool
    async def fan_out() -> list[int]:
        """Two helpers at once; one gives up."""

        async def helper(n: int) -> int:
            if n:
                sys.exit("helper gave up")
            return n

        return await asyncio.gather(helper(0), helper(1))

    loop_thread = _loop_thread()
    with caplog.at_level("WARNING", "agcore_tools.sync"):
        bad_args = _within(10, lambda: registry.invoke_sync("count_things", {"count": "x"}))
        gave_up = _within(10, lambda: registry.invoke_sync("fan_out", {}))
    assert str(bad_args.error) == "tool 'count_things' failed: SystemExit: 2"
    assert str(gave_up.error) == "tool 'fan_out' failed: SystemExit: helper gave up"
    # Said, not silent (wait_for() makes a task of its own before Python 3.12 only).
    assert {r.getMessage() for r in caplog.records} == {
        "SystemExit escaped a task or callback on agcore_tools' event loop; the loop goes on"
    }
    # The same loop, in the same thread, runs the next call.
    assert _loop_thread() is loop_thread and loop_thread.is_alive()
    assert _within(10, lambda: registry.invoke_sync("count_things", {"count": "3"})).output == {
        "count": 3
    }


@pytest.mark.parametrize("where", ["sync tool", "async tool's task"])
def test_a_keyboard_interrupt_a_tool_raises_fails_its_call_not_the_loop(where: str) -> None:
    # A Ctrl-C is raised in the main thread only: a KeyboardInterrupt on the library's
    # loop is a tool's own. It left execute() (a sync tool's, through its call's task)
    # and stopped the loop's thread, and run_tool_calls_sync() waited forever.
    registry = ToolRegistry()

    @registry.tool
    def boom() -> str:
        """Raises KeyboardInterrupt in its worker thread."""
        raise KeyboardInterrupt

    @registry.tool
    async def aboom() -> str:
        """Raises KeyboardInterrupt in a task of its own."""

        async def inner() -> str:
            raise KeyboardInterrupt("from inner")

        return await asyncio.create_task(inner())

    name = "boom" if where == "sync tool" else "aboom"
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for i in range(2)
    ]
    loop_thread = _loop_thread()
    answers = _within(10, lambda: registry.run_tool_calls_sync(calls))
    reason = "KeyboardInterrupt (raised by the tool)"
    if name == "aboom":
        reason = "KeyboardInterrupt: from inner (raised by the tool)"
    assert [a["content"] for a in answers] == [f"Error: tool '{name}' failed: {reason}"] * 2
    invocation = _within(10, lambda: registry.invoke_sync(name, {}))
    assert isinstance(invocation.error, ToolError)
    assert isinstance(invocation.error.__cause__, KeyboardInterrupt)
    assert _loop_thread() is loop_thread and loop_thread.is_alive()
    if threading.current_thread() is threading.main_thread():
        # On the app's own loop in the main thread, it may be the user's Ctrl-C: it
        # goes on up, as before.
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(registry.invoke(name, {}))


HALTING_TOOL = """
import asyncio, threading

from agcore_tools import ToolRegistry

registry = ToolRegistry()
stopped = threading.Event()

@registry.tool
async def halt() -> str:
    \"""Stops the loop it runs on.\"""
    asyncio.get_running_loop().stop()
    stopped.set()
    await asyncio.Event().wait()
    return "never"
"""
"""A script's start: ``halt``, a tool that ends the library loop's thread (code on the
loop stops it), and ``stopped``, set once it has."""


def test_a_sync_call_whose_loop_thread_ended_fails_and_the_next_call_starts_a_new_loop(
    tmp_path: Path,
) -> None:
    # Should the loop's thread end all the same (here code on it stops the loop), a call
    # waiting on it fails instead of waiting forever, the next call starts a new loop
    # (a reused thread id made it raise "called from agcore_tools' own event loop"),
    # and the exit does not wait ~20 s for a wind-down nothing runs.
    script = tmp_path / "loop_ended.py"
    script.write_text(
        HALTING_TOOL
        + textwrap.dedent(
            """
            from agcore_tools import SyncCallError, _sync

            async def loop_thread():
                return threading.current_thread()

            for _ in range(2):
                first = _sync.run(loop_thread())
                try:
                    registry.invoke_sync("halt", {})
                except SyncCallError as exc:
                    print(exc)
                second = _sync.run(loop_thread())
                print(second is not first, not first.is_alive(), second.is_alive())
            try:  # the loop's thread ends again, and the interpreter exits at once
                registry.invoke_sync("halt", {})
            except SyncCallError:
                print("lost")
            """
        )
    )
    result = run_script(script, timeout=20)
    assert result.returncode == 0, result.stderr
    lost = "the *_sync call was lost: agcore_tools' event loop thread ended before the call did"
    assert result.stdout.splitlines() == [lost, "True True True", lost, "True True True", "lost"]
    assert result.stderr.count("agcore_tools' event loop thread had ended") == 3, result.stderr


# -- interrupting a sync call --------------------------------------------------------------


class Alarm(Exception):
    """What the test's signal handler raises, like a caller's own timeout."""


@contextmanager
def handler(signum: int, exc: type[BaseException]) -> Iterator[None]:
    def raise_it(*_: Any) -> None:
        raise exc

    previous = signal.signal(signum, raise_it)
    try:
        yield
    finally:
        signal.signal(signum, previous)


@pytest.mark.parametrize(
    ("signum", "exc"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGUSR1, Alarm)]
)
def test_an_interrupted_sync_call_cancels_its_work_before_raising(
    signum: int, exc: type[BaseException]
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    main = threading.main_thread().ident
    assert main is not None
    registry = ToolRegistry()
    events: list[str] = []

    @registry.tool
    async def long_job() -> str:
        """Runs until cancelled; interrupts the waiting caller first."""
        events.append("started")
        signal.pthread_kill(main, signum)
        try:
            await asyncio.sleep(30)
        finally:
            events.append("cleaned up")
        return "finished"

    async def tasks_on_loop() -> int:
        return len(asyncio.all_tasks()) - 1  # not counting this one

    before = _sync.run(tasks_on_loop())
    call = {"id": "c", "type": "function", "function": {"name": "long_job", "arguments": "{}"}}
    with handler(signum, exc):
        with pytest.raises(exc):
            registry.run_tool_calls_sync([call])
        # The tool was cancelled and had finished its clean-up before the caller saw
        # the exception, and nothing of the call is left on the loop.
        assert events == ["started", "cleaned up"]
        assert _sync.run(tasks_on_loop()) == before
    assert registry.entry("long_job").stats.failures == 1


def _wait_until_blocked_in(thread_id: int, function: Any, call: str) -> None:
    """Wait (bounded) until the thread is blocked on the line of ``function`` calling ``call``."""
    lines, first = inspect.getsourcelines(function)
    line = first + next(i for i, text in enumerate(lines) if call in text)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(thread_id)
        if frame is not None and frame.f_code is function.__code__ and frame.f_lineno == line:
            return
        time.sleep(0.001)
    raise AssertionError(f"the thread never blocked in {function.__name__}")


def test_a_sync_call_interrupted_before_the_loop_started_it_ends_at_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    main = threading.main_thread().ident
    assert main is not None
    monkeypatch.setattr(_sync, "_GRACE", 5.0)
    ran: list[str] = []
    hogging_the_loop = threading.Event()

    async def hog() -> None:
        # Blocks the loop (as a sync call inside an async tool does) until the main
        # thread's call is queued behind it, interrupted, and its cancel queued too.
        hogging_the_loop.set()
        _wait_until_blocked_in(main, _sync._wait, "call.done.acquire(timeout")
        signal.pthread_kill(main, signal.SIGUSR1)
        _wait_until_blocked_in(main, _sync._abandon, "call.done.acquire(")

    async def queued() -> None:
        ran.append("queued")

    hogging = threading.Thread(target=lambda: _sync.run(hog()))
    with handler(signal.SIGUSR1, Alarm), caplog.at_level("WARNING", "agcore_tools.sync"):
        hogging.start()
        assert hogging_the_loop.wait(10)
        with pytest.raises(Alarm):
            _sync.run(queued())
    hogging.join(10)
    # The call ended as soon as the loop cancelled it, without waiting out the grace.
    assert not hogging.is_alive() and ran == []
    assert not [r for r in caplog.records if "did not end" in r.getMessage()]


def test_the_loop_is_one_daemon_thread() -> None:
    async def thread() -> threading.Thread:
        return threading.current_thread()

    first, second = _sync.run(thread()), _sync.run(thread())
    assert first is second and first.daemon and first.name == "agcore-tools-loop"
    assert first is not threading.current_thread()


def test_the_loop_starts_once_on_the_first_sync_call_even_from_many_threads(
    tmp_path: Path,
) -> None:
    script = tmp_path / "first_calls.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio
            import threading

            from agcore_tools import _sync

            def loop_threads() -> int:
                return sum(t.name == "agcore-tools-loop" for t in threading.enumerate())

            assert loop_threads() == 0  # importing starts nothing
            barrier = threading.Barrier(8)
            loops = []

            async def which() -> int:
                return id(asyncio.get_running_loop())

            def first_call() -> None:
                barrier.wait(10)
                loops.append(_sync.run(which()))

            threads = [threading.Thread(target=first_call) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
            print(len(loops), len(set(loops)), loop_threads())
            """
        )
    )
    result = run_script(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8", "1", "1"]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_ctrl_c_as_the_loop_starts_leaves_no_loop_behind(tmp_path: Path, when: str) -> None:
    # A Ctrl-C landing in the first sync call's Thread.start() (which waits for the new
    # thread) left that loop running in its thread, never used, with its descriptors
    # (or, landing before the thread was made, left the loop open): the next call
    # started a second "one loop". The interrupt is put in start() here, before or
    # after the thread itself starts, where a real SIGINT lands only by chance.
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("counts descriptors in /proc/self/fd")
    script = tmp_path / "interrupted_start.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os
            import threading

            from agcore_tools import _sync

            real_start = threading.Thread.start
            interrupted = []

            def start(self):
                if self.name == "agcore-tools-loop" and not interrupted:
                    interrupted.append(True)
                    if {when!r} == "after":
                        real_start(self)
                    raise KeyboardInterrupt  # the Ctrl-C, as start() waits
                real_start(self)

            threading.Thread.start = start

            async def ping():
                return "pong"

            def loop_threads():
                return [
                    t for t in threading.enumerate()
                    if t.name == "agcore-tools-loop" and t.is_alive()
                ]

            descriptors = len(os.listdir("/proc/self/fd"))
            try:
                _sync.run(ping())
            except KeyboardInterrupt:
                print("interrupted")
            for thread in loop_threads():
                thread.join(5)  # an abandoned loop's thread ends at once
            print(len(loop_threads()), len(os.listdir("/proc/self/fd")) - descriptors)
            print(_sync.run(ping()), len(loop_threads()))
            """
        )
    )
    result = run_script(script, env={"PYTHONWARNINGS": "always::ResourceWarning"}, timeout=30)
    assert result.returncode == 0, result.stderr
    # No loop thread nor descriptor left after the interrupt; then one loop, as ever.
    assert result.stdout.split() == ["interrupted", "0", "0", "pong", "1"], result.stdout
    assert "ResourceWarning" not in result.stderr


def test_closing_at_exit_after_the_wind_down_is_quiet(tmp_path: Path) -> None:
    # Generators suspended inside `with` blocks (a streaming body whose client left)
    # are closed as the interpreter clears its objects, after the wind-down at exit:
    # each close raised "agcore_tools' event loop has shut down", printed by Python as
    # "Exception ignored in: <generator ...>" with a traceback.
    script = tmp_path / "close_at_exit.py"
    script.write_text(
        textwrap.dedent(
            """
            import logging
            import sys

            from openai import OpenAI

            from agcore_tools import AssistantTextDelta, CycleConfig, LlmCycle, McpClient
            from agcore_tools.mcp import StdioTransport
            from agcore_tools.testing import ScriptedChatServer

            logging.basicConfig(level=logging.DEBUG, format="%(name)s %(message)s")
            for noisy in ("asyncio", "httpcore2", "httpx2", "openai", "mcp"):
                logging.getLogger(noisy).setLevel(logging.WARNING)
            server = ScriptedChatServer([ScriptedChatServer.reply_text("one two")]).start()
            client = OpenAI(base_url=server.base_url, api_key="-", max_retries=0)


            def words():
                cycle = LlmCycle(CycleConfig("m"), client=client)
                with cycle, cycle.submit_stream_sync("x") as events:
                    for event in events:
                        if isinstance(event, AssistantTextDelta):
                            yield event.text


            def capitals():
                transport = StdioTransport(sys.executable, ["examples/mcp_server.py"])
                with McpClient("demo", transport) as mcp:
                    yield mcp.call_tool_sync("capital_of", {"country": "France"})
                    yield "never"


            body, answers = words(), capitals()
            print(next(body), next(answers), flush=True)
            """
        )
    )
    result = run_script(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "Paris"
    assert "Exception ignored" not in result.stderr, result.stderr
    assert "SyncCallError" not in result.stderr, result.stderr
    closes = [line for line in result.stderr.splitlines() if "nothing left to close" in line]
    assert len(closes) == 3, result.stderr  # the stream, the cycle, the MCP client
    assert all(line.startswith("agcore_tools.sync ") for line in closes)


def test_a_ctrl_c_while_waiting_on_a_loop_whose_thread_ended_returns_at_once(
    tmp_path: Path,
) -> None:
    # The interrupted call's cancel was sent to a loop nothing runs any more, and the
    # Ctrl-C came back only after the 10 s grace.
    script = tmp_path / "interrupted.py"
    script.write_text(
        HALTING_TOOL
        + textwrap.dedent(
            """
            import os, signal, time

            def interrupt():
                stopped.wait(10)  # well before the waiting call's first pulse (1 s)
                os.kill(os.getpid(), signal.SIGINT)

            threading.Thread(target=interrupt, daemon=True).start()
            started = time.monotonic()
            try:
                registry.invoke_sync("halt", {})
            except KeyboardInterrupt:
                print(f"interrupted after {time.monotonic() - started:.1f} s")
            """
        )
    )
    result = run_script(script, timeout=30)
    assert result.returncode == 0, result.stderr
    seconds = float(result.stdout.split("interrupted after ")[1].split(" s")[0])
    assert seconds < 5, result.stdout  # the pulse notices the ended thread within 1 s
