"""MCP Tasks: start a tool call as a task, follow it, fetch its result, cancel it, and
pick it up again from another client or process.

:meth:`McpClient.start_task` sends a task-augmented ``tools/call`` and returns an
:class:`McpTask`; :meth:`McpClient.task` re-attaches to one from :meth:`McpTask.to_json`
(or its id); both are in ``_task_start``. This module is the handle. Both protocol eras
are spoken (the wire is in ``_task_wire``):

* 2025-11-25 (SEP-1686): needs the server's ``tasks.requests.tools.call`` capability;
  the request asks for a ``ttl``; the result is fetched with ``tasks/result``.
* 2026-07-28 (SEP-2663): needs ``McpClient(tasks=True)`` (the opt-in is session-wide,
  see :class:`McpClient`) and the server's ``io.modelcontextprotocol/tasks`` extension;
  the server decides whether the call becomes a task (a tool whose support is
  "optional" may answer at once: the handle is then already complete), and ``ttl`` is
  not sent (the extension has no such request field). The result comes inline with
  the completed task.

A create call is never sent twice once the server may have run it (see ``_task_start``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..error import (
    McpError,
    McpInputRequiredError,
    McpTimeoutError,
    McpUsageError,
    ToolError,
    ToolExecutionError,
)
from ._error_text import quoted, server_word
from ._protocol import is_modern
from ._results import result_value
from ._session import Session, check_timeout
from .models import McpTaskStatus

__all__ = ["McpTask", "StatusCallback", "give_up"]

logger = logging.getLogger("agcore_tools.mcp")

StatusCallback = Callable[[McpTaskStatus], "Awaitable[None] | None"]
"""Receives each new status (or status message) of a task being waited for."""

_NOT_FOUND_CODES = (-32602,)
"""JSON-RPC codes a server answers for a task id it does not know (INVALID_PARAMS)."""


class McpTask:
    """A task on an MCP server: a tool call that runs on after its request returned.

    Get one from :meth:`McpClient.start_task` or :meth:`McpClient.task`. The handle
    holds no connection of its own: it sends through the client that made it, so it
    lives through reconnects; :meth:`to_json` saves what another process needs to
    pick the task up again.

    Example:
        >>> async def build(client: Any) -> Any:
        ...     task = await client.start_task("build", {"seconds": 2, "label": "x"})
        ...     print(task.task_id, task.server_name, task.tool_name, task.protocol)
        ...     saved = task.to_json()  # store it: client.task(saved) re-attaches
        ...     print((await task.status()).message)  # e.g. "step 1/3"
        ...     return await task.result(timeout=60, on_status=print)
        >>> async def stop(client: Any, saved: dict[str, Any]) -> None:
        ...     await client.task(saved).cancel()
    """

    def __init__(
        self,
        session: Session,
        task_id: str | None,
        tool_name: str,
        protocol: str,
        *,
        status: McpTaskStatus | None = None,
        done: Any = None,
    ) -> None:
        self._session = session
        self.task_id = task_id
        """The server's id of the task; None when the server ran the call at once."""
        self.tool_name = tool_name
        """The tool the task runs ("" when re-attached by id alone)."""
        self.protocol = protocol
        """The protocol version the task was created under."""
        self.last_status = status
        """The last status seen (None before the first)."""
        self._done = done  # the CallToolResult of a call the server ran at once

    @property
    def server_name(self) -> str:
        """The client's name for the server the task runs on."""
        return self._session.server_name

    def to_json(self) -> dict[str, Any]:
        """What :meth:`McpClient.task` needs to re-attach, as plain JSON.

        Raises:
            McpUsageError: The server ran the call at once: there is no task to re-attach
                to (:meth:`result` has its value).

        Example:
            >>> from agcore_tools import McpClient, StdioTransport
            >>> client = McpClient("ci", StdioTransport("server"))
            >>> client.task({"server": "ci", "task_id": "t-7", "tool": "build",
            ...              "protocol": "2025-11-25"}).to_json()["task_id"]
            't-7'
        """
        if self.task_id is None:
            raise McpUsageError(
                f"MCP server '{self.server_name}' ran tool '{self.tool_name}' at once; "
                "there is no task to save (result() has its value)"
            )
        return {
            "server": self.server_name,
            "task_id": self.task_id,
            "tool": self.tool_name,
            "protocol": self.protocol,
        }

    async def status(self) -> McpTaskStatus:
        """The task's status now (``tasks/get``).

        Raises:
            McpError: The server no longer knows the task (expired, or forgotten in a
                restart), or the request failed as :meth:`McpClient.call_tool`'s would.
        """
        if self.task_id is None:
            return McpTaskStatus("", "completed")
        status, _ = await self._get()
        return status

    async def result(
        self, *, timeout: float | None = None, on_status: StatusCallback | None = None
    ) -> Any:
        """Wait for the task to end and return its value, as :meth:`McpClient.call_tool`
        returns a tool's.

        Polls ``tasks/get``: the first wait is 20 ms, and each later one doubles, up to
        the server's ``pollInterval`` (1 s when it suggests none, 20 ms at the least).
        ``on_status`` (sync or async) gets each new status or status message; what it
        raises ends the wait (the task runs on).

        A task created on the other protocol era than the client's connection now
        speaks is refused (its wire differs): re-attach with the same ``protocol=``. So is
        a 2026-07-28 task once the client has fallen back to the ``initialize``
        handshake on its own (the server asked for it): the error says so.

        Raises:
            ToolExecutionError: The tool answered ``isError`` (its text with the
                connection's secrets masked), or the task was cancelled (a model
                reading it can decide what to do next).
            McpError: The task failed (with the server's error, the connection's
                secrets masked; recoverable, so a model reads it), or the server no
                longer knows it (expired, or forgotten in a restart; not recoverable),
                or (2026-07-28) it waits for input
                (:class:`~agcore_tools.McpInputRequiredError`).
            McpTimeoutError: Still running after ``timeout`` seconds (default: no limit).
                The task is not cancelled: a later ``result()`` can still get it.
        """
        if self.task_id is None:
            return result_value(self._done, self.tool_name, hide=self._hide)
        limit = None if timeout is None else check_timeout(self.server_name, timeout)
        began = time.monotonic()
        deadline = None if limit is None else began + limit
        from ._task_wire import FIRST_POLL, next_wait

        delay = FIRST_POLL
        seen: tuple[str, str | None] | None = None
        answered: set[str] = set()
        while True:
            status, raw = await self._get()
            if on_status is not None and (status.status, status.message) != seen:
                await _notify(on_status, status)
            seen = (status.status, status.message)
            if status.terminal:
                return await self._outcome(status, raw)
            if status.status == "input_required" and not self._modern():
                # A 2025-11-25 server sends its questions (elicitation/create, answered by
                # the client's elicitation_handler) only to a client in tasks/result,
                # which then waits for the end, bounded by the deadline or the timeout.
                try:
                    payload = await self._payload(status, _left(deadline))
                except McpTimeoutError as exc:
                    if deadline is None:
                        continue  # the client's timeout cut tasks/result short; no limit here
                    # Cut short by the client's timeout, maybe long before the deadline
                    # (a Temporal activity's is a year): say how long it waited.
                    waited = round(time.monotonic() - began, 1)
                    raise self._still(
                        status, waited if limit is None else min(limit, waited)
                    ) from exc
                status, raw = await self._get()
                if on_status is not None and (status.status, status.message) != seen:
                    await _notify(on_status, status)
                return result_value(payload, self._label, hide=self._hide)
            asked = (raw.get("inputRequests") or {}) if status.status == "input_required" else {}
            # Keys already answered stay listed until the server reads the update.
            fresh = {k: v for k, v in asked.items() if k not in answered}
            if fresh and self._answerable(fresh):
                # 2026-07-28, with the client's handlers for every request: they answer
                # at once, as they do a plain call's (tasks/update).
                await self.answer(await self._ask_client(fresh))
                answered.update(fresh)
                delay = FIRST_POLL
                continue
            if fresh or (status.status == "input_required" and not asked):
                # Else the caller answers with answer() (the loop pauses on it).
                raise McpInputRequiredError(
                    self.server_name,
                    f"task '{self._shown_id}' of tool '{self.tool_name}' waits for input "
                    f"({_keys(asked)}) on the server; answer it with McpTask.answer(), "
                    "then wait again with result() (McpClient.task(error.task) gives "
                    "the McpTask)",
                    asked,
                    tool_name=self.tool_name or None,
                    task=self.to_json(),
                )
            wait = next_wait(delay, status)
            left = _left(deadline)
            if left is not None and left <= 0:
                raise self._still(status, limit)
            await asyncio.sleep(wait if left is None else min(wait, left))
            delay *= 2

    async def answer(self, responses: Mapping[str, Mapping[str, Any]]) -> None:
        """Answer the task's input requests (2026-07-28 ``tasks/update``): ``responses``
        maps the server's keys (:attr:`McpInputRequiredError.input_requests`) to
        elicitation results, ``{"action": "accept", "content": {...}}``. Then wait
        again with :meth:`result`.

        Raises:
            McpUsageError: The task is on a 2025-11-25 connection, whose questions go to
                the client's ``elicitation_handler`` instead.
            McpError: The server no longer knows the task, or refused the answer.

        Example:
            >>> async def colour(task: McpTask) -> Any:
            ...     try:
            ...         return await task.result(timeout=60)
            ...     except McpInputRequiredError as asked:  # {"q1": {...}}
            ...         await task.answer({"q1": {"action": "accept", "content": {"answer": "blue"}}})
            ...         return await task.result(timeout=60)
        """
        from ._task_wire import RawResult, UpdateTask, update_params

        if not self._modern():
            raise McpUsageError(
                f"task '{self._shown_id}': answer() is for 2026-07-28 tasks; on 2025-11-25 "
                "the client's elicitation_handler answers a task's questions"
            )
        assert self.task_id is not None  # a task answered at once asks nothing
        params = update_params(self.task_id, responses)

        async def send(client: Any, meta: Any) -> Any:
            return await client.session.send_request(
                UpdateTask(params={**params, **({"_meta": meta} if meta else {})}), RawResult
            )

        await self._send("tasks/update", send)

    async def cancel(self) -> McpTaskStatus | None:
        """Ask the server to cancel the task (``tasks/cancel``); idempotent.

        Returns the status the server answers with (2025-11-25), or None when it only
        acknowledges (2026-07-28: :meth:`status` tells when it has stopped), or when
        the server ran the call at once.
        """
        if self.task_id is None:
            return None
        from ._task_wire import CancelTask, RawResult, parse_status, wire

        raw = await self._send(
            "tasks/cancel",
            lambda client, meta: client.session.send_request(
                CancelTask(params={"taskId": self.task_id, "_meta": meta}),  # type: ignore[arg-type]
                RawResult,
            ),
        )
        fields = wire(raw)
        return parse_status(fields) if "status" in fields else None

    def __repr__(self) -> str:
        state = self.last_status.status if self.last_status is not None else "?"
        return f"<McpTask {self.task_id!r} {self.tool_name!r} on {self.server_name!r} {state}>"

    # -- internals ---------------------------------------------------------------------

    @property
    def _label(self) -> str:
        # What a ToolExecutionError names: the tool, or the task when re-attached by id.
        return self.tool_name or f"task {self._shown_id}"

    @property
    def _shown_id(self) -> str:
        # The server chose the id: errors and logs show it escaped and cut.
        return server_word(self.task_id)

    def _answerable(self, asked: Mapping[str, Any]) -> bool:
        # Whether the client has a handler for each input request (by its method).
        settings = self._session.settings
        handlers = {
            "elicitation/create": settings.elicitation_handler,
            "sampling/createMessage": settings.sampling_handler,
            "roots/list": settings.roots_handler,
        }
        return all(
            isinstance(r, Mapping) and handlers.get(str(r.get("method"))) is not None
            for r in asked.values()
        )

    async def _ask_client(self, asked: Mapping[str, Any]) -> dict[str, Any]:
        from ._task_wire import ask_client

        assert self.task_id is not None
        task_id, tool = self.task_id, self.tool_name
        # Bounded by the client's timeout; not asked again on a new connection.
        return await self._session.send(
            f"input requests of task '{self._shown_id}'",
            lambda client, _: ask_client(client.session, self.server_name, task_id, tool, asked),
            resend=False,
        )

    def _modern(self) -> bool:
        client = self._session.client
        return client is not None and is_modern(client)

    async def _get(self) -> tuple[McpTaskStatus, dict[str, Any]]:
        from ._task_wire import GetTask, RawResult, parse_status, wire

        raw = wire(
            await self._send(
                "tasks/get",
                lambda client, meta: client.session.send_request(
                    GetTask(params={"taskId": self.task_id, "_meta": meta}),  # type: ignore[arg-type]
                    RawResult,
                ),
            )
        )
        try:
            status = parse_status(raw)
        except ValueError as exc:  # quoting the server's answer
            error = McpError(self.server_name, f"tasks/get '{self._shown_id}': {self._quote(exc)}")
            raise self._masked(error, exc)  # noqa: B904 - its cause is set, masked
        self.last_status = status
        return status, raw

    async def _send(self, what: str, call: Callable[[Any, Any], Awaitable[Any]]) -> Any:
        """Send a ``tasks/*`` request through the session (timeout, restarts, errors);
        an unknown task id becomes the :class:`McpError` that says so."""
        from mcp.shared.exceptions import MCPError

        async def guarded(client: Any, meta: Any) -> Any:
            self._check_era(client)
            try:
                return await call(client, meta)
            except MCPError as exc:
                if exc.code in _NOT_FOUND_CODES:
                    raise self._gone(exc.message) from exc
                raise

        return await self._session.send(f"{what} '{self._shown_id}'", guarded)

    def _check_era(self, client: Any) -> None:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        now = client.protocol_version
        if not self.protocol:
            self.protocol = now  # re-attached by id alone: this session's era
            return
        modern = now in MODERN_PROTOCOL_VERSIONS
        if (self.protocol in MODERN_PROTOCOL_VERSIONS) == modern:
            return
        if not modern and self._session.settings.protocol != "legacy":
            # Not the app's setting: the client fell back to the handshake on its own
            # (the server asked for it, or broke on the probe; see _handshake).
            raise McpUsageError(
                f"MCP server '{self.server_name}': task '{self._shown_id}' was created on "
                f"protocol {self.protocol}, and this client has since fallen back to the "
                f"initialize handshake with the server ({now}, whose tasks wire differs), "
                "so the task cannot be re-attached (it may still run on the server): start "
                "the call again; an McpClient made with protocol='legacy' starts on the "
                "handshake this server wants, and its tasks can be re-attached"
            )
        raise McpUsageError(
            f"MCP server '{self.server_name}': task '{self._shown_id}' was created on "
            f"protocol {self.protocol}, and this connection speaks {now}, whose tasks "
            "wire differs; re-attach from a client with the same protocol= setting"
        )

    def _gone(self, detail: str) -> McpError:
        return McpError(
            self.server_name,
            f"task '{self._shown_id}' no longer exists on server '{self.server_name}' (it "
            f"expired, or the server forgot it in a restart): {self._quote(detail)}",
            tool_name=self.tool_name or None,
        )

    async def _outcome(
        self, status: McpTaskStatus, raw: dict[str, Any], left: float | None = None
    ) -> Any:
        from mcp_types import CallToolResult

        if status.status == "cancelled":
            raise ToolExecutionError(self._label, f"task '{self._shown_id}' was cancelled")
        if self._modern():
            payload = raw.get("result")
            if status.status == "completed":
                if not isinstance(payload, Mapping):
                    raise McpError(
                        self.server_name,
                        f"task '{self._shown_id}' completed without a result",
                        tool_name=self.tool_name or None,
                    )
                result = CallToolResult.model_validate(payload, by_name=False)
                return result_value(result, self._label, hide=self._hide)
            error = raw.get("error")
            detail = error.get("message") if isinstance(error, Mapping) else status.message
            raise self._failed(detail)
        return result_value(await self._payload(status, left), self._label, hide=self._hide)

    async def _payload(self, status: McpTaskStatus, left: float | None) -> Any:
        """``tasks/result`` (2025-11-25): the task's ``CallToolResult``."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import REQUEST_TIMEOUT, CallToolResult

        from ._task_wire import GetTaskPayload, RawResult, wire

        async def fetch(client: Any, meta: Any) -> Any:
            try:
                return await client.session.send_request(
                    GetTaskPayload(params={"taskId": self.task_id, "_meta": meta}),  # type: ignore[arg-type]
                    RawResult,
                    request_read_timeout_seconds=left,
                )
            except MCPError as exc:
                # A timed-out wait is no failure of the task, which runs on: the session
                # makes it an McpTimeoutError.
                if (
                    exc.code in _NOT_FOUND_CODES
                    or exc.code == REQUEST_TIMEOUT
                    or status.status == "completed"
                ):
                    raise
                raise self._failed(exc.message) from exc

        raw = wire(await self._send("tasks/result", fetch))
        if status.status == "failed" and "content" not in raw:
            raise self._failed(status.message)
        return CallToolResult.model_validate(raw, by_name=False)

    def _still(self, status: McpTaskStatus, limit: float | None) -> McpTimeoutError:
        return McpTimeoutError(
            self.server_name,
            f"task '{self._shown_id}' of tool '{self.tool_name}' still "
            f"{server_word(status.status)} "
            f"after {limit or 0:g} s; it runs on (result() again waits for it, cancel() "
            "stops it)",
            tool_name=self.tool_name or None,
        )

    def _failed(self, detail: str | None) -> ToolError:
        # The tool ran and failed, as an isError result says on the plain path: the
        # model reads it and the loop goes on (a task that no longer exists stops it).
        error = McpError(
            self.server_name,
            f"task '{self._shown_id}' of tool '{self.tool_name}' failed: "
            f"{self._quote(detail) if detail else 'the server gave no reason'}",
            tool_name=self.tool_name or None,
            recoverable=True,
            may_have_run=True,
        )
        return self._masked(error)

    def _masked(self, error: ToolError, cause: BaseException | None = None) -> ToolError:
        """``error`` (raised from ``cause``) with the connection's secrets masked, its
        chain too: what the server says of a task (read after its request returned, so
        not masked with that request's errors, see ``_recover.classify``) may echo the
        credential it was sent."""
        error.__cause__ = cause
        return self._session.secrets.masked_error(error)

    def _hide(self, text: str) -> str:
        """``text`` with the connection's secrets masked (a failed tool's own words)."""
        return self._session.secrets.mask(text)

    def _quote(self, said: object) -> str:
        """What the server ``said`` of the task, in an error: masked, and made safe to log
        (``_error_text.quoted``)."""
        return quoted(str(said), self._hide)


async def give_up(task: McpTask, why: str) -> bool:
    """Cancel ``task`` (``tasks/cancel``), which its caller gives up on with no handle left
    to anyone (``why``: "its call timed out"), best effort (see ``_task_wire.cancel_left``:
    within a second, never raising); whether the server accepted it. Nothing is sent for
    a task that has ended, on a connection that is gone or speaks the other era, or to a
    server that does not offer ``tasks/cancel``: a WARNING then says the task may run on.
    """
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from ._task_wire import cancel_left, cancel_offered

    status = task.last_status
    if task.task_id is None or (status is not None and status.terminal):
        return False
    session = task._session
    conn = session.conn
    client = conn.client if conn is not None and conn.usable else None
    modern = client is not None and is_modern(client)
    if client is None:
        reason = "the connection is closed"
    elif (task.protocol in MODERN_PROTOCOL_VERSIONS) != modern:
        reason = f"this connection speaks {client.protocol_version}, not its era"
    elif not cancel_offered(client.server_capabilities, modern):
        reason = "the server does not offer tasks/cancel"
    else:
        hide = session.secrets.mask
        return await cancel_left(
            client.session, task.server_name, task.task_id, task.tool_name, why, hide
        )
    shown = task._shown_id
    logger.warning(
        "MCP server '%s': task '%s' of tool '%s' (%s) runs on, unattached: not cancelled, "
        "as %s (McpClient.task('%s') picks it up)",
        task.server_name,
        shown,
        task.tool_name,
        why,
        reason,
        shown,
    )
    return False


async def give_up_timed_out(task: McpTask, error: McpTimeoutError) -> McpTimeoutError:
    """:func:`give_up` on ``task``, whose call timed out with ``error`` (written for a
    caller who still holds the task: "it runs on (result() again waits for it, ...)"),
    and the error to raise instead, saying what became of the task."""
    shown = task._shown_id
    if await give_up(task, "its call timed out"):
        fate = "the client cancelled it (tasks/cancel)"
    else:
        fate = f"it may run on, on the server (McpClient.task('{shown}') picks it up)"
    status = task.last_status
    still = f" still {server_word(status.status)}" if status is not None else ""
    return McpTimeoutError(
        task.server_name,
        f"task '{shown}' of tool '{task.tool_name}'{still} when its call timed out; {fate}",
        tool_name=task.tool_name or None,
    )


async def give_up_asking(task: McpTask, asked: McpInputRequiredError) -> McpError:
    """:func:`give_up` on ``task``, which waits for input (``asked``) that no one can
    give where its call runs (a Temporal activity cannot pause for it), and the error
    to raise instead, saying what became of the task (unrecoverable, as ``asked``)."""
    shown = task._shown_id
    if await give_up(task, "no one can answer its input requests"):
        fate = "the client cancelled it (tasks/cancel)"
    else:
        fate = f"it may wait on, on the server (McpClient.task('{shown}') picks it up)"
    return McpError(
        task.server_name,
        f"task '{shown}' of tool '{task.tool_name}' waits for input "
        f"({_keys(asked.input_requests)}) that this client has no handler for, and its "
        f"call cannot pause for an answer here; {fate}",
        tool_name=task.tool_name or None,
    )


def _keys(asked: Mapping[str, Any]) -> str:
    # The server's keys of its input requests, escaped and cut (they are its words).
    return ", ".join(server_word(key) for key in sorted(asked)) or "unnamed"


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


async def _notify(callback: StatusCallback, status: McpTaskStatus) -> None:
    outcome = callback(status)
    if inspect.isawaitable(outcome):
        await outcome
