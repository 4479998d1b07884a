"""The tool registry: registration, discovery, permission checks and execution.

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

import contextlib
import contextvars
import logging
import threading
import weakref
from collections.abc import (
    AsyncGenerator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

from typing_extensions import ParamSpec, Unpack, deprecated

from ._deprecated import renamed
from ._execute import as_completed, check_context, execute, listed_calls
from ._function_tool import (
    FunctionTool,
    ToolDecorator,
    ToolOptions,
    check_timeout,
    register_function,
)
from ._guard import Guard
from ._keywords import checks_keywords
from ._offer import copied_definitions, offered_definition, offered_entries
from ._policy_book import PolicyBook
from ._records import ToolCall, ToolEntry, ToolInvocation, ToolStats, permission_edit
from ._registry_sync import RegistrySync
from ._table import ToolTable
from ._tool_options import check_option_names
from .approval import ApprovalDecision, ToolCallOutputs
from .base import BaseTool, ToolContext, definition_name
from .error import (
    ToolConfigError,
)
from .permission import PermissionChecker, PermissionConfig
from .policies import ToolPolicy
from .schema import SchemaTransform

if TYPE_CHECKING:
    # Types only: `import agcore_tools` loads no openai (tests/test_package.py).
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

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


class ToolRegistry(RegistrySync):
    """Holds tools by name and runs them with permission checks, timeouts and stats.

    Registration order is kept everywhere (``list_tools``, ``definitions``), so the
    tool list sent to a model is byte-stable across requests, which keeps provider
    prompt caches warm. With ``strict=True``, tools that do not say otherwise are
    offered in OpenAI's strict mode (see :meth:`definitions`). ``schema_transforms``
    rewrite what the model reads of each tool's parameters, never what the tool
    accepts (see :func:`~agcore_tools.portable_schema`).

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
        self._table = ToolTable(_permission_checker(permission_checker))
        self._entries = self._table.entries  # the same dict: the table is what runs
        if not isinstance(strict, bool):
            raise ToolConfigError(f"ToolRegistry(strict=...) takes True or False, got {strict!r}")
        self._strict = strict
        self._schema_transforms = _transforms(schema_transforms)
        # Each api's definitions, with the revision and checker they were built for.
        self._definitions: dict[str, tuple[int, PermissionChecker | None, list[Any]]] = {}
        self._revision = 0
        self._edit_seen = permission_edit()
        self._hidden_logged: set[frozenset[str]] = set()
        self._policies = PolicyBook()

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
    def revision(self) -> int:
        """A number that changes whenever this registry's tools, their policies or its
        permission checker change, or a tool's ``required_permissions`` is given another
        value: whoever keeps something built from the registry (a run's tool list)
        compares it to know when to build it again.

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> before = registry.revision
            >>> _ = registry.register(StaticTool("example"))
            >>> registry.revision == before
            False
        """
        self._reread_permissions()
        return self._revision

    def _reread_permissions(self) -> None:
        # A tool's permissions changed after registration (a config step, a notebook
        # cell): the checks before each call read them live (ToolEntry.
        # declared_permissions); what was built from the old ones is built again.
        for entry in list(self._entries.values()):  # a copy: others may add meanwhile
            entry.reread_permissions()
        edit = permission_edit()
        if edit != self._edit_seen:
            self._edit_seen = edit
            self._changed()

    def _changed(self) -> None:
        self._definitions.clear()
        self._revision += 1

    @property
    def strict(self) -> bool:
        """Whether tools that do not say otherwise (``strict=None``) are offered in
        OpenAI's strict mode; see :meth:`definitions`."""
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
        view._table.source = self._table
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
        stay. Returns the entries it applies to now.

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
        """
        book = self._policies
        with _REGISTERING:  # no tool comes or goes while the rule is planned
            matches = book.add_rule(policy, tag, category, names)
            applied = [entry for entry in self._entries.values() if matches(entry)]
            staying = self._staying({entry.name for entry in applied})
            planned: list[tuple[ToolPolicy | None, Guard | None]] = []
            try:  # all or nothing: a tool the rule cannot apply to leaves every tool as it was
                for entry in applied:
                    planned.append(book.plan(entry, staying))
                    staying.append(planned[-1][1])
            except ToolConfigError:
                book.rules.pop()  # nor is the refused rule kept for tools registered later
                raise
            for entry, (entry_policy, guard) in zip(applied, planned, strict=True):
                entry.policy, entry.guard = entry_policy, guard
                book.track(entry)
            self._changed()
        return applied

    def unavailable_tools(self) -> list[str]:
        """The tools whose circuit breaker is open now (see
        :class:`~agcore_tools.Breaker`): left out of :meth:`definitions` until their
        cool-down ends.

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

    @overload
    def definitions(
        self, api: Literal["chat"] = "chat", *, unavailable: bool = False
    ) -> list[ChatCompletionToolParam]: ...

    @overload
    def definitions(
        self, api: Literal["responses"], *, unavailable: bool = False
    ) -> list[FunctionToolParam]: ...

    @overload
    def definitions(
        self, api: Literal["chat", "responses"], *, unavailable: bool = False
    ) -> list[Any]: ...

    def definitions(
        self, api: Literal["chat", "responses"] = "chat", *, unavailable: bool = False
    ) -> list[Any]:
        """Tool params for a model request, in registration order.

        ``api="chat"`` (default) gives Chat Completions params
        (``{"type": "function", "function": {...}}``); ``api="responses"`` gives the
        flat Responses API function tools; type checkers see the OpenAI SDK's
        ``ChatCompletionToolParam`` and ``FunctionToolParam``, which the ``tools=`` of
        ``create()`` takes (their keys are optional or nullable to a type checker: to
        inspect a schema, read :meth:`ToolEntry.strict_parameters`, ``entry.tool.parameters``
        or a tool's ``definition()``, plain dicts). Tools the registry's permission checker
        refuses are left out: offering the model a tool it may not run only wastes
        tokens and ends the loop when the model calls it (:meth:`list_tools` still
        lists every tool). They are logged, once per set of tools, with the rule.
        So are tools whose circuit breaker is open (see :meth:`unavailable_tools`),
        unless ``unavailable=True``: tool selection keeps them in a run's tools and
        leaves them out of each request while their breaker is open.
        The registry's ``schema_transforms`` run on each tool's parameters first.

        A tool whose :attr:`ToolEntry.strict` is set is offered in OpenAI's strict mode
        (``"strict": true``): every object closed, every property required, optional
        ones nullable (a ``null`` then means "use the default"), and only the keywords
        strict mode accepts. A schema it cannot describe (``typing.Any``, a
        ``dict[str, ...]``) is offered non-strict, with a logged warning naming the tool.

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry(strict=True)
            >>> _ = registry.register(StaticTool("example"))
            >>> registry.definitions()[0]["function"]["name"]
            'example'
            >>> flat = registry.definitions(api="responses")[0]
            >>> flat["name"], flat["strict"]
            ('example', True)
            >>> registry.entries()[0].strict_parameters()  # the parameters offered
            {'type': 'object', 'properties': {}, 'additionalProperties': False, 'required': []}
        """
        # A copy: a caller editing a definition must not change later requests.
        return copied_definitions(self._built(api, unavailable))

    def _built(self, api: Literal["chat", "responses"], unavailable: bool) -> list[dict[str, Any]]:
        """The definitions as kept, shared by every caller: see :func:`shared_definitions`."""
        table = self._table
        # Read before the entries: a tool another thread registers while this builds
        # moves the revision on, so the list built without it is never served after.
        revision = self.revision
        # A view's checker is its registry's, which can change without it knowing.
        checker = table.checker
        kept = self._definitions.get(api)
        if kept is not None and kept[0] == revision and kept[1] is checker:
            cached = kept[2]
        else:
            if api not in ("chat", "responses"):
                raise ToolConfigError(f"unknown api {api!r}: expected 'chat' or 'responses'")
            entries = list(self._entries.values())  # one copy: others may add meanwhile
            offered = offered_entries(entries, checker, self._hidden_logged, table.unchecked)
            transforms = self._schema_transforms
            cached = [offered_definition(e, transforms, api) for e in offered]
            self._definitions[api] = (revision, checker, cached)
        if self._policies.breakers and not unavailable:
            hidden = set(self._policies.open_breakers())
            if hidden:
                cached = [d for d in cached if definition_name(d) not in hidden]
        return cached

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

    # -- execution -----------------------------------------------------------------

    def invoke(
        self, name: str, args: Mapping[str, Any], ctx: ToolContext | None = None
    ) -> Coroutine[Any, Any, ToolInvocation]:
        """Look up, check permissions, then execute one tool.

        A direct call is the app's own: it asks no one, so a tool that needs approval
        (``needs_approval``, or a permission in ``PermissionConfig.ask``) runs at once,
        with a warning logged the first time for each tool. A permission the checker
        denies still refuses the call. Run a model's tool calls with
        :meth:`run_tool_calls` (or :class:`~agcore_tools.LlmCycle`), which ask first.

        Raises :class:`ToolNotFoundError` for an unknown name,
        :class:`PermissionDeniedError` when the permission checker refuses, and
        :class:`~agcore_tools.ToolUnavailableError` when the tool's
        :class:`~agcore_tools.ToolPolicy` turns the call away (an open breaker, a rate
        limit that does not wait): the tool never runs.
        Failures during execution are recorded in the returned invocation, not raised;
        so is the tool's own timeout ending while the call waits for a concurrency slot
        (a :class:`ToolTimeoutError`, with ``may_have_run=False``).
        Cancelling the call cancels its context's token (a child of ``ctx``'s, which
        stays as it was), so a sync tool or generator in its worker thread stops too.
        A ``name`` that is not a tool's name as a non-empty string (the tool object
        itself, None) is a mistake in the caller's code, as is a ``ctx`` that is not a
        :class:`ToolContext`: :class:`~agcore_tools.ToolConfigError`.

        Example:
            >>> import asyncio
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> entry = registry.register(StaticTool("example"))
            >>> asyncio.run(registry.invoke("example", {})).output
            'ok'
            >>> asyncio.run(registry.invoke(entry, {}))
            Traceback (most recent call last):
            ...
            agcore_tools.error.ToolConfigError: invoke() takes a tool name (a str), got ToolEntry: use invoke('example', ...)
        """
        return execute(self._table, name, args, ctx, callers=True, direct="invoke()")

    async def invoke_all(
        self,
        calls: Iterable[ToolCall | tuple[Any, ...]],
        *,
        ctx: ToolContext | None = None,
        timeout: float | None = 60.0,
    ) -> list[ToolInvocation]:
        """Run many calls concurrently; results come back in input order.

        Direct calls, as for :meth:`invoke`: they skip approval (logged once per tool),
        not the permission checker; run a model's calls with :meth:`run_tool_calls`.

        Each call has its own ``timeout`` (positive seconds, None for none; anything
        else is a :class:`~agcore_tools.ToolConfigError`), after which it is
        cancelled and its invocation holds a :class:`ToolTimeoutError`. The timeout
        works by cancelling the call's task: an async tool that swallows the
        cancellation keeps the batch waiting until it returns (with no bound), and
        its result then counts as a success. Nothing is raised for a call:
        not-found and permission errors are recorded in the invocations too (a call
        with an empty name gets a :class:`~agcore_tools.ToolNotFoundError`, one whose
        name is no str, such as the tool object, a
        :class:`~agcore_tools.ToolConfigError` naming the fix, and does not run).
        Only ``calls`` that is no list of calls, or holds an item that is no call,
        raises (a :class:`~agcore_tools.ToolConfigError`), as do a bad ``timeout``
        or ``ctx``. Cancelling the caller cancels every call still running.

        Example:
            >>> import asyncio
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> _ = registry.register(StaticTool("example"))
            >>> results = asyncio.run(registry.invoke_all([("example", {}), ("nope", {})]))
            >>> [r.ok for r in results]
            [True, False]
        """
        check_timeout(timeout, "invoke_all() timeout")
        check_context(ctx, "invoke_all()")
        normalised = listed_calls(calls, "invoke_all()")
        results: list[ToolInvocation | None] = [None] * len(normalised)
        async with contextlib.aclosing(
            as_completed(self._table, normalised, ctx, timeout, caller="invoke_all()")
        ) as finished:
            async for position, invocation in finished:
                results[position] = invocation
        return results  # type: ignore[return-value]  # every position is filled

    def invoke_as_completed(
        self,
        calls: Iterable[ToolCall | tuple[Any, ...]],
        *,
        ctx: ToolContext | None = None,
        timeout: float | None = 60.0,
    ) -> AsyncGenerator[tuple[int, ToolInvocation], None]:
        """Like :meth:`invoke_all`, but yield ``(position, invocation)`` as each call ends.
        Direct calls, as for :meth:`invoke`: they skip approval, not the permission checker.

        For callers that report progress per call (the streaming loop does). Closing
        the iterator early (use ``contextlib.aclosing``), or cancelling its consumer,
        cancels the calls still running and their contexts' cancellation tokens.

        Example:
            >>> import asyncio
            >>> from agcore_tools.testing import StaticTool
            >>> async def main() -> list[int]:
            ...     registry = ToolRegistry()
            ...     _ = registry.register(StaticTool("example"))
            ...     calls = [("example", {}), ("example", {})]
            ...     return sorted([i async for i, _ in registry.invoke_as_completed(calls)])
            >>> asyncio.run(main())
            [0, 1]
        """
        check_timeout(timeout, "invoke_as_completed() timeout")
        check_context(ctx, "invoke_as_completed()")
        listed = listed_calls(calls, "invoke_as_completed()")
        return as_completed(self._table, listed, ctx, timeout, caller="invoke_as_completed()")

    @checks_keywords
    async def run_tool_calls(
        self,
        tool_calls: Iterable[Any] | None,
        *,
        ctx: ToolContext | None = None,
        timeout: float | None = 60.0,
        max_result_bytes: int | None = 16384,
        max_attachment_bytes: int | None = 5 * 1024 * 1024,
        repair_arguments: bool = False,
        approvals: Iterable[ApprovalDecision] | None = None,
        approval_key: bytes | None = None,
    ) -> ToolCallOutputs:
        """Run a model's tool calls and return the messages that answer them.

        A drop-in for apps that drive the OpenAI SDK themselves. It takes either:

        - Chat Completions ``message.tool_calls`` (SDK objects or dicts), and returns
          ``{"role": "tool", "tool_call_id", "content"}`` messages to append, followed
          by one user message carrying the images, audio and files the tools returned,
          if any (tool messages carry text only);
        - Responses API ``function_call`` items (``response.output`` is fine: other
          items are skipped), and returns ``function_call_output`` items, whose
          ``output`` is a list of ``input_text``, ``input_image`` and ``input_file``
          parts when a tool returned an image or a file.

        Calls run concurrently, each with ``timeout`` seconds, and the outputs come
        back in the calls' order. Every failure (unknown tool, denied permission,
        arguments that are not a JSON object, exceptions, a Chat Completions call that
        is not a function call, such as a custom tool's) becomes error text for the
        model, as in :class:`~agcore_tools.LlmCycle`; result text past
        ``max_result_bytes`` UTF-8 bytes keeps its head and tail, and an image, sound
        or file over ``max_attachment_bytes`` is left out, with the reason in the text
        (see :mod:`agcore_tools.content`). Both limits are integers (at least 64 and 1,
        as in :class:`~agcore_tools.cycle.Limits`) or None for no limit; another value raises
        :class:`~agcore_tools.ToolConfigError`. With ``repair_arguments``, arguments that are
        not valid JSON get one deterministic repair first, as ``CycleConfig`` describes.

        A call that needs approval (see :mod:`agcore_tools.approval`) does not run and
        gets no message: its :class:`~agcore_tools.ApprovalRequest` is in the result's
        ``pending_approvals`` (a ``needs_approval`` function that runs past ``timeout``
        asks too). Ask the user, then pass the waiting calls again with
        ``approvals=[request.approve(), ...]``: given ``approvals`` (even ``[]``), only
        the answered calls run and get a message, and every other call that needs
        approval is listed again, so pass only the calls still waiting (those of the
        last ``pending_approvals``), never one answered in an earlier round. Leave
        ``approvals`` out on a turn's first call. With ``approval_key`` (non-empty
        bytes, as for ``CycleConfig``), requests are signed and answers must carry the
        signature. On Chat Completions, put the
        tool messages that come back then ahead of the first outputs' attachments
        message, if there was one: a turn's tool messages must follow its calls.

        Example:
            >>> import asyncio
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> _ = registry.register(StaticTool("example"))
            >>> calls = [{"id": "call_1", "type": "function",
            ...           "function": {"name": "example", "arguments": "{}"}}]
            >>> asyncio.run(registry.run_tool_calls(calls))
            [{'role': 'tool', 'tool_call_id': 'call_1', 'content': 'ok'}]
        """
        # Loaded on first use: it brings json and hmac, which `import agcore_tools` skips.
        from .calls import run_tool_calls

        return await run_tool_calls(
            self._table,
            tool_calls,
            ctx=ctx,
            timeout=timeout,
            max_result_bytes=max_result_bytes,
            max_attachment_bytes=max_attachment_bytes,
            repair_arguments=repair_arguments,
            approvals=approvals,
            approval_key=approval_key,
        )


def shared_definitions(
    registry: ToolRegistry,
    api: Literal["chat", "responses"] = "chat",
    *,
    unavailable: bool = False,
) -> list[dict[str, Any]]:
    """:meth:`ToolRegistry.definitions` as the registry keeps them, not copied: the same
    objects for every caller until the registry changes. For the library's runs, which
    share them (see :mod:`agcore_tools._snapshot`): read them, copy what a request sends,
    and never hand them to an app, whose edit would reach every later request.

    Copying 10,000 definitions per run made hundreds of thousands of objects, enough to
    set off a full garbage collection, which froze every thread for over a second.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> registry = ToolRegistry()
        >>> _ = registry.register(StaticTool("example"))
        >>> shared_definitions(registry) == registry.definitions()
        True
        >>> shared_definitions(registry)[0] is shared_definitions(registry)[0]
        True
    """
    return registry._built(api, unavailable)


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
        if entry is not None and entry.tool == tool and registry._table.checker is not None:
            return registry
    return None
