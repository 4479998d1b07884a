"""The clock the registry times tool calls with.

``time.perf_counter`` everywhere, except where a caller sets its own for the current
context: a Temporal workflow (:mod:`agcore_tools.temporal`) must read no clock outside
Temporal's APIs, so it times calls with ``workflow.time()`` instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["CLOCK", "now"]

CLOCK: ContextVar[Callable[[], float]] = ContextVar("agcore_tools_clock", default=time.perf_counter)
"""The clock of the current context."""


def now() -> float:
    """Seconds on the current context's clock (only differences mean anything).

    Example:
        >>> now() <= now()
        True
    """
    return CLOCK.get()()
