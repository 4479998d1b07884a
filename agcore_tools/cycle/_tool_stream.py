"""The run context of a tool loop, and its tool events merged into the event stream.

A run's tool calls derive their contexts from one run context (see
:func:`run_context`): it carries the app's context (session, trace, metadata,
cancellation, ``on_event``), the run's shared state, and, in the streaming loop, an
inbox that the calls' progress reports and preliminary results go into. While a turn's
calls run, :func:`with_tool_events` yields those events as they arrive, between the
calls' completions. A turn whose tools can report nothing (plain ``@tool`` functions
without a context parameter) skips all of it and costs what it did before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Any, TypeAlias

from .._progress import ToolEvent, ToolInbox
from ..base import ToolContext
from ..calls import ParsedCall
from ..registry import ToolInvocation, ToolRegistry

__all__ = ["run_context", "with_tool_events"]

logger = logging.getLogger("agcore_tools.cycle")

Completion: TypeAlias = tuple[int, ToolInvocation]

_DONE = object()
# Seconds to wait for a turn's cancelled calls to wind down: the registry already gives
# up on calls that ignore cancellation after its own grace (5 s).
_WIND_DOWN = 10.0


def run_context(ctx: ToolContext | None, kept: dict[str, Any] | None, inbox: bool) -> ToolContext:
    """The context a run's tool calls derive theirs from.

    Its shared state is the one ``ctx`` was given (``shared_state=``), else ``kept``
    (a resumed run's), else a fresh one. With ``inbox``, the calls' events also go
    into a queue for :func:`with_tool_events`.
    """
    if ctx is None:
        ctx = ToolContext(shared_state=kept)
        if not inbox:
            return ctx
    return ctx.for_run(kept, inbox=inbox)


def with_tool_events(
    running: AsyncGenerator[Completion, None],
    ctx: ToolContext,
    registry: ToolRegistry,
    calls: Sequence[ParsedCall],
) -> AsyncGenerator[Completion | ToolEvent, None]:
    """``running``'s completions, with the calls' events between them as they arrive.

    ``running`` itself when there is no inbox, or no call of the turn can report.
    """
    inbox = ctx.inbox
    if inbox is None or _quiet(registry, calls):
        return running
    return _merged(running, inbox)


def _quiet(registry: ToolRegistry, calls: Sequence[ParsedCall]) -> bool:
    for call in calls:
        if call.args is None or call.error is not None:
            continue  # never runs
        entry = registry.entry(call.name)
        if entry is not None and not entry.tool.quiet:
            return False
        if entry is not None and entry.guard is not None and entry.guard.breaker is not None:
            return False  # its breaker's changes are events too
    return True


async def _merged(
    running: AsyncGenerator[Completion, None], inbox: ToolInbox
) -> AsyncGenerator[Completion | ToolEvent, None]:
    # What an earlier turn's calls said after they ended is nobody's news now.
    while not inbox.empty():
        logger.debug("dropped a late tool event: %r", inbox.get_nowait())

    async def pump() -> None:
        async with contextlib.aclosing(running):
            async for item in running:
                inbox.put_nowait(item)

    # One task per turn pulls the completions into the inbox the events go to, so
    # both arrive in the order they happened.
    task = asyncio.ensure_future(pump())
    task.add_done_callback(lambda _: inbox.put_nowait(_DONE))
    try:
        while True:
            # Bounded: the pump ends once every call has ended, each within its timeout.
            item = await inbox.get()
            if item is _DONE:
                break
            yield item
        task.result()
    finally:
        if not task.done():
            task.cancel()  # closes `running`, which cancels the calls still running
            _, stuck = await asyncio.wait([task], timeout=_WIND_DOWN)
            if stuck:
                logger.warning("a turn's tool calls did not wind down in %.0f s", _WIND_DOWN)
