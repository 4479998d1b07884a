"""The ``search_tools`` tool a :class:`~agcore_tools.ToolSearch` run offers the model.

The ranking is ``_ranking``'s (BM25 over weighted fields, and an optional embedder);
this module is what the model sees of it: the tool's description and parameters, the
index (built at a run's first search, and kept for the last few tool sets, since a
conversation is many runs over the same tools), and the text of what was found. The
packages are the optional ``search`` extra (``pip install 'agcore-tools[search]'``),
imported only when a search runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import threading
import types
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import Future
from typing import Any

from pydantic_core import to_json

from ._aio import submit_sync
from ._ranking import Embedder, ToolIndex, server_of, summary
from .base import BaseTool, ToolContext
from .error import LlmConfigError, ToolConfigError

__all__ = ["LOAD_TOOL_NAME", "SEARCH_TOOL_NAME", "LoadTool", "SearchTool", "require_bm25s"]

SEARCH_TOOL_NAME = "search_tools"
LOAD_TOOL_NAME = "load_tools"

logger = logging.getLogger("agcore_tools.search")

_CACHED_INDEXES = 4
_Key = tuple[Hashable, bytes]  # the embedder's identity (see _identity), the definitions' hash
_INDEXES: OrderedDict[_Key, tuple[Embedder | None, ToolIndex]] = OrderedDict()
_BUILDING: dict[_Key, tuple[Embedder | None, Future[ToolIndex]]] = {}
_CACHE_LOCK = threading.Lock()  # indexes are built in worker threads


def require_bm25s() -> None:
    """Raise :class:`LlmConfigError` when ``bm25s`` or ``PyStemmer`` (the ``search``
    extra) is missing."""
    missing = [name for name in ("bm25s", "Stemmer") if importlib.util.find_spec(name) is None]
    if missing:
        raise LlmConfigError(
            "ToolSearch ranks tools with the bm25s and PyStemmer packages; missing: "
            f"{', '.join(missing)}: pip install 'agcore-tools[search]'"
        )


class SearchTool(BaseTool):
    """The ``search_tools`` tool: finds tools by words and makes them callable.

    ``definitions`` are every tool of the run, indexed once (at the first search, off
    the event loop); ``offered`` gives the names already offered, which a search skips;
    ``on_found`` receives the names found, and adds them to the tools the run offers
    from the next request on. With ``catalogue``, a ``server`` parameter, whose enum
    lists the servers of prefixed tool names (``server__tool``), narrows a search to
    one of them. ``gone`` gives the names of ``definitions`` the registry no longer
    offers (unregistered, or refused by the permissions, since the run took them),
    which a search skips too.

    Example:
        >>> tool = SearchTool([], set, print, 5)
        >>> tool.parameters["required"]
        ['query']
    """

    name = SEARCH_TOOL_NAME
    description = (
        "Find more tools. Only some tools are listed; describe the task in a few words "
        "and the best matching tools are returned and become callable from your next step."
    )
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words describing the tool you need."}
        },
        "required": ["query"],
    }

    def __init__(
        self,
        definitions: list[dict[str, Any]],
        offered: Callable[[], set[str]],
        on_found: Callable[[list[str]], None],
        limit: int,
        *,
        embedder: Embedder | None = None,
        catalogue: bool = False,
        two_stage: bool = False,
        gone: Callable[[], Awaitable[set[str]]] | None = None,
    ) -> None:
        self._two_stage = two_stage
        self._gone = gone
        if two_stage:
            self.description = (
                "Find more tools. Only some tools are listed; describe the task in a few "
                f"words and the best matching tools are listed, one line each; then call "
                f"{LOAD_TOOL_NAME} with the names you need to make them callable."
            )
        self._definitions = definitions
        self._offered = offered
        self._on_found = on_found
        self._limit = limit
        self._embedder = embedder
        self._index: ToolIndex | None = None
        self._by_name = {_name(d): d for d in definitions}
        self._servers: frozenset[str] = frozenset()
        if catalogue:
            self._servers = frozenset(
                server for d in definitions if (server := server_of(_name(d)))
            )
        if self._servers:
            # Listed once, in the parameter's enum (which a strict model keeps to): a
            # list in the description too cost about 7 tokens more per server.
            narrow: dict[str, Any] = {
                "type": "string",
                "enum": sorted(self._servers),
                "description": "Search only this server's tools.",
            }
            self.parameters = {
                **type(self).parameters,
                "properties": {**type(self).parameters["properties"], "server": narrow},
            }

    async def index(self) -> ToolIndex:
        """The index of the definitions: built in a worker thread at the first call, or
        taken from the last few built (by any run, in any thread), or the build already
        under way for the same tools and embedder, which every caller waits for.

        A caller cancelled or out of time leaves the build running for the next one: a
        slow embedder is not started again at each search that times out.

        Example:
            >>> import asyncio
            >>> tool = SearchTool([], set, print, 5)
            >>> asyncio.run(tool.index()).search("weather", 5)
            []
        """
        if self._index is None:
            # Hashing (and indexing) many definitions is CPU work: off the event loop.
            building = await asyncio.to_thread(self._shared_build)
            self._index = await asyncio.shield(asyncio.wrap_future(building))
        return self._index

    def _shared_build(self) -> Future[ToolIndex]:
        # Each run has its own search tool, and a conversation is many runs over the
        # same tools: the index of the last few tool sets is kept (an embedder's pass
        # over 1,000 tools takes about a second, a large encoder's minutes).
        embedder = self._embedder
        key = (_identity(embedder), hashlib.sha256(to_json(self._definitions)).digest())
        with _CACHE_LOCK:
            # The embedder itself is kept with its index: an id is reused once freed.
            cached = _INDEXES.get(key)
            if cached is not None and _same(cached[0], embedder):
                _INDEXES.move_to_end(key)
                done: Future[ToolIndex] = Future()
                done.set_result(cached[1])
                return done
            building = _BUILDING.get(key)
            if building is not None and _same(building[0], embedder):
                return building[1]
            future = submit_sync(self._build, key)
            _BUILDING[key] = (embedder, future)
            return future

    def _build(self, key: _Key) -> ToolIndex:
        embedder = self._embedder
        try:
            index = ToolIndex(self._definitions, embedder)
        except BaseException:
            with _CACHE_LOCK:  # the next search tries again
                _BUILDING.pop(key, None)
            raise
        with _CACHE_LOCK:
            _BUILDING.pop(key, None)
            _INDEXES[key] = (embedder, index)
            while len(_INDEXES) > _CACHED_INDEXES:
                _INDEXES.popitem(last=False)
        return index

    async def _owned(self, query: str, server: str | None) -> list[str]:
        """The tools ``query`` names, when they are all offered already (else none): a
        search would skip them, and offer tools that only share a word with the name,
        in every later request of the run."""
        index = await self.index()
        offered = self._offered()
        if self._gone is not None:  # offered when the turn began, gone since
            offered = offered - await self._gone()
        named = [n for n in index.named(query) if server is None or server_of(n) == server]
        return named if all(n in offered for n in named) else []

    async def _search(self, query: str, server: str | None) -> list[dict[str, Any]]:
        index = await self.index()
        offered = self._offered()
        # A tool unregistered or refused since the run took the definitions (an MCP
        # server's list changed mid-turn) was found, and the model told to call it.
        gone = await self._gone() if self._gone is not None else set()
        names = await asyncio.to_thread(
            index.search, query, self._limit, server=server, exclude=offered | gone
        )
        # Fewer than the limit: fewer tools were left to offer, or no more of them
        # share a word with the query (a BM25 score of 0 is never returned).
        logger.debug(
            "search_tools(%r): %d of %d tools not offered yet matched (max_results=%d)",
            _echoed(query),
            len(names),
            len(self._definitions) - len(offered),
            self._limit,
        )
        return [self._by_name[name] for name in names]

    def _server_named(self, name: str) -> str | None:
        """The server ``name`` names: itself, or the one server whose name it is but
        for case or spaces around it (a model writes "github " for "GitHub"); None for
        no server."""
        if name in self._servers:
            return name
        key = name.strip().casefold()
        folded = [server for server in self._servers if server.casefold() == key]
        return folded[0] if len(folded) == 1 else None

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Search, record what was found, and describe it to the model.

        A fault of the embedder (it raised, or its vectors do not fit) raises an
        unrecoverable :class:`ToolConfigError`, which stops the run.
        """
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return "Give a query: a few words describing the tool you need."
        given = args.get("server") if self._servers else None
        if isinstance(given, str) and not given.strip():
            given = None  # what a model fills an optional parameter with: no filter
        servers = ", ".join(sorted(self._servers))
        if given is not None and not isinstance(given, str):  # a list: no one name
            return f"Give server as one name (a string); the servers are {servers}."
        server = self._server_named(given) if given is not None else None
        if given is not None and server is None:
            return f"No server is named {_echoed(given)!r}; the servers are {servers}."
        try:
            owned = await self._owned(query, server)
            found = [] if owned else await self._search(query, server)
        except LlmConfigError as exc:
            # A misconfigured embedder fails every search: the run stops and the app
            # is told, rather than the model reading the fault and going on without tools.
            error = ToolConfigError(str(exc), tool_name=self.name)
            error.recoverable = False
            raise error from exc
        if owned:
            return (
                f"Already callable: {', '.join(owned)}; call it. To find another tool, "
                "describe what it does."
            )
        if not found:
            return f"No other tool matches {_echoed(query)!r}; try other words."
        if self._two_stage:
            lines = [_line(_name(d), summary(_description(d))) for d in found]
            return f"Call {LOAD_TOOL_NAME} with the names you need:\n" + "\n".join(lines)
        self._on_found([_name(d) for d in found])
        lines = [_line(_name(d), _description(d)) for d in found]
        return "These tools can be called from your next step:\n" + "\n".join(lines)


class LoadTool(BaseTool):
    """The ``load_tools`` tool of a two-stage search: makes the named tools callable.

    ``definitions`` are every tool the run may offer; ``offered`` gives the names
    already offered; ``on_found`` adds names to the tools offered from the next request
    on, at most ``limit`` per call (a search's ``max_results``: the rest are named as
    not loaded). ``refused`` tells a tool the permissions refuse (it is in no
    definition) from a name no tool has; ``gone`` gives the names of ``definitions``
    the registry no longer offers, which are not loaded.

    Example:
        >>> LoadTool([], set, print, 5).parameters["required"]
        ['names']
    """

    name = LOAD_TOOL_NAME
    description = (
        f"Make tools that {SEARCH_TOOL_NAME} listed callable from your next step: give "
        "their exact names."
    )
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string"},
                "description": f"Tool names, as {SEARCH_TOOL_NAME} listed them.",
            }
        },
        "required": ["names"],
    }

    def __init__(
        self,
        definitions: list[dict[str, Any]],
        offered: Callable[[], set[str]],
        on_found: Callable[[list[str]], None],
        limit: int,
        *,
        refused: Callable[[str], bool] = lambda name: False,
        gone: Callable[[], Awaitable[set[str]]] | None = None,
    ) -> None:
        self._gone = gone
        self._known = {_name(d) for d in definitions}
        self._offered = offered
        self._on_found = on_found
        self._limit = limit
        self._refused = refused

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Add the known names to the offered tools, at most ``limit`` new ones; say
        which were not loaded, and why."""
        names = args.get("names")
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return f"Give names: a list of tool names, as {SEARCH_TOOL_NAME} listed them."
        names = list(dict.fromkeys(names))
        offered = self._offered()
        # Not a tool unregistered or refused since the run took the definitions.
        gone = await self._gone() if self._gone is not None else set()
        known = self._known - gone
        new = [n for n in names if n in known and n not in offered]
        loaded, over = new[: self._limit], set(new[self._limit :])
        self._on_found(loaded)
        callable_now = [n for n in names if n not in gone and (n in offered or n in loaded)]
        unknown = [n for n in names if n not in known]
        refused = [n for n in unknown if self._refused(n)]
        parts = []
        if callable_now:
            parts.append(f"Callable from your next step: {', '.join(callable_now)}.")
        if over:
            parts.append(
                f"Not loaded, as one call loads at most {self._limit} tools: "
                f"{', '.join(n for n in new if n in over)}; load the ones you need in "
                "another call."
            )
        if refused:
            parts.append(
                f"Not available in this run (the permissions refuse them): {', '.join(refused)}."
            )
        if len(unknown) > len(refused):
            parts.append(
                f"No tool is named {', '.join(repr(n) for n in unknown if n not in refused)}; "
                f"use the names {SEARCH_TOOL_NAME} listed."
            )
        return " ".join(parts)


_ECHOED = 100
"""The characters of a model's query or server an answer repeats: a query of 10 KB
that matches nothing would cost the model 10 KB more context to be told so."""


def _echoed(text: str) -> str:
    """``text`` cut to its first :data:`_ECHOED` characters, marked when cut.

    Example:
        >>> _echoed("weather"), len(_echoed("x" * 500))
        ('weather', 101)
    """
    return text if len(text) <= _ECHOED else text[:_ECHOED] + "…"


_METHODS = (types.MethodType, types.BuiltinMethodType)


def _identity(embedder: Embedder | None) -> Hashable:
    """What tells embedders apart in the index cache: the object and function of a
    bound method, which is a new object at each access (``model.encode`` as given to
    each run's ``ToolSearch``), else the embedder's id.

    Example:
        >>> class Model:
        ...     def encode(self, texts): return [[1.0] for _ in texts]
        >>> model = Model()
        >>> model.encode is model.encode, _identity(model.encode) == _identity(model.encode)
        (False, True)
    """
    if isinstance(embedder, _METHODS):
        return (id(embedder.__self__), embedder.__name__)
    return id(embedder)


def _same(kept: Embedder | None, embedder: Embedder | None) -> bool:
    """Whether the embedder ``kept`` with an index is ``embedder``: a bound method is
    the same when its object is, and its function (``==``, which does not call the
    object's own ``__eq__``)."""
    return kept is embedder or (isinstance(embedder, _METHODS) and kept == embedder)


def _description(definition: dict[str, Any]) -> str:
    return str(definition["function"].get("description") or "")


def _line(name: str, text: str) -> str:
    # A description's own lines indented under its tool's: a markdown list in one
    # ("- Single line: ...") read as more tools found.
    first, *rest = [line.rstrip() for line in text.strip().splitlines()] or [""]
    return "\n".join(
        [f"- {name}: {first}".rstrip(), *(f"  {line}" if line else "" for line in rest)]
    )


def _name(definition: dict[str, Any]) -> str:
    return str(definition["function"]["name"])
