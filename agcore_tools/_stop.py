"""A registry's direct calls stopped by their caller's ``ToolContext``.

``ctx.cancellation.cancel()`` (a Stop button, a watchdog; from any thread) stops an
``LlmCycle`` run under way. The registry's own entry points (``invoke``, ``invoke_all``,
``invoke_as_completed``, ``run_tool_calls`` and their ``_sync`` forms) stop the same
way: the calls still running are cancelled as they are when the caller's task is, and
the call raises :class:`~agcore_tools.RunStoppedError`.

Nothing waits for the cancel: a hook on the caller's token (see
:func:`~agcore_tools._cancel.on_cancel`) hears of it in the cancelling thread and hands
the stop to the loop, so a call whose context is never cancelled starts no task.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from types import TracebackType

from ._cancel import CancellationToken, off_cancel, on_cancel
from .error import RunStoppedError

__all__ = ["StopWatch"]


class StopWatch:
    """Watch ``token`` for a direct call named ``call`` (``"invoke()"``): once it is
    cancelled, from any thread, ``on_stop`` runs on the running loop, unless
    :meth:`end` came first.

    As a ``with`` block (with no ``on_stop``), the block is the call: the stop cancels
    the current task, and the block raises :class:`~agcore_tools.RunStoppedError`
    instead of the ``CancelledError``, as ``asyncio.timeout`` raises ``TimeoutError``;
    so does a block that ends after the cancel, before the stop reached the loop. A
    token already cancelled raises it at once: nothing runs.

    Example:
        >>> import asyncio
        >>> from agcore_tools import ToolContext
        >>> async def main(ctx: ToolContext) -> None:
        ...     with StopWatch(ctx.cancellation, "invoke()"):
        ...         asyncio.get_running_loop().call_soon(ctx.cancellation.cancel)
        ...         await asyncio.sleep(60)
        >>> asyncio.run(main(ToolContext()))
        Traceback (most recent call last):
        ...
        agcore_tools.error.RunStoppedError: invoke() was stopped by its ToolContext (ctx.cancellation.cancel()): no tool call started after that, and those running were cancelled (they may have taken effect); pass a new ToolContext to go on
    """

    __slots__ = ("_call", "_hook", "_loop", "_on_stop", "_sent", "_task", "_token")

    def __init__(
        self,
        token: CancellationToken,
        call: str,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self._token = token
        self._call = call
        self._on_stop = on_stop
        self._task: asyncio.Task[object] | None = None  # the block's, while it runs
        self._sent = False  # the stop cancelled the task
        self._hook: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if on_stop is not None:
            self._watch(asyncio.get_running_loop())

    @property
    def stopped(self) -> bool:
        """Whether the token is cancelled (set at once, in the cancelling thread)."""
        return self._token.cancelled

    def error(self) -> RunStoppedError:
        """The error the stopped call raises."""
        return RunStoppedError(call=self._call)

    def end(self) -> None:
        """Stop watching: the call is over (on the loop's thread)."""
        self._on_stop = self._task = None
        hook = self._hook
        if hook is not None:
            self._hook = None
            off_cancel(self._token, hook)  # a token the app keeps must not keep this

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        hook = self._fire
        if on_cancel(self._token, hook):
            self._hook = hook

    def _fire(self) -> None:
        # In the cancelling thread, maybe not the loop's; the loop may be closed by now.
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        # On the loop: the call may have ended since the cancel.
        task = self._task
        if task is not None:
            self._task = None
            self._sent = True
            task.cancel()
            return
        on_stop = self._on_stop
        if on_stop is not None:
            self._on_stop = None
            on_stop()

    def __enter__(self) -> StopWatch:
        token = self._token
        if token.cancelled:
            raise self.error()  # cancelled before the call: nothing runs
        task = asyncio.current_task()
        if task is not None:  # always, under asyncio: the call runs in a task
            self._task = task
            self._loop = task.get_loop()
            hook = self._fire
            if on_cancel(token, hook):
                self._hook = hook
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._task = None  # a stop from now on cancels nothing
        hook = self._hook
        if hook is not None:
            self._hook = None
            off_cancel(self._token, hook)
        if not self._sent:
            if not self._token.cancelled or (exc is not None and not isinstance(exc, Exception)):
                # Not stopped; or someone else's cancel, or an interrupt (KeyboardInterrupt),
                # which goes on up.
                return
            # A call that ended (or failed) once the token was cancelled, before the stop
            # reached the loop: stopped before it returned, it is stopped, not a success.
            raise self.error() from exc
        task = asyncio.current_task()
        assert task is not None
        # Another cancel of the task besides the stop's (3.11+ can tell) goes on up, as
        # does an interrupt.
        others = sys.version_info >= (3, 11) and task.uncancel() > 0
        if (
            exc is None
            or isinstance(exc, Exception)
            or (isinstance(exc, asyncio.CancelledError) and not others)
        ):
            raise self.error() from exc
