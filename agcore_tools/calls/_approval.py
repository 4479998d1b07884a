"""Which calls of a turn need approval, and the app's answers applied to them.

Shared by :class:`~agcore_tools.LlmCycle` and :meth:`ToolRegistry.run_tool_calls`. A
turn where no tool asks costs one attribute read per call and no await: the common
case must stay as fast as before approvals existed.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import hmac
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from .._aio import run_tool, with_timeout
from .._records import ParsedCall, ToolEntry
from .._table import ToolTable
from .._text import noted_arguments, short_json
from ..approval import ApprovalDecision, ApprovalRequest, approval_signature
from ..base import ToolContext
from ..error import (
    ApprovalError,
    InvalidArgumentsError,
    PermissionDeniedError,
    ToolError,
    ToolRejectedError,
)
from ..pending import InputAnswer
from ..permission import Permission
from ._parse import NON_FINITE_REFUSED, non_finite, not_a_number

__all__ = [
    "CHECKS_TOGETHER",
    "EDITS_NOTED",
    "answer_list",
    "answers_by_id",
    "apply_answers",
    "approval_requests",
    "check_answer",
    "edit_notes",
    "rule_verdict",
    "screen_calls",
]

logger = logging.getLogger("agcore_tools.approval")

CHECKS_TOGETHER: ContextVar[bool] = ContextVar("agcore_tools_checks_together", default=True)
"""Whether the ``needs_approval`` functions of a turn's calls run at the same time
(False: one after another, as before; a Temporal run begun then replays so)."""

_CHECKS_GRACE = 5.0
"""Seconds a turn whose check failed otherwise waits for its other checks to cancel."""


def answer_list(approvals: Any) -> list[Any] | None:
    """``approvals`` read once into a list (None stays None); an answer given on its own,
    or anything else that is not a collection of answers, is refused with
    :class:`ApprovalError`.

    Example:
        >>> answer_list(None), answer_list(())
        (None, [])
    """
    if approvals is None:
        return None
    if isinstance(approvals, (ApprovalDecision, InputAnswer)):
        raise ApprovalError(
            f"approvals takes a list of answers, got one {type(approvals).__name__}: pass "
            "approvals=[answer]"
        )
    if not isinstance(approvals, Iterable) or isinstance(approvals, (str, bytes, Mapping)):
        raise ApprovalError(
            "approvals takes a list of answers (from request.approve(), .reject(), or an "
            f"input request's accept()), got {type(approvals).__name__}"
        )
    return list(approvals)


def answers_by_id(approvals: Iterable[ApprovalDecision] | None) -> dict[str, ApprovalDecision]:
    """The app's answers keyed by call id; two answers to one call are refused."""
    answers: dict[str, ApprovalDecision] = {}
    for decision in approvals or ():
        if not isinstance(decision, ApprovalDecision):
            raise ApprovalError(
                f"approvals must be ApprovalDecision values (from request.approve() or "
                f".reject()), got {type(decision).__name__}"
            )
        if decision.call_id in answers:
            raise ApprovalError(f"two approvals answer call '{decision.call_id}'; give one")
        answers[decision.call_id] = decision
    return answers


async def approval_requests(
    table: ToolTable,
    calls: Sequence[ParsedCall],
    ctx: ToolContext,
    key: bytes | None,
    timeout: float | None = None,
) -> tuple[Sequence[ParsedCall], list[ApprovalRequest | None] | None]:
    """``calls`` as they go on, and per call the request to approve it (None if it may
    run), or None when no call of the turn needs approval.

    Asked in order: the tool's own ``needs_approval``, then ``PermissionConfig.ask``.
    A call whose arguments could not be parsed never asks: its error goes to the model.
    Nor does a call the permission checker refuses: denied wins even over ``ask``, so
    it is left to fail with its :class:`~agcore_tools.PermissionDeniedError` when run,
    never put to a person whose yes could not make it run. Nor does a call whose
    arguments its tool refuses (``check_arguments``, given them as the tool would get
    them, strict mode's nulls dropped by the entry's ``argument_plan``): it comes back
    carrying that :class:`~agcore_tools.InvalidArgumentsError`, which goes to the model,
    and never runs. Only a call that could be asked about is checked so; any other is
    left to its tool, as it runs.

    The ``needs_approval`` functions of the calls run at the same time, each within
    ``timeout`` seconds (the calls' own time limit; None: no limit). One that runs out
    of time asks a person, as one that raises does.
    """
    checker = table.checker
    if checker is not None and not checker.config.ask:
        checker = None  # nothing it could ask about: skip its look-up per call
    asking: list[tuple[int, ParsedCall, Any, str | None, Permission | None]] = []
    marked: list[ParsedCall] | None = None
    for position, call in enumerate(calls):
        if call.args is None or call.error is not None:
            continue
        entry = table.entries.get(call.name)
        if entry is None:
            continue
        rule = entry.tool.needs_approval
        asked = checker.asking(entry.declared_permissions()) if checker is not None else None
        if (rule is False or rule is None) and asked is None:
            continue  # never put to a person: its arguments are the tool's to check
        try:
            table.check(entry)
        except PermissionDeniedError:
            continue
        try:
            # Before any rule: a person's yes could not make such a call run, and a
            # needs_approval function would read arguments the tool never accepts.
            _check(entry, call.args)
        except InvalidArgumentsError as exc:
            marked = list(calls) if marked is None else marked
            marked[position] = dataclasses.replace(call, error=exc)
            continue
        asking.append((position, call, rule, entry.tool.approval_reason, asked))
    calls = calls if marked is None else marked
    if not asking:
        return calls, None
    reasons: list[str | None] = [None] * len(asking)
    checks: list[tuple[int, Callable[[], Awaitable[str | None]]]] = []
    for index, (_, call, rule, why, _) in enumerate(asking):
        if rule is True:
            reasons[index] = f"tool '{call.name}' needs approval ({why or 'needs_approval=True'})"
        elif rule is not False and rule is not None:
            checks.append((index, functools.partial(_reason, rule, call, ctx, timeout)))
    if checks:
        answers = await _together([check for _, check in checks])
        for (index, _), reason in zip(checks, answers, strict=True):
            reasons[index] = reason
    found: list[ApprovalRequest | None] | None = None
    for (position, call, _, _, asked), reason in zip(asking, reasons, strict=True):
        if reason is None and asked is not None:
            reason = f"permission '{asked}' is in PermissionConfig.ask"
        if reason is None:
            continue
        if found is None:
            found = [None] * len(calls)
        assert call.args is not None  # a call without them never asks
        request = ApprovalRequest(call.call_id, call.name, call.args, reason)
        found[position] = request.signed(key) if key is not None else request
    return calls, found


async def _together(checks: list[Callable[[], Awaitable[str | None]]]) -> list[str | None]:
    """The checks' answers, in their order; run at the same time, as the calls are."""
    if len(checks) == 1 or not CHECKS_TOGETHER.get():
        return [await check() for check in checks]
    tasks = [asyncio.ensure_future(check()) for check in checks]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        # A check never raises its own failure (it asks a person): this is the caller's
        # cancellation, or an interrupt. The other checks end with it.
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        if pending:  # bounded: a check that swallows its cancellation must not hang us
            await asyncio.wait(pending, timeout=_CHECKS_GRACE)
        raise


async def _reason(
    rule: Any, call: ParsedCall, ctx: ToolContext, timeout: float | None
) -> str | None:
    """What a ``needs_approval`` function says of ``call``, as a request's reason (None:
    the call may run), within ``timeout`` seconds."""
    call_ctx = ctx.for_call(call.call_id)
    try:
        assert call.args is not None
        verdict, failure = await with_timeout(
            rule_verdict(rule, call.name, call.args, call_ctx), timeout
        )
    except TimeoutError:
        # Fail closed, as when it raises. A sync check's thread cannot be stopped: it
        # is left to run on, as a sync tool's past its timeout is, and may read
        # ctx.cancelled.
        call_ctx.cancellation.cancel()
        logger.warning(
            "needs_approval of tool %r did not answer within %g s; asking for approval",
            call.name,
            timeout,
        )
        return f"tool '{call.name}' needs_approval did not answer within {timeout:g} s"
    if failure is not None:
        logger.warning("needs_approval of tool %r raised; asking for approval", call.name)
        return f"tool '{call.name}' needs_approval raised {type(failure).__name__}: {failure}"
    if verdict:
        return f"tool '{call.name}' needs approval (its needs_approval returned {verdict!r})"
    return None


async def rule_verdict(
    rule: Any, name: str, arguments: Mapping[str, Any], ctx: ToolContext
) -> tuple[Any, Exception | None]:
    """What a tool's ``needs_approval`` function says of a call to tool ``name``: its
    answer, or what it raised (None, the exception). An async function (or callable
    object) is awaited; a sync one runs off the event loop, as sync tools do; an
    awaitable a sync one returns is awaited.

    Example:
        >>> import asyncio
        >>> asyncio.run(rule_verdict(lambda args, ctx: args["amount"] > 100, "pay",
        ...                          {"amount": 500}, ToolContext()))
        (True, None)
    """
    # What the rule raised comes back as a value, so that a TimeoutError of its own (a
    # service it asks timing out) is not taken for the check running out of time.
    try:
        if inspect.iscoroutinefunction(rule) or inspect.iscoroutinefunction(
            getattr(rule, "__call__", None)  # noqa: B004 - async callable objects
        ):
            verdict = await rule(dict(arguments), ctx)
        else:  # the app's code: kept off the event loop, as sync tools are
            verdict = await run_tool(f"needs_approval of {name}", rule, dict(arguments), ctx)
        if inspect.isawaitable(verdict):  # a sync callable wrapping an async check
            verdict = await verdict
    except Exception as exc:  # noqa: BLE001 - fail closed: a person decides instead
        return None, exc
    return verdict, None


async def screen_calls(
    table: ToolTable,
    calls: Sequence[ParsedCall],
    ctx: ToolContext,
    approvals: Iterable[ApprovalDecision] | None,
    key: bytes | None,
    timeout: float | None = None,
) -> tuple[Sequence[ParsedCall], list[ApprovalRequest]]:
    """For ``run_tool_calls``: the calls to run, and the requests left waiting (each
    ``needs_approval`` function within ``timeout`` seconds).

    With ``approvals`` (even an empty list: nothing answered yet), only the calls they
    name run: the app passes the waiting calls again to answer them, and any other
    call passed along already ran and was answered by the first call, so running it
    again would repeat its effects. Of calls sharing an id that a call asks about,
    only the first is asked about and may run (see :func:`_unrepeated`).
    """
    calls, requests = await approval_requests(table, calls, ctx, key, timeout)
    answers = answers_by_id(approvals)
    calls, requests, repeats = _unrepeated(calls, requests, answers)
    if requests is None and approvals is None:
        return calls, []
    runnable, waiting = apply_answers(table, calls, requests, answers, key, unanswered=repeats)
    if approvals is not None:
        runnable = [call for call in runnable if call.call_id in answers]
    else:
        # A repeat's "not run" goes out with its first call's answer, in the same round:
        # given earlier, it would come back again when the app passes the id's calls.
        held = {request.call_id for request in waiting}
        runnable = [call for call in runnable if call.call_id not in held]
    return runnable, waiting


def _unrepeated(
    calls: Sequence[ParsedCall],
    requests: list[ApprovalRequest | None] | None,
    answers: Mapping[str, ApprovalDecision],
) -> tuple[Sequence[ParsedCall], list[ApprovalRequest | None] | None, set[int]]:
    """``calls`` and ``requests`` with each later call of a repeated id that a call asks
    about (or an answer names) marked not to run, and asking nothing; and the positions
    of those calls, which no answer may apply to.

    The app answers a call by its id, and its tool messages must carry the model's ids,
    so the drop-in cannot rename them as the loop does: an answer could not tell two
    such calls apart, and one yes would run both. The first call is the one asked
    about; the model is told to call the others again, and each still gets its message.
    Calls of a repeated id that nobody is asked about run, as before.
    """
    positions: dict[str, list[int]] = {}
    for position, call in enumerate(calls):
        positions.setdefault(call.call_id, []).append(position)
    marked: list[ParsedCall] | None = None
    repeats: set[int] = set()
    for call_id, group in positions.items():
        if len(group) < 2:
            continue
        asks = requests is not None and any(requests[p] is not None for p in group)
        if not asks and call_id not in answers:
            continue
        logger.warning(
            "the server gave %d tool calls of one turn the id %r; only the first can be "
            "approved and run",
            len(group),
            call_id,
        )
        marked = list(calls) if marked is None else marked
        requests = list(requests) if requests is not None else None
        for position in group[1:]:
            call = calls[position]
            error = ToolError(
                f"call id '{call_id}' was already used by another call of this turn, so "
                "this call was not run: call the tool again",
                tool_name=call.name,
            )
            error.may_have_run = False
            marked[position] = dataclasses.replace(call, error=error)
            repeats.add(position)
            if requests is not None:
                requests[position] = None
    return (calls if marked is None else marked), requests, repeats


def apply_answers(
    table: ToolTable,
    calls: Sequence[ParsedCall],
    requests: Sequence[ApprovalRequest | None] | None,
    answers: Mapping[str, ApprovalDecision],
    key: bytes | None,
    *,
    unanswered: Collection[int] = (),
) -> tuple[list[ParsedCall], list[ApprovalRequest]]:
    """The calls to run (a rejected one carries its :class:`ToolRejectedError`, an
    edited one its new arguments) and the requests still waiting for an answer. The
    calls at the positions ``unanswered`` take no answer (the drop-in's repeats of an
    id, which must not run on the answer to the call they repeat).

    Every answer is checked before anything runs: it must name one of ``calls``, with
    the same tool and arguments, carry a valid signature when there is a ``key`` (and
    none without one), and edit the arguments into ones the tool accepts; else
    :class:`ApprovalError`.
    """
    by_id = {call.call_id: call for call in calls}
    for call_id in answers:
        if call_id not in by_id:
            waiting = ", ".join(f"'{c}'" for c in by_id) or "none"
            raise ApprovalError(
                f"no call '{call_id}' is awaiting approval (the open calls are: {waiting})"
            )
    runnable: list[ParsedCall] = []
    waiting_requests: list[ApprovalRequest] = []
    for position, call in enumerate(calls):
        answer = answers.get(call.call_id) if position not in unanswered else None
        request = requests[position] if requests is not None else None
        if answer is not None:
            runnable.append(_answered(table, call, answer, key))
        elif request is not None:
            waiting_requests.append(request)
        else:
            runnable.append(call)
    return runnable, waiting_requests


EDITS_NOTED: ContextVar[bool] = ContextVar("agcore_tools_edits_noted", default=True)
"""Whether an edited call's result heads a note, and a new prompt tells the model of the
calls that had started (see ``decline_open``): a Temporal run begun before the patch
``agcore-edited-calls-noted`` keeps what its model read."""


def edit_notes(before: Iterable[ParsedCall], after: Iterable[ParsedCall]) -> dict[str, str]:
    """For each call of ``after`` that an approval's edit makes run with other arguments
    than it had in ``before`` (the model's): its call id, and the note that heads its
    result, so the model, whose own call stays in the history, reads what ran.

    Example:
        >>> model = ParsedCall("c1", "pay", '{"amount": 500}', {"amount": 500})
        >>> notes = edit_notes([model], [dataclasses.replace(model, args={"amount": 50})])
        >>> print(notes["c1"], end="")
        [the user edited this call's arguments before it ran; it ran with {"amount": 50}]
    """
    if not EDITS_NOTED.get():
        return {}
    asked: dict[str, dict[str, Any] | None] = {}
    for call in before:
        asked.setdefault(call.call_id, call.args)
    running = [call for call in after if call.error is None and call.args is not None]
    # Calls sharing an id that all run were asked about by no one, so none was edited
    # (of those someone was asked about, only the first runs: see _unrepeated).
    ids = collections.Counter(call.call_id for call in running)
    return {
        call.call_id: (
            "[the user edited this call's arguments before it ran; it ran with "
            f"{noted_arguments(call.args)}]\n"
        )
        for call in running
        if ids[call.call_id] == 1 and call.call_id in asked and asked[call.call_id] != call.args
    }


def check_answer(
    table: ToolTable, call: ParsedCall, answer: ApprovalDecision, key: bytes | None
) -> None:
    """Refuse (:class:`ApprovalError`) an ``answer`` that cannot apply to ``call``, as
    :func:`apply_answers` would, without applying it: for an answer given inline."""
    _answered(table, call, answer, key)


def _answered(
    table: ToolTable, call: ParsedCall, answer: ApprovalDecision, key: bytes | None
) -> ParsedCall:
    where = f"the approval of call '{call.call_id}'"
    if answer.tool_name != call.name:
        raise ApprovalError(
            f"{where} names tool '{answer.tool_name}', but the call is to '{call.name}'",
            tool_name=call.name,
        )
    if call.args is None or answer.arguments != call.args:
        other = f"{where} is for other arguments than the call's"
        raise ApprovalError(
            f"{other}: {short_json(answer.arguments)} approved, {short_json(call.input)} pending",
            tool_name=call.name,
            redacted=f"{other}: {_differing(answer.arguments, call.args)}",
        )
    if key is not None:
        expected = approval_signature(key, call.call_id, call.name, call.args)
        if answer.signature is None or not hmac.compare_digest(answer.signature, expected):
            raise ApprovalError(
                f"{where} has a missing or wrong signature for tool '{call.name}'",
                tool_name=call.name,
            )
    elif answer.signature is not None:
        # A signed answer means its request was signed: without the key, a slip in the
        # app's settings would let any answer (and any edited history) through.
        raise ApprovalError(
            f"{where} is signed, but no approval_key was given to check it: pass the key "
            "its request was signed with (CycleConfig(approval_key=...) or "
            "run_tool_calls(approval_key=...))",
            tool_name=call.name,
        )
    if not answer.approved:
        # The parsed arguments stay: the invocation records what was declined.
        return dataclasses.replace(call, error=ToolRejectedError(call.name, answer.message))
    edited = answer.edited_arguments
    if edited is None:
        return call
    _validate(table, call.name, edited, where)
    try:
        text = json.dumps(edited, ensure_ascii=False, default=str)
    except ValueError as exc:
        # An integer past sys.get_int_max_str_digits() (4300 digits), or a container
        # holding itself: a schema lets both through, and neither can be sent. Our own
        # words: Python's differ between versions.
        too_long = "integer string conversion" in str(exc)
        reason = "an integer has too many digits" if too_long else "a value holds itself"
        raise ApprovalError(
            f"{where} edits the arguments into ones that cannot be written as JSON: "
            f"{reason}; give values JSON can hold, such as a shorter number",
            tool_name=call.name,
        ) from exc
    # Edited arguments the tool accepts replace the model's, and so their error.
    error = None if isinstance(call.error, InvalidArgumentsError) else call.error
    return dataclasses.replace(call, arguments=text, args=dict(edited), error=error)


def _check(entry: ToolEntry, args: Mapping[str, Any]) -> None:
    # Edited arguments holding NaN would get past a needs_approval rule's comparisons
    # on a later check, and past pydantic's float, as a model's would (refused as they
    # were parsed).
    found = non_finite(args) if NON_FINITE_REFUSED.get() else None
    if found is not None:
        raise not_a_number(entry.name, *found)
    # The arguments as execute() hands them to the tool: in strict mode the model sends
    # null for an optional property, and the entry's plan drops those nulls first.
    checked = dict(args)
    plan = entry.argument_plan
    if plan is not None:
        checked, _ = plan.apply(checked)
    entry.tool.check_arguments(checked)


def _validate(table: ToolTable, name: str, args: dict[str, Any], where: str) -> None:
    # A FunctionTool checks arguments against its pydantic model without running, an
    # McpTool against its input schema; a tool that checks nothing here
    # (BaseTool.check_arguments) validates them itself when it runs.
    entry = table.entries.get(name)
    if entry is None:
        return
    try:
        _check(entry, args)
    except InvalidArgumentsError as exc:
        invalid = f"{where} edits the arguments into invalid ones"
        raise ApprovalError(
            f"{invalid}: {exc}", tool_name=name, redacted=f"{invalid}: {exc.redacted}"
        ) from exc


def _differing(approved: Any, pending: Mapping[str, Any] | None) -> str:
    # Names, never values: this text goes to spans when content capture is off.
    if pending is None:
        return "the call's arguments are not a JSON object"
    if not isinstance(approved, Mapping):
        return f"the approved arguments are a {type(approved).__name__}, not an object"
    missing = object()
    names = sorted(
        str(name)
        for name in {*approved, *pending}
        if approved.get(name, missing) != pending.get(name, missing)
    )
    listed = ", ".join(f"'{name}'" for name in names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return f"they differ in {listed}{more}"
