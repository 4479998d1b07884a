"""Several tool calls at once: each with its own timeout, results reported the moment
they exist, and every call still running cancelled when the caller gives up.

:meth:`ToolRegistry.invoke_all` and :meth:`~ToolRegistry.invoke_as_completed` run
through here, with the registry's own ``invoke`` for each call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from ._aio import with_timeout
from ._records import ToolCall, ToolInvocation
from .base import ToolContext
from .error import ToolConfigError, ToolError, ToolTimeoutError

__all__ = ["CANCEL_GRACE", "Guarded", "as_call", "as_completed", "guarded"]

logger = logging.getLogger("agcore_tools.registry")

CANCEL_GRACE = 5.0
"""Seconds invoke_all() waits for cancelled calls to finish before it gives up on them."""

Invoke = Callable[[str, Mapping[str, Any], ToolContext], Awaitable[ToolInvocation]]
"""How one call runs: ``ToolRegistry.invoke``."""
Guarded = Callable[[ToolCall, ToolContext, "float | None"], Awaitable[ToolInvocation]]
"""How one call of a batch runs: :func:`guarded` over an :data:`Invoke`, maybe traced."""


async def guarded(
    invoke: Invoke, call: ToolCall, ctx: ToolContext, timeout: float | None
) -> ToolInvocation:
    """``invoke`` of one call of a batch, within ``timeout``; what goes wrong is recorded
    in the invocation, never raised."""
    name, args, call_id = call
    call_ctx = ctx.for_call(call_id, name)
    try:
        return await with_timeout(invoke(name, args, call_ctx), timeout)
    except ToolError as exc:
        # Only the lookup and the permission check raise out of invoke(): recorded
        # here; the tool never ran.
        return ToolInvocation(name, args, error=exc, call_id=call_id)
    except TimeoutError as exc:
        # The execution was cancelled; a sync tool still running in its thread
        # can see it through the context's cancellation token.
        call_ctx.cancellation.cancel()
        error = ToolTimeoutError(name, timeout or 0.0)
        error.__cause__ = exc
        return ToolInvocation(name, args, error=error, call_id=call_id, duration=timeout or 0.0)


async def as_completed(
    runner: Callable[[], Guarded],
    calls: Iterable[ToolCall | tuple[Any, ...]],
    ctx: ToolContext | None,
    timeout: float | None,
) -> AsyncGenerator[tuple[int, ToolInvocation], None]:
    """Run ``calls`` concurrently with ``runner()``; yield ``(position, invocation)`` as
    each ends (the body of :meth:`ToolRegistry.invoke_as_completed`)."""
    normalised = [as_call(call) for call in calls]
    if not normalised:
        return
    # One child token for the batch: cancelling it reaches every call's token, so
    # sync tools in worker threads learn of a cancelled caller too.
    batch = (ctx if ctx is not None else ToolContext()).for_call(None)
    run = runner()
    if len(normalised) == 1:
        try:
            yield 0, await run(normalised[0], batch, timeout)
        except asyncio.CancelledError:
            batch.cancellation.cancel()
            raise
        return
    # Done-callbacks feed a queue, so each result is reported the moment it exists.
    finished: asyncio.Queue[asyncio.Task[ToolInvocation]] = asyncio.Queue()
    tasks: dict[asyncio.Task[ToolInvocation], int] = {}
    for position, call in enumerate(normalised):
        task = asyncio.ensure_future(run(call, batch, timeout))
        task.add_done_callback(finished.put_nowait)
        tasks[task] = position
    try:
        for _ in range(len(tasks)):
            # Bounded by each call's own timeout, enforced in guarded().
            task = await finished.get()
            yield tasks[task], task.result()
    finally:
        pending = [task for task in tasks if not task.done()]
        if pending:
            batch.cancellation.cancel()
            for task in pending:
                task.cancel()
            # Bounded: a tool that swallows its cancellation must not hang the caller.
            _, stuck = await asyncio.wait(pending, timeout=CANCEL_GRACE)
            if stuck:
                logger.warning(
                    "%d tool call(s) ignored cancellation for %.0f s; abandoning them",
                    len(stuck),
                    CANCEL_GRACE,
                )


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
