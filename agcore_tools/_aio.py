"""Small asyncio helpers shared by the registry, the decorator and the clients."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib
import logging
import os
import queue
import sys
import threading
from collections.abc import Awaitable, Callable, Collection, Iterator
from concurrent.futures import Executor, Future
from typing import Any, TypeGuard, TypeVar

T = TypeVar("T")

logger = logging.getLogger("agcore_tools")


def positive_number(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a positive int or float (a bool is not one): what every
    timeout and limit of the library takes.

    Example:
        >>> positive_number(0.5), positive_number(0), positive_number(True), positive_number("5")
        (True, False, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


if sys.version_info >= (3, 11):

    async def with_timeout(awaitable: Awaitable[T], timeout: float | None) -> T:
        """Await with a time limit; raises ``TimeoutError`` and cancels on expiry."""
        if timeout is None:
            return await awaitable
        async with asyncio.timeout(timeout):
            return await awaitable

else:  # pragma: no cover - exercised on Python 3.10 only

    async def with_timeout(awaitable: Awaitable[T], timeout: float | None) -> T:
        """Await with a time limit; raises ``TimeoutError`` and cancels on expiry.

        Not ``asyncio.wait_for``: on 3.10 it loses the caller's cancellation when the
        awaited work ends in the same loop iteration (it returns the result instead;
        CPython gh-86296), so a cancelled tool loop polled on for its whole timeout.
        """
        if timeout is None:
            return await awaitable
        return await wait_task(asyncio.ensure_future(awaitable), timeout)


async def wait_task(work: asyncio.Future[T], timeout: float) -> T:
    """Wait up to ``timeout`` seconds for the running ``work``; on expiry it is
    cancelled and awaited, and ``TimeoutError`` is raised.

    ``asyncio.wait`` never swallows the caller's cancellation, as ``asyncio.wait_for``
    does on 3.10 and 3.11 when the work ends in the same loop iteration: here the work
    is cancelled, awaited, and the caller's ``CancelledError`` goes on. The work runs
    in its own task, so a caller whose module the work calls into is not entered twice
    on one chain of awaits.

    Example:
        >>> async def main() -> str:
        ...     fast = asyncio.ensure_future(asyncio.sleep(0, "done"))
        ...     slow = asyncio.ensure_future(asyncio.sleep(10))
        ...     try:
        ...         await wait_task(slow, 0.01)
        ...     except TimeoutError:
        ...         return await wait_task(fast, 1.0) + f", slow cancelled: {slow.cancelled()}"
        ...     return "no timeout"
        >>> asyncio.run(main())
        'done, slow cancelled: True'
    """
    try:
        done, _ = await asyncio.wait({work}, timeout=max(timeout, 0.0))
    except asyncio.CancelledError:
        await _cancel_and_wait(work)
        raise
    if done:
        return work.result()
    await _cancel_and_wait(work)
    try:
        return work.result()  # it ended before it saw the cancel
    except asyncio.CancelledError as exc:
        raise TimeoutError(f"timed out after {timeout:g} s") from exc


async def first_done(tasks: Collection[asyncio.Future[Any]]) -> None:
    """Wait until one of ``tasks`` is done (at once if one is); none is cancelled, even
    when the wait is.

    Not ``asyncio.wait``, whose result sets Temporal's workflow sandbox warns of as
    non-deterministic (a code-mode program's calls are awaited here inside a
    ``ToolLoopWorkflow``). Bounded by the tasks: each call has its own timeout.

    Example:
        >>> async def main() -> list[bool]:
        ...     fast = asyncio.ensure_future(asyncio.sleep(0))
        ...     slow = asyncio.ensure_future(asyncio.sleep(10))
        ...     await first_done([slow, fast])
        ...     done = [fast.done(), slow.done()]
        ...     slow.cancel()
        ...     return done
        >>> asyncio.run(main())
        [True, False]
    """
    if any(task.done() for task in tasks):
        return
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: asyncio.Future[Any]) -> None:
        if not woken.done():
            woken.set_result(None)

    for task in tasks:
        task.add_done_callback(wake)
    try:
        await woken
    finally:
        for task in tasks:
            task.remove_done_callback(wake)


async def all_done(tasks: Collection[asyncio.Future[Any]]) -> None:
    """Wait until every one of ``tasks`` is done; as :func:`first_done`, cancels none."""
    while pending := [task for task in tasks if not task.done()]:
        await first_done(pending)


async def _cancel_and_wait(work: asyncio.Future[Any]) -> None:
    """Cancel ``work`` and wait until it has ended; its outcome is marked read."""
    work.cancel()
    await asyncio.wait({work})
    if not work.cancelled():
        work.exception()  # read, so asyncio does not log it as never retrieved


# Tools block for I/O, not CPU, so they get more threads than asyncio's default
# executor (min(32, cpus + 4) = 6 on a 2-core machine) would give them.
_TOOL_THREADS = 64
# Past this many threads still running calls their callers gave up on, a warning is
# logged (again each time the count doubles): hung calls that pile up hold memory and
# threads for good.
_ABANDONED_WARNING = 16
_Work = tuple["Future[Any]", "Callable[[], Any]"] | None  # None: a worker's cue to stop


class _DaemonExecutor(Executor):
    """A thread pool whose workers are daemon threads that interpreter exit leaves behind.

    ``ThreadPoolExecutor`` joins its workers at exit, so one sync tool still running
    after its timeout (a call that nothing can interrupt) would hold the process open
    until it returned. The tool's caller has already moved on by then, so exit does not
    wait for it here. Like ``ThreadPoolExecutor``, an idle worker is reused before a new
    one starts, and workers live as long as the process.

    A thread whose call was given up on (:meth:`abandon`) does not count against the
    limit while it runs on: hung calls would otherwise use up the pool, and every later
    call would wait in the queue behind them. Nor does a worker while it waits in
    :meth:`waiting` (a sync tool blocked in a ``*_sync`` call): the work it waits for
    may itself need a thread of this pool.
    """

    def __init__(self, max_workers: int, name: str) -> None:
        self._max_workers = max_workers
        self._name = name
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._abandoned = 0  # threads still running a call its caller gave up on
        self._waiting = 0  # workers blocked until other work (maybe queued here) ends
        self._warn_past = _ABANDONED_WARNING
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._closed:
            raise RuntimeError("cannot run new work after the executor was shut down")
        future: Future[T] = Future()
        self._work.put((future, functools.partial(fn, *args, **kwargs) if args or kwargs else fn))
        # An idle worker takes it; otherwise start one, up to the limit (beyond it the
        # work waits in the queue for the first worker to come free).
        if not self._idle.acquire(blocking=False):
            with self._lock:
                self._grow()
        return future

    def abandon(self, future: Future[Any], label: str) -> None:
        """Stop counting the thread running ``future`` against the limit until it ends:
        its caller gave up on it (a timeout, a cancel), and it may never return."""
        with self._lock:
            self._abandoned += 1
            abandoned = warn = self._abandoned
            if abandoned > self._warn_past:
                self._warn_past *= 2
            else:
                warn = 0
            if not self._closed and not self._work.empty():  # waiting work gets a thread
                self._grow()
        if warn:
            logger.warning(
                "%d tool threads still run calls that were given up on (timed out or "
                "cancelled), latest: %s; each is replaced in the pool, but they hold "
                "their threads until they return: make the tool stop when ctx.cancelled",
                abandoned,
                label,
            )
        future.add_done_callback(self._settle)  # at once, if it has ended since

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """While in this block, the calling worker does not count against the limit.

        For a worker that blocks until other work ends (a sync tool in a ``*_sync``
        call): that work may need a thread of this pool, and with every worker blocked
        so, it would wait in the queue for good. Queued work gets a thread at once; once
        the block is left, the pool shrinks back to its limit as calls end.
        """
        with self._lock:
            self._waiting += 1
            if not self._closed and not self._work.empty():
                self._grow()
        try:
            yield
        finally:
            with self._lock:
                self._waiting -= 1

    def _settle(self, _: Future[Any]) -> None:
        with self._lock:
            self._abandoned -= 1
            if not self._abandoned:
                self._warn_past = _ABANDONED_WARNING

    def _grow(self) -> None:
        # Called with the lock held: a new worker, unless the limit is reached.
        if self._counted() < self._max_workers:
            worker = threading.Thread(
                target=self._serve, name=f"{self._name}_{len(self._threads)}", daemon=True
            )
            worker.start()
            self._threads.append(worker)

    def _counted(self) -> int:
        # Called with the lock held: the threads that count against the limit.
        return len(self._threads) - self._abandoned - self._waiting

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop each worker once the work queued before this call is done (or cancelled)."""
        with self._lock:
            self._closed = True
            workers = list(self._threads)
        while cancel_futures:
            try:
                work = self._work.get_nowait()
            except queue.Empty:
                break
            if work is not None:
                work[0].cancel()
        for _ in workers:
            self._work.put(None)
        if wait:
            for worker in workers:
                worker.join()

    def _serve(self) -> None:
        _worker.pool = self
        while True:
            work = self._work.get()
            if work is None:
                return
            future, call = work
            del work
            # The call (its arguments, a closure's values) is dropped before its caller
            # wakes, and the result once handed over: an idle thread keeps neither, and
            # a caller that goes on finds them freed (a cache's bound holds at once).
            if not future.set_running_or_notify_cancel():
                del call
            else:
                try:
                    result = call()
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                    del call
                    future.set_exception(exc)
                else:
                    del call
                    future.set_result(result)
                    del result
            del future
            with self._lock:
                # A thread back from a call given up on (or from a wait), while its
                # replacement serves: one too many, so it ends and the pool shrinks
                # back to its limit.
                if self._counted() > self._max_workers:
                    self._threads.remove(threading.current_thread())
                    return
            self._idle.release()


_executor: _DaemonExecutor | None = None
_executor_lock = threading.Lock()
_worker = threading.local()
"""In a worker thread of a :class:`_DaemonExecutor`: ``pool``, that executor."""


def _tool_executor() -> _DaemonExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = _DaemonExecutor(_TOOL_THREADS, "agcore-tool")
    return _executor


def _forget_executor() -> None:
    # A forked child has none of its parent's threads; it starts a pool of its own.
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # pragma: no branch - absent on Windows only
    os.register_at_fork(after_in_child=_forget_executor)


@contextlib.contextmanager
def blocking() -> Iterator[None]:
    """Around a wait for work on the library's loop: if the calling thread is one of
    the tool pool's (a sync tool calling a ``*_sync`` method), it does not count against
    the pool's limit until the wait ends, since that work may run sync tools too.

    Without it, 64 sync tools each waiting on an inner sync tool would hold every
    thread, and the inner calls (and every later one) would wait for a thread for good.

    Example:
        >>> with blocking():  # not a tool thread: nothing changes
        ...     pass
    """
    pool: _DaemonExecutor | None = getattr(_worker, "pool", None)
    # Only the current pool's: a forked child's thread may carry its parent's.
    if pool is None or pool is not _executor:
        yield
        return
    with pool.waiting():
        yield


THREADS: contextvars.ContextVar[list[Future[Any]] | None] = contextvars.ContextVar(
    "agcore_threads", default=None
)
"""Where :func:`run_sync` notes the work it hands to a thread, when the caller asks: a
concurrency slot stays taken until a timed-out call's thread has really ended."""


def submit_sync(func: Callable[..., T], /, *args: Any) -> Future[T]:
    """Start ``func(*args)`` in the tool thread pool, keeping context variables; its
    future, for work several callers (on any loop) wait for together.

    Example:
        >>> submit_sync(sum, [1, 2]).result(timeout=5)
        3
    """
    return _tool_executor().submit(contextvars.copy_context().run, func, *args)


async def run_sync(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking function in the tool thread pool, keeping context variables.

    Cancelling the caller does not stop the function (no thread can be stopped from
    outside); it runs on, and interpreter exit does not wait for it, nor does the pool:
    its thread no longer counts against the pool's limit. Work cancelled before a
    thread took it never runs. Its future is added to :data:`THREADS`'s list, if the
    caller set one.
    """
    return await run_tool(None, func, *args, **kwargs)


async def run_tool(label: str | None, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """:func:`run_sync` for the tool named ``label``: the name a warning gives when the
    threads of calls given up on pile up (``None``: the function's name)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    executor = _tool_executor()
    future = executor.submit(context.run, func, *args, **kwargs)
    noted = THREADS.get()
    if noted is not None:
        noted.append(future)
    try:
        return await asyncio.wrap_future(future, loop=loop)
    except asyncio.CancelledError:
        # Queued work was cancelled with its caller; work already running runs on.
        if not future.done():
            executor.abandon(future, label or str(getattr(func, "__qualname__", func)))
        raise


_imported: set[str] = set()


async def import_off_loop(modules: tuple[str, ...], timeout: float) -> None:
    """Import ``modules`` in a worker thread the first time, waiting at most ``timeout``
    seconds, so that the functions importing them afterwards find them loaded.

    The OpenAI and MCP SDKs take half a second or more to import; imported on the loop
    on their first use, they would freeze every other task (a web server's requests)
    that long. Raises ``TimeoutError`` when the import takes longer (it goes on in its
    thread), and the import's own error (an ``ImportError``) if it fails.

    Example:
        >>> asyncio.run(import_off_loop(("json", "email.utils"), 10.0))
        >>> "email.utils" in sys.modules
        True
    """
    missing = [name for name in modules if name not in _imported]
    if missing:
        await with_timeout(run_sync(_import_all, missing), timeout)
        _imported.update(missing)


def _import_all(modules: list[str]) -> None:
    for name in modules:
        importlib.import_module(name)


def unfinished(futures: list[Future[Any]] | None) -> Future[Any] | None:
    """The first of ``futures`` still running, if any (a thread past its call's end)."""
    if futures:
        for future in futures:
            if not future.done():
                return future
    return None
