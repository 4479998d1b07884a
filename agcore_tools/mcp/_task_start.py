"""Starting MCP tasks and re-attaching to them (see ``_tasks`` for the handle).

:func:`start_task` sends the task-augmented ``tools/call`` once: it fails as a whole
(translated like ``call_tool``'s errors, and sent again only where the server provably
did not run it, as ``call_tool`` does for a tool that is not safe to repeat), or a task
exists. :func:`attach` makes the handle of a saved task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from .._aio import positive_number, with_timeout
from ..error import McpError, McpTimeoutError, McpUsageError, ToolError
from ._connection import Connection
from ._error_text import server_word
from ._exchange import EXCHANGE, HttpExchange
from ._progress import call_meta
from ._protocol import is_modern
from ._recover import note_run, send_again
from ._session import BACKSTOP, GRACE, Session, check_timeout
from ._tasks import McpTask

__all__ = ["attach", "start_task"]

logger = logging.getLogger("agcore_tools.mcp")


async def start_task(
    session: Session,
    name: str,
    args: Mapping[str, Any] | None,
    ttl: float | None,
    timeout: float | None,
) -> McpTask:
    """Send ``tools/call`` as a task (see :meth:`McpClient.start_task`)."""
    limit = (
        session.settings.timeout if timeout is None else check_timeout(session.server_name, timeout)
    )
    if ttl is not None and not positive_number(ttl):
        raise McpUsageError(f"a task's ttl must be a positive number of seconds, got {ttl!r}")
    started = time.monotonic()
    action = f"tools/call '{name}' as a task"
    conn = await session.ready(action, started, limit)
    arguments = dict(args) if args else {}

    async def create(conn: Connection, remaining: float) -> McpTask:
        client = conn.client
        if client is None:
            raise session.not_usable(conn, name, action)
        if is_modern(client):
            return await _create_modern(session, conn, name, arguments, remaining)
        return await _create_legacy(session, conn, name, arguments, ttl, remaining)

    exchange = HttpExchange() if conn.http else None
    token = EXCHANGE.set(exchange)
    try:
        return await create(conn, max(0.0, started + limit - time.monotonic()))
    except ToolError:
        raise  # refused before sending (no tasks offered)
    except Exception as exc:  # noqa: BLE001 - send_again raises it translated
        # Sent again only where the server provably did not run it (a forgotten
        # session, a 429 or 503 with Retry-After): else a task may exist.
        again = send_again(
            session,
            conn,
            exc,
            exchange,
            action=action,
            tool_name=name,
            limit=limit,
            started=started,
            safe=lambda: False,
            send=create,
        )
        try:
            return await with_timeout(again, max(0.0, started + limit + GRACE - time.monotonic()))
        except TimeoutError as timed_out:
            raise note_run(
                McpTimeoutError(session.server_name, f"{action} timed out after {limit:g} s"),
                True,
                name,
            ) from timed_out
    finally:
        EXCHANGE.reset(token)


async def _create_legacy(
    session: Session,
    conn: Connection,
    name: str,
    arguments: dict[str, Any],
    ttl: float | None,
    limit: float,
) -> McpTask:
    from ._task_wire import parse_status, send_unvalidated

    client = conn.client
    assert client is not None
    tasks = client.server_capabilities.tasks
    requests = tasks.requests if tasks is not None else None
    tools = requests.tools if requests is not None else None
    if tools is None or tools.call is None:
        raise McpError(
            session.server_name,
            f"cannot start tool '{name}' as a task: the server does not offer tasks for "
            f"tools/call (no tasks.requests.tools.call capability on {client.protocol_version})",
            tool_name=name,
        )
    params: dict[str, Any] = {"name": name, "arguments": arguments, "task": {}}
    if ttl is not None:
        params["task"]["ttl"] = round(ttl * 1000)
    meta = call_meta(conn.request_meta)
    if meta:
        params["_meta"] = dict(meta)
    raw = await _bounded(send_unvalidated(client.session, "tools/call", params, limit), limit)
    if "task" not in raw:  # a server that ran it at once after all
        from mcp_types import CallToolResult

        done = CallToolResult.model_validate(raw, by_name=False)
        return McpTask(session, None, name, client.protocol_version, done=done)
    status = parse_status(raw)
    logger.debug(
        "MCP server '%s': tool '%s' runs as task '%s'",
        session.server_name,
        name,
        server_word(status.task_id),
    )
    return McpTask(session, status.task_id, name, client.protocol_version, status=status)


async def _create_modern(
    session: Session, conn: Connection, name: str, arguments: dict[str, Any], limit: float
) -> McpTask:
    from mcp_types import CallToolResult

    from ._task_wire import TASKS_EXTENSION, parse_status, wire

    client = conn.client
    assert client is not None
    if not getattr(session.settings, "tasks", False):
        raise McpError(
            session.server_name,
            f"cannot start tool '{name}' as a task on {client.protocol_version}: tasks are "
            "an opt-in extension there; create the client with McpClient(..., tasks=True)",
            tool_name=name,
        )
    extensions = client.server_capabilities.extensions or {}
    if TASKS_EXTENSION not in extensions:
        raise McpError(
            session.server_name,
            f"cannot start tool '{name}' as a task: the server does not offer the "
            f"{TASKS_EXTENSION} extension",
            tool_name=name,
        )
    result = await _bounded(
        client.session.call_tool(
            name,
            arguments,
            read_timeout_seconds=limit,
            meta=call_meta(conn.request_meta),
            allow_claimed=True,
        ),
        limit,
    )
    if isinstance(result, CallToolResult):  # the server chose to answer at once
        return McpTask(session, None, name, client.protocol_version, done=result)
    status = parse_status(wire(result))
    return McpTask(session, status.task_id, name, client.protocol_version, status=status)


async def _bounded(awaitable: Awaitable[Any], limit: float) -> Any:
    return await with_timeout(awaitable, limit + BACKSTOP)


def attach(session: Session, saved: Mapping[str, Any] | str) -> McpTask:
    """The handle of a task saved with :meth:`McpTask.to_json` (or known by its id)."""
    if isinstance(saved, str):
        if not saved:
            raise McpUsageError("a task id must be a non-empty string")
        client = session.client
        protocol = client.protocol_version if client is not None else ""
        return McpTask(session, saved, "", protocol or "")
    if not isinstance(saved, Mapping):
        raise McpUsageError(
            f"a saved task must be a mapping or a task id, got {type(saved).__name__}"
        )
    server = saved.get("server")
    if server != session.server_name:
        raise McpUsageError(
            f"task {saved.get('task_id')!r} was started on MCP server {server!r}, not on "
            f"'{session.server_name}'"
        )
    task_id = saved.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise McpUsageError(f"a saved task needs a task_id, got {task_id!r}")
    return McpTask(session, task_id, str(saved.get("tool") or ""), str(saved.get("protocol") or ""))
