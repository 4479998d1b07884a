"""Token counts of tool definitions and texts, and the budget a request's definitions
must fit.

A definition's cost is the token count of its compact JSON; a text's (a tool call's
arguments, a tool's result, a message) is counted the same way by :func:`count_tokens`. For a model ``tiktoken``
knows (``pip install 'agcore-tools[tokens]'``), the count uses the model's own
encoding; otherwise, or when the encoding's data cannot be loaded (``tiktoken``
downloads it once, or reads it from ``TIKTOKEN_CACHE_DIR``), it is an estimate: one
token per 4 bytes of UTF-8, rounded up. OpenAI renders definitions in its own format
before counting, so both figures are close approximations, not the server's count.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextvars import ContextVar
from typing import Any

from ._aio import submit_sync, with_timeout
from ._unicode import scrub
from .base import definition_name
from .error import DefinitionBudgetError

__all__ = [
    "BYTES_PER_TOKEN",
    "Costs",
    "check_budget",
    "count_tokens",
    "definition_costs",
    "json_text",
    "load_counter",
]

logger = logging.getLogger("agcore_tools")

BYTES_PER_TOKEN = 4
"""The estimate's rule: one token per this many bytes of UTF-8 JSON."""

ESTIMATE_ONLY: ContextVar[bool] = ContextVar("agcore_tools_estimate_only", default=False)
"""True where counts must be the estimate: a Temporal workflow sets it for its run,
since ``tiktoken`` reads its data from files or the network, which a workflow must not
(and its sandbox refuses)."""


LOAD_TIMEOUT = 10.0
"""Seconds :func:`load_counter` waits for ``tiktoken`` to load a model's encoding (it
may download it); past them, that model's counts are estimated in this process."""

_loaded: dict[str, Callable[[str], int] | None] = {}
# The loads under way: concurrent first counts (twenty conversations starting at once)
# wait for one load, not one thread each. Futures of the pool, so any loop can wait.
_loading: dict[str, Future[Callable[[str], int] | None]] = {}
_loading_lock = threading.Lock()


def _forget_loads() -> None:
    # A forked child has none of its parent's threads, so none of their loads.
    global _loading_lock
    _loading.clear()
    _loading_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # pragma: no branch - absent on Windows only
    os.register_at_fork(after_in_child=_forget_loads)
"""The counters :func:`count_tokens` uses, by model (None: the estimate). Only loading
fills it, never counting: loading reads files or the network, which must not happen
on the event loop."""


@functools.lru_cache(maxsize=32)
def _counter(model: str) -> Callable[[str], int] | None:
    """Load ``model``'s counter (blocking: files or the network) and keep it for
    :func:`count_tokens`."""
    counter = _load(model)
    # A load that finished after load_counter() gave up on it does not count: that
    # model's counts stay the estimate in this process, as its warning said.
    _loaded.setdefault(model, counter)
    return counter


def _load(model: str) -> Callable[[str], int] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding = tiktoken.encoding_for_model(model)
    except KeyError:  # a model tiktoken does not know
        return None
    except (OSError, ValueError) as exc:  # its data could not be downloaded or read
        logger.warning(
            "tiktoken could not load the encoding of %r (%s); tool definitions are "
            "estimated at one token per %d bytes",
            model,
            exc,
            BYTES_PER_TOKEN,
        )
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


async def load_counter(model: str) -> None:
    """Load ``model``'s counter in a worker thread, within :data:`LOAD_TIMEOUT`, so that
    :func:`count_tokens` counts with it; the loop calls this before it counts. Until it
    is loaded, and if it cannot be, counts are the estimate.

    Example:
        >>> import asyncio
        >>> asyncio.run(load_counter("not-a-known-model"))
        >>> count_tokens("café au lait", "not-a-known-model")
        4
    """
    if model in _loaded or ESTIMATE_ONLY.get():
        return
    with _loading_lock:
        loading = _loading.get(model)
        if loading is None:
            loading = _loading[model] = submit_sync(_counter, model)
    try:
        # Shielded: one waiter cancelled (or out of time) leaves the load to the others.
        await with_timeout(asyncio.shield(asyncio.wrap_future(loading)), LOAD_TIMEOUT)
    except TimeoutError:
        # Said once: the cycles that waited together (many starting at once) would
        # each say it otherwise.
        with _loading_lock:
            first = model not in _loaded
            _loaded.setdefault(model, None)
        if first:
            logger.warning(
                "tiktoken did not load the encoding of %r within %g s; token counts are "
                "estimated at one token per %d bytes in this process",
                model,
                LOAD_TIMEOUT,
                BYTES_PER_TOKEN,
            )


def count_tokens(text: str, model: str) -> int:
    """The token count of ``text`` for ``model``: its encoding's count when ``tiktoken``
    knows the model and its data was loaded (:func:`load_counter`), else one token per
    4 bytes of UTF-8, rounded up. It never loads anything itself.

    Example:
        >>> count_tokens("café au lait", "not-a-known-model")  # 13 bytes
        4
        >>> count_tokens("", "not-a-known-model")
        0
    """
    count = None if ESTIMATE_ONLY.get() else _loaded.get(model)
    if count is not None:
        try:
            return count(text)
        except UnicodeEncodeError:  # a lone surrogate: counted as the U+FFFD it is sent as
            return count(scrub(text))
    # A lone surrogate counts as the three bytes of U+FFFD, not as a failed request.
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def json_text(value: Any) -> str:
    """``value`` as the compact JSON text that is counted (non-ASCII kept as it is).

    Example:
        >>> json_text({"name": "f", "n": [1, 2]})
        '{"name":"f","n":[1,2]}'
    """
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def definition_costs(definitions: Sequence[dict[str, Any]], model: str) -> list[tuple[str, int]]:
    """``(tool name, tokens)`` of each definition, in the given order.

    Example:
        >>> definition_costs([{"type": "function", "function": {"name": "f"}}], "m")
        [('f', 11)]
    """
    return [(definition_name(d), count_tokens(json_text(d), model)) for d in definitions]


Costs = Callable[[Sequence[dict[str, Any]], str], list[tuple[str, int]]]
"""What counts definitions for :func:`check_budget`: :func:`definition_costs`, or a
run's snapshot, which counts each of the registry's definitions once."""


def check_budget(
    definitions: Sequence[dict[str, Any]],
    model: str,
    budget: int | None,
    *,
    costs: Costs = definition_costs,
) -> None:
    """Raise :class:`DefinitionBudgetError` when ``definitions`` cost more than ``budget``,
    as ``costs`` counts them.

    Example:
        >>> check_budget([{"type": "function", "function": {"name": "f"}}], "m", 11)
        >>> check_budget([{"type": "function", "function": {"name": "f"}}], "m", 10)
        Traceback (most recent call last):
        ...
        agcore_tools.error.DefinitionBudgetError: tool definitions cost 11 tokens, over max_definition_tokens=10; the costliest: f (11); offer fewer tools (submit_with_tools(select=...)) or a ToolSearch
    """
    if budget is None or not definitions:
        return
    counted = costs(definitions, model)
    total = sum(tokens for _, tokens in counted)
    if total > budget:
        raise DefinitionBudgetError(total, budget, counted)
