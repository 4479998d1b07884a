"""Small asyncio helpers shared by the registry, the decorator and the clients."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def with_timeout(awaitable: Awaitable[T], timeout: float | None) -> T:
        """Await with a time limit; raises ``TimeoutError`` and cancels on expiry."""
        if timeout is None:
            return await awaitable
        async with asyncio.timeout(timeout):
            return await awaitable

else:  # pragma: no cover - exercised on Python 3.10 only

    async def with_timeout(awaitable: Awaitable[T], timeout: float | None) -> T:
        """Await with a time limit; raises ``TimeoutError`` and cancels on expiry."""
        if timeout is None:
            return await awaitable
        try:
            return await asyncio.wait_for(awaitable, timeout)
        except asyncio.TimeoutError as exc:
            raise TimeoutError(str(exc)) from exc


# Tools block for I/O, not CPU, so they get more threads than asyncio's default
# executor (min(32, cpus + 4) = 6 on a 2-core machine) would give them.
_TOOL_THREADS = 64
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _tool_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(
                    max_workers=_TOOL_THREADS, thread_name_prefix="agcore-tool"
                )
    return _executor


async def run_sync(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking function in the tool thread pool, keeping context variables."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, func, *args, **kwargs)
    return await loop.run_in_executor(_tool_executor(), call)
