"""The clock the registry times tool calls with, and the time limit of the call running.

``time.perf_counter`` everywhere, except where a caller sets its own for the current
context: a Temporal workflow (:mod:`agcore_tools.temporal`) must read no clock outside
Temporal's APIs, so it times calls with ``workflow.time()`` instead.

:data:`DEADLINE` lets the code a tool call runs tell a cancellation by the call's time
limit from any other (an MCP client span reports the first as a timeout): the event
loop's timer cancels the call, with nothing in the ``CancelledError`` that says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["CLOCK", "DEADLINE", "expired_limit", "now"]

CLOCK: ContextVar[Callable[[], float]] = ContextVar("agcore_tools_clock", default=time.perf_counter)
"""The clock of the current context."""

DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("agcore_tools_deadline", default=None)
"""The time limit of the tool call running in this context, set by the registry while
it runs one within a timeout: when it ends on :data:`CLOCK` and its length in seconds."""

# The event loop's timer may fire this much before the limit's end.
_SLACK = 0.001


def now() -> float:
    """Seconds on the current context's clock (only differences mean anything).

    Example:
        >>> now() <= now()
        True
    """
    return CLOCK.get()()


def expired_limit() -> float | None:
    """The length in seconds of the current call's time limit (:data:`DEADLINE`) once
    it has run out, else None (no limit, or time left).

    Example:
        >>> expired_limit() is None
        True
        >>> token = DEADLINE.set((now() - 1.0, 0.5))
        >>> expired_limit()
        0.5
        >>> DEADLINE.reset(token)
    """
    limit = DEADLINE.get()
    if limit is None:
        return None
    ends, seconds = limit
    return seconds if CLOCK.get()() >= ends - _SLACK else None
