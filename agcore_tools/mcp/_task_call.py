"""A registry call of an MCP tool run as a task: started once, waited for, and left
running in the history when the run stops before it ends.

The adapter starts the task (:meth:`McpClient.start_task`) and waits for it up to
``into_tools(task_wait=)`` seconds (the client's ``timeout`` by default), passing each status change to the call's listeners as a
:class:`~agcore_tools.ToolProgress`. A task still running then (or when the loop is
cancelled) pauses the call: :class:`~agcore_tools.pending.RunningTask` goes in
``response.pending``, and the task's handle (:meth:`McpTask.to_json`) rides on the
open call in the history. The next ``submit_with_tools(None, registry)``, in any
process, re-attaches to the same task: the ``tools/call`` is never sent again. A call
that stops waiting with its handle kept nowhere (cut off by its time limit, cancelled
outside the loop, asked for input in a Temporal activity) cancels the task
(``_tasks.give_up``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from .._clock import expired_limit
from ..base import ToolContext
from ..error import McpInputRequiredError, McpTimeoutError
from ..pending import KEEPER, LEFT_RUNNING, CallPaused, InputRequest, RunningTask, WorkKeeper
from ._input_pause import new_nonce, question_id
from ._tasks import McpTask, give_up, give_up_asking, give_up_timed_out
from .models import McpTaskStatus

__all__ = ["TaskCaller", "paused_on", "run_task"]

logger = logging.getLogger("agcore_tools.mcp")

_FOREVER = 365 * 24 * 3600.0
"""The wait of a kept task with no limit: its keeper (an activity's timeout) bounds it."""


class TaskCaller(Protocol):
    """What a task call needs of its client (:class:`~agcore_tools.McpClient` is one)."""

    @property
    def server_name(self) -> str:
        """Names the server."""
        ...

    async def start_task(self, name: str, args: Mapping[str, Any] | None = None) -> McpTask:
        """Send the task-augmented ``tools/call``."""
        ...

    def task(self, saved: Mapping[str, Any] | str) -> McpTask:
        """Re-attach to a task from its saved handle."""
        ...


async def run_task(
    client: TaskCaller,
    tool: str,
    name: str,
    args: Mapping[str, Any],
    ctx: ToolContext,
    resume: Mapping[str, Any] | None,
    wait: float,
) -> Any:
    """Start (or, with ``saved``, re-attach to) the task of ``tool`` (registered as
    ``name``) and wait for it: its value, or, still running after the client's timeout,
    the call's pause once it has waited ``wait`` seconds. Cancelled in a loop's tool
    turn (not by its time limit), the call leaves the handle in the turn's
    :data:`~agcore_tools.pending.LEFT_RUNNING` under its call id, for
    :func:`paused_on`; cut off by its time limit, or cancelled anywhere else, it
    cancels the task (``tasks/cancel``, best effort), as it does when it has no call id
    to pause with, unless a keeper (a Temporal activity) holds the handle for a retry
    (it does not when the keeper's call is given up: its run cancelled, or gone). A task that
    waits for input no handler answers, and that the call cannot pause on (no call id,
    no form), raises its :class:`~agcore_tools.McpInputRequiredError`, which carries
    the handle; under a keeper, where no one can answer, the task is cancelled."""
    keeper = KEEPER.get()
    saved = resume["state"]["task"] if resume is not None else None
    if saved is None and keeper is not None:
        saved = keeper.recall()  # a retried attempt: the task an earlier one started
    task = client.task(saved) if saved is not None else await client.start_task(tool, args)
    if resume is not None and resume.get("answers"):
        keys: Mapping[str, str] = resume["state"].get("keys") or {}
        await task.answer({keys[i]: answer for i, answer in resume["answers"].items()})
    call_id = ctx.call_id
    if task.task_id is not None and keeper is not None:
        keeper.keep(task.to_json())
        wait = keeper.wait if keeper.wait is not None else _FOREVER
    seen = 0

    def report(status: McpTaskStatus) -> None:
        nonlocal seen
        seen += 1
        text = status.status if status.message is None else f"{status.status}: {status.message}"
        ctx.report_progress(seen, None, text)

    try:
        value = await task.result(timeout=wait, on_status=report)
    except asyncio.CancelledError:
        left = LEFT_RUNNING.get()
        timed_out = expired_limit() is not None  # the call's time limit, not the loop's stop
        if left is not None and call_id and task.task_id is not None and not timed_out:
            left.setdefault(call_id, []).append(task)  # the loop may keep the call open
        elif keeper is None or _given_up(keeper):  # a cancelled Temporal run's too
            why = "its call timed out" if timed_out else "its call was cancelled"
            await give_up(task, why)
        raise
    except McpTimeoutError as timed_out:
        if not call_id or task.task_id is None or keeper is not None:
            if keeper is None:
                raise await give_up_timed_out(task, timed_out) from timed_out
            raise
        return _pause(task, call_id, name)
    except McpInputRequiredError as asked:
        if keeper is not None:
            # No one can answer in a keeper's call (a Temporal activity), nor would a
            # retry: the task would wait on, unattached.
            raise await give_up_asking(task, asked) from asked
        questions = _questions(asked.input_requests, call_id, name, new_nonce())
        if not call_id or questions is None:
            raise  # to the caller, with the task's handle (asked.task) to answer it
        paused = _pause(task, call_id, name)
        keys = {q.request_id: key for q, key in questions}
        state = {**paused.state, "keys": keys}
        return CallPaused((*(q for q, _ in questions), *paused.requests), state)
    return value


def _given_up(keeper: WorkKeeper) -> bool:
    """Whether the cancelled call ``keeper`` keeps work for is given up for good, so
    that its task is cancelled too: asked of the keeper's optional ``given_up()`` (a
    Temporal activity's). A keeper without one, or whose answer fails, keeps the task
    for a retry, as before it could say."""
    asked = getattr(keeper, "given_up", None)
    try:
        return bool(asked()) if callable(asked) else False
    except Exception:  # noqa: BLE001 - never in place of the cancellation being raised
        return False


def _questions(
    asked: Mapping[str, Any], call_id: str | None, name: str, nonce: str
) -> list[tuple[InputRequest, str]] | None:
    """A task's input requests as questions for the user, with the server's keys; None
    unless every one is a form elicitation."""
    found = []
    for key, request in asked.items():
        params = request.get("params") if isinstance(request, Mapping) else None
        if request.get("method") != "elicitation/create" or not isinstance(params, Mapping):
            return None
        if params.get("mode", "form") != "form":
            return None
        message = str(params.get("message", ""))
        schema = dict(params.get("requestedSchema") or {})
        asking = InputRequest(
            question_id(call_id, key, nonce), call_id or "", name, message, schema
        )
        found.append((asking, key))
    return found


def paused_on(started: dict[str, list[Any]], call_id: str, tool_name: str) -> CallPaused | None:
    """The pause of call ``call_id`` whose task runs on, taken out of ``started`` (a
    turn's :data:`~agcore_tools.pending.LEFT_RUNNING`); None when the call has no task
    running, or when several calls left one under the id (which task is whose cannot be
    told: none is put in another's history)."""
    tasks = started.pop(call_id, [])
    if len(tasks) > 1:
        logger.warning(
            "%d running tasks of tool '%s' share the call id %r; none is kept as the "
            "stopped call's (they run on, unattached)",
            len(tasks),
            tool_name,
            call_id,
        )
        return None
    if not tasks or tasks[0].task_id is None:
        return None
    return _pause(tasks[0], call_id, tool_name)


def _pause(task: McpTask, call_id: str, tool_name: str) -> CallPaused:
    status = task.last_status
    task_id = task.task_id
    assert task_id is not None  # only a task the server created is waited for
    item = RunningTask(
        f"{call_id}~task",
        call_id,
        tool_name,
        task.server_name,
        task_id,
        status.status if status is not None else "working",
        status.message if status is not None else None,
    )
    return CallPaused((item,), {"task": task.to_json()})
