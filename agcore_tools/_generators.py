"""Generator tools: every yielded value is a preliminary result, the last one is final;
a sync generator's ``return value`` (not None), after its yields, is final instead.

An async generator runs in the tool's own task; a sync one runs in a worker thread,
whole. Either is closed on every exit, so its ``finally`` blocks run: an async one by
``aclose()`` (or the cancellation reaching it), a sync one by ``close()`` at its next
``yield`` once the call's token is cancelled (a thread cannot be stopped between
yields).

Whether a function is such a generator tool is told here too, when its tool is made.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Any, Literal

from .base import ToolContext

__all__ = ["declares_generator", "drain_async", "drain_sync", "generator_kind"]


def declares_generator(annotation: Any) -> bool:
    """Whether a return annotation is ``Iterator[T]`` or ``Generator[T, None, None]``: a
    sync function so annotated that returns a generator made elsewhere streams it, as a
    generator function would.

    Example:
        >>> declares_generator(Iterator[int]), declares_generator(list[int])
        (True, False)
    """
    return (typing.get_origin(annotation) or annotation) in (Iterator, Generator)


def generator_kind(
    func: Callable[..., Any], call: Any, is_async: bool
) -> tuple[Literal["async", "sync"] | None, bool]:
    """Whether the tool ``func`` makes is a generator, async or sync (None: neither),
    and whether ``func`` (or its ``__call__``, ``call``) is one itself rather than a
    sync wrapper around one.

    A plain ``functools.wraps`` decorator (logging, retries) around a generator function
    returns the generator, drained once the call has returned it; an async wrapper is
    awaited, whatever it wraps.

    Example:
        >>> def numbers() -> Iterator[int]:
        ...     yield 1
        >>> @functools.wraps(numbers)
        ... def logged() -> Iterator[int]:
        ...     return numbers()
        >>> generator_kind(numbers, None, False), generator_kind(logged, None, False)
        (('sync', True), ('sync', False))
    """
    for directly, looked_at in ((True, func), (True, call), (False, func), (False, call)):
        if not directly:
            if is_async:  # an async wrapper: whatever it wraps, it is awaited
                break
            while isinstance(looked_at, functools.partial):
                looked_at = looked_at.func
            try:
                looked_at = inspect.unwrap(looked_at)
            except ValueError:  # a __wrapped__ cycle: nothing to see through
                continue
        if inspect.isasyncgenfunction(looked_at):
            return "async", directly
        if inspect.isgeneratorfunction(looked_at):
            return "sync", directly
    return None, False


async def drain_async(
    values: AsyncIterator[Any], jsonable: Callable[[Any], Awaitable[Any]], ctx: ToolContext
) -> Any:
    """Report each value ``values`` yields, as ``jsonable`` converts it (a large one in
    a worker thread); return the last (None if there is none)."""
    last = None
    async with contextlib.aclosing(values) as running:  # type: ignore[type-var]
        async for value in running:
            last = await jsonable(value)
            ctx.report_partial(last)
    return last


def drain_sync(
    make: Callable[[], Iterator[Any]], jsonable: Callable[[Any], Any], ctx: ToolContext
) -> Any:
    """:func:`drain_async` for a sync generator, in a worker thread (``jsonable``
    converts in it); stops (closing the generator) at the first ``yield`` after the call
    was given up on."""
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
