"""The tools one run offers, request by request: its selector asked against the history
and the registry.

A run makes one :class:`RunOffer` from its ``select=`` (see ``_selection``) and asks it
before every request for the definitions to send and the registry that runs the model's
calls: a view holding only the offered tools. Offered tools keep registration order,
and the tools a search finds are appended after them, so the list stays byte-stable
for prompt caching. A :class:`~agcore_tools.ToolSearch` run also offers its
``search_tools`` (and ``load_tools``) tool, a :class:`~agcore_tools.CodeMode` run its
``run_python`` tool.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ._attachments import is_attachments_message
from ._budget import check_budget
from ._code_mode import RUN_PYTHON, RunPythonTool
from ._retry_feedback import is_feedback_message
from ._search import LOAD_TOOL_NAME, SEARCH_TOOL_NAME, LoadTool, SearchTool
from ._selection import CodeMode, Message, Selector, ToolSearch, check_known, resolve, reusable
from ._snapshot import Definitions, Snapshot, copied, current_snapshot
from .base import BaseTool
from .error import LlmConfigError, PermissionDeniedError
from .registry import ToolEntry, ToolRegistry

__all__ = ["RunOffer"]

logger = logging.getLogger("agcore_tools.cycle")


def _name(definition: dict[str, Any]) -> str:
    return str(definition["function"]["name"])


def _called_since_user(history: Sequence[Message]) -> list[str]:
    """The tools the history's assistant messages called after its last user message,
    in the order first called: what a paused run had found and used. The user messages
    the loop adds in a run (a tool result's images, after its tool messages; a
    structured answer's retry, after the answer) do not start one.

    Example:
        >>> call = {"function": {"name": "refund", "arguments": "{}"}}
        >>> _called_since_user([{"role": "user", "content": "hi"},
        ...     {"role": "assistant", "tool_calls": [call, call]}])
        ['refund']
    """
    names: list[str] = []
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if not isinstance(message, Mapping):
            break
        previous = history[index - 1] if index else None
        if message.get("role") == "user":
            if isinstance(previous, Mapping) and (
                is_attachments_message(message, previous) or is_feedback_message(message, previous)
            ):
                continue
            break
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for call in reversed(calls if isinstance(calls, list) else []):
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            if isinstance(name, str):
                names.append(name)
    return list(dict.fromkeys(reversed(names)))


class RunOffer:
    """The tools one run offers: asked before each request for the definitions to send
    and the registry that runs the model's calls (only the offered tools).

    Without a selector every definition is sent and the registry itself runs the calls.
    Made with :meth:`start`, which takes the registry's definitions off the event loop.
    """

    def __init__(
        self, registry: ToolRegistry, select: Selector | None, model: str, snapshot: Snapshot
    ) -> None:
        self._registry = registry
        self._select = select = reusable(select) if select is not None else None
        self._snapshot = snapshot  # shared: read, never edited
        self._revision = snapshot.revision
        self._all = snapshot.definitions
        self._whole: Definitions | None = None  # this run's copy of all, when sent
        self._offerable = snapshot.positions
        self._views: dict[tuple[str, ...], ToolRegistry] = {}
        self._found: list[str] = []
        self._resumed = False  # the history's open run's calls re-found (see _turn)
        self._started = False  # a request's tools were given: names are checked before
        self._dropped: set[str] = set()  # selected tools unregistered mid-run, logged
        self._clashed: set[str] = set()  # tools registered mid-run under own names, logged
        self._search: SearchTool | None = None
        self._load: LoadTool | None = None
        self._code: RunPythonTool | None = None
        self._with_code: ToolRegistry | None = None
        if isinstance(select, CodeMode):
            if RUN_PYTHON in registry:
                raise LlmConfigError(
                    f"CodeMode offers a tool named {RUN_PYTHON!r}, and the registry already "
                    "has one; rename it"
                )
            limits = dict(select.limits or {})
            self._code = RunPythonTool(
                registry.tool_table, self._all, limits, select.call_timeout, select.sandbox
            )
        if isinstance(select, ToolSearch):
            own = (SEARCH_TOOL_NAME, LOAD_TOOL_NAME) if select.two_stage else (SEARCH_TOOL_NAME,)
            for name in own:
                if name in registry:
                    raise LlmConfigError(
                        f"ToolSearch offers a tool named {name!r}, and the registry "
                        "already has one; rename it"
                    )
            budget = select.budget
            if budget is None or snapshot.cost(model) > budget:
                self._searching(select)
        self._core: set[str] = set()
        # The run's own tools, which the permission checker is not asked about: each
        # call they make to the registry's tools is checked as a direct call is. Their
        # names are free in the registry (checked above), so no app tool goes unchecked.
        tools: tuple[BaseTool | None, ...] = (self._code, self._search, self._load)
        self._own = frozenset(tool.name for tool in tools if tool is not None)

    @classmethod
    async def start(cls, registry: ToolRegistry, select: Selector | None, model: str) -> RunOffer:
        """The offer of a run over ``registry``: its definitions copied (and, for a
        :class:`ToolSearch` with a budget, counted for ``model``) in a worker thread,
        once per registry revision."""
        budget = select.budget if isinstance(select, ToolSearch) else None
        snapshot = await current_snapshot(registry, model if budget is not None else None)
        return cls(registry, select, model, snapshot)

    def _searching(self, select: ToolSearch) -> None:
        self._search = SearchTool(
            self._all,
            self._offered,
            self._add_found,
            select.max_results,
            embedder=select.embedder,
            catalogue=select.catalogue,
            two_stage=select.two_stage,
            gone=self._gone,
        )
        if select.two_stage:
            self._load = LoadTool(
                self._all,
                self._offered,
                self._add_found,
                select.max_results,
                refused=self._refused,
                gone=self._gone,
            )

    async def _gone(self) -> set[str]:
        """The tools of the run's definitions the registry no longer offers: those
        unregistered or refused by the permissions since the run took them (this turn's
        calls, or an MCP server's list changed meanwhile). A search or a load must not
        tell the model to call one: the next request leaves it out."""
        registry = self._registry
        if registry.revision == self._revision:
            return set()
        positions = (await current_snapshot(registry)).positions
        return {name for name in self._offerable if name not in positions}

    async def _refresh(self) -> None:
        """Take the registry's tools again when they changed mid-run (a tool registered,
        unregistered or replaced, another permission checker): an unregistered tool is
        no longer offered nor run, a new one can be found. The found tools keep their
        order, so the tool list stays append-only while the registry does not change."""
        registry = self._registry
        if registry.revision == self._revision:
            return
        if self._code is not None:
            # A program's functions are fixed when the run starts (its listing, and the
            # sandbox's names); its calls and direct calls go through the registry as it
            # is now, so an unregistered tool no longer runs.
            self._revision, self._with_code = registry.revision, None
            return
        snapshot = self._snapshot = await current_snapshot(registry)
        self._revision, self._all, self._whole = snapshot.revision, snapshot.definitions, None
        self._offerable = snapshot.positions
        clash = sorted(self._own.intersection(self._offerable))
        if clash:
            # Checked when the run started, but registered since (an MCP server's list
            # changed): the run's own tool keeps the name. The registry's tool was run in
            # its place, unchecked by the permissions, and could be found and offered
            # next to it, under one name.
            self._all = [d for d in self._all if _name(d) not in self._own]
            self._offerable = {n: i for n, i in self._offerable.items() if n not in self._own}
            if not self._clashed.issuperset(clash):
                self._clashed.update(clash)
                logger.warning(
                    "tools registered during the run have the names of the run's own "
                    "tools: %s; they are not offered nor run in this run: rename them",
                    ", ".join(clash),
                )
        self._views.clear()
        self._found = [name for name in self._found if name in self._offerable]
        if isinstance(self._select, ToolSearch) and self._search is not None:
            self._searching(self._select)

    def check_budget(self, tools: Definitions | None, model: str, budget: int | None) -> None:
        """:func:`~agcore_tools._budget.check_budget` of the tools :meth:`turn` gave,
        each of the registry's counted once (see :meth:`Snapshot.costs`)."""
        check_budget(tools or (), model, budget, costs=self._snapshot.costs)

    def _offered(self) -> set[str]:
        return self._core.union(self._found)

    def _add_found(self, names: list[str]) -> None:
        self._found.extend(name for name in names if name not in self._found)

    async def turn(
        self, history: Sequence[Message]
    ) -> tuple[list[dict[str, Any]] | None, ToolRegistry]:
        """The definitions for the next request (None for none) and the registry that
        runs its calls. Tools whose circuit breaker is open are left out."""
        await self._refresh()
        tools, view = await self._turn(history)
        self._started = True
        if tools:
            unavailable = self._registry.unavailable_tools()
            if unavailable:
                tools = [d for d in tools if _name(d) not in unavailable] or None
        return tools, view

    async def _turn(
        self, history: Sequence[Message]
    ) -> tuple[list[dict[str, Any]] | None, ToolRegistry]:
        select, search = self._select, self._search
        if self._code is not None:
            # Only run_python is offered (its definition through the registry's
            # transforms), but a direct call to a registered tool runs: a program tells
            # the model to make one for a tool that asks the user a question.
            offered = cast(Definitions, self._view((RUN_PYTHON,)).definitions())
            return offered, self.for_open_calls()
        if select is None or (isinstance(select, ToolSearch) and search is None):
            if self._whole is None:  # sent as it is to every request of the run
                self._whole = await copied(self._all)
            return (self._whole or None), self._registry
        if isinstance(select, ToolSearch) and search is not None:
            if not self._resumed:
                # A run resumed after a pause (no new user message) offers again the
                # tools its first part called: they were found then, and the model
                # goes on with them. Before the first request, so the list stays
                # append-only from there.
                self._resumed = True
                self._add_found([n for n in _called_since_user(history) if n in self._offerable])
            # Core tools in registration order, the search tool, then what was found in
            # the order found: each search only appends.
            core = self._core = self._chosen(select.core, history).difference(self._own)
            snapshot = self._snapshot
            chosen = snapshot.in_order(core)
            chosen.append(search.definition())
            if self._load is not None:
                chosen.append(self._load.definition())
            definitions, positions = snapshot.definitions, snapshot.positions
            chosen.extend(definitions[positions[n]] for n in self._found if n not in core)
        else:
            chosen = self._snapshot.in_order(self._chosen(select, history))
        view = self._view(tuple(_name(d) for d in chosen))
        # Copies: a caller's edit of a sent definition must not reach the next request.
        return (await copied(chosen)) or None, view

    def _chosen(self, select: Selector, history: Sequence[Message]) -> set[str]:
        """The registered tools ``select`` chooses for the next request. A name the
        registry does not have raises before the run's first request; after it, the
        tool was unregistered while the run went on (an MCP server dropped it), and the
        run goes on without it, as without a found tool unregistered: logged once."""
        registry = self._registry
        names = resolve(select, history, registry)
        missing = sorted(name for name in names if name not in registry)
        if missing:
            if not self._started:
                check_known(registry, missing)
            dropped = [name for name in missing if name not in self._dropped]
            if dropped:
                self._dropped.update(dropped)
                logger.warning(
                    "select names tools unregistered during the run: %s; they are no "
                    "longer offered, and the run goes on without them",
                    ", ".join(dropped),
                )
            names.difference_update(missing)
        return names

    def for_open_calls(self) -> ToolRegistry:
        """The registry that runs the calls a paused run left open: the registry's
        tools, and a code-mode run's ``run_python``."""
        if self._code is None:
            return self._registry
        if self._with_code is None:  # again after the registry changed (see _refresh)
            entries = [*self._registry.entries(), ToolEntry(self._code)]
            self._with_code = self._registry.view(entries)
            self._with_code.tool_table.unchecked = self._own
        return self._with_code

    def _view(self, names: tuple[str, ...]) -> ToolRegistry:
        view = self._views.get(names)
        if view is None:
            registry = self._registry
            entries: list[ToolEntry] = []
            for name in names:
                # The run's own tools first: a registry's tool of the same name,
                # registered since the run started, is not run in their place.
                entry: ToolEntry | None
                if name == SEARCH_TOOL_NAME and self._search is not None:
                    entry = ToolEntry(self._search)
                elif name == LOAD_TOOL_NAME and self._load is not None:
                    entry = ToolEntry(self._load)
                elif name == RUN_PYTHON and self._code is not None:
                    entry = ToolEntry(self._code)
                else:
                    entry = registry.entry(name)
                if entry is not None:
                    entries.append(entry)
            # The same entry objects: stats and strict schemas stay shared.
            view = self._views[names] = registry.view(entries)
            view.tool_table.withheld = self._withheld
            if self._search is not None:
                # Not the view's tools, which are some of the registry's: the model
                # would read that no other tool exists, when it may search for one.
                view.tool_table.unknown = (
                    f"no offered tool has that name; find the tool you need with {SEARCH_TOOL_NAME}"
                )
            view.tool_table.unchecked = self._own
        return view

    def _refused(self, name: str) -> bool:
        """Whether the registry has the tool ``name`` and the permissions refuse it."""
        entry = self._registry.entry(name)
        if entry is None:
            return False
        try:
            self._registry.tool_table.check(entry)
        except PermissionDeniedError:
            return True
        return False

    def _withheld(self, name: str) -> str | None:
        """How the model reaches a tool this run does not offer yet (tool search); None
        for a name that is no tool it could be offered (unregistered, or refused by the
        permissions), and under a selector the app wrote, whose choice is final: such a
        call is an unknown tool's, but for a refused tool's, which the loop refuses (see
        :func:`~agcore_tools._table.refusal`)."""
        if name not in self._offerable:
            return None
        if self._load is not None:
            return f"load it with {LOAD_TOOL_NAME} first"
        if self._search is not None:
            return f"find it with {SEARCH_TOOL_NAME} first"
        return None
