"""A registry's tool definitions at one revision, as the runs over it share them.

Every run offers from the registry's definitions: all of them, a selection, or the
tools a search finds among them. Runs share the registry's own (see
:func:`~agcore_tools._registry_definitions.shared_definitions`) and copy only what a
request sends. Building 10,000 definitions takes tens of milliseconds (seconds the
first time, when their strict schemas are made), and counting them for a
``ToolSearch`` with a budget about as much again, so it is done once per registry
revision, and in a worker thread: a run waits for it, the event loop does not.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from ._aio import run_sync
from ._budget import ESTIMATE_ONLY, definition_costs
from ._offer import copied_definitions
from ._registry_definitions import shared_definitions
from ._text import is_large
from .base import definition_name
from .calls import RENDER_OFF_LOOP
from .registry import ToolRegistry

__all__ = ["Definitions", "Snapshot", "copied", "current_snapshot"]

Definitions: TypeAlias = list[dict[str, Any]]  # tool definitions, as plain dicts


class Snapshot:
    """A registry's definitions at one revision, shared by its runs, which never edit
    them (they copy what they send), where each stands in the list, and what they cost
    per model, counted once. The definitions are the registry's own, not copied."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.revision = registry.revision
        # With the tools whose breaker is open: turn() leaves them out while it is, and
        # a call to one is then told to wait, not that no such tool exists. A list of
        # its own, so no edit of it can reach the registry's.
        self.definitions: Definitions = (
            list(shared_definitions(registry, unavailable=True)) if len(registry) else []
        )
        self.positions = {_name(d): i for i, d in enumerate(self.definitions)}
        # Per model (and whether counts are the estimate): tokens by tool name, of the
        # definitions counted so far, and the total of them all once counted.
        self._counted: dict[tuple[str, bool], dict[str, int]] = {}
        self._totals: dict[tuple[str, bool], int] = {}

    def counted(self, model: str) -> bool:
        """Whether :meth:`cost` has counted ``model``'s tokens (then it costs nothing)."""
        return (model, ESTIMATE_ONLY.get()) in self._totals

    def cost(self, model: str) -> int:
        """The tokens of every definition for ``model``: counted at the first call."""
        key = (model, ESTIMATE_ONLY.get())
        total = self._totals.get(key)
        if total is None:
            total = self._totals[key] = sum(t for _, t in self.costs(self.definitions, model))
        return total

    def costs(self, definitions: Sequence[dict[str, Any]], model: str) -> list[tuple[str, int]]:
        """``(name, tokens)`` of each of ``definitions`` (a request's), as
        :func:`~agcore_tools._budget.definition_costs` counts them; the registry's are
        counted once per model, the others (a run's own tools) each time.

        A request offers the same thousands of definitions turn after turn: counting
        them (their JSON, then its tokens) took about 60 ms of the loop per request at
        10,000 tools."""
        key = (model, ESTIMATE_ONLY.get())
        counted = self._counted.setdefault(key, {})
        positions = self.positions
        found: list[tuple[str, int]] = []
        for definition in definitions:
            name = definition_name(definition)
            tokens = counted.get(name)
            if tokens is None:
                [(_, tokens)] = definition_costs((definition,), model)
                if name in positions:  # a copy of the registry's: the same every time
                    counted[name] = tokens
            found.append((name, tokens))
        return found

    def in_order(self, names: Iterable[str]) -> Definitions:
        """The definitions of ``names`` (those it has), in registration order."""
        positions = self.positions
        return [self.definitions[i] for i in sorted(positions[n] for n in names if n in positions)]


_SNAPSHOTS: weakref.WeakKeyDictionary[ToolRegistry, Snapshot] = weakref.WeakKeyDictionary()
# One per registry: runs starting together over a changed registry wait for one
# snapshot rather than each making its own.
_MAKING: weakref.WeakKeyDictionary[ToolRegistry, threading.Lock] = weakref.WeakKeyDictionary()
_SNAPSHOTS_LOCK = threading.Lock()  # runs on several loops, in several threads


def _cached(registry: ToolRegistry) -> Snapshot | None:
    with _SNAPSHOTS_LOCK:
        snapshot = _SNAPSHOTS.get(registry)
    return snapshot if snapshot is not None and snapshot.revision == registry.revision else None


def _snapshot(registry: ToolRegistry, model: str | None) -> Snapshot:
    """The registry's snapshot at its revision, made if need be, and with ``model``'s
    cost counted (unless None). Blocking."""
    snapshot = _cached(registry)
    if snapshot is None:
        snapshot = Snapshot(registry)
        with _SNAPSHOTS_LOCK:
            _SNAPSHOTS[registry] = snapshot
    if model is not None:
        snapshot.cost(model)
    return snapshot


def _snapshot_once(registry: ToolRegistry, model: str | None) -> Snapshot:
    """:func:`_snapshot` in a worker thread, one at a time per registry."""
    with _SNAPSHOTS_LOCK:
        making = _MAKING.setdefault(registry, threading.Lock())
    with making:
        return _snapshot(registry, model)


async def current_snapshot(registry: ToolRegistry, model: str | None = None) -> Snapshot:
    """:func:`_snapshot`, at once when it is made (and counted) already, else in a
    worker thread; on the loop where no thread runs (a Temporal workflow, which may
    not even make a lock)."""
    snapshot = _cached(registry)
    if snapshot is not None and (model is None or snapshot.counted(model)):
        return snapshot
    if not RENDER_OFF_LOOP.get():
        return _snapshot(registry, model)
    return await run_sync(_snapshot_once, registry, model)


async def copied(definitions: Definitions) -> Definitions:
    """A copy of each of ``definitions`` (see :func:`~agcore_tools._offer.copied_definitions`),
    made in a worker thread when they are large."""
    if RENDER_OFF_LOOP.get() and is_large(definitions):
        return await run_sync(copied_definitions, definitions)
    return copied_definitions(definitions)


def _name(definition: dict[str, Any]) -> str:
    return str(definition["function"]["name"])
