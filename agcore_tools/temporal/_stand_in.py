"""The workflow's stand-in registry: one stand-in per tool the workers of the run's
task queues describe, carrying the tool's definition and rules, whose ``execute`` runs
the real tool as an activity; and how the workflow reads an activity's failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

from ..base import BaseTool, ToolContext
from ..cycle.config import CycleConfig
from ..error import LlmConfigError, LlmError, ToolError, ToolExecutionError, ToolTimeoutError
from ..permission import Permission, PermissionChecker, PermissionConfig, PermissionLike
from ..registry import ToolRegistry
from . import _patches as patches
from ._payloads import (
    RESULT_TOO_LARGE,
    TOOL_TIMED_OUT,
    Catalogue,
    ToolCallInput,
    ToolCallOutput,
    ToolSpec,
    permission_config,
    permissions_of,
    restored,
)

__all__ = [
    "ActivityTool",
    "QueuePolicies",
    "failure_reason",
    "raise_if_cancelled",
    "retry_policy",
    "stand_in_registry",
]

_DESCRIBE_TIMEOUT = timedelta(seconds=30)
_QUEUE_WAIT = timedelta(seconds=60)
"""How long a run waits for a worker of one of its ``tool_task_queues`` to pick up its
``describe_tools``: a queue no worker polls (a misspelt name, workers not deployed)
fails the run, rather than leaving it waiting forever."""
_NO_TIMEOUT = timedelta(days=1)  # Temporal needs some bound; CycleConfig's None means none


class ActivityTool(BaseTool):
    """A stand-in for a worker's tool: its definition and rules; ``execute`` runs the
    real tool as an activity on the worker's task queue."""

    def __init__(
        self,
        spec: ToolSpec,
        queue: str,
        config: CycleConfig,
        *,
        as_text: bool = True,
        verbatim_names: bool = False,
        unwraps: bool = True,
    ) -> None:
        self.name = spec.name
        self.description = spec.description
        self.parameters = spec.parameters_schema()
        self.strict = spec.strict
        self.output_schema = spec.returns_schema()
        self.required_permissions = permissions_of(spec.permissions, verbatim=verbatim_names)
        self.needs_approval = (
            self._asks if spec.approval == "per_call" else spec.approval == "always"
        )
        self._queue = spec.task_queue or queue
        timeout = spec.timeout_secs or config.limits.tool_timeout
        self._timeout = timedelta(seconds=timeout) if timeout else _NO_TIMEOUT
        attempts = spec.max_attempts or config.retries.max_retries + 1
        self._retry = retry_policy(config, attempts, [RESULT_TOO_LARGE])
        self._asks_retry = retry_policy(config, config.retries.max_retries + 1, [])
        beats = spec.heartbeat_secs
        self._heartbeat = timedelta(seconds=beats) if beats else None
        self._as_text = as_text
        self._unwraps = unwraps

    def _call(self, args: dict[str, Any], ctx: ToolContext) -> ToolCallInput:
        return ToolCallInput(
            self.name,
            dict(args),
            ctx.call_id,
            ctx.session_id,
            ctx.trace_id,
            ctx.metadata,
            self._as_text,
            self._unwraps,
        )

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool as an activity; its error comes back as a ``ToolError``."""
        try:
            done = await workflow.execute_activity(
                "agcore.call_tool",
                self._call(args, ctx),
                result_type=ToolCallOutput,
                task_queue=self._queue,
                start_to_close_timeout=self._timeout,
                retry_policy=self._retry,
                heartbeat_timeout=self._heartbeat,
            )
        except ActivityError as exc:
            raise_if_cancelled(exc)
            cause = exc.cause
            if isinstance(cause, ActivityTimeoutError):
                raise ToolTimeoutError(self.name, self._timeout.total_seconds()) from exc
            if isinstance(cause, ApplicationError) and cause.type == TOOL_TIMED_OUT:
                started = bool(cause.details[0]) if cause.details else True
                seconds = self._timeout.total_seconds()
                raise ToolTimeoutError(self.name, seconds, started=started) from exc
            if isinstance(cause, ApplicationError) and cause.type == RESULT_TOO_LARGE:
                raise ToolError(cause.message, tool_name=self.name) from exc
            raise ToolExecutionError(self.name, failure_reason(exc)) from exc
        if done.error is not None:
            error = ToolError(done.error, tool_name=self.name)
            error.recoverable = done.recoverable
            raise error
        return restored(done.value())

    async def _asks(self, args: dict[str, Any], ctx: ToolContext) -> bool:
        # The tool's own needs_approval function, on its worker.
        try:
            verdict: bool = await workflow.execute_activity(
                "agcore.needs_approval",
                self._call(args, ctx),
                result_type=bool,
                task_queue=self._queue,
                start_to_close_timeout=_DESCRIBE_TIMEOUT,
                retry_policy=self._asks_retry,
            )
        except ActivityError as exc:
            raise_if_cancelled(exc)  # else the loop would take it for a rule that raised
            # The loop asks for approval, its reason naming what the function raised.
            cause = exc.cause
            raised = cause.message if isinstance(cause, ApplicationError) else failure_reason(exc)
            raise ToolError(raised, tool_name=self.name) from exc
        return verdict


async def stand_in_registry(
    tool_task_queues: Sequence[str],
    config: CycleConfig,
    *,
    per_queue: bool = True,
    as_text: bool = True,
    verbatim_names: bool = False,
    unwraps: bool = True,
) -> ToolRegistry:
    """A registry of stand-ins for the tools the workers of the run's own task queue and
    of ``tool_task_queues`` describe (an activity each, so the run replays with the
    tools it started with).

    Each tool follows the permission policy of the queue whose workers describe it, as
    ``LlmCycle`` over that queue's registry would (see :class:`QueuePolicies`); with
    ``per_queue`` False (a run begun before that), the run's own queue's policy holds
    for every tool. A tool that two queues describe (or one queue twice) fails the run
    with :class:`~agcore_tools.LlmConfigError` naming them. With ``as_text`` False (a
    run begun before that), the tools' results come as JSON values, their keys sorted.
    With ``verbatim_names`` (a run begun before that), custom permission names are kept
    as the workers recorded them, not normalised. With ``unwraps`` False (a run begun
    before that), an MCP tool's wrapped plain value stays ``{"result": v}`` for the
    model too (see :data:`~agcore_tools._returns.UNWRAPS`).
    """
    queues = [workflow.info().task_queue, *tool_task_queues]
    # The run's own queue is described by the worker running the run: a local activity,
    # recorded as a marker, costs no round trip through the server. Other queues'
    # workers are elsewhere.
    local = workflow.execute_local_activity(
        "agcore.describe_tools", result_type=Catalogue, start_to_close_timeout=_DESCRIBE_TIMEOUT
    )
    remote = (_describe_remote(queue) for queue in tool_task_queues)
    catalogues: list[Catalogue] = await asyncio.gather(local, *remote)
    _refuse_shared_names(queues, catalogues)
    main = catalogues[0]
    policies = [_policy(catalogue, verbatim_names) for catalogue in catalogues]
    by_queue = QueuePolicies(policies[0]) if per_queue and tool_task_queues else None
    registry = ToolRegistry(by_queue or policies[0], strict=main.strict)
    for index, (queue, catalogue) in enumerate(zip(queues, catalogues, strict=True)):
        for spec in catalogue.tools:
            tool = ActivityTool(
                spec, queue, config, as_text=as_text, verbatim_names=verbatim_names, unwraps=unwraps
            )
            if by_queue is not None and index > 0:
                by_queue.take(tool, policies[index], queue)
            registry.register(tool, tags=spec.tags, category=spec.category, version=spec.version)
    return registry


def _refuse_shared_names(queues: Sequence[str], catalogues: Sequence[Catalogue]) -> None:
    # The registry's own refusal named neither queue, and told to unregister a tool.
    served: dict[str, tuple[int, str]] = {}
    for index, (queue, catalogue) in enumerate(zip(queues, catalogues, strict=True)):
        for spec in catalogue.tools:
            first, where = served.setdefault(spec.name, (index, queue))
            if first == index:
                continue
            if where == queue:
                raise LlmConfigError(
                    f"task queue '{queue}' is described twice; list each queue once in "
                    "tool_task_queues, and not the run's own, whose tools are described anyway"
                )
            raise LlmConfigError(
                f"tool '{spec.name}' is served by task queues '{where}' and '{queue}'; a run "
                "takes each tool from one queue: rename one, or register it with one "
                "queue's workers only"
            )


def _policy(catalogue: Catalogue, verbatim_names: bool) -> PermissionChecker | None:
    if catalogue.permissions is None:
        return None
    return PermissionChecker(permission_config(catalogue.permissions, verbatim=verbatim_names))


class QueuePolicies(PermissionChecker):
    """The stand-in registry's checker in a run with ``tool_task_queues``: the run's
    own queue's policy for its tools, and for each tool another queue describes, that
    queue's (:meth:`take`), as ``LlmCycle`` over each queue's registry would check it.

    The loop asks a registry's one checker about every tool, and asks which permission
    needs approval by the permissions alone, so a tool of another queue declares none
    to it: this checker refuses it by its name, under its own queue's policy, and a
    permission its queue asks about makes the stand-in itself need approval.
    """

    __slots__ = ("_main", "_taken")

    def __init__(self, main: PermissionChecker | None) -> None:
        # Without a policy of its own, the run's queue asks nothing and refuses nothing.
        nothing = PermissionConfig(allowed=(), denied=(), allow_unspecified=True)
        super().__init__(main.config if main is not None else nothing)
        self._main = main
        self._taken: dict[str, tuple[PermissionChecker | None, tuple[Permission, ...]]] = {}

    def take(self, tool: ActivityTool, policy: PermissionChecker | None, queue: str) -> None:
        """Check ``tool`` (described by ``queue``) under ``policy``, its queue's."""
        declared = Permission.parse_all(tool.required_permissions)
        self._taken[tool.name] = (policy, declared)
        tool.required_permissions = ()
        if policy is None or not policy.is_allowed(declared) or tool.needs_approval is True:
            return  # a refused call is never put to a person; one that asks, asks already
        asked = policy.asking(declared)
        if asked is not None:
            # Whatever a needs_approval function would say, the call asks.
            tool.needs_approval = True
            tool.approval_reason = (
                f"permission '{asked}' is in PermissionConfig.ask of task queue '{queue}'"
            )

    def check(self, tool_name: str, permissions: Iterable[PermissionLike]) -> None:
        """Refuse a call as the policy of the tool's queue does."""
        taken = self._taken.get(tool_name)
        if taken is None:
            if self._main is not None:
                self._main.check(tool_name, permissions)
            return
        policy, declared = taken
        if policy is not None:
            policy.check(tool_name, declared)


async def _describe_remote(queue: str) -> Catalogue:
    """The tools the workers of ``queue`` describe; an LlmError when none picks the
    activity up in time (Temporal retries no schedule-to-start timeout)."""
    try:
        catalogue: Catalogue = await workflow.execute_activity(
            "agcore.describe_tools",
            result_type=Catalogue,
            task_queue=queue,
            start_to_close_timeout=_DESCRIBE_TIMEOUT,
            schedule_to_start_timeout=_QUEUE_WAIT,
        )
    except ActivityError as exc:
        cause = exc.cause
        if isinstance(cause, ActivityTimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
            raise LlmError(
                f"no worker polls task queue '{queue}' (of tool_task_queues): its tools were "
                f"not described in {_QUEUE_WAIT.total_seconds():g} s; check the queue's name "
                "and that its workers run"
            ) from exc
        raise
    return catalogue


def retry_policy(config: CycleConfig, attempts: int, final: list[str]) -> RetryPolicy:
    """An activity's retry policy: ``attempts`` in all, backing off as ``config``'s
    retries do, with the ``ApplicationError`` types in ``final`` never retried."""
    retries = config.retries
    initial = max(retries.initial_delay, 0.001)
    return RetryPolicy(
        initial_interval=timedelta(seconds=initial),
        maximum_interval=timedelta(seconds=max(retries.max_delay, initial)),
        maximum_attempts=attempts,
        non_retryable_error_types=final,
    )


def raise_if_cancelled(exc: ActivityError) -> None:
    """Go on with the run's cancellation: an activity the workflow cancelled (the run
    was) ends with this error, which is no failure of a tool or of the model request.
    As ``asyncio.CancelledError`` it passes the loop's handlers, and the run ends
    CANCELED rather than with the next model request (replaying a cancellation that
    0.2.0 handled, the loop goes on as it did then)."""
    if isinstance(exc.cause, CancelledError) and workflow.patched(patches.CANCEL_ENDS_RUN):
        raise asyncio.CancelledError(failure_reason(exc)) from exc


def failure_reason(exc: ActivityError) -> str:
    """Why an activity failed, in one line: its cause's message."""
    cause = exc.cause
    return str(cause) if cause is not None else str(exc)
