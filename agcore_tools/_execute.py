"""Running tool calls: one (:func:`execute`), or several at once (:func:`as_completed`),
each with its own timeout, results reported the moment they exist, and every call still
running cancelled when the caller gives up.

A registry keeps its tools in a :class:`~agcore_tools._table.ToolTable` and runs every
call through here, so a call goes down from the registry to the tool and back without
re-entering it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from . import _otel
from ._aio import THREADS, positive_number, unfinished, wait_task, with_timeout
from ._clock import CLOCK, DEADLINE, expired_limit
from ._context import end_reports
from ._guard import Guard
from ._records import ToolCall, ToolEntry, ToolInvocation, ToolStats
from ._stop import StopWatch
from ._table import ToolTable, note_unasked, unknown_tool_error
from .base import BaseTool, ToolContext
from .error import (
    InvalidArgumentsError,
    ToolConfigError,
    ToolError,
    ToolExecutionError,
    ToolTimeoutError,
)
from .pending import LEFT_RUNNING, CallPaused

__all__ = [
    "CANCEL_GRACE",
    "Guarded",
    "as_call",
    "as_completed",
    "check_context",
    "execute",
    "guarded",
    "run_one",
]

logger = logging.getLogger("agcore_tools.registry")

CANCEL_GRACE = 5.0
"""Seconds invoke_all() waits for cancelled calls to finish before it gives up on them."""

Guarded = Callable[[ToolCall, "ToolContext | None", "float | None"], Awaitable[ToolInvocation]]
"""How one call of a batch runs: :func:`guarded` over a table, maybe traced."""


_UNREAD = ToolContext()
"""The context a call without one passes to a tool that never reads it."""


async def execute(
    table: ToolTable,
    name: str,
    args: Mapping[str, Any],
    ctx: ToolContext | None,
    deadline: float | None = None,
    began: list[bool] | None = None,
    *,
    callers: bool = False,
    direct: str | None = None,
) -> ToolInvocation:
    """Look up, check permissions, then execute one tool: ``ToolRegistry.invoke``.

    A tool with a policy is admitted by its guard first (breaker, rate, concurrency),
    whose refusal is raised like a permission's; a rate limit's wait ends by
    ``deadline``, on the library's clock. Then the cache answers, or the tool runs;
    ``began`` (a one-item list) is set true as a guarded tool starts to run: not for
    a call refused, answered from the cache, or stopped before (waiting for its turn, a
    slot or the cache's store).

    Cancelling the call cancels its context's token, so a sync tool (or generator) in
    its worker thread stops too. ``callers``: ``ctx`` is the caller's own, maybe shared
    by other calls; the call runs in a child of it, whose token alone is cancelled, and
    cancelling the caller's token (from any thread) stops the call: it raises
    :class:`~agcore_tools.RunStoppedError` (see :class:`~agcore_tools._stop.StopWatch`).
    ``direct``: the registry method the app called (``"invoke()"``), for a call no
    approval screen has seen (see :func:`note_unasked`).
    """
    if callers:
        check_name(name, "invoke()", "invoke({!r}, ...)")
        if ctx is not None:
            check_context(ctx, "invoke()")
            with StopWatch(ctx.cancellation, direct or "invoke()"):
                # Its events name the tool.
                mine = ctx.for_call(ctx.call_id, name)
                return await execute(table, name, args, mine, deadline, began, direct=direct)
    entry = table.entries.get(name)
    if entry is None:
        raise unknown_tool_error(table, name)
    table.check(entry)
    if direct is not None:
        note_unasked(table, entry, direct)
    tool = entry.tool
    guard = entry.guard
    if ctx is None or (ctx is _UNREAD and guard is not None):
        # A guard tells calls apart by their context (its breaker's probe): its own.
        uses = tool.uses_context or guard is not None
        ctx = ToolContext(tool_name=entry.name) if uses else _UNREAD
    # A guarded tool's own timeout covers its wait for a turn or a slot and its run, when
    # it ends before the caller's deadline (which bounds both otherwise).
    # A subclass's own `timeout` of another kind (a timedelta, an HTTP client's Timeout)
    # is not one: only a number of seconds bounds the wait.
    own = tool.timeout if guard is not None and positive_number(tool.timeout) else None
    ends = None if own is None else CLOCK.get()() + own
    if ends is not None and deadline is not None and deadline <= ends:
        own = ends = None
    if guard is not None:
        if own is None or ends is None:
            await guard.admit(ctx, deadline, args)  # refusals raise, as a permission's do
        else:
            try:
                await with_timeout(guard.admit(ctx, ends, args), own)
            except TimeoutError as exc:  # out of time waiting for a concurrency slot
                # A failure of the call, recorded as one that ran out of time running
                # is (invoke() raises only what refuses a call), as guarded() does.
                late = ToolTimeoutError(tool.name, own, started=False)
                late.__cause__ = exc
                return ToolInvocation(
                    tool.name, args, error=late, call_id=ctx.call_id, may_have_run=False
                )
        if began is None:
            began = [False]
    # The execution proper, inlined (one coroutine layer fewer per call); every call
    # of invoke_all() comes through here too.
    name = tool.name
    stats = entry.stats
    error: ToolError | None = None
    output: Any = None
    cached = False
    clock = CLOCK.get()  # read once: the same context's clock for start and end
    started = clock()
    # A capped tool's worker threads are noted: one still running past the call's end
    # keeps its slot.
    threads: list[Any] | None = None
    if guard is not None and guard.slots is not None:
        threads = []
        noting = THREADS.set(threads)
    try:
        # An exact-type test first: isinstance(args, Mapping) costs ~0.1 µs.
        call_args = args if type(args) is dict else _arguments_dict(name, args)
        plan = entry.argument_plan
        if plan is not None:
            call_args, _ = plan.apply(call_args)
        if guard is None:
            output = await tool.execute(call_args, ctx)
        else:
            assert began is not None  # set above, for a guarded tool
            answering = guard.answer(
                functools.partial(tool.execute, call_args, ctx),
                call_args,
                fresh=guard.caches and _asks(table, entry),
                started=began,
            )
            if ends is None:
                output, cached = await answering
            else:
                limit = DEADLINE.set((ends, own or 0.0))  # the tool's own, inside the caller's
                try:
                    output, cached = await _within(
                        answering, ends - clock(), own or 0.0, ctx, name, began
                    )
                finally:
                    DEADLINE.reset(limit)
    except ToolError as exc:
        error = exc
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure is a structured error
        # SystemExit too: a CLI helper's sys.exit() (argparse's, on a bad argument) ends
        # its call, not the app's run.
        error = ToolExecutionError(name, f"{type(exc).__name__}: {exc}")
        error.__cause__ = exc
    except asyncio.CancelledError as exc:
        if not _own_cancellation():
            _abandoned(stats, guard, ctx, clock() - started, threads)
            raise
        # Nobody cancelled this call: the tool awaited something someone else
        # cancelled. Its failure, reported as any other.
        error = ToolExecutionError(name, "CancelledError: something it awaited was cancelled")
        error.__cause__ = exc
    except KeyboardInterrupt as exc:
        if threading.current_thread() is threading.main_thread():
            _abandoned(stats, guard, ctx, clock() - started, threads)
            raise  # maybe the user's Ctrl-C: it goes on up, as any BaseException below
        # Python raises a Ctrl-C in the main thread only, so on another thread's loop
        # (the library's, for every *_sync call) this is the tool's own raise: a
        # failure of its call, which must not stop that loop.
        detail = f": {exc}" if str(exc) else ""
        error = ToolExecutionError(name, f"KeyboardInterrupt{detail} (raised by the tool)")
        error.__cause__ = exc
    except BaseException:
        # KeyboardInterrupt, a test framework's outcome (pytest.fail/skip), another
        # library's cancellation: not the tool's result, so it goes on up; the call
        # still gives back its slot and its breaker's probe.
        _abandoned(stats, guard, ctx, clock() - started, threads)
        raise
    finally:
        if threads is not None:
            THREADS.reset(noting)
    duration = clock() - started
    if guard is not None:
        # A cached answer, or a call that timed out before its tool started, tells no
        # breaker.
        assert began is not None
        paused = error is None and isinstance(output, CallPaused)
        guard.release(
            ctx, error, ended=began[0], thread=unfinished(threads), paused=paused, args=args
        )
    if ctx.listening:  # a helper thread's late report must not follow the call's end
        end_reports(ctx)
    if cached:  # answered, not executed: no call in the stats, nothing took effect
        return ToolInvocation(name, args, output, None, ctx.call_id, duration, False, True)
    stats.calls += 1
    stats.total_seconds += duration
    if error is not None:
        stats.failures += 1
        # The error's text names the tool, never the argument values it may quote (and
        # reads no environment: this runs in Temporal's workflow sandbox too).
        logger.debug("%s", _otel.described(error, False))
    ran = True if error is None else error.may_have_run
    return ToolInvocation(name, args, output, error, ctx.call_id, duration, ran)


def _asks(table: ToolTable, entry: ToolEntry) -> bool:
    # Every call of a tool that PermissionConfig.ask puts to a person runs approved (or
    # not at all), and an approved action must take effect: never a cached answer.
    checker = table.checker
    return checker is not None and checker.asking(entry.declared_permissions()) is not None


def _abandoned(
    stats: ToolStats,
    guard: Guard | None,
    ctx: ToolContext,
    duration: float,
    threads: list[Any] | None,
) -> None:
    """End a call that an exception other than its result stops (a cancel from its
    caller, a KeyboardInterrupt): a failure in its stats, a call that did not run to an
    end for its guard, which frees its slot (or leaves it to a worker thread still
    running) and lets another call be its breaker's probe."""
    if ctx is not _UNREAD:  # _UNREAD is every such call's: no tool reads it
        ctx.cancellation.cancel()  # a sync tool's thread learns of it too
    stats.calls += 1
    stats.failures += 1
    stats.total_seconds += duration
    if guard is not None:  # the guard that admitted the call, whatever the entry's now
        guard.release(ctx, None, ended=False, thread=unfinished(threads))


async def _within(
    answering: Awaitable[tuple[Any, bool]],
    left: float,
    own: float,
    ctx: ToolContext,
    name: str,
    began: list[bool],
) -> tuple[Any, bool]:
    """A guarded call's answer within what its tool's own timeout ``own`` left after
    its wait for a turn or a slot: the wait counts against the timeout, not on top.
    Out of time before the tool started (reading its cache), it never ran."""
    try:
        return await with_timeout(answering, max(left, 0.0))
    except TimeoutError as exc:
        if expired_limit() is None:
            # The tool's own TimeoutError (an HTTP read's), with time left: its failure,
            # reported as any other, not as its timeout running out.
            raise
        ctx.cancellation.cancel()  # a sync tool's thread learns of it too
        raise ToolTimeoutError(name, own, started=began[0]) from exc


def _own_cancellation() -> bool:
    """Whether a CancelledError that reached a tool's call is the tool's own: its task
    was not asked to cancel (a cancel from the caller, or a timeout, sets
    ``cancelling()``). Python 3.10 cannot tell the two apart: there, every
    CancelledError is the caller's."""
    if sys.version_info < (3, 11):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


async def guarded(
    table: ToolTable,
    call: ToolCall,
    ctx: ToolContext | None,
    timeout: float | None,
    *,
    direct: str | None = None,
    left: dict[str, list[Any]] | None = None,
) -> ToolInvocation:
    """One call of a batch, within ``timeout``, in a context derived from ``ctx`` (a
    fresh one of its own when None); what goes wrong is recorded in the invocation,
    never raised. ``direct``: as for :func:`execute`. ``left``: the loop's turn's
    :data:`~agcore_tools.pending.LEFT_RUNNING`, which the call sees (any other call
    sees none, not even one made by a tool of the turn)."""
    name, args, call_id = call
    if ctx is None:
        # Its own, never a shared one: a tool reading its session, shared state or
        # idempotency key must not see another caller's.
        call_ctx = ToolContext(call_id=call_id, tool_name=name)
    else:
        call_ctx = ctx.for_call(call_id, name)
    # Whether a guarded tool started to run: a timeout while it waited its turn, or
    # for its cache, is no failure of the tool's.
    started = [False]
    # Set before the 3.10 path's task copies the context.
    inherited = LEFT_RUNNING.get()
    leaving = LEFT_RUNNING.set(left) if left is not None or inherited is not None else None
    try:
        # The deadline is set here rather than by _aio.with_timeout, so the call goes
        # straight down to execute() without passing back through this module.
        if timeout is None:
            return await execute(table, name, args, call_ctx, direct=direct)
        deadline = CLOCK.get()() + timeout  # a rate limit's wait ends by it
        running = execute(table, name, args, call_ctx, deadline, started, direct=direct)
        # Set before the 3.10 path's task copies the context.
        limit = DEADLINE.set((deadline, timeout))
        try:
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(timeout):
                    return await running
            # 3.10: asyncio.wait_for would drop a cancel that lands as the tool ends.
            return await wait_task(asyncio.ensure_future(running), timeout)
        finally:
            DEADLINE.reset(limit)
    except ToolError as exc:
        # Only the lookup and the permission check raise out of invoke(): recorded
        # here; the tool never ran.
        return ToolInvocation(name, args, error=exc, call_id=call_id, may_have_run=exc.may_have_run)
    except (asyncio.TimeoutError, TimeoutError) as exc:  # one class from 3.11 on
        # The execution was cancelled; a sync tool still running in its thread
        # can see it through the context's cancellation token.
        call_ctx.cancellation.cancel()
        entry = table.entries.get(name)
        guard = entry.guard if entry is not None else None
        # A guarded call that timed out waiting for its turn or its cache never ran.
        ran = guard is None or started[0]
        if guard is not None and ran:
            guard.failed_after(call_ctx)  # a timeout is a failure to its breaker
        error = ToolTimeoutError(name, timeout or 0.0, started=ran)
        error.__cause__ = exc
        return ToolInvocation(
            name, args, error=error, call_id=call_id, duration=timeout or 0.0, may_have_run=ran
        )
    except asyncio.CancelledError:
        call_ctx.cancellation.cancel()  # a sync tool's thread learns of it too
        raise
    finally:
        if leaving is not None:
            LEFT_RUNNING.reset(leaving)


async def as_completed(
    table: ToolTable,
    calls: Iterable[ToolCall | tuple[Any, ...]],
    ctx: ToolContext | None,
    timeout: float | None,
    *,
    caller: str | None = None,
    left: dict[str, list[Any]] | None = None,
) -> AsyncGenerator[tuple[int, ToolInvocation], None]:
    """Run ``calls`` concurrently; yield ``(position, invocation)`` as each ends (the
    body of :meth:`ToolRegistry.invoke_as_completed`). ``caller``, the method the calls
    were given to (``"invoke_all()"``), is named in the :class:`ToolConfigError` of a
    call whose name is no str (nor None), which it is answered with: not run. The
    calls of a ``caller`` are the app's own, which no approval screen has seen (see
    :func:`note_unasked`); cancelling the ``ctx`` it gave (from any thread) stops them:
    the calls still running are cancelled, and :class:`~agcore_tools.RunStoppedError`
    is raised in place of the next result. ``left``: as for :func:`guarded` (the loop's
    turn gives it)."""
    normalised = [as_call(call) for call in calls]
    if not normalised:
        return
    runner = functools.partial(guarded, table, direct=caller, left=left)
    traced = _otel.wrap_invoke(table, runner)  # traced, if on

    def run(call: ToolCall, ctx: ToolContext | None) -> Awaitable[ToolInvocation]:
        name = call.name
        if caller is None or name is None or isinstance(name, str):
            return traced(call, ctx, timeout)
        return _refused(call, name_mistake(name, caller, "({!r}, args)"))

    watched = caller is not None and ctx is not None
    if len(normalised) == 1:
        # The call's own token, a child of ctx's, is cancelled with it (in guarded).
        if not watched:
            yield 0, await run(normalised[0], ctx)
            return
        assert ctx is not None and caller is not None
        with StopWatch(ctx.cancellation, caller):  # not around the yield: the caller's code
            invocation = await run(normalised[0], ctx)
        yield 0, invocation
        return
    # One child token for the batch: cancelling it reaches every call's token, so
    # sync tools in worker threads learn of a cancelled caller too.
    batch = (ctx if ctx is not None else ToolContext()).for_call(None)
    # Done-callbacks feed a queue, so each result is reported the moment it exists; a
    # stop puts None in it.
    finished: asyncio.Queue[asyncio.Task[ToolInvocation] | None] = asyncio.Queue()
    tasks: dict[asyncio.Task[ToolInvocation], int] = {}
    stop: StopWatch | None = None
    if watched:
        assert ctx is not None and caller is not None

        def stopped() -> None:  # on the loop: the calls stop now, not at the next result
            finished.put_nowait(None)
            _cancel_all(batch, tasks)

        stop = StopWatch(ctx.cancellation, caller, stopped)
        if stop.stopped:  # cancelled before the call: nothing runs
            stop.end()
            raise stop.error()
    for position, call in enumerate(normalised):
        task = asyncio.ensure_future(run(call, batch))
        task.add_done_callback(finished.put_nowait)
        tasks[task] = position
    try:
        for _ in range(len(tasks)):
            # Bounded by each call's own timeout, enforced in guarded().
            ended = await finished.get()
            if stop is not None and stop.stopped:  # set at once, by the cancelling thread
                raise stop.error()
            assert ended is not None  # only a stop puts None
            yield tasks[ended], ended.result()
    finally:
        if stop is not None:
            stop.end()
        pending = _cancel_all(batch, tasks)
        if pending:
            # Bounded: a tool that swallows its cancellation must not hang the caller.
            _, stuck = await asyncio.wait(pending, timeout=CANCEL_GRACE)
            if stuck:
                logger.warning(
                    "%d tool call(s) ignored cancellation for %.0f s; abandoning them",
                    len(stuck),
                    CANCEL_GRACE,
                )


def _cancel_all(
    batch: ToolContext, tasks: Iterable[asyncio.Task[ToolInvocation]]
) -> list[asyncio.Task[ToolInvocation]]:
    """Cancel the calls of a batch still running, and its token; the cancelled tasks."""
    pending = [task for task in tasks if not task.done()]
    if pending:
        batch.cancellation.cancel()
        for task in pending:
            task.cancel()
    return pending


async def run_one(
    table: ToolTable, call: ToolCall, ctx: ToolContext | None, timeout: float | None
) -> ToolInvocation:
    """Run ``call`` as ``invoke_all()`` runs one (traced, within ``timeout``, what goes
    wrong recorded), for a call an approval screen has seen: no direct call's log."""
    async with contextlib.aclosing(as_completed(table, [call], ctx, timeout)) as finished:
        async for _, invocation in finished:
            return invocation
    raise AssertionError("as_completed gave no result for one call")  # pragma: no cover


async def _refused(call: ToolCall, error: ToolConfigError) -> ToolInvocation:
    # A tool object given as the name, say: the caller's mistake, recorded for that call.
    return ToolInvocation(str(call.name), call.args, error=error, call_id=call.call_id)


def check_context(ctx: object, method: str) -> None:
    """Refuse a ``ctx`` that is not a :class:`ToolContext` (or None), naming ``method``:
    read at the first call, it would fail there with no word of why.

    Example:
        >>> check_context({"user": "ann"}, "invoke()")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: invoke() takes a ToolContext as ctx, got dict (metadata goes in ToolContext(metadata=...))
    """
    if ctx is not None and not isinstance(ctx, ToolContext):
        hint = " (metadata goes in ToolContext(metadata=...))" if isinstance(ctx, Mapping) else ""
        raise ToolConfigError(
            f"{method} takes a ToolContext as ctx, got {type(ctx).__name__}{hint}"
        )


def check_name(name: object, method: str, fix: str) -> None:
    """Refuse a tool name that is not a non-empty string, given by the caller (a model's
    nameless call is the model's to be told about, and does not come here): ``fix``
    formats the tool's own name into the call to make instead.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> check_name(StaticTool("add"), "invoke()", "invoke({!r}, ...)")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: invoke() takes a tool name (a str), got StaticTool: use invoke('add', ...)
    """
    mistake = name_mistake(name, method, fix)
    if mistake is not None:
        raise mistake


def name_mistake(name: object, method: str, fix: str) -> ToolConfigError | None:
    """The error :func:`check_name` raises for ``name``, or None for a good name.

    Example:
        >>> str(name_mistake(None, "invoke_all()", "({!r}, args)"))
        'invoke_all() takes a tool name (a str), got NoneType'
    """
    if isinstance(name, str):
        return None if name else ToolConfigError(f"{method} takes a tool name, got an empty string")
    # A tool object or a function was read as a name: "tool '<FunctionTool 'add'>' is
    # not registered", and None as a model's call "without a name".
    own = getattr(name, "name" if isinstance(name, (BaseTool, ToolEntry)) else "__name__", None)
    hint = f": use {fix.format(own)}" if isinstance(own, str) else ""
    return ToolConfigError(f"{method} takes a tool name (a str), got {type(name).__name__}{hint}")


def listed_calls(calls: object, method: str) -> list[ToolCall]:
    """The calls of :meth:`ToolRegistry.invoke_all` (named ``method`` in errors), each
    made a :class:`ToolCall`; a ``calls`` that is no list of calls, or an item that is
    no call, raises :class:`ToolConfigError`. A call's name is not checked here: a bad
    one fails that call alone (see :func:`as_completed`).

    Example:
        >>> listed_calls(None, "invoke_all()")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: invoke_all() takes a list of calls ((name, args) pairs, (name, args, call_id) triples or ToolCall objects), got NoneType
    """
    # None failed with a bare TypeError, and a str was read as one call per character.
    if isinstance(calls, (str, bytes, Mapping, ToolCall)) or not isinstance(calls, Iterable):
        one = " (put one call in a list)" if isinstance(calls, ToolCall) else ""
        raise ToolConfigError(
            f"{method} takes a list of calls ((name, args) pairs, (name, args, call_id) "
            f"triples or ToolCall objects), got {type(calls).__name__}{one}"
        )
    return [as_call(call) for call in calls]


def as_call(call: ToolCall | Sequence[Any]) -> ToolCall:
    """A call of :meth:`ToolRegistry.invoke_all`, from a ``ToolCall`` or a tuple."""
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, tuple) and len(call) in (2, 3):
        return ToolCall(*call)
    raise ToolConfigError(
        f"invoke_all() takes (name, args) pairs, (name, args, call_id) triples or ToolCall "
        f"objects, got {call!r}"
    )


def _arguments_dict(name: str, args: Any) -> dict[str, Any]:
    if not isinstance(args, Mapping):
        raise InvalidArgumentsError(
            name, f"arguments must be a JSON object, got {type(args).__name__}"
        )
    return dict(args)
