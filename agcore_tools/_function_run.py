"""How a function tool's function is called, once its arguments are validated.

Apart from :mod:`~agcore_tools._function_tool`, which makes the tool (its schema, its
binding to an instance, its registration), because calling the function is a job of its
own. Which way it is called is told once, as the tool is made (:class:`Calling`, kept
by the tool); each call then goes through here. An async function is awaited on
the loop, a sync one runs in a worker thread (a coroutine or an async generator it
returns, as a plain decorator around an async function does, is then awaited or
drained on the loop), a generator is drained as partial results, and any exception but
a :class:`~agcore_tools.error.ToolError` becomes a
:class:`~agcore_tools.error.ToolExecutionError`. Under a time limit, the worker threads
a call used are noted, so a timeout tells a call that never started from one cut short.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from ._aio import THREADS, run_tool, with_timeout
from ._generators import declares_generator, generator_kind
from ._tool_result import drain, jsonable_async, result_in_thread
from .base import ToolContext
from .error import ToolError, ToolExecutionError, ToolTimeoutError

__all__ = ["Calling", "call_function", "call_within"]


@dataclass(frozen=True)
class Calling:
    """Which way a function tool's function is called: told once, as the tool is made.

    Example:
        >>> from collections.abc import Iterator
        >>> def numbers() -> Iterator[int]:
        ...     yield 1
        >>> Calling.of(numbers, Iterator[int])
        Calling(is_async=False, streams='sync', streams_directly=True, drains_returned=True)
    """

    is_async: bool
    """An async function (or an object with an async ``__call__``): awaited on the loop."""
    streams: Literal["async", "sync"] | None
    """The kind of generator the tool is (None: none): its values are partial results."""
    streams_directly: bool
    """The function is the generator function, not a sync wrapper that returns one."""
    drains_returned: bool
    """A generator the sync function returns is drained (see ``result_in_thread``)."""

    @classmethod
    def of(cls, func: Callable[..., Any], returns: Any) -> Calling:
        """How ``func``, whose return annotation is ``returns``, is called."""
        call = getattr(func, "__call__", None)  # noqa: B004 - async callable objects
        is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)
        streams, directly = generator_kind(func, call, is_async)
        drains = streams == "sync" or (not is_async and declares_generator(returns))
        return cls(is_async, streams, directly, drains)

    @property
    def on_loop(self) -> bool:
        """The function starts at once, on the loop (a thread may convert its result)."""
        return self.is_async or (self.streams == "async" and self.streams_directly)


async def call_function(
    name: str, make: Callable[[], Any], ctx: ToolContext, calling: Calling
) -> Any:
    """The JSON-compatible result of ``make()``, the call of tool ``name``'s function,
    which is called as ``calling`` says.

    Example:
        >>> import asyncio
        >>> def fail() -> None:
        ...     raise KeyError("x")
        >>> asyncio.run(call_function("f", fail, ToolContext(), Calling.of(fail, None)))
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolExecutionError: tool 'f' failed: KeyError: 'x'
    """
    try:
        if calling.streams is not None and calling.streams_directly:
            return await drain(name, calling.streams, make, ctx)
        if calling.is_async:
            result = await make()
        else:
            drains = calling.drains_returned
            result = await run_tool(name, result_in_thread, name, make, ctx, drains)
            if inspect.isasyncgen(result):
                return await drain(name, "async", lambda: result, ctx)
            if not inspect.iscoroutine(result):
                return result  # made JSON in the thread
            # A plain (functools.wraps) decorator around an async function: the
            # schema is the async function's, so is the call. Its coroutine runs
            # here, on the loop; a wrapper that ran it itself returned its value.
            result = await result
    except ToolError:
        raise
    except Exception as exc:
        raise ToolExecutionError(name, f"{type(exc).__name__}: {exc}") from exc
    return await jsonable_async(name, result)


async def call_within(
    name: str, call: Awaitable[Any], timeout: float, ctx: ToolContext, *, on_loop: bool
) -> Any:
    """Await ``call`` (of tool ``name``) for at most ``timeout`` seconds; past it, cancel
    ``ctx`` (the call's own) and raise :class:`~agcore_tools.error.ToolTimeoutError`.

    ``on_loop``: the function started at once, on the loop. Else a sync call's thread is
    noted: work still queued for a thread at the timeout never ran, and the error says so.

    Example:
        >>> import asyncio
        >>> asyncio.run(call_within("slow", asyncio.sleep(1), 0.01, ToolContext(), on_loop=True))
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolTimeoutError: tool 'slow' failed: timed out after 0.01 s; it may have run in part, so do not assume it had no effect
    """
    outer = THREADS.get()
    threads: list[Any] = []
    noting = THREADS.set(threads)
    try:
        return await with_timeout(call, timeout)
    except TimeoutError as exc:
        ctx.cancellation.cancel()
        started = on_loop or not threads or not all(thread.cancelled() for thread in threads)
        raise ToolTimeoutError(name, timeout, started=started) from exc
    finally:
        THREADS.reset(noting)
        if outer is not None:  # a capped tool's slot waits for the thread's end
            outer.extend(threads)
