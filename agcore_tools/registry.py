"""The tool registry: registration, discovery, permission checks and execution.

Its definitions and revision are in :mod:`agcore_tools._registry_definitions`, its
calls in :mod:`agcore_tools._registry_calls` and their sync forms in
:mod:`agcore_tools._registry_sync`, the bases of :class:`ToolRegistry`.

Example:
    >>> import asyncio
    >>> from agcore_tools import ToolRegistry
    >>> registry = ToolRegistry()
    >>> @registry.tool
    ... async def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> asyncio.run(registry.invoke("add", {"a": 2, "b": 3})).result()
    5
"""

from __future__ import annotations

import contextvars
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast, overload

from typing_extensions import ParamSpec, Unpack, deprecated

from ._deprecated import renamed
from ._function_tool import FunctionTool, ToolDecorator, ToolOptions, register_function
from ._guard import Guard
from ._keywords import checks_public_keywords
from ._policy_book import PolicyBook
from ._records import ToolCall, ToolEntry, ToolInvocation, ToolStats
from ._registry_calls import RegistryCalls
from ._registry_definitions import RegistryDefinitions
from ._registry_sync import RegistrySync
from ._table import ToolTable
from ._tool_options import check_option_names
from .base import BaseTool
from .error import ToolConfigError
from .permission import PermissionChecker, PermissionConfig
from .policies import ToolPolicy
from .schema import SchemaTransform

__all__ = [
    "ToolCall",
    "ToolEntry",
    "ToolInvocation",
    "ToolRegistry",
    "ToolStats",
    "checked_in",
    "default_registry",
]

logger = logging.getLogger("agcore_tools.registry")

P = ParamSpec("P")
R = TypeVar("R")


_default_registry: ToolRegistry | None = None
_DEFAULT_LOCK = threading.Lock()
# Held while a registry's tools change: two threads registering one name must not both
# find it free. One for every registry, made here: a Temporal workflow's sandbox, where
# the loop builds a registry of stand-ins, refuses a lock made as a registry is.
_REGISTERING = threading.RLock()
_active_registry: contextvars.ContextVar[ToolRegistry | None] = contextvars.ContextVar(
    "agcore_tools_active_registry", default=None
)


def default_registry() -> ToolRegistry:
    """The process-wide registry that ``@tool`` fills outside any ``as_default()`` block.

    Example:
        >>> default_registry() is default_registry()
        True
    """
    global _default_registry
    if _default_registry is None:
        with _DEFAULT_LOCK:  # two threads' first @tool must not make two registries
            if _default_registry is None:
                _default_registry = ToolRegistry()
    return _default_registry


def active_registry() -> ToolRegistry:
    """The registry ``@tool`` registers into right now (see :meth:`ToolRegistry.as_default`)."""
    registry = _active_registry.get()
    return registry if registry is not None else default_registry()


def _permission_checker(value: object) -> PermissionChecker | None:
    # Checked when given: anything else fails at the first call, with no word of why.
    if value is None or isinstance(value, PermissionChecker):
        return value
    wrap = " (wrap it: PermissionChecker(config))" if isinstance(value, PermissionConfig) else ""
    raise ToolConfigError(
        f"ToolRegistry's permission checker must be a PermissionChecker or None, got "
        f"{type(value).__name__}{wrap}"
    )


def _transforms(value: object) -> tuple[SchemaTransform, ...]:
    if callable(value) or not isinstance(value, Iterable):
        wrap = f" (wrap it: [{getattr(value, '__name__', '...')}])" if callable(value) else ""
        raise ToolConfigError(
            "ToolRegistry(schema_transforms=...) takes a list of transforms, got "
            f"{type(value).__name__}{wrap}"
        )
    transforms = tuple(value)
    bad = next((i for i, item in enumerate(transforms) if not callable(item)), None)
    if bad is not None:  # else it fails only when the first request builds definitions
        raise ToolConfigError(
            "ToolRegistry(schema_transforms=...) takes functions of (schema, ctx), such as "
            f"portable_schema; item {bad} is a {type(transforms[bad]).__name__}"
        )
    return transforms


def _each(values: object, kind: type, method: str, what: str, one: str) -> list[Any]:
    # A method's iterable of entries or tools, refused whole when it is not one.
    if isinstance(values, kind):
        raise ToolConfigError(f"{method} takes an iterable of {what}, got one; {one}")
    if not isinstance(values, Iterable):
        raise ToolConfigError(f"{method} takes an iterable of {what}, got {type(values).__name__}")
    items = list(values)
    wrong = next((item for item in items if not isinstance(item, kind)), None)
    if wrong is not None:
        raise ToolConfigError(f"{method} takes {what}, got a {type(wrong).__name__}")
    return items


@checks_public_keywords
class ToolRegistry(RegistryDefinitions, RegistryCalls, RegistrySync):
    """Holds tools by name and runs them with permission checks, timeouts and stats.

    Registration order is kept everywhere (``list_tools``, ``definitions``), so the
    tool list sent to a model is byte-stable across requests, which keeps provider
    prompt caches warm. With ``strict=True``, tools that do not say otherwise are
    offered in OpenAI's strict mode (see :meth:`~agcore_tools.ToolRegistry.definitions`).
    ``schema_transforms`` rewrite what the model reads of each tool's parameters, never
    what the tool accepts (see :func:`~agcore_tools.portable_schema`).

    A keyword the constructor or a method does not take (``invoke(..., context=ctx)``)
    raises a :class:`~agcore_tools.ToolConfigError` that is also a ``TypeError``, as
    Python's own error for it is, naming the keyword meant (``ctx=``).

    Example:
        >>> from agcore_tools import PermissionChecker, PermissionConfig
        >>> registry = ToolRegistry(PermissionChecker(PermissionConfig()))
        >>> registry.list_tools()
        []
        >>> @registry.tool(tags=["math"], category="calc")
        ... def double(x: int) -> int:
        ...     '''Double a number.'''
        ...     return 2 * x
        >>> registry.get("double") is double, registry.entry("double").category
        (True, 'calc')
        >>> [e.name for e in registry.entries()], [e.name for e in registry.find_by_tag("math")]
        (['double'], ['double'])
        >>> [e.name for e in registry.find_by_category("calc")], list(registry.groups())
        (['double'], ['calc'])
        >>> registry.permission_checker.is_allowed(["read"])
        True
        >>> registry.strict, ToolRegistry(strict=True).strict
        (False, True)
    """

    def __init__(
        self,
        permission_checker: PermissionChecker | None = None,
        *,
        strict: bool = False,
        schema_transforms: Sequence[SchemaTransform] = (),
    ) -> None:
        table = ToolTable(_permission_checker(permission_checker))
        if not isinstance(strict, bool):
            raise ToolConfigError(f"ToolRegistry(strict=...) takes True or False, got {strict!r}")
        super().__init__(table, _transforms(schema_transforms), PolicyBook())
        self._entries = table.entries  # the same dict: the table is what runs
        self._strict = strict

    # -- configuration -------------------------------------------------------------

    @property
    def permission_checker(self) -> PermissionChecker | None:
        """The checker consulted before each execution, or None (no checks); settable.

        Example:
            >>> registry = ToolRegistry()
            >>> registry.permission_checker = PermissionChecker()
            >>> registry.permission_checker is not None
            True
        """
        return self._table.checker

    @permission_checker.setter
    def permission_checker(self, checker: PermissionChecker | None) -> None:
        self._table.checker = _permission_checker(checker)
        self._changed()

    @property
    def strict(self) -> bool:
        """Whether tools that do not say otherwise (``strict=None``) are offered in
        OpenAI's strict mode; see :meth:`~agcore_tools.ToolRegistry.definitions`."""
        return self._strict

    @deprecated(
        "ToolRegistry.with_permission_checker() is deprecated; use "
        "registry.permission_checker = checker",
        category=None,
    )
    def with_permission_checker(self, checker: PermissionChecker | None) -> ToolRegistry:
        """Deprecated: set :attr:`permission_checker` instead. Sets it on this registry
        (it does not copy it, as the OpenAI SDK's ``with_*`` methods do) and returns it.

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore", DeprecationWarning)
            ...     registry = ToolRegistry().with_permission_checker(PermissionChecker())
            >>> registry.permission_checker is not None
            True
        """
        renamed("ToolRegistry.with_permission_checker()", "registry.permission_checker = checker")
        self.permission_checker = checker
        return self

    @contextmanager
    def as_default(self) -> Iterator[ToolRegistry]:
        """Make this registry the one ``@tool`` registers into, within the block.

        The setting is context-local: concurrent tasks each see their own.

        Example:
            >>> from agcore_tools import tool
            >>> scoped = ToolRegistry()
            >>> with scoped.as_default():
            ...     @tool
            ...     def ping() -> str:
            ...         '''Answer pong.'''
            ...         return "pong"
            >>> scoped.list_tools()
            ['ping']
        """
        token = _active_registry.set(self)
        try:
            yield self
        finally:
            _active_registry.reset(token)

    @overload
    def tool(
        self, func: Callable[P, R], /, **options: Unpack[ToolOptions]
    ) -> FunctionTool[P, R]: ...

    @overload
    def tool(self, func: None = None, /, **options: Unpack[ToolOptions]) -> ToolDecorator: ...

    def tool(
        self, func: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
    ) -> FunctionTool[..., Any] | ToolDecorator:
        """``@registry.tool`` or ``@registry.tool(name=..., permissions=...)``: like
        :func:`~agcore_tools.tool`, registering into this registry.

        Example:
            >>> registry = ToolRegistry()
            >>> @registry.tool(permissions=["read"], tags=["math"])
            ... def square(x: float) -> float:
            ...     '''Square a number.'''
            ...     return x * x
            >>> registry.find_by_tag("math")[0].name
            'square'
        """

        check_option_names(options)  # here, not only once a function is decorated

        def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
            return register_function(FunctionTool(f, **options), self)

        # The cast: its overloads type what it does (see ToolDecorator).
        return cast(ToolDecorator, decorate) if func is None else decorate(func)

    # -- registration --------------------------------------------------------------

    def _check_free(self, entry: ToolEntry) -> BaseTool | None:
        """Refuse a taken name; return the tool ``entry`` redefines, if any."""
        existing = self._entries.get(entry.name)
        if existing is None:
            return None
        # Re-running a notebook cell re-decorates the same function: that replaces the
        # old tool instead of failing. Anything else with the same name is a collision.
        if entry.tool.redefines(existing.tool):
            return existing.tool
        raise ToolConfigError(
            f"cannot register tool '{entry.name}': a tool of that name is already registered "
            f"({existing.tool!r}); unregister it first or choose another name",
            tool_name=entry.name,
        )

    def _staying(self, replaced: set[str]) -> list[Guard | None]:
        # The guards of the tools that stay while those named in `replaced` are
        # (re)planned: a resource's concurrency cap is compared with theirs alone.
        return [entry.guard for name, entry in self._entries.items() if name not in replaced]

    def _add(self, entry: ToolEntry) -> None:
        with _HOLDING_LOCK:
            _HOLDING.add(self)
        if entry.name in self._entries:
            logger.debug("tool %r redefined; replacing the earlier definition", entry.name)
        self._entries[entry.name] = entry
        self._policies.track(entry)
        self._changed()

    def register(
        self,
        tool: BaseTool,
        *,
        tags: Iterable[str] | None = None,
        category: str | None = None,
        version: str | None = None,
    ) -> ToolEntry:
        """Add a tool. Raises :class:`ToolError` for a taken or malformed name.

        ``tags``, ``category`` and ``version`` default to the tool's own attributes
        (which ``@tool`` sets from its options).

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> registry.register(StaticTool("example"), category="demo").category
            'demo'
            >>> registry.register(StaticTool("example"))
            Traceback (most recent call last):
            ...
            agcore_tools.error.ToolConfigError: cannot register tool 'example': a tool of that name is already registered (<StaticTool 'example'>); unregister it first or choose another name
        """
        entry = ToolEntry.of(tool, tags, category, version, default_strict=self._strict)
        with _REGISTERING:  # the name checked free is still free when the tool is added
            replaces = self._check_free(entry)
            self._policies.guard(entry, self._staying({entry.name}), replaces)
            if replaces is not None:
                self._policies.forget(entry.name)
            self._add(entry)
        return entry

    def register_all(self, tools: Iterable[BaseTool]) -> list[ToolEntry]:
        """Add several tools, all or none: on any error nothing is registered.

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> len(ToolRegistry().register_all([StaticTool("example")]))
            1
        """
        given = _each(tools, BaseTool, "register_all()", "tools", "register() adds one")
        entries = [ToolEntry.of(t, default_strict=self._strict) for t in given]
        seen: set[str] = set()
        with _REGISTERING:
            staying = self._staying({entry.name for entry in entries})
            for entry in entries:
                if entry.name in seen:
                    raise ToolConfigError(
                        f"cannot register tool '{entry.name}': it appears twice in the batch",
                        tool_name=entry.name,
                    )
                seen.add(entry.name)
                replaces = self._check_free(entry)
                staying.append(self._policies.guard(entry, staying, replaces))
            for entry in entries:
                if entry.name in self._entries:  # a redefinition
                    self._policies.forget(entry.name)
                self._add(entry)
        return entries

    def view(self, entries: Iterable[ToolEntry]) -> ToolRegistry:
        """A registry with this one's settings that holds ``entries`` as they are.

        The entries are shared, not copied: calls through the view count in their
        stats. So is the permission checker: the view checks calls with whatever checker
        this registry has at the time (until one is set on the view itself). Tool
        selection offers a run a view of the chosen tools.

        Example:
            >>> tool_registry_example = ToolRegistry()
            >>> @tool_registry_example.tool
            ... def ping() -> str:
            ...     '''Answer pong.'''
            ...     return "pong"
            >>> view = tool_registry_example.view(tool_registry_example.entries())
            >>> view.list_tools(), view.entry("ping") is tool_registry_example.entry("ping")
            (['ping'], True)
        """
        chosen = _each(
            entries, ToolEntry, "view()", "ToolEntry objects (registry.entries())", "use [entry]"
        )
        view = ToolRegistry(strict=self._strict, schema_transforms=self._schema_transforms)
        # Read live, not copied: a checker set here mid-run must hold for a run's calls,
        # which go through a view of the tools it offers.
        view.tool_table.source = self._table
        for entry in chosen:
            view._add(entry)  # with its guard as it is: policies hold across views
        return view

    def set_policy(
        self,
        policy: ToolPolicy,
        *,
        tag: str | None = None,
        category: str | None = None,
        names: Iterable[str] | None = None,
    ) -> list[ToolEntry]:
        """Apply ``policy`` to a group of tools: those with ``tag``, of ``category`` (an
        MCP server's tools are of category ``"mcp:<server name>"``) or named in
        ``names``; with several, those matching all. Tools registered later that match
        get it too. Every part the policy sets overrides the tool's own; the others
        stay. Set again for the same group (the same ``tag``, ``category`` and
        ``names``), the policy replaces the group's earlier one, whose parts no longer
        apply; ``ToolPolicy()`` lifts it. Where several groups' policies set one part
        of a tool's, the one set last wins. Returns the entries it applies to now.

        Example:
            >>> from agcore_tools import ToolPolicy
            >>> registry = ToolRegistry()
            >>> @registry.tool(tags=["db"])
            ... def insert_order(item: str) -> int:
            ...     '''Insert an order.'''
            ...     return 1
            >>> db = ToolPolicy(concurrency=1, resource="orders-db")
            >>> [e.name for e in registry.set_policy(db, tag="db")]
            ['insert_order']
            >>> registry.entry("insert_order").policy.resource
            'orders-db'
            >>> _ = registry.set_policy(ToolPolicy(concurrency=2), tag="db")  # replaces it
            >>> registry.entry("insert_order").policy
            ToolPolicy(concurrency=2, resource=None, rate=None, breaker=None, cache=None)
        """
        book = self._policies
        with _REGISTERING:  # no tool comes or goes while the rule is planned
            matches, undo = book.add_rule(policy, tag, category, names)
            applied = [entry for entry in self._entries.values() if matches(entry)]
            staying = self._staying({entry.name for entry in applied})
            planned: list[tuple[ToolPolicy | None, Guard | None]] = []
            try:  # all or nothing: a tool the rule cannot apply to leaves every tool as it was
                for entry in applied:
                    planned.append(book.plan(entry, staying))
                    staying.append(planned[-1][1])
            except ToolConfigError:
                undo()  # nor is the refused rule kept for tools registered later
                raise
            for entry, (entry_policy, guard) in zip(applied, planned, strict=True):
                entry.policy, entry.guard = entry_policy, guard
                book.track(entry)
            self._changed()
        return applied

    def unavailable_tools(self) -> list[str]:
        """The tools whose circuit breaker is open now (see
        :class:`~agcore_tools.Breaker`): left out of
        :meth:`~agcore_tools.ToolRegistry.definitions` until their cool-down ends.

        Example:
            >>> ToolRegistry().unavailable_tools()
            []
        """
        return self._policies.open_breakers()

    def unregister(self, name: str) -> BaseTool | None:
        """Remove a tool by name; return it, or None if there was none.

        Example:
            >>> ToolRegistry().unregister("missing") is None
            True
        """
        with _REGISTERING:
            entry = self._entries.pop(name, None)
            if entry is None:
                return None
            self._policies.forget(name)
            self._changed()
        return entry.tool

    # -- discovery -----------------------------------------------------------------

    def get(self, name: str) -> BaseTool | None:
        """The tool of that name, or None."""
        entry = self._entries.get(name)
        return entry.tool if entry is not None else None

    @property
    def tool_table(self) -> ToolTable:
        """The entries by name and the permission checker, as running reads them: a live
        view, for code that runs calls without going through the registry's methods.

        Example:
            >>> registry = ToolRegistry()
            >>> registry.tool_table.entries is registry.tool_table.entries
            True
        """
        return self._table

    def entry(self, name: str) -> ToolEntry | None:
        """The :class:`ToolEntry` of that name, or None."""
        return self._entries.get(name)

    def entries(self) -> list[ToolEntry]:
        """Every entry, in registration order."""
        return list(self._entries.values())

    def list_tools(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[BaseTool]:
        return (entry.tool for entry in list(self._entries.values()))

    def find_by_tag(self, tag: str) -> list[ToolEntry]:
        """Entries carrying ``tag``, in registration order."""
        return [entry for entry in self._entries.values() if tag in entry.tags]

    def find_by_category(self, category: str) -> list[ToolEntry]:
        """Entries of ``category``, in registration order."""
        return [entry for entry in self._entries.values() if entry.category == category]

    def groups(self) -> dict[str | None, list[ToolEntry]]:
        """Entries grouped by category (None for uncategorised), in registration order."""
        grouped: dict[str | None, list[ToolEntry]] = {}
        for entry in self._entries.values():
            grouped.setdefault(entry.category, []).append(entry)
        return grouped


_HOLDING: weakref.WeakSet[ToolRegistry] = weakref.WeakSet()
"""The registries that hold tools, for :func:`checked_in`."""
_HOLDING_LOCK = threading.Lock()  # a WeakSet cannot be iterated while another thread adds


def checked_in(tool: BaseTool) -> ToolRegistry | None:
    """A live registry with a permission checker that holds ``tool`` itself (or a tool
    equal to it: the same method tool looked up again on its instance), or None.

    Passed on its own (a list of tools to the loop), such a tool would run in a fresh
    registry with no checker: the loop refuses that rather than skip its checks.

    Example:
        >>> from agcore_tools import PermissionChecker
        >>> from agcore_tools.testing import StaticTool
        >>> guarded, lone = StaticTool("guarded"), StaticTool("lone")
        >>> registry = ToolRegistry(PermissionChecker())
        >>> _ = registry.register(guarded)
        >>> checked_in(guarded) is registry, checked_in(lone)
        (True, None)
    """
    with _HOLDING_LOCK:
        holding = list(_HOLDING)
    for registry in holding:
        entry = registry._entries.get(tool.name)
        if entry is not None and entry.tool == tool and registry.permission_checker is not None:
            return registry
    return None
