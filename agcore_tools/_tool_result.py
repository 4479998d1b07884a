"""From what a tool's function returns to the tool's result: JSON-compatible data.

Apart from :mod:`~agcore_tools._function_tool`, which makes the tool, and
:mod:`~agcore_tools._function_run`, which calls its function, because how and where a
value is converted is a job of its own: pydantic-core holds the GIL while it converts,
so a long list is converted a run of items at a time (one a dict holds too:
``{"rows": [...], "count": n}`` is the usual shape of a large result); a sync
function's value is converted in its worker thread (a lazy iterator may block as it is
consumed), and so is a large value got on the event loop (an async function's), while a
small one is converted there at once; a generator's values are drained, each converted
as it comes. The function's own exceptions are its caller's to wrap; a value that
cannot be converted fails the call here, with an error naming the tool.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

from ._aio import run_tool
from ._attachments import normalise, not_json_reason
from ._generators import drain_async, drain_sync
from ._text import is_large
from ._unicode import scrub
from .base import ToolContext
from .error import ToolError, ToolExecutionError, _NotJson

__all__ = ["PLAIN_JSON", "drain", "jsonable", "jsonable_async", "result_in_thread", "to_json"]

PLAIN_JSON = (str, int, float, bool, type(None))
"""The types a result is JSON as it is."""

_CHUNK = 1000
"""Items of a long list converted per call: pydantic-core holds the GIL while it
converts, so one call on 200,000 rows in a worker thread holds up the loop for
seconds, as much as converting them on the loop would."""

_NESTED = 3
"""Dicts deep a long list is found in and converted :data:`_CHUNK` items at a time
(bounded, so a dict that holds itself ends as pydantic ends it: an error)."""


def to_json(value: Any) -> Any:
    """``value`` as JSON-compatible data (see :func:`~agcore_tools._attachments.normalise`),
    an iterator listed first, and a long list, or one a dict holds, converted
    :data:`_CHUNK` items at a time: the same data as converting it in one go.

    Example:
        >>> to_json({"ids": range(3), "names": (n for n in "ab")})
        {'ids': [0, 1, 2], 'names': ['a', 'b']}
    """
    if isinstance(value, PLAIN_JSON):
        return value
    if isinstance(value, Iterator):
        # A generator expression, map(): its items, as pydantic lists them, but looked
        # into for images first.
        value = list(value)
    return _in_chunks(value, 0)


def _in_chunks(value: Any, depth: int) -> Any:
    kind = type(value)
    if (kind is list or kind is tuple) and len(value) > _CHUNK:
        converted: list[Any] = []
        for start in range(0, len(value), _CHUNK):
            converted += normalise(value[start : start + _CHUNK])
        return converted
    if kind is dict and _holds_long_list(value, depth) and _keys_as_written(value):
        # {"rows": [...300,000 rows...], "count": n} in one call held up the loop for
        # ~200 ms. Item by item, each as normalise() converts it in the whole (whether
        # or not the dict holds an image), in the same order: the same data.
        return {key: _in_chunks(item, depth + 1) for key, item in value.items()}
    return normalise(value)  # JSON data; Image, Audio and File values kept as they are


def _holds_long_list(value: dict[Any, Any], depth: int) -> bool:
    # A dict of many keys is converted in one go, as before: not looked into either.
    if depth >= _NESTED or len(value) > _CHUNK:
        return False
    for item in value.values():
        kind = type(item)
        if (kind is list or kind is tuple) and len(item) > _CHUNK:
            return True
        if kind is dict and _holds_long_list(item, depth + 1):
            return True
    return False


def _keys_as_written(value: dict[Any, Any]) -> bool:
    # Keys pydantic writes as they are, so the items can be converted one by one. A
    # dict with any other (an int, an enum, a lone surrogate) is converted in one go,
    # as before: how pydantic converts such keys is its own.
    return all(type(key) is str and scrub(key) is key for key in value)


def jsonable(tool: str, result: Any) -> Any:
    """:func:`to_json` of ``result``, a value the tool named ``tool`` returned (or
    yielded); one it cannot convert raises a :class:`ToolExecutionError` saying which
    value and where.

    Example:
        >>> jsonable("stats", {"mean": 1.5})
        {'mean': 1.5}
        >>> jsonable("stats", {"mean": object()})
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolExecutionError: tool 'stats' failed: returned an object at result['mean'], which is not JSON-compatible; convert it to a str, int, float, bool or None (or a list or dict of them)
    """
    try:
        return to_json(result)
    except _NotJson as exc:  # a value of no JSON type: say which, and where
        raise ToolExecutionError(tool, not_json_reason(result, exc)) from exc
    except ToolError as exc:  # bytes that are no known image and not UTF-8 text
        raise ToolExecutionError(tool, exc.message) from exc
    except Exception as exc:  # a circular value, one nested too deep
        raise ToolExecutionError(tool, not_json_reason(result, exc)) from exc


async def jsonable_async(tool: str, result: Any) -> Any:
    """:func:`jsonable` for a value got on the event loop (an async function's): a large
    one (:func:`~agcore_tools._text.is_large`, a bounded look) is converted in a worker
    thread, a run of items at a time, so the loop runs on meanwhile; a small one, the
    common case, here at once, as the hop to a thread would cost more than converting it.

    Example:
        >>> import asyncio
        >>> asyncio.run(jsonable_async("ids", range(3)))
        [0, 1, 2]
    """
    if type(result) in PLAIN_JSON:
        return result
    if is_large(result):
        # On the loop, 300,000 rows held it up for most of a second. The thread gets the
        # containers it slices as they are now: the app's own list, changed by another
        # task between two chunks, would come back in a state it never had.
        return await run_tool(tool, jsonable, tool, _as_returned(result, 0))
    return jsonable(tool, result)


def _as_returned(value: Any, depth: int) -> Any:
    # A shallow copy of each container to_json() walks over time (a long list, the dicts
    # down to it): about a millisecond for 300,000 rows, on the loop.
    kind = type(value)
    if kind is list:
        return list(value)
    if kind is dict and depth < _NESTED and len(value) <= _CHUNK:
        return {key: _as_returned(item, depth + 1) for key, item in value.items()}
    return value


def result_in_thread(
    tool: str, make: Callable[[], Any], ctx: ToolContext, drains_returned: bool
) -> Any:
    """A sync function's whole call, in its worker thread: ``make()``, then its value
    made JSON here too, since a lazy iterator may block as it is consumed and a large
    result takes long to convert.

    A generator it returns is drained as a generator function's is when
    ``drains_returned`` (a plain wrapper around a generator function, or a function
    annotated to return an ``Iterator``); a coroutine or an async generator is returned
    as it is, for the loop, which alone can run it.
    """
    result = make()
    if inspect.iscoroutine(result) or inspect.isasyncgen(result):
        return result
    if inspect.isgenerator(result) and drains_returned:
        return drain_sync(lambda: result, functools.partial(jsonable, tool), ctx)
    # Any other generator (an expression, `return (u.name for u in users)`) is the
    # result itself: listed whole, as an async function's is, not drained for its last
    # item.
    return jsonable(tool, result)


def drain(
    tool: str, streams: Literal["async", "sync"], make: Callable[[], Any], ctx: ToolContext
) -> Awaitable[Any]:
    """Run a generator function (``make()`` calls it): each value it yields is reported
    as a partial result, the last is the result. A sync one runs in a worker thread; an
    async one's values are converted as :func:`jsonable_async` converts them."""
    if streams == "async":
        return drain_async(make(), functools.partial(jsonable_async, tool), ctx)
    return run_tool(tool, drain_sync, make, functools.partial(jsonable, tool), ctx)
