"""Which registered tools ``definitions()`` offers, in which shape, and a log line for
those it hides.

A tool the permission checker refuses is left out of the definitions (offering it only
wastes tokens, and calling it stops the loop). That must never be silent: the first
time a registry leaves out a given set of tools, it logs one warning naming each tool
and the rule that refuses it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .base import BaseTool
from .error import PermissionDeniedError
from .permission import PermissionChecker

if TYPE_CHECKING:
    from .registry import ToolEntry

__all__ = ["chat_definition", "offered_entries", "responses_definition"]

logger = logging.getLogger("agcore_tools.registry")


def offered_entries(
    entries: Iterable[ToolEntry],
    checker: PermissionChecker | None,
    logged: set[frozenset[str]],
) -> list[ToolEntry]:
    """The entries ``checker`` allows, in order; logs the others once per set in ``logged``.

    Example:
        >>> from agcore_tools import PermissionConfig, ToolRegistry
        >>> registry = ToolRegistry()
        >>> @registry.tool(permissions=["shell"])
        ... def run(command: str) -> str:
        ...     '''Run a shell command.'''
        ...     return command
        >>> offered_entries(registry.entries(), PermissionChecker(PermissionConfig()), set())
        []
    """
    entries = list(entries)
    if checker is None:
        return entries
    offered: list[ToolEntry] = []
    refused: list[str] = []
    for entry in entries:
        try:
            checker.check(entry.name, entry.permissions)
        except PermissionDeniedError as exc:
            # The error's own wording names the tool, the permission and the rule.
            refused.append(exc.message.removeprefix("permission denied: "))
        else:
            offered.append(entry)
    hidden = frozenset(e.name for e in entries) - {e.name for e in offered}
    if hidden and hidden not in logged:
        logged.add(hidden)
        logger.warning(
            "definitions() leaves out %d of %d tool(s), which the permission checker refuses: %s",
            len(hidden),
            len(entries),
            "; ".join(refused),
        )
    return offered


def chat_definition(tool: BaseTool, parameters: dict[str, Any], strict: bool) -> dict[str, Any]:
    """The Chat Completions tool param for ``tool``, with the parameters to offer."""
    definition = BaseTool.definition(tool)
    definition["function"]["parameters"] = parameters
    if strict:
        definition["function"]["strict"] = True
    return definition


def responses_definition(
    tool: BaseTool, parameters: dict[str, Any], strict: bool
) -> dict[str, Any]:
    """The flat Responses API function tool for ``tool``, with the parameters to offer."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
        "strict": strict,
    }
