"""A registry's tools by name and its permission checker (:class:`ToolTable`), and what
refuses or notes a call before it runs: an unknown tool's error, a run's view refusing a
tool its checker refuses, a direct call that skips an approval.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar

from ._records import ToolEntry
from .base import BaseTool
from .error import PermissionDeniedError, ToolNotFoundError, ToolNotOfferedError
from .permission import PermissionChecker

__all__ = [
    "LISTED_TOOLS",
    "OFFERED_LISTED",
    "ToolTable",
    "note_unasked",
    "refusal",
    "unknown_tool_error",
]

logger = logging.getLogger("agcore_tools.registry")

LISTED_TOOLS = 30
"""An unknown tool's error lists the tools offered when there are at most this many."""

OFFERED_LISTED: ContextVar[bool] = ContextVar("agcore_tools_offered_listed", default=True)
"""Whether an unknown tool's error lists only the tools offered, and tells a registered
tool a ``select=`` left out apart (see :func:`unknown_tool_error`). False only in a
Temporal run begun before that (its ``workflow.patched``), whose history the model read
with every registered tool listed: a replay gives it back the same text."""


class ToolTable:
    """A registry's tools by name and its permission checker: all that running reads.

    Example:
        >>> table = ToolTable(None)
        >>> table.entries, table.checker, table.get("nope")
        ({}, None, None)
    """

    __slots__ = (
        "_checker",
        "entries",
        "source",
        "unasked",
        "unchecked",
        "unknown",
        "withheld",
    )

    def __init__(
        self, checker: PermissionChecker | None, *, source: ToolTable | None = None
    ) -> None:
        self.entries: dict[str, ToolEntry] = {}
        """The entries by tool name, in registration order."""
        self._checker = checker
        self.source = source
        """The table whose checker this one reads, live (a registry view's reads its
        registry's: a checker set there mid-run holds for the run's calls too), or None
        for its own."""
        self.unchecked: frozenset[str] = frozenset()
        """The names of the library's own tools in a run's view (``run_python``,
        ``search_tools``, ``load_tools``), which the checker is not asked about: they
        act only through the registry's tools, each of which it checks."""
        self.withheld: Callable[[str], str | None] | None = None
        """For the tools one run offers (a view of its registry): how the model reaches
        a registered tool the run does not offer yet, or None for a name the registry
        lacks."""
        self.unknown: str | None = None
        """What a call to a name that is no tool of the table (nor :attr:`withheld`) is
        told instead of the table's tools: a tool search run's view offers only some of
        the registry's, and the model finds the others by searching."""
        self.unasked: set[str] = set()
        """The tools whose approval a direct call (``invoke()`` and the like) has skipped
        and logged: logged once per tool (see :func:`note_unasked`)."""

    @property
    def checker(self) -> PermissionChecker | None:
        """Consulted before each execution; None for no checks. Setting it gives the
        table its own checker, no longer its :attr:`source`'s.

        Example:
            >>> parent = ToolTable(None)
            >>> view = ToolTable(None, source=parent)
            >>> parent.checker = PermissionChecker()
            >>> view.checker is parent.checker
            True
        """
        return self.source.checker if self.source is not None else self._checker

    @checker.setter
    def checker(self, checker: PermissionChecker | None) -> None:
        self._checker, self.source = checker, None

    def get(self, name: str) -> BaseTool | None:
        """The tool of that name, or None."""
        entry = self.entries.get(name)
        return entry.tool if entry is not None else None

    def check(self, entry: ToolEntry) -> None:
        """Raise :class:`~agcore_tools.PermissionDeniedError` when the checker refuses
        ``entry`` (one of :attr:`unchecked` never is)."""
        checker = self._checker if self.source is None else self.source.checker
        if checker is not None and entry.name not in self.unchecked:
            checker.check(entry.name, entry.declared_permissions())


def refusal(table: ToolTable, name: str) -> PermissionDeniedError | None:
    """For a run's view of its registry (a table with a :attr:`~ToolTable.source`): the
    checker's refusal of ``name``, a tool the registry has and the view leaves out
    because the checker refuses it. A call to it is refused as without tool selection,
    not answered as an unknown tool's. None for any other name.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> registry = ToolTable(PermissionChecker())
        >>> shell = StaticTool("shell")
        >>> shell.required_permissions = ("shell",)
        >>> registry.entries["shell"] = ToolEntry.of(shell)
        >>> str(refusal(ToolTable(None, source=registry), "shell"))
        "permission denied: tool 'shell' needs 'shell', which is denied"
        >>> refusal(registry, "shell") is None  # the registry itself holds it
        True
    """
    source = table.source
    if source is None or name in table.entries:
        return None
    entry = source.entries.get(name)
    if entry is None:
        return None
    try:
        table.check(entry)
    except PermissionDeniedError as exc:
        return exc
    return None


def note_unasked(table: ToolTable, entry: ToolEntry, method: str) -> None:
    """Log, once per tool, that ``method`` (a direct call, the app's own) runs a tool
    that a model's call would have to ask about first: ``needs_approval=True``, or a
    permission in ``PermissionConfig.ask``. A ``needs_approval`` function is not run
    for this: it decides per call, and may be slow or have effects.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> gated = StaticTool("pay")
        >>> gated.needs_approval = True
        >>> table = ToolTable(None)
        >>> note_unasked(table, ToolEntry(gated), "invoke()")  # logs a warning
        >>> table.unasked  # and is not logged again for this tool
        {'pay'}
    """
    tool = entry.tool
    checker = table._checker if table.source is None else table.source.checker
    if checker is None and tool.needs_approval is not True:
        # Most direct calls: the cheapest tests first, on the path of every invoke().
        return
    name = tool.name
    if name in table.unasked:
        return
    if tool.needs_approval is True:
        why = "needs_approval=True"
    else:
        asked = checker.asking(entry.declared_permissions()) if checker is not None else None
        if asked is None:
            return
        why = f"permission '{asked}' is in PermissionConfig.ask"
    table.unasked.add(name)
    logger.warning(
        "%s runs tool %r without asking for approval (%s): a direct call is the app's own; "
        "run a model's calls with run_tool_calls() or LlmCycle, which ask first "
        "(logged once per tool)",
        method,
        name,
        why,
    )


def unknown_tool_error(table: ToolTable, name: str) -> ToolNotFoundError:
    """The error for a call to a tool the table does not have: the tools it offers (those
    its permission checker allows, as :meth:`ToolRegistry.definitions` offers them), or,
    when there are more than :data:`LISTED_TOOLS`, how many and the closest names (the
    model reads this; a thousand names would cost it thousands of tokens). A tool the
    checker refuses is never named: the model would call it, and its refusal stop the
    loop.

    A tool the registry has and the run does not offer (see :attr:`ToolTable.withheld`)
    is a :class:`ToolNotOfferedError` saying how to reach it; any other name, in a run
    whose table says how to find tools (:attr:`ToolTable.unknown`), is told that. One
    a run's ``select=`` left out is not available in this conversation (its
    ``registered`` is True); a refused one reads as any unknown name.

    Example:
        >>> str(unknown_tool_error(ToolTable(None), "nope"))
        "tool 'nope' is not registered: the tools offered are: none"
    """
    if table.withheld is not None:
        how = table.withheld(name)
        if how is not None:
            return ToolNotOfferedError(name, how)
    if table.unknown is not None and name:
        return ToolNotFoundError(name, table.unknown)
    if not OFFERED_LISTED.get():
        return _every_registered(table, name)
    names = [n for n, entry in list(table.entries.items()) if _allowed(table, entry)]
    source = table.source
    left_out = (
        source is not None
        and name not in table.entries
        and name in source.entries
        and refusal(table, name) is None
    )
    if len(names) <= LISTED_TOOLS:
        listed = f"the tools offered are: {', '.join(names) or 'none'}"
        return ToolNotFoundError(name, listed, registered=left_out)
    return ToolNotFoundError(
        name, f"{len(names)} tools are offered{_closest(name, names)}", registered=left_out
    )


def _allowed(table: ToolTable, entry: ToolEntry) -> bool:
    try:
        table.check(entry)
    except PermissionDeniedError:
        return False
    return True


def _closest(name: str, names: list[str]) -> str:
    import difflib  # on this error only: `import agcore_tools` does not need it

    # A batch's nameless call (None) has no close names.
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5) if name else []
    return f"; the closest names are: {', '.join(close)}" if close else ""


def _every_registered(table: ToolTable, name: str) -> ToolNotFoundError:
    # Before OFFERED_LISTED: every entry, refused ones too, and "not registered" for a
    # tool a select= left out.
    names = list(table.entries)
    if len(names) <= LISTED_TOOLS:
        return ToolNotFoundError(name, f"the registered tools are: {', '.join(names) or 'none'}")
    return ToolNotFoundError(name, f"{len(names)} tools are registered{_closest(name, names)}")
