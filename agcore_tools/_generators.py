"""Generator tools: every yielded value is a preliminary result, the last one is final;
a sync generator's ``return value`` (not None), after its yields, is final instead.

An async generator runs in the tool's own task; a sync one runs in a worker thread,
whole. Either is closed on every exit, so its ``finally`` blocks run: an async one by
``aclose()`` (or the cancellation reaching it), a sync one by ``close()`` at its next
``yield`` once the call's token is cancelled (a thread cannot be stopped between
yields).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .base import ToolContext

__all__ = ["drain_async", "drain_sync"]


async def drain_async(
    values: AsyncIterator[Any], jsonable: Callable[[Any], Any], ctx: ToolContext
) -> Any:
    """Report each value ``values`` yields; return the last (None if there is none)."""
    last = None
    async with contextlib.aclosing(values) as running:  # type: ignore[type-var]
        async for value in running:
            last = jsonable(value)
            ctx.report_partial(last)
    return last


def drain_sync(
    make: Callable[[], Iterator[Any]], jsonable: Callable[[Any], Any], ctx: ToolContext
) -> Any:
    """:func:`drain_async` for a sync generator, in a worker thread; stops (closing the
    generator) at the first ``yield`` after the call was given up on."""
    last = None
    with contextlib.closing(make()) as running:  # type: ignore[type-var]
        while True:
            try:
                value = next(running)
            except StopIteration as stop:
                if stop.value is not None:  # `return result` after the progress yields
                    last = jsonable(stop.value)
                break
            last = jsonable(value)
            ctx.report_partial(last)
            if ctx.cancelled:
                break
    return last
