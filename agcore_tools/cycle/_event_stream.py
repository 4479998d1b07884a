"""``EventStream``: the events of one ``submit_stream*`` call, for ``async for``.

Kept out of :mod:`agcore_tools.cycle.cycle` (which re-exports it) so the loop stays a
short read. The cycle builds it from the loop's generator, the :class:`Outcome` the
loop leaves its response in, and the call's OpenTelemetry run (None unless tracing is
on); the stream only reads them.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import NoReturn

from typing_extensions import Self

from .._aio import with_timeout
from ..error import LlmError, LlmUsageError
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
    task while one iterates (a Stop button): that task's iteration then ends. A stream
    has one consumer; a second task asking for events at the same time gets an
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
        "_agen",
        "_closing",
        "_consumer",
        "_failure",
        "_outcome",
        "_stop_sent",
        "_stopped",
        "_trace",
    )

    def __init__(
        self,
        events: AsyncGenerator[StreamEvent, None],
        outcome: Outcome,
        trace: RunTrace | None = None,
    ) -> None:
        # Built by LlmCycle: the loop's events, where it leaves its response, and the
        # call's trace (None unless OpenTelemetry tracing is on).
        self._agen = events
        self._outcome = outcome
        self._trace = trace
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
            raise StopAsyncIteration
        consumer = asyncio.current_task()
        self._consumer = consumer
        try:
            if self._trace is None:
                return await self._agen.__anext__()
            return await self._trace.step(self._agen, self._stop_was_sent)
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
            self._consumer = None
            stop_sent, self._stop_sent = self._stop_sent, None
            if stop_sent is not None:
                _uncancel(consumer)  # the cancel aclose() sent, taken back
                stop_sent.set_result(None)

    async def collect(self) -> ChatResponse:
        """Consume the remaining events and return the :class:`ChatResponse`.

        After an iteration that failed, it raises an :class:`~agcore_tools.LlmError`
        saying so, the failure as its ``__cause__``; after one that was stopped early,
        one saying the stream was closed before the call finished.

        Example:
            >>> async def main(cycle):  # doctest: +SKIP
            ...     return await cycle.submit_stream("Hi").collect()
        """
        async for _ in self:
            pass
        response = self._outcome.response
        if response is None:
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
        if self._trace is None:
            await self._agen.aclose()
        else:
            await self._trace.close(self._agen)

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


def _cancelled_by_others(task: asyncio.Task[object] | None) -> bool:
    """Whether ``task`` has cancel requests besides the one aclose() sent (3.11+)."""
    if sys.version_info >= (3, 11) and task is not None:
        return task.cancelling() > 1
    return False


def _uncancel(task: asyncio.Task[object] | None) -> None:
    """Take back one cancel request of ``task``: its count is kept on 3.11+ only."""
    if sys.version_info >= (3, 11) and task is not None:
        task.uncancel()
