"""A registry's policies: the rules it sets for groups of tools, the concurrency caps
its tools' resources share, its in-process rate store, and which of its tools have a
breaker (the only ones ``definitions()`` must look at).

It gives each entry its :class:`~agcore_tools._guard.Guard`, and the guard rides on
the entry, so every view of the registry (a run's offered tools) shares it.

The state of a tool's *own* policy (``@tool(policy=...)``, ``BaseTool.policy``) lives
with the tool object instead (:func:`own_state`), a method tool's with the tool in the
class and its instance: every registry that holds the tool shares its cap, its rate
bucket, its breaker and its cached results, as a tool passed on its own to each run
(``submit_with_tools(prompt, [tool])``, a fresh registry every time) must. What a
registry's group rule sets stays the registry's.

Cached results kept in this process all go to one store, :func:`default_cache_store`,
bounded as a whole: a store per tool (and per registry) let an app of 50 cached tools
hold 50 times the bound. Each tool's own policy and each registry has a scope of its
own, a prefix of its keys, so two tools of one name (in two registries, or a tool and
the one that replaced it) never answer from each other's results.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import fields

from ._breaker import BreakerMachine
from ._function_tool import FunctionTool
from ._guard import Guard, cache_prefix
from ._records import ToolEntry
from ._slots import Slots
from .base import BaseTool
from .error import ToolConfigError
from .policies import MemoryCacheStore, MemoryRateStore, RateStore, ToolPolicy

__all__ = ["OwnState", "PolicyBook", "default_cache_store", "own_state"]

Matches = Callable[[ToolEntry], bool]
Group = tuple[str | None, str | None, frozenset[str] | None]
"""A group rule's tag, category and names."""


class OwnState:
    """The state of one tool's own policy, shared by every registry that holds the tool;
    each part is made when a registry first needs it (see :func:`own_state`).

    Example:
        >>> state = OwnState()
        >>> state.rate_store is None, state.take_rate_store() is state.take_rate_store()
        (True, True)
    """

    __slots__ = ("breaker", "cache_scope", "rate_store", "slots")

    def __init__(self) -> None:
        self.slots: dict[str, Slots] = {}
        """The concurrency caps, by bucket name (the tool's, or its resource's)."""
        self.rate_store: RateStore | None = None
        """The store of the tool's rate bucket (its resource's, when it names one)."""
        self.cache_scope: str | None = None
        """The prefix of the tool's keys in :func:`default_cache_store`."""
        self.breaker: BreakerMachine | None = None
        """The tool's circuit breaker."""

    def take_slots(self, key: str, limit: int, given: Slots | None) -> Slots:
        """The cap ``key`` at ``limit``: ``given`` (a resource's, held by another tool of
        the registry), else the one kept if its limit is the same, else a new one."""
        with _OWN_LOCK:
            slots = given if given is not None else self.slots.get(key)
            if slots is None or slots.limit != limit:
                slots = Slots(limit)
            self.slots[key] = slots
            return slots

    def take_rate_store(self, given: RateStore | None = None) -> RateStore:
        """The rate bucket's store: ``given`` (a resource's), else the one kept, else a
        new one."""
        with _OWN_LOCK:
            store = given if given is not None else self.rate_store
            if store is None:
                store = MemoryRateStore()
            self.rate_store = store
            return store

    def take_cache_scope(self) -> str:
        """The prefix of the tool's keys in :func:`default_cache_store`, made on first
        need."""
        with _OWN_LOCK:
            if self.cache_scope is None:
                self.cache_scope = _new_scope("tool")
            return self.cache_scope

    def take_breaker(self, made: BreakerMachine) -> BreakerMachine:
        """The breaker kept, if its settings are ``made``'s, else ``made`` from now on."""
        with _OWN_LOCK:
            kept = self.breaker
            if kept is not None and kept.config == made.config:
                return kept
            self.breaker = made
            return made


_OWN_LOCK = threading.Lock()  # two registries' first plans of one tool make one state
_SCOPES = itertools.count(1)
_DEFAULT_CACHE: list[MemoryCacheStore] = []
_OWN: weakref.WeakKeyDictionary[BaseTool, OwnState] = weakref.WeakKeyDictionary()
_OWN_BY_ID: dict[int, OwnState] = {}
"""The states of tools that cannot be hashed (a dataclass tool), by identity."""
_BOUND: weakref.WeakKeyDictionary[BaseTool, dict[int, OwnState]] = weakref.WeakKeyDictionary()
"""The states of method tools, by the tool in the class, then by the identity of the
instance (or class) each was looked up on: every lookup is a new bound copy, which a
run given ``[notes.add]`` drops when it ends, so the state cannot live with the copy.
Dropped with the instance, as a bound method's own state would be."""


def own_state(tool: BaseTool, replaces: BaseTool | None = None) -> OwnState:
    """The state of ``tool``'s own policy, made on first need and dropped with the tool.

    A tool equal to another (the same method tool looked up again on its instance) has
    its state. A tool that ``replaces`` another (a notebook cell run again) takes over
    its concurrency caps, whose slots the old definition's calls may still hold, and
    its rate bucket, which counts calls to the same service; not its breaker nor its
    cached results, which are the old code's.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> tool = StaticTool("example")
        >>> own_state(tool) is own_state(tool), own_state(tool) is own_state(StaticTool("x"))
        (True, False)
    """
    with _OWN_LOCK:
        state = _kept(tool)
        if state is not None:
            return state
        state = OwnState()
        old = _kept(replaces) if replaces is not None else None
        if old is not None:
            state.slots, state.rate_store = dict(old.slots), old.rate_store
            if old.cache_scope is not None and _DEFAULT_CACHE:
                _DEFAULT_CACHE[0].forget(old.cache_scope)  # the old code's: never read again
        method = _method(tool)
        if method is not None:
            unbound, receiver = method
            states = _BOUND.setdefault(unbound, {})
            states[id(receiver)] = state
            weakref.finalize(receiver, states.pop, id(receiver), None)
            return state
        try:
            _OWN[tool] = state
        except TypeError:  # unhashable: kept by identity, dropped when the tool is
            key = id(tool)
            _OWN_BY_ID[key] = state
            weakref.finalize(tool, _OWN_BY_ID.pop, key, None)
        return state


def default_cache_store() -> MemoryCacheStore:
    """The in-process store of every :class:`~agcore_tools.ResultCache` that names no
    store of its own, made on first need: one for the process, so its bounds (1,024
    results, 64 MiB of their text) hold for all of its tools together.

    Example:
        >>> default_cache_store() is default_cache_store()
        True
    """
    with _OWN_LOCK:
        if not _DEFAULT_CACHE:
            # Made when a cache first needs it, never at import: it holds a lock, which
            # a Temporal workflow's sandbox refuses.
            _DEFAULT_CACHE.append(MemoryCacheStore())
        return _DEFAULT_CACHE[0]


def _new_scope(kind: str) -> str:
    """A prefix of keys in :func:`default_cache_store` no other tool or registry of the
    process has; called under ``_OWN_LOCK``."""
    return f"{kind}:{next(_SCOPES)}:"


def _kept(tool: BaseTool) -> OwnState | None:
    method = _method(tool)
    if method is not None:
        states = _BOUND.get(method[0])
        return states.get(id(method[1])) if states is not None else None
    try:
        return _OWN.get(tool)
    except TypeError:
        return _OWN_BY_ID.get(id(tool))


def _method(tool: BaseTool) -> tuple[BaseTool, object] | None:
    """A method tool's tool in the class and its receiver; None for any other tool, or
    one whose receiver cannot be weakly referenced (its state lives with the copy)."""
    if not isinstance(tool, FunctionTool) or tool.bound_from is None:
        return None
    unbound, receiver = tool.bound_from, getattr(tool.func, "__self__", None)
    if receiver is None:
        return None
    try:
        weakref.ref(receiver)
    except TypeError:
        return None
    return unbound, receiver


class PolicyBook:
    """See the module docstring.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> book = PolicyBook()
        >>> matches, _ = book.add_rule(ToolPolicy(concurrency=2), "slow", None, None)
        >>> entry = ToolEntry(StaticTool("example"), tags=("slow",))
        >>> matches(entry), book.guard(entry).slots.limit
        (True, 2)
        >>> _ = book.add_rule(ToolPolicy(concurrency=3), "slow", None, None)  # replaces it
        >>> len(book.rules), book.guard(entry).slots.limit
        (1, 3)
    """

    __slots__ = ("breakers", "cache_scope", "caches", "rate_store", "rules", "slots")

    def __init__(self) -> None:
        self.rules: dict[Group, tuple[Matches, ToolPolicy]] = {}
        """The group rules by group, the one set last last."""
        # Weak: a cap lives while a guard holds it (a tool, a run's view of one, a
        # call of a replaced definition), and goes with the last one, so the names
        # of tools that came and went (an MCP server's changing list) leave nothing.
        # One no guard holds has no call running nor waiting: a new one is the same.
        self.slots: weakref.WeakValueDictionary[str, Slots] = weakref.WeakValueDictionary()
        # Made when a policy first needs one: they hold a lock, which a Temporal
        # workflow's sandbox (where the loop builds a registry of stand-ins) refuses.
        self.rate_store: MemoryRateStore | None = None
        with _OWN_LOCK:
            self.cache_scope = _new_scope("registry")
        """The prefix of the keys of this registry's group rules' caches in
        :func:`default_cache_store`."""
        self.caches = False
        """Whether a group rule's cache has used :func:`default_cache_store`."""
        self.breakers: dict[str, Guard] = {}
        """The guards with a breaker, by tool name."""

    def add_rule(
        self,
        policy: ToolPolicy,
        tag: str | None,
        category: str | None,
        names: Iterable[str] | None,
    ) -> tuple[Matches, Callable[[], None]]:
        """Keep a group rule, in place of the group's earlier one (none for an empty
        ``policy``): it comes last, so its parts override other groups' rules'. Return
        the test of which entries it applies to, and what puts the rules back as they
        were (for a rule a tool refuses)."""
        if not isinstance(policy, ToolPolicy):
            raise ToolConfigError(f"set_policy() takes a ToolPolicy, got {type(policy).__name__}")
        if isinstance(names, str):
            raise ToolConfigError(f"set_policy(names=...) takes tool names, got {names!r}")
        for label, value in (("tag", tag), ("category", category)):
            if value is not None and not isinstance(value, str):
                # A list would match no tool, and the rule would be kept for nothing.
                raise ToolConfigError(
                    f"set_policy({label}=...) takes one {label} (a string), got "
                    f"{type(value).__name__}"
                )
        chosen = None
        if names is not None:
            listed = list(names) if isinstance(names, Iterable) else [names]
            if not all(isinstance(name, str) for name in listed):
                raise ToolConfigError(f"set_policy(names=...) takes tool names, got {names!r}")
            chosen = frozenset(listed)
        if tag is None and category is None and chosen is None:
            raise ToolConfigError("set_policy() needs a group: tag=, category= or names=")

        def matches(entry: ToolEntry) -> bool:
            return (
                (tag is None or tag in entry.tags)
                and (category is None or entry.category == category)
                and (chosen is None or entry.name in chosen)
            )

        group = (tag, category, chosen)
        before = dict(self.rules)
        self.rules.pop(group, None)
        if not policy.empty:
            self.rules[group] = (matches, policy)

        def undo() -> None:
            self.rules = before

        return matches, undo

    def guard(
        self,
        entry: ToolEntry,
        others: Iterable[Guard | None] = (),
        replaces: BaseTool | None = None,
    ) -> Guard | None:
        """Work out ``entry``'s policy (its tool's own, then the matching rules in
        order) and give it the guard that enforces it; None for no policy. ``others``
        are the guards of the other tools that stay, ``replaces`` the tool ``entry``'s
        redefines, if any (see :meth:`plan`)."""
        entry.policy, entry.guard = self.plan(entry, others, replaces)
        return entry.guard

    def plan(
        self,
        entry: ToolEntry,
        others: Iterable[Guard | None] = (),
        replaces: BaseTool | None = None,
    ) -> tuple[ToolPolicy | None, Guard | None]:
        """What :meth:`guard` would give ``entry``, without giving it: a refusal
        (:class:`ToolConfigError`) leaves the entry as it was. A breaker whose settings
        stay keeps its state (a group rule changing another part does not close it).

        ``others`` are the guards of the other tools that stay (not ``entry``'s own,
        which this replaces): a resource's cap must match theirs, and a resource none of
        them names takes the cap ``entry`` gives it. The parts of the policy that come
        from the tool's own (no rule sets them) keep their state with the tool (see
        :func:`own_state`; ``replaces`` is the tool it redefines); the others, with
        this registry."""
        tool = entry.tool
        own: ToolPolicy | None = getattr(tool, "policy", None)
        policy = own
        ruled: set[str] = set()  # the parts a rule sets: their state is the registry's
        for matches, rule in self.rules.values():
            if matches(entry):
                policy = rule if policy is None else policy.merged(rule)
                ruled.update(f.name for f in fields(rule) if getattr(rule, f.name) is not None)
        if policy is None or policy.empty:
            return None, None
        name = entry.name
        if policy.cache is not None and tool.needs_approval is not False:
            raise ToolConfigError(
                f"tool '{name}' needs approval, so its results cannot come from a cache: "
                "drop its ResultCache",
                tool_name=name,
            )
        state = own_state(tool, replaces) if own is not None and not own.empty else None

        def kept(*parts: str) -> OwnState | None:
            # The tool's state for these parts, when the tool's own policy sets them.
            return None if state is None or ruled.intersection(parts) else state

        staying = [other for other in others if other is not None]
        resource = policy.resource
        slots = None
        if policy.concurrency is not None:
            slots = self._slots(name, policy, staying, kept("concurrency", "resource"))
        rate_store = None
        if policy.rate is not None:
            shared = next(
                (
                    other.rate_store
                    for other in staying
                    if resource
                    and other.policy.resource == resource
                    and other.rate_store is not None
                ),
                None,
            )
            holder = kept("rate", "resource")
            if holder is not None:
                rate_store = holder.take_rate_store(shared)
            elif shared is not None:
                rate_store = shared
            else:
                if self.rate_store is None:
                    self.rate_store = MemoryRateStore()
                rate_store = self.rate_store
        cache_store, cache_scope = None, ""
        if policy.cache is not None and policy.cache.store is None:
            cache_store = default_cache_store()
            holder = kept("cache")
            if holder is not None:
                cache_scope = holder.take_cache_scope()
            else:
                self.caches = True
                cache_scope = self.cache_scope
        guard = Guard(
            name,
            entry.version,
            policy,
            slots,
            rate_store=rate_store,
            cache_store=cache_store,
            cache_scope=cache_scope,
        )
        if guard.breaker is not None:
            holder = kept("breaker")
            old = entry.guard
            if holder is not None:
                guard.breaker = holder.take_breaker(guard.breaker)
            elif old is not None and old.breaker and old.policy.breaker == policy.breaker:
                guard.breaker = old.breaker
        return policy, guard

    def _slots(
        self, name: str, policy: ToolPolicy, others: list[Guard], holder: OwnState | None
    ) -> Slots:
        """The concurrency cap of a tool named ``name`` under ``policy``: its resource's,
        shared with ``others``, or its own (``holder``'s, when the tool's own policy
        sets it, else this registry's)."""
        limit = policy.concurrency
        assert limit is not None
        key = f"resource:{policy.resource}" if policy.resource else f"tool:{name}"
        sharing = None
        if policy.resource:
            sharing = next(
                (
                    other
                    for other in others
                    if other.slots is not None and other.policy.resource == policy.resource
                ),
                None,
            )
        if sharing is not None:
            assert sharing.slots is not None
            if sharing.slots.limit != limit:
                raise ToolConfigError(
                    f"tool '{name}' caps resource {policy.resource!r} at {limit} call(s) at "
                    f"once, and tool '{sharing.name}' at {sharing.slots.limit}; give every "
                    "tool of a resource the same concurrency",
                    tool_name=name,
                )
        given = sharing.slots if sharing is not None else None
        if holder is not None:
            return holder.take_slots(key, limit, given)
        if given is not None:
            return given
        # No tool that stays holds it: the cap is this one's to set. The same cap keeps
        # its counter, which the calls of a replaced definition still hold.
        slots = self.slots.get(key)
        if slots is None or slots.limit != limit:
            slots = self.slots[key] = Slots(limit)
        return slots

    def track(self, entry: ToolEntry) -> None:
        """Note whether ``entry`` (just added) has a breaker."""
        guard = entry.guard
        if guard is not None and guard.breaker is not None:
            self.breakers[entry.name] = guard
        else:
            self.breakers.pop(entry.name, None)

    def forget(self, name: str) -> None:
        """The tool ``name`` was removed, or is replaced by a new definition: its
        breaker is no longer tracked, and the results this registry's store cached for
        it (the old code's) are dropped."""
        self.breakers.pop(name, None)
        if self.caches:
            default_cache_store().forget(self.cache_scope + cache_prefix(name))

    def open_breakers(self) -> list[str]:
        """The tools whose breaker is open now, in registration order."""
        return [name for name, guard in self.breakers.items() if guard.hidden()]
