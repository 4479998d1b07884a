"""The records a tool call leaves: what was asked (:class:`ToolCall`,
:class:`ParsedCall`), what happened (:class:`ToolInvocation`) and what a registry keeps
per tool (:class:`ToolEntry`, :class:`ToolStats`).

They sit below every module that runs calls, so the registry, ``calls/`` and the loop
share them without importing each other.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._display import bounded_repr, html_table, invocation_rows, markdown_table
from ._guard import Guard
from .base import BaseTool
from .error import ToolConfigError, ToolDefinitionError, ToolError
from .permission import Permission
from .policies import ToolPolicy
from .schema import ArgumentPlan, build_plan, strict_parameters

__all__ = [
    "ParsedCall",
    "ToolCall",
    "ToolEntry",
    "ToolInvocation",
    "ToolStats",
    "permission_edit",
]

logger = logging.getLogger("agcore_tools.registry")

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""The names OpenAI-compatible APIs accept for function tools."""


@dataclass(slots=True)
class ToolStats:
    """Call counters of one registered tool, and the tokens it cost in model loops.

    The token counters are added to by every ``LlmCycle.submit*_with_tools`` run that
    offered the tool (see :attr:`ChatResponse.tool_costs
    <agcore_tools.ChatResponse.tool_costs>` for how they are counted); direct
    ``invoke`` calls send nothing to a model and add none.

    Example:
        >>> stats = ToolStats(calls=4, failures=1, total_seconds=0.2)
        >>> round(stats.mean_seconds, 3)
        0.05
        >>> ToolStats(definition_tokens=90, definition_requests=3).definition_tokens
        90
    """

    calls: int = 0
    """Executions started (not counting not-found or permission-denied calls)."""
    failures: int = 0
    """Executions that ended with an error."""
    total_seconds: float = 0.0
    """Wall time spent in executions."""
    definition_tokens: int = 0
    """Tokens of the tool's definition sent to models, once per request that offered it."""
    definition_requests: int = 0
    """Model requests that offered the tool."""
    argument_tokens: int = 0
    """Tokens of the arguments models wrote in calls to the tool."""
    result_tokens: int = 0
    """Tokens of the tool's results sent back to models."""

    @property
    def mean_seconds(self) -> float:
        """Mean wall time per execution, 0.0 before the first one."""
        return self.total_seconds / self.calls if self.calls else 0.0


@dataclass(slots=True)
class ToolEntry:
    """A registered tool with its metadata.

    Example:
        >>> from agcore_tools import ToolRegistry
        >>> from agcore_tools.testing import StaticTool
        >>> entry = ToolRegistry().register(StaticTool("example"), tags=["demo"])
        >>> entry.name, entry.tags
        ('example', ('demo',))
    """

    tool: BaseTool
    """The tool itself."""
    tags: tuple[str, ...] = ()
    """Free-form labels for :meth:`ToolRegistry.find_by_tag`."""
    category: str | None = None
    """One group name for :meth:`ToolRegistry.groups`, such as ``"memory"``."""
    version: str | None = None
    """The tool's version, if it has one."""
    stats: ToolStats = field(default_factory=ToolStats)
    """Call counters, updated by every execution through the registry."""
    permissions: tuple[Permission, ...] = ()
    """The tool's required permissions, parsed at registration, and again when the
    registry finds the tool's ``required_permissions`` given another value (see
    :meth:`declared_permissions`, which the checks before each execution read)."""
    strict: bool = False
    """Whether the tool is offered in OpenAI's strict mode, as the tool's own ``strict``
    or else the registry's asks; a schema strict mode cannot describe is offered
    non-strict instead, with a logged warning saying why."""
    policy: ToolPolicy | None = None
    """The policy the registry applies to the tool's calls: the tool's own, with what
    :meth:`ToolRegistry.set_policy` set for its groups over it; None for none."""
    guard: Guard | None = field(default=None, repr=False, compare=False)
    """The state behind :attr:`policy` (breaker, bucket, running calls, cache), which
    the registry sets and every view shares; None when there is no policy."""
    argument_plan: ArgumentPlan | None = field(default=None, init=False, repr=False, compare=False)
    """For a strict tool that does not read nulls itself (see
    :attr:`BaseTool.reads_null_as_default`): the plan that drops the nulls strict mode
    lets the model send for optional properties. None otherwise."""
    _strict_form: tuple[dict[str, Any] | None, str | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _declared: object = field(default=None, init=False, repr=False, compare=False)
    """The tool's ``required_permissions`` that :attr:`permissions` was parsed from."""
    _declared_items: tuple[object, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The items :attr:`_declared` held then: a list changed in place shows against them."""

    def __post_init__(self) -> None:
        tool = self.tool
        self._note_declared(getattr(tool, "required_permissions", None))
        if self.strict and not tool.reads_null_as_default and isinstance(tool.parameters, Mapping):
            self.argument_plan = build_plan(tool.parameters, check_extras=False)

    @classmethod
    def of(
        cls,
        tool: BaseTool,
        tags: Iterable[str] | None = None,
        category: str | None = None,
        version: str | None = None,
        *,
        default_strict: bool = False,
    ) -> ToolEntry:
        """The entry a registry makes for ``tool``, after checking it can be registered.

        ``tags``, ``category`` and ``version`` default to the tool's own; ``strict`` is
        the tool's own, else ``default_strict`` (the registry's).

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> ToolEntry.of(StaticTool("ping"), category="demo", default_strict=True).strict
            True
            >>> ToolEntry.of(StaticTool("two words"))
            Traceback (most recent call last):
            ...
            agcore_tools.error.ToolConfigError: cannot register tool 'two words': names must match ^[a-zA-Z0-9_-]{1,64}$
        """
        if not isinstance(tool, BaseTool):
            raise ToolDefinitionError(f"cannot register {tool!r}: it is not a BaseTool")
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
            raise ToolConfigError(
                f"cannot register tool {name!r}: names must match {TOOL_NAME_PATTERN.pattern}",
                tool_name=name if isinstance(name, str) else None,
            )
        tool.check_registrable()
        if not _awaits(tool.execute):
            # Awaited, it would run on the event loop's thread, then fail the call with
            # "object ... can't be used in 'await' expression" after its effect.
            raise ToolDefinitionError(
                f"cannot register tool '{name}': its execute() must be `async def` (or use "
                "@tool for a sync function)",
                tool_name=name,
            )
        checked: dict[str, Any] = {}
        for attribute, kinds, expected in _ATTRIBUTES:
            value = checked[attribute] = getattr(tool, attribute, None)
            if not isinstance(value, kinds):
                # Sent to the model as it is, or read at the first call, with no word of why.
                raise ToolDefinitionError(
                    f"cannot register tool '{name}': its {attribute} must be {expected}, "
                    f"got {type(value).__name__}",
                    tool_name=name,
                )
        strict = checked["strict"]
        given = tags if tags is not None else getattr(tool, "tags", ()) or ()
        labels = (given,) if isinstance(given, str) else _strings(given, name, "tags")
        category = category if category is not None else getattr(tool, "category", None)
        version = version if version is not None else getattr(tool, "version", None)
        for label, value in (("category", category), ("version", version)):
            if value is not None and not isinstance(value, str):
                raise ToolConfigError(
                    f"cannot register tool '{name}': its {label} must be a string or None, "
                    f"got {type(value).__name__}",
                    tool_name=name,
                )
        return cls(
            tool=tool,
            tags=labels,  # "math" is one tag
            category=category,
            version=version,
            permissions=Permission.parse_all(tool.required_permissions),
            strict=default_strict if strict is None else strict,
            policy=checked["policy"],
        )

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name

    def declared_permissions(self) -> tuple[Permission, ...]:
        """The permissions the tool declares now: :attr:`permissions`, unless the tool's
        ``required_permissions`` was given another value since (or is a list, which can
        change in place), which is then parsed. The checks before each execution read
        this, as they read ``needs_approval``.

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> entry = ToolEntry.of(StaticTool("purge"))
            >>> entry.tool.required_permissions = ("delete",)
            >>> entry.permissions, entry.declared_permissions()
            ((), (Permission.DELETE,))
        """
        declared = self.tool.required_permissions
        if self._unchanged(declared):
            return self.permissions
        return Permission.parse_all(declared)

    def reread_permissions(self) -> bool:
        """Parse the tool's ``required_permissions`` into :attr:`permissions` again if
        they changed since; True when they did (a registry then builds its definitions
        again).

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> entry = ToolEntry.of(StaticTool("purge"))
            >>> entry.reread_permissions()
            False
            >>> entry.tool.required_permissions = ["delete"]
            >>> entry.reread_permissions(), entry.permissions
            (True, (Permission.DELETE,))
        """
        global _permission_edit
        declared = self.tool.required_permissions
        if self._unchanged(declared):
            return False
        parsed = Permission.parse_all(declared)
        self._note_declared(declared)
        if parsed == self.permissions:
            return False
        self.permissions = parsed
        _permission_edit = next(_EDITS)
        return True

    def _note_declared(self, declared: object) -> None:
        self._declared = declared
        self._declared_items = None
        if isinstance(declared, Iterable) and not isinstance(declared, _UNCHANGING):
            self._declared_items = tuple(declared)

    def _unchanged(self, declared: object) -> bool:
        # A registry reads every entry's permissions at each revision read, several times
        # a request: parsing a list (base.py allows one) each time cost 16 ms at 10,000
        # tools; comparing its items to those it held, a fraction of that.
        if declared is not self._declared:
            return False
        if isinstance(declared, _UNCHANGING):
            return True
        items = self._declared_items
        return items is not None and isinstance(declared, Iterable) and tuple(declared) == items

    def strict_parameters(self) -> dict[str, Any] | None:
        """The parameters to offer in strict mode, or None when the entry is not strict
        or strict mode cannot describe them (logged once, with the reason).

        Worked out once per entry: definitions are built on every request's path.

        Example:
            >>> from agcore_tools.testing import StaticTool
            >>> ToolEntry(StaticTool("example"), strict=True).strict_parameters()
            {'type': 'object', 'properties': {}, 'additionalProperties': False, 'required': []}
        """
        if not self.strict:
            return None
        if self._strict_form is None:
            self._strict_form = strict_parameters(self.tool.parameters)
            if self._strict_form[1] is not None:
                logger.warning(
                    "tool %r is offered without strict mode: %s", self.name, self._strict_form[1]
                )
        return self._strict_form[0]


_UNCHANGING = (tuple, frozenset, str, Permission, type(None))
"""The kinds of ``required_permissions`` that cannot change in place: one of these,
still the same object, was parsed already."""

_EDITS = itertools.count(1)
_permission_edit = 0
"""Moves on (from :data:`_EDITS`) whenever an entry's permissions are read again and
differ: every registry holding that entry (its views too) then builds its definitions
again, whichever of them noticed first."""


def permission_edit() -> int:
    """A number that changes whenever any entry's :attr:`ToolEntry.permissions` change
    after registration (see :meth:`ToolEntry.reread_permissions`)."""
    return _permission_edit


_ATTRIBUTES: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("description", str, "a string"),
    ("parameters", Mapping, "a JSON Schema object (a dict)"),
    ("strict", (bool, type(None)), "True, False or None"),
    ("policy", (ToolPolicy, type(None)), "a ToolPolicy or None"),
)
"""The attributes of a tool a registry checks: name, the kinds it takes, what to say."""


def _strings(given: object, name: str, what: str) -> tuple[str, ...]:
    if not isinstance(given, Iterable) or isinstance(given, Mapping):
        raise ToolConfigError(
            f"cannot register tool '{name}': its {what} must be strings, got "
            f"{type(given).__name__}",
            tool_name=name,
        )
    values = tuple(given)
    wrong = next((value for value in values if not isinstance(value, str)), None)
    if wrong is not None:
        raise ToolConfigError(
            f"cannot register tool '{name}': its {what} must be strings, got a "
            f"{type(wrong).__name__}",
            tool_name=name,
        )
    return values


def _awaits(method: Callable[..., Any]) -> bool:
    # A wrapper (functools.wraps) of an async function counts, as does an object whose
    # __call__ is async.
    if inspect.iscoroutinefunction(method) or inspect.iscoroutinefunction(inspect.unwrap(method)):
        return True
    return not inspect.isroutine(method) and inspect.iscoroutinefunction(type(method).__call__)


@dataclass(slots=True)
class ToolInvocation:
    """The record of one tool call: what went in, what came out, how long it took.

    Example:
        >>> inv = ToolInvocation("add", {"a": 1, "b": 2}, output=3)
        >>> inv.ok, inv.result()
        (True, 3)
    """

    tool_name: str
    """The name the call asked for."""
    input: Any
    """The arguments as given."""
    output: Any = None
    """The JSON-compatible result, or None when the call failed."""
    error: ToolError | None = None
    """What went wrong, or None when the call succeeded."""
    call_id: str | None = None
    """The model's tool call id, when there is one."""
    duration: float = 0.0
    """Seconds spent executing (0.0 when the tool never ran)."""
    may_have_run: bool | None = None
    """Whether the call may have taken effect: True when it ran (it succeeded, or failed
    once started: the tool raised or timed out, an MCP ``tools/call`` failed after its
    request was sent, connection lost or not), False when it provably did not run (an
    unknown tool, a refused permission, bad arguments, a declined approval, an MCP
    request never sent), None when the error does not say (see
    :attr:`ToolError.may_have_run`). A failed call with True is not safe to assume
    undone: check before calling it again.

    Example:
        >>> lost = ToolError("connection lost")
        >>> ToolInvocation("pay", {"to": "bob"}, error=lost, may_have_run=True).may_have_run
        True
    """

    cached: bool = False
    """True when the result came from the tool's :class:`~agcore_tools.ResultCache`
    instead of running it (then :attr:`may_have_run` is False, and the tool's
    :class:`ToolStats` do not count the call).

    Example:
        >>> ToolInvocation("lookup", {"id": 1}, output="shipped", cached=True).cached
        True
    """

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None

    def result(self) -> Any:
        """Return the output, or raise the error.

        Example:
            >>> ToolInvocation("x", {}, error=ToolError("bad")).result()
            Traceback (most recent call last):
            ...
            agcore_tools.error.ToolError: bad
        """
        if self.error is not None:
            raise self.error
        return self.output

    def _repr_markdown_(self) -> str:
        """A notebook view: tool, input, output or error, duration."""
        mark = "ok" if self.ok else "failed"
        return f"**ToolInvocation** ({mark})\n\n{markdown_table(('', ''), invocation_rows(self))}"

    def _repr_html_(self) -> str:
        """The same view as :meth:`_repr_markdown_`, in HTML."""
        mark = "ok" if self.ok else "failed"
        return html_table(("", ""), invocation_rows(self), f"ToolInvocation ({mark})")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text view: the ``repr`` with each field cut at 1,000
        characters, so a large output does not land in the notebook file whole."""
        printer.text(bounded_repr(self))


class ToolCall(NamedTuple):
    """One call for :meth:`ToolRegistry.invoke_all`: a name, its arguments and an id.

    Plain ``(name, args)`` tuples work too.

    Example:
        >>> ToolCall("add", {"a": 1, "b": 2}, call_id="call_0").call_id
        'call_0'
    """

    name: str
    """The tool's name."""
    args: Any
    """The arguments object (a mapping)."""
    call_id: str | None = None
    """The model's tool call id, if any."""


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call of a model, with its arguments parsed (or the reason they are bad).

    Example:
        >>> ParsedCall("call_1", "add", '{"a": 1}', {"a": 1}).input
        {'a': 1}
    """

    call_id: str
    """The model's tool call id."""
    name: str
    """The tool the model asked for."""
    arguments: str
    """The arguments as JSON text, as the history records them."""
    args: dict[str, Any] | None
    """The parsed arguments object, or None when they did not parse into one (then
    ``error`` says why)."""
    error: ToolError | None = None
    """Why the call cannot run (unusable arguments, an unknown tool the loop tells the
    model about, a call the user declined), or None. A call with an error never runs,
    even when its ``args`` parsed."""

    @property
    def input(self) -> Any:
        """The parsed arguments, or the raw text when they could not be parsed."""
        return self.args if self.args is not None else self.arguments
