"""``ToolLoopWorkflow``: :class:`~agcore_tools.LlmCycle`'s own loop, run as a workflow.

The loop is not copied: the workflow drives a plain ``LlmCycle`` whose requester (see
:class:`~agcore_tools.cycle.Requester`) makes each model request an activity, over a
stand-in registry whose tools carry the real
tools' definitions, permissions and approval rules and whose ``execute`` is an
activity. Everything else (turns, limits, permissions, truncation, history policy,
approvals, errors) is the loop's own code. The workflow reads no clock but
``workflow.time()`` (see :mod:`agcore_tools._clock`) and makes no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

# The sandbox decides how these load (see _worker.sandbox_runner): passed through on a
# worker, re-imported under its restrictions by the replay test.
from .._aio import positive_number
from .._budget import ESTIMATE_ONLY
from .._clock import CLOCK
from .._code_mode import CALLS_LIMITED, UNAWAITED_CALLS_FAIL
from .._program_values import WRAPPED_AGAIN
from .._selection import CodeMode
from .._table import OFFERED_LISTED
from .._unicode import scrub
from ..approval import ApprovalDecision, ApprovalRequest
from ..base import ToolContext
from ..calls import (
    CHECKS_TOGETHER,
    CUT_CALLS_NOT_REPAIRED,
    EDITS_NOTED,
    NON_FINITE_REFUSED,
    RENDER_OFF_LOOP,
)
from ..calls._parse import non_finite
from ..cycle._call_ids import IDS_PAST_HISTORY, UNIQUE_CALL_IDS
from ..cycle._given import given_messages, kind
from ..cycle._run import UNOFFERED_CHOICE_REFUSED
from ..cycle._stream import DERIVED_IDS_RESERVED
from ..cycle._wire_responses import CONVERSATION_TAIL
from ..cycle.config import CycleConfig
from ..cycle.cycle import LlmCycle
from ..cycle.events import StreamEvent
from ..cycle.requester import Requester, TurnRequest
from ..error import (
    InvalidArgumentsError,
    LlmConfigError,
    LlmError,
    LlmUsageError,
    ToolError,
)
from ..registry import ToolRegistry
from ..schema._validate import check_against_schema
from . import _patches as patches
from ._payloads import (
    CONFIG_REFUSED,
    MODEL_REFUSED,
    ModelRequest,
    config_fields,
    config_from_fields,
    oversize,
)
from ._stand_in import failure_reason, raise_if_cancelled, retry_policy, stand_in_registry
from ._step_sandbox import StepSandbox

__all__ = ["ToolLoopInput", "ToolLoopResult", "ToolLoopWorkflow"]


@dataclass(frozen=True)
class ToolLoopInput:
    """What one :class:`ToolLoopWorkflow` run starts from.

    Build it with :meth:`of`. ``config`` holds a :class:`~agcore_tools.CycleConfig` as
    JSON values; ``messages`` the history to go on from; ``tool_task_queues`` the other
    task queues whose workers contribute tools (MCP workers, workers next to their
    data): each tool's calls go to the queue whose workers described it.

    Example:
        >>> from agcore_tools import CycleConfig
        >>> args = ToolLoopInput.of("What is 2 + 3?", CycleConfig("m"), system_prompt="Be brief.")
        >>> [m["role"] for m in args.messages], args.config["model"]
        (['system'], 'm')
    """

    prompt: str | None
    config: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_task_queues: list[str] = field(default_factory=list)
    model_timeout_secs: float = 300.0
    metadata: dict[str, Any] = field(default_factory=dict)
    code_mode: dict[str, Any] | None = None
    """A :class:`~agcore_tools.CodeMode`'s ``limits`` and ``call_timeout``, or None."""

    @classmethod
    def of(
        cls,
        prompt: str | None,
        config: CycleConfig,
        *,
        system_prompt: str | None = None,
        messages: list[dict[str, Any]] | None = None,
        tool_task_queues: list[str] | None = None,
        model_timeout_secs: float = 300.0,
        metadata: dict[str, Any] | None = None,
        code_mode: CodeMode | None = None,
    ) -> ToolLoopInput:
        """The input of a run that sends ``prompt`` (None: go on from ``messages``).

        With ``code_mode``, the run offers ``run_python`` (see
        :class:`~agcore_tools.CodeMode`): each stretch of a program runs as an
        activity on the run's task queue, and each of its tool calls as the tool's
        own activity. The program's snapshot between stretches is in the workflow's
        history. The ``CodeMode``'s ``sandbox`` is not used.

        ``model_timeout_secs`` (each model request's time limit) must be positive:
        another value would fail the run's workflow task on every retry.

        ``tool_task_queues`` keeps each queue once. Leave out the run's own queue:
        its tools are described anyway, and, described again, they fail the run with
        :class:`~agcore_tools.LlmConfigError`, as two queues that describe a tool of
        the same name do.

        An argument of the wrong kind (the two first ones swapped, a string where a
        list goes, ``metadata`` that is not a dict) raises
        :class:`~agcore_tools.error.LlmUsageError` here, in the client, rather than failing
        the run.

        Example:
            >>> ToolLoopInput.of("Hi", CycleConfig("m"), tool_task_queues=["mcp", "data", "mcp"]
            ...                  ).tool_task_queues
            ['mcp', 'data']
            >>> ToolLoopInput.of("Hi", CycleConfig("m"), model_timeout_secs=0)
            Traceback (most recent call last):
            ...
            agcore_tools.error.LlmConfigError: ToolLoopInput.of() model_timeout_secs must be positive seconds (an int or a float), got 0
            >>> ToolLoopInput.of("Hi", CycleConfig("m"), tool_task_queues="mcp")
            Traceback (most recent call last):
            ...
            agcore_tools.error.LlmUsageError: ToolLoopInput.of() tool_task_queues must be a list of task queue names, got str: use tool_task_queues=['mcp']
        """
        _check_of_args(prompt, config, system_prompt, metadata, code_mode)
        if not (positive_number(model_timeout_secs) and math.isfinite(model_timeout_secs)):
            raise LlmConfigError(
                "ToolLoopInput.of() model_timeout_secs must be positive seconds (an int or a "
                f"float), got {model_timeout_secs!r}"
            )
        # A lone surrogate is replaced here, as in the messages (no request encodes one).
        history = [{"role": "system", "content": scrub(system_prompt)}] if system_prompt else []
        code = None
        if code_mode is not None:
            code = {"limits": dict(code_mode.limits or {}), "call_timeout": code_mode.call_timeout}
        return cls(
            prompt,
            config_fields(config),
            history + _given_history(messages, config.api),
            _queues(tool_task_queues),
            model_timeout_secs,
            dict(metadata or {}),
            code,
        )


# What ToolLoopInput.of() is given is checked there, in the client: a wrong value would
# otherwise fail the run inside the workflow, or (a string read as a list) quietly send
# the run's tool calls to task queues no worker serves.


def _check_of_args(
    prompt: object, config: object, system_prompt: object, metadata: object, code_mode: object
) -> None:
    if isinstance(prompt, CycleConfig):
        raise LlmUsageError(
            "ToolLoopInput.of() takes the prompt first and the CycleConfig second: use "
            "ToolLoopInput.of(prompt, CycleConfig(...))"
        )
    if not isinstance(config, CycleConfig):
        model = repr(config) if isinstance(config, str) else '"gpt-4o-mini"'
        raise LlmUsageError(
            f"ToolLoopInput.of() takes a CycleConfig as config, got {type(config).__name__}: "
            f"use ToolLoopInput.of(prompt, CycleConfig({model}))"
        )
    if prompt is not None and not isinstance(prompt, str):
        raise LlmUsageError(
            f"ToolLoopInput.of() prompt must be a string, or None to go on from messages, "
            f"got {kind(prompt)}"
        )
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise LlmUsageError(
            f"ToolLoopInput.of() system_prompt must be a string or None, got {kind(system_prompt)}"
        )
    if metadata is not None and not isinstance(metadata, Mapping):
        raise LlmUsageError(
            f"ToolLoopInput.of() metadata must be a dict or None, got {kind(metadata)}"
        )
    if code_mode is not None and not isinstance(code_mode, CodeMode):
        raise LlmUsageError(
            f"ToolLoopInput.of() code_mode must be a CodeMode or None, got {kind(code_mode)}"
        )


def _given_history(messages: object, api: str) -> list[dict[str, Any]]:
    if messages is None:
        return []
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        one = " (put one message in a list)" if isinstance(messages, Mapping) else ""
        raise LlmUsageError(
            "ToolLoopInput.of() messages must be a list of messages (dicts with a role), "
            f"got {kind(messages)}{one}; a new user message goes in prompt"
        )
    return given_messages(messages, api, "ToolLoopInput.of")


def _queues(queues: object) -> list[str]:
    if queues is None:
        return []
    if isinstance(queues, (str, bytes)) or not isinstance(queues, Iterable):
        one = f": use tool_task_queues=[{queues!r}]" if isinstance(queues, str) else ""
        raise LlmUsageError(
            f"ToolLoopInput.of() tool_task_queues must be a list of task queue names, got "
            f"{kind(queues)}{one}"
        )
    names = list(queues)
    wrong = next((name for name in names if not (isinstance(name, str) and name)), None)
    if wrong is not None:
        raise LlmUsageError(
            "ToolLoopInput.of() tool_task_queues must hold non-empty task queue names "
            f"(strings), got {wrong!r}"
        )
    return list(dict.fromkeys(names))  # each queue described once


@dataclass(frozen=True)
class ToolLoopResult:
    """How a :class:`ToolLoopWorkflow` run ended: the answer and the whole history.

    ``turns`` and ``usage`` count the whole run, across its approval pauses.

    Example:
        >>> ToolLoopResult("5", [], 2, "stop", {"total_tokens": 9}).text
        '5'
    """

    text: str
    messages: list[dict[str, Any]]
    turns: int
    stop_reason: str
    """Why the last turn ended: a :class:`~agcore_tools.FinishReason` value (the field
    keeps its name in the JSON Temporal stores; read it as :attr:`finish_reason`)."""
    usage: dict[str, int]

    @property
    def finish_reason(self) -> str:
        """Why the last turn ended (``"stop"``, ``"length"``, ...).

        Example:
            >>> ToolLoopResult("5", [], 2, "stop", {}).finish_reason
            'stop'
        """
        return self.stop_reason


class _ActivityRequester(Requester):
    """Makes each model request an activity: the workflow sends nothing itself."""

    __slots__ = ("_as_text", "_timeout")

    def __init__(self, timeout: float, *, as_text: bool = True) -> None:
        self._timeout = timedelta(seconds=timeout)
        self._as_text = as_text

    async def request(self, turn: TurnRequest) -> AsyncGenerator[StreamEvent, None]:
        """Run the request as the ``agcore.model_request`` activity; feed its completion."""
        config = turn.config
        if self._as_text:
            request = ModelRequest.of(config.api, config.chain_responses, turn.params)
        else:  # a run begun before: its requests as they were
            request = ModelRequest(config.api, config.chain_responses, turn.params)
        too_big = oversize(
            workflow.payload_converter(),
            request,
            "the next model request (the history it sends, the tools' definitions)",
            "bound what a request sends with CycleConfig(history=TrimOldest(max_chars=...)), "
            "or have tools return less (CycleConfig(max_result_bytes=...))",
        )
        if too_big is not None:
            raise LlmError(too_big)
        try:
            completion = await workflow.execute_activity(
                "agcore.model_request",
                request,
                result_type=dict,
                start_to_close_timeout=self._timeout,
                retry_policy=retry_policy(config, config.retries.max_retries + 1, [MODEL_REFUSED]),
            )
        except ActivityError as exc:
            raise_if_cancelled(exc)
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == CONFIG_REFUSED:
                raise LlmConfigError(cause.message) from exc  # refused unsent, as in-process
            raise LlmError(f"{turn.wire.name} request failed: {failure_reason(exc)}") from exc
        turn.builder.feed_completion(completion)
        return
        yield  # an async generator, like the SDK requester it stands in for


@workflow.defn(name="agcore.ToolLoop", failure_exception_types=[LlmError, ToolError])
class ToolLoopWorkflow:
    """:class:`~agcore_tools.LlmCycle`'s tool loop as a Temporal workflow.

    Each model request and each tool call is an activity (see
    :class:`~agcore_tools.temporal.ToolActivities`); a turn's calls run as parallel
    activities. A run that needs approvals waits, holding no worker, for the
    ``approve`` signal (a list of :class:`~agcore_tools.ApprovalDecision`); the
    ``pending_approvals`` query lists what it waits for, the ``messages`` query the
    history so far. An answer that fits no waiting call (a signal delivered again, a
    wrong call id) is logged and dropped, and the run goes on waiting. A stopped loop
    (``LlmError``, ``ToolError``) fails the run.

    Example:
        >>> from agcore_tools import CycleConfig
        >>> async def main(client):  # doctest: +SKIP
        ...     handle = await client.start_workflow(
        ...         ToolLoopWorkflow.run, ToolLoopInput.of("Tidy my files", CycleConfig("m")),
        ...         id="run-1", task_queue="agents")
        ...     # ... later, perhaps days later, from any process:
        ...     pending = await handle.query(ToolLoopWorkflow.pending_approvals)
        ...     history = await handle.query(ToolLoopWorkflow.messages)
        ...     await handle.signal(ToolLoopWorkflow.approve, [r.approve() for r in pending])
        ...     return (await handle.result()).text
    """

    def __init__(self) -> None:
        self._cycle: LlmCycle | None = None
        self._registry: ToolRegistry | None = None
        self._pending: list[ApprovalRequest] = []
        # Answers taken by the signal and not applied yet, by call id.
        self._answers: dict[str, ApprovalDecision] = {}
        # A run whose approve signals 0.2.0 took: the last one's answers, as they came.
        self._signalled: list[ApprovalDecision] | None = None

    @workflow.run
    async def run(self, args: ToolLoopInput) -> ToolLoopResult:
        """Run the loop to its answer."""
        CLOCK.set(workflow.time)  # this run's context only: tool durations in workflow time
        ESTIMATE_ONLY.set(True)  # token counts without tiktoken's files
        RENDER_OFF_LOOP.set(False)  # a workflow runs no threads: results' text made here
        # Decided once, before the run's first command, so that a replay meets the marker
        # where the run made it; for all the run's submits, as the ids go on across them.
        IDS_PAST_HISTORY.set(workflow.patched(patches.IDS_PAST_HISTORY))
        UNAWAITED_CALLS_FAIL.set(workflow.patched(patches.UNAWAITED_CALLS_FAIL))
        CALLS_LIMITED.set(workflow.patched(patches.CALLS_LIMITED))
        unwraps = workflow.patched(patches.WRAPPED_AGAIN)
        WRAPPED_AGAIN.set(unwraps)
        CUT_CALLS_NOT_REPAIRED.set(workflow.patched(patches.CUT_CALLS_NOT_REPAIRED))
        CHECKS_TOGETHER.set(workflow.patched(patches.CHECKS_TOGETHER))
        UNIQUE_CALL_IDS.set(workflow.patched(patches.UNIQUE_CALL_IDS))
        DERIVED_IDS_RESERVED.set(workflow.patched(patches.DERIVED_IDS_RESERVED))
        UNOFFERED_CHOICE_REFUSED.set(workflow.patched(patches.UNOFFERED_CHOICE_REFUSED))
        NON_FINITE_REFUSED.set(workflow.patched(patches.NON_FINITE_REFUSED))
        OFFERED_LISTED.set(workflow.patched(patches.OFFERED_LISTED))
        EDITS_NOTED.set(workflow.patched(patches.EDITS_NOTED))
        CONVERSATION_TAIL.set(workflow.patched(patches.CONVERSATION_TAIL))
        limited = workflow.patched(patches.CALLS_PER_TURN_LIMITED)
        as_text = workflow.patched(patches.REQUESTS_AS_TEXT)
        queues = args.tool_task_queues
        per_queue = bool(queues) and workflow.patched(patches.PERMISSIONS_PER_QUEUE)
        verbatim_names = not workflow.patched(patches.PERMISSION_NAMES_NORMALISED)
        config = config_from_fields(args.config)
        registry = await stand_in_registry(
            queues,
            config,
            per_queue=per_queue,
            as_text=as_text,
            verbatim_names=verbatim_names,
            unwraps=unwraps,
        )
        self._registry = registry
        # Activities enforce each tool's time limit (overridable per tool).
        per_turn = config.limits.max_tool_calls_per_turn if limited else None
        limits = dataclasses.replace(
            config.limits, tool_timeout=None, max_tool_calls_per_turn=per_turn
        )
        loop_config = dataclasses.replace(config, limits=limits)
        requester = _ActivityRequester(args.model_timeout_secs, as_text=as_text)
        cycle = LlmCycle(loop_config, requester=requester)
        cycle.messages = list(args.messages)
        self._cycle = cycle
        info = workflow.info()
        ctx = ToolContext(
            session_id=info.workflow_id, trace_id=info.run_id, metadata=dict(args.metadata)
        )
        select = None
        if args.code_mode is not None:
            # Each tool call of a program is its tool's activity, which has its own
            # timeout: no workflow timer per call.
            select = CodeMode(
                limits=args.code_mode["limits"], call_timeout=None, sandbox=StepSandbox
            )
        response = await cycle.submit_with_tools(args.prompt, registry, ctx=ctx, select=select)
        # Each submit counts its own part: the result gives the whole run's.
        usage, turns = response.usage, response.turns
        try:
            while response.pending_approvals:
                answers = await self._answers_to(response.pending_approvals)
                response = await cycle.submit_with_tools(
                    None, registry, ctx=ctx, approvals=answers, select=select
                )
                usage, turns = usage + response.usage, turns + response.turns
        finally:
            # However the run ends (an answer, a failure, a cancellation), no call of it
            # waits for approval any more: the query must offer none.
            self._pending = []
        result = ToolLoopResult(
            response.text,
            cycle.messages,
            turns,
            str(response.finish_reason.value),
            {
                "requests": usage.requests,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            },
        )
        too_big = oversize(
            workflow.payload_converter(),
            result,
            "the run's result (its answer and whole history)",
            "have tools return less (CycleConfig(max_result_bytes=...)), or go on from a "
            "shorter history in a new run",
        )
        if too_big is not None:
            raise LlmError(too_big)
        return result

    async def _answers_to(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalDecision]:
        """Wait for answers to ``requests``, and take them."""
        self._await(requests)
        await workflow.wait_condition(lambda: bool(self._answers) or self._signalled is not None)
        if self._signalled is not None:
            # Signalled under 0.2.0: taken as 0.2.0 took them, so that the history replays.
            signalled, self._signalled = self._signalled, None
            self._pending = []
            return signalled
        answers, self._answers = self._answers, {}
        # The calls left unanswered still wait: an answer to one may come meanwhile.
        self._pending = [r for r in self._pending if r.call_id not in answers]
        return list(answers.values())

    def _await(self, requests: Sequence[ApprovalRequest]) -> None:
        """Wait for answers to ``requests``; drop answers to calls no longer waiting."""
        self._pending = list(requests)
        waiting = {request.call_id for request in requests}
        for call_id in [i for i in self._answers if i not in waiting]:
            workflow.logger.warning(
                "approval of call %r dropped: the call no longer waits", call_id
            )
            del self._answers[call_id]

    @workflow.signal(name="approve")
    def approve(self, decisions: list[ApprovalDecision]) -> None:
        """Answer calls the run waits for (the same contract as ``LlmCycle``).

        Answers add up, across signals, until the run resumes. An answer that fits no
        waiting call (its call id is not waiting, as when a signal is delivered again
        after its answers applied; or it names another tool or other arguments than the
        call's; or the call has an answer already; or its ``edited_arguments`` do not
        fit the tool's parameters schema) is logged and dropped: the run goes on
        waiting, and the signal's other answers apply.
        """
        # Decided at a run's first signal, for all its signals: False only when replaying
        # one that 0.2.0 took. A run paused under 0.2.0 and signalled since is patched.
        if not workflow.patched(patches.APPROVALS_ADD_UP):
            self._signalled = list(decisions)
            return
        waiting = {request.call_id: request for request in self._pending}
        for decision in decisions:
            refusal = _misfit(
                decision, waiting.get(decision.call_id), self._answers, self._registry
            )
            if refusal is not None:
                workflow.logger.warning(
                    "approval of call %r dropped: %s", decision.call_id, refusal
                )
            else:
                self._answers[decision.call_id] = decision

    @workflow.query(name="pending_approvals")
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The calls waiting for an answer: none once the run has ended (answered,
        failed or cancelled)."""
        return list(self._pending)

    @workflow.query(name="messages")
    def messages(self) -> list[dict[str, Any]]:
        """The history so far."""
        return list(self._cycle.messages) if self._cycle is not None else []


def _misfit(
    decision: ApprovalDecision,
    request: ApprovalRequest | None,
    answers: Mapping[str, ApprovalDecision],
    registry: ToolRegistry | None,
) -> str | None:
    """Why ``decision`` answers no waiting call (None: it answers ``request``). Checked
    as the signal comes: in the loop, a misfit fails the run with an ApprovalError.
    (Only signals under patches.APPROVALS_ADD_UP come here, and no released version had that
    patch, so no run took an edit this refuses: the edit check needs no patch of its
    own, nor do changes to what it accepts, such as an exact ``multipleOf``. The
    stand-in tools check nothing in the loop, so 0.2.0's runs go on as then.)"""
    if request is None:
        return "no call with this id awaits approval"
    if decision.call_id in answers:
        return "the call has an answer already; the first one stands"
    if decision.tool_name != request.tool_name:
        return f"it names tool '{decision.tool_name}', but the call is to '{request.tool_name}'"
    if decision.arguments != request.arguments:
        return "it is for other arguments than the call's"
    edited = decision.edited_arguments
    # Memoised: the run asked the same as it began, before any call could wait.
    found = non_finite(edited) if edited and workflow.patched(patches.NON_FINITE_REFUSED) else None
    if found is not None:
        return f"its edited arguments are invalid: {found[0]}: {found[1]}"
    entry = registry.entry(request.tool_name) if registry is not None else None
    if decision.edited_arguments is not None and entry is not None:
        # The worker's tool would refuse them, and the model would read that it sent
        # invalid arguments (LlmCycle refuses the approval: ApprovalError).
        try:
            check_against_schema(entry.name, entry.tool.parameters, decision.edited_arguments)
        except InvalidArgumentsError as exc:
            return f"its edited arguments are invalid: {exc.reason}"
    return None
