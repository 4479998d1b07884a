"""Code mode: the model writes one Python program that calls many tools, run in Monty.

Why: one JSON call per model turn sends every intermediate result through the context
and costs a turn per dependent step. A program keeps intermediate results in its own
variables, and ten dependent calls take one turn. The sandbox is Monty
(``pydantic-monty``, the ``code`` extra): a Python subset run in a worker process,
with no file system, network or environment, and resource limits. It suspends at
every call to a name the program did not define; this module answers those calls
with the registry's tools, each through :func:`~agcore_tools._execute.as_completed`,
so argument validation, permissions, timeouts, stats, progress and spans are those of
a direct call. The model reads the tools as Python functions, listed by
:mod:`agcore_tools._listing`.

The sandbox runs a program one segment at a time (see :mod:`agcore_tools._sandbox`):
until it waits for calls. This module runs the calls of a segment at once and resumes
the program with their results. A call that needs approval is not run; when the
program waits for it, the run pauses: the calls already running finish, and the whole
state (the sandbox's snapshot, the results not yet delivered, the calls waiting, the
output printed and the calls that ran) becomes :class:`ProgramPaused`, plain JSON that the loop stores in
the history on the open ``run_python`` call. A resume in any process restores the
snapshot and delivers the answers: calls made before the pause are never run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from ._aio import all_done, first_done, with_timeout
from ._execute import as_completed
from ._listing import parameters_of, python_signatures
from ._otel import described
from ._program_values import as_listed, program_value, settled
from ._records import ParsedCall, ToolCall, ToolInvocation
from ._sandbox import (
    DEFAULT_LIMITS,
    MAX_PRINTED,
    OWN_LIMITS,
    RUN_PYTHON,
    Functions,
    MontySandbox,
    ProgramSandbox,
    Segment,
    require_monty,
    with_printed,
)
from ._table import ToolTable
from ._text import noted_arguments
from ._unicode import scrub_json
from .approval import ApprovalRequest
from .base import BaseTool, ToolContext, definition_name
from .calls import (
    EDITS_NOTED,
    NON_FINITE_REFUSED,
    approval_requests,
    non_finite,
    not_a_number,
)
from .error import (
    ApprovalError,
    ProgramError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from .pending import CallPaused

__all__ = [
    "CALLS_LIMITED",
    "DEFAULT_LIMITS",
    "PROGRAM_STATE",
    "RUN_PYTHON",
    "UNAWAITED_CALLS_FAIL",
    "ProgramPaused",
    "RunPythonTool",
    "SandboxFactory",
    "inner_call_id",
    "program_value",
    "require_monty",
]

logger = logging.getLogger("agcore_tools.code_mode")

UNAWAITED_CALLS_FAIL: ContextVar[bool] = ContextVar(
    "agcore_tools_unawaited_calls_fail", default=True
)
"""Whether a program that ends with calls it never awaited fails (telling the model to
``await`` them). In 0.2.0 its output silently held ``<coroutine ...>``; a Temporal
workflow started by 0.2.0 keeps that behaviour on replay (``workflow.patched``)."""

CALLS_LIMITED: ContextVar[bool] = ContextVar("agcore_tools_calls_limited", default=True)
"""Whether a program's tool calls are counted against ``CodeMode`` limits'
``max_calls``. Before, only Monty's ``max_suspensions`` bounded them, restarting at
every restore: a Temporal workflow started before keeps that on replay
(``workflow.patched``)."""

PROGRAM_STATE = "program_state"
"""The key of a paused program's state on its open ``run_python`` call in the history."""


def inner_call_id(outer: str, number: int) -> str:
    """The id of a program's ``number``-th tool call, inside the model's call ``outer``.

    Example:
        >>> inner_call_id("call_7", 3)
        'call_7~3'
    """
    return f"{outer}~{number}"


@dataclass(frozen=True)
class ProgramPaused:
    """What ``run_python`` returns when its program waits for approvals: the requests
    (ids from :func:`inner_call_id`, not yet signed) and the state to resume from."""

    requests: tuple[ApprovalRequest, ...]
    state: dict[str, Any]


_GUIDE = (
    "Run a Python program in a sandbox and get what it prints and its last expression's "
    "value (or the variable `result`). The sandbox runs a subset of Python 3 with asyncio, "
    "json, re, math and datetime; it has no files, network or other modules. The "
    "functions below call tools. They are async: `await` each call, and use "
    "`await asyncio.gather(f(...), g(...))` to run independent calls at once. Do several "
    "steps in one program, keep intermediate results in variables, and print or return "
    "only what you need. A tool's error is raised as an exception you can catch. Call "
    "each function where you use it: it cannot be stored in a variable or a dict, or "
    "passed to map(); asyncio has gather() but no create_task(), wait_for() or "
    "as_completed(), and there is no `async with`.\n\n"
)


SandboxFactory = Callable[[Functions, Mapping[str, Any]], ProgramSandbox]
"""Makes the sandbox a program runs in, from its functions and resource limits:
:class:`~agcore_tools._sandbox.MontySandbox` unless an integration (Temporal) says."""


# -- the program runner ------------------------------------------------------------


class RunPythonTool(BaseTool):
    """The ``run_python`` tool a :class:`~agcore_tools.CodeMode` run offers.

    ``table`` runs the calls (the whole registry's, with its permission checker);
    ``definitions`` are the tools the program may call (those the checker allows).

    Example:
        >>> tool = RunPythonTool(ToolTable(None), [], {}, 60.0)
        >>> tool.name, tool.parameters["required"]
        ('run_python', ['code'])
    """

    name = RUN_PYTHON
    span_description = _GUIDE.rstrip()
    """The description an ``execute_tool`` span records: the preamble alone, without the
    listing of the tools (tens of KB on every call for a large registry)."""
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python program."}},
        "required": ["code"],
    }

    def __init__(
        self,
        table: ToolTable,
        definitions: Sequence[Mapping[str, Any]],
        limits: Mapping[str, Any],
        call_timeout: float | None,
        sandbox: SandboxFactory | None = None,
    ) -> None:
        self.table = table
        """The registry's tools and permission checker, which the program's calls use."""
        outputs = {}
        for definition in definitions:
            name = definition_name(dict(definition))
            found = table.get(name)
            if found is not None and found.output_schema is not None:
                outputs[name] = found.output_schema
        stubs, tools = python_signatures(definitions, outputs)
        self.functions: dict[str, tuple[str, Sequence[str], Sequence[str]]] = {}
        """The program's functions: name -> (the tool it calls, its parameters in order,
        the required ones)."""
        for (identifier, tool), definition in zip(tools.items(), definitions, strict=True):
            order, _, required = parameters_of(definition.get("function", definition))
            self.functions[identifier] = (tool, order, sorted(required))
        self.description = _GUIDE + (stubs or "(no tools are available)")
        self.limits = dict(limits)
        """The program's limits: the sandbox's resource limits, and ``max_calls``."""
        calls = self.limits.get("max_calls")
        self.max_calls: int | None = calls if isinstance(calls, int) else None
        """The tool calls one program may make (None: no limit)."""
        self.call_timeout = call_timeout
        """Seconds each tool call of a program may take (None for no limit)."""
        self._sandbox = sandbox or MontySandbox
        self._resumes: dict[str, dict[str, Any]] = {}
        self._cut_short: dict[str, Callable[[str], str]] = {}  # call id -> its report

    def resume_next(self, call_id: str, resume: Mapping[str, Any]) -> None:
        """Make the next run of call ``call_id`` go on from its paused program:
        ``resume`` holds the program's state and the answers to its calls. Only the
        loop calls this, once it has checked the answers; nothing a model sends in the
        call's arguments can resume a program.
        """
        self._resumes[call_id] = dict(resume)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run (or resume) the program; its output text, or :class:`ProgramPaused`."""
        code = args.get("code")
        if not isinstance(code, str):
            raise ToolExecutionError(self.name, "'code' must be a string holding a program")
        resume = self._resumes.pop(ctx.call_id, None) if ctx.call_id else None
        monty = {key: value for key, value in self.limits.items() if key not in OWN_LIMITS}
        async with self._sandbox(self.functions, monty) as sandbox:
            program = _Program(self, sandbox, ctx)
            try:
                if resume is None:
                    segment = await sandbox.start(code)
                else:
                    segment = await program.restore(code, resume)
                return await program.run(segment)
            except ProgramError as exc:
                await program.cancel()  # first: the report lists the calls it cuts off
                raise ProgramError(
                    exc.reason,
                    program.report(exc.report),
                    redacted_reason=program.redacted(exc.reason),
                ) from exc
            except asyncio.CancelledError:
                # The loop's tool_timeout, say: the loop takes the report (timed_out).
                await program.cancel()
                if ctx.call_id is not None:
                    self._cut_short[ctx.call_id] = program.report
                raise
            finally:
                await program.cancel()

    def cut_short(self, call_id: str, reason: str) -> str | None:
        """The report of call ``call_id``'s program, which the loop's cancellation cut
        short, under ``reason``: what it printed and the calls that ran or may have run,
        which the model must know of before it writes the program again. None when no
        program of that call was cut short.

        Example:
            >>> RunPythonTool(ToolTable(None), [], {}, 60.0).cut_short("c1", "cancelled") is None
            True
        """
        report = self._cut_short.pop(call_id, None)
        return None if report is None else report(reason)

    def timed_out(self, invocation: ToolInvocation) -> ToolInvocation:
        """``invocation``, a call of this tool; when the loop's ``tool_timeout`` cut its
        program short, with a :class:`~agcore_tools.ProgramError` in place of the
        timeout, whose report shows the model what the program printed and the calls
        that ran, as any failed program's does.

        Example:
            >>> tool = RunPythonTool(ToolTable(None), [], {}, 60.0)
            >>> plain = ToolInvocation("run_python", {}, output="ok", call_id="c1")
            >>> tool.timed_out(plain) is plain
            True
        """
        report = self._cut_short.pop(invocation.call_id or "", None)
        error = invocation.error
        if report is None or not isinstance(error, ToolTimeoutError):
            return invocation
        reason = f"TimeoutError: the program ran over the loop's tool_timeout of {error.timeout:g} s"  # fmt: skip
        failed = ProgramError(reason, report(reason))
        failed.__cause__ = error
        return dataclasses.replace(invocation, error=failed)


def _listed(value: Any) -> str:
    """An argument in the lines listing a program's calls, written as pydantic writes it
    for the model, as an edit note writes it: an app's model (an approval's edited
    arguments) without its excluded fields and with its JSON-masked secrets masked,
    where its repr() would show them. A program's own values are plain JSON, and read
    as their repr() did."""
    try:
        return repr(to_jsonable_python(value, fallback=str))
    except ValueError:  # bytes that are no UTF-8, a lone surrogate in a key
        return f"<a {type(value).__name__} value that cannot be written as JSON>"


class _Program:
    """One program's run: its calls in flight, results not yet delivered, calls waiting
    for approval, and printed output."""

    def __init__(self, tool: RunPythonTool, sandbox: ProgramSandbox, ctx: ToolContext) -> None:
        self._tool = tool
        self._sandbox = sandbox
        self._ctx = ctx
        self._outer = ctx.call_id or RUN_PYTHON
        self._running: dict[int, asyncio.Task[ToolInvocation]] = {}
        self._done: dict[int, dict[str, Any]] = {}
        self._waiting: dict[int, dict[str, Any]] = {}
        self._printed: list[str] = []
        self._dropped = False
        self._ran: list[str] = []
        # Notes of the calls an approval edited, across its pauses: what heads its output.
        self._edited: list[str] = []
        self._started: dict[int, tuple[str, dict[str, Any]]] = {}
        self._calls = 0  # the tool calls the program made, across its pauses
        # The calls the program awaited (alone or in a gather), across its pauses: one
        # whose result it never read (a failed gather's siblings) was still awaited.
        self._awaited: set[int] = set()
        # A tool error's message delivered to the program -> its redacted form (see
        # redacted()): the program raises it as its own, and that becomes a span status.
        self._redactions: dict[str, str] = {}

    def report(self, traceback: str) -> str:
        """What the model reads of a failed program: its output, its traceback, and the
        calls that ran (a fixed program should not make again the ones with effects)."""
        parts = [*self._edited, with_printed("".join(self._printed), traceback.rstrip("\n"))]
        if self._ran:
            shown = self._ran[:20]
            more = f"\n  ... and {len(self._ran) - 20} more" if len(self._ran) > 20 else ""
            parts.append(
                "Calls that ran or may have run before the failure (do not repeat the ones "
                "that change something):\n  " + "\n  ".join(shown) + more
            )
        return "\n".join(parts)

    def redacted(self, reason: str) -> str | None:
        """``reason`` (a failed program's) with each tool error message delivered to the
        program in its redacted form, or None when it holds none that differs."""
        redacted = reason
        for message, form in self._redactions.items():
            redacted = redacted.replace(message, form)
        return None if redacted == reason else redacted

    async def restore(self, code: str, resume: Mapping[str, Any]) -> Segment:
        state = resume["state"]
        redactions = state.get("redactions")  # absent in older states
        if isinstance(redactions, Mapping):
            self._redactions = {
                k: v for k, v in redactions.items() if isinstance(k, str) and isinstance(v, str)
            }
        self._printed = [state.get("printed", "")]
        self._dropped = bool(state.get("dropped", False))
        self._done = {int(k): v for k, v in state.get("done", {}).items()}
        self._waiting = {int(w["id"]): w for w in state.get("waiting", ())}
        self._ran = [str(line) for line in state.get("ran", ())]  # absent in older states
        self._edited = [str(line) for line in state.get("edited", ())]  # and this
        self._calls = int(state.get("calls", len(self._ran) + len(self._waiting)))  # so is this
        pending = [int(n) for n in state.get("pending", ())]
        # Absent in older states: each call they had made counts as awaited.
        awaited = state.get("awaited", [*self._done, *self._waiting, *pending])
        self._awaited = {int(n) for n in awaited}
        try:
            segment = await self._sandbox.restore(code, state["snapshot"], pending)
        except ApprovalError as exc:  # the loop raises it to the app: the call never ran
            named = f"the paused program of call '{self._outer}'"
            error = ApprovalError(
                exc.message.replace("the paused program", named, 1), tool_name=RUN_PYTHON
            )
            error.recoverable = False
            raise error from exc
        for number, answer in resume.get("answers", {}).items():
            waiting = self._waiting.pop(int(number))
            if "declined" in answer:
                self._done[int(number)] = {"error": ["PermissionError", answer["declined"]]}
            else:
                self._note_edit(waiting["tool"], waiting["arguments"], answer["run"])
                self._start(int(number), waiting["tool"], answer["run"])
        return segment

    def _note_edit(self, tool: str, asked: Any, ran: Any) -> None:
        """Note a call an approval made run with other arguments than the program's: the
        model reads the program's code, with its own arguments, and must read what ran
        (a Temporal run begun before ``agcore-edited-calls-noted`` read no note)."""
        if ran == asked or not EDITS_NOTED.get():
            return
        function = {called: name for name, (called, _, _) in self._tool.functions.items()}
        self._edited.append(
            f"[the user edited the arguments of the program's call to "
            f"{function.get(tool, tool)}() before it ran: the program gave "
            f"{noted_arguments(asked)}; it ran with {noted_arguments(ran)}]"
        )

    async def run(self, segment: Segment) -> Any:
        while True:
            room = MAX_PRINTED - sum(len(text) for text in self._printed)
            if len(segment.printed) > room:  # each sandbox caps its own; this, the sum
                segment.printed, segment.dropped = segment.printed[: max(room, 0)], True
            self._printed.append(segment.printed)
            self._dropped = self._dropped or segment.dropped
            for number, tool, args in segment.calls:
                self._count()
                await self._call(number, tool, args)
            if segment.pending is None:
                if UNAWAITED_CALLS_FAIL.get():
                    await self._refuse_unawaited()
                return self._text(segment.output)
            self._awaited.update(segment.pending)
            if any(number in self._waiting for number in segment.pending):
                await self._settle_all()
                return await self._pause(segment.pending)
            results = await self._results(segment.pending)
            segment = await self._sandbox.resume(results)

    def _count(self) -> None:
        """Count one more call; past ``max_calls``, the program fails (the call never
        runs). Counted here, not by Monty, whose count restarts at every restore."""
        self._calls += 1
        limit = self._tool.max_calls
        if limit is not None and self._calls > limit and CALLS_LIMITED.get():
            reason = f"RuntimeError: the program made more than {limit} tool calls (CodeMode limits)"  # fmt: skip
            raise ProgramError(reason, reason)

    async def _refuse_unawaited(self) -> None:
        """Fail an ended program that called tools without awaiting them. It read a
        coroutine in place of each result (and likely printed it), so its output is
        wrong; the calls had started, so they finish and the report lists them."""
        numbers = sorted({*self._running, *self._done, *self._waiting} - self._awaited)
        # A call awaited in a gather that failed first runs to its end, as in Python:
        # the program went on, so the call is not cut off with its effect unknown.
        await self._settle_all()
        if not numbers:
            return
        function = {tool: name for name, (tool, _, _) in self._tool.functions.items()}
        tools = [self._started[n][0] if n in self._started else self._waiting[n]["tool"] for n in numbers]  # fmt: skip
        called = list(dict.fromkeys(function.get(tool, tool) for tool in tools))
        reason = (
            f"RuntimeError: the program called {', '.join(f'{name}()' for name in called)} "
            "without await, so it never read the result: tools are async functions; write "
            f"`await {called[0]}(...)`, or `await asyncio.gather(...)` for calls that run together"
        )
        raise ProgramError(reason, reason)

    def _text(self, value: Any) -> str:
        printed = "".join(self._printed)
        parts = [*self._edited, printed.rstrip("\n")] if printed else [*self._edited]
        if self._dropped:
            parts.append(f"[the program printed over {MAX_PRINTED} characters; the rest was dropped]")  # fmt: skip
        if value is not None:
            parts.append(f"result: {json.dumps(value, ensure_ascii=False)}")
        return "\n".join(parts) or "(the program printed nothing and returned None)"

    async def _call(self, number: int, tool: str, args: dict[str, Any]) -> None:
        found = non_finite(args) if NON_FINITE_REFUSED.get() else None
        if found is not None:
            # float("nan") is the model's to fix, as its direct call's NaN is: no
            # needs_approval rule can weigh it (every comparison is False).
            self._start(number, tool, args, not_a_number(tool, *found))
            return
        call_id = inner_call_id(self._outer, number)
        parsed = ParsedCall(call_id, tool, json.dumps(args, default=str), args)
        table, timeout = self._tool.table, self._tool.call_timeout
        [checked], asked = await approval_requests(table, [parsed], self._ctx, None, timeout)
        request = asked[0] if asked else None
        if request is not None:
            self._waiting[number] = {
                "id": number, "tool": tool, "arguments": args, "reason": request.reason
            }  # fmt: skip
        else:
            self._start(number, tool, args, checked.error)

    def _start(
        self, number: int, tool: str, args: dict[str, Any], refused: ToolError | None = None
    ) -> None:
        call = ToolCall(tool, args, inner_call_id(self._outer, number))
        self._started[number] = (tool, args)
        self._running[number] = asyncio.ensure_future(self._invoke(call, refused))

    async def _invoke(self, call: ToolCall, refused: ToolError | None = None) -> ToolInvocation:
        if refused is not None:  # arguments the tool refuses, of a call that would ask
            return ToolInvocation(
                call.name, call.args, error=refused, call_id=call.call_id, may_have_run=False
            )
        timeout = self._tool.call_timeout
        async for _, invocation in as_completed(self._tool.table, [call], self._ctx, timeout):
            return invocation
        raise AssertionError("as_completed gave no result for one call")  # pragma: no cover

    def _note(self, tool: str, given: Any, outcome: str) -> None:
        given = given if isinstance(given, Mapping) else {}
        arguments = ", ".join(f"{k}={_listed(v)}" for k, v in given.items())
        self._ran.append(f"{tool}({arguments[:160]}) -> {outcome[:160]}")

    def _note_ended(self, invocation: ToolInvocation) -> None:
        error = invocation.error
        outcome = "ok" if error is None else f"failed: {error}"
        self._note(invocation.tool_name, invocation.input, outcome)

    def _settle(self, number: int, task: asyncio.Task[ToolInvocation]) -> None:
        invocation = task.result()
        error = invocation.error
        self._note_ended(invocation)
        if isinstance(invocation.output, CallPaused):
            # A question to the user cannot pause a program yet: the program is told,
            # and the model can make the call directly, where it pauses the loop.
            why = f"tool '{invocation.tool_name}' asked the user a question, which a program cannot wait for; call it directly instead"  # fmt: skip
            self._done[number] = {"error": ["RuntimeError", why]}
        elif error is None:
            try:
                output = as_listed(invocation.output, self._tool.table.get(invocation.tool_name))
                value = program_value(output, invocation.tool_name)
                # A lone surrogate (a file name os.listdir decoded) as U+FFFD, as the
                # model reads it: the sandbox takes no text UTF-8 cannot encode.
                plain = to_jsonable_python(value, fallback=str)
                self._done[number] = {"value": scrub_json(plain)}
            except ValueError as exc:  # bytes deep in a model, say: the program is told
                why = f"tool '{invocation.tool_name}' returned a value a program cannot receive: {exc}"  # fmt: skip
                self._done[number] = {"error": ["RuntimeError", why]}
        elif error.is_recoverable():
            self._done[number] = {"error": ["RuntimeError", self._delivered(error)]}
        elif isinstance(error, ToolNotFoundError):
            # Listed when the run started, unregistered since: the program is told, as
            # it is of a name it never had.
            self._done[number] = {"error": ["NameError", self._delivered(error)]}
        else:
            raise error  # as for a direct call: the loop stops

    def _delivered(self, error: ToolError) -> str:
        """``error``'s message for the program, its redacted form noted for redacted()."""
        message = str(error)
        form = described(error, False)
        if form != message:
            self._redactions[message] = form
        return message

    async def _results(self, pending: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The results of the calls in ``pending`` that have ended; at least one."""
        while not any(number in self._done for number in pending):
            tasks = [self._running[n] for n in pending if n in self._running]
            if not tasks:
                raise ToolExecutionError(RUN_PYTHON, "the program waits for a call that never started")  # fmt: skip
            # Bounded: each call has its own timeout (as_completed enforces it).
            await first_done(tasks)
            for number in [n for n, t in self._running.items() if t.done()]:
                self._settle(number, self._running.pop(number))
        return {n: settled(self._done.pop(n)) for n in pending if n in self._done}

    async def _settle_all(self) -> None:
        await all_done(list(self._running.values()))  # bounded as above
        running, self._running = self._running, {}
        for number, task in running.items():
            self._settle(number, task)

    async def _pause(self, pending: Sequence[int]) -> ProgramPaused:
        state = {
            "snapshot": await self._sandbox.snapshot(),
            "pending": list(pending),
            "done": {str(n): v for n, v in self._done.items()},
            "waiting": list(self._waiting.values()),
            "printed": "".join(self._printed),
            "dropped": self._dropped,
            "ran": list(self._ran),  # for the report, should the resumed program fail
            "calls": self._calls,
            "awaited": sorted(self._awaited),
            "redactions": dict(self._redactions),
        }
        if self._edited:  # absent otherwise, as in the states of earlier versions
            state["edited"] = list(self._edited)
        requests = tuple(
            ApprovalRequest(
                inner_call_id(self._outer, w["id"]), w["tool"], w["arguments"], w["reason"]
            )
            for w in self._waiting.values()
        )
        logger.debug("program of call %r paused for %d approval(s)", self._outer, len(requests))
        return ProgramPaused(requests, state)

    async def cancel(self) -> None:
        """Stop the calls still running. Each is noted among the calls that ran: with
        its outcome if it ended, else as cut off, since it may have taken effect (a sync
        tool's thread runs on)."""
        running, self._running = self._running, {}
        tasks = [task for task in running.values() if not task.done()]
        for task in tasks:
            task.cancel()
        with contextlib.suppress(TimeoutError):
            await with_timeout(all_done(tasks), 5.0)
        for number, task in running.items():
            if task.done() and not task.cancelled() and task.exception() is None:
                self._note_ended(task.result())
            else:
                tool, args = self._started[number]
                self._note(tool, args, "cut off when the program failed; it may have run")
