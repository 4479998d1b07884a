"""The per-connection backstop of tool calls: one timer for every call in flight."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from agcore_tools import McpClient
from agcore_tools.mcp._watchdog import Watchdog

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="3.10 takes the asyncio.wait_for path"
)


async def _never() -> None:
    await asyncio.Event().wait()


async def _value(value: int) -> int:
    await asyncio.sleep(0)
    return value


async def test_a_call_in_time_returns_its_value_and_leaves_one_timer() -> None:
    watchdog = Watchdog()
    assert await watchdog.bound(_value(1), 30) == 1
    assert await watchdog.bound(_value(2), 30) == 2
    # The second call reused the timer the first armed, instead of one of its own.
    handle = watchdog._handle
    assert handle is not None and not handle.cancelled()
    assert not watchdog._deadlines


async def test_a_call_past_its_deadline_is_cancelled_and_raises_timeout() -> None:
    watchdog = Watchdog()
    cancelled = asyncio.Event()

    async def stuck() -> None:
        try:
            await _never()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await watchdog.bound(stuck(), 0.01)
    assert cancelled.is_set()
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # its cancellation was taken back
    # Nothing is in flight any more, so the timer did not re-arm.
    assert watchdog._handle is None and not watchdog._deadlines and not watchdog._expired


async def test_a_short_deadline_arriving_later_re_arms_the_timer() -> None:
    watchdog = Watchdog()
    long_call = asyncio.create_task(watchdog.bound(_never(), 30))
    await asyncio.sleep(0)  # let it register its deadline
    with pytest.raises(TimeoutError):
        await watchdog.bound(_never(), 0.01)
    # The long call is untouched, and the timer is armed again for its deadline.
    assert not long_call.done()
    assert watchdog._handle is not None
    long_call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long_call
    assert not watchdog._deadlines


async def test_an_outside_cancellation_stays_a_cancellation() -> None:
    watchdog = Watchdog()
    started = asyncio.Event()

    async def waiting() -> None:
        started.set()
        await _never()

    task = asyncio.create_task(watchdog.bound(waiting(), 30))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not watchdog._deadlines


async def test_an_error_of_the_call_passes_through() -> None:
    watchdog = Watchdog()

    async def failing() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await watchdog.bound(failing(), 30)
    assert not watchdog._deadlines


async def test_a_nested_bound_call_in_the_same_task_still_times_out() -> None:
    watchdog = Watchdog()

    async def outer() -> None:
        await watchdog.bound(_never(), 0.01)

    with pytest.raises(TimeoutError):
        await watchdog.bound(outer(), 30)
    assert not watchdog._deadlines


async def test_closing_stops_the_timer_once_the_calls_in_flight_end() -> None:
    watchdog = Watchdog()
    started = asyncio.Event()

    async def waiting() -> None:
        started.set()
        await _never()

    call = asyncio.create_task(watchdog.bound(waiting(), 30))
    await started.wait()
    watchdog.close()
    assert watchdog.armed  # still bounding the call in flight
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not watchdog.armed


REQUEST: contextvars.ContextVar[object] = contextvars.ContextVar("REQUEST")


class _Request:
    """What an app keeps in a context variable while it serves a request."""


async def _served(
    request: Callable[[], Coroutine[Any, Any, weakref.ref[_Request]]],
) -> weakref.ref[_Request]:
    """Run ``request`` in a task (and so a context) of its own, as a web app runs each
    request; waited on, not awaited: the loop step that resumes an await of a task
    still holds it, and so its context."""
    served = asyncio.create_task(request())
    await asyncio.wait({served}, timeout=60)
    ref = served.result()
    del served
    gc.collect()
    return ref


async def test_the_timer_kept_for_the_next_call_holds_nothing_of_the_callers_context() -> None:
    watchdog = Watchdog()

    async def request() -> weakref.ref[_Request]:
        held = _Request()
        REQUEST.set(held)
        assert await watchdog.bound(_value(1), 600) == 1
        return weakref.ref(held)

    held = await _served(request)
    assert watchdog.armed
    assert held() is None


async def test_a_closed_client_keeps_no_timer_and_nothing_of_its_callers_context(
    make_client: Callable[..., McpClient],
) -> None:
    # A long timeout: the timer would otherwise hold a copy of the caller's context
    # (and so the request) for ten minutes after the client closed.
    client = make_client(timeout=600)

    async def request() -> weakref.ref[_Request]:
        held = _Request()
        REQUEST.set(held)
        assert await client.call_tool("echo", {"text": "hi"}) == "hi"
        return weakref.ref(held)

    async with client:
        conn = client._session.conn
        assert conn is not None
        watchdog = conn.watchdog
        held = await _served(request)
    gc.collect()
    assert not watchdog.armed
    assert held() is None
