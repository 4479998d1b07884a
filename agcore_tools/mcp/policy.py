"""Which permissions an MCP tool requires, decided from its annotations.

MCP tools describe themselves with hints (``readOnlyHint``, ``destructiveHint``,
``openWorldHint``). :class:`McpPermissionPolicy` turns them into the
:class:`~agcore_tools.Permission` values a :class:`~agcore_tools.PermissionChecker`
checks before each call. When a hint is absent, the MCP specification's default
applies: not read-only, destructive, open-world; so a tool that says nothing about
itself is treated as the riskiest kind.

========================================  ==========================
Hints                                     Required permissions
========================================  ==========================
``readOnlyHint: true``                    ``read``
``readOnlyHint`` false or absent          ``write``
... and ``destructiveHint`` true/absent   ... plus ``delete``
``openWorldHint`` true or absent          plus ``network``
========================================  ==========================

Per server, the same hints can also decide which calls wait for the app's approval
(see :mod:`agcore_tools.approval`): ``McpPermissionPolicy(needs_approval="destructive")``
asks before every call to a tool that may destroy data (not read-only, and
``destructiveHint`` true or absent).

Annotations are hints from the server, not guarantees: a server can claim a tool is
read-only when it is not. For a server you don't trust, use
``McpPermissionPolicy(trust_annotations=False)``, which ignores the hints and requires
``write``, ``delete`` and ``network`` for every tool. Any callable from
:class:`McpToolInfo` to permissions can replace the policy, per client.

Example:
    >>> policy = McpPermissionPolicy()
    >>> policy(McpToolInfo("read_file", annotations={"readOnlyHint": True, "openWorldHint": False}))
    (Permission.READ,)
    >>> policy(McpToolInfo("anything"))
    (Permission.WRITE, Permission.DELETE, Permission.NETWORK)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias, cast

from .._keywords import checks_init_keywords
from .._progress import is_async_callable
from ..error import ToolConfigError
from ..permission import Permission, PermissionChecker, PermissionConfig, PermissionLike
from .models import McpToolInfo

__all__ = ["McpPermissionPolicy", "PermissionPolicy", "check_permission_policy"]

PermissionPolicy: TypeAlias = Callable[[McpToolInfo], Iterable[PermissionLike]]
"""Any function from an MCP tool to the permissions it requires."""


@checks_init_keywords
@dataclass(frozen=True, slots=True)
class McpPermissionPolicy:
    """The default policy: the table in this module's docstring, plus ``extra``.

    Example:
        >>> fs_only = McpPermissionPolicy(extra=[Permission.custom("mcp:fs")])
        >>> fs_only(McpToolInfo("list", annotations={"readOnlyHint": True}))
        (Permission.READ, Permission.NETWORK, Permission.custom('mcp:fs'))
        >>> McpPermissionPolicy(trust_annotations=False)(
        ...     McpToolInfo("list", annotations={"readOnlyHint": True}))
        (Permission.WRITE, Permission.DELETE, Permission.NETWORK)
    """

    trust_annotations: bool = True
    """Whether hints may lower the requirements; False applies the worst case to every tool."""
    extra: Iterable[PermissionLike] = ()
    """Permissions every tool of the client also requires, such as a custom
    ``Permission.custom("mcp:github")`` that a checker can allow or deny per server."""
    needs_approval: bool | Literal["destructive"] | Callable[[McpToolInfo], bool] = False
    """Which of the server's tools wait for the app's approval on every call: none
    (False), all (True), the destructive ones (``"destructive"``, by the table's
    reading of the hints), or those a plain (not async) function of the
    :class:`McpToolInfo` picks. Anything else is refused with
    :class:`~agcore_tools.ToolConfigError`."""

    def __post_init__(self) -> None:
        rule = self.needs_approval
        if not (isinstance(rule, bool) or rule == "destructive" or callable(rule)):
            # A typo such as "Destructive" failed later, at every tool, with a bare TypeError.
            raise ToolConfigError(
                "McpPermissionPolicy.needs_approval must be True, False, 'destructive' "
                f"or a function of McpToolInfo, got {type(rule).__name__} {rule!r:.40}"
            )
        if is_async_callable(rule):
            # Its coroutine, never awaited, is true: every tool asked for approval.
            name = getattr(rule, "__name__", type(rule).__name__)
            raise ToolConfigError(
                f"McpPermissionPolicy.needs_approval takes a plain function, not the async "
                f"function {name}: it is called without awaiting, as into_tools() makes the tools; "
                "decide from the McpToolInfo (its name and annotations) in a plain function"
            )
        if not isinstance(self.trust_annotations, bool):  # "false" would be truthy
            raise ToolConfigError(
                "McpPermissionPolicy.trust_annotations must be True or False, got "
                f"{type(self.trust_annotations).__name__} {self.trust_annotations!r:.40}"
            )
        object.__setattr__(self, "extra", Permission.parse_all(self.extra))

    def asks(self, tool: McpToolInfo) -> bool:
        """Whether calls to ``tool`` wait for the app's approval (:attr:`needs_approval`).

        Example:
            >>> policy = McpPermissionPolicy(needs_approval="destructive")
            >>> policy.asks(McpToolInfo("drop_table")), policy.asks(
            ...     McpToolInfo("query", annotations={"readOnlyHint": True}))
            (True, False)
        """
        return self.approval_reason(tool) is not None

    def approval_reason(self, tool: McpToolInfo) -> str | None:
        """Why calls to ``tool`` wait for the app's approval (the rule of
        :attr:`needs_approval` that asks), or None when they do not.

        Example:
            >>> McpPermissionPolicy(needs_approval="destructive").approval_reason(
            ...     McpToolInfo("drop_table"))
            "McpPermissionPolicy(needs_approval='destructive'): its annotations do not say it is read-only or not destructive"
        """
        rule = self.needs_approval
        if rule == "destructive":
            if Permission.DELETE not in self(tool):
                return None
            why = (
                "annotations are not trusted"
                if not self.trust_annotations
                else "its annotations do not say it is read-only or not destructive"
            )
            return f"McpPermissionPolicy(needs_approval='destructive'): {why}"
        if isinstance(rule, bool):
            return "McpPermissionPolicy(needs_approval=True)" if rule else None
        if not rule(tool):
            return None
        name = getattr(rule, "__qualname__", type(rule).__qualname__)
        return f"McpPermissionPolicy(needs_approval={name}) picked it"

    def __call__(self, tool: McpToolInfo) -> tuple[Permission, ...]:
        """The permissions ``tool`` requires."""
        trusted = self.trust_annotations
        read_only = trusted and tool.hint("readOnlyHint") is True
        destructive = not trusted or tool.hint("destructiveHint") is not False
        open_world = not trusted or tool.hint("openWorldHint") is not False
        required: list[Permission] = []
        if read_only:
            required.append(Permission.READ)
        else:
            required.append(Permission.WRITE)
            if destructive:
                required.append(Permission.DELETE)
        if open_world:
            required.append(Permission.NETWORK)
        return Permission.parse_all([*required, *self.extra])


def check_permission_policy(server_name: str, policy: object) -> PermissionPolicy:
    """``McpClient(permission_policy=...)``, once it is a plain function (anything
    callable, not async) or None, which is the default :class:`McpPermissionPolicy`.
    Anything else was taken, and failed at ``into_tools()``, after the server had been
    started, with a bare ``TypeError``.

    Example:
        >>> check_permission_policy("demo", None)
        McpPermissionPolicy(trust_annotations=True, extra=(), needs_approval=False)
        >>> check_permission_policy("demo", PermissionConfig(allowed=["read"]))
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: MCP server 'demo': permission_policy must be a function of McpToolInfo returning the permissions its tool requires (such as McpPermissionPolicy(...)), got a PermissionConfig: a PermissionConfig says what is allowed, and goes to ToolRegistry(PermissionChecker(config))
    """
    if policy is None:
        return McpPermissionPolicy()
    if isinstance(policy, (PermissionConfig, PermissionChecker)):
        # Both are about permissions, and read as if they went here.
        kind = type(policy).__name__
        goes = "ToolRegistry(PermissionChecker(config))"
        if isinstance(policy, PermissionChecker):
            goes = "ToolRegistry(checker)"
        raise ToolConfigError(
            f"MCP server '{server_name}': permission_policy must be a function of "
            "McpToolInfo returning the permissions its tool requires (such as "
            f"McpPermissionPolicy(...)), got a {kind}: a {kind} says what is allowed, "
            f"and goes to {goes}"
        )
    if not callable(policy):
        raise ToolConfigError(
            f"MCP server '{server_name}': permission_policy must be a function of "
            "McpToolInfo returning the permissions its tool requires (such as "
            f"McpPermissionPolicy(...)), or None; got {type(policy).__name__} {policy!r:.40}"
        )
    if is_async_callable(policy):
        # Its coroutine, never awaited, is no list of permissions.
        name = getattr(policy, "__name__", type(policy).__name__)
        raise ToolConfigError(
            f"MCP server '{server_name}': permission_policy takes a plain function, not the "
            f"async function {name}: it is called without awaiting, as into_tools() makes "
            "the tools; decide from the McpToolInfo (its name and annotations) in a plain function"
        )
    return cast(PermissionPolicy, policy)
