"""``EventStream``: the events of one ``submit_stream*`` call, for ``async for``.

Kept out of :mod:`agcore_tools.cycle.cycle` (which re-exports it) so the loop stays a
short read. The cycle builds it from the loop's generator, the :class:`Outcome` the
loop leaves its response in, and the call's OpenTelemetry run (None unless tracing is
on); the stream only reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import weakref
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import NoReturn

from typing_extensions import Self

from .._aio import with_timeout
from .._cancel import CancellationToken
from ..error import LlmError, LlmUsageError, RunStoppedError
from ._outcome import Outcome
from ._trace import RunTrace
from .events import ChatResponse, StreamEvent

__all__ = ["EventStream"]

STOP_TIMEOUT = 10.0
"""Seconds :meth:`EventStream.aclose` waits for the step another task is running to
stop. Longer than the registry's own wait for tools that ignore cancellation (5 s)."""


class EventStream:
    """The events of one ``submit_stream*`` call, for ``async for``.

    Once the iteration ends normally, or reaches the answer's ``TurnComplete`` (so also
    for a consumer leaving there), :attr:`response` holds the
    :class:`ChatResponse`. Leaving the loop early (``break``) should be followed by
    :meth:`aclose`, or use ``async with`` so it happens on its own: that stops the
    running tools and closes the HTTP stream. :meth:`aclose` also works from another
    task while one iterates (a Stop button): that task's iteration then ends. So does
    cancelling the ``ToolContext`` given to the call (``ctx.cancellation.cancel()``,
    from any thread); :meth:`collect` then raises
    :class:`~agcore_tools.RunStoppedError`. A stream has one consumer; a second task
    asking for events at the same time gets an
    :class:`~agcore_tools.error.LlmUsageError`. A plain ``for`` raises a ``TypeError``
    naming the fix: ``async for``, or the ``*_sync`` method from synchronous code.

    Example:
        >>> import asyncio
        >>> from agcore_tools import CycleConfig, LlmCycle
        >>> from agcore_tools.testing import ScriptedChatServer
        >>> async def main(server: ScriptedChatServer) -> ChatResponse | None:
        ...     async with server.client() as client:
        ...         cycle = LlmCycle(CycleConfig("m"), client=client)
        ...         async with cycle.submit_stream("Hi") as events:
        ...             async for event in events:
        ...                 print(type(event).__name__)
        ...         return events.response
        >>> with ScriptedChatServer([ScriptedChatServer.reply_text("Hello!")]) as server:
        ...     asyncio.run(main(server)).text
        AssistantTextDelta
        TurnComplete
        'Hello!'
    """

    __slots__ = (
        "__weakref__",
        "_agen",
        "_closing",
        "_consumer",
        "_dropped",
        "_failure",
        "_halted",
        "_outcome",
        "_stop_sent",
        "_stopped",
        "_token",
        "_trace",
        "_watcher",
    )

    def __init__(
        self,
        events: AsyncGenerator[StreamEvent, None],
        outcome: Outcome,
        trace: RunTrace | None = None,
        stop: CancellationToken | None = None,
    ) -> None:
        # Built by LlmCycle: the loop's events, where it leaves its response, the
        # call's trace (None unless OpenTelemetry tracing is on), and the token of the
        # context the app gave the call (None without one).
        self._agen = events
        self._outcome = outcome
        self._trace = trace
        self._dropped: weakref.finalize[..., EventStream] | None = None
        # The task inside a step, and a future its step's end sets once aclose() has
        # cancelled it: a running generator cannot be closed, only its task cancelled.
        # The step runs in the consumer's own task, in its context, as any async
        # generator's would: a context variable set in one step is there in the next.
        self._consumer: asyncio.Task[object] | None = None
        self._stop_sent: asyncio.Future[None] | None = None
        self._stopped = False
        # The one close of the loop, which every aclose() awaits: a second agen.aclose()
        # while the first is still in the loop's `finally` (a tool's cleanup awaiting)
        # raises RuntimeError, and a Stop button's aclose() and the consumer's
        # `async with` exit both close.
        self._closing: asyncio.Future[None] | None = None
        self._failure: Exception | None = None  # what ended the iteration, if it failed
        # The app cancels the call through its context's token, from any thread: a task
        # on the loop waits for that from the first step until the loop ends, then
        # stops the call as aclose() does (a thread cannot cancel a task itself).
        self._token = stop
        self._watcher: tuple[asyncio.Task[None], weakref.finalize[..., EventStream]] | None = None
        self._halted = False  # stopped by that token

    @property
    def response(self) -> ChatResponse | None:
        """The call's :class:`ChatResponse`, or None until the answer's ``TurnComplete``
        (a paused run's: the end of the events); it stays None for a call left earlier,
        or one that failed."""
        return self._outcome.response

    def __aiter__(self) -> EventStream:
        return self

    def __iter__(self) -> NoReturn:
        """Refuse a plain ``for``: the events come asynchronously.

        Example:
            >>> from agcore_tools import CycleConfig, LlmCycle
            >>> from agcore_tools.testing import ScriptedChatServer
            >>> with ScriptedChatServer([]) as server:
            ...     events = LlmCycle(CycleConfig("m"), client=server.client()).submit_stream("Hi")
            ...     for event in events:
            ...         pass
            Traceback (most recent call last):
            ...
            agcore_tools.error.LlmUsageError: an EventStream is iterated with `async for event in stream` inside an async function; from synchronous code call submit_stream_with_tools_sync() or submit_stream_sync() instead, which return a plain iterator
        """
        raise LlmUsageError(
            "an EventStream is iterated with `async for event in stream` inside an async "
            "function; from synchronous code call submit_stream_with_tools_sync() or "
            "submit_stream_sync() instead, which return a plain iterator"
        )

    async def __anext__(self) -> StreamEvent:
        if self._consumer is not None:
            raise LlmUsageError(
                "an EventStream has one consumer: another task is already waiting for its "
                "next event; read the events in that task (stop it from elsewhere with "
                "`await events.aclose()`)"
            )
        if self._stopped:
            if self._halted:  # no one else awaits the close its context started
                await self._settled()
            raise StopAsyncIteration
        if self._token is not None and self._watcher is None:
            self._watch(self._token)
        if self._trace is not None and self._dropped is None:
            # A stream dropped unclosed (a `break` outside `async with`) is never stepped
            # or closed again: its run's span ends once it is collected, not never.
            loop = asyncio.get_running_loop()
            self._dropped = weakref.finalize(self, _end_soon, loop, self._trace)
            self._dropped.atexit = False
        consumer = asyncio.current_task()
        self._consumer = consumer
        ended = True
        try:
            if self._trace is None:
                event = await self._agen.__anext__()
            else:
                event = await self._trace.step(self._agen, self._stop_was_sent)
            ended = False
            return event
        except RunStoppedError:
            # The loop found the context cancelled before its watcher's stop came.
            self._halted = self._stopped = True
            raise StopAsyncIteration from None
        except asyncio.CancelledError:
            # aclose() from another task: the iteration ends, unless someone else
            # cancelled the consumer too (only Python 3.11+ can tell).
            if self._stop_sent is not None and not _cancelled_by_others(consumer):
                raise StopAsyncIteration from None
            raise
        except StopAsyncIteration:
            raise  # the end, not a failure
        except Exception as exc:
            self._failure = exc  # collect() afterwards says the call failed, and why
            raise
        finally:
            if ended:  # the loop has ended, whichever way: nothing left to stop
                self._unwatch()
            self._consumer = None
            stop_sent, self._stop_sent = self._stop_sent, None
            if stop_sent is not None:
                _uncancel(consumer)  # the cancel aclose() sent, taken back
                stop_sent.set_result(None)

    async def collect(self) -> ChatResponse:
        """Consume the remaining events and return the :class:`ChatResponse`.

        After an iteration that failed, it raises an :class:`~agcore_tools.LlmError`
        saying so, the failure as its ``__cause__``; after one that was stopped early,
        one saying the stream was closed before the call finished; after a call its
        ``ToolContext`` stopped, a :class:`~agcore_tools.RunStoppedError`.

        Example:
            >>> async def main(cycle):  # doctest: +SKIP
            ...     return await cycle.submit_stream("Hi").collect()
        """
        async for _ in self:
            pass
        response = self._outcome.response
        if response is None:
            if self._halted:
                await self._settled()
                raise RunStoppedError(self._outcome.usage)
            failure = self._failure
            if failure is not None:
                raise LlmError(
                    f"the streamed call failed earlier: {type(failure).__name__}: {failure}"
                ) from failure
            raise LlmError("the event stream was closed before the call finished")
        return response

    async def aclose(self) -> None:
        """Stop the call: cancel running tools and close the HTTP stream.

        From another task while one iterates (a Stop button), the step that task is
        waiting for is cancelled and awaited (up to 10 s); its iteration then ends.
        There is one close: a later call (the consumer's ``async with`` exit) waits for
        the first to finish, up to 20 s.

        Example:
            >>> import asyncio
            >>> from agcore_tools import AssistantTextDelta, CycleConfig, LlmCycle
            >>> from agcore_tools.testing import ScriptedChatServer
            >>> async def first_words(server: ScriptedChatServer) -> str:
            ...     async with server.client() as client:
            ...         events = LlmCycle(CycleConfig("m"), client=client).submit_stream("Hi")
            ...         try:
            ...             async for event in events:
            ...                 if isinstance(event, AssistantTextDelta):
            ...                     return event.text  # leave early ...
            ...         finally:
            ...             await events.aclose()  # ... and stop the call
            ...         return ""
            >>> reply = ScriptedChatServer.reply_text("Hello there, world")
            >>> with ScriptedChatServer([reply], chunk_chars=5) as server:
            ...     asyncio.run(first_words(server))
            'Hello'
        """
        self._stopped = True
        closing = self._closing
        if closing is None:
            # A task of its own, so that a caller cancelled while waiting (or timing out)
            # leaves the close going on for the others to await, never half done.
            closing = self._closing = asyncio.ensure_future(self._close())
        try:
            await with_timeout(asyncio.shield(closing), 2 * STOP_TIMEOUT)
        except TimeoutError as exc:
            raise LlmError(
                f"the streamed call did not stop within {2 * STOP_TIMEOUT:.0f} s of "
                "aclose(): something in it ignores cancellation"
            ) from exc

    async def _close(self) -> None:
        consumer = self._consumer
        if consumer is not None:
            stop_sent = self._stop_sent
            if stop_sent is None:
                stop_sent = self._stop_sent = asyncio.get_running_loop().create_future()
                consumer.cancel()
            try:
                await with_timeout(asyncio.shield(stop_sent), STOP_TIMEOUT)
            except TimeoutError as exc:
                raise LlmError(
                    f"the streamed call did not stop within {STOP_TIMEOUT:.0f} s of "
                    "aclose(): something in it ignores cancellation"
                ) from exc
        try:
            if self._trace is None:
                await self._agen.aclose()
            else:
                await self._trace.close(self._agen)
        finally:
            self._unwatch()

    async def _settled(self) -> None:
        """Wait for the close under way, if any: once it is done, so is the call."""
        if self._closing is not None:
            await self.aclose()

    def _watch(self, token: CancellationToken) -> None:
        """Start the task that stops the call once ``token`` is cancelled."""
        loop = asyncio.get_running_loop()
        # A child of its own: its wait binds it to this loop, not the app's token, which
        # may be reused on another loop.
        task = loop.create_task(EventStream._stop_on(token.child(), weakref.ref(self)))
        # A stream dropped unfinished takes its watcher along (the garbage collector
        # closes its loop): weakly held, the stream is never kept alive by it.
        self._watcher = (task, weakref.finalize(self, _cancel_soon, loop, task))

    def _unwatch(self) -> None:
        """Stop watching: the loop has ended, or is closing."""
        self._token = None  # never watched again
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            task, dropped = watcher
            dropped.detach()
            task.cancel()

    @staticmethod
    async def _stop_on(token: CancellationToken, stream: weakref.ref[EventStream]) -> None:
        # No timeout: the watch lasts as long as the loop, whose end cancels it.
        await token.wait()
        alive = stream()
        if alive is not None:
            alive._halt()

    def _halt(self) -> None:
        """Stop the call for its cancelled context, as aclose() would (on the loop)."""
        if self._stopped:  # closed or closing already
            return
        self._halted = self._stopped = True
        self._closing = asyncio.ensure_future(self._close())

    def _stop_was_sent(self) -> bool:
        """Whether the consumer's cancellation is the one aclose() sent: a Stop, which
        ends the run's span as a close does, not as a failure."""
        return self._stop_sent is not None and not _cancelled_by_others(self._consumer)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _cancel_soon(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> None:
    """Cancel ``task`` on ``loop``, from whatever thread the garbage collector runs in."""
    if not task.done():
        # A closed loop raises RuntimeError: nothing runs the task any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)


def _end_soon(loop: asyncio.AbstractEventLoop, trace: RunTrace) -> None:
    """End a dropped stream's run span on ``loop``. Not here: the garbage collector may
    run this inside OpenTelemetry's own code, holding a lock that ending a span takes."""
    # A closed loop raises RuntimeError: the span is left, as nothing runs there any more.
    # Ending it here instead is no safer once the loop is closed: the collector runs in
    # whichever thread allocates, maybe inside an exporter holding its threading.Lock
    # (InMemorySpanExporter.export extends a deque under one), which span.end() takes.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(trace.dropped)


def _cancelled_by_others(task: asyncio.Task[object] | None) -> bool:
    """Whether ``task`` has cancel requests besides the one aclose() sent (3.11+)."""
    if sys.version_info >= (3, 11) and task is not None:
        return task.cancelling() > 1
    return False


def _uncancel(task: asyncio.Task[object] | None) -> None:
    """Take back one cancel request of ``task``: its count is kept on 3.11+ only."""
    if sys.version_info >= (3, 11) and task is not None:
        task.uncancel()
