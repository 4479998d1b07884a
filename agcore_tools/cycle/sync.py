"""The streaming loop for synchronous code: :class:`SyncEventStream`.

Each ``next()`` runs one step of the async :class:`~agcore_tools.EventStream` on
agcore_tools' own event loop, so a ``for`` loop sees the same events, in the same
order, as ``async for`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType

from typing_extensions import Self

from .. import _sync
from ._event_stream import EventStream
from .events import ChatResponse, StreamEvent

__all__ = ["SyncEventStream"]


class SyncEventStream(Iterator[StreamEvent]):
    """The events of one ``submit_stream*_sync`` call, for a plain ``for`` loop.

    Once the iteration ends normally, or reaches the answer's ``TurnComplete`` (so also
    for a consumer leaving there), :attr:`response` holds the
    :class:`ChatResponse`. Leaving the loop early (``break``, or an exception raised in
    its body, such as Ctrl-C while the app handles an event) should be followed by
    :meth:`close`, or use ``with`` so it happens on its own: that stops the running
    tools, closes the HTTP stream and frees the cycle for its next call. Ctrl-C while
    the stream waits for the next event stops them too, and so does cancelling the
    ``ToolContext`` given to the call from another thread (a Stop button): the ``for``
    loop then ends, and :meth:`collect` raises :class:`~agcore_tools.RunStoppedError`.

    Example:
        >>> from openai import OpenAI
        >>> from agcore_tools import CycleConfig, LlmCycle
        >>> from agcore_tools.testing import ScriptedChatServer
        >>> with ScriptedChatServer([ScriptedChatServer.reply_text("Hello!")]) as server:
        ...     cycle = LlmCycle(CycleConfig("m"), client=OpenAI(base_url=server.base_url, api_key="-"))
        ...     with cycle.submit_stream_sync("Hi") as events:
        ...         for event in events:
        ...             print(type(event).__name__)
        ...     cycle.close_sync()
        AssistantTextDelta
        TurnComplete
        >>> events.response.text
        'Hello!'
    """

    __slots__ = ("_events",)

    def __init__(self, events: EventStream) -> None:
        self._events = events

    @property
    def response(self) -> ChatResponse | None:
        """The call's :class:`ChatResponse`, or None until the answer's ``TurnComplete``
        (a paused run's: the end of the events); it stays None for a call left earlier,
        or one that failed."""
        return self._events.response

    def __iter__(self) -> SyncEventStream:
        return self

    def __next__(self) -> StreamEvent:
        event = _sync.run(_next_event(self._events))
        if event is None:
            raise StopIteration
        return event

    def collect(self) -> ChatResponse:
        """Consume the remaining events and return the :class:`ChatResponse`.

        Example:
            >>> cycle.submit_stream_sync("Hi").collect().text  # doctest: +SKIP
            'Hello!'
        """
        return _sync.run(self._events.collect())

    def close(self) -> None:
        """Stop the call: cancel running tools and close the HTTP stream.

        Also from another thread while one iterates (a Stop button): that thread's
        ``for`` loop then ends.

        Example:
            >>> events = cycle.submit_stream_sync("Hi")  # doctest: +SKIP
            >>> first = next(events)  # doctest: +SKIP
            >>> events.close()  # doctest: +SKIP

        At interpreter exit, after the library's wind-down closed the call, it returns
        quietly.
        """
        _sync.run_close(self._events.aclose())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _next_event(events: EventStream) -> StreamEvent | None:
    # A coroutine for the loop (an async generator's __anext__ is only an awaitable),
    # and None instead of StopAsyncIteration, which must not cross into the caller.
    try:
        return await events.__anext__()
    except StopAsyncIteration:
        return None
