"""MCP Tasks (McpClient.start_task, McpClient.task, McpTask) against real servers:
server-everything's simulate-research-query (2025-11-25), and servers/task_server.py,
an MCP SDK server with a file-backed task store, in both protocol eras.

Nothing is faked: every server is a process of its own, and every wait is bounded (a
deadline, or the client's timeout); nothing sleeps to let something happen."""

from __future__ import annotations

import asyncio
import http.client
import inspect
import itertools
import json
import logging
import os
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import (
    Breaker,
    CycleConfig,
    LlmCycle,
    McpClient,
    StdioTransport,
    StreamableHttpTransport,
    ToolContext,
    ToolExecutionError,
    ToolPolicy,
    ToolProgress,
    ToolRegistry,
    ToolTimeoutError,
)
from agcore_tools.error import (
    LlmError,
    McpError,
    McpInputRequiredError,
    McpTimeoutError,
    McpUsageError,
)
from agcore_tools.mcp import McpTask, McpTaskStatus
from agcore_tools.mcp._tasks import give_up
from agcore_tools.testing import ScriptedChatServer as S
from tests._forkserver import ForkedProcess, spawn

from .conftest import ROOT, SERVERS, HttpServer, end_test_server
from .test_reference_servers import everything_stdio  # noqa: F401 - a fixture

pytestmark = pytest.mark.timeout(90)

TASK_SERVER = SERVERS / "task_server.py"
ERAS = [
    pytest.param({"protocol": "legacy"}, "2025-11-25", id="2025-11-25"),
    pytest.param({"tasks": True}, "2026-07-28", id="2026-07-28"),
]


class TaskServer:
    """task_server.py over Streamable HTTP on a socket this process keeps, so it can be
    killed and started again at the same address (with its store, or without)."""

    def __init__(self, store: Path, *options: str) -> None:
        self.store = store
        self.options = options
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.proc = self._spawn()

    def _spawn(self, *extra: str) -> ForkedProcess:
        fd = self.sock.fileno()
        args = ["--http-fd", str(fd), "--store", str(self.store), *self.options, *extra]
        proc = spawn([sys.executable, str(TASK_SERVER), *args], pass_fds=[fd])
        self.proc = proc
        # The socket already listens: the kernel queues this until uvicorn accepts it.
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request("GET", "/")
            connection.getresponse().read()
        finally:
            connection.close()
        return proc

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def restart(self, *extra: str) -> None:
        """Kill the server (a crash) and start it again on the same socket."""
        self.proc.kill()
        self.proc.wait(10)
        self._spawn(*extra)

    def stop(self) -> None:
        end_test_server(self.proc)

    def client(self, name: str = "ci", **options: Any) -> McpClient:
        options.setdefault("timeout", 15)
        return McpClient(name, StreamableHttpTransport(self.url), **options)

    def counts(self) -> dict[str, Any]:
        """The calls and polls the server recorded (read from its store file)."""
        data: dict[str, Any] = json.loads(self.store.read_text())
        return data


@pytest.fixture
def task_server(tmp_path: Path) -> Iterator[TaskServer]:
    server = TaskServer(tmp_path / "tasks.json", "--poll-ms", "100")
    try:
        yield server
    finally:
        server.stop()
        server.sock.close()


async def wait_for_status(task: McpTask, wanted: str, within: float = 10.0) -> McpTaskStatus:
    """Poll ``task.status()`` until it is ``wanted`` (bounded)."""
    deadline = time.monotonic() + within
    while True:
        status = await task.status()
        if status.status == wanted or time.monotonic() > deadline:
            assert status.status == wanted, status
            return status
        await asyncio.sleep(0.05)


# -- the SDK seam ----------------------------------------------------------------------


def test_the_sdk_internals_the_2025_create_call_uses() -> None:
    """_task_wire.send_unvalidated works around the SDK validating a 2025-11-25
    CreateTaskResult as a CallToolResult, through two private names. This fails when
    an SDK upgrade changes them, or fixes the validation (then the seam can go)."""
    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import Dispatcher
    from mcp_types import methods as _methods
    from pydantic import ValidationError

    created = {"task": {"taskId": "t", "status": "working", "createdAt": "x"}}
    with pytest.raises(ValidationError):
        _methods.validate_server_result("tools/call", "2025-11-25", created)
    source = inspect.getsource(ClientSession.send_request)
    assert "self._stamp(data, opts)" in source
    assert 'self._dispatcher.send_raw_request(method, data.get("params"), opts)' in source
    assert list(inspect.signature(Dispatcher.send_raw_request).parameters) == [
        "self",
        "method",
        "params",
        "opts",
    ]


# -- server-everything (2025-11-25) ------------------------------------------------------


async def test_server_everything_runs_two_tasks_at_once_one_asking_a_question(
    everything_stdio: StdioTransport,  # noqa: F811 - the imported fixture
) -> None:
    """2025-11-25, simulate-research-query twice on one connection (its four 1 s stages
    run side by side): a plain task, and one whose elicitation/create reaches the
    client's handler while the client waits in tasks/result."""
    asked: list[str] = []

    async def clarify(context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        asked.append(params.message)
        return ElicitResult(action="accept", content={"interpretation": "ocean tides"})

    seen: list[McpTaskStatus] = []
    seen_asking: list[McpTaskStatus] = []
    async with McpClient(
        "everything", everything_stdio, timeout=30, elicitation_handler=clarify
    ) as client:
        assert client.protocol_version == "2025-11-25"
        task = await client.start_task("simulate-research-query", {"topic": "tides"}, ttl=60)
        assert task.task_id and task.protocol == "2025-11-25"
        assert task.last_status is not None and task.last_status.poll_interval == 1.0
        asking = await client.start_task(
            "simulate-research-query", {"topic": "tides", "ambiguous": True}
        )
        report, clarified = await asyncio.gather(
            task.result(timeout=30, on_status=seen.append),
            asking.result(timeout=30, on_status=seen_asking.append),
        )
        assert (await task.status()).terminal
    assert "Research Report: tides" in report
    assert seen[0].status == "working" and seen[-1].status == "completed"
    assert len({s.message for s in seen}) >= 2  # its stages' messages
    assert "Research Report: tides (ocean tides)" in clarified
    assert len(asked) == 1 and "tides" in asked[0]
    statuses = [s.status for s in seen_asking]
    assert "input_required" in statuses and statuses[-1] == "completed"


async def test_a_timed_out_wait_on_a_question_leaves_the_task_running(
    everything_stdio: StdioTransport,  # noqa: F811 - the imported fixture
) -> None:
    """2025-11-25: result(timeout=) cut short while tasks/result waits on the person's
    answer is a timeout (the task runs on), not a failure of the task."""
    asked = asyncio.Event()
    answer = asyncio.Event()

    async def person(context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        asked.set()
        await asyncio.wait_for(answer.wait(), 30)
        return ElicitResult(action="accept", content={"interpretation": "snakes"})

    async with McpClient(
        "everything", everything_stdio, timeout=30, elicitation_handler=person
    ) as client:
        task = await client.start_task(
            "simulate-research-query", {"topic": "python", "ambiguous": True}
        )
        await wait_for_status(task, "input_required")
        with pytest.raises(McpTimeoutError, match=r"still input_required after 1 s; it runs on"):
            await task.result(timeout=1)
        assert asked.is_set()  # the question reached the handler through tasks/result
        assert (await task.status()).status == "input_required"
        answer.set()
        assert "Research Report: python (snakes)" in await task.result(timeout=30)


async def test_in_the_loop_a_2025_tasks_question_without_a_handler_is_declined(
    everything_stdio: StdioTransport,  # noqa: F811 - the imported fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What the guide says: a 2025-11-25 task's question comes inside tasks/result,
    which the loop cannot hold, so without an elicitation_handler it is declined (the
    run does not pause on it) and the task goes on."""
    args = {"topic": "python", "ambiguous": True}
    script = [S.reply_tool_calls([("simulate-research-query", args, "c1")]), S.reply_text("ok")]
    with S(script) as model:
        async with McpClient("everything", everything_stdio, timeout=30) as client:
            registry = ToolRegistry()
            registry.register_all(client.into_tools())
            cycle = LlmCycle(CycleConfig("m"), client=model.client(timeout=10))
            try:
                with caplog.at_level(logging.WARNING, logger="agcore_tools.mcp"):
                    response = await cycle.submit_with_tools("research", registry)
            finally:
                await cycle.client.close()
        last = model.requests[-1].json["messages"]
    assert response.pending == () and response.text == "ok"
    [told] = [m["content"] for m in last if m["role"] == "tool"]
    assert "User declined" in told and "no elicitation_handler" in caplog.text


# -- our server, both eras ------------------------------------------------------------


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_start_follow_and_get_the_result(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    statuses: list[McpTaskStatus] = []

    async def on_status(status: McpTaskStatus) -> None:  # async callbacks work too
        statuses.append(status)

    async with task_server.client(**options) as client:
        assert client.protocol_version == era
        task = await client.start_task("build", {"seconds": 1.5, "label": "app"}, ttl=120)
        assert task.protocol == era and task.server_name == "ci" and task.tool_name == "build"
        assert (await task.status()).status == "working"
        value = await task.result(timeout=20, on_status=on_status)
        assert value == {"label": "app", "seconds": 1.5}
        messages = [s.message for s in statuses]
        assert messages[-1] == "done" and statuses[-1].status == "completed"
        steps = [m for m in messages if m and m.startswith("step")]
        assert len(steps) >= 2 and steps == sorted(steps)  # 0.5 s a step, polled ~0.1 s
        final = await task.status()
        assert final.terminal and final.status == "completed" and final.created_at
        assert final.poll_interval == 0.1
        if era == "2025-11-25":
            assert final.ttl == 120.0  # the ttl asked for
    assert task_server.counts()["calls"] == {"build": 1}


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_the_credentials_a_failed_task_quotes_are_masked(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    # The error of a failed task was made after its tasks/get returned, outside the
    # request whose errors are masked: on 2026-07-28, whose failure comes with the
    # task, a server quoting the token it was sent had it shown, in the message that
    # the model reads too.
    secret = "ghp_S3CRETt0ken00"
    transport = StreamableHttpTransport(task_server.url, {"Authorization": f"Bearer {secret}"})
    async with McpClient("ci", transport, timeout=15, **options) as client:
        failing = await client.start_task("fail_build")
        with pytest.raises(McpError) as info:
            await failing.result(timeout=10)
    error = info.value
    shown = "".join(traceback.format_exception(error))
    assert secret not in shown, shown
    assert "failed: the compiler crashed (the registry refused ***)" in str(error)
    assert error.is_recoverable() and error.may_have_run is True


async def test_a_plain_call_run_as_a_failed_task_has_the_credentials_it_quotes_masked(
    task_server: TaskServer,
) -> None:
    # On 2026-07-28 the server may run a plain tools/call as a task; its failure comes
    # back as an isError result, whose text the model reads: it showed the token.
    secret = "ghp_S3CRETt0ken00"
    transport = StreamableHttpTransport(task_server.url, {"Authorization": f"Bearer {secret}"})
    async with McpClient("ci", transport, timeout=15, tasks=True) as client:
        with pytest.raises(ToolExecutionError) as info:
            await client.call_tool("fail_build")
    shown = "".join(traceback.format_exception(info.value))
    assert secret not in shown, shown
    assert "failed: the compiler crashed (the registry refused ***)" in str(info.value)


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_failed_tasks_status_message_has_its_invisible_characters_escaped(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    # The status message of a failed task is the server's words in the library's
    # error: its bidi override and zero-width characters made it read otherwise.
    reason = "disk \u202elluf\u202c\u200b on 東京-1\u2028"
    shown = "disk \\u202elluf\\u202c\\u200b on 東京-1\\u2028"
    async with task_server.client(**options) as client:
        failing = await client.start_task("fail_build", {"reason": reason})
        with pytest.raises(McpError) as info:
            await failing.result(timeout=10)
        assert (await failing.status()).message == reason  # the app's data, as sent
        plain: ToolExecutionError | None = None
        if era == "2026-07-28":  # a plain call the server runs as a task
            with pytest.raises(ToolExecutionError) as caught:
                await client.call_tool("fail_build", {"reason": reason})
            plain = caught.value
    assert f"of tool 'fail_build' failed: {shown}; the call may have run" in str(info.value)
    if plain is not None:
        assert str(plain).endswith(f"failed: {shown}")


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_cancel_failed_and_unknown(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    async with task_server.client(**options) as client:
        task = await client.start_task("build", {"seconds": 60, "label": "long"})
        answered = await task.cancel()
        if era == "2025-11-25":
            assert answered is not None and answered.status == "cancelled"
        else:
            assert answered is None  # an acknowledgement only
        await wait_for_status(task, "cancelled")
        with pytest.raises(ToolExecutionError, match="was cancelled"):
            await task.result(timeout=10)

        failing = await client.start_task("fail_build")
        with pytest.raises(McpError, match="of tool 'fail_build' failed: the compiler crashed"):
            await failing.result(timeout=10)
        assert (await failing.status()).status == "failed"

        with pytest.raises(McpError, match="task 'nope' no longer exists on server 'ci'"):
            await client.task("nope").status()

        if era == "2026-07-28":  # input it cannot give (tasks/update): said, not waited for
            asking = await client.start_task("ask", {"question": "which branch?"})
            with pytest.raises(McpError, match=r"waits for input \(q1\)"):
                await asking.result(timeout=20)
            assert (await asking.status()).status == "input_required"


async def test_on_2026_a_tasks_question_answered_with_a_mapping_is_sent(
    task_server: TaskServer,
) -> None:
    # The SDK takes a handler's answer as a mapping of the result's shape; a task's
    # question (tasks/update) read it as a model instead and failed with AttributeError.
    def colour(context: Any, params: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"answer": "green"}}

    async with task_server.client(tasks=True, elicitation_handler=colour) as client:
        task = await client.start_task("ask", {"question": "Task?"})
        assert await task.result(timeout=10) == "accept: green"


async def test_on_2026_a_tasks_question_goes_to_the_elicitation_handler(
    task_server: TaskServer, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_types import ElicitResult

    asked: list[str] = []

    async def colour(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"answer": "blue"})

    # Far under the 15 s timeout: the handler answers at once (tasks/update).
    async with task_server.client(tasks=True, elicitation_handler=colour) as client:
        started = time.monotonic()
        assert await client.call_tool("ask", {"question": "Plain?"}) == "accept: blue"
        task = await client.start_task("ask", {"question": "Task?"})
        assert await task.result(timeout=10) == "accept: blue"
        assert time.monotonic() - started < 10
    assert asked == ["Plain?", "Task?"]
    # Without a handler, a plain call's task question is declined (as any question
    # a plain call gets), and said in the log, not waited on until the timeout.
    async with task_server.client(tasks=True) as client:
        with caplog.at_level(logging.WARNING, logger="agcore_tools.mcp"):
            assert await client.call_tool("ask", {"question": "Nobody?"}) == "decline: "
    assert "no elicitation_handler" in caplog.text and "Nobody?" in caplog.text


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_tool_whose_task_support_is_optional(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    async with task_server.client(**options) as client:
        task = await client.start_task("report", {"n": 3})
        assert await task.result(timeout=10) == {"n": 3}
        if era == "2025-11-25":
            assert task.task_id is not None  # asked for a task, got one
        else:
            # The server decides on 2026-07-28, and this one answers at once.
            assert task.task_id is None
            assert (await task.status()).status == "completed"
            assert await task.cancel() is None
            with pytest.raises(McpUsageError, match="no task to save"):
                task.to_json()


async def test_poll_interval_is_honoured(tmp_path: Path) -> None:
    server = TaskServer(tmp_path / "tasks.json", "--poll-ms", "300")
    try:
        async with server.client(tasks=True) as client:
            task = await client.start_task("build", {"seconds": 2.0, "label": "slow"})
            await task.result(timeout=20)
        polls = server.counts()["gets"][task.task_id]
    finally:
        server.stop()
        server.sock.close()
    gaps = [b - a for a, b in itertools.pairwise(polls)]
    # The client waits 20, 40, 80, 160 ms, then the server's 300 ms from there on: each
    # gap between two polls the server saw is at least that (timing can only add).
    waits = [min(0.02 * 2**i, 0.3) for i in range(len(gaps))]
    assert all(gap >= wait - 0.002 for gap, wait in zip(gaps, waits, strict=True)), gaps
    assert len(polls) <= 2.0 / 0.3 + 6, gaps


async def test_plain_calls_and_the_opt_in(
    task_server: TaskServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Without tasks=True a 2026-07-28 session stays as it was: no task result shape.
    async with task_server.client() as client:
        assert client.protocol_version == "2026-07-28"
        conn = client._session.conn
        assert conn is not None and conn.call_tool.__qualname__.startswith("tool_caller")
        assert await client.call_tool("plain_echo", {"text": "hi"}) == {"result": "hi"}
        with pytest.raises(McpError, match=r"McpClient\(\.\.\., tasks=True\)"):
            await client.start_task("build", {"seconds": 1, "label": "x"})
        with pytest.raises(McpError, match="runs only as a task"):
            await client.call_tool("build", {"seconds": 1, "label": "x"})
    # With it, a plain call the server runs as a task still returns the tool's value.
    async with task_server.client(tasks=True) as client:
        task = await client.start_task("build", {"seconds": 0.3, "label": "h"})
        # The server checks Mcp-Name on tasks/*: the SDK's own request type has no
        # name_param, so it goes without the header, and is refused.
        from mcp.shared.exceptions import MCPError
        from mcp_types import HEADER_MISMATCH, GetTaskRequest, GetTaskRequestParams

        from agcore_tools.mcp._task_wire import RawResult

        sdk = client._session.client
        assert sdk is not None
        with pytest.raises(MCPError) as refused:
            bare = GetTaskRequest(params=GetTaskRequestParams(task_id=str(task.task_id)))
            await sdk.session.send_request(bare, RawResult)
        assert refused.value.code == HEADER_MISMATCH
        assert (await task.status()).task_id == task.task_id  # ours carries it
        assert await client.call_tool("build", {"seconds": 0.3, "label": "p"}) == {
            "label": "p",
            "seconds": 0.3,
        }
        assert await client.call_tool("plain_echo", {"text": "hi"}) == {"result": "hi"}
        # The SDK client's own call_tool (which _tool_caller falls back on for
        # input_required rounds) resolves a task through the extension's claim.
        resolved = await sdk.call_tool("build", {"seconds": 0.2, "label": "sdk"})
        assert resolved.structured_content == {"label": "sdk", "seconds": 0.2}
        # A plain call cut short by its timeout leaves a task nobody has a handle of: it
        # is cancelled (it ran on, unattached, and a WARNING gave its id).
        with caplog.at_level(logging.WARNING, "agcore_tools.mcp"), pytest.raises(McpTimeoutError):
            await client.call_tool("build", {"seconds": 30, "label": "t"}, timeout=0.5)
        [cut] = [i for i, t in task_server.counts()["tasks"].items() if t["args"]["label"] == "t"]
        assert task_server.counts()["cancels"] == [cut]
        assert (await client.task(cut).status()).status == "cancelled"
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        # A task of one era is not followed on the other's wire.
        era_2025 = client.task({"server": "ci", "task_id": "t", "protocol": "2025-11-25"})
        with pytest.raises(McpUsageError, match="re-attach from a client with the same"):
            await era_2025.status()
    async with task_server.client(protocol="legacy") as client:
        with pytest.raises(McpError, match="does not support tasks"):
            await client.start_task("plain_echo", {"text": "x"})
        with pytest.raises(McpUsageError, match="started on MCP server 'elsewhere'"):
            client.task({"server": "elsewhere", "task_id": "t"})
        assert isinstance(McpUsageError("x"), ValueError)


async def test_a_server_without_tasks_is_refused() -> None:
    fixture = HttpServer()
    try:
        for options in ({"protocol": "legacy"}, {"tasks": True}):
            client = McpClient("plain", StreamableHttpTransport(fixture.url), timeout=15, **options)
            async with client:
                with pytest.raises(McpError, match="cannot start tool 'echo' as a task"):
                    await client.start_task("echo", {"text": "x"})
    finally:
        fixture.stop()


# -- re-attaching, restarts, timeouts ---------------------------------------------------

REATTACH = """
import asyncio, json, sys
from agcore_tools import McpClient, StreamableHttpTransport
async def main():
    saved = json.loads(sys.argv[2])
    async with McpClient("ci", StreamableHttpTransport(sys.argv[1]), timeout=15,
                         protocol=sys.argv[3]) as client:
        print(json.dumps(await client.task(saved).result(timeout=20)))
asyncio.run(main())
"""


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_reattach_from_a_new_client_and_another_process(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    async with task_server.client(**options) as first:
        task = await first.start_task("build", {"seconds": 1.0, "label": "again"})
        saved = task.to_json()
    assert json.loads(json.dumps(saved)) == saved
    assert saved == {"server": "ci", "task_id": task.task_id, "tool": "build", "protocol": era}

    async with task_server.client(**options) as second:
        again = second.task(saved)
        assert await again.result(timeout=20) == {"label": "again", "seconds": 1.0}
        assert (await second.task(saved["task_id"]).status()).status == "completed"

    protocol = options.get("protocol", "auto")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        REATTACH,
        task_server.url,
        json.dumps(saved),
        protocol,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, _ = await asyncio.wait_for(child.communicate(), 60)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert child.returncode == 0
    assert json.loads(out) == {"label": "again", "seconds": 1.0}
    assert task_server.counts()["calls"] == {"build": 1}  # one tools/call in all


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_restarted_server(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    async with task_server.client(**options) as client:
        kept = await client.start_task("build", {"seconds": 1.5, "label": "kept"})
        task_server.restart()  # the same store: the task lives on
        assert await kept.result(timeout=20) == {"label": "kept", "seconds": 1.5}

        lost = await client.start_task("build", {"seconds": 30, "label": "lost"})
        task_server.restart("--forget")
        started = time.monotonic()
        with pytest.raises(McpError, match=f"task '{lost.task_id}' no longer exists"):
            await lost.result(timeout=30)
        assert time.monotonic() - started < 10
    assert task_server.counts()["calls"] == {}  # the forgetful server saw none


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_timeout_leaves_the_task_running(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    async with task_server.client(**options) as client:
        task = await client.start_task("build", {"seconds": 3, "label": "later"})
        started = time.monotonic()
        with pytest.raises(McpTimeoutError, match=r"still working after 0\.3 s; it runs on"):
            await task.result(timeout=0.3)
        assert time.monotonic() - started < 2.0  # the deadline, plus one poll's answer
        assert (await task.status()).status == "working"
        assert await task.result(timeout=20) == {"label": "later", "seconds": 3}
    assert task_server.counts()["calls"] == {"build": 1}


async def _started(registry: ToolRegistry, args: dict[str, Any]) -> asyncio.Future[Any]:
    """``registry.invoke("build", args)`` running, once its task has been created (its
    first status came)."""
    polled = asyncio.Event()
    ctx = ToolContext(on_event=lambda e: isinstance(e, ToolProgress) and polled.set())
    call = asyncio.ensure_future(registry.invoke("build", args, ctx))
    await asyncio.wait_for(polled.wait(), 20)
    return call


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_task_call_given_up_on_cancels_its_task(
    task_server: TaskServer, options: dict[str, Any], era: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A registry call run as a task and cut off by its timeout, or cancelled by its
    caller, leaves no handle to anyone: the client cancels the task (tasks/cancel), which
    ran on, unattached, until it expired. McpTask.result(timeout=) leaves it to its
    holder (test_a_timeout_leaves_the_task_running)."""
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with task_server.client(**options) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["build"]))
        [cut] = await registry.invoke_all(
            [("build", {"seconds": 30, "label": "cut"}, "c1")], timeout=0.5
        )
        assert isinstance(cut.error, ToolTimeoutError)
        call = await _started(registry, {"seconds": 30, "label": "dropped"})
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        made = {t["args"]["label"]: i for i, t in task_server.counts()["tasks"].items()}
        assert task_server.counts()["cancels"] == [made["cut"], made["dropped"]]
        for task_id in made.values():
            assert (await client.task(task_id).status()).status == "cancelled"
    # A call with no call id that outlasts the client's timeout: its error said the task
    # "runs on (result() again waits for it, cancel() stops it)", to a caller with no
    # handle, of a task the client had just cancelled.
    async with task_server.client(timeout=1, **options) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["build"]))
        outlasting = await registry.invoke("build", {"seconds": 30, "label": "outlasting"})
        task_id = task_server.counts()["cancels"][-1]
        assert str(outlasting.error) == (
            f"MCP server 'ci': task '{task_id}' of tool 'build' still working when its call "
            "timed out; the client cancelled it (tasks/cancel)"
        )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_task_given_up_on_runs_on_where_the_server_offers_no_cancel(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 2025-11-25 server without the tasks.cancel capability is sent no tasks/cancel:
    the task runs on, and a WARNING names it. A task that has ended is not cancelled."""
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    server = TaskServer(tmp_path / "tasks.json", "--poll-ms", "100", "--no-cancel")
    try:
        async with server.client(protocol="legacy") as client:
            registry = ToolRegistry()
            registry.register_all(client.into_tools(tasks=["build"]))
            [cut] = await registry.invoke_all(
                [("build", {"seconds": 30, "label": "cut"}, "c1")], timeout=0.5
            )
            assert isinstance(cut.error, ToolTimeoutError)
            [task_id] = server.counts()["tasks"]
            assert (await client.task(task_id).status()).status == "working"
            done = await client.start_task("build", {"seconds": 0.1, "label": "done"})
            assert await done.result(timeout=20) == {"label": "done", "seconds": 0.1}
            assert not await give_up(done, "its call timed out")
        assert "cancels" not in server.counts()
    finally:
        server.stop()
        server.sock.close()
    [warned] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"task '{task_id}' of tool 'build' (its call timed out) runs on" in warned
    assert "not cancelled, as the server does not offer tasks/cancel" in warned


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_tasks_cancel_never_answered_holds_the_caller_a_second_at_most(
    tmp_path: Path, options: dict[str, Any], era: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    server = TaskServer(tmp_path / "tasks.json", "--poll-ms", "100", "--cancel-delay", "30")
    try:
        async with server.client(**options) as client:
            registry = ToolRegistry()
            registry.register_all(client.into_tools(tasks=["build"]))
            call = await _started(registry, {"seconds": 30, "label": "slow"})
            started = time.monotonic()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            waited = time.monotonic() - started
            assert 0.9 <= waited < 3.0, waited  # GIVE_UP_WAIT (1 s), and the loop's latency
            assert client.connected  # a late answer costs nothing more
            assert await client.call_tool("plain_echo", {"text": "hi"}) == {"result": "hi"}
    finally:
        server.stop()
        server.sock.close()
    [warned] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "(its call was cancelled) may run on: its tasks/cancel got no answer within 1 s" in (
        warned
    )


async def test_a_registry_call_whose_task_waits_for_input_gives_its_caller_the_task(
    task_server: TaskServer,
) -> None:
    """2026-07-28: a registry call with no call id (a direct invoke()) whose task waits
    for input the client has no handler for raises McpInputRequiredError. It said
    "answer it with McpTask.answer()" to a caller with no McpTask; it carries the task's
    handle now, which answers it. The task is not cancelled: the caller holds it."""
    async with task_server.client(tasks=True) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["ask"]))
        asked = (await registry.invoke("ask", {"question": "Colour?"})).error
        assert isinstance(asked, McpInputRequiredError), asked
        [task_id] = task_server.counts()["tasks"]
        assert str(asked) == (
            f"MCP server 'ci': task '{task_id}' of tool 'ask' waits for input (q1) on the "
            "server; answer it with McpTask.answer(), then wait again with result() "
            "(McpClient.task(error.task) gives the McpTask)"
        )
        assert asked.task is not None
        task = client.task(asked.task)
        assert task.tool_name == "ask"
        await task.answer({"q1": {"action": "accept", "content": {"answer": "blue"}}})
        assert await task.result(timeout=10) == "accept: blue"
    assert task_server.counts()["calls"] == {"ask": 1}
    assert "cancels" not in task_server.counts()


async def test_a_task_waiting_for_input_is_no_failure_to_the_tools_breaker(
    task_server: TaskServer,
) -> None:
    """2026-07-28: a task that asks the user a question counted as a failure of its
    tool: a breaker of one failure opened at the first question, and the tool was no
    longer offered. The question decides nothing about whether the server works."""
    async with task_server.client(tasks=True) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["ask"]))
        breaker = Breaker(failures=1, window=60.0, cool_down=60.0)
        registry.set_policy(ToolPolicy(breaker=breaker), category="mcp:ci")
        asked = (await registry.invoke("ask", {"question": "Colour?"})).error
        assert isinstance(asked, McpInputRequiredError) and asked.task is not None
        assert registry.unavailable_tools() == []
        task = client.task(asked.task)
        await task.answer({"q1": {"action": "accept", "content": {"answer": "blue"}}})
        assert await task.result(timeout=10) == "accept: blue"


async def test_a_loop_stopped_by_a_tasks_question_it_cannot_pause_on_gives_the_task(
    task_server: TaskServer,
) -> None:
    """2026-07-28: in the loop, a task's question that is no form (here a completion,
    with no sampling_handler) cannot pause the run: it stops with the task's
    McpInputRequiredError as its cause, which now carries the task's handle."""
    script = [S.reply_tool_calls([("sample", {"prompt": "hi"}, "c1")]), S.reply_text("ok")]
    with S(script) as model:
        async with task_server.client(tasks=True) as client:
            registry = ToolRegistry()
            registry.register_all(client.into_tools(tasks=["sample"]))
            cycle = LlmCycle(CycleConfig("m"), client=model.client(timeout=10))
            try:
                with pytest.raises(LlmError) as stopped:
                    await cycle.submit_with_tools("sample it", registry)
            finally:
                await cycle.client.close()
            asked = stopped.value.__cause__
            assert isinstance(asked, McpInputRequiredError) and asked.task is not None
            task = client.task(asked.task)
            await task.answer(
                {
                    "s1": {
                        "role": "assistant",
                        "model": "m",
                        "content": {"type": "text", "text": "hello"},
                    }
                }
            )
            assert await task.result(timeout=10) == "sampled: hello"


async def test_a_plain_call_whose_task_asks_what_no_one_answers_cancels_it(
    task_server: TaskServer,
) -> None:
    """2026-07-28: a plain call_tool() the server runs as a task that asks for a
    completion, from a client with no sampling_handler, failed naming the task, which
    waited on with no handle to anyone. The client cancels it now, and the error says
    so."""
    async with task_server.client(tasks=True) as client:
        with pytest.raises(McpError) as info:
            await client.call_tool("sample", {"prompt": "hi"})
        assert client.connected
    counted = task_server.counts()
    [task_id] = counted["cancels"]
    assert counted["tasks"][task_id]["cancelled_at"] is not None
    error = str(info.value)
    assert error.startswith("MCP server 'ci': ") and f"task '{task_id}'" in error
    assert "(sampling/createMessage), which this client cannot " in error
    assert "; the client cancelled it (tasks/cancel); the call may have run" in error
    assert "picks it up" not in error


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("lost_build", "which could not be followed (the task store is "),
        ("shapeless_build", "which could not be followed (not a task: {"),
    ],
    ids=["refused", "of-no-task-shape"],
)
async def test_a_plain_call_whose_task_cannot_be_polled_leaves_it_to_be_picked_up(
    task_server: TaskServer, tool: str, said: str
) -> None:
    """2026-07-28: a refused tasks/get (a proxy's 503 or 429 answers so too) does not
    mean the task failed: it is left running, and the error says how to pick it up. An
    answer of no task's shape failed the call with the ValueError's text, naming no
    task to pick up."""
    async with task_server.client(tasks=True) as client:
        with pytest.raises(McpError) as info:
            await client.call_tool(tool, {"label": "x"})
        assert client.connected
    counted = task_server.counts()
    assert "cancels" not in counted  # the server counts none until one comes
    [task_id] = counted["tasks"]
    assert counted["tasks"][task_id]["cancelled_at"] is None
    error = str(info.value)
    assert said in error
    assert f"McpClient.task('{task_id}') picks it up" in error


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_over_stdio(tmp_path: Path, options: dict[str, Any], era: str) -> None:
    transport = StdioTransport(
        sys.executable, [str(TASK_SERVER), "--stdio", "--store", str(tmp_path / "t.json")]
    )
    async with McpClient("ci", transport, timeout=15, **options) as client:
        assert client.protocol_version == era
        task = await client.start_task("build", {"seconds": 0.3, "label": "io"})
        assert await task.result(timeout=20) == {"label": "io", "seconds": 0.3}


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_servers_task_id_and_status_are_escaped_and_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, options: dict[str, Any], era: str
) -> None:
    # The task's id and status word are the server's own: a newline in them forged a
    # record in the library's log (the warning about a task left running), and a
    # terminal escape or a bidi override made an error read otherwise.
    tail = "\n2025-01-01 CRITICAL agcore_tools.registry: forged\x1b[2J"
    status = "working\u202e" + "x" * 300
    args = {"tail": tail, "status": status}
    transport = StdioTransport(
        sys.executable, [str(TASK_SERVER), "--stdio", "--store", str(tmp_path / "t.json")]
    )
    async with McpClient("ci", transport, timeout=15, **options) as client:
        task = await client.start_task("odd_build", args)
        assert task.task_id is not None and task.task_id.endswith(tail)  # the app's, as sent
        with pytest.raises(McpTimeoutError) as info:
            await task.result(timeout=0.3)
        if era == "2026-07-28":  # a plain call the server runs as a task, given up on
            with (
                caplog.at_level(logging.DEBUG, "agcore_tools.mcp"),
                pytest.raises(McpTimeoutError),
            ):
                await client.call_tool("odd_build", args, timeout=0.5)
    shown = "\\n2025-01-01 CRITICAL agcore_tools.registry: forged\\x1b[2J'"
    message = str(info.value)
    assert f"{shown} of tool 'odd_build' still working\\u202exxx" in message, message
    assert "... [cut 208 chars] after 0.3 s" in message, message
    if era == "2026-07-28":
        said = [r.getMessage() for r in caplog.records if "tasks/cancel" in r.getMessage()]
        assert len(said) == 1 and f"{shown} of tool 'odd_build' (its call" in said[0], said
        assert "\n" not in said[0] and "\x1b" not in said[0]


@pytest.mark.parametrize(("options", "era"), ERAS)
async def test_a_create_call_is_sent_once(
    task_server: TaskServer, options: dict[str, Any], era: str
) -> None:
    """A restart between connecting and start_task: on 2025-11-25 the server has
    forgotten the session, so the create call is refused unrun, and sent again on a new
    one (as call_tool does); either way the server sees it once."""
    async with task_server.client(**options) as client:
        task_server.restart()
        task = await client.start_task("build", {"seconds": 0.2, "label": "once"})
        assert await task.result(timeout=20) == {"label": "once", "seconds": 0.2}
    assert task_server.counts()["calls"] == {"build": 1}


async def test_a_task_on_a_server_that_wants_initialize_after_the_probe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that agrees on 2026-07-28 and then refuses every tools/call until
    ``initialize`` (kglite-mcp-server 0.21; see test_probe_fallback.py) refuses the task's
    create call unrun: the client connects again with the handshake and creates the task
    there, on 2025-11-25, once; the handle follows it on that connection."""
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    gated = TaskServer(
        tmp_path / "tasks.json", "--poll-ms", "100", "--wants-initialize", "tools/call"
    )
    try:
        async with gated.client(tasks=True) as client:
            assert client.protocol_version == "2026-07-28"
            task = await client.start_task("build", {"seconds": 0.5, "label": "gated"})
            assert task.protocol == client.protocol_version == "2025-11-25"
            assert await task.result(timeout=20) == {"label": "gated", "seconds": 0.5}
            assert (await task.status()).status == "completed"
            assert await client.call_tool("plain_echo", {"text": "hi"}) == {"result": "hi"}
        assert gated.counts()["calls"] == {"build": 1, "plain_echo": 1}
    finally:
        gated.stop()
        gated.sock.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "then refused tools/call 'build' as a task: initialize is required" in warnings[0]


async def test_a_task_made_before_the_client_fell_back_to_initialize_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that agrees on 2026-07-28, creates a task there, and then refuses
    tasks/get until ``initialize``: the client connects again with the handshake, on
    its own, and the 2026-07-28 task cannot be followed on that wire. The error says
    what happened; it told the app to use "the same protocol= setting", which it never
    set."""
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    gated = TaskServer(
        tmp_path / "tasks.json", "--poll-ms", "100", "--wants-initialize", "tasks/get"
    )
    try:
        async with gated.client(tasks=True) as client:
            task = await client.start_task("build", {"seconds": 30, "label": "before"})
            assert task.protocol == "2026-07-28"
            with pytest.raises(McpUsageError) as refused:
                await task.status()
            assert client.protocol_version == "2025-11-25"
    finally:
        gated.stop()
        gated.sock.close()
    message = str(refused.value)
    assert "was created on protocol 2026-07-28, and this client has since fallen back to " in (
        message
    )
    assert "the initialize handshake with the server (2025-11-25" in message
    assert "so the task cannot be re-attached (it may still run on the server)" in message
    assert "start the call again; an McpClient made with protocol='legacy'" in message
    assert "the same protocol= setting" not in message
    [warned] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "then refused tasks/get" in warned and 'protocol="legacy"' in warned


async def test_a_2025_task_whose_result_wait_the_client_cut_short_says_how_long_it_waited(
    task_server: TaskServer,
) -> None:
    """2025-11-25: a question asked in tasks/result that no handler answers keeps the
    request open; the client's own timeout (2 s) cuts it short long before result()'s
    (600 s; a Temporal activity's is a year), and the error claimed the longer wait."""
    async with task_server.client(protocol="legacy", timeout=2) as client:
        task = await client.start_task("ask", {"question": "which?"})
        with pytest.raises(McpTimeoutError) as info:
            await task.result(timeout=600)
        said = str(info.value)
        assert "still input_required after " in said and "after 600 s" not in said
        waited = float(said.split("after ")[1].split(" s;")[0])
        assert 2 <= waited < 30
        await task.cancel()


@pytest.mark.parametrize("answer", ["yes", "fails"])
async def test_a_keepers_call_cancels_its_task_only_when_the_keeper_gives_it_up(
    task_server: TaskServer, answer: str
) -> None:
    """A keeper's optional given_up() decides: yes, the task is cancelled; an answer
    that fails keeps it for the retry, and never replaces the cancellation raised."""
    from agcore_tools.pending import KEEPER

    kept = asyncio.Event()

    class Keeper:
        wait = None

        def recall(self) -> None:
            return None

        def keep(self, handle: Any) -> None:
            kept.set()

        def given_up(self) -> bool:
            if answer == "fails":
                raise RuntimeError("no answer")
            return True

    async with task_server.client(protocol="legacy") as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(tasks=["build"]))
        token = KEEPER.set(Keeper())
        try:
            call = asyncio.ensure_future(registry.invoke("build", {"seconds": 30, "label": answer}))
        finally:
            KEEPER.reset(token)
        await asyncio.wait_for(kept.wait(), 20)  # the task started
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        [task_id] = task_server.counts()["tasks"]
        status = (await client.task(task_id).status()).status
    assert status == ("cancelled" if answer == "yes" else "working")
