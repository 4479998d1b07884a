"""What ``calls/`` needs of the tools it runs calls on: the small protocol a
:class:`~agcore_tools.ToolRegistry` satisfies.

``calls/`` sits below the registry, so it names this protocol instead of the class.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from typing import Any, Protocol

from .._records import ToolCall, ToolEntry, ToolInvocation
from ..base import ToolContext
from ..permission import PermissionChecker

__all__ = ["ToolHost"]


class ToolHost(Protocol):
    """Tools by name, with a permission checker, that run calls concurrently.

    Example:
        >>> from agcore_tools import ToolRegistry
        >>> host: ToolHost = ToolRegistry()  # a registry is one
        >>> host.list_tools(), host.permission_checker
        ([], None)
    """

    @property
    def permission_checker(self) -> PermissionChecker | None:
        """The checker consulted before each execution, or None (no checks)."""
        ...

    def entry(self, name: str) -> ToolEntry | None:
        """The entry of the tool of that name, or None."""
        ...

    def list_tools(self) -> list[str]:
        """Every tool's name, in registration order."""
        ...

    def invoke_as_completed(
        self,
        calls: Iterable[ToolCall | tuple[Any, ...]],
        *,
        ctx: ToolContext | None = None,
        timeout: float | None = 60.0,
    ) -> AsyncGenerator[tuple[int, ToolInvocation], None]:
        """Run ``calls`` concurrently; yield ``(position, invocation)`` as each ends."""
        ...
