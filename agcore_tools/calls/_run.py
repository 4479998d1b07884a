"""Running a model's tool calls over a registry's :class:`ToolTable`, and the messages
that answer them.

``ToolRegistry.run_tool_calls`` is :func:`run_tool_calls` over the registry's own
table; the loop uses :func:`preflight` and :func:`iter_invocations` the same way.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from .._attachments import Api, Rendered, attachments_message, function_call_output
from .._execute import as_completed, check_context
from .._function_tool import check_timeout
from .._records import ParsedCall, ToolCall, ToolInvocation
from .._sdk import sdk_field
from .._stop import StopWatch
from .._table import ToolTable, refusal, unknown_tool_error
from ..approval import ApprovalDecision, ToolCallOutputs
from ..base import ToolContext
from ..error import PermissionDeniedError, ToolConfigError, ToolError, ToolNotFoundError
from ._approval import answer_list, edit_notes, screen_calls
from ._parse import parse_call
from ._render import model_result_off_loop

__all__ = [
    "check_byte_limit",
    "check_tool_calls",
    "iter_invocations",
    "preflight",
    "refusal",
    "run_tool_calls",
    "unknown_tool_error",
]

_UNREADABLE_CHAT_CALLS = ("custom", "function")
"""The ``type`` of Chat Completions tool calls without a readable ``function``."""


def preflight(table: ToolTable, calls: Iterable[ParsedCall]) -> ToolError | None:
    """The first call the loop must refuse (unknown tool, denied permission), or None.
    A run's view refuses a call to a tool the checker refuses as its registry would
    (see :func:`~agcore_tools._table.refusal`).

    Checked for every call of a turn before any of them runs, so a refused call
    stops the loop without side effects from its siblings. A call already marked as
    an unknown tool (the model is told instead, see ``CycleConfig.unknown_tool``) is
    not refused again.
    """
    for call in calls:
        if isinstance(call.error, ToolNotFoundError):
            continue
        entry = table.entries.get(call.name)
        if entry is None:
            return refusal(table, call.name) or unknown_tool_error(table, call.name)
        try:
            table.check(entry)
        except PermissionDeniedError as exc:
            return exc
    return None


async def iter_invocations(
    table: ToolTable,
    calls: Sequence[ParsedCall],
    *,
    ctx: ToolContext,
    timeout: float | None,
    left: dict[str, list[Any]] | None = None,
) -> AsyncGenerator[tuple[int, ToolInvocation], None]:
    """Run a turn's calls concurrently; yield ``(position, invocation)`` as each ends.

    Calls with unusable arguments yield their error at once and never run; the others
    go through ``_execute.as_completed`` (what :meth:`ToolRegistry.invoke_as_completed`
    runs), which owns their timeouts, error handling and cancellation. ``left``: where
    a call cancelled before it ended leaves the work it started (see
    :data:`~agcore_tools.pending.LEFT_RUNNING`), for the loop's turn.
    """
    runnable: list[tuple[int, ToolCall]] = []
    for position, call in enumerate(calls):
        if call.args is None or call.error is not None:
            yield (
                position,
                ToolInvocation(
                    call.name,
                    call.input,
                    error=call.error,
                    call_id=call.call_id,
                    may_have_run=False,
                ),
            )
        else:
            runnable.append((position, ToolCall(call.name, call.args, call.call_id)))
    if not runnable:
        return
    async with contextlib.aclosing(
        as_completed(table, [c for _, c in runnable], ctx, timeout, left=left)
    ) as finished:
        async for index, invocation in finished:
            yield runnable[index][0], invocation


def check_tool_calls(tool_calls: object, method: str = "run_tool_calls") -> None:
    """Refuse what cannot be a model's tool calls (a number, one call's dict, text, the
    SDK's message, completion or response itself) with a
    :class:`~agcore_tools.ToolConfigError` naming ``method`` and, for a message, a
    completion, a response or one call, what to pass instead, before anything iterates
    it.

    Example:
        >>> check_tool_calls(None)
        >>> check_tool_calls(5)
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: run_tool_calls() takes a list of tool calls (message.tool_calls, or response.output), got int
        >>> check_tool_calls({"role": "assistant", "tool_calls": []})
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: run_tool_calls() takes a list of tool calls (message.tool_calls, or response.output), got dict; that is a message: pass message.tool_calls
    """
    # An SDK object is a pydantic model, which iterates as (field, value) pairs: the
    # error then named a pair such as ('content', None), not the object passed.
    if tool_calls is not None and (
        not isinstance(tool_calls, Iterable)
        or isinstance(tool_calls, (str, bytes, Mapping, BaseModel))
    ):
        raise ToolConfigError(
            f"{method}() takes a list of tool calls (message.tool_calls, or "
            f"response.output), got {type(tool_calls).__name__}{_hint(tool_calls)}"
        )


def check_byte_limit(value: object, what: str, minimum: int) -> None:
    """Refuse a byte limit that is not an integer at least ``minimum``, or None, with a
    :class:`~agcore_tools.ToolConfigError` naming ``what``.

    Zero would send the model an empty result and a negative number would cut its end
    off silently; a float or a string would fail later with a bare ``TypeError``. The
    minimums are those of :class:`~agcore_tools.cycle.Limits`.

    Example:
        >>> check_byte_limit(None, "run_tool_calls() max_result_bytes", 64)
        >>> check_byte_limit(10.5, "run_tool_calls() max_result_bytes", 64)
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: run_tool_calls() max_result_bytes must be an integer at least 64 or None, got 10.5
    """
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ToolConfigError(
            f"{what} must be an integer at least {minimum} or None, got {value!r}"
        )


async def run_tool_calls(
    table: ToolTable,
    tool_calls: Iterable[Any] | None,
    *,
    ctx: ToolContext | None,
    timeout: float | None,
    max_result_bytes: int | None,
    max_attachment_bytes: int | None,
    repair_arguments: bool = False,
    approvals: Iterable[ApprovalDecision] | None = None,
    approval_key: bytes | None = None,
    method: str = "run_tool_calls",
) -> ToolCallOutputs:
    """Implementation of :meth:`ToolRegistry.run_tool_calls` (``method`` is the entry
    point the caller used, for the errors)."""
    check_timeout(timeout, f"{method}() timeout")
    check_byte_limit(max_result_bytes, f"{method}() max_result_bytes", 64)
    check_byte_limit(max_attachment_bytes, f"{method}() max_attachment_bytes", 1)
    check_tool_calls(tool_calls, method)
    if approval_key is not None and (not isinstance(approval_key, bytes) or not approval_key):
        got = "empty bytes" if isinstance(approval_key, bytes) else type(approval_key).__name__
        raise ToolConfigError(f"{method}() approval_key must be non-empty bytes or None, got {got}")
    approvals = answer_list(approvals)
    # 1. Read each item as a Chat Completions tool call or a Responses function call;
    #    other Responses output items (messages, reasoning) are skipped.
    calls: list[ParsedCall] = []
    shapes: set[str] = set()
    for item in tool_calls or ():
        function = sdk_field(item, "function")
        kind = sdk_field(item, "type")
        if function is not None:
            shape, call_id = "chat", sdk_field(item, "id")
            name, arguments = sdk_field(function, "name"), sdk_field(function, "arguments")
        elif kind == "function_call":
            shape, call_id = "responses", sdk_field(item, "call_id")
            name, arguments = sdk_field(item, "name"), sdk_field(item, "arguments")
        elif kind in _UNREADABLE_CHAT_CALLS:
            # A Chat Completions call this drop-in cannot run (a custom tool's, or one
            # whose function is missing) still needs its answer: the API refuses a
            # history with an unanswered call.
            shapes.add("chat")
            calls.append(_unreadable_chat_call(item, kind, method))
            continue
        elif isinstance(kind, str):
            continue
        else:
            raise ToolConfigError(
                f"{method}() cannot read {item!r:.120}: expected Chat Completions tool "
                f"calls (message.tool_calls) or Responses 'function_call' items{_hint(item)}"
            )
        missing = _missing(call_id, name, "id" if shape == "chat" else "call_id")
        if missing:
            # The caller passed these items: a ValueError naming what the call lacks.
            raise ToolConfigError(f"{method}() got a tool call without {missing}: {item!r:.120}")
        shapes.add(shape)
        calls.append(parse_call(name, str(call_id), arguments, repair=repair_arguments))
    if len(shapes) > 1:
        raise ToolConfigError(
            f"{method}() got Chat Completions and Responses calls mixed together: pass "
            "one turn's calls, message.tool_calls or response.output"
        )
    check_context(ctx, "run_tool_calls()")
    answer = functools.partial(
        _answer,
        table,
        calls,
        "responses" if "responses" in shapes else "chat",
        timeout=timeout,
        max_result_bytes=max_result_bytes,
        max_attachment_bytes=max_attachment_bytes,
        approvals=approvals,
        approval_key=approval_key,
    )
    if ctx is None:
        return await answer(ToolContext())
    # The app's Stop (its ctx cancelled, from any thread) ends the calls, as in the loop.
    with StopWatch(ctx.cancellation, f"{method}()"):
        return await answer(ctx)


async def _answer(
    table: ToolTable,
    calls: list[ParsedCall],
    api: Api,
    ctx: ToolContext,
    *,
    timeout: float | None,
    max_result_bytes: int | None,
    max_attachment_bytes: int | None,
    approvals: Iterable[ApprovalDecision] | None,
    approval_key: bytes | None,
) -> ToolCallOutputs:
    """The outputs of :func:`run_tool_calls` for the ``calls`` it read."""
    # 2. Calls that need approval wait for the app's answer (see _approval.py); then
    #    the rest run, and failures of any kind become error text for the model.
    screened, waiting = await screen_calls(table, calls, ctx, approvals, approval_key, timeout)
    # The model's call keeps its own arguments: one an approval edited says what ran.
    notes = edit_notes(calls, screened)
    calls = list(screened)
    invocations: list[ToolInvocation | None] = [None] * len(calls)
    async for position, invocation in iter_invocations(table, calls, ctx=ctx, timeout=timeout):
        invocations[position] = invocation
    # 3. One output per call, in the calls' order; on Chat Completions, the images,
    #    audio and files follow the tool messages in one user message.
    results: list[Rendered] = []
    for call, done in zip(calls, invocations, strict=True):
        assert done is not None  # iter_invocations yields every position once
        # The note heads the text within max_result_bytes.
        result = await model_result_off_loop(
            done,
            max_result_bytes,
            api=api,
            max_attachment_bytes=max_attachment_bytes,
            note=notes.get(call.call_id, ""),
        )
        results.append(result)
    outputs = ToolCallOutputs()
    outputs.pending_approvals = tuple(waiting)
    if api == "responses":
        outputs.extend(
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": function_call_output(result),
            }
            for call, result in zip(calls, results, strict=True)
        )
        return outputs
    outputs.extend(
        {"role": "tool", "tool_call_id": call.call_id, "content": result.text}
        for call, result in zip(calls, results, strict=True)
    )
    extra = attachments_message([(c.call_id, c.name) for c in calls], results)
    if extra is not None:
        outputs.append(extra)
    return outputs


def _missing(call_id: object, name: object, id_field: str) -> str:
    """What a call lacks, for the error: its id (under ``id_field``), its name, or both."""
    gaps = []
    if not call_id:
        gaps.append(f"its {id_field!r} (the id its answer must carry)")
    if not isinstance(name, str):
        gaps.append("a function name")
    return " and ".join(gaps)


def _hint(item: Any) -> str:
    # The fix for the likely slips: passing what holds the calls instead of the calls.
    if sdk_field(item, "choices") is not None:
        return "; that is a completion: pass completion.choices[0].message.tool_calls"
    if sdk_field(item, "output") is not None and sdk_field(item, "type") is None:
        return "; that is a response: pass response.output"
    if sdk_field(item, "tool_calls") is not None or sdk_field(item, "role") is not None:
        return "; that is a message: pass message.tool_calls"
    if sdk_field(item, "message") is not None:
        return "; that is a choice: pass completion.choices[0].message.tool_calls"
    if sdk_field(item, "type") in ("function", "function_call"):
        return "; that is one tool call: pass a list of them, such as [call]"
    return ""


def _unreadable_chat_call(item: Any, kind: str, method: str) -> ParsedCall:
    """A Chat Completions tool call that cannot run, with the error its answer tells
    the model; a call without an id cannot be answered and is refused."""
    call_id = sdk_field(item, "id")
    if not call_id:
        # A ValueError, as a function call's missing id is: the caller passed the item.
        raise ToolConfigError(
            f"{method}() got a tool call without its 'id' (the id its answer must carry): "
            f"{item!r:.120}"
        )
    custom = sdk_field(item, "custom")
    name = sdk_field(custom, "name") if custom is not None else None
    name = name if isinstance(name, str) else kind
    given = sdk_field(custom, "input") if custom is not None else None
    if kind == "custom":
        reason = "custom tool calls are not supported here; call a function tool instead"
    else:
        reason = "the tool call has no function (name and arguments); call a function tool"
    error = ToolError(f"tool call '{call_id}' cannot run: {reason}", tool_name=name)
    error.may_have_run = False
    arguments = given if isinstance(given, str) else ""
    return ParsedCall(str(call_id), name, arguments, None, error)
