"""The tool thread pool: sync tools run in daemon threads that exit does not wait for."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path

import pytest

from agcore_tools import ToolRegistry, ToolTimeoutError, _aio
from agcore_tools._aio import _DaemonExecutor, run_sync, with_timeout
from tests._scripts import run_script

# A sync tool that sleeps far past its timeout; the script reports when the call came
# back (time.monotonic() is one clock for every process on the machine).
_ABANDONED_TOOL = textwrap.dedent(
    """
    import asyncio
    import json
    import time

    from agcore_tools import ToolRegistry

    registry = ToolRegistry()


    @registry.tool(timeout=1.0)
    def nap() -> str:
        '''Sleep far longer than the timeout allows.'''
        time.sleep(30)
        return "woke up"


    invocation = asyncio.run(registry.invoke("nap", {}))
    print(json.dumps({"returned_at": time.monotonic(), "error": str(invocation.error)}))
    """
)


@pytest.mark.timeout(60)
def test_exit_does_not_wait_for_a_sync_tool_abandoned_at_its_timeout(tmp_path: Path) -> None:
    script = tmp_path / "abandon.py"
    script.write_text(_ABANDONED_TOOL, encoding="utf-8")
    done = run_script(script, timeout=45)
    exited_at = time.monotonic()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (
        report["error"]
        == "tool 'nap' failed: timed out after 1 s; it may have run in part, so do not assume it had no effect"
    )
    # Exit followed the call; with threads that exit joins, it came 29 s later.
    assert exited_at - report["returned_at"] < 10.0


async def test_run_sync_runs_in_a_daemon_thread_and_keeps_context_variables() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var")
    var.set("caller's")

    def probe() -> tuple[bool, str, bool]:
        current = threading.current_thread()
        return current.daemon, var.get(), current is threading.main_thread()

    assert await run_sync(probe) == (True, "caller's", False)


async def test_run_sync_raises_the_function_s_exception() -> None:
    def boom(text: str) -> None:
        raise KeyError(text)

    with pytest.raises(KeyError, match="lost"):
        await run_sync(boom, "lost")


async def test_calls_past_the_thread_limit_wait_for_a_free_worker() -> None:
    executor = _DaemonExecutor(4, "agcore-test")
    loop = asyncio.get_running_loop()
    release, full = threading.Event(), threading.Event()
    lock = threading.Lock()
    running: list[int] = []

    def hold(position: int) -> int:
        with lock:
            running.append(position)
            if len(running) == 4:
                full.set()
        assert release.wait(20.0)
        return position

    try:
        calls = [loop.run_in_executor(executor, hold, i) for i in range(10)]
        try:
            assert await asyncio.to_thread(full.wait, 20.0)
            with lock:
                assert len(running) == 4  # the other 6 are queued, not on new threads
        finally:
            release.set()
        assert await asyncio.wait_for(asyncio.gather(*calls), 20.0) == list(range(10))
        workers = [t for t in threading.enumerate() if t.name.startswith("agcore-test")]
        assert len(workers) == 4
        assert all(worker.daemon for worker in workers)
        assert await loop.run_in_executor(executor, int, "7") == 7
        again = [t for t in threading.enumerate() if t.name.startswith("agcore-test")]
        assert again == workers  # an idle worker took it
    finally:
        await asyncio.to_thread(executor.shutdown)
    assert not [t for t in threading.enumerate() if t.name.startswith("agcore-test")]
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(int, "1")


async def test_threads_of_calls_given_up_on_do_not_count_against_the_pool_limit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A pool of 2 threads stands in for the 64: 17 hung calls given up on (cancelled, or
    # past their timeout) would otherwise hold every thread, and every later call would
    # wait in the queue behind them.
    executor = _DaemonExecutor(2, "agcore-test")
    monkeypatch.setattr(_aio, "_executor", executor)
    registry = ToolRegistry()
    release, started = threading.Event(), threading.Semaphore(0)

    @registry.tool
    def fetch_url(url: str) -> str:
        """A call that hangs."""
        started.release()
        release.wait(30.0)
        return "late"

    @registry.tool(timeout=5.0)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    try:
        with caplog.at_level("WARNING", "agcore_tools"):
            for i in range(17):
                call = asyncio.ensure_future(registry.invoke("fetch_url", {"url": f"x/{i}"}))
                assert await asyncio.to_thread(started.acquire, True, 20.0)
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
        invocation = await registry.invoke("add", {"a": 2, "b": 3})
        assert (invocation.output, invocation.error) == (5, None)
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1
        assert warnings[0].startswith("17 tool threads still run calls that were given up on")
        assert "latest: fetch_url" in warnings[0]
        release.set()  # the hung calls return: their threads end, back to the limit of 2
        deadline = time.monotonic() + 20.0
        while len(_pool_threads("agcore-test")) > 2:
            assert time.monotonic() < deadline, _pool_threads("agcore-test")
            await asyncio.sleep(0.01)
    finally:
        release.set()
        await asyncio.to_thread(executor.shutdown)


async def test_sync_tools_waiting_on_inner_sync_calls_do_not_starve_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A pool of 2 threads stands in for the 64. Both threads run a sync tool that calls
    # another sync tool through invoke_sync; while they wait, they must not hold the
    # threads the inner calls need (before, every thread waited on inner calls queued
    # behind them, for good: the outer calls' timeout is what ends this test then).
    executor = _DaemonExecutor(2, "agcore-test")
    monkeypatch.setattr(_aio, "_executor", executor)
    registry = ToolRegistry()
    both_running = threading.Barrier(2, timeout=20.0)

    @registry.tool
    def lookup(key: str) -> str:
        """The inner call."""
        return key.upper()

    @registry.tool(timeout=10.0)
    def enrich(key: str) -> str:
        """The outer call: waits until both threads hold one, then calls lookup."""
        both_running.wait()
        return "enriched " + registry.invoke_sync("lookup", {"key": key}).result()

    try:
        calls = [registry.invoke("enrich", {"key": key}) for key in ("a", "b")]
        outcomes = await asyncio.wait_for(asyncio.gather(*calls), 30.0)
        assert [(i.output, i.error) for i in outcomes] == [
            ("enriched A", None),
            ("enriched B", None),
        ]
        # The threads started for the inner calls were extra: back to the limit of 2.
        deadline = time.monotonic() + 20.0
        while len(_pool_threads("agcore-test")) > 2:
            assert time.monotonic() < deadline, _pool_threads("agcore-test")
            await asyncio.sleep(0.01)
        assert (await registry.invoke("lookup", {"key": "c"})).output == "C"
    finally:
        both_running.abort()
        await asyncio.to_thread(executor.shutdown)


def _pool_threads(prefix: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(f"{prefix}_")]


async def test_a_sync_call_that_timed_out_waiting_for_a_thread_never_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executor = _DaemonExecutor(1, "agcore-test")
    monkeypatch.setattr(_aio, "_executor", executor)
    registry = ToolRegistry()
    release, holding = threading.Event(), threading.Event()
    ran: list[int] = []

    @registry.tool
    def hold() -> str:
        """Holds the pool's only thread; its caller still waits for it."""
        holding.set()
        release.wait(30.0)
        return "done"

    @registry.tool(timeout=0.2)
    def add(a: int, b: int) -> int:
        """Add."""
        ran.append(1)
        return a + b

    held = asyncio.ensure_future(registry.invoke("hold", {}))
    try:
        assert await asyncio.to_thread(holding.wait, 20.0)
        invocation = await registry.invoke("add", {"a": 2, "b": 3})
        assert isinstance(invocation.error, ToolTimeoutError)
        assert str(invocation.error) == (
            "tool 'add' failed: timed out after 0.2 s waiting for its turn; it never started"
        )
        assert invocation.may_have_run is False
    finally:
        release.set()
        assert (await asyncio.wait_for(held, 20.0)).output == "done"
        await asyncio.to_thread(executor.shutdown)
    assert not ran  # the queued work was dropped, not run late


async def test_an_async_tool_timed_out_while_its_result_waited_for_a_thread_did_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its large result is converted in a worker thread; still queued at the timeout,
    # that thread never ran, but the function did: the error must not say otherwise.
    executor = _DaemonExecutor(1, "agcore-test")
    monkeypatch.setattr(_aio, "_executor", executor)
    registry = ToolRegistry()
    release, holding = threading.Event(), threading.Event()

    @registry.tool
    def hold() -> str:
        """Holds the pool's only thread."""
        holding.set()
        release.wait(30.0)
        return "done"

    @registry.tool(timeout=0.2)
    async def export() -> list[dict[str, int]]:
        """A large result."""
        return [{"id": n} for n in range(50_000)]

    held = asyncio.ensure_future(registry.invoke("hold", {}))
    try:
        assert await asyncio.to_thread(holding.wait, 20.0)
        invocation = await registry.invoke("export", {})
        assert isinstance(invocation.error, ToolTimeoutError)
        assert "never started" not in str(invocation.error)
        assert invocation.may_have_run is True
    finally:
        release.set()
        assert (await asyncio.wait_for(held, 20.0)).output == "done"
        await asyncio.to_thread(executor.shutdown)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_a_pool_of_its_own() -> None:
    # The child has none of the parent's worker threads; with the parent's pool it
    # would queue work that no thread ever takes.
    code = textwrap.dedent(
        """
        import asyncio, os, sys
        from agcore_tools._aio import _DaemonExecutor, run_sync
        assert asyncio.run(run_sync(lambda: 1)) == 1  # the parent's pool now has a thread
        pid = os.fork()
        if pid == 0:
            answer = asyncio.run(asyncio.wait_for(run_sync(lambda: 2), 10.0))
            os._exit(0 if answer == 2 else 1)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


async def test_a_cancel_in_the_iteration_the_work_ends_is_not_lost() -> None:
    """asyncio.wait_for on 3.10 returned the result and dropped the cancel (gh-86296):
    a cancelled tool loop then polled an MCP task for its whole timeout."""
    loop = asyncio.get_running_loop()
    work: asyncio.Future[int] = loop.create_future()
    after: list[str] = []

    async def caller() -> None:
        await with_timeout(work, 5.0)
        after.append("went on")  # only if the cancel was lost
        await asyncio.sleep(5.0)

    task = asyncio.ensure_future(caller())
    await asyncio.sleep(0)  # the caller now waits on the work
    work.set_result(1)
    task.cancel()  # in the same iteration as the result
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2.0)
    assert after == []


async def test_with_timeout_raises_timeout_error_and_cancels_the_work() -> None:
    cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(5.0)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await with_timeout(slow(), 0.05)
    assert cancelled.is_set()
    assert await with_timeout(asyncio.sleep(0, result=7), 1.0) == 7


async def test_a_cancel_as_a_tool_call_ends_within_its_timeout_is_not_lost() -> None:
    """The tool-call timeout (``_execute.guarded``) keeps a cancel that arrives in the
    step the tool returns, on 3.10 too, where ``asyncio.wait_for`` returned the
    invocation and the cancelled caller went on."""
    registry = ToolRegistry()
    callers: list[asyncio.Task[None]] = []
    after: list[str] = []

    @registry.tool
    async def finish() -> str:
        """Cancel the caller, then return at once."""
        callers[0].cancel()
        return "done"

    async def caller() -> None:
        await registry.invoke_all([("finish", {})], timeout=5.0)
        # From 3.11 the tool runs in this task, so a kept cancel lands at the next
        # await at the latest; a lost one never does.
        await asyncio.sleep(0)
        after.append("went on")

    callers.append(asyncio.ensure_future(caller()))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(callers[0], 2.0)
    assert after == []


@pytest.mark.timeout(30)
async def test_an_idle_worker_keeps_no_reference_to_its_last_result() -> None:
    class Answer:
        """A large result, as a tool returns one."""

    freed = threading.Event()

    def answer() -> Answer:
        made = Answer()
        weakref.finalize(made, freed.set)
        return made

    executor = _DaemonExecutor(1, "agcore-idle")
    loop = asyncio.get_running_loop()
    try:
        got = await loop.run_in_executor(executor, answer)
        assert isinstance(got, Answer)
        del got
        gc.collect()
        # The worker drops it as it goes idle; before, it held it until its next call.
        assert await asyncio.to_thread(freed.wait, 5.0)
    finally:
        await asyncio.to_thread(executor.shutdown)


@pytest.mark.timeout(30)
async def test_a_worker_lets_go_of_its_call_before_the_caller_wakes() -> None:
    # A cached tool's result was dumped in a worker thread from a closure holding it:
    # the thread kept the closure until just after it woke the caller, so a caller
    # measuring at once (a busy machine) found one result more than its cache's bound.
    class Payload:
        """What a call takes: arguments, or a closure's values."""

    payload = Payload()
    freed = weakref.ref(payload)
    gate = threading.Event()
    seen: list[bool] = []

    def take(value: Payload) -> str:
        assert gate.wait(10)
        return type(value).__name__

    executor = _DaemonExecutor(1, "agcore-let-go")
    try:
        future = executor.submit(take, payload)
        del payload
        # Done callbacks run in the worker, as it sets the result: what the caller sees.
        future.add_done_callback(lambda _: seen.append(freed() is None))
        gate.set()
        assert await asyncio.wrap_future(future) == "Payload"
        assert seen == [True]
    finally:
        await asyncio.to_thread(executor.shutdown)
