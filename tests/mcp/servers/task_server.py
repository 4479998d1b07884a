"""A test MCP server with tasks in both protocol eras, on the MCP SDK's MCPServer.

Its tasks live in a JSON file (``--store PATH``), so they outlive client connections and
the server process itself: a server started again on the same store knows them; one
started with ``--forget`` (or on a new store) does not. A task's state is worked out
from the wall clock and its creation time in the store, so no worker has to run.

* 2026-07-28, the tasks extension (SEP-2663): an ``Extension`` (``io.modelcontextprotocol/tasks``)
  serves ``tasks/get`` and ``tasks/cancel`` (``MethodBinding``) and turns calls into
  tasks in ``intercept_tool_call``, for clients that opted in on the request.
* 2025-11-25 (SEP-1686): the SDK server cannot send a ``CreateTaskResult`` from a
  ``tools/call`` handler (it validates the result as a ``CallToolResult``, which needs
  ``content``), nor advertise the ``tasks`` capability or a tool's ``execution``. A
  ``Server.middleware`` does those three (it answers a task-augmented ``tools/call``
  itself, and adds to the ``initialize`` and ``tools/list`` results); the extension's
  methods serve ``tasks/get``, ``tasks/cancel`` and ``tasks/result``.

Tools: ``build(seconds, label)`` (tasks required; done ``seconds`` after creation, status
"step k/3" meanwhile), ``report(n)`` (tasks optional: on 2026-07-28 the server answers at
once), ``fail_build(reason)`` (tasks required; fails saying ``reason``, else quoting
the credentials the request carried over HTTP), ``ask(question)`` (tasks required; on
2026-07-28 waits for input, ``inputRequests``, for ever), ``sample(prompt)`` (tasks
required; on 2026-07-28 asks the client for a completion, ``sampling/createMessage``),
``lost_build(label)`` (tasks required; runs on for ever, and every ``tasks/get`` of it
fails with an internal error), ``shapeless_build(label)`` (the same, every ``tasks/get``
answered with a number for its status), ``odd_build(tail, status)`` (tasks required; its id ends in ``tail``, its status stays
``status``: a hostile server's words), ``plain_echo(text)`` (no tasks) and
``calls_made()`` (no tasks: every ``tools/call`` received, per tool, and the times of
the ``tasks/get`` requests per task). Over HTTP on 2026-07-28 it refuses a ``tasks/*``
request without the ``Mcp-Name`` header naming the task (HEADER_MISMATCH). The store
lists the ids of the ``tasks/cancel`` requests received (``cancels``).

Run: ``python task_server.py --stdio --store PATH`` or ``--http PORT`` (127.0.0.1), or
``--http-fd FD`` on a socket the caller bound. ``--poll-ms`` sets the poll interval.
``--wants-initialize METHOD`` (over HTTP, again for each method) refuses its requests
until ``initialize``, as kglite-mcp-server 0.21 does (see ``_gate.py``). ``--no-cancel``
leaves ``tasks.cancel`` out of its 2025-11-25 capabilities; ``--cancel-delay SECONDS``
answers ``tasks/cancel`` that much later.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _gate import InitializeGate  # the script's directory is on sys.path
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolRequestParams,
    GetTaskRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

TASKS = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"
SUPPORT = {
    "build": "required",
    "fail_build": "required",
    "report": "optional",
    "ask": "required",
    "odd_build": "required",
    "lost_build": "required",
    "shapeless_build": "required",
    "sample": "required",
}
DEFAULT_TTL_MS = 600_000


class Store:
    """The JSON file of tasks, tool call counts and polls (one server process writes it)."""

    def __init__(self, path: Path, forget: bool) -> None:
        self.path = path
        self.lock = threading.Lock()
        if forget or not path.exists():
            self._write({"tasks": {}, "calls": {}, "gets": {}})

    def _read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.path.read_text())
        return data

    def _write(self, data: dict[str, Any]) -> None:
        part = self.path.with_suffix(".part")
        part.write_text(json.dumps(data))
        os.replace(part, self.path)

    def update(self, change: Any) -> Any:
        with self.lock:
            data = self._read()
            out = change(data)
            self._write(data)
            return out

    def read(self) -> dict[str, Any]:
        with self.lock:
            return self._read()


OPTIONS = argparse.Namespace(poll_ms=200, clock_file=None, no_cancel=False, cancel_delay=0.0)


def now() -> float:
    """Wall time plus the seconds in ``--clock-file``: a test moves the server's clock
    on (a 2-hour build) without waiting for it."""
    path = OPTIONS.clock_file
    offset = float(path.read_text() or 0) if path is not None and path.exists() else 0.0
    return time.time() + offset


STORE: Store | None = None


def store() -> Store:
    assert STORE is not None
    return STORE


def count_call(name: str) -> None:
    def add(data: dict[str, Any]) -> None:
        data["calls"][name] = data["calls"].get(name, 0) + 1

    store().update(add)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def create(
    name: str, arguments: dict[str, Any], ttl_ms: int | None, ctx: ServerRequestContext[Any, Any]
) -> dict[str, Any]:
    record = {
        "id": uuid.uuid4().hex + (str(arguments.get("tail", "")) if name == "odd_build" else ""),
        "tool": name,
        "args": arguments,
        "created": now(),
        "ttl_ms": ttl_ms or DEFAULT_TTL_MS,
        "cancelled_at": None,
        "credentials": credentials(ctx),
    }

    def add(data: dict[str, Any]) -> None:
        data["calls"][name] = data["calls"].get(name, 0) + 1
        data["tasks"][record["id"]] = record

    store().update(add)
    return record


def credentials(ctx: ServerRequestContext[Any, Any]) -> str:
    """The credentials the request came with over HTTP (its ``Authorization``, the
    URL's ``?token=``), which ``fail_build`` echoes as servers quote what they refused."""
    request = ctx.request
    if request is None:
        return ""
    given = [request.headers.get("authorization"), request.query_params.get("token")]
    return " ".join(value for value in given if value)


def evaluate(record: dict[str, Any], now: float) -> dict[str, Any]:
    """The task's state now: status, message, updated time, and result or error."""
    created, args = record["created"], record["args"]
    elapsed = now - created
    if record["cancelled_at"] is not None:
        return {"status": "cancelled", "message": "cancelled", "at": record["cancelled_at"]}
    if record["tool"] == "build":
        seconds = float(args.get("seconds", 1))
        if elapsed >= seconds:
            result = {
                "content": [{"type": "text", "text": f"built {args.get('label')}"}],
                "structuredContent": {"label": args.get("label"), "seconds": seconds},
                "isError": False,
            }
            return {
                "status": "completed",
                "message": "done",
                "at": created + seconds,
                "result": result,
            }
        step = min(3, 1 + int(3 * elapsed / seconds))
        return {
            "status": "working",
            "message": f"step {step}/3",
            "at": created + (step - 1) * seconds / 3,
        }
    if record["tool"] == "odd_build":  # a hostile server's words: its id and status
        return {"status": str(args.get("status") or "working"), "message": "odd", "at": created}
    if record["tool"] == "fail_build":
        if elapsed >= 0.2:
            given = record.get("credentials")
            said = "the compiler crashed" + (f" (the registry refused {given})" if given else "")
            said = str(args.get("reason") or said)
            error = {"code": INTERNAL_ERROR, "message": said}
            return {
                "status": "failed",
                "message": said,
                "at": created + 0.2,
                "error": error,
            }
        return {"status": "working", "message": "step 1/3", "at": created}
    if record["tool"] == "ask" and record.get("answers"):  # answered with tasks/update
        answer = record["answers"].get("q1") or {}
        text = f"{answer.get('action')}: {(answer.get('content') or {}).get('answer', '')}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        return {"status": "completed", "message": "answered", "at": created, "result": result}
    if record["tool"] == "sample" and record.get("answers"):  # answered with tasks/update
        said = ((record["answers"].get("s1") or {}).get("content") or {}).get("text", "")
        result = {"content": [{"type": "text", "text": f"sampled: {said}"}], "isError": False}
        return {"status": "completed", "message": "answered", "at": created, "result": result}
    if record["tool"] == "sample":  # asks for a completion (tasks/update, 2026-07-28)
        question = {
            "method": "sampling/createMessage",
            "params": {
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": str(args.get("prompt"))}}
                ],
                "maxTokens": 10,
            },
        }
        return {
            "status": "input_required",
            "message": "sampling",
            "at": created,
            "input": {"s1": question},
        }
    if record["tool"] in ("lost_build", "shapeless_build"):  # runs on (see get_task)
        return {"status": "working", "message": "step 1/3", "at": created}
    if record["tool"] == "ask":  # waits for an answer (tasks/update, 2026-07-28)
        question = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": str(args.get("question")),
                "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}},
            },
        }
        return {
            "status": "input_required",
            "message": "waiting",
            "at": created,
            "input": {"q1": question},
        }
    n = int(args.get("n", 0))  # report: done at once
    result = {
        "content": [{"type": "text", "text": f"report {n}"}],
        "structuredContent": {"n": n},
        "isError": False,
    }
    return {"status": "completed", "message": "done", "at": created, "result": result}


def find(task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    record = store().read()["tasks"].get(task_id)
    at = now()
    if record is None or at > record["created"] + record["ttl_ms"] / 1000:
        raise MCPError(INVALID_PARAMS, f"task {task_id} not found")
    return record, evaluate(record, at)


def task_json(record: dict[str, Any], state: dict[str, Any], modern: bool) -> dict[str, Any]:
    wire = {
        "taskId": record["id"],
        "status": state["status"],
        "statusMessage": state["message"],
        "createdAt": iso(record["created"]),
        "lastUpdatedAt": iso(state["at"]),
        ("ttlMs" if modern else "ttl"): record["ttl_ms"],
        ("pollIntervalMs" if modern else "pollInterval"): OPTIONS.poll_ms,
    }
    return wire


def is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def opted_in(ctx: ServerRequestContext[Any, Any]) -> bool:
    meta = (ctx.params or {}).get("_meta") or {}
    extensions = (meta.get(CAPS) or {}).get("extensions") or {}
    return TASKS in extensions


def check_name(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """SEP-2663: a tasks/* request over HTTP names its task in the Mcp-Name header."""
    request = ctx.request
    if request is not None and is_modern(ctx) and request.headers.get("mcp-name") != task_id:
        raise MCPError(HEADER_MISMATCH, f"{ctx.method} needs the header Mcp-Name: {task_id}")


async def get_task(
    ctx: ServerRequestContext[Any, Any], params: GetTaskRequestParams
) -> HandlerResult:
    check_name(ctx, params.task_id)

    def log(data: dict[str, Any]) -> None:
        data["gets"].setdefault(params.task_id, []).append(time.time())

    store().update(log)
    record, state = find(params.task_id)
    if record["tool"] == "lost_build":
        raise MCPError(INTERNAL_ERROR, "the task store is unreachable")
    if record["tool"] == "shapeless_build":  # of no task's shape: a number for a status
        return {"taskId": params.task_id, "status": 3}
    wire = task_json(record, state, is_modern(ctx))
    if is_modern(ctx):
        if "result" in state:
            wire["result"] = state["result"]
        if "error" in state:
            wire["error"] = state["error"]
        if "input" in state:
            wire["inputRequests"] = state["input"]
    return wire


async def cancel_task(
    ctx: ServerRequestContext[Any, Any], params: GetTaskRequestParams
) -> HandlerResult:
    check_name(ctx, params.task_id)

    def log(data: dict[str, Any]) -> None:
        data.setdefault("cancels", []).append(params.task_id)

    store().update(log)
    if OPTIONS.cancel_delay:
        await asyncio.sleep(OPTIONS.cancel_delay)
    record, state = find(params.task_id)
    if state["status"] in ("working", "input_required"):

        def cancel(data: dict[str, Any]) -> None:
            data["tasks"][params.task_id]["cancelled_at"] = time.time()

        store().update(cancel)
        record, state = find(params.task_id)
    return {} if is_modern(ctx) else task_json(record, state, False)


class UpdateTaskParams(GetTaskRequestParams):
    """``tasks/update`` (2026-07-28): the client's answers to the task's input requests."""

    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


async def update_task(
    ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
) -> HandlerResult:
    check_name(ctx, params.task_id)
    find(params.task_id)  # an unknown task is refused

    def answer(data: dict[str, Any]) -> None:
        record = data["tasks"][params.task_id]
        record["answers"] = {**record.get("answers", {}), **params.input_responses}
        data.setdefault("updates", []).append(params.input_responses)

    store().update(answer)
    return {}


async def task_result(
    ctx: ServerRequestContext[Any, Any], params: GetTaskRequestParams
) -> HandlerResult:
    while True:  # tasks/result waits for the end (2025-11-25)
        record, state = find(params.task_id)
        if state["status"] not in ("working", "input_required"):
            break
        await asyncio.sleep(0.05)
    related = {"io.modelcontextprotocol/related-task": {"taskId": record["id"]}}
    if state["status"] == "completed":
        return {**state["result"], "_meta": related}
    if state["status"] == "failed":
        raise MCPError(state["error"]["code"], state["error"]["message"])
    raise MCPError(INVALID_PARAMS, f"task {record['id']} was cancelled")


class ServerTasks(Extension):
    """The tasks extension (2026-07-28), whose methods serve 2025-11-25 clients too."""

    identifier = TASKS

    def methods(self) -> list[MethodBinding]:
        legacy = frozenset({"2025-11-25"})
        return [
            MethodBinding("tasks/get", GetTaskRequestParams, get_task),
            MethodBinding("tasks/cancel", GetTaskRequestParams, cancel_task),
            MethodBinding(
                "tasks/update",
                UpdateTaskParams,
                update_task,
                protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS),
            ),
            MethodBinding(
                "tasks/result", GetTaskRequestParams, task_result, protocol_versions=legacy
            ),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        support = SUPPORT.get(params.name)
        if is_modern(ctx) and support == "required":
            if not opted_in(ctx):
                count_call(params.name)
                raise MCPError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"tool {params.name} runs only as a task ({TASKS})",
                )
            record = create(params.name, params.arguments or {}, None, ctx)
            _, state = find(record["id"])
            return {"resultType": "task", **task_json(record, state, True)}
        count_call(params.name)
        if support == "required":  # 2025-11-25 without a task
            raise MCPError(METHOD_NOT_FOUND, f"tool {params.name} requires task augmentation")
        return await call_next(ctx)


async def legacy_tasks(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """What the SDK server cannot do on 2025-11-25 (see the module docs)."""
    if is_modern(ctx) or ctx.method not in ("initialize", "tools/list", "tools/call"):
        return await call_next(ctx)
    params = ctx.params or {}
    if ctx.method == "tools/call" and isinstance(params.get("task"), dict):
        name = params.get("name")
        if name not in SUPPORT:
            raise MCPError(INVALID_PARAMS, f"tool {name} does not support tasks")
        ttl = params["task"].get("ttl")
        record = create(str(name), params.get("arguments") or {}, ttl, ctx)
        _, state = find(record["id"])
        return {"task": task_json(record, state, False)}
    result = await call_next(ctx)
    if ctx.method == "initialize" and isinstance(result, dict):
        result["capabilities"]["tasks"] = {
            "list": {},
            **({} if OPTIONS.no_cancel else {"cancel": {}}),
            "requests": {"tools": {"call": {}}},
        }
    elif ctx.method == "tools/list" and isinstance(result, dict):
        for tool in result.get("tools", []):
            tool["execution"] = {"taskSupport": SUPPORT.get(tool["name"], "forbidden")}
    return result


server = MCPServer("task-server", extensions=[ServerTasks()], middleware=[legacy_tasks])


@server.tool()
def build(seconds: float, label: str) -> dict[str, Any]:
    """Build ``label``; takes ``seconds`` (runs as a task only)."""
    raise RuntimeError("build runs as a task only")


@server.tool()
def fail_build(reason: str = "") -> str:
    """A build that fails, saying ``reason`` if given (runs as a task only)."""
    raise RuntimeError("fail_build runs as a task only")


@server.tool()
def odd_build(tail: str = "", status: str = "working") -> str:
    """A task whose id ends in ``tail`` and whose status stays ``status`` (a hostile
    server's words; runs as a task only)."""
    raise RuntimeError("odd_build runs as a task only")


@server.tool()
def lost_build(label: str = "") -> str:
    """A task that runs on while every tasks/get of it fails (runs as a task only)."""
    raise RuntimeError("lost_build runs as a task only")


@server.tool()
def shapeless_build(label: str = "") -> str:
    """A task that runs on while every tasks/get of it answers a number for its status
    (runs as a task only)."""
    raise RuntimeError("shapeless_build runs as a task only")


@server.tool()
def sample(prompt: str) -> str:
    """A task that asks the client for a completion (sampling/createMessage) on
    2026-07-28 (runs as a task only)."""
    raise RuntimeError("sample runs as a task only")


@server.tool()
def report(n: int) -> dict[str, Any]:
    """Report on ``n`` (a task if the client asks on 2025-11-25; at once on 2026-07-28)."""
    return {"n": n}


@server.tool()
def ask(question: str) -> str:
    """Ask the user ``question`` (runs as a task only; on 2026-07-28 it waits for input)."""
    raise RuntimeError("ask runs as a task only")


@server.tool()
def plain_echo(text: str) -> str:
    """Echo ``text`` (never a task)."""
    return text


@server.tool()
def calls_made() -> dict[str, Any]:
    """Every tools/call received, per tool, and the tasks/get times per task."""
    data = store().read()
    return {"calls": data["calls"], "gets": data["gets"]}


def main() -> None:
    global STORE, DEFAULT_TTL_MS
    parser = argparse.ArgumentParser()
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true")
    mode.add_argument("--http", type=int, metavar="PORT")
    mode.add_argument("--http-fd", type=int, metavar="FD")
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--forget", action="store_true", help="start with no tasks")
    parser.add_argument("--poll-ms", type=int, default=200)
    parser.add_argument("--clock-file", type=Path, help="seconds to add to the clock")
    parser.add_argument("--ttl-ms", type=int, default=DEFAULT_TTL_MS, help="a task's default ttl")
    parser.add_argument("--wants-initialize", action="append", default=[], metavar="METHOD")
    parser.add_argument("--no-cancel", action="store_true", help="2025: no tasks.cancel")
    parser.add_argument("--cancel-delay", type=float, default=0.0, metavar="SECONDS")
    options = parser.parse_args()
    OPTIONS.poll_ms = options.poll_ms
    OPTIONS.clock_file = options.clock_file
    OPTIONS.no_cancel = options.no_cancel
    OPTIONS.cancel_delay = options.cancel_delay
    DEFAULT_TTL_MS = options.ttl_ms
    STORE = Store(options.store, options.forget)
    if options.stdio:
        server.run()
        return
    import uvicorn

    app = server.streamable_http_app()
    if options.wants_initialize:
        app = InitializeGate(app, options.wants_initialize)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    if options.http_fd is not None:
        sock = socket.socket(fileno=options.http_fd)
        asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
    else:
        config.host, config.port = "127.0.0.1", options.http
        asyncio.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
