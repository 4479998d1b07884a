"""Prompts (list and get) and argument completion, for prompts and resource templates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..error import McpUsageError
from ._requests import all_pages, require_capability
from ._session import Session
from .models import McpCompletion, McpPrompt, McpPromptInfo

__all__ = ["complete", "get_prompt", "list_prompts"]


async def list_prompts(session: Session) -> list[McpPromptInfo]:
    """Every prompt the server lists, all pages followed."""
    what = "prompts/list"
    await require_capability(session, what, "prompts")
    prompts = await all_pages(
        session,
        what,
        lambda client, cursor, meta: client.list_prompts(cursor=cursor, meta=meta),
        lambda page: page.prompts,
    )
    return [
        McpPromptInfo(
            name=p.name,
            title=p.title,
            description=p.description or "",
            arguments=tuple(
                a.model_dump(by_alias=True, mode="json", exclude_none=True)
                for a in p.arguments or ()
            ),
        )
        for p in prompts
    ]


async def get_prompt(session: Session, name: str, arguments: Mapping[str, Any] | None) -> McpPrompt:
    """The prompt ``name`` filled in with ``arguments`` (strings, as the protocol wants)."""
    if not isinstance(name, str) or not name:
        raise McpUsageError(
            f"MCP server '{session.server_name}': a prompt name must be a non-empty string, "
            f"got {name!r}"
        )
    values = _strings(session, f"prompt '{name}'", arguments)
    what = f"prompts/get '{name}'"
    await require_capability(session, what, "prompts")
    # Sent even when empty: TypeScript SDK servers refuse a prompt whose arguments are
    # all optional when "arguments" is absent ("expected object, received undefined").
    result = await session.send(
        what, lambda client, meta: client.get_prompt(name, values, meta=meta)
    )
    return McpPrompt(
        name=name,
        description=result.description or "",
        messages=tuple(
            m.model_dump(by_alias=True, mode="json", exclude_none=True) for m in result.messages
        ),
    )


async def complete(
    session: Session,
    argument: str,
    value: str,
    prompt: str | None,
    resource_template: str | None,
    context: Mapping[str, Any] | None,
) -> McpCompletion:
    """Suggestions for ``argument`` of a prompt or a resource template, given ``value``."""
    import mcp_types as types

    if (prompt is None) == (resource_template is None):
        raise McpUsageError(
            f"MCP server '{session.server_name}': complete() needs exactly one of prompt= "
            "and resource_template="
        )
    if not isinstance(argument, str) or not argument or not isinstance(value, str):
        raise McpUsageError(
            f"MCP server '{session.server_name}': complete() needs an argument name and a "
            f"string value, got {argument!r} and {value!r}"
        )
    ref: types.PromptReference | types.ResourceTemplateReference
    if prompt is not None:
        ref = types.PromptReference(type="ref/prompt", name=prompt)
    else:
        ref = types.ResourceTemplateReference(type="ref/resource", uri=str(resource_template))
    context_values = _strings(session, "completion context", context)
    what = f"completion/complete '{argument}'"
    await require_capability(session, what, "completions")
    result = await session.send(
        what,
        lambda client, _meta: client.complete(
            ref, {"name": argument, "value": value}, context_values or None
        ),
    )
    completion = result.completion
    return McpCompletion(tuple(completion.values), completion.total, completion.has_more)


def _strings(session: Session, what: str, values: Mapping[str, Any] | None) -> dict[str, str]:
    # The protocol carries prompt arguments and completion context as strings only.
    if values is None:
        return {}
    if not isinstance(values, Mapping) or not all(isinstance(k, str) for k in values):
        raise McpUsageError(
            f"MCP server '{session.server_name}': {what} arguments must map names to strings"
        )
    bad = [k for k, v in values.items() if not isinstance(v, str)]
    if bad:
        raise McpUsageError(
            f"MCP server '{session.server_name}': {what} arguments must be strings; "
            f"{', '.join(repr(k) for k in bad)} {'is' if len(bad) == 1 else 'are'} not"
        )
    return dict(values)
