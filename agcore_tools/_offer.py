"""Which registered tools ``definitions()`` offers, in which shape, and a log line for
those it hides.

A tool the permission checker refuses is left out of the definitions (offering it only
wastes tokens, and calling it stops the loop). That must never be silent: the first
time a registry leaves out a given set of tools, it logs one warning naming each tool
and the rule that refuses it.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Literal

from ._records import ToolEntry
from .base import tool_definition
from .error import PermissionDeniedError
from .permission import PermissionChecker
from .schema import SchemaContext, SchemaTransform, apply_transforms, strict_parameters

__all__ = ["copied_definitions", "offered_definition", "offered_entries", "offered_parameters"]

logger = logging.getLogger("agcore_tools.registry")

_ATOMS = frozenset({str, int, float, bool, type(None)})
"""Values a copy shares: nothing can change them."""


def offered_entries(
    entries: Iterable[ToolEntry],
    checker: PermissionChecker | None,
    logged: set[frozenset[str]],
    unchecked: Collection[str] = (),
) -> list[ToolEntry]:
    """The entries ``checker`` allows, in order; logs the others once per set in ``logged``.
    The entries named in ``unchecked`` (the library's own tools in a run's view, see
    :attr:`~agcore_tools._table.ToolTable.unchecked`) are not asked about.

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
        if entry.name in unchecked:
            offered.append(entry)
            continue
        try:
            checker.check(entry.name, entry.declared_permissions())
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


def offered_parameters(
    entry: ToolEntry, transforms: Sequence[SchemaTransform], api: Literal["chat", "responses"]
) -> tuple[dict[str, Any], bool]:
    """The parameters schema the model reads for ``entry``, and whether it is strict.

    With no transforms, the tool's own schema (or the entry's cached strict form).
    Otherwise the pipeline's output, then the strict transform when the entry asks for
    it; a schema strict mode cannot describe is offered non-strict, with a logged reason.
    """
    if not transforms:
        strict = entry.strict_parameters()
        return (entry.tool.parameters, False) if strict is None else (strict, True)
    ctx = SchemaContext(entry.name, api, entry.strict)
    schema = apply_transforms(entry.tool.parameters, transforms, ctx)
    if not entry.strict:
        return schema, False
    strict_schema, why = strict_parameters(schema)
    if strict_schema is None:
        logger.warning("tool %r is offered without strict mode: %s", entry.name, why)
        return schema, False
    return strict_schema, True


def offered_definition(
    entry: ToolEntry, transforms: Sequence[SchemaTransform], api: Literal["chat", "responses"]
) -> dict[str, Any]:
    """The tool param ``definitions()`` offers for ``entry``, in ``api``'s shape.

    Example:
        >>> from agcore_tools.testing import StaticTool
        >>> offered_definition(ToolEntry(StaticTool("ping")), (), "responses")["name"]
        'ping'
    """
    parameters, strict = offered_parameters(entry, transforms, api)
    tool = entry.tool
    return tool_definition(tool.name, tool.description, parameters, api=api, strict=strict)


def copied_definitions(definitions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of each definition: its dicts and lists made anew (each definition's
    own, even where two shared a schema), strings and numbers shared, and anything else
    deep-copied. An edit of a copy changes no definition it was made from.

    Twice as fast as ``copy.deepcopy`` on 10,000 definitions, whose memo (an entry and
    a kept reference per container) it does without.

    Example:
        >>> schema = {"type": "object", "properties": {"q": {"type": "string"}}}
        >>> kept = [{"type": "function", "function": {"name": n, "parameters": schema}}
        ...         for n in ("a", "b")]
        >>> a, b = copied_definitions(kept)
        >>> a == kept[0], a["function"]["parameters"] is b["function"]["parameters"]
        (True, False)
    """
    return [_copy(definition) for definition in definitions]


def _copy(value: Any) -> Any:
    kind = type(value)  # exact types: a dict subclass may copy itself its own way
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    return value if kind in _ATOMS else copy.deepcopy(value)
