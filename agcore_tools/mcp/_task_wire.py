"""The wire of MCP Tasks, in both eras, over the MCP SDK (which has no tasks client).

Imported on first use only (it imports the SDK): by :mod:`._tasks` and, when an app
turns tasks on (``McpClient(tasks=True)``), by the connection.

* 2025-11-25 (SEP-1686): a ``tools/call`` carrying ``params.task = {"ttl": ms}`` is
  answered ``{"task": {...}}``; ``tasks/get`` returns the task, ``tasks/result`` the
  ``CallToolResult`` once it has ended, ``tasks/cancel`` the task.
* 2026-07-28 (SEP-2663, the ``io.modelcontextprotocol/tasks`` extension): the client
  opts in through its capabilities (stamped by the SDK on every request, so for the
  whole session); the server alone decides whether a call runs as a task, and then
  answers a flat ``{"resultType": "task", "taskId": ..., ...}``. ``tasks/get`` returns a
  DetailedTask: ``result`` once completed, ``error`` once failed. No ``tasks/result``.

Every ``tasks/*`` request sets ``name_param = "taskId"``, so it carries the
``Mcp-Name`` header SEP-2663 requires over HTTP.

A task the client gives up on with no handle left to anyone (its call timed out, or was
cancelled) gets a ``tasks/cancel`` (:func:`cancel_left`): best effort, within
:data:`GIVE_UP_WAIT`, where the server offers it (:func:`cancel_offered`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    CancelTaskRequest,
    GetTaskPayloadRequest,
    GetTaskRequest,
    Result,
    TextContent,
)
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from ..error import McpError
from ._error_text import quoted, server_word
from ._exchange import EXCHANGE
from .models import McpTaskStatus

__all__ = [
    "GIVE_UP_WAIT",
    "TASKS_EXTENSION",
    "CancelTask",
    "CreatedTask",
    "GetTask",
    "GetTaskPayload",
    "RawResult",
    "TasksExtension",
    "ask_client",
    "cancel_left",
    "cancel_offered",
    "parse_status",
    "send_unvalidated",
    "update_params",
]

logger = logging.getLogger("agcore_tools.mcp")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The identifier of the 2026-07-28 tasks extension (SEP-2663)."""

FIRST_POLL = 0.02
"""Seconds before the second ``tasks/get``; each later wait doubles, up to the server's
poll interval."""
MIN_POLL = 0.02
"""The shortest wait between two polls, so a ``pollInterval`` of 0 cannot spin."""
DEFAULT_POLL_CAP = 1.0
"""The longest wait between two polls when the server suggests no interval."""
GIVE_UP_WAIT = 1.0
"""Seconds the ``tasks/cancel`` of a task given up on may take (as the closing
``DELETE`` of a session may): the caller that gave up waits that long at most."""


class GetTask(GetTaskRequest):
    """``tasks/get``, with the ``Mcp-Name`` header."""

    name_param = "taskId"


class GetTaskPayload(GetTaskPayloadRequest):
    """``tasks/result`` (2025-11-25 only), with the ``Mcp-Name`` header."""

    name_param = "taskId"


class CancelTask(CancelTaskRequest):
    """``tasks/cancel``, with the ``Mcp-Name`` header."""

    name_param = "taskId"


class UpdateTask(GetTaskRequest):
    """``tasks/update`` (2026-07-28 only): answers to a task's input requests, with the
    ``Mcp-Name`` header. The SDK has no model for it; its params pass as given."""

    method: Literal["tasks/update"] = "tasks/update"  # type: ignore[assignment]
    params: dict[str, Any]  # type: ignore[assignment]
    name_param = "taskId"


class RawResult(Result):
    """Any result, every field kept (the two eras' task shapes differ; parsed by hand)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class CreatedTask(Result):
    """The 2026-07-28 answer to a ``tools/call`` that became a task (``resultType: task``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str


def wire(result: Result) -> dict[str, Any]:
    """A result as its wire JSON, unknown fields included."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def parse_status(raw: Mapping[str, Any]) -> McpTaskStatus:
    """A task's status from either era's wire shape (``ttl``/``pollInterval`` in
    2025-11-25, ``ttlMs``/``pollIntervalMs`` in 2026-07-28, both in milliseconds).

    Example:
        >>> parse_status({"taskId": "a", "status": "working", "pollIntervalMs": 250,
        ...               "ttlMs": None}).poll_interval
        0.25
    """
    task = raw.get("task")
    if isinstance(task, Mapping):  # a 2025-11-25 CreateTaskResult
        raw = task
    task_id = raw.get("taskId")
    status = raw.get("status")
    if not isinstance(task_id, str) or not isinstance(status, str):
        raise ValueError(f"not a task: {dict(raw)!r}"[:300])
    message = raw.get("statusMessage")
    return McpTaskStatus(
        task_id=task_id,
        status=status,
        message=message if isinstance(message, str) else None,
        poll_interval=_seconds(raw.get("pollIntervalMs", raw.get("pollInterval"))),
        ttl=_seconds(raw.get("ttlMs", raw.get("ttl"))),
        created_at=_text(raw.get("createdAt")),
        updated_at=_text(raw.get("lastUpdatedAt")),
    )


def _seconds(ms: Any) -> float | None:
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        return max(0.0, ms / 1000)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def next_wait(delay: float, status: McpTaskStatus) -> float:
    """The wait before the next poll: ``delay`` (the doubling backoff), capped by the
    server's poll interval, never below :data:`MIN_POLL`.

    Example:
        >>> working = McpTaskStatus("t", "working", poll_interval=0.3)
        >>> [next_wait(0.02 * 2**i, working) for i in range(6)]
        [0.02, 0.04, 0.08, 0.16, 0.3, 0.3]
        >>> next_wait(0.02, McpTaskStatus("t", "working", poll_interval=0.0))  # no spinning
        0.02
        >>> next_wait(5.0, McpTaskStatus("t", "working"))  # no interval given: 1 s at most
        1.0
    """
    cap = status.poll_interval if status.poll_interval is not None else DEFAULT_POLL_CAP
    return max(MIN_POLL, min(delay, cap))


async def send_unvalidated(
    session: ClientSession, method: str, params: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """Send a request and return its raw result, without the SDK's result validation.

    Why: in MCP SDK 2.3.0, ``ClientSession.send_request`` validates every
    ``tools/call`` result as the negotiated version's ``CallToolResult`` (``content``
    required), so the ``CreateTaskResult`` a 2025-11-25 server answers to a
    task-augmented call fails before any caller sees it, and the SDK has no public
    way to send a request unvalidated. This is the only place that reaches into the
    session's private ``_stamp`` (the per-version ``_meta`` and headers) and
    ``_dispatcher`` (``send_raw_request``, which ``send_request`` itself uses).
    ``tests/mcp/test_tasks.py::test_the_sdk_internals_the_2025_create_call_uses`` fails
    when an SDK upgrade changes either, or starts accepting the shape (then this can go).
    """
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {"timeout": timeout}
    session._stamp(data, opts)  # type: ignore[arg-type]
    raw: dict[str, Any] = await session._dispatcher.send_raw_request(
        method,
        data.get("params"),
        opts,  # type: ignore[arg-type]
    )
    return raw


async def ask_client(
    session: ClientSession,
    server_name: str,
    task_id: str,
    tool_name: str,
    asked: Mapping[str, Any],
) -> dict[str, Any]:
    """The answers of the client's own callbacks (``elicitation_handler``,
    ``sampling_handler``, ``roots_handler``) to a 2026-07-28 task's input requests
    ``asked`` (by the server's keys, as JSON), as JSON for ``tasks/update``. A client
    with no ``elicitation_handler`` declines a question, as it does one asked by a
    plain call; a request no callback can answer raises an :class:`McpError` naming it.
    """
    from mcp.client.context import ClientRequestContext
    from mcp_types import ErrorData, InputRequest
    from pydantic import TypeAdapter, ValidationError

    requests: TypeAdapter[Any] = TypeAdapter(InputRequest)
    answers: dict[str, Any] = {}
    task = server_word(task_id)
    for key, raw in asked.items():
        what = server_word(raw.get("method")) if isinstance(raw, Mapping) else None
        asking = server_word(key)
        try:
            request = requests.validate_python(raw)
        except ValidationError as exc:
            raise McpError(
                server_name,
                f"task '{task}' of tool '{tool_name}' asked for input '{asking}' "
                f"({what or 'no method'}) in a form this client cannot read",
                tool_name=tool_name,
            ) from exc
        params = request.params
        ctx = ClientRequestContext(
            session=session, request_id=key, meta=params.meta if params is not None else None
        )
        answer = await session.dispatch_input_request(ctx, request)
        if isinstance(answer, ErrorData):
            raise McpError(
                server_name,
                f"task '{task}' of tool '{tool_name}' asked for input '{asking}' ({what}), "
                f"which this client cannot give: {answer.message}",
                tool_name=tool_name,
            )
        answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return answers


def update_params(task_id: str, responses: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The params of ``tasks/update`` answering a task's input requests."""
    return {"taskId": task_id, "inputResponses": {k: dict(v) for k, v in responses.items()}}


async def drive(
    session: ClientSession,
    server_name: str,
    task_id: str,
    tool_name: str,
    deadline: float,
    hide: Callable[[str], str],
) -> CallToolResult:
    """Poll a 2026-07-28 task to its end and return its ``CallToolResult``; a failed,
    cancelled or forgotten task becomes an ``isError`` result naming it (what a plain
    ``tools/call`` that the server chose to run as a task returns). A task waiting for
    input gets the answers of the client's callbacks (:func:`ask_client`) by
    ``tasks/update``. Any other failure raises an :class:`~agcore_tools.McpError`
    naming the task, quoting what the server said masked by ``hide``
    (``_error_text.quoted``): a ``tasks/get`` refused leaves the task running and says
    how to pick it up (a 503 or a 429 from a proxy passes, and the task may still end
    well); a question the client cannot answer, or ``tasks/update`` refused, gives the
    task up (:func:`_left_behind`), since no one else can answer it either."""
    from mcp.shared.exceptions import MCPError

    delay = FIRST_POLL
    answered: set[str] = set()
    task = server_word(task_id)  # as the errors and results below show it
    while True:
        remaining = deadline - time.monotonic()
        try:
            raw = wire(
                await session.send_request(
                    GetTask(params={"taskId": task_id}),  # type: ignore[arg-type]
                    RawResult,
                    request_read_timeout_seconds=max(remaining, MIN_POLL),
                )
            )
        except MCPError as exc:
            if exc.code == INVALID_PARAMS:  # the server no longer knows it
                return _error_result(f"task '{task}' no longer exists: {exc.message}")
            raise McpError(
                server_name,
                f"tools/call '{tool_name}' runs as task '{task}', which could not be "
                f"followed ({quoted(exc.message, hide)}); McpClient.task('{task}') picks "
                "it up",
                tool_name=tool_name,
            ) from exc
        try:
            status = parse_status(raw)
        except ValueError as exc:  # an answer of no task's shape: nothing to follow
            raise McpError(
                server_name,
                f"tools/call '{tool_name}' runs as task '{task}', which could not be "
                f"followed ({quoted(str(exc), hide)}); McpClient.task('{task}') picks it up",
                tool_name=tool_name,
            ) from exc
        if status.status == "completed" and isinstance(raw.get("result"), Mapping):
            return CallToolResult.model_validate(raw["result"], by_name=False)
        if status.terminal:
            error = raw.get("error")
            detail = error.get("message") if isinstance(error, Mapping) else status.message
            said = detail or "no reason given"
            return _error_result(f"task '{task}' {server_word(status.status)}: {said}")
        asked = raw.get("inputRequests") if status.status == "input_required" else None
        # Keys already answered stay listed until the server reads the update.
        fresh = {k: v for k, v in (asked or {}).items() if k not in answered}
        if fresh:
            try:
                responses = await ask_client(session, server_name, task_id, tool_name, fresh)
            except McpError as exc:
                raise await _given_up(session, task_id, tool_name, exc, hide) from exc
            try:
                await session.send_request(
                    UpdateTask(params=update_params(task_id, responses)),
                    RawResult,
                    request_read_timeout_seconds=max(deadline - time.monotonic(), MIN_POLL),
                )
            except MCPError as exc:
                refused = McpError(
                    server_name,
                    f"tools/call '{tool_name}' runs as task '{task}', which refused its "
                    f"answers ({quoted(exc.message, hide)})",
                    tool_name=tool_name,
                )
                raise await _given_up(session, task_id, tool_name, refused, hide) from exc
            answered.update(fresh)
            delay = FIRST_POLL
            continue
        wait = next_wait(delay, status)
        if time.monotonic() + wait > deadline:
            raise TimeoutError(f"task '{task}' of tool '{tool_name}' still running")
        await asyncio.sleep(wait)
        delay *= 2


def cancel_offered(capabilities: Any, modern: bool) -> bool:
    """Whether a server with ``capabilities`` (its ``ServerCapabilities``, or None)
    takes ``tasks/cancel``: on 2025-11-25 it advertises ``tasks.cancel``; on 2026-07-28
    ``tasks/cancel`` is one of the three methods of the tasks extension it advertises.

    Example:
        >>> from mcp_types import ServerCapabilities
        >>> legacy = ServerCapabilities.model_validate({"tasks": {"requests": {}}})
        >>> cancel_offered(legacy, False), cancel_offered(None, True)
        (False, False)
        >>> modern = ServerCapabilities.model_validate({"extensions": {TASKS_EXTENSION: {}}})
        >>> cancel_offered(modern, True)
        True
    """
    if capabilities is None:
        return False
    if modern:
        return TASKS_EXTENSION in (capabilities.extensions or {})
    tasks = capabilities.tasks
    return tasks is not None and tasks.cancel is not None


async def cancel_left(
    session: ClientSession,
    server_name: str,
    task_id: str,
    tool_name: str,
    why: str,
    hide: Callable[[str], str],
) -> bool:
    """Send ``tasks/cancel`` for task ``task_id`` of tool ``tool_name``, which the client
    gives up on (``why``: "its call timed out"): best effort, within
    :data:`GIVE_UP_WAIT` (shielded from the cancel scopes around it, not from a new
    cancellation of the caller), never raising. Whether the server accepted it; if not,
    a WARNING says the task may run on (DEBUG when the server no longer knows it), with
    what the server said masked by ``hide``. The caller checks :func:`cancel_offered`."""
    import anyio
    from mcp.shared.exceptions import MCPError

    task = server_word(task_id)  # a hostile server's newline would forge a record
    # The request the caller gave up on may have its HTTP outcome noted (see
    # _exchange): this one's must not be read as that request's.
    token = EXCHANGE.set(None)
    try:
        with anyio.fail_after(GIVE_UP_WAIT, shield=True):
            await session.send_request(
                CancelTask(params={"taskId": task_id}),  # type: ignore[arg-type]
                RawResult,
                request_read_timeout_seconds=GIVE_UP_WAIT,
            )
    except MCPError as exc:
        gone = exc.code == INVALID_PARAMS  # it ended, or expired, meanwhile
        logger.log(
            logging.DEBUG if gone else logging.WARNING,
            "MCP server '%s': task '%s' of tool '%s' (%s) may run on: the server refused "
            "its tasks/cancel: %s",
            server_name,
            task,
            tool_name,
            why,
            quoted(exc.message, hide),
        )
        return False
    except Exception as exc:  # noqa: BLE001 - best effort: logged, the caller's error goes on
        if isinstance(exc, TimeoutError):
            said = f"got no answer within {GIVE_UP_WAIT:g} s"
        else:
            said = f"failed: {quoted(str(exc) or type(exc).__name__, hide)}"
        logger.warning(
            "MCP server '%s': task '%s' of tool '%s' (%s) may run on: its tasks/cancel %s "
            "(McpClient.task('%s').cancel() stops it)",
            server_name,
            task,
            tool_name,
            why,
            said,
            task,
        )
        return False
    finally:
        EXCHANGE.reset(token)
    logger.debug(
        "MCP server '%s': task '%s' of tool '%s' (%s): tasks/cancel sent and accepted",
        server_name,
        task,
        tool_name,
        why,
    )
    return True


def _error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


class TasksExtension(ClientExtension):
    """The client side of ``io.modelcontextprotocol/tasks``: its capability ad, and a
    claim on ``resultType: task`` that polls the task to its end (the SDK client uses
    it when it drives a call itself: input_required rounds, a stale tool listing)."""

    identifier = TASKS_EXTENSION

    def __init__(self, server_name: str, hide: Callable[[str], str]) -> None:
        self.server_name = server_name
        self.hide = hide
        """Masks the connection's secrets in what the server says of a task."""

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The ``task`` result shape of ``tools/call``."""
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve),)

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        limit = ctx.read_timeout_seconds
        deadline = time.monotonic() + (limit if limit is not None and limit < 1e9 else 1e9)
        return await _followed(
            drive(
                ctx.session, self.server_name, created.task_id, ctx.tool_name, deadline, self.hide
            ),
            ctx.session,
            self.server_name,
            created.task_id,
            ctx.tool_name,
            self.hide,
        )


async def _followed(
    driving: Any,
    session: ClientSession,
    server_name: str,
    task_id: str,
    tool_name: str,
    hide: Callable[[str], str],
) -> CallToolResult:
    """``driving``; a wait cut short (timeout, cancellation) leaves a task nobody holds
    a handle of: it is cancelled (:func:`cancel_left`) where the server offers that,
    else logged as left running."""
    try:
        result: CallToolResult = await driving
    except (asyncio.CancelledError, TimeoutError):
        # The watchdog's timeout reaches here as a cancellation too: not told apart.
        await _left_behind(session, server_name, task_id, tool_name, "its call was cut short", hide)
        raise
    return result


async def _given_up(
    session: ClientSession,
    task_id: str,
    tool_name: str,
    error: McpError,
    hide: Callable[[str], str],
) -> McpError:
    """``error``, of a task the client cannot take further, once the task is given up
    (:func:`_left_behind`), saying what became of it."""
    why = "it could not be followed"
    if await _left_behind(session, error.server_name, task_id, tool_name, why, hide):
        fate = "the client cancelled it (tasks/cancel)"
    else:
        task = server_word(task_id)
        fate = f"it may run on, on the server (McpClient.task('{task}') picks it up)"
    return McpError(error.server_name, f"{error.reason}; {fate}", tool_name=tool_name)


async def _left_behind(
    session: ClientSession,
    server_name: str,
    task_id: str,
    tool_name: str,
    why: str,
    hide: Callable[[str], str],
) -> bool:
    """:func:`cancel_left` on a task nobody holds, where the server offers
    ``tasks/cancel``, else a WARNING that it runs on; whether it was cancelled."""
    if cancel_offered(session.server_capabilities, True):
        return await cancel_left(session, server_name, task_id, tool_name, why, hide)
    task = server_word(task_id)  # a hostile server's newline would forge a record
    logger.warning(
        "MCP server '%s': tools/call '%s' ran as task '%s', left running on the "
        "server (McpClient.task('%s') picks it up)",
        server_name,
        tool_name,
        task,
        task,
    )
    return False


def resolving_tasks(
    caller: Any, session: ClientSession, server_name: str, hide: Callable[[str], str]
) -> Any:
    """``caller`` (what sends a plain ``tools/call``) on a session that opted into tasks:
    a call the server chose to run as a task is polled to its end, so ``call_tool``
    still returns the tool's result. The watchdog around the call bounds the polling;
    ``hide`` masks the connection's secrets in what the server says of the task."""
    from mcp.client.extension import UnexpectedClaimedResult

    async def call_tool(name: str, arguments: dict[str, Any], **options: Any) -> Any:
        try:
            return await caller(name, arguments, **options)
        except UnexpectedClaimedResult as claimed:
            created = claimed.result
            if not isinstance(created, CreatedTask):
                raise
        logger.debug(
            "tools/call '%s' runs as task '%s'; polling it", name, server_word(created.task_id)
        )
        deadline = time.monotonic() + 1e9  # the watchdog around the call bounds it
        return await _followed(
            drive(session, server_name, created.task_id, name, deadline, hide),
            session,
            server_name,
            created.task_id,
            name,
            hide,
        )

    return call_tool
