"""The loop's approval gate: which calls of a turn wait for the app, and the pause.

Kept out of :mod:`agcore_tools.cycle.cycle`; the rules themselves (which calls ask,
how an answer applies) live in :mod:`agcore_tools.calls._approval`, shared with
``run_tool_calls``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncGenerator, Collection, Iterable, Mapping, Sequence
from typing import Any

from .._code_mode import PROGRAM_STATE
from .._inline import close_answers
from ..approval import ApprovalDecision, ApprovalRequest, ToolApprovalRequested
from ..base import ToolContext
from ..calls import (
    EDITS_NOTED,
    ParsedCall,
    answer_list,
    answers_by_id,
    apply_answers,
    approval_requests,
    check_answer,
    error_text,
)
from ..error import ApprovalError, ToolRejectedError
from ..pending import PAUSED_CALL, InputAnswer, InputRequest, RunningTask
from ..registry import ToolInvocation, ToolRegistry
from ._policy import (
    drop_program_states,
    open_raw_calls,
    tidy_answers,
    tool_message,
    unanswered_calls,
)
from .events import ChatResponse, FinishReason, Usage

__all__ = [
    "Gate",
    "Pending",
    "answer_list",
    "decline_open",
    "log_refused_answer",
    "log_unused_answers",
    "paused_response",
]

Pending = ApprovalRequest | InputRequest | RunningTask
"""One item a paused run waits for: a call's approval, a question a call asked, or a
server-side task a call started."""

Answer = ApprovalDecision | InputAnswer

logger = logging.getLogger("agcore_tools.approval")


def _input_answers(answers: Iterable[InputAnswer]) -> dict[str, InputAnswer]:
    by_id: dict[str, InputAnswer] = {}
    for answer in answers:
        if answer.request_id in by_id:
            raise ApprovalError(f"two answers answer input request '{answer.request_id}'; give one")
        by_id[answer.request_id] = answer
    return by_id


class Gate:
    """One ``submit_*`` run's pauses: the app's answers (approvals of the calls a
    resumed history left open, and answers to their questions) and what still waits."""

    __slots__ = ("_answers", "_approvals", "_hold", "_inputs", "_key", "_paused", "calls")

    def __init__(self, approvals: Iterable[Answer] | None, key: bytes | None) -> None:
        given = answer_list(approvals) or []
        self._inputs = _input_answers(a for a in given if isinstance(a, InputAnswer))
        # answers_by_id refuses whatever is neither kind, naming it.
        self._answers = answers_by_id([a for a in given if not isinstance(a, InputAnswer)])
        self._key = key
        self._hold: set[str] = set()
        self._approvals: list[ApprovalRequest] = []
        self._paused: dict[str, list[Pending]] = {}
        self.calls: Sequence[ParsedCall] = ()
        """The last screened turn's calls to run."""

    @property
    def waiting(self) -> list[Pending]:
        """What the run waits for: the calls it concerns stay open in the history."""
        held = [item for items in self._paused.values() for item in items]
        return [*self._approvals, *held]

    def check_resume(self, resuming: bool, open_calls: Sequence[ParsedCall]) -> None:
        """Refuse answers when there is nothing open for them to answer."""
        if (self._answers or self._inputs) and (not resuming or not open_calls):
            if not resuming:
                why = "a new prompt was given"
                fix = "resume with submit_with_tools(None, registry, approvals=...)"
            else:
                why = "the history has no open calls"
                fix = "each was answered, or declined when a new message came first"
            raise ApprovalError(
                f"approvals answer the calls a paused run left open, but {why}; {fix}"
            )

    @property
    def answered(self) -> list[str]:
        """The call ids the app's approvals answer, of those not taken yet."""
        return list(self._answers)

    def take(self, call_ids: Iterable[str]) -> dict[str, ApprovalDecision]:
        """Remove and return the answers to ``call_ids`` (a paused program's calls)."""
        return {i: self._answers.pop(i) for i in list(call_ids) if i in self._answers}

    def take_inputs(self, request_ids: Iterable[str]) -> dict[str, InputAnswer]:
        """Remove and return the answers to the questions ``request_ids``."""
        return {i: self._inputs.pop(i) for i in list(request_ids) if i in self._inputs}

    def check_inputs_used(self) -> None:
        """Refuse answers to questions no open call asked."""
        if self._inputs:
            names = ", ".join(f"'{i}'" for i in self._inputs)
            raise ApprovalError(
                f"no open call asked the input requests {names}; an answer is given to "
                "one question (a later one of the same call has a new request id)"
            )

    def hold(self, call_id: str, requests: Sequence[Pending]) -> None:
        """Leave ``call_id`` open, waiting for ``requests`` (a paused call's)."""
        self._paused.setdefault(call_id, []).extend(requests)

    @property
    def keep(self) -> set[str]:
        """The ids of the calls to leave open when the run stops."""
        return self._hold | set(self._paused)

    def quiet(self, registry: ToolRegistry, calls: Sequence[ParsedCall]) -> bool:
        """True when no call can need approval and no answer waits: the common turn,
        which then skips :meth:`screen` (and its await) altogether."""
        if self._answers:
            return False
        checker = registry.permission_checker
        if checker is not None and checker.config.ask:
            return False
        for call in calls:
            entry = registry.entry(call.name)
            if entry is not None and entry.tool.needs_approval is not False:
                return False
        return True

    async def screen(
        self,
        registry: ToolRegistry,
        calls: Sequence[ParsedCall],
        ctx: ToolContext,
        timeout: float | None,
    ) -> AsyncGenerator[ToolApprovalRequested, None]:
        """Ask for approval where a rule says so (each ``needs_approval`` function within
        ``timeout`` seconds, the calls' own limit); set :attr:`calls` and :attr:`waiting`."""
        table = registry.tool_table
        calls, requests = await approval_requests(table, calls, ctx, self._key, timeout)
        self.calls = calls
        if requests is None and not self._answers:
            return
        answers, self._answers = self._answers, {}  # they answer the resumed calls only
        asked = [r for r in requests or () if r is not None and r.call_id not in answers]
        # Until the answers apply, every call asked about stays open if the run stops
        # (a consumer leaving at an event, an answer refused).
        self._hold = {r.call_id for r in asked} | set(answers)
        by_id = {call.call_id: call for call in calls}
        for request in asked:
            # The event's own copy: should its answer be refused, the request listed
            # as still waiting shows the call's arguments, whatever the app changed.
            event = ToolApprovalRequested(dataclasses.replace(request))
            yield event
            close_answers(event)  # not on a stop at the event: see _inline
            if event.decision is None:
                continue
            try:
                check_answer(registry.tool_table, by_id[request.call_id], event.decision, self._key)
            except ApprovalError as exc:
                # As if unanswered: raised, it would stop the turn, and its other calls
                # (which need no answer) would never run. A resume can answer it.
                log_refused_answer(request.call_id, exc)
                continue
            answers[request.call_id] = event.decision
        self.calls, self._approvals = apply_answers(
            registry.tool_table, calls, requests, answers, self._key
        )
        self._hold = {request.call_id for request in self._approvals}


def paused_response(
    messages: Sequence[dict[str, Any]],
    usage: Usage,
    turns: int,
    invocations: Sequence[ToolInvocation],
    waiting: Sequence[Pending],
) -> ChatResponse:
    """The response of a run that paused: its last assistant message (the one with
    the waiting calls) and what it waits for."""
    empty: dict[str, Any] = {}
    message = next((m for m in reversed(messages) if m.get("role") == "assistant"), empty)
    content = message.get("content")
    return ChatResponse(
        dict(message),
        content if isinstance(content, str) else "",
        FinishReason.TOOL_CALLS,
        usage,
        turns,
        tuple(invocations),
        pending_approvals=tuple(w for w in waiting if isinstance(w, ApprovalRequest)),
        pending=tuple(waiting),
    )


def log_refused_answer(call_id: str, error: ApprovalError) -> None:
    """Say that an inline answer was refused and its call still waits (for a direct
    call and for a program's alike)."""
    logger.warning(
        "the inline answer to call %r was refused, so the call still waits for approval "
        "(in the response's pending_approvals): %s",
        call_id,
        error.redacted,
    )


def log_unused_answers(call_id: str, answered: int, asked: int) -> None:
    """Say that some, not all, of a call's questions were answered inline: the call goes
    on only with every answer, so it still waits and those answers are not used."""
    logger.warning(
        "%d of the %d questions of call %r were answered inline; the call goes on only "
        "with every answer, so it still waits (in the response's pending) and the inline "
        "answers were not used: answer all of its questions on resume",
        answered,
        asked,
        call_id,
    )


def decline_open(messages: list[dict[str, Any]], answered: Collection[str] = ()) -> None:
    """Answer the calls a paused run left open, as declined, before a new prompt: the
    app moved on without answering them, and the API needs every call answered. The
    calls in ``answered`` are left for the answers the app sends with the prompt."""
    open_calls = [call for call in unanswered_calls(messages) if call.call_id not in answered]
    if not open_calls:
        return
    reason = "no answer was given before the conversation went on"
    # A Temporal run begun before agcore-edited-calls-noted read "declined" alone.
    saved = open_raw_calls(messages) if EDITS_NOTED.get() else {}
    for call in open_calls:
        raw = saved.get(call.call_id, {})
        text = _left_running(call.name, raw.get(PAUSED_CALL))
        if text is None:
            text = error_text(ToolRejectedError(call.name, reason))
            text += _ran_before(raw.get(PROGRAM_STATE))
        messages.append(tool_message(call, text))
    tidy_answers(messages)
    drop_program_states(messages)


def _left_running(tool_name: str, held: Any) -> str | None:
    """What the model reads of a call whose server-side task had not ended when the
    conversation moved on (``held``: the call's saved pause), or None for another call:
    the task runs on, so "declined" would tell the model that nothing ran."""
    requests = held.get("requests") if isinstance(held, Mapping) else None
    for request in requests if isinstance(requests, list) else ():
        if isinstance(request, Mapping) and request.get("kind") == "task":
            task, server = request.get("task_id"), request.get("server")
            return (
                f"Error: the call to tool '{tool_name}' started task '{task}' on server "
                f"'{server}', which had not ended when the conversation went on without it: "
                "the task was not cancelled and may still finish; do not start it again "
                "unless it must run twice"
            )
    return None


def _ran_before(state: Any) -> str:
    """The calls a paused program made before its pause (``state``: its saved state),
    as lines for the model that reads it declined, after the notes of the calls an
    approval edited (its code holds the arguments it gave), or nothing."""
    if not isinstance(state, Mapping):
        return ""
    ran, edited = state.get("ran"), state.get("edited")
    lines = [line for line in ran if isinstance(line, str)] if isinstance(ran, list) else []
    notes = [n for n in edited if isinstance(n, str)] if isinstance(edited, list) else []
    if not lines:
        return ""
    more = f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else ""
    return (
        "".join(f"\n{note}" for note in notes)
        + "\nCalls of the program that ran before its pause (do not repeat the ones that "
        "change something):\n  " + "\n  ".join(lines[:20]) + more
    )
