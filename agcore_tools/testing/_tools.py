"""Small tools for tests and examples."""

from __future__ import annotations

from typing import Any

from ..base import BaseTool, ToolContext

__all__ = ["StaticTool"]


class StaticTool(BaseTool):
    """A tool that takes no arguments and returns the same value every time.

    For tests and examples that need a registered tool and nothing more.

    Example:
        >>> import asyncio
        >>> from agcore_tools import ToolRegistry
        >>> registry = ToolRegistry()
        >>> _ = registry.register(StaticTool("example"))
        >>> asyncio.run(registry.invoke("example", {})).output
        'ok'
        >>> from agcore_tools import ToolContext
        >>> asyncio.run(StaticTool("answer", 42).execute({}, ToolContext()))
        42
    """

    def __init__(self, name: str, result: Any = "ok", description: str = "Return 'ok'.") -> None:
        self.name = name
        self.description = description
        self.result = result
        """What every call returns."""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Return :attr:`result`."""
        return self.result
