"""What a run's ``select=`` takes: the selectors, their checks, and what one chooses.

``submit_with_tools(prompt, registry, select=...)`` takes a :data:`Selector`: a list of
tool names, a :class:`ToolSelection` (names, tags, categories, a predicate), a
callable that sees the history and the registry and returns names, a
:class:`ToolSearch` or a :class:`CodeMode`. Each is checked when it is made or when the
run starts, so a mistake fails before anything joins the history. A run asks its
selector before every request (``_run_offer.RunOffer``, through :func:`resolve`), so a
callable can change the tools turn by turn.

Selection only changes what is offered: a call to a registered tool that was not
offered is a call to an unknown tool, handled by ``CycleConfig.unknown_tool``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._aio import positive_number
from ._code_mode import DEFAULT_LIMITS, SandboxFactory, require_monty
from ._progress import is_async_callable
from ._ranking import Embedder
from ._sandbox import OWN_LIMITS, suspensions_for
from ._search import SearchTool, require_bm25s
from ._snapshot import current_snapshot
from ._table import LISTED_TOOLS
from .error import LlmConfigError, LlmUsageError
from .registry import ToolEntry, ToolRegistry

__all__ = [
    "CodeMode",
    "Message",
    "Selector",
    "ToolSearch",
    "ToolSelection",
    "check_known",
    "check_selector",
    "resolve",
    "reusable",
]

Message = dict[str, Any]
"""A chat message of the history a selector reads."""


def _names_tuple(field: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise LlmConfigError(
            f"ToolSelection.{field} takes a list of strings, got the string {value!r}"
        )
    return tuple(value)


@dataclass(frozen=True)
class ToolSelection:
    """Offer the registered tools that match: by name, tag, category or predicate.

    A tool is offered when any given criterion matches it: its name is in ``names``,
    it carries one of ``tags``, its category is one of ``categories``, or
    ``where(entry)`` is true. Offered tools keep registration order.

    Example:
        >>> registry = ToolRegistry()
        >>> @registry.tool(tags=["math"])
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> @registry.tool(category="clock")
        ... def now() -> str:
        ...     '''The time.'''
        ...     return "noon"
        >>> ToolSelection(tags=["math"]).names_in(registry)
        ['add']
        >>> ToolSelection(where=lambda entry: entry.name.startswith("n")).names_in(registry)
        ['now']
    """

    names: Sequence[str] = ()
    """Tool names to offer."""
    tags: Sequence[str] = ()
    """Offer the tools carrying any of these tags."""
    categories: Sequence[str] = ()
    """Offer the tools of any of these categories."""
    where: Callable[[ToolEntry], bool] | None = None
    """Offer the tools for whose entry this returns true: a plain function (an async
    one is refused, as its coroutine would never be awaited)."""

    def __post_init__(self) -> None:
        for field in ("names", "tags", "categories"):
            object.__setattr__(self, field, _names_tuple(field, getattr(self, field)))
        if self.where is not None and not callable(self.where):
            raise LlmConfigError(
                f"ToolSelection.where must be a function of a ToolEntry returning a bool, "
                f"got {type(self.where).__name__}"
            )
        if is_async_callable(self.where):
            # Its coroutine, never awaited, is true: every tool would be offered.
            raise LlmConfigError(
                f"ToolSelection.where takes a plain function, not the async function "
                f"{_callable_name(self.where)}: it is called without awaiting, for each "
                "tool; decide from the entry's name, tags or category in a plain function"
            )

    def names_in(self, registry: ToolRegistry) -> list[str]:
        """The names of the matching tools of ``registry``, in registration order.

        A name in ``names`` the registry does not have raises :class:`LlmConfigError`.
        """
        check_known(registry, self.names)
        return [entry.name for entry in registry.entries() if self._matches(entry)]

    def _matches(self, entry: ToolEntry) -> bool:
        return (
            entry.name in self.names
            or any(tag in entry.tags for tag in self.tags)
            or entry.category in self.categories
            or (self.where is not None and bool(self.where(entry)))
        )


@dataclass(frozen=True)
class ToolSearch:
    """Offer a ``search_tools`` tool and a small core set instead of every tool.

    When the registry's definitions together cost more than ``budget`` tokens (always,
    with ``budget=None``), a run offers the ``core`` tools (any :data:`Selector`) and
    ``search_tools(query)``. The search ranks the other tools locally, with BM25 over
    their names (split), servers, descriptions and parameters, abbreviations and
    synonyms expanded, and its ``max_results`` best matches are appended to the tools
    of every following request of the run. Under the budget, every tool is offered and
    no search tool.

    An ``embedder`` (any callable from texts to vectors, see :class:`Embedder`) adds a
    semantic ranking, fused with BM25's. With ``catalogue=True``, the search tool has a
    ``server`` parameter, whose enum lists the servers of prefixed tool names
    (``server__tool``, as ``McpClient.into_tools(prefix=True)`` names them), to narrow
    a search to one. With ``two_stage=True``, a search lists the tools it found
    (a name and a line each) without offering them, and ``load_tools(names)`` offers the
    ones the model picks, ``max_results`` at most per call: fewer definitions per
    request when it picks fewer.

    What was found lives in the run (one ``submit*_with_tools`` call): the next call
    with a new message starts from the core set again, and a resume after a pause from
    the core set and the tools the paused run called. Needs the ``search`` extra
    (``pip install 'agcore-tools[search]'``); without it, creating a ``ToolSearch``
    raises :class:`LlmConfigError`.

    Example:
        >>> ToolSearch(core=["read_file"], budget=4000).max_results
        5
    """

    core: Selector = ()
    """The tools offered from the first request on."""
    budget: int | None = None
    """Tokens (counted as for ``CycleConfig.max_definition_tokens``) the full set may cost
    before searching is switched on; None to search always."""
    max_results: int = 5
    """Most tools one search adds (or lists, and one ``load_tools`` call adds, with
    ``two_stage``)."""
    embedder: Embedder | None = None
    """Texts to vectors, for a hybrid (BM25 + semantic) ranking; None for BM25 alone. A
    plain function: it runs in a worker thread, and an async one is refused."""
    catalogue: bool = False
    """Give the search tool a ``server`` filter, whose enum lists the servers."""
    two_stage: bool = False
    """A search lists names and one-line summaries (about 25 tokens each) and adds
    nothing; a second tool, ``load_tools(names)``, adds the tools the model picks."""

    def __post_init__(self) -> None:
        if isinstance(self.core, (str, ToolSearch)):
            raise LlmConfigError(
                f"ToolSearch.core takes tool names or a selection, got {self.core!r}"
            )
        object.__setattr__(self, "core", reusable(self.core))
        # A bool is an int to isinstance: max_results=True read as 1, budget=False as 0.
        if _not_int(self.max_results) or self.max_results < 1:
            raise LlmConfigError(
                f"ToolSearch.max_results must be at least 1, got {self.max_results!r}"
            )
        if self.budget is not None and (_not_int(self.budget) or self.budget < 0):
            raise LlmConfigError(
                f"ToolSearch.budget must be at least 0 or None, got {self.budget!r}"
            )
        if self.embedder is not None and not callable(self.embedder):
            raise LlmConfigError(
                f"ToolSearch.embedder must be a callable from texts to vectors, got {self.embedder!r}"
            )
        if is_async_callable(self.embedder):
            # Otherwise the first search failed on the coroutine, with no word of async.
            raise LlmConfigError(
                f"ToolSearch.embedder takes a plain function, not the async function "
                f"{_callable_name(self.embedder)}: it runs in a worker thread and is not "
                "awaited; call a sync client there (OpenAI().embeddings.create), as "
                "blocking is fine"
            )
        require_bm25s()

    async def build_index(self, registry: ToolRegistry) -> None:
        """Index ``registry``'s tools now, in a worker thread, so that a run's first
        search finds the index ready.

        Otherwise the first search of a process builds it, and with an ``embedder`` that
        is a pass over every tool (minutes for a large encoder over 1,000 tools) counted
        against the search's ``tool_timeout``. The last few indexes are kept for every
        run; build again after the tools change. Waits as long as the build takes (bound
        it with ``asyncio.wait_for``: the build goes on, and a search waits for it rather
        than starting another).

        Example:
            >>> import asyncio
            >>> asyncio.run(ToolSearch().build_index(ToolRegistry()))
        """
        snapshot = await current_snapshot(registry)  # the definitions runs search: one index
        await SearchTool(
            snapshot.definitions, set, _ignore, self.max_results, embedder=self.embedder
        ).index()


def _callable_name(func: object) -> str:
    return str(getattr(func, "__name__", type(func).__name__))


def _ignore(names: list[str]) -> None:
    """What an index built ahead does with found tools: it finds none."""


@dataclass(frozen=True)
class CodeMode:
    """Offer one tool, ``run_python(code)``, whose programs call the registry's tools.

    The model writes a Python program instead of one JSON call per turn: intermediate
    results stay in the program, and many dependent calls take one turn. The tool's
    description lists the tools (those the permission checker allows, MCP tools
    included) as typed async Python functions with their descriptions. Programs run in
    the Monty sandbox (the ``code`` extra, ``pip install 'agcore-tools[code]'``): no
    files, network or environment, and the ``limits`` below. Each call a program makes
    goes through the registry as a direct call does (validation, permissions,
    timeouts, stats, progress, spans), ``asyncio.gather`` runs calls at once, and a
    call that needs approval pauses the program: the response's ``pending_approvals``
    lists it, and ``submit_with_tools(None, registry, approvals=[...])`` resumes the
    program where it stopped, in any process (the state is in the history). See
    ``docs/guides/code-mode.md``.

    Example:
        >>> CodeMode(limits={"max_memory": 32 * 1024 * 1024}).limits["max_memory"]
        33554432
    """

    limits: Mapping[str, Any] | None = None
    """``max_calls``, the tool calls one program may make (500; counted across its
    pauses, and on Temporal across its steps), and Monty ``ResourceLimits``
    (``max_memory`` bytes, ``max_feed_duration_secs``, ``max_recursion_depth``, and
    ``max_suspensions``, a backstop set from ``max_calls`` unless given); None for
    :data:`DEFAULT_LIMITS`, whose keys a mapping given here overrides one by one."""
    call_timeout: float | None = 60.0
    """Seconds each tool call of a program may take; None for no limit. The whole
    program is also bounded by the loop's ``tool_timeout``."""
    sandbox: SandboxFactory | None = None
    """Where programs run: None for a Monty worker process started per program. The
    seam for integrations: ``agcore_tools.temporal`` runs each stretch of a program
    as an activity."""

    def __post_init__(self) -> None:
        if self.limits is not None and not isinstance(self.limits, Mapping):
            raise LlmConfigError(f"CodeMode.limits takes a mapping, got {self.limits!r}")
        merged = {**DEFAULT_LIMITS, **(self.limits or {})}
        timeout = self.call_timeout
        if not _positive_or_none(timeout):
            raise LlmConfigError(
                f"CodeMode.call_timeout takes a positive number of seconds or None, got {timeout!r}"
            )
        for key, value in merged.items():
            if not _positive_or_none(value):
                raise LlmConfigError(
                    f"CodeMode.limits[{key!r}] takes a positive number or None, got {value!r}"
                )
        calls = merged["max_calls"]
        if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int)):
            raise LlmConfigError(
                f"CodeMode.limits['max_calls'] takes a whole number or None, got {calls!r}"
            )
        if "max_suspensions" not in (self.limits or {}):
            merged["max_suspensions"] = suspensions_for(calls)
        object.__setattr__(self, "limits", merged)
        if self.sandbox is None:
            # A key Monty does not know failed every program, as a tool error the model
            # could not fix: refuse it here.
            known: Mapping[str, Any] = (
                getattr(require_monty().ResourceLimits, "__annotations__", None) or {}
            )
            unknown = sorted(set(merged) - set(known) - OWN_LIMITS) if known else []
            if unknown:
                raise LlmConfigError(
                    f"CodeMode.limits has keys Monty does not know: {', '.join(unknown)} "
                    f"(it knows {', '.join(sorted(known))}; and CodeMode's own max_calls)"
                )


def _positive_or_none(value: object) -> bool:
    return value is None or positive_number(value)


Selector: TypeAlias = (
    Iterable[str]
    | ToolSelection
    | ToolSearch
    | CodeMode
    | Callable[[Sequence[Message], ToolRegistry], Iterable[str]]
)
"""What ``select=`` takes: names, a :class:`ToolSelection`, a :class:`ToolSearch`, a
:class:`CodeMode`, or a callable ``(history, registry) -> names`` asked before each
request."""


def check_selector(select: object) -> None:
    """Refuse, with an :class:`~agcore_tools.error.LlmUsageError` (a ``TypeError``),
    a ``select=`` that is not a :data:`Selector` (or None), and a string with an
    :class:`~agcore_tools.error.LlmConfigError`: checked when a run starts, before
    anything joins the history.

    Example:
        >>> check_selector(["add"])
        >>> check_selector(5)
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmUsageError: select takes tool names (a list), a ToolSelection, a ToolSearch, a CodeMode, a callable (history, registry) -> names or None, got int
    """
    if select is None or isinstance(select, (ToolSelection, ToolSearch, CodeMode)):
        return
    if isinstance(select, str):
        raise LlmConfigError(f"select takes a list of tool names, got the string {select!r}")
    if callable(select):
        return
    if not isinstance(select, Iterable):
        raise LlmUsageError(
            "select takes tool names (a list), a ToolSelection, a ToolSearch, a CodeMode, "
            f"a callable (history, registry) -> names or None, got {type(select).__name__}"
        )
    # Only a collection: reading a one-shot iterator here would leave nothing to offer.
    wrong = [n for n in select if not isinstance(n, str)] if isinstance(select, Collection) else []
    if wrong:
        raise LlmUsageError(
            f"select takes tool names (strings), got {type(wrong[0]).__name__} {wrong[0]!r}"
        )


def reusable(select: Selector) -> Selector:
    """``select`` itself, or the names of a one-shot iterable (a generator, a ``map``)
    as a tuple: it is read before every request, and would be empty from the second."""
    if isinstance(select, Iterable) and not isinstance(select, (str, Collection)):
        return tuple(select)
    return select


_NAMED = 10
"""The most unknown names the error for ``select=`` names; it counts the others."""


def check_known(registry: ToolRegistry, names: Iterable[str]) -> None:
    """Refuse names the registry does not have: named, with the registered tools, or,
    past :data:`~agcore_tools._table.LISTED_TOOLS` of them, their count and the names
    closest to the first few unknown ones (10,000 names made a 177,000-character
    message).

    Example:
        >>> registry = ToolRegistry()
        >>> @registry.tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> check_known(registry, ["ad"])
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmConfigError: select names tools the registry does not have: ad (registered: add)
    """
    unknown = [name for name in names if name not in registry]
    if not unknown:
        return
    named = ", ".join(unknown[:_NAMED])
    if len(unknown) > _NAMED:
        named += f" and {len(unknown) - _NAMED} more"
    known = registry.list_tools()
    if len(known) <= LISTED_TOOLS:
        where = f"registered: {', '.join(known) or 'none'}"
    else:
        # Each name is compared with every tool's: a few names bound the time it takes.
        close = dict.fromkeys(
            match
            for name in unknown[:3]
            for match in difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        )
        hint = f"; the closest names are: {', '.join(list(close)[:5])}" if close else ""
        where = f"{len(known)} tools are registered{hint}"
    raise LlmConfigError(f"select names tools the registry does not have: {named} ({where})")


def resolve(select: Selector, history: Sequence[Message], registry: ToolRegistry) -> set[str]:
    """The names ``select`` chooses now, registered or not: ``RunOffer`` refuses or
    drops the unregistered ones (see ``_run_offer.RunOffer._chosen``).

    Example:
        >>> sorted(resolve(["b", "a"], [], ToolRegistry()))
        ['a', 'b']
    """
    if isinstance(select, ToolSelection):
        return set(select.names).union(e.name for e in registry.entries() if select._matches(e))
    if isinstance(select, (ToolSearch, CodeMode)):  # a run's own selector, never a core
        raise LlmConfigError(f"a {type(select).__name__} cannot be the core of a ToolSearch")
    if isinstance(select, str):
        raise LlmConfigError(f"select takes a list of tool names, got the string {select!r}")
    if callable(select):
        names = select(history, registry)
        if isinstance(names, str):
            raise LlmConfigError(f"a select callable must return tool names, got {names!r}")
        chosen = set(names)
    else:
        chosen = set(select)
    return chosen


def _not_int(value: object) -> bool:
    """Whether ``value`` is not an integer (a bool is none, though ``isinstance`` says so).

    Example:
        >>> [_not_int(v) for v in (5, True, 5.0)]
        [False, True, True]
    """
    return not isinstance(value, int) or isinstance(value, bool)
