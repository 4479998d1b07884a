"""The library's own event loop, on which every ``*_sync`` method runs its coroutine.

The async code is the only implementation; a sync entry point hands its coroutine to
:func:`run`, which runs it on one event loop in one daemon thread and blocks until it
ends. One loop for the life of the process matters: an MCP session and an HTTP
connection pool belong to the loop that opened them, so ``connect_sync()`` followed by
``call_tool_sync()`` must find the same loop still running (``asyncio.run`` per call
would close it in between).

Why not anyio's ``BlockingPortal``: it does the same thing with a task group and a
cancel scope around every call, which costs about twice as much per call as this
module (see benchmarks/bench_sync.py); nothing here needs the task group.

The loop starts on the first sync call, and outlives what its code raises: asyncio lets a
``SystemExit`` or ``KeyboardInterrupt`` from any task stop ``run_forever()`` (so a Ctrl-C
ends ``asyncio.run()``), but on this thread neither is ever the user's Ctrl-C (Python
raises that in the main thread), so the loop goes on serving. Should its thread end all
the same, the next sync call starts a new loop, and a call waiting on the old one fails
instead of waiting forever. At interpreter exit its remaining tasks (an
MCP session nobody closed, say) are cancelled, so their clean-up runs, within a bound;
then the clients the library built for sync calls and nobody closed (an ``LlmCycle``'s
twin of a sync ``OpenAI``) are closed, as the sync client's own sockets would be.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import logging
import os
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from ._aio import blocking
from ._exit_grace import exit_grace
from .error import SyncCallError

__all__ = [
    "SyncCallError",
    "close_at_exit",
    "inherited",
    "is_library_loop",
    "run",
    "run_close",
]

logger = logging.getLogger("agcore_tools.sync")

T = TypeVar("T")

_GRACE = 10.0
"""Seconds an interrupted call, or the shutdown at exit, waits for cancelled work to end.
Longer than the registry's own wait for tools that ignore cancellation (5 s)."""

_PULSE = 1.0
"""Seconds between a waiting sync call's checks that the loop's thread is still alive."""


class _Loop:
    """The running loop and its thread."""

    __slots__ = ("abandoned", "guard", "ident", "loop", "serving", "stopping", "thread")

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        try:
            self.guard = threading.Lock()  # orders a start given up on and the thread's own
            self.serving = self.abandoned = self.stopping = False
            self.thread = threading.Thread(
                target=self._serve, name="agcore-tools-loop", daemon=True
            )
            self.ident: int | None = None
        except BaseException:
            self.loop.close()  # interrupted (Ctrl-C) before there was a thread
            raise

    def start(self) -> None:
        """Start the loop's thread."""
        self.thread.start()
        self.ident = self.thread.ident

    def abandon(self) -> None:
        """Undo a start that was interrupted (a Ctrl-C in ``thread.start()``, which waits
        for the thread): the loop stops, or never runs, and is closed, so no thread or
        descriptor of it is left behind."""
        with self.guard:
            self.abandoned = True
            serving = self.serving
        if serving:  # its thread closes it once run_forever() has returned
            self.stop()
        else:  # a thread that starts later finds it abandoned, and leaves at once
            self.loop.close()

    def stop(self) -> None:
        """Have the loop's thread end once the loop's current step is done."""
        self.stopping = True
        self.loop.call_soon_threadsafe(self.loop.stop)

    def alive(self) -> bool:
        """Whether the loop's thread still runs (code on the loop may stop it too)."""
        return self.thread.is_alive()

    def _serve(self) -> None:
        with self.guard:
            if self.abandoned:
                return
            self.serving = True
        asyncio.set_event_loop(self.loop)
        try:
            while True:
                try:
                    self.loop.run_forever()
                    return
                except (SystemExit, KeyboardInterrupt) as exc:
                    # asyncio lets these out of any task or callback, to stop the loop
                    # on a Ctrl-C; here they are never one (Python raises that in the
                    # main thread): a task keeps its exception for whoever awaits it (a
                    # tool's call fails with it), and the loop goes on, unless it was
                    # being stopped (run_forever() forgets a stop() when it raises).
                    if self.stopping or self.abandoned:
                        return
                    logger.warning(
                        "%s escaped a task or callback on agcore_tools' event loop; "
                        "the loop goes on",
                        type(exc).__name__,
                        exc_info=exc,
                    )
        finally:
            if self.abandoned:
                self.loop.close()


_current: _Loop | None = None
_lock = threading.Lock()
_exiting = False
_inherited: asyncio.AbstractEventLoop | None = None
"""In a forked child, the library loop of the process it was forked from: no thread
runs it here, and what was bound to it (an SDK client's connections) is the parent's."""


class Closeable(Protocol):
    """What :func:`close_at_exit` takes: an object with an async ``close()``."""

    async def close(self) -> None:
        """Release what the object holds (an SDK client: its connections)."""


_owned: weakref.WeakSet[Closeable] = weakref.WeakSet()
"""What the wind-down at exit closes, if it is still alive then."""

_closing: set[asyncio.Task[None]] = set()
"""Closes called on the loop's own thread, running there: held until they end (the
loop holds its tasks weakly)."""


def _library_loop() -> _Loop:
    global _current
    with _lock:
        if _current is not None and not _current.alive():
            _close_ended(_current)  # and a new one starts below
            _current = None
        if _current is None:
            if _exiting:
                raise SyncCallError(
                    "cannot run a *_sync call: agcore_tools' event loop has shut down "
                    "(the interpreter is exiting)"
                )
            made = _Loop()
            try:
                made.start()
                _current = made
            except BaseException:
                # A Ctrl-C as the thread starts: no loop is left running unseen, and
                # the next call starts the one loop afresh.
                if _current is not made:
                    made.abandon()
                raise
        return _current


def _close_ended(ended: _Loop) -> None:
    """Give up on a loop whose thread has ended (code on it stopped it, or raised out
    of it): closed, so what is still bound to it fails instead of waiting for it."""
    logger.warning(
        "agcore_tools' event loop thread had ended; what was bound to that loop (a "
        "connected MCP client, an SDK client's connections) is unusable and must be made again"
    )
    try:
        ended.loop.close()
    except RuntimeError as exc:  # still marked running: nothing else to do
        logger.debug("could not close the ended event loop: %s", exc)


class _Call:
    """One coroutine handed to the loop, its outcome, and the lock its caller waits on."""

    __slots__ = ("coro", "done", "ended", "error", "result", "task")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.task: asyncio.Task[None] | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.ended = False
        self.done = threading.Lock()
        self.done.acquire()

    # start() and cancel() run on the loop's thread, in the order they were scheduled.
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.task = loop.create_task(self._drive())
        self.task.add_done_callback(self._settle)

    def _settle(self, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never enters _drive() (the cancellation
        # is thrown into the unstarted coroutine), so its finally does not run: end here.
        if self.ended:
            return
        self.coro.close()
        self.error = SyncCallError("the *_sync call was cancelled before it started")
        self._end()

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
        else:  # the caller was interrupted before start() was scheduled
            self.coro.close()
            self._end()

    async def _drive(self) -> None:
        # The outcome is kept here, not read from the task: the caller wakes up as soon
        # as the lock is released, before the task itself has finished its step.
        try:
            self.result = await self.coro
        except asyncio.CancelledError as exc:
            # Not the caller's interrupt (that one propagates in the caller's thread):
            # the loop winding down at exit, or code that cancelled the task.
            error = SyncCallError("the *_sync call was cancelled on agcore_tools' event loop")
            error.__cause__ = exc
            self.error = error
        except GeneratorExit:
            # The task was destroyed unfinished (the loop closed): the caller must not
            # mistake that for a result.
            self.error = SyncCallError("the *_sync call was abandoned: its event loop closed")
            raise
        except BaseException as exc:  # noqa: BLE001 - every outcome goes to the caller
            self.error = exc
        finally:
            self._end()

    def _end(self) -> None:
        self.ended = True
        self.done.release()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the library's loop and return its result (or raise its error).

    Works from any thread, including one whose own loop is running (a notebook cell):
    that loop simply waits, as it does for any blocking call. The caller's context
    variables are copied into the coroutine. If the wait is interrupted
    (``KeyboardInterrupt``, a signal handler's exception), the coroutine is cancelled
    and awaited (bounded) before the exception propagates, so nothing keeps running.
    """
    current = _current
    if current is None or not current.alive():
        try:
            current = _library_loop()
        except BaseException:
            coro.close()
            raise
    if threading.get_ident() == current.ident:
        coro.close()
        raise SyncCallError(
            "a *_sync method was called from agcore_tools' own event loop (inside an async "
            "tool or callback), where waiting for it would deadlock; await the async method "
            "instead"
        )
    loop = current.loop
    call = _Call(coro)
    # A sync tool calling this waits for work that may run sync tools of its own: its
    # thread stops counting against the tool pool's limit first, so they get threads.
    with blocking():
        try:
            try:
                loop.call_soon_threadsafe(call.start, loop, context=contextvars.copy_context())
            except RuntimeError as exc:  # the loop was closed at exit
                coro.close()
                raise SyncCallError(
                    f"cannot run a *_sync call: agcore_tools' event loop is closed ({exc})"
                ) from exc
            _wait(current, call)
        except SyncCallError:
            raise
        except BaseException:
            _abandon(current, call)
            raise
    error = call.error
    if error is not None:
        call.error = None  # no reference cycle through the traceback
        raise error
    result: T = call.result
    return result


def _wait(current: _Loop, call: _Call) -> None:
    """Wait for ``call`` to end; fail it if the loop's thread ends first, which it would
    never do then."""
    while not call.done.acquire(timeout=_PULSE):
        if not current.alive() and not call.done.acquire(blocking=False):
            raise SyncCallError(
                "the *_sync call was lost: agcore_tools' event loop thread ended before "
                "the call did"
            )


def run_close(coro: Coroutine[Any, Any, None]) -> None:
    """:func:`run` for a ``close()``, which at interpreter exit returns quietly.

    Once the wind-down at exit has begun, it cancels and closes what the loop holds
    (and then the loop itself), so there is nothing left for the close to do; one
    called then (a generator suspended in a ``with`` block, closed as the interpreter
    clears its objects; a daemon thread) is logged at DEBUG instead of raising a
    ``SyncCallError`` that Python would print as "Exception ignored".

    Called on the loop's own thread (a ``__del__`` or ``weakref.finalize`` callback
    that garbage collection ran there, a ``with`` block's end in an async tool), where
    waiting would deadlock, the close is started on the loop and not waited for; what
    it raises is logged on ``agcore_tools.sync``.

    Example:
        >>> async def close() -> None:
        ...     print("closed")
        >>> run_close(close())
        closed
    """
    if _exiting:
        coro.close()
        logger.debug("%s after the wind-down at exit: nothing left to close", _name(coro))
        return
    current = _current
    if current is not None and threading.get_ident() == current.ident:
        _close_later(current.loop, coro)
        return
    try:
        run(coro)
    except SyncCallError as exc:
        if not _exiting:  # the interpreter is not exiting: a real failure
            raise
        logger.debug("%s at exit: %s", _name(coro), exc)


def _name(coro: object) -> str:
    return str(getattr(coro, "__qualname__", "a close"))


def _close_later(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> None:
    """Start a close on the loop whose thread this is, without waiting for it."""
    try:
        task = loop.create_task(coro)
    except RuntimeError as exc:  # the loop is closed: nothing of it is left to close
        coro.close()
        logger.debug("%s on agcore_tools' closed event loop: %s", _name(coro), exc)
        return
    _closing.add(task)
    task.add_done_callback(_closed)


def _closed(task: asyncio.Task[None]) -> None:
    _closing.discard(task)
    if task.cancelled():  # the wind-down at exit, which closes what is left itself
        return
    error = task.exception()
    if error is not None:
        # Nobody waits for this close: the log is where its failure goes.
        logger.warning(
            "%s, called on agcore_tools' event loop and run there, failed: %r",
            _name(task.get_coro()),
            error,
            exc_info=error,
        )


def _abandon(current: _Loop, call: _Call) -> None:
    """Cancel an interrupted call and wait (bounded) until it has ended."""
    if call.ended:
        return
    try:
        current.loop.call_soon_threadsafe(call.cancel)
    except RuntimeError:  # the loop is closed: nothing runs on it any more
        return
    waited = 0.0
    while not call.done.acquire(timeout=_PULSE):
        if not current.alive():  # its thread ended: nothing will end the call
            return
        waited += _PULSE
        if waited >= _GRACE:
            logger.warning(
                "an interrupted *_sync call did not end within %.0f s of being "
                "cancelled; leaving it behind",
                _GRACE,
            )
            return


def close_at_exit(resource: Closeable) -> None:
    """Have the wind-down at interpreter exit close ``resource`` on the library loop,
    where its connections live, unless it is gone by then: it is held weakly, so this
    keeps nothing alive. Closing it earlier is fine; it is closed again at exit.

    For what the library itself built for sync calls; never for an object of the app's.

    Example:
        >>> class Pool:
        ...     async def close(self) -> None:
        ...         print("closed")
        >>> close_at_exit(Pool())  # gone at once: nothing to close at exit
    """
    with _lock:
        _owned.add(resource)


def is_library_loop(loop: asyncio.AbstractEventLoop | None) -> bool:
    """True when ``loop`` is the library's own (the one ``*_sync`` methods run on).

    Example:
        >>> is_library_loop(None)
        False
    """
    current = _current
    return loop is not None and current is not None and loop is current.loop


async def _wind_down() -> None:
    me = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not me]
    for task in tasks:
        task.cancel()
    if tasks:
        _, stuck = await asyncio.wait(tasks, timeout=_GRACE)
        if stuck:
            logger.warning(
                "%d task(s) on agcore_tools' event loop ignored cancellation at exit",
                len(stuck),
            )
    try:
        await asyncio.wait_for(asyncio.get_running_loop().shutdown_asyncgens(), _GRACE)
    except asyncio.TimeoutError:  # not yet the builtin TimeoutError on Python 3.10
        logger.warning("async generators on agcore_tools' event loop did not close at exit")
    # Last: a stream closed above still read from its client's connection.
    with _lock:
        owned = list(_owned)
    for resource in owned:
        try:
            await asyncio.wait_for(resource.close(), _GRACE)
        except Exception as exc:  # noqa: BLE001 - exiting anyway; the rest still close
            logger.warning(
                "agcore_tools could not close %s at exit: %r", type(resource).__name__, exc
            )


def _shutdown() -> None:
    """At interpreter exit: cancel what still runs on the loop (bounded), then stop it."""
    global _current, _exiting
    with _lock:
        current, _current, _exiting = _current, None, True
    if current is None:
        return
    loop = current.loop
    if not current.alive():  # nothing would run the wind-down: don't wait for it
        _close_ended(current)
        return
    try:
        asyncio.run_coroutine_threadsafe(_wind_down(), loop).result(2 * _GRACE)
    except Exception as exc:  # noqa: BLE001 - exiting anyway; say why it was not clean
        logger.warning("agcore_tools' event loop did not wind down cleanly: %r", exc)
    current.stop()
    current.thread.join(_GRACE)
    if not current.thread.is_alive():
        loop.close()
    # A code-mode sandbox the wind-down closed gets the time its Monty threads need,
    # which the grace's own exit hook could not give it: registered at the first
    # sandbox, after this one, it ran first (atexit runs the last registered first).
    exit_grace.wait()


def inherited(loop: asyncio.AbstractEventLoop | None) -> bool:
    """True when ``loop`` is the library loop of the process this one was forked from.

    Example:
        >>> inherited(None)
        False
    """
    return loop is not None and loop is _inherited


def _forget_after_fork() -> None:
    # A forked child has no copy of the loop's thread; it starts its own loop if needed.
    # The parent's loop stays open here, its selector and self-pipe (3 descriptors)
    # too: closing it would unregister the self-pipe from the epoll instance the two
    # processes share, and the parent's loop would no longer wake up.
    # What the parent built is the parent's to close: closing it here could end a TLS
    # session the two processes share.
    global _closing, _current, _lock, _inherited, _owned
    if _current is not None:
        _inherited = _current.loop
    _current, _lock, _owned, _closing = None, threading.Lock(), weakref.WeakSet(), set()


atexit.register(_shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
