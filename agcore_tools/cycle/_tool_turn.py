"""One tool turn of the loop: from the model's tool calls to their tool messages.

Kept out of :mod:`agcore_tools.cycle.cycle` so the loop stays a short read; the loop
calls :func:`run_tools` once per tool turn (and once for the calls a resumed history
left open), with the cycle's settings and history.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from .._attachments import Rendered, Server, attachments_message
from .._code_mode import RUN_PYTHON, ProgramPaused, RunPythonTool
from .._inline import close_answers
from .._text import own_copy, truncate_utf8
from ..approval import ToolApprovalRequested
from ..base import ToolContext
from ..calls import (
    ParsedCall,
    aborted_text,
    edit_notes,
    error_text,
    iter_invocations,
    model_result,
    model_result_off_loop,
    preflight,
)
from ..error import ApprovalError, LlmError, ToolError, ToolNotFoundError
from ..pending import LEFT_RUNNING, CallPaused, InputRequest, ToolInputRequested
from ..registry import ToolInvocation, ToolRegistry
from ._approval import Gate, log_refused_answer, log_unused_answers
from ._paused import hold_call, prepare_call_resume, resume_calls
from ._policy import drop_program_states, mark_unknown, tidy_answers, tool_message
from ._programs import hold_paused, prepare_resume, resume_programs
from ._tool_stream import with_tool_events
from .config import CycleConfig
from .events import StreamEvent, ToolExecutionCompleted, ToolExecutionStarted
from .profiles import ServerProfile

__all__ = ["run_tools"]

Message = dict[str, Any]


async def run_tools(
    config: CycleConfig,
    messages: list[Message],
    registry: ToolRegistry,
    calls: Sequence[ParsedCall],
    ctx: ToolContext,
    invocations: list[ToolInvocation],
    gate: Gate,
    profile: ServerProfile,
) -> AsyncGenerator[StreamEvent, None]:
    """Run one turn's ``calls`` (their binary results as far as ``profile`` takes them): refuse the turn (unknown or forbidden tool), screen
    the calls needing approval, run the others concurrently, and answer every call in
    ``messages``, in order, even when cancelled midway."""
    # 0. A paused code-mode program gets the app's answers to its calls, with its state.
    calls = resume_programs(messages, calls, registry, gate, config.approval_key)
    #    A call paused on a question goes on with the app's answers (or stays open).
    before = calls
    calls, resumed = resume_calls(messages, calls, registry, gate, config.approval_key)
    # The calls an approval edited: what heads their results (one going on from its
    # question ran with the arguments its pause saved).
    notes = edit_notes(
        [call for call in before if call.call_id in resumed],
        [call for call in calls if call.call_id in resumed],
    )
    # 1. The calls past Limits.max_tool_calls_per_turn are answered, never run nor
    #    looked at: a denied or unknown tool among them stops nothing.
    calls, past = _within_limit(calls, config.limits.max_tool_calls_per_turn)
    #    An unknown or forbidden tool stops the loop before any call of the turn
    #    runs; every call still gets a tool message so the history stays valid.
    #    With unknown_tool="tell_model" an unknown tool's call is answered with its
    #    error instead, like bad arguments, and only a forbidden tool stops the loop.
    #    A registered tool this run does not offer (yet) is always answered so.
    calls = mark_unknown(registry, calls, unoffered_only=config.unknown_tool != "tell_model")
    table = registry.tool_table
    refused = preflight(table, calls)
    calls = (*calls, *past)
    if refused is not None:
        for call in calls:
            text = (
                error_text(refused)
                if call.name == refused.tool_name
                else aborted_text(call, f"tool '{refused.tool_name}' {_why(refused)}")
            )
            messages.append(tool_message(call, text))
        raise LlmError(f"tool loop stopped: {refused}") from refused
    # 2. Calls that need approval wait for the app's answer; the others run. A call
    #    going on from a question was approved before it first ran.
    screened = [call for call in calls if call.call_id not in resumed]
    if not gate.quiet(registry, screened):
        async for approval in gate.screen(registry, screened, ctx, config.limits.tool_timeout):
            yield approval
        notes |= edit_notes(screened, gate.calls)
        allowed = {call.call_id: call for call in gate.calls}
        calls = [
            call if call.call_id in resumed else allowed[call.call_id]
            for call in calls
            if call.call_id in resumed or call.call_id in allowed
        ]
    # 3. Run the calls concurrently, reporting each as it ends.
    limits = config.limits
    max_bytes = limits.max_result_bytes
    server = Server(profile.name, profile.content_parts)
    texts: list[str | None] = [None] * len(calls)
    rendered: list[Rendered | None] = [None] * len(calls)
    done: list[ToolInvocation | None] = [None] * len(calls)
    paused: list[ProgramPaused | None] = [None] * len(calls)
    asking: list[CallPaused | None] = [None] * len(calls)
    stop: ToolError | None = None
    unrendered: tuple[int, ToolInvocation] | None = None  # a result being made in a thread
    # This turn's own: call ids repeat across the conversations sharing a tool, and
    # what a timed-out call left must not outlive the turn.
    left: dict[str, list[Any]] = {}
    for call in calls:
        # A copy: the calls run once these events are taken, and a consumer that edits
        # what it shows (masking a secret) must not edit what the tool runs with.
        yield ToolExecutionStarted(call.name, own_copy(call.input), call.call_id)
    try:
        timeout = limits.tool_timeout
        batch = list(enumerate(calls))
        asked_inline: set[str] = set()  # a paused program's calls put to the app
        while batch:
            turn_calls = [call for _, call in batch]
            running = with_tool_events(
                iter_invocations(table, turn_calls, ctx=ctx, timeout=timeout, left=left),
                ctx,
                registry,
                turn_calls,
            )
            async with contextlib.aclosing(running):
                async for item in running:
                    if not isinstance(item, tuple):
                        yield item  # a progress report or a preliminary result
                        continue
                    index, invocation = item
                    position = batch[index][0]
                    if invocation.tool_name == RUN_PYTHON:  # its program's report, if cut short
                        code = registry.get(RUN_PYTHON)
                        if isinstance(code, RunPythonTool):
                            invocation = code.timed_out(invocation)
                    done[position] = invocation
                    if isinstance(invocation.output, ProgramPaused):
                        paused[position] = invocation.output
                        continue  # the call stays open until its program's approvals
                    if isinstance(invocation.output, CallPaused):
                        asking[position] = invocation.output
                        continue  # the call stays open until the user answers
                    # The API and the server decide what can travel: Responses takes
                    # no audio, so the model is told the sound was left out instead.
                    unrendered = (position, invocation)
                    result = await model_result_off_loop(
                        invocation,
                        max_bytes,
                        api=config.api,
                        max_attachment_bytes=limits.max_attachment_bytes,
                        server=server,
                        # The history shows the model's own arguments: the note says
                        # what ran, within max_bytes with the result.
                        note=notes.get(calls[position].call_id, ""),
                    )
                    unrendered = None
                    text = result.text
                    texts[position], rendered[position] = text, result
                    # An error the call came with (bad arguments, an unknown tool the
                    # model is told about) is the model's to fix: it never stops the loop.
                    error = invocation.error
                    if (
                        error is not None
                        and error is not calls[position].error
                        and stop is None
                        and not error.is_recoverable()
                    ):
                        stop = error
                    yield ToolExecutionCompleted(
                        invocation.tool_name,
                        calls[position].call_id,
                        invocation.output,
                        error,
                        invocation.duration,
                        text,
                    )
            # 3b. A paused program's calls can be answered inline, as a direct call's
            #     can; a program whose calls all are goes on now.
            batch = []
            key = config.approval_key
            for position, program in enumerate(paused):
                if program is None:
                    continue
                decisions = {}
                for request in program.requests:
                    if request.call_id in asked_inline:
                        continue  # left unanswered once: it waits for a resume
                    asked_inline.add(request.call_id)
                    event = ToolApprovalRequested(request.signed(key) if key else request)
                    yield event
                    close_answers(event)  # not on a stop at the event: see _inline
                    if event.decision is not None:
                        decisions[request.call_id] = event.decision
                if not decisions:
                    continue
                tool = registry.get(RUN_PYTHON)
                assert isinstance(tool, RunPythonTool)  # it made the program
                # Each answer checked on its own, as a direct call's is (Gate.screen):
                # a refused one leaves its call waiting, the others run now and the
                # program pauses again for the rest.
                accepted = {}
                for call_id, decision in decisions.items():
                    try:
                        prepare_resume(
                            calls[position], program.state, {call_id: decision}, tool, key
                        )
                    except ApprovalError as exc:
                        log_refused_answer(call_id, exc)
                        continue
                    accepted[call_id] = decision
                if not accepted:
                    continue
                prepare_resume(calls[position], program.state, accepted, tool, key)
                paused[position] = None
                batch.append((position, calls[position]))
            # 3c. So can a call's questions to the user (also those of a task it waits for).
            for position, question in enumerate(asking):
                asked_now = (
                    [r for r in question.requests if isinstance(r, InputRequest)]
                    if question
                    else []
                )
                if question is None or not asked_now:
                    continue  # a task that only runs on: nothing to answer inline
                answers = {}
                for asked in asked_now:
                    inline = ToolInputRequested(asked)
                    yield inline
                    close_answers(inline)  # not on a stop at the event: see _inline
                    if inline.answer is not None:
                        answers[asked.request_id] = inline.answer
                if answers and len(answers) < len(asked_now):
                    log_unused_answers(calls[position].call_id, len(answers), len(asked_now))
                if len(answers) == len(asked_now):
                    prepare_call_resume(
                        calls[position], registry, question.state, asked_now, answers
                    )
                    asking[position] = None
                    batch.append((position, calls[position]))
    finally:
        if unrendered is not None:
            # Cancelled while its result was being made in a thread: the call ran, and
            # the model must not read that it did not.
            position, ended = unrendered
            result = model_result(
                ended,
                max_bytes,
                api=config.api,
                max_attachment_bytes=limits.max_attachment_bytes,
                server=server,
                note=notes.get(calls[position].call_id, ""),
            )
            texts[position], rendered[position] = result.text, result
        # 4. Answer every call, in the calls' order, even when cancelled midway.
        for call, answer, program, question in zip(calls, texts, paused, asking, strict=True):
            if program is not None:
                hold_paused(messages, call, program, gate, config.approval_key)
                continue
            if question is not None:
                hold_call(messages, call, question, gate, config.approval_key)
                continue
            if answer is None:
                # A call that leaves work running (an MCP task) stays open with it, so a
                # resume waits for that work instead of calling again.
                work = _left_running(registry, call, left)
                if isinstance(work, CallPaused):
                    hold_call(messages, call, work, gate, config.approval_key)
                    continue
                answer = aborted_text(call, "the tool loop was cancelled")
                code = registry.get(RUN_PYTHON) if call.name == RUN_PYTHON else None
                if isinstance(code, RunPythonTool):
                    report = code.cut_short(call.call_id, "the program was cut off")
                    answer = answer if report is None else f"{answer}\n{report}"
                if call.call_id in notes:  # it started with the arguments the user gave
                    answer = truncate_utf8(notes[call.call_id] + answer, max_bytes)
            messages.append(tool_message(call, answer))
        drop_program_states(messages)
        # Tool messages carry text only: the images, audio and files follow them.
        attached = attachments_message([(c.call_id, c.name) for c in calls], rendered)
        if attached is not None:
            messages.append(attached)
        # On a resume, this turn's earlier answers and attachments came first.
        tidy_answers(messages)
        invocations.extend(inv for inv in done if inv is not None)
    if stop is not None:
        if isinstance(stop, ApprovalError):
            raise stop  # a paused program that cannot resume: the app's, as a refusal is
        raise LlmError(f"tool loop stopped: {stop}") from stop


def _left_running(registry: ToolRegistry, call: ParsedCall, left: dict[str, list[Any]]) -> object:
    """What ``call``, cancelled, left running (its tool's ``stopped(call_id)``), asked
    with the turn's ``left`` as :data:`~agcore_tools.pending.LEFT_RUNNING`."""
    stopped = getattr(registry.get(call.name), "stopped", None)
    if stopped is None:
        return None
    showing = LEFT_RUNNING.set(left)
    try:
        return stopped(call.call_id)
    finally:
        LEFT_RUNNING.reset(showing)


def _within_limit(
    calls: Sequence[ParsedCall], limit: int | None
) -> tuple[Sequence[ParsedCall], list[ParsedCall]]:
    """The first ``limit`` calls, and the others, each carrying the error that answers it
    (see ``Limits.max_tool_calls_per_turn``)."""
    if limit is None or len(calls) <= limit:
        return calls, []
    reason = f"not run: more than {limit} tool calls in one answer; send the rest in your next turn"
    past = []
    for call in calls[limit:]:
        error = ToolError(reason, tool_name=call.name)
        error.may_have_run = False
        past.append(dataclasses.replace(call, error=error))
    return calls[:limit], past


def _why(refused: ToolError) -> str:
    # What stopped the turn, for its other calls: no such tool (or none offered), or a
    # refusal.
    if isinstance(refused, ToolNotFoundError):
        return (
            "is not available in this conversation" if refused.registered else "is not registered"
        )
    return "was refused"
