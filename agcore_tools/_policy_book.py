"""A registry's policies: the rules it sets for groups of tools, the concurrency caps
its tools' resources share, its in-process rate and cache stores, and which of its
tools have a breaker (the only ones ``definitions()`` must look at).

It gives each entry its :class:`~agcore_tools._guard.Guard`, and the guard rides on
the entry, so every view of the registry (a run's offered tools) shares it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ._guard import Guard, Slots
from ._records import ToolEntry
from .error import ToolConfigError
from .policies import MemoryCacheStore, MemoryRateStore, ToolPolicy

__all__ = ["PolicyBook"]

Matches = Callable[[ToolEntry], bool]


class PolicyBook:
    """See the module docstring.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> book = PolicyBook()
        >>> matches = book.add_rule(ToolPolicy(concurrency=2), "slow", None, None)
        >>> entry = ToolEntry(StaticTool("example"), tags=("slow",))
        >>> matches(entry), book.guard(entry).slots.limit
        (True, 2)
    """

    __slots__ = ("breakers", "cache_store", "rate_store", "rules", "slots")

    def __init__(self) -> None:
        self.rules: list[tuple[Matches, ToolPolicy]] = []
        self.slots: dict[str, Slots] = {}
        # Made when a policy first needs one: they hold a lock, which a Temporal
        # workflow's sandbox (where the loop builds a registry of stand-ins) refuses.
        self.rate_store: MemoryRateStore | None = None
        self.cache_store: MemoryCacheStore | None = None
        self.breakers: dict[str, Guard] = {}
        """The guards with a breaker, by tool name."""

    def add_rule(
        self,
        policy: ToolPolicy,
        tag: str | None,
        category: str | None,
        names: Iterable[str] | None,
    ) -> Matches:
        """Keep a group rule; return the test of which entries it applies to."""
        if not isinstance(policy, ToolPolicy):
            raise ToolConfigError(f"set_policy() takes a ToolPolicy, got {type(policy).__name__}")
        if isinstance(names, str):
            raise ToolConfigError(f"set_policy(names=...) takes tool names, got {names!r}")
        chosen = None if names is None else frozenset(names)
        if tag is None and category is None and chosen is None:
            raise ToolConfigError("set_policy() needs a group: tag=, category= or names=")

        def matches(entry: ToolEntry) -> bool:
            return (
                (tag is None or tag in entry.tags)
                and (category is None or entry.category == category)
                and (chosen is None or entry.name in chosen)
            )

        self.rules.append((matches, policy))
        return matches

    def guard(self, entry: ToolEntry, others: Iterable[Guard | None] = ()) -> Guard | None:
        """Work out ``entry``'s policy (its tool's own, then the matching rules in
        order) and give it the guard that enforces it; None for no policy. ``others``
        are the guards of the other tools that stay (see :meth:`plan`)."""
        entry.policy, entry.guard = self.plan(entry, others)
        return entry.guard

    def plan(
        self, entry: ToolEntry, others: Iterable[Guard | None] = ()
    ) -> tuple[ToolPolicy | None, Guard | None]:
        """What :meth:`guard` would give ``entry``, without giving it: a refusal
        (:class:`ToolConfigError`) leaves the entry as it was. A breaker whose settings
        stay keeps its state (a group rule changing another part does not close it).

        ``others`` are the guards of the other tools that stay (not ``entry``'s own,
        which this replaces): a resource's cap must match theirs, and a resource none of
        them names takes the cap ``entry`` gives it."""
        tool = entry.tool
        policy: ToolPolicy | None = getattr(tool, "policy", None)
        for matches, rule in self.rules:
            if matches(entry):
                policy = rule if policy is None else policy.merged(rule)
        if policy is None or policy.empty:
            return None, None
        name = entry.name
        if policy.cache is not None and tool.needs_approval is not False:
            raise ToolConfigError(
                f"tool '{name}' needs approval, so its results cannot come from a cache: "
                "drop its ResultCache",
                tool_name=name,
            )
        slots = None
        if policy.concurrency is not None:
            key = f"resource:{policy.resource}" if policy.resource else f"tool:{name}"
            sharing = None
            if policy.resource:
                sharing = next(
                    (
                        other
                        for other in others
                        if other is not None
                        and other.slots is not None
                        and other.policy.resource == policy.resource
                    ),
                    None,
                )
            if sharing is not None:
                slots = sharing.slots
                assert slots is not None
                if slots.limit != policy.concurrency:
                    raise ToolConfigError(
                        f"tool '{name}' caps resource {policy.resource!r} at "
                        f"{policy.concurrency} call(s) at once, and tool '{sharing.name}' at "
                        f"{slots.limit}; give every tool of a resource the same concurrency",
                        tool_name=name,
                    )
            else:
                # No tool that stays holds it: the cap is this one's to set. The same cap
                # keeps its counter, which the calls of a replaced definition still hold.
                slots = self.slots.get(key)
                if slots is None or slots.limit != policy.concurrency:
                    slots = self.slots[key] = Slots(policy.concurrency)
        if policy.rate is not None and self.rate_store is None:
            self.rate_store = MemoryRateStore()
        if policy.cache is not None and self.cache_store is None:
            self.cache_store = MemoryCacheStore()
        guard = Guard(
            name,
            entry.version,
            policy,
            slots,
            rate_store=self.rate_store,
            cache_store=self.cache_store,
        )
        old = entry.guard
        if old is not None and old.breaker is not None and old.policy.breaker == policy.breaker:
            guard.breaker = old.breaker
        return policy, guard

    def track(self, entry: ToolEntry) -> None:
        """Note whether ``entry`` (just added) has a breaker."""
        guard = entry.guard
        if guard is not None and guard.breaker is not None:
            self.breakers[entry.name] = guard
        else:
            self.breakers.pop(entry.name, None)

    def forget(self, name: str) -> None:
        """The tool ``name`` was removed."""
        self.breakers.pop(name, None)

    def open_breakers(self) -> list[str]:
        """The tools whose breaker is open now, in registration order."""
        return [name for name, guard in self.breakers.items() if guard.hidden()]
